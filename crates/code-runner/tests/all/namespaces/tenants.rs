//! Tenants on one worker (issue 16, items 6–8), through real HTTP, real V8
//! and real wasmtime: a namespace belongs to whoever created it, a kept
//! runtime's namespace goes only with its id, and what a runtime publishes
//! about its functions is bounded.

use serde_json::{Value, json};

use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{INVALID_REQUEST, REGISTER, RUN, Server, TEARDOWN};

/// A guest run's budget: room for a loaded machine.
const LONG_MS: u64 = 60_000;

/// A run of `code` on the kept runtime `id`, with [`LONG_MS`].
async fn long_on(server: &Server, id: &str, code: &str) -> crate::helpers::Answer {
    server
        .call(
            RUN,
            json!({"runtime_id": id, "code": code, "timeout_ms": LONG_MS}),
        )
        .await
}

/// `lang` guest code that tries each `(function_id, payload)` of `calls`
/// through `iii.trigger` and returns, per call, `"ok"` or `[code, message]`.
fn attempts(lang: &str, calls: &Value) -> String {
    pick(
        lang,
        format!(
            "import json\nout = []\nfor fid, payload in json.loads({calls:?}):\n    try:\n        iii.trigger({{'function_id': fid, 'payload': payload}})\n        out.append('ok')\n    except IIIError as e:\n        out.append([e.code, e.message])\nresult = out",
            calls = calls.to_string()
        ),
        format!(
            "const out = [];\nfor (const [fid, payload] of {calls}) {{\n  try {{ await iii.trigger({{ function_id: fid, payload }}); out.push('ok'); }}\n  catch (e) {{ out.push([e.code, e.message]); }}\n}}\nreturn out;"
        ),
    )
}

/// A python handler source answering `word`.
fn answering(word: &str) -> String {
    format!("def handler(p):\n    return {word:?}\n")
}

fn register_call(id: &str, word: &str) -> Value {
    json!([REGISTER, {"function_id": id, "lang": "python", "source": answering(word)}])
}

#[track_caller]
fn assert_refused(outcome: &Value, part: &str) {
    assert_eq!(outcome[0], INVALID_REQUEST, "{outcome}");
    let message = outcome[1].as_str().unwrap_or("");
    assert!(message.contains(part), "{part:?} not in {message:?}");
}

/// Item 6: a run's guest code registers `victim::greet`; another run's
/// guest code can neither replace that handler (before, callers of
/// `victim::greet` then ran the attacker's code), add a function of its own
/// to the namespace (which would read the namespace runtime's globals), nor
/// tear it down. The run that created it may, in a later turn of its kept
/// runtime; so may a host call (the operator).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_take_over_another_runs_namespace() {
    for lang in LANGS {
        let server = Server::start().await;
        let victim = server.keep_in(lang, pick(lang, "pass", "")).await;
        let create = attempts(lang, &json!([register_call("victim::greet", "victim")]));
        assert_eq!(
            long_on(&server, &victim, &create).await.ok()["result"],
            json!(["ok"])
        );
        assert_eq!(server.call("victim::greet", json!({})).await.ok(), "victim");

        let attack = attempts(
            lang,
            &json!([
                register_call("victim::greet", "attacker"),
                register_call("victim::spy", "spy"),
                [TEARDOWN, {"namespace": "victim"}],
            ]),
        );
        let body = server
            .run_in_with(lang, &attack, json!({"timeout_ms": LONG_MS}))
            .await;
        let outcomes = body.ok()["result"].as_array().unwrap().clone();
        assert_eq!(outcomes.len(), 3, "{lang}: {}", body.body);
        assert_refused(&outcomes[0], "may not register into namespace victim::");
        assert_refused(&outcomes[0], "belongs to the run whose code created it");
        assert_refused(&outcomes[1], "may not register into namespace victim::");
        assert_refused(&outcomes[2], "may not tear down namespace victim::");
        assert_eq!(server.call("victim::greet", json!({})).await.ok(), "victim");
        crate::helpers::Answer::assert_error(
            &server.call("victim::spy", json!({})).await,
            "function_not_found",
            "victim::spy",
        );

        let redeploy = attempts(lang, &json!([register_call("victim::greet", "victim 2")]));
        assert_eq!(
            long_on(&server, &victim, &redeploy).await.ok()["result"],
            json!(["ok"])
        );
        assert_eq!(
            server.call("victim::greet", json!({})).await.ok(),
            "victim 2"
        );
        server
            .registered("python", "victim::greet", &answering("operator"))
            .await;
        assert_eq!(
            server.call("victim::greet", json!({})).await.ok(),
            "operator"
        );
    }
}

