//! Calls wait in bounded lines, in both languages: calls of one runtime
//! (a kept runtime's turns, a published function's invocations) wait at
//! most 64 deep, and a turn has at most 16 fire-and-forget calls in flight,
//! locally and through an iii engine.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::engine::{EngineProc, WorkerProc};
use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{CAPACITY, RUN, Server, client, post_json};

/// Longest the queued calls may take to be refused on a loaded machine.
const REFUSALS_WITHIN: Duration = Duration::from_secs(90);

/// Calls of a published function wait for its runtime one at a time, and
/// only so many may wait: past the bound a call is `capacity` at once
/// instead of queueing without end; the waiting ones are all answered.
/// (One namespace per language, stampeded at the same time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_waiting_for_one_runtime_are_bounded() {
    let server = Server::start().await;
    for (lang, id, source) in [
        (
            "python",
            "slow::nap",
            "import time\ndef handler(p):\n    time.sleep(0.3)\n    return 'rested'\n",
        ),
        (
            "node",
            "slownode::nap",
            // Busy, not asleep: node runs a handler's calls beside each other
            // while they await, so only a call that holds the isolate makes
            // the others wait in line, whatever the machine's timing (short:
            // each waiting call's budget runs while it waits in the isolate).
            "export function handler() {\n  const end = Date.now() + 40;\n  while (Date.now() < end) {}\n  return 'rested';\n}\n",
        ),
    ] {
        server.registered(lang, id, source).await;
    }
    let mut clients = tokio::task::JoinSet::new();
    for id in ["slow::nap", "slownode::nap"] {
        for _ in 0..100 {
            let url = server.url.clone();
            clients.spawn(async move { (id, post_json(&client(), &url, id, &json!({})).await) });
        }
    }
    let mut tally = std::collections::BTreeMap::<&str, (usize, usize)>::new();
    while let Some(joined) = clients.join_next().await {
        let (id, answer) = joined.expect("client task");
        let (rested, refused) = tally.entry(id).or_default();
        if answer.status.is_success() {
            assert_eq!(answer.body, "rested", "{id}");
            *rested += 1;
        } else {
            answer.assert_error(CAPACITY, "64 calls already wait");
            *refused += 1;
        }
    }
    for id in ["slow::nap", "slownode::nap"] {
        let (rested, refused) = tally[id];
        assert_eq!(rested + refused, 100, "{id}");
        assert!(
            refused > 0 && rested >= 64,
            "{id}: rested {rested}, refused {refused}"
        );
        assert_eq!(server.call(id, json!({})).await.ok(), "rested", "{id}");
    }
}

/// Calls for one kept runtime wait in a bounded line (64, shared with its
/// published functions): the rest are `capacity` at once. Before, every
/// call queued, each holding its request (up to 16 MiB of code) for as long
/// as the runtime took to reach it: 300 dropped calls held 300 MiB and the
/// runtime for 10 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_queued_on_one_kept_runtime_are_bounded() {
    let server = Arc::new(Server::start().await);
    for lang in LANGS {
        let id = server.keep_in(lang, pick(lang, "import time", "")).await;
        let block = pick(
            lang,
            "time.sleep(60)",
            "await new Promise((r) => setTimeout(r, 60000))",
        );
        let turn = json!({"runtime_id": id, "code": block, "timeout_ms": 30_000});
        let blocker = {
            let (server, turn) = (server.clone(), turn.clone());
            tokio::spawn(async move { server.call(RUN, turn).await })
        };
        let refused = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..80)
            .map(|_| {
                let (server, turn, refused) = (server.clone(), turn.clone(), refused.clone());
                tokio::spawn(async move {
                    // Each caller blocks like the blocker: whichever reaches the
                    // runtime first holds it, so the count of refusals does not
                    // depend on the order in which the 81 calls arrive.
                    let answer = server.call(RUN, turn).await;
                    if answer.error_code() == Some(CAPACITY) {
                        assert!(
                            answer.error_message().contains("calls already wait"),
                            "{}",
                            answer.body
                        );
                        refused.fetch_add(1, Ordering::SeqCst);
                    }
                    answer
                })
            })
            .collect();
        let until = Instant::now() + REFUSALS_WITHIN;
        while refused.load(Ordering::SeqCst) < 16 {
            assert!(
                Instant::now() < until,
                "{lang}: only {} of 80 calls behind a busy runtime were refused",
                refused.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Tearing it down ends the turn in flight and the calls still waiting.
        server.teardown(&id).await.ok();
        blocker.await.unwrap();
        for caller in callers {
            caller.await.unwrap();
        }
    }
    server.assert_still_serves().await;
}

