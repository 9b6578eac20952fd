//! What a run answers through a sandbox process: the same as in-process.

use serde_json::json;

use super::{processes, sandboxed, sandboxed_in};
use crate::helpers::lang::{LANGS, pick, two_plus_two};
use crate::helpers::{REGISTER, RUN, Server, TIMEOUT};

/// One-shot runs in both languages answer their result and output through
/// the socket, and the runtime is gone from its process afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn one_shot_runs_answer_through_a_sandbox_process() {
    let server = sandboxed("").await;
    for lang in LANGS {
        let print = pick(lang, "print('hi')", "console.log('hi')");
        let code = format!("{print}\n{}", two_plus_two(lang));
        let body = server.run_in(lang, &code).await.ok().clone();
        assert_eq!(body["result"], json!(4), "{lang}: {body}");
        assert_eq!(body["stdout"], json!("hi\n"), "{lang}: {body}");
        assert_eq!(body["exit_code"], json!(0));
        let failing = pick(lang, "raise ValueError('no')", "throw new Error('no')");
        let body = server.run_in(lang, failing).await.ok().clone();
        assert_eq!(body["exit_code"], json!(1), "{lang}: {body}");
        assert!(body["stderr"].as_str().unwrap().contains("no"), "{body}");
    }
    let loads: u64 = processes(&server).await.iter().map(|(_, n)| n).sum();
    assert_eq!(loads, 0, "one-shot runtimes are closed in their process");
}

/// A kept runtime keeps its state across turns in its process, in both languages.
#[tokio::test(flavor = "multi_thread")]
async fn kept_runtimes_keep_state_in_their_process() {
    let server = sandboxed("").await;
    for lang in LANGS {
        let first = pick(lang, "x = 41", "globalThis.x = 41");
        let body = server
            .run_in_with(lang, first, json!({"keep": true}))
            .await
            .ok()
            .clone();
        let id = body["runtime_id"]
            .as_str()
            .expect("a runtime id")
            .to_string();
        let second = pick(lang, "result = x + 1", "return x + 1");
        let body = server.run_on(&id, second).await.ok().clone();
        assert_eq!(body["result"], json!(42), "{lang}: {body}");
    }
}

/// Output past the stream cap is truncated exactly as in-process: the
/// head, the marker and the tail survive the process boundary.
#[tokio::test(flavor = "multi_thread")]
async fn truncated_streams_match_in_process() {
    let sandboxed = sandboxed("").await;
    let local = Server::with_config("isolation: in-process\nwarm_pool: 0\n").await;
    for lang in LANGS {
        let code = pick(
            lang,
            "for i in range(20000): print(f'line {i:05} é')",
            "for (let i = 0; i < 20000; i++) console.log(`line ${String(i).padStart(5, '0')} é`)",
        );
        let a = sandboxed.run_in(lang, code).await.ok().clone();
        let b = local.run_in(lang, code).await.ok().clone();
        assert_eq!(a["stdout"], b["stdout"], "{lang}");
        assert!(a["stdout"].as_str().unwrap().contains("stdout truncated"));
    }
}

/// A timeout is enforced inside the sandbox process and answers as in-process.
#[tokio::test(flavor = "multi_thread")]
async fn timeouts_hold_inside_the_sandbox_process() {
    let server = sandboxed("").await;
    for lang in LANGS {
        let code = pick(lang, "while True: pass", "while (true) {}");
        server
            .run_in_with(lang, code, json!({"timeout_ms": 300}))
            .await
            .assert_error(TIMEOUT, "300 ms");
        let body = server.run_in(lang, two_plus_two(lang)).await.ok().clone();
        assert_eq!(body["result"], json!(4));
    }
}

