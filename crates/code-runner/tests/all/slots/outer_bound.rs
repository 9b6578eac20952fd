//! The worker's outer bound on a turn (issue 16, item 1): a turn an engine
//! does not answer some time after its deadline is the caller's
//! `code-runner::timeout`, its runtime is discarded (a kept id then answers
//! `code-runner::expired`) and its slot is free again, whatever the engine
//! does. Before, a node guest that put a looping setter on
//! `Array.prototype[0]` and left a timer pending caught the bootstrap in a
//! loop after the deadline: the call never answered and the slot was lost
//! until a restart. (The V8 engine no longer loops there; the bound is the
//! backstop, so the test holds with either engine: an answer in bounded
//! time, a timeout if it is an error, every slot back.) Node's: the
//! reproduction is V8's; python's turns are bounded by the fault matrix's
//! `time` rows.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::{Answer, EXPIRED, RUN, Server, TIMEOUT, wait_until};

/// The reproduction: a setter that loops on `Array.prototype[0]`, and one
/// timer still pending when the turn answers.
const HANG: &str = "Object.defineProperty(Array.prototype, 0, { set(v) { for (;;) {} }, configurable: true }); \
                    setTimeout(() => {}, 100000); return 1";

/// The turn's budget in these tests.
const BUDGET_MS: u64 = 500;

/// How long an answer may take: the budget, the worker's 2 s grace, and
/// room for a loaded machine.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// The call answered in bounded time: the program's value, or the timeout.
#[track_caller]
fn answered_or_timed_out(answer: &Answer, took: Duration) -> bool {
    assert!(
        took < ANSWER_WITHIN,
        "the call took {took:?}: {}",
        answer.body
    );
    if answer.status.is_success() {
        assert_eq!(answer.body["result"], 1, "{}", answer.body);
        return false;
    }
    answer.assert_error(TIMEOUT, "");
    true
}

async fn timed(server: &Server, payload: Value) -> (Answer, Duration) {
    let started = Instant::now();
    let answer = server.call(RUN, payload).await;
    (answer, started.elapsed())
}

/// Every slot of a worker of `max` slots can still be used: `max` kept
/// runtimes at once, then torn down.
async fn every_slot_serves(server: &Server, max: usize) {
    let mut ids = Vec::new();
    for _ in 0..max {
        let answer = server
            .call(
                RUN,
                json!({"lang": "node", "keep": true, "code": "return 2"}),
            )
            .await;
        let body = answer.ok();
        assert_eq!(body["result"], 2, "{body}");
        ids.push(body["runtime_id"].as_str().unwrap().to_string());
    }
    for id in ids {
        server.teardown(&id).await.ok();
    }
}

/// A one-shot node run that never answers is a timeout within the budget
/// plus the grace, and its slot is free at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_turn_that_never_answers_frees_its_slot() {
    let server = Server::with_config("max_runtimes: 2\nwarm_pool: 0\n").await;
    let (answer, took) = timed(
        &server,
        json!({"lang": "node", "code": HANG, "timeout_ms": BUDGET_MS}),
    )
    .await;
    answered_or_timed_out(&answer, took);
    let live = server.live();
    wait_until("the slot is free", Duration::from_secs(10), || live() == 0).await;
    every_slot_serves(&server, 2).await;
}

/// A kept runtime whose turn never answers is given up: the turn is a
/// timeout, its id answers `expired`, its slot is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_turn_that_never_answers_discards_its_runtime() {
    let server = Server::with_config("max_runtimes: 2\nwarm_pool: 0\n").await;
    let kept = server
        .call(
            RUN,
            json!({"lang": "node", "keep": true, "code": "globalThis.n = 1"}),
        )
        .await;
    let id = kept.ok()["runtime_id"].as_str().unwrap().to_string();
    let (answer, took) = timed(
        &server,
        json!({"runtime_id": id, "code": HANG, "timeout_ms": BUDGET_MS}),
    )
    .await;
    let live = server.live();
    if answered_or_timed_out(&answer, took) {
        server
            .run_on(&id, "return globalThis.n")
            .await
            .assert_error(EXPIRED, "");
        wait_until("the slot is free", Duration::from_secs(10), || live() == 0).await;
    } else {
        // The engine stopped the turn itself: the runtime lives on.
        let again = server.run_on(&id, "return globalThis.n").await;
        assert_eq!(again.ok()["result"], 1, "{}", again.body);
        server.teardown(&id).await.ok();
        wait_until("the slot is free", Duration::from_secs(10), || live() == 0).await;
    }
    every_slot_serves(&server, 2).await;
}
