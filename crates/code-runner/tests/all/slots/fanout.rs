//! A run cannot hold every slot by fanning out (issue 16, item 9): the
//! one-shot runs its guest code starts through `iii.trigger` count against
//! its tree's share (an eighth of `max_runtimes`, kept ones included) and
//! end when the turn that started them answers. Before, a run that fired 40
//! nested one-shot runs, each firing more, answered in 0.2 s and left 32 of
//! 32 slots busy for 15 s.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::lang::two_plus_two;
use crate::helpers::{RUN, Server};

/// How soon after the attack's answer every slot must be free again: far
/// less than the 15 s its runs asked for, with room for a loaded machine.
const FREED_WITHIN: Duration = Duration::from_secs(6);

/// A node program that fires `code-runner::run` of itself 20 times as
/// fire-and-forget and 20 times without awaiting, then (unless it is the
/// attack's first run) sleeps 14 s.
const NODE_SPREAD: &str = r#"
async function spread(top) {
  const code = "return (" + spread.toString() + ")(false)";
  const run = { lang: "node", timeout_ms: 15000, code };
  for (let i = 0; i < 20; i++) {
    iii.trigger({ function_id: "code-runner::run", action: { type: "void" }, payload: run }).catch(() => {});
    iii.trigger({ function_id: "code-runner::run", payload: run }).catch(() => {});
  }
  if (!top) await new Promise((r) => setTimeout(r, 14000));
  return "fired";
}
return spread(true);
"#;

/// The same in python: 20 fire-and-forget runs of itself (16 get through
/// a turn's limit), then a 14 s sleep in all but the first.
const PYTHON_SPREAD: &str = r#"
BODY = '''
import time
child = "TOP = False\\nBODY = " + repr(BODY) + "\\nexec(BODY)"
for _ in range(20):
    try:
        iii.trigger({"function_id": "code-runner::run", "action": {"type": "void"},
                     "payload": {"lang": "python", "timeout_ms": 15000, "code": child}})
    except IIIError:
        pass
if not TOP:
    time.sleep(14)
result = "fired"
'''
TOP = True
exec(BODY)
"#;

/// Runs the attack in `lang` and asserts: it answers, every slot is free
/// within [`FREED_WITHIN`] of its answer, and an innocent run succeeds.
async fn attack_leaves_no_slot_busy(lang: &str, code: &str) {
    let server = Server::start().await;
    let started = Instant::now();
    let answer = server
        .call(
            RUN,
            json!({"lang": lang, "code": code, "timeout_ms": 20_000}),
        )
        .await;
    let body = answer.ok();
    assert_eq!(body["result"], "fired", "{body}");
    let answered = started.elapsed();
    let slots_in_use = server.live();
    let mut busiest = 0;
    loop {
        let live = slots_in_use();
        busiest = busiest.max(live);
        if live == 0 {
            break;
        }
        assert!(
            started.elapsed() < answered + FREED_WITHIN,
            "{live} slots still busy {:?} after the attack answered (busiest {busiest})",
            started.elapsed() - answered
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let innocent = server
        .call(RUN, json!({"lang": lang, "code": two_plus_two(lang)}))
        .await;
    assert_eq!(innocent.ok()["result"], 4, "{}", innocent.body);
}

/// Node's attack: fire-and-forget and un-awaited nested runs, recursively.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_fan_out_leaves_no_slot_busy() {
    attack_leaves_no_slot_busy("node", NODE_SPREAD).await;
}

/// Python's attack: fire-and-forget nested runs, recursively.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_fan_out_leaves_no_slot_busy() {
    attack_leaves_no_slot_busy("python", PYTHON_SPREAD).await;
}

/// What a tree may hold is bounded while its run goes on: a run that
/// waits for 8 nested runs at once gets 4 (of 32) and `capacity` for the rest.
/// (Node's: python's `iii.trigger` is synchronous, so a python run waits for
/// one nested run at a time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_one_shot_runs_count_against_the_share() {
    let server = Server::start().await;
    let code = r#"
const run = { lang: "node", timeout_ms: 3000, code: "await new Promise((r) => setTimeout(r, 1500)); return 1" };
const answers = await Promise.all(Array.from({ length: 8 }, () =>
  iii.trigger({ function_id: "code-runner::run", payload: run }).then((a) => a.result, (e) => e.code)));
return answers;
"#;
    let answer = server
        .call(
            RUN,
            json!({"lang": "node", "code": code, "timeout_ms": 20_000}),
        )
        .await;
    let body = answer.ok();
    let answers = body["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    let ran = answers.iter().filter(|a| **a == 1).count();
    let refused = answers
        .iter()
        .filter(|a| *a == "code-runner::capacity")
        .count();
    assert_eq!((ran, refused), (4, 4), "{body}");
}
