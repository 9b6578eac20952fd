//! The shape of a one-shot run's response, in both languages: the value,
//! stdout and stderr verbatim, no `runtime_id`, and a failing script as a
//! response (not an error) with its exit code.

use serde_json::{Value, json};

use crate::helpers::Server;
use crate::helpers::lang::{LANGS, pick, two_plus_two};

/// The simplest run: a value comes back, and a one-shot response has no
/// `runtime_id` key at all (absent, not null: there is nothing to address).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plus_two_answers_4_without_a_runtime_id_key() {
    let server = Server::start().await;
    for lang in LANGS {
        let answer = server.run_in(lang, two_plus_two(lang)).await;
        let body = answer.ok();
        assert_eq!(body["result"], 4, "{lang}: {body}");
        assert_eq!(body["exit_code"], 0, "{lang}: {body}");
        assert_eq!(body["success"], true, "{lang}: {body}");
        assert_eq!(body["stdout"], "", "{lang}: {body}");
        assert_eq!(body["stderr"], "", "{lang}: {body}");
        assert!(body["duration_ms"].is_u64(), "{lang}: {body}");
        assert!(
            body.as_object().unwrap().get("runtime_id").is_none(),
            "{lang}: a one-shot response must not carry runtime_id: {body}"
        );
    }
}

/// The seed's quickstart, to the letter, in each language: stdout `hi\n`,
/// result 4, exit 0, success, no `runtime_id` key; `/healthz` shows the
/// language's engine ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_answers_hi_and_4_without_a_runtime_id() {
    let server = Server::start().await;
    for lang in LANGS {
        let code = pick(
            lang,
            "print(\"hi\")\nresult = 2 + 2",
            "console.log(\"hi\"); return 2 + 2",
        );
        let answer = server.run_in(lang, code).await;
        let body = answer.ok();
        assert_eq!(body["stdout"], "hi\n", "{lang}: {body}");
        assert_eq!(body["stderr"], "", "{lang}: {body}");
        assert_eq!(body["result"], 4, "{lang}: {body}");
        assert_eq!(body["exit_code"], 0, "{lang}: {body}");
        assert_eq!(body["success"], true, "{lang}: {body}");
        assert!(
            body.as_object().unwrap().get("runtime_id").is_none(),
            "{lang}: {body}"
        );
        let health = server.get("/healthz").await;
        assert_eq!(health.ok()["engines"][lang], "ready", "{}", health.body);
    }
}

/// Real HTTP on loopback, the body written by hand: a run answers over the
/// wire with its structured value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_written_body_answers_over_http() {
    let server = Server::start().await;
    for body in [
        &br#"{"lang":"python","code":"result = [1, 'two', {'three': 3}]"}"#[..],
        br#"{"lang":"node","code":"return [1, 'two', {three: 3}]"}"#,
    ] {
        let answer = server.post_raw(crate::helpers::RUN, body.to_vec()).await;
        assert_eq!(answer.ok()["result"], json!([1, "two", {"three": 3}]));
    }
}

/// A failing script is a response, not an error: exit_code 1, success
/// false, a null result (python's `result` assigned before the raise does
/// not count), and the exception on stderr: python's traceback, node's
/// error with its stack in `run.js`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncaught_exception_is_a_response_with_its_traceback() {
    let server = Server::start().await;
    for lang in LANGS {
        let code = pick(
            lang,
            "result = 'never'\nraise ValueError('boom')",
            "throw new TypeError('boom')",
        );
        let answer = server.run_in(lang, code).await;
        let body = answer.ok();
        assert_eq!(body["exit_code"], 1, "{lang}: {body}");
        assert_eq!(body["success"], false, "{lang}: {body}");
        assert_eq!(body["result"], Value::Null, "{lang}: {body}");
        let stderr = body["stderr"].as_str().unwrap();
        if lang == "python" {
            assert!(stderr.starts_with("Traceback"), "{stderr}");
            assert!(stderr.contains("ValueError: boom"), "{stderr}");
        } else {
            assert!(
                stderr.starts_with("TypeError: boom\n    at run.js:1:7"),
                "{stderr}"
            );
        }
    }
    server.assert_still_serves().await;
}

/// `SystemExit(n)` is the program's own exit status, reported verbatim.
/// (Python's: a node run has no process to exit, only a value or a throw.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_exit_sets_the_exit_code() {
    let server = Server::start().await;
    let answer = server.run("raise SystemExit(3)").await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 3);
    assert_eq!(body["success"], false);
    server.assert_still_serves().await;
}

/// A guest's own KeyboardInterrupt is its failure (exit 1), not a host
/// signal. (Python's exception; node has none of the kind.)
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

/// The stdlib modules agents reach for first are present in python.wasm
/// and work. (Python's standard library; node's built-ins are the
/// language's own globals.)
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

/// Non-ASCII text survives the engine's channel, the caps and HTTP
/// unchanged, in both stdout and result (the length counted in code
/// points, the size in UTF-8 bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_ascii_text_round_trips_in_stdout_and_result() {
    let server = Server::start().await;
    let node = r#"const text = "héllo ✓ 日本 🎉";
console.log(text);
return { text, length: [...text].length, utf8_bytes: new TextEncoder().encode(text).length };"#;
    for lang in LANGS {
        let code = pick(
            lang,
            include_str!("../../fixtures/unicode_round_trip.py"),
            node,
        );
        let answer = server.run_in(lang, code).await;
        let body = answer.ok();
        assert_eq!(body["stdout"], "héllo ✓ 日本 🎉\n", "{lang}");
        assert_eq!(
            body["result"],
            json!({"text": "héllo ✓ 日本 🎉", "length": 12, "utf8_bytes": 22}),
            "{lang}"
        );
    }
    server.assert_still_serves().await;
}
