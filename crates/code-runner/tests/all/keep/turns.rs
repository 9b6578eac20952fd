//! What a kept runtime keeps from one turn to the next, in both languages:
//! its id, its globals and its files, the language it was made in, and what
//! a turn that overruns its timeout takes with it.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::lang::{LANGS, pick, returning};
use crate::helpers::{EXPIRED, INVALID_REQUEST, RUN, Server, TIMEOUT};

/// A runtime id is a capability: long enough to be unguessable and safe in a URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_returns_a_long_url_safe_runtime_id() {
    let server = Server::start().await;
    for lang in LANGS {
        let answer = server
            .run_in_with(lang, &returning(lang, "'kept'"), json!({"keep": true}))
            .await;
        let body = answer.ok();
        assert_eq!(body["result"], "kept", "{lang}");
        assert_eq!(body["success"], true, "{lang}");
        let id = body["runtime_id"].as_str().expect("runtime_id");
        assert!(id.len() >= 22, "{id}");
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{id}"
        );
        let other = server.keep_in(lang, pick(lang, "pass", "")).await;
        assert_ne!(id, other, "{lang}: every kept runtime gets its own id");
    }
}

/// The point of `keep`: globals bound in one turn are there in the next, and
/// the response echoes the id it addressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_runtime_keeps_globals_between_turns() {
    let server = Server::start().await;
    for lang in LANGS {
        let id = server
            .keep_in(lang, pick(lang, "x = 41", "globalThis.x = 41"))
            .await;
        let answer = server.run_on(&id, &returning(lang, "x + 1")).await;
        let body = answer.ok();
        assert_eq!(body["result"], 42, "{lang}: {body}");
        assert_eq!(body["runtime_id"], id.as_str(), "{lang}");
    }
    server.assert_still_serves().await;
}

/// A kept runtime keeps its globals and its files (python's `/work`, node's
/// `iii.files`), has a namespace of its own, refuses a `lang` it was not made
/// in, and holds exactly one runtime directory; teardown removes it, and the
/// id then answers `expired`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_runtime_keeps_globals_and_files_until_teardown() {
    let server = Server::start().await;
    for (lang, other, save, probe) in [
        (
            "python",
            "node",
            "n = 41\nopen('/work/kept.txt', 'w').write('still here')",
            "result = [n + 1, open('/work/kept.txt').read(), iii.namespace]",
        ),
        (
            "node",
            "python",
            "globalThis.n = 41; await iii.files.write('kept.txt', 'still here')",
            "return [n + 1, await iii.files.readText('kept.txt'), iii.namespace]",
        ),
    ] {
        let id = server.keep_in(lang, save).await;
        let answer = server.run_on(&id, probe).await;
        assert_eq!(answer.ok()["result"][0], 42, "{lang}: {}", answer.body);
        assert_eq!(answer.ok()["result"][1], "still here", "{lang}");
        let own = answer.ok()["result"][2].as_str().unwrap_or("");
        assert!(own.starts_with("rt-"), "its own namespace: {}", answer.body);
        assert_eq!(answer.ok()["runtime_id"], id, "{lang}");
        assert_eq!(server.dirs_holding("kept.txt").len(), 1, "{lang}");
        let wrong = server
            .call(
                RUN,
                json!({"runtime_id": id, "lang": other, "code": returning(other, "1")}),
            )
            .await;
        wrong.assert_error(INVALID_REQUEST, "contradicts");
        server.teardown(&id).await.ok();
        assert!(server.dirs_holding("kept.txt").is_empty(), "{lang}");
        server
            .run_on(&id, &returning(lang, "1"))
            .await
            .assert_error(EXPIRED, "");
    }
}

/// Imported modules stay imported: the interpreter is not restarted per
/// turn. (Python's `import`; a node run has no import statement of its own.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_runtime_keeps_its_imports() {
    let server = Server::start().await;
    let id = server.keep("import json as j\nimport fractions").await;
    let answer = server
        .run_on(
            &id,
            "result = [j.dumps({'a': 1}), str(fractions.Fraction(1, 3))]",
        )
        .await;
    assert_eq!(answer.ok()["result"], json!(["{\"a\": 1}", "1/3"]));
    server.assert_still_serves().await;
}

