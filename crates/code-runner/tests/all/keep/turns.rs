//! Kept runtimes: ids, persistence across turns, the errors of a runtime
//! that is gone, teardown, idle reaping and isolation between runtimes.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{
    EXPIRED, INVALID_REQUEST, RUNTIME_NOT_FOUND, Server, TEARDOWN, TIMEOUT, wait_until,
};

/// A runtime id is a capability: long enough to be unguessable and safe in a URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_returns_a_long_url_safe_runtime_id() {
    let server = Server::start().await;
    let answer = server
        .run_with("result = 'kept'", json!({"keep": true}))
        .await;
    let body = answer.ok();
    assert_eq!(body["result"], "kept");
    assert_eq!(body["success"], true);
    let id = body["runtime_id"].as_str().expect("runtime_id");
    assert!(id.len() >= 22, "{id}");
    assert!(
        id.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "{id}"
    );
    let other = server.keep("pass").await;
    assert_ne!(id, other, "every kept runtime gets its own id");
}

/// The point of `keep`: globals bound in one turn are there in the next, and
/// the response echoes the id it addressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_runtime_keeps_globals_between_turns() {
    let server = Server::start().await;
    let id = server.keep("x = 41").await;
    let answer = server.run_on(&id, "result = x + 1").await;
    let body = answer.ok();
    assert_eq!(body["result"], 42);
    assert_eq!(body["runtime_id"], id.as_str());
    server.assert_still_serves().await;
}

/// Imported modules stay imported: the interpreter is not restarted per turn.
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

/// `result` is the output slot, not state: a turn that assigns none returns
/// null, never the previous turn's value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_is_cleared_between_turns() {
    let server = Server::start().await;
    let id = server.keep("result = 'first'").await;
    let answer = server.run_on(&id, "y = 1").await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0);
    assert_eq!(body["result"], json!(null), "{body}");
    server.assert_still_serves().await;
}

/// A `lang` that contradicts the runtime is refused; the runtime's own lang is fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lang_contradicting_the_runtime_is_invalid_request() {
    let server = Server::start().await;
    let id = server.keep("x = 1").await;
    let answer = server
        .call(
            crate::helpers::RUN,
            json!({"runtime_id": id, "lang": "node", "code": "return 1"}),
        )
        .await;
    answer.assert_error(INVALID_REQUEST, "contradicts");
    let answer = server
        .call(
            crate::helpers::RUN,
            json!({"runtime_id": id, "lang": "python", "code": "result = x"}),
        )
        .await;
    assert_eq!(answer.ok()["result"], 1);
    server.assert_still_serves().await;
}

/// memory_mb is fixed at creation: sending it with a runtime_id is refused, not ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_mb_with_a_runtime_id_is_invalid_request() {
    let server = Server::start().await;
    let id = server.keep("x = 1").await;
    let answer = server
        .call(
            crate::helpers::RUN,
            json!({"runtime_id": id, "code": "result = x", "memory_mb": 128}),
        )
        .await;
    answer.assert_error(INVALID_REQUEST, "memory_mb");
    assert_eq!(server.run_on(&id, "result = x").await.ok()["result"], 1);
    server.assert_still_serves().await;
}

/// An id never issued is `runtime_not_found`, and the error does not echo the
/// full id (it is a capability).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_runtime_id_is_runtime_not_found() {
    let server = Server::start().await;
    let id = "rt_thisIdWasNeverIssuedByTheWorker00";
    let answer = server.run_on(id, "result = 1").await;
    answer.assert_error(RUNTIME_NOT_FOUND, "");
    assert!(!answer.error_message().contains(id), "{}", answer.body);
    server
        .teardown(id)
        .await
        .assert_error(RUNTIME_NOT_FOUND, "");
    server.assert_still_serves().await;
}

/// Teardown answers its documented shape; the id is then `expired`, for runs
/// and for a second teardown alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_down_runtime_answers_expired() {
    let server = Server::start().await;
    let id = server.keep("x = 1").await;
    let answer = server.teardown(&id).await;
    assert_eq!(
        answer.ok(),
        &json!({"torn_down": true, "unregistered": [], "runtime_id": id})
    );
    let answer = server.run_on(&id, "result = x").await;
    answer.assert_error(EXPIRED, "");
    assert!(!answer.error_message().contains(&id), "{}", answer.body);
    server.teardown(&id).await.assert_error(EXPIRED, "");
    server.assert_still_serves().await;
}

