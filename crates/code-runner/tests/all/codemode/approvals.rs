//! Approvals (issue 32 item 3): guest code's call of a function that needs
//! a person's approval suspends the run, which answers `suspended` with the
//! output so far and a `runtime_id`; `code-runner::resume` goes on with the
//! same turn. Both languages, one-shot and kept runtimes, in process and in
//! sandbox processes; suspended time does not count against the timeout;
//! a suspended run holds its slot and the idle TTL ends it.

use std::time::Duration;

use serde_json::{Value, json};

use super::publish;
use crate::helpers::{CAPACITY, EXPIRED, INVALID_REQUEST, Server};

const RESUME: &str = "code-runner::resume";
const FORBIDDEN: &str = "forbidden";

/// A python handler that charges what it is asked to.
const CHARGE: &str = "def handler(payload):\n    return f\"charged {payload['amount']}\"\n";

/// A worker where every `billing::*` call waits for approval, with
/// `billing::charge` published.
async fn with_billing(extra: &str) -> Server {
    let server =
        Server::with_config(&format!("approval_required: [\"billing::*\"]\n{extra}")).await;
    publish(&server, "billing::charge", CHARGE, json!({})).await;
    server
}

/// The suspended call of an answer, checked: its function and payload.
#[track_caller]
fn suspended<'a>(answer: &'a Value, function_id: &str, payload: Value) -> (&'a str, &'a str) {
    let call = &answer["suspended"];
    assert_eq!(call["function_id"], function_id, "{answer}");
    assert_eq!(call["payload"], payload, "{answer}");
    (
        answer["runtime_id"]
            .as_str()
            .expect("a suspended run has a runtime_id"),
        call["call_id"].as_str().unwrap(),
    )
}

async fn resume(
    server: &Server,
    runtime_id: &str,
    call_id: &str,
    approve: bool,
    reason: Option<&str>,
) -> crate::helpers::Answer {
    let mut payload = json!({"runtime_id": runtime_id, "call_id": call_id, "approve": approve});
    if let Some(reason) = reason {
        payload["reason"] = json!(reason);
    }
    server.call(RESUME, payload).await
}

/// Node: a one-shot suspends with its output so far; approved, the same
/// turn goes on (the call reaches the handler) and answers as `run` does,
/// without a runtime_id; the used call and id are then refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_approve_goes_on_with_the_same_turn() {
    let server = with_billing("").await;
    let first = server
        .run_in(
            "node",
            "let n = 41; console.log('before'); const r = await iii.fn.billing.charge({ amount: 5 }); n += 1; console.log('after'); return [r, n];",
        )
        .await;
    let body = first.ok().clone();
    let (id, call) = suspended(&body, "billing::charge", json!({"amount": 5}));
    assert!(
        body["stdout"].as_str().unwrap().contains("before"),
        "{body}"
    );
    assert!(
        !body["stdout"].as_str().unwrap().contains("after"),
        "{body}"
    );
    let done = resume(&server, id, call, true, None).await;
    let done = done.ok();
    assert_eq!(done["result"], json!(["charged 5", 42]), "{done}");
    assert!(done["stdout"].as_str().unwrap().contains("after"), "{done}");
    assert!(done.get("suspended").is_none(), "{done}");
    assert!(done.get("runtime_id").is_none(), "a one-shot ends: {done}");
    resume(&server, id, call, true, None)
        .await
        .assert_error(EXPIRED, "");
}

