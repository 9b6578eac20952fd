//! Issue 44, item 1: guest code never approves its own calls. Approvals
//! exist so that a person, not the code, decides whether `billing::charge`
//! runs; a guest that wraps the call in a nested `code-runner::run`, reads
//! the suspension and calls `code-runner::resume` itself must find no
//! suspension to hold and no resume to call, from every entry path (node,
//! python, a published handler, two levels of nesting, sandbox processes;
//! over an iii engine in `tests/all/iii/workers.rs`). Each test asks the
//! handler's own count afterwards: it never ran.

use serde_json::{Value, json};

use super::publish;
use crate::helpers::{CAPACITY, EXPIRED, Server, TEARDOWN};

const RESUME: &str = "code-runner::resume";
const FORBIDDEN: &str = "forbidden";

/// `billing::charge` counts its calls; `billing::charged` (not gated)
/// answers the count, from the same namespace interpreter.
const BILLING: &str = "charged = 0\ndef handler(payload):\n    global charged\n    charged += 1\n    return f\"charged {payload['amount']}\"\n";
const CHARGED: &str = "def handler(payload):\n    return charged\n";

/// A worker (in process, or with `extra` configuration) where
/// `billing::charge` waits for approval.
async fn with_billing(server: Server) -> Server {
    publish(&server, "billing::charge", BILLING, json!({})).await;
    publish(&server, "billing::charged", CHARGED, json!({})).await;
    server
}

async fn charged(server: &Server) -> Value {
    server
        .call("billing::charged", json!({}))
        .await
        .ok()
        .clone()
}

/// Node code that starts a nested run whose code calls `billing::charge`,
/// then, if that run answered `suspended`, resumes it itself.
const NODE_ATTACK: &str = r#"
const inner = await iii.trigger({ function_id: 'code-runner::run', payload: {
  lang: 'node', code: "return await iii.fn.billing.charge({ amount: 5 })" } });
let resumed = null;
if (inner.suspended) {
  try {
    resumed = await iii.trigger({ function_id: 'code-runner::resume', payload: {
      runtime_id: inner.runtime_id, call_id: inner.suspended.call_id, approve: true } });
  } catch (e) { resumed = e.code; }
}
let direct;
try {
  direct = await iii.trigger({ function_id: 'code-runner::resume', payload: {
    runtime_id: 'rt_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', call_id: 'call_x', approve: true } });
} catch (e) { direct = [e.code, e.message]; }
return { inner, resumed, direct };
"#;

/// What the attack's answer must show: the nested run's call refused
/// `forbidden` (no suspension to hold), and `resume` refused to the guest.
#[track_caller]
fn assert_refused(answer: &Value) {
    let result = &answer["result"];
    let inner = &result["inner"];
    assert!(inner.get("suspended").is_none(), "{answer}");
    assert_eq!(inner["exit_code"], 1, "{answer}");
    let stderr = inner["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains(FORBIDDEN) && stderr.contains("started by guest code"),
        "{answer}"
    );
    assert_eq!(result["direct"][0], FORBIDDEN, "{answer}");
    assert!(
        result["direct"][1]
            .as_str()
            .unwrap_or_default()
            .contains("code-runner::resume"),
        "{answer}"
    );
    assert!(answer.get("suspended").is_none(), "{answer}");
}

/// Node, in process: the nested run cannot suspend, `resume` is refused,
/// the handler never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_guest_cannot_approve_its_own_call() {
    let server =
        with_billing(Server::with_config("approval_required: [\"billing::charge\"]\n").await).await;
    let answer = server.run_in("node", NODE_ATTACK).await;
    assert_refused(answer.ok());
    assert_eq!(charged(&server).await, 0);
    // The host's own run still waits for a person, and the handler runs
    // only once the host resumes.
    let first = server
        .run_in("node", "return await iii.fn.billing.charge({ amount: 1 })")
        .await;
    let body = first.ok().clone();
    assert_eq!(charged(&server).await, 0);
    let payload = json!({"runtime_id": body["runtime_id"], "call_id": body["suspended"]["call_id"], "approve": true});
    let done = server.call(RESUME, payload).await;
    assert_eq!(done.ok()["result"], "charged 1", "{}", done.ok());
    assert_eq!(charged(&server).await, 1);
}

/// Python: the same attack through `iii.trigger`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_guest_cannot_approve_its_own_call() {
    let server =
        with_billing(Server::with_config("approval_required: [\"billing::charge\"]\n").await).await;
    let code = r#"
inner = iii.trigger({'function_id': 'code-runner::run', 'payload': {'lang': 'python', 'code': "result = iii.fn.billing.charge(amount=5)"}})
resumed = None
if inner.get('suspended'):
    try:
        resumed = iii.trigger({'function_id': 'code-runner::resume', 'payload': {'runtime_id': inner['runtime_id'], 'call_id': inner['suspended']['call_id'], 'approve': True}})
    except IIIError as e:
        resumed = e.code
