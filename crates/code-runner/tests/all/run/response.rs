//! `code-runner::run` one-shot: the response shape, exit codes, and what
//! happens to results JSON cannot carry or the caps replace.

use serde_json::json;

use crate::helpers::{Server, TIMEOUT};

/// The quickstart: a value comes back, and a one-shot response has no
/// `runtime_id` key at all (absent, not null: there is nothing to address).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plus_two_answers_4_without_a_runtime_id_key() {
    let server = Server::start().await;
    let answer = server.run("result = 2 + 2").await;
    let body = answer.ok();
    assert_eq!(body["result"], 4);
    assert_eq!(body["exit_code"], 0);
    assert_eq!(body["success"], true);
    assert_eq!(body["stdout"], "");
    assert_eq!(body["stderr"], "");
    assert!(body["duration_ms"].is_u64(), "{body}");
    assert!(
        body.as_object().unwrap().get("runtime_id").is_none(),
        "a one-shot response must not carry runtime_id: {body}"
    );
}

/// The stdlib modules agents reach for first are present in python.wasm and work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdlib_modules_import_and_work() {
    let server = Server::start().await;
    let answer = server
        .run(include_str!("../../fixtures/stdlib_imports.py"))
        .await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    assert_eq!(
        body["result"],
        json!({
            "json": [1, 2],
            "re": ["1", "22", "333"],
            "math": 12,
            "datetime": "2024-02-29",
            "decimal": "0.3",
            "sqlite3": 6,
            "zlib": true,
        })
    );
    server.assert_still_serves().await;
}

/// A failing script is a response, not an error: exit_code 1, success false,
/// the traceback on stderr and a null result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncaught_exception_is_a_response_with_its_traceback() {
    let server = Server::start().await;
    let answer = server
        .run("result = 'never'\nraise ValueError('boom')")
        .await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 1);
    assert_eq!(body["success"], false);
    assert_eq!(body["result"], json!(null));
    let stderr = body["stderr"].as_str().unwrap();
    assert!(stderr.starts_with("Traceback"), "{stderr}");
    assert!(stderr.contains("ValueError: boom"), "{stderr}");
    server.assert_still_serves().await;
}

/// `SystemExit(n)` is the program's own exit status, reported verbatim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_exit_sets_the_exit_code() {
    let server = Server::start().await;
    let answer = server.run("raise SystemExit(3)").await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 3);
    assert_eq!(body["success"], false);
    server.assert_still_serves().await;
}

/// A guest's own KeyboardInterrupt is its failure (exit 1), not a host signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyboard_interrupt_is_exit_code_1() {
    let server = Server::start().await;
    let answer = server.run("raise KeyboardInterrupt").await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 1);
    assert_eq!(body["success"], false);
    assert!(
        body["stderr"]
            .as_str()
            .unwrap()
            .contains("KeyboardInterrupt"),
        "{body}"
    );
    server.assert_still_serves().await;
}

/// Non-ASCII text survives the framed channel, the caps and HTTP unchanged,
/// in both stdout and result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_ascii_text_round_trips_in_stdout_and_result() {
    let server = Server::start().await;
    let answer = server
        .run(include_str!("../../fixtures/unicode_round_trip.py"))
        .await;
    let body = answer.ok();
    assert_eq!(body["stdout"], "héllo ✓ 日本 🎉\n");
    assert_eq!(
        body["result"],
        json!({"text": "héllo ✓ 日本 🎉", "length": 12, "utf8_bytes": 22})
    );
    server.assert_still_serves().await;
}

/// A result JSON cannot represent (a set, NaN, a cycle, nesting past the
/// limit) is null in a successful response, never an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_json_cannot_carry_become_null() {
    let server = Server::start().await;
    for code in [
        "result = {1, 2, 3}",
        "result = float('nan')",
        "result = [1.0, float('inf')]",
        "a = []\na.append(a)\nresult = a",
        include_str!("../../fixtures/deeply_nested_result.py"),
    ] {
        let answer = server.run(code).await;
        let body = answer.ok();
        assert_eq!(body["exit_code"], 0, "{code}: {body}");
        assert_eq!(body["success"], true, "{code}: {body}");
        assert_eq!(body["result"], json!(null), "{code}: {body}");
    }
    server.assert_still_serves().await;
}

/// A 10 MB string result is replaced whole by the omission marker naming its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_mb_string_result_becomes_the_omission_marker() {
    let server = Server::start().await;
    let answer = server.run("result = 'x' * (10 * 1024 * 1024)").await;
    let body = answer.ok();
    assert_eq!(
        body["success"], true,
        "exit_code and success are never touched"
    );
    let marker = body["result"].as_str().expect("the marker is a string");
    assert!(marker.starts_with("<omitted: result was ~"), "{marker}");
    assert!(
        marker.contains(" KB (a 10485760-char string); "),
        "{marker}"
    );
    assert!(marker.ends_with('>'), "{marker}");
    server.assert_still_serves().await;
}

/// A 100000-element list becomes the marker naming its element count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_element_list_result_names_its_elements() {
    let server = Server::start().await;
    let answer = server.run("result = list(range(100000))").await;
    let body = answer.ok();
    assert_eq!(body["success"], true);
    let marker = body["result"].as_str().expect("the marker is a string");
    assert!(marker.starts_with("<omitted: result was ~"), "{marker}");
    assert!(marker.contains("(100000 array elements)"), "{marker}");
    server.assert_still_serves().await;
}

/// A result just under the cap comes back whole: the cap replaces only what exceeds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_under_the_cap_comes_back_whole() {
    let server = Server::start().await;
    let answer = server.run("result = list(range(1000))").await;
    let body = answer.ok();
    let list = body["result"].as_array().expect("an array, not a marker");
    assert_eq!(list.len(), 1000);
    assert_eq!(list[999], 999);
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