/// A turn's value is its own, not state: a turn that assigns (or returns)
/// none answers null, never the previous turn's value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_is_cleared_between_turns() {
    let server = Server::start().await;
    for lang in LANGS {
        let id = server.keep_in(lang, &returning(lang, "'first'")).await;
        let answer = server
            .run_on(&id, pick(lang, "y = 1", "globalThis.y = 1"))
            .await;
        let body = answer.ok();
        assert_eq!(body["exit_code"], 0, "{lang}");
        assert_eq!(body["result"], json!(null), "{lang}: {body}");
    }
    server.assert_still_serves().await;
}

/// A `lang` that contradicts the runtime is refused; the runtime's own lang is fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lang_contradicting_the_runtime_is_invalid_request() {
    let server = Server::start().await;
    for (lang, other) in [("python", "node"), ("node", "python")] {
        let id = server
            .keep_in(lang, pick(lang, "x = 1", "globalThis.x = 1"))
            .await;
        let answer = server
            .call(
                RUN,
                json!({"runtime_id": id, "lang": other, "code": returning(other, "1")}),
            )
            .await;
        answer.assert_error(INVALID_REQUEST, "contradicts");
        let answer = server
            .call(
                RUN,
                json!({"runtime_id": id, "lang": lang, "code": returning(lang, "x")}),
            )
            .await;
        assert_eq!(answer.ok()["result"], 1, "{lang}");
    }
    server.assert_still_serves().await;
}

/// memory_mb is fixed at creation: sending it with a runtime_id is refused,
/// not ignored. (Python's: node refuses `memory_mb` on any run.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_mb_with_a_runtime_id_is_invalid_request() {
    let server = Server::start().await;
    let id = server.keep("x = 1").await;
    let answer = server
        .call(
            RUN,
            json!({"runtime_id": id, "code": "result = x", "memory_mb": 128}),
        )
        .await;
    answer.assert_error(INVALID_REQUEST, "memory_mb");
    assert_eq!(server.run_on(&id, "result = x").await.ok()["result"], 1);
    server.assert_still_serves().await;
}

/// A python timeout takes the interpreter with it but not the directory:
/// the next call boots a fresh interpreter on the same files. (The
/// languages differ here: node's isolate survives, see the next test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_turn_keeps_files_and_boots_a_fresh_interpreter() {
    let server = Server::start().await;
    let id = server
        .keep(include_str!("../../fixtures/keep_save_state.py"))
        .await;
    let started = Instant::now();
    let answer = server
        .call(
            RUN,
            json!({"runtime_id": id, "code": "import time\ntime.sleep(60)", "timeout_ms": 300}),
        )
        .await;
    answer.assert_error(TIMEOUT, "300 ms");
    assert!(started.elapsed() < Duration::from_secs(5), "stopped late");
    let answer = server
        .run_on(&id, include_str!("../../fixtures/keep_probe_state.py"))
        .await;
    assert_eq!(
        answer.ok()["result"],
        json!({"file": "saved", "counter_survived": false})
    );
    // The fresh interpreter is itself a kept one.
    assert_eq!(server.run_on(&id, "z = 5").await.ok()["exit_code"], 0);
    assert_eq!(server.run_on(&id, "result = z").await.ok()["result"], 5);
    server.assert_still_serves().await;
}

/// A kept node runtime survives its own timeout with its globals intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_node_runtime_serves_after_a_timeout() {
    let server = Server::start().await;
    let id = server.keep_in("node", "globalThis.kept = 'yes'").await;
    let answer = server
        .call(
            RUN,
            json!({"runtime_id": id, "code": "while (true) {}", "timeout_ms": 200}),
        )
        .await;
    answer.assert_error(TIMEOUT, "200 ms");
    assert_eq!(
        server.run_on(&id, "return kept").await.ok()["result"],
        "yes"
    );
    server.teardown(&id).await.ok();
}