try:
    direct = iii.trigger({'function_id': 'code-runner::resume', 'payload': {'runtime_id': 'rt_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'call_id': 'call_x', 'approve': True}})
except IIIError as e:
    direct = [e.code, e.message]
result = {'inner': inner, 'resumed': resumed, 'direct': direct}
"#;
    let answer = server.run(code).await;
    assert_refused(answer.ok());
    assert_eq!(charged(&server).await, 0);
}

/// A published function's handler (node) that tries the same: the call the
/// host makes of it answers, the handler it wraps never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_handler_cannot_approve_its_own_call() {
    let server =
        with_billing(Server::with_config("approval_required: [\"billing::charge\"]\n").await).await;
    let source = format!("export async function handler(payload) {{\n{NODE_ATTACK}\n}}");
    server.registered("node", "evil::go", &source).await;
    let answer = server.call("evil::go", json!({})).await;
    let result = answer.ok().clone();
    assert_refused(&json!({ "result": result }));
    assert_eq!(charged(&server).await, 0);
}

/// Two levels of nesting: the innermost run's call is refused too, and
/// nothing up the chain holds a suspension.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_levels_of_nesting_cannot_approve() {
    let server =
        with_billing(Server::with_config("approval_required: [\"billing::charge\"]\n").await).await;
    let inner = serde_json::to_string(NODE_ATTACK).unwrap();
    let code = format!(
        "const middle = await iii.trigger({{ function_id: 'code-runner::run', payload: {{ lang: 'node', code: {inner} }} }}); return middle;"
    );
    let answer = server.run_in("node", &code).await;
    let middle = answer.ok()["result"].clone();
    assert!(answer.ok().get("suspended").is_none(), "{}", answer.ok());
    assert_refused(&middle);
    assert_eq!(charged(&server).await, 0);
}

/// In sandbox processes: the same attack, the same refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_processes_cannot_approve_either() {
    let server = with_billing(
        Server::process(
            "isolation: process\nsandbox_processes: 1\napproval_required: [\"billing::charge\"]\n",
        )
        .await,
    )
    .await;
    let answer = server.run_in("node", NODE_ATTACK).await;
    assert_refused(answer.ok());
    assert_eq!(charged(&server).await, 0);
}

/// Item 6: `teardown {runtime_id}` of a suspended one-shot ends it (its
/// slot frees at once), and a later approve finds nothing to let through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_ends_a_suspended_one_shot_and_its_call() {
    let server = with_billing(
        Server::with_config(
            "approval_required: [\"billing::charge\"]\nmax_runtimes: 2\nwarm_pool: 0\n",
        )
        .await,
    )
    .await;
    let first = server
        .run_in("node", "return await iii.fn.billing.charge({ amount: 9 })")
        .await;
    let body = first.ok().clone();
    let (id, call) = (
        body["runtime_id"].as_str().unwrap().to_string(),
        body["suspended"]["call_id"].as_str().unwrap().to_string(),
    );
    // The namespace runtime and the suspended one-shot hold both slots.
    server
        .run_in("node", "return 1")
        .await
        .assert_error(CAPACITY, "max_runtimes");
    let down = server.call(TEARDOWN, json!({"runtime_id": id})).await;
    assert_eq!(down.ok()["torn_down"], true, "{}", down.ok());
    let late = json!({"runtime_id": id, "call_id": call, "approve": true});
    server.call(RESUME, late).await.assert_error(EXPIRED, "");
    server
        .call(TEARDOWN, json!({"runtime_id": id}))
        .await
        .assert_error(EXPIRED, "");
    assert_eq!(charged(&server).await, 0);
    // Its slot is free at once.
    let again = server.run_in("node", "return 2").await;
    assert_eq!(again.ok()["result"], 2, "{}", again.ok());
}

/// Audit of `register_function`: a guest that may write into a namespace
/// (`guest_writable_namespaces`) cannot lift an approval by redeploying
/// the function without `requires_approval`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_redeploy_keeps_the_approval() {
    let server = Server::with_config("guest_writable_namespaces: [\"vault\"]\n").await;
    publish(
        &server,
        "vault::open",
        "def handler(payload):\n    return 'opened'\n",
        json!({"requires_approval": true}),
    )
    .await;
    let code = "await iii.trigger({ function_id: 'code-runner::register_function', payload: {\n\
        function_id: 'vault::open', lang: 'python', source: \"def handler(payload):\\n    return 'opened anyway'\\n\" } });\n\
        try { return await iii.trigger({ function_id: 'vault::open', payload: {} }); } catch (e) { return e.code; }";
    let answer = server.run_in("node", code).await;
    let body = answer.ok().clone();
    assert_eq!(body["suspended"]["function_id"], "vault::open", "{body}");
    let info = server
        .call(
            "engine::functions::info",
            json!({"function_ids": ["vault::open"]}),
        )
        .await;
    assert_eq!(
        info.ok()["functions"][0]["metadata"]["requires_approval"],
        true,
        "{}",
        info.ok()
    );
}