/// Python: denied, the guest's call fails with a catchable error carrying
/// the reason, and the handler never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_deny_fails_the_call_with_the_reason() {
    let server = with_billing("").await;
    let first = server
        .run(
            "print('asking')\ntry:\n    r = iii.fn.billing.charge(amount=7)\nexcept IIIError as e:\n    r = ['denied', e.code, e.message]\nresult = r",
        )
        .await;
    let body = first.ok().clone();
    let (id, call) = suspended(&body, "billing::charge", json!({"amount": 7}));
    assert!(
        body["stdout"].as_str().unwrap().contains("asking"),
        "{body}"
    );
    let done = resume(&server, id, call, false, Some("too much")).await;
    let result = &done.ok()["result"];
    assert_eq!(result[0], "denied", "{}", done.ok());
    assert_eq!(result[1], FORBIDDEN, "{}", done.ok());
    assert!(
        result[2].as_str().unwrap().contains("too much"),
        "{}",
        done.ok()
    );
    // Approved, python's call reaches the handler.
    let again = server.run("result = iii.fn.billing.charge(amount=8)").await;
    let body = again.ok().clone();
    let (id, call) = suspended(&body, "billing::charge", json!({"amount": 8}));
    let done = resume(&server, id, call, true, None).await;
    assert_eq!(done.ok()["result"], "charged 8", "{}", done.ok());
}

/// Suspended time does not count against the run's timeout: a run of 3 s
/// waits 4 s for its approval and still ends well, in both languages (node
/// runs JavaScript at once after the call: its watchdog, too, must know the
/// deadline moved before that JavaScript runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_suspended_does_not_count_against_the_timeout() {
    let server = with_billing("").await;
    for (lang, code) in [
        (
            "node",
            "const r = await iii.fn.billing.charge({ amount: 1 }); const end = Date.now() + 100; while (Date.now() < end) {} await new Promise((ok) => setTimeout(ok, 100)); return r;",
        ),
        (
            "python",
            "import time\nr = iii.fn.billing.charge(amount=1)\ntime.sleep(0.1)\nresult = r",
        ),
    ] {
        let first = server
            .run_in_with(lang, code, json!({"timeout_ms": 3000}))
            .await;
        let body = first.ok().clone();
        let (id, call) = suspended(&body, "billing::charge", json!({"amount": 1}));
        tokio::time::sleep(Duration::from_millis(4000)).await;
        let done = resume(&server, id, call, true, None).await;
        assert_eq!(done.status, 200, "{lang}: {}", done.body);
        assert_eq!(done.ok()["result"], "charged 1", "{lang}: {}", done.ok());
        assert_eq!(done.ok()["exit_code"], 0, "{lang}: {}", done.ok());
    }
}

/// A kept runtime suspends under its own id: a run on it meanwhile is
/// refused, a wrong call_id is refused (and the call still waits), and once
/// resumed the runtime serves its next turn with its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_runtime_suspends_under_its_own_id() {
    let server = with_billing("").await;
    let kept = server
        .run_in_with(
            "node",
            "globalThis.total = 0; return 'ready'",
            json!({"keep": true}),
        )
        .await;
    let id = kept.ok()["runtime_id"].as_str().unwrap().to_string();
    let first = server
        .run_on(&id, "total += 1; return await iii.trigger({ function_id: 'billing::charge', payload: { amount: total } });")
        .await;
    let body = first.ok().clone();
    let (same, call) = suspended(&body, "billing::charge", json!({"amount": 1}));
    assert_eq!(same, id);
    server
        .run_on(&id, "return total")
        .await
        .assert_error(INVALID_REQUEST, "suspended");
    resume(&server, &id, "call_wrong", true, None)
        .await
        .assert_error(INVALID_REQUEST, "another call");
    let done = resume(&server, &id, call, true, None).await;
    assert_eq!(done.ok()["result"], "charged 1", "{}", done.ok());
    assert_eq!(done.ok()["runtime_id"], id.as_str(), "{}", done.ok());
    resume(&server, &id, call, true, None)
        .await
        .assert_error(INVALID_REQUEST, "no call waiting");
    let next = server.run_on(&id, "return total").await;
    assert_eq!(next.ok()["result"], 1, "{}", next.ok());
}

