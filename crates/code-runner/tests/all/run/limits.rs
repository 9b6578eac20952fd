//! Request limits checked before a runtime boots, the output caps'
//! configuration (the caps' behaviour under floods is in `faults`), and the
//! run's deadline as the bound of the calls its guest makes.

use serde_json::json;

use crate::helpers::lang::{LANGS, pick, two_plus_two};
use crate::helpers::{INVALID_REQUEST, Server, TIMEOUT};

/// `memory_mb` must lie in 40..=512 (the interpreter's minimum to the
/// configured maximum); both edges work and both neighbours are refused.
/// (Python's: node's memory is `heap_mb`, see the next test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_mb_outside_40_to_512_is_invalid_request() {
    let server = Server::start().await;
    for mb in [0u64, 39, 513, 1 << 40] {
        server
            .run_with("result = 1", json!({"memory_mb": mb}))
            .await
            .assert_error(INVALID_REQUEST, "memory_mb");
    }
    for mb in [40, 512] {
        let answer = server
            .run_with("result = 2 + 2", json!({"memory_mb": mb}))
            .await;
        assert_eq!(answer.ok()["result"], 4, "memory_mb {mb}");
    }
    server.assert_still_serves().await;
}

/// `memory_mb` is python's: a node run that sends it is refused, not ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_mb_on_a_node_run_is_invalid_request() {
    let server = Server::start().await;
    server
        .run_in_with("node", "return 1", json!({"memory_mb": 64}))
        .await
        .assert_error(INVALID_REQUEST, "heap_mb");
}

/// A zero budget cannot run anything: refused up front, not a guaranteed timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_timeout_is_invalid_request() {
    let server = Server::start().await;
    for lang in LANGS {
        server
            .run_in_with(lang, two_plus_two(lang), json!({"timeout_ms": 0}))
            .await
            .assert_error(INVALID_REQUEST, "timeout_ms");
    }
    server.assert_still_serves().await;
}

/// 100 000 characters on stdout and on stderr, and a 100 000-element
/// result. (Node's `console.error` ends its line, python's
/// `sys.stderr.write` does not: stderr is 100 001 or 100 000 characters.)
fn flood(lang: &str) -> (&'static str, usize) {
    pick(
        lang,
        (
            "import sys\nprint('o' * 100_000)\nsys.stderr.write('e' * 100_000)\nresult = list(range(100_000))",
            100_000,
        ),
        (
            "console.log('o'.repeat(100_000)); console.error('e'.repeat(100_000)); return Array.from({ length: 100_000 }, (_, i) => i)",
            100_001,
        ),
    )
}

/// `max_stream_bytes: 0` and `max_result_bytes: 0` disable the caps: output
/// far past the defaults comes back whole, with no marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_caps_disable_truncation_and_omission() {
    let server = Server::with_config("max_stream_bytes: 0\nmax_result_bytes: 0\n").await;
    for lang in LANGS {
        let (code, stderr_len) = flood(lang);
        let answer = server.run_in(lang, code).await;
        let body = answer.ok();
        assert_eq!(body["stdout"].as_str().unwrap().len(), 100_001, "{lang}");
        assert_eq!(body["stderr"].as_str().unwrap().len(), stderr_len, "{lang}");
        let result = body["result"]
            .as_array()
            .expect("the whole list, not a marker");
        assert_eq!(result.len(), 100_000, "{lang}");
        assert_eq!(result[99_999], 99_999, "{lang}");
    }
    server.assert_still_serves().await;
}

/// With the default caps the same run is bounded: markers replace the excess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_caps_bound_streams_and_result() {
    let server = Server::start().await;
    for lang in LANGS {
        let answer = server.run_in(lang, flood(lang).0).await;
        let body = answer.ok();
        assert_eq!(body["success"], true, "{lang}: {body}");
        let stdout = body["stdout"].as_str().unwrap();
        assert!(
            stdout.contains("[…stdout truncated: was ~98 KB; middle omitted]"),
            "{lang}: {stdout}"
        );
        assert!(stdout.len() <= 17 * 1024, "{lang}");
        let stderr = body["stderr"].as_str().unwrap();
        assert!(
            stderr.contains("[…stderr truncated: was ~"),
            "{lang}: {stderr}"
        );
        assert!(
            body["result"]
                .as_str()
                .unwrap()
                .contains("(100000 array elements)"),
            "{lang}"
        );
    }
    server.assert_still_serves().await;
}

/// A guest's `iii.trigger` whose budget is the rest of the run times out as
/// the run does; the guest must not get a rejection to catch and answer a
/// success with just before its own deadline. The run is
/// `code-runner::timeout`, in both languages, one-shot and kept (before,
/// the call's clamped budget ran out a moment before the run's and a guest
/// that caught it finished with exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_cut_by_the_run_deadline_is_the_runs_timeout() {
    let server = Server::start().await;
    let sleeper =
        json!({"lang": "python", "code": "import time\ntime.sleep(60)", "timeout_ms": 60_000});
    let node = format!(
        "try {{ await iii.trigger({{function_id: 'code-runner::run', payload: {sleeper}}}); }} \
         catch (err) {{ return 'caught ' + err.code; }}"
    );
    let python = format!(
        "try:\n    iii.trigger({{'function_id': 'code-runner::run', 'payload': {sleeper}}})\n\
         except IIIError as err:\n    result = 'caught ' + err.code"
    );
    // The race was close (lost about one time in three), so try it often.
    let tries = [("node", &node), ("python", &python)].repeat(4);
    for (lang, code) in tries {
        let answer = server
            .call(
                "code-runner::run",
                json!({"lang": lang, "code": code, "timeout_ms": 400}),
            )
            .await;
        answer.assert_error(TIMEOUT, "400 ms");
        let id = server
            .call(
                "code-runner::run",
                json!({"lang": lang, "code": "1", "keep": true}),
            )
            .await
            .ok()["runtime_id"]
            .as_str()
            .unwrap()
            .to_string();
        let answer = server
            .call(
                "code-runner::run",
                json!({"runtime_id": id, "code": code, "timeout_ms": 400}),
            )
            .await;
        answer.assert_error(TIMEOUT, "400 ms");
        server.teardown(&id).await.ok();
    }
    server.assert_still_serves().await;
}