/// Teardown takes exactly one address: both or neither is a malformed request;
/// a namespace with nothing behind it is `runtime_not_found`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_needs_exactly_one_of_runtime_id_or_namespace() {
    let server = Server::start().await;
    let id = server.keep("x = 1").await;
    let both = server
        .call(TEARDOWN, json!({"runtime_id": id, "namespace": "app"}))
        .await;
    both.assert_error(INVALID_REQUEST, "exactly one");
    let neither = server.call(TEARDOWN, json!({})).await;
    neither.assert_error(INVALID_REQUEST, "exactly one");
    let nothing_behind = server.call(TEARDOWN, json!({"namespace": "app"})).await;
    nothing_behind.assert_error(RUNTIME_NOT_FOUND, "");
    // The refused teardowns destroyed nothing.
    assert_eq!(server.run_on(&id, "result = x").await.ok()["result"], 1);
    server.assert_still_serves().await;
}

/// A timeout takes the interpreter with it but not the directory: the next
/// call boots a fresh interpreter on the same files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_turn_keeps_files_and_boots_a_fresh_interpreter() {
    let server = Server::start().await;
    let id = server
        .keep(include_str!("../../fixtures/keep_save_state.py"))
        .await;
    let started = Instant::now();
    let answer = server
        .call(
            crate::helpers::RUN,
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

/// Idle runtimes are reaped after `idle_ttl_secs`, their files removed, and
/// their id then answers `expired`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_runtime_is_reaped_and_answers_expired() {
    let server = Server::with_config("idle_ttl_secs: 1").await;
    let id = server.keep("x = 1\nopen('/work/kept', 'w').close()").await;
    assert_eq!(server.dirs_holding("kept").len(), 1);
    let started = Instant::now();
    loop {
        let health = server.get("/healthz").await;
        if health.ok()["runtimes"]["kept"] == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "not reaped: {}",
            health.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "reaped before its ttl"
    );
    server
        .run_on(&id, "result = x")
        .await
        .assert_error(EXPIRED, "");
    wait_until(
        "the reaped runtime's files to go",
        Duration::from_secs(10),
        || server.dirs_holding("kept").is_empty(),
    )
    .await;
    server.assert_still_serves().await;
}

/// Two kept runtimes share neither files nor globals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_runtimes_cannot_see_each_others_files_or_globals() {
    let server = Server::start().await;
    let a = server
        .keep(include_str!("../../fixtures/isolation_secret.py"))
        .await;
    let b = server.keep("pass").await;
    let probe = include_str!("../../fixtures/isolation_probe.py");
    let seen_by_b = server.run_on(&b, probe).await;
    assert_eq!(
        seen_by_b.ok()["result"],
        json!({"files": [], "sees_secret": false})
    );
    let seen_by_a = server.run_on(&a, probe).await;
    assert_eq!(
        seen_by_a.ok()["result"],
        json!({"files": ["secret.txt"], "sees_secret": true})
    );
    server.assert_still_serves().await;
}

/// One-shot runs, whatever their ending, leave no directory behind; a kept
/// runtime holds exactly one until teardown. (Each run marks its `/work` so
/// its directory can be told from pre-booted interpreters' empty ones.) A `keep: true` run that fails
/// is not kept and returns no id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_runs_leave_nothing_in_the_runtimes_dir() {
    let server = Server::start().await;
    server
        .run("open('/work/f', 'w').write('x')\nresult = 1")
        .await
        .ok();
    server
        .run("open('/work/f', 'w').write('x')\nraise ValueError")
        .await
        .ok();
    server
        .run_with(
            "open('/work/f', 'w').write('x')\nwhile True: pass",
            json!({"timeout_ms": 200}),
        )
        .await
        .assert_error(TIMEOUT, "");
    let failed_keep = server
        .run_with(
            "open('/work/f', 'w').write('x')\nraise ValueError",
            json!({"keep": true}),
        )
        .await;
    let body = failed_keep.ok();
    assert_eq!(body["exit_code"], 1);
    assert!(
        body.as_object().unwrap().get("runtime_id").is_none(),
        "a failed keep run is not kept: {body}"
    );
    assert_eq!(server.dirs_holding("f"), Vec::<std::path::PathBuf>::new());
    let id = server.keep("open('/work/kept', 'w').close()").await;
    assert_eq!(server.dirs_holding("kept").len(), 1);
    server.teardown(&id).await.ok();
    assert_eq!(
        server.dirs_holding("kept"),
        Vec::<std::path::PathBuf>::new()
    );
    let health = server.get("/healthz").await;
    assert_eq!(health.ok()["runtimes"]["live"], 0, "{}", health.body);
    server.assert_still_serves().await;
}