/// Item 6, the operator's side: a namespace a host call created is closed
/// to guest code unless `guest_writable_namespaces` lists it; the key is
/// checked like every other (a malformed entry is refused by name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_namespace_is_the_operators_until_opened() {
    let server = Server::start().await;
    server
        .registered("python", "ops::status", &answering("green"))
        .await;
    let calls = json!([
        register_call("ops::status", "red"),
        [TEARDOWN, {"namespace": "ops"}],
    ]);
    for lang in LANGS {
        let body = server
            .run_in_with(
                lang,
                &attempts(lang, &calls),
                json!({"timeout_ms": LONG_MS}),
            )
            .await;
        let outcomes = body.ok()["result"].clone();
        assert_refused(&outcomes[0], "a host call created it");
        assert_refused(&outcomes[0], "guest_writable_namespaces");
        assert_refused(&outcomes[1], "may not tear down namespace ops::");
    }
    assert_eq!(server.call("ops::status", json!({})).await.ok(), "green");

    let set = |value: Value| {
        server.call(
            "configuration::set",
            json!({"id": "code-runner", "value": value}),
        )
    };
    set(json!({"guest_writable_namespaces": ["ops::"]}))
        .await
        .assert_error(INVALID_REQUEST, "guest_writable_namespaces");
    for never in ["console:script", "harness::hook::pre-generate", "log"] {
        set(json!({"guest_trigger_types": [never]}))
            .await
            .assert_error(INVALID_REQUEST, "can never be opened to guest code");
    }
    set(json!({"guest_writable_namespaces": ["ops"]}))
        .await
        .ok();
    for lang in LANGS {
        let body = server
            .run_in_with(
                lang,
                &attempts(lang, &calls),
                json!({"timeout_ms": LONG_MS}),
            )
            .await;
        assert_eq!(
            body.ok()["result"],
            json!(["ok", "ok"]),
            "{lang}: {}",
            body.body
        );
        crate::helpers::Answer::assert_error(
            &server.call("ops::status", json!({})).await,
            "function_not_found",
            "ops::status",
        );
    }
}

/// Item 7: a kept node runtime claims `tenant-a::` with
/// `iii.registerFunction`; another run reads the namespace from
/// `engine::functions::info` and asks `teardown {namespace}` (guest code of
/// either language; the kept runtime is node's, python having no
/// registrar). Before, that
/// destroyed the kept runtime; now it is refused (and from a host call too:
/// the runtime's id is the capability), and the runtime keeps serving until
/// it is torn down by its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_runtimes_namespace_goes_only_with_its_id() {
    let server = Server::start().await;
    let code = "globalThis.n = 41; await iii.registerFunction('tenant-a::greet', () => 'a', { description: 'Tenant A.' })";
    let kept = server
        .call(
            RUN,
            json!({"lang": "node", "keep": true, "code": code, "timeout_ms": LONG_MS}),
        )
        .await;
    let id = kept.ok()["runtime_id"]
        .as_str()
        .expect("runtime_id")
        .to_string();

    let attack = r#"
const info = await iii.trigger({ function_id: 'engine::functions::info', payload: { function_ids: ['tenant-a::greet'] } });
const ns = info.functions[0].metadata.namespace;
try {
  await iii.trigger({ function_id: 'code-runner::teardown', payload: { namespace: ns } });
  return ['torn down', ns];
} catch (e) {
  return [e.code, e.message];
}"#;
    let python = r#"
info = iii.trigger({"function_id": "engine::functions::info", "payload": {"function_ids": ["tenant-a::greet"]}})
ns = info["functions"][0]["metadata"]["namespace"]
try:
    iii.trigger({"function_id": "code-runner::teardown", "payload": {"namespace": ns}})
    result = ["torn down", ns]
except IIIError as e:
    result = [e.code, e.message]
"#;
    for (lang, attack) in [("node", attack), ("python", python)] {
        let body = server
            .call(
                RUN,
                json!({"lang": lang, "code": attack, "timeout_ms": LONG_MS}),
            )
            .await;
        assert_refused(
            &body.ok()["result"],
            "tear that runtime down with its runtime_id",
        );
    }
    server
        .call(TEARDOWN, json!({"namespace": "tenant-a"}))
        .await
        .assert_error(INVALID_REQUEST, "runtime_id");

    assert_eq!(server.call("tenant-a::greet", json!({})).await.ok(), "a");
    let turn = server.run_on(&id, "return globalThis.n + 1").await;
    assert_eq!(turn.ok()["result"], 42, "{}", turn.body);
    let torn = server.teardown(&id).await;
    assert_eq!(torn.ok()["unregistered"], json!(["tenant-a::greet"]));
}

/// Item 8: a description is at most 4 KiB, in `register_function` and in
/// `iii.registerFunction` (node's, as the rest of this test: python has no
/// registrar; before, 12 MB descriptions were kept, 40 of them
/// +472 MiB); what one runtime's functions declare (descriptions and
/// formats) is at most 256 KiB together; the listing stays small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptions_and_what_a_runtime_declares_are_bounded() {
    let server = Server::start().await;
    for lang in LANGS {
        let source = pick(
            lang,
            answering("x"),
            "export function handler() { return 'x'; }\n".to_string(),
        );
        let register = json!({"function_id": "big::f", "lang": lang,
            "source": source, "description": "d".repeat(4097)});
        server
            .call(REGISTER, register)
            .await
            .assert_error(INVALID_REQUEST, "description is 4097 bytes; at most 4096");
    }

    let code = r#"