/// A suspended one-shot holds its runtime's slot (a run past
/// `max_runtimes` is refused meanwhile), and the idle TTL ends it: its
/// guest call fails, its slot frees, and its id answers `expired`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_run_holds_its_slot_until_the_ttl_ends_it() {
    let server = Server::with_config(
        "approval_required: [\"ops::*\"]\nmax_runtimes: 2\nwarm_pool: 0\nidle_ttl_secs: 2\n",
    )
    .await;
    let code = "await iii.trigger({ function_id: 'ops::delete', payload: { all: true } }); return 'deleted'";
    let mut held = Vec::new();
    for _ in 0..2 {
        let answer = server.run_in("node", code).await;
        let body = answer.ok().clone();
        let (id, call) = suspended(&body, "ops::delete", json!({"all": true}));
        held.push((id.to_string(), call.to_string()));
    }
    // (Its wait for a slot, bounded by its 300 ms timeout, ends well
    // before the TTL frees one.)
    server
        .run_in_with("node", "return 1", json!({"timeout_ms": 300}))
        .await
        .assert_error(CAPACITY, "max_runtimes");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut freed = None;
    for _ in 0..100 {
        let answer = server.run_in("node", "return 1").await;
        if answer.error_code() != Some(CAPACITY) {
            freed = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let freed = freed.expect("the reaped runs free their slots");
    assert_eq!(freed.ok()["result"], 1, "{}", freed.ok());
    for (id, call) in &held {
        resume(&server, id, call, true, None)
            .await
            .assert_error(EXPIRED, "");
    }
}

/// One call of a run waits at a time: a second, made while the first
/// waits, fails at once; a function published with `requires_approval`
/// waits too (no configuration needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_waits_at_a_time_and_requires_approval_is_honoured() {
    let server = Server::start().await;
    publish(
        &server,
        "vault::open",
        "def handler(payload):\n    return 'opened'\n",
        json!({"requires_approval": true}),
    )
    .await;
    // Door 1 asks first; door 2 asks while door 1 waits (a busy machine
    // could delay door 1's call past the timer: then door 2 waits first).
    let mut answer = server
        .run_in(
            "node",
            "const open = (door) => iii.trigger({ function_id: 'vault::open', payload: { door } }).then((r) => r, (e) => e.message);\n\
             const one = open(1); await new Promise((ok) => setTimeout(ok, 300)); const two = open(2);\n\
             return [await one, await two];",
        )
        .await
        .ok()
        .clone();
    let mut waited = Vec::new();
    while answer.get("suspended").is_some() {
        let door = answer["suspended"]["payload"]["door"].as_u64().unwrap();
        let (id, call) = suspended(&answer, "vault::open", json!({"door": door}));
        waited.push(door);
        answer = resume(&server, id, call, true, None).await.ok().clone();
    }
    let result = &answer["result"];
    // One call waited and was approved; the other was refused at once
    // (unless the first had been decided before the second was made).
    assert!(!waited.is_empty() && waited.len() <= 2, "{waited:?}");
    if let [door] = waited[..] {
        let (mine, other) = if door == 1 { (0, 1) } else { (1, 0) };
        assert_eq!(result[mine], "opened", "{answer}");
        assert!(
            result[other].as_str().unwrap().contains("already waits"),
            "{answer}"
        );
    } else {
        assert_eq!(result, &json!(["opened", "opened"]), "{answer}");
    }
}

/// In sandbox processes the turn's clock stops there too: a 3 s run waits
/// 4 s for approval and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_processes_stop_the_clock_too() {
    let server = Server::process(
        "isolation: process\nsandbox_processes: 1\napproval_required: [\"ops::*\"]\n",
    )
    .await;
    for (lang, code) in [
        (
            "node",
            "try { await iii.trigger({ function_id: 'ops::ping', payload: {} }); } catch (e) { return e.message; }",
        ),
        (
            "python",
            "try:\n    iii.trigger({'function_id': 'ops::ping', 'payload': {}})\nexcept IIIError as e:\n    result = e.message\n",
        ),
    ] {
        let first = server
            .run_in_with(lang, code, json!({"timeout_ms": 3000}))
            .await;
        let body = first.ok().clone();
        let (id, call) = suspended(&body, "ops::ping", json!({}));
        tokio::time::sleep(Duration::from_millis(4000)).await;
        let done = resume(&server, id, call, false, Some("not now")).await;
        let text = done.ok()["result"].as_str().unwrap_or_default().to_string();
        assert!(text.contains("not now"), "{lang}: {}", done.ok());
    }
}