/// A guest in `lang` that sends `slow` (a call with a `void` action) up to
/// 100 times: how many went out, and the code of the refusal that stopped it.
fn fire_and_forget(lang: &str, slow: &serde_json::Value) -> String {
    pick(
        lang,
        format!(
            "slow = {slow}\nsent = 0\ntry:\n    for _ in range(100):\n        iii.trigger(slow)\n        sent += 1\n\
             except IIIError as err:\n    result = [sent, err.code]"
        ),
        format!(
            "const slow = {slow}; let sent = 0; \
             try {{ for (let i = 0; i < 100; i++) {{ await iii.trigger(slow); sent++ }} }} \
             catch (e) {{ return [sent, e.code] }} return [sent, null]"
        ),
    )
}

/// Fire-and-forget calls are bounded per turn, in both engines: 16 in
/// flight, the 17th is `code-runner::capacity` in the guest (the worker's
/// limit, which both engines inherit). The calls are slow turns on one kept
/// runtime, which wait in its line (new nested runtimes would meet the
/// tree's share first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_and_forget_calls_are_bounded_per_turn() {
    let server = Server::start().await;
    for lang in LANGS {
        let id = server.keep_in(lang, pick(lang, "pass", "return 1")).await;
        let sleep = pick(
            lang,
            "import time\ntime.sleep(20)",
            "await new Promise((r) => setTimeout(r, 20000))",
        );
        let slow = json!({"function_id": "code-runner::run", "action": {"type": "void"},
            "payload": {"runtime_id": id, "code": sleep, "timeout_ms": 25000}});
        let answer = server
            .run_in_with(
                lang,
                &fire_and_forget(lang, &slow),
                json!({"timeout_ms": 30_000}),
            )
            .await;
        let body = answer.ok();
        assert_eq!(body["result"], json!([16, CAPACITY]), "{lang}: {body}");
    }
    server.assert_still_serves().await;
}

/// Fire-and-forget calls through the engine are bounded like local ones: 16
/// of a turn's in flight, the 17th `capacity`. Before, they went out as the
/// engine's void invocations, which nothing waits for, and one turn sent
/// 34 000 in 3 s. The target is a slow turn on a kept runtime of a second
/// worker (calls wait in its line; new runtimes would meet the share the
/// second worker charges the calling tree first), one kept runtime per
/// calling language.
#[test]
fn fire_and_forget_through_the_engine_is_bounded_per_turn() {
    let engine = EngineProc::start();
    let worker = WorkerProc::start(&engine, "cr-void");
    let slow = WorkerProc::start(&engine, "cr-slow");
    for (id, log) in [
        ("code-runner@cr-void::run", worker.log()),
        ("code-runner@cr-slow::run", slow.log()),
    ] {
        engine
            .trigger_when_registered(
                id,
                &json!({"lang": "python", "code": "result = 1", "timeout_ms": 30000}),
            )
            .unwrap_or_else(|e| panic!("{e}\n{log}"));
    }
    for lang in LANGS {
        let kept = engine
            .trigger(
                "code-runner@cr-slow::run",
                &json!({"lang": "python", "keep": true, "code": "pass"}),
            )
            .unwrap();
        let id = kept["runtime_id"].as_str().unwrap();
        let slow = json!({"function_id": "code-runner@cr-slow::run", "action": {"type": "void"},
            "payload": {"runtime_id": id, "code": "import time\ntime.sleep(20)", "timeout_ms": 25000}});
        let answer = engine
            .trigger(
                "code-runner@cr-void::run",
                &json!({"lang": lang, "timeout_ms": 30000, "code": fire_and_forget(lang, &slow)}),
            )
            .unwrap();
        assert_eq!(
            answer["result"],
            json!([16, "code-runner::capacity"]),
            "{lang}: {answer}"
        );
    }
}