let huge;
try { await iii.registerFunction('big::huge', () => 1, { description: 'd'.repeat(12e6) }); huge = 'ok'; }
catch (e) { huge = [e.code, e.message]; }
const fmt = { type: 'object', description: 'x'.repeat(15000) };
let published = 0, refusal = null;
for (let i = 0; i < 40; i++) {
  try {
    await iii.registerFunction(`big::f${i}`, () => i, { description: 'd'.repeat(4096), request_format: fmt });
    published++;
  } catch (e) { refusal = [e.code, e.message]; break; }
}
return { huge, published, refusal };"#;
    let kept = server
        .call(
            RUN,
            json!({"lang": "node", "keep": true, "code": code, "timeout_ms": LONG_MS}),
        )
        .await;
    let body = kept.ok();
    assert_refused(&body["result"]["huge"], "4 KiB");
    let published = body["result"]["published"].as_u64().unwrap();
    assert!((10..=14).contains(&published), "{body}");
    assert_refused(&body["result"]["refusal"], "256 KiB");

    let listing = server.get("/v1/functions").await;
    let bytes = serde_json::to_vec(listing.ok()).unwrap().len();
    assert!(bytes < 512 * 1024, "the listing holds {bytes} bytes");
    let id = body["runtime_id"].as_str().unwrap();
    assert_eq!(server.teardown(id).await.ok()["torn_down"], true);
}

/// Look-alikes of reserved namespaces are reserved: case, `_` and `-` are
/// folded before comparing (before, `code_runner::x` and `coderunner::x`
/// were published).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn look_alikes_of_reserved_namespaces_are_refused() {
    let server = Server::start().await;
    for id in [
        "code_runner::x",
        "coderunner::x",
        "Code-Runner::x",
        "engine_::x",
        "iii_queue::x",
    ] {
        for lang in LANGS {
            let source = pick(
                lang,
                answering("x"),
                "export function handler() { return 'x'; }\n".to_string(),
            );
            let register = json!({"function_id": id, "lang": lang, "source": source});
            server
                .call(REGISTER, register)
                .await
                .assert_error(INVALID_REQUEST, "is reserved");
        }
    }
    server
        .registered("python", "code-runners::x", &answering("x"))
        .await;
    server
        .registered(
            "node",
            "code-runners::y",
            "export function handler() { return 'y'; }\n",
        )
        .await;
}

/// Item 6 across workers, for guest code of either language: guest code on
/// worker A registers `far::greet` on
/// worker B (`code-runner@cr-far-b::register_function`, through the real
/// engine, carrying its lineage); guest code of another run on A cannot
/// replace it there, while the creating run's kept runtime can.
#[test]
fn a_namespace_on_another_worker_belongs_to_its_creator_too() {
    use crate::helpers::engine::{EngineProc, WorkerProc};
    let engine = EngineProc::start();
    let a = WorkerProc::start(&engine, "cr-far-a");
    let b = WorkerProc::start(&engine, "cr-far-b");
    for id in ["code-runner@cr-far-a::run", "code-runner@cr-far-b::run"] {
        engine
            .trigger_when_registered(id, &json!({"lang": "python", "code": "result = 1"}))
            .unwrap_or_else(|e| panic!("{e}\n{}\n{}", a.log(), b.log()));
    }
    let on_b = |lang: &str, ns: &str, word: &str| {
        let mut call = register_call(&format!("{ns}::greet"), word);
        call[0] = json!("code-runner@cr-far-b::register_function");
        attempts(lang, &json!([call]))
    };
    let run_on_a = |payload: Value| {
        engine
            .trigger("code-runner@cr-far-a::run", &payload)
            .unwrap_or_else(|e| panic!("{e}\n{}", a.log()))
    };
    for (lang, ns) in [("python", "far"), ("node", "farnode")] {
        let created = run_on_a(
            json!({"lang": lang, "keep": true, "code": on_b(lang, ns, "first"), "timeout_ms": LONG_MS}),
        );
        assert_eq!(
            created["result"],
            json!(["ok"]),
            "{lang}: {created}\n{}",
            b.log()
        );
        let kept = created["runtime_id"].as_str().unwrap().to_string();
        let attack = run_on_a(
            json!({"lang": lang, "code": on_b(lang, ns, "attacker"), "timeout_ms": LONG_MS}),
        );
        assert_refused(
            &attack["result"][0],
            &format!("may not register into namespace {ns}::"),
        );
        let again = run_on_a(
            json!({"runtime_id": kept, "code": on_b(lang, ns, "second"), "timeout_ms": LONG_MS}),
        );
        assert_eq!(again["result"], json!(["ok"]), "{lang}: {again}");
        let answer = engine.trigger(&format!("{ns}::greet"), &json!({})).unwrap();
        assert_eq!(answer, "second", "{lang}");
    }
}