/// `iii.trigger` crosses back to the worker: a guest's nested run is
/// started by the worker (another sandboxed runtime) and answered inside.
#[tokio::test(flavor = "multi_thread")]
async fn trigger_calls_come_back_to_the_worker() {
    let server = sandboxed("").await;
    let python = "r = iii.trigger({'function_id': 'code-runner::run', 'payload': {'lang': 'node', 'code': 'return 6 * 7'}})\nresult = [r['result'], iii.namespace.startswith('rt-')]";
    let node = "const r = await iii.trigger({function_id: 'code-runner::run', payload: {lang: 'python', code: 'result = 6 * 7'}});\nreturn [r.result, iii.namespace.startsWith('rt-')]";
    for lang in LANGS {
        let body = server
            .run_in(lang, pick(lang, python, node))
            .await
            .ok()
            .clone();
        assert_eq!(body["result"], json!([42, true]), "{lang}: {body}");
    }
    let refused = "try { await iii.trigger({function_id: 'configuration::set', payload: {id: 'code-runner', value: {}}}); return 'called' } catch (e) { return 'refused' }";
    let body = server.run_in("node", refused).await.ok().clone();
    assert_eq!(
        body["result"],
        json!("refused"),
        "the bridge rules hold: {body}"
    );
}

/// `register_function` defines a handler in a sandboxed namespace runtime
/// and each call is a turn there; node's `iii.registerFunction` too.
#[tokio::test(flavor = "multi_thread")]
async fn registered_functions_run_in_sandbox_processes() {
    let server = sandboxed("").await;
    let sources = [
        ("python", "def handler(p):\n    return {'hi': p['name']}"),
        ("node", "export function handler(p) { return {hi: p.name} }"),
    ];
    for (lang, source) in sources {
        let id = format!("iso-{lang}::greet");
        server
            .call(
                REGISTER,
                json!({"function_id": id, "lang": lang, "source": source}),
            )
            .await
            .ok();
        let body = server.call(&id, json!({"name": "ada"})).await.ok().clone();
        assert_eq!(body, json!({"hi": "ada"}), "{lang}");
    }
    let code = "const id = `${iii.namespace}::twice`;\nawait iii.registerFunction(id, (p) => p.n * 2);\nreturn id";
    let body = server
        .call(RUN, json!({"lang": "node", "code": code, "keep": true}))
        .await
        .ok()
        .clone();
    let id = body["result"].as_str().expect("the id").to_string();
    let body = server.call(&id, json!({"n": 21})).await.ok().clone();
    assert_eq!(body, json!(42));
}

/// Python one-shots in one sandbox process never see what an earlier one
/// wrote, now that its slots reset with write tracking there too (the page
/// map and userfaultfd opened before confinement): each run finds `sys`
/// as the snapshot left it, then marks it, writes megabytes, and one run in
/// five grows memory past the image. Where this process can track writes,
/// the sandbox process must report that it does.
#[tokio::test(flavor = "multi_thread")]
async fn python_one_shots_in_a_sandbox_process_never_see_an_earlier_ones_writes() {
    let server = sandboxed_in(1, "").await;
    let here = code_runner_python::open_page_tracking();
    let tracking = super::isolation(&server).await["confinement"]["applied"]["page_tracking"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if here
        .as_deref()
        .is_ok_and(|w| w.contains("userfaultfd open"))
    {
        assert!(tracking.contains("userfaultfd open"), "{tracking:?}");
    } else {
        tracing::warn!(
            "no write tracking here ({here:?}): the resets checked are the untracked ones"
        );
    }
    for run in 0..40 {
        let mib = if run % 5 == 4 { 48 } else { 3 };
        let code = format!(
            "import sys\nseen = getattr(sys, 'left_by', None)\nsys.left_by = {run}\n\
             blob = bytearray(b'\\xa5') * ({mib} << 20)\nresult = seen"
        );
        let body = server.run_in("python", &code).await.ok().clone();
        assert_eq!(body["exit_code"], json!(0), "run {run}: {body}");
        assert_eq!(
            body["result"],
            json!(null),
            "run {run} saw an earlier run's mark: {body}"
        );
    }
}
