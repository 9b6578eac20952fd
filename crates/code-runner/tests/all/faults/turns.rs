//! Turns ended from outside or forged from inside: a teardown in the middle
//! of a call stops that call, and a guest that forges its turn's end cannot
//! outlive the turn's deadline.

use std::time::Instant;

use serde_json::json;

use super::{NO_HANG, ON_TIME};
use crate::helpers::lang::{LANGS, mark, pick, returning};
use crate::helpers::{EXPIRED, RUN, Server, TIMEOUT, client, post_json, wait_until};

/// Tearing down a runtime in the middle of a call stops that call: it answers
/// `expired` promptly, instead of running on (or hanging) in a dead runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_during_a_call_answers_expired_to_that_call() {
    let server = Server::start().await;
    for lang in LANGS {
        let id = server.keep_in(lang, pick(lang, "pass", "")).await;
        let sleep = pick(
            lang,
            include_str!("../../fixtures/sleep_after_marking_started.py").to_string(),
            format!(
                "{}await new Promise((r) => setTimeout(r, 60000));",
                mark("node", "started")
            ),
        );
        let running = {
            let url = server.url.clone();
            let payload = json!({"runtime_id": id, "code": sleep, "timeout_ms": 30_000});
            tokio::spawn(async move { post_json(&client(), &url, RUN, &payload).await })
        };
        wait_until("the call to start", NO_HANG, || {
            server.dirs_holding("started").len() == 1
        })
        .await;
        let started = Instant::now();
        let teardown = server.teardown(&id).await;
        assert_eq!(
            teardown.ok(),
            &json!({"torn_down": true, "unregistered": [], "runtime_id": id})
        );
        let answer = running.await.expect("the running call's task");
        answer.assert_error(EXPIRED, "");
        assert!(
            started.elapsed() < ON_TIME,
            "{lang}: the running call was stopped late"
        );
        server
            .run_on(&id, &returning(lang, "1"))
            .await
            .assert_error(EXPIRED, "");
        assert!(server.dirs_holding("started").is_empty(), "{lang}");
    }
    server.assert_still_serves().await;
}

/// A guest that tries to end its turn early (a frame-like text on every
/// descriptor, a nested call of the runner's own turn function) and keeps
/// running must not outlive the turn's deadline: the runtime's next call
/// answers on time (a fresh 4, or a documented error), not never. (Python's
/// turn channel: a node turn ends when its promise settles, in the host.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_done_frame_does_not_outlive_the_turn_deadline() {
    let mut server = Server::process("").await;
    let id = server.keep("pass").await;
    let forged = json!({
        "runtime_id": id,
        "code": include_str!("../../fixtures/forge_done_frame.py"),
        "timeout_ms": 1000,
    });
    let started = Instant::now();
    let _ = tokio::time::timeout(ON_TIME, server.call(RUN, forged))
        .await
        .expect("the forging turn itself hung past its 1000 ms budget");
    let next = json!({"runtime_id": id, "code": "result = 2 + 2", "timeout_ms": 1000});
    let answer = tokio::time::timeout(ON_TIME, server.call(RUN, next))
        .await
        .expect("the next call hung: the forging guest escaped its turn's deadline");
    if answer.status.is_success() {
        assert_eq!(answer.body["result"], 4, "{}", answer.body);
    } else {
        let code = answer.error_code().unwrap_or("");
        assert!([TIMEOUT, EXPIRED].contains(&code), "{}", answer.body);
    }
    assert!(started.elapsed() < 2 * ON_TIME);
    server.assert_alive();
    server.assert_still_serves().await;
}
