//! The bus bridge rules, through real HTTP and real python guests: denied
//! functions are refused before dispatch with an error the guest catches,
//! for plain, fire-and-forget and queued calls and for trigger
//! registrations, while ordinary calls in the same run keep working.

use serde_json::{Value, json};

use crate::helpers::{FUNCTIONS_INFO, INVALID_REQUEST, Server};

/// The contract's done-when: a python run's
/// `iii.trigger({"function_id": "state::claim-namespace", "payload": {}})`
/// is refused, and the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_namespace_is_refused_and_the_run_goes_on() {
    let server = Server::start().await;
    let code = r#"
try:
    iii.trigger({"function_id": "state::claim-namespace", "payload": {}})
    caught = None
except IIIError as e:
    caught = [e.code, e.message]
print("still running")
result = caught
"#;
    let answer = server.run(code).await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    assert_eq!(body["stdout"], "still running\n");
    assert_eq!(body["result"][0], "forbidden");
    let message = body["result"][1].as_str().unwrap();
    assert!(message.contains("state::claim-namespace"), "{message}");
    assert!(message.contains("bus bridge rule"), "{message}");
}

/// Each denied pattern is refused, naming the function and the rule, while
/// an ordinary call in the same run succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_denied_pattern_is_refused_while_ordinary_calls_work() {
    let server = Server::start().await;
    let code = r#"
denied = [
    "state::claim-namespace",
    "harness::state::get",
    "harness::state::set",
    "provider-openai-codex::state::tokens",
    "provider::openai-codex::login::start",
    "provider::openai-codex::auth::refresh",
]
refused = {}
for fid in denied:
    try:
        iii.trigger({"function_id": fid, "payload": {"key": "k"}})
        refused[fid] = None
    except IIIError as e:
        refused[fid] = [e.code, e.message]
ordinary = iii.trigger({"function_id": "code-runner::run", "payload": {"lang": "python", "code": "result = 6 * 7"}})
result = {"refused": refused, "ordinary": ordinary["result"]}
"#;
    let answer = server.run(code).await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    assert_eq!(body["result"]["ordinary"], 42);
    let rules = [
        ("state::claim-namespace", "state::claim-namespace"),
        ("harness::state::get", "harness::state::*"),
        ("harness::state::set", "harness::state::*"),
        (
            "provider-openai-codex::state::tokens",
            "provider-openai-codex::state::*",
        ),
        (
            "provider::openai-codex::login::start",
            "provider::openai-codex::{login,auth}::*",
        ),
        (
            "provider::openai-codex::auth::refresh",
            "provider::openai-codex::{login,auth}::*",
        ),
    ];
    for (id, rule) in rules {
        let refused = &body["result"]["refused"][id];
        assert_eq!(refused[0], "forbidden", "{id}: {refused}");
        let message = refused[1].as_str().unwrap_or("");
        assert!(
            message.contains(id) && message.contains(rule),
            "{id}: {message}"
        );
    }
}

/// Fire-and-forget and queued calls pass the same check first; an
/// ordinary fire-and-forget call answers null at once and runs in the
/// background; a queued call is refused clearly, there being no queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_and_forget_and_queued_calls_are_checked_too() {
    let server = Server::start().await;
    let code = r#"
import time
out = {}
for name, action in [("void", {"type": "void"}), ("enqueue", {"type": "enqueue", "queue": "jobs"})]:
    try:
        iii.trigger({"function_id": "harness::state::wipe", "payload": {}, "action": action})
        out[name] = None
    except IIIError as e:
        out[name] = e.code
try:
    iii.trigger({"function_id": "engine::functions::info", "payload": {"function_ids": []}, "action": {"type": "enqueue", "queue": "jobs"}})
except IIIError as e:
    out["enqueue_ordinary"] = [e.code, e.message]
register = {"function_id": "code-runner::register_function",
            "payload": {"function_id": "bg::f", "lang": "python", "source": "def handler(p):\n    return 'from the background'\n"},
            "action": {"type": "void"}}
out["void_answer"] = iii.trigger(register)
for _ in range(400):
    info = iii.trigger({"function_id": "engine::functions::info", "payload": {"function_ids": ["bg::f"]}})
    if "error" not in info["functions"][0]:
        break
    time.sleep(0.02)
out["published"] = "error" not in info["functions"][0]
result = out
"#;
    let answer = server.run_with(code, json!({"timeout_ms": 20_000})).await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    let out = &body["result"];
    assert_eq!(out["void"], "forbidden", "{out}");
    assert_eq!(out["enqueue"], "forbidden", "{out}");
    assert_eq!(out["enqueue_ordinary"][0], INVALID_REQUEST);
    assert!(
        out["enqueue_ordinary"][1]
            .as_str()
            .unwrap()
            .contains("queue provider"),
        "{out}"
    );
    assert_eq!(out["void_answer"], Value::Null);
    assert_eq!(out["published"], true, "{out}");
    assert_eq!(
        server.call("bg::f", json!({})).await.ok(),
        "from the background"
    );
}

/// A trigger registration is checked by its target: a denied target, or
/// another trigger registration, is refused before dispatch; an ordinary
/// target of an opened type passes the bridge (and, standalone, finds no
/// trigger function).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_registration_targets_are_checked() {
    let server = Server::with_config("guest_trigger_types: [cron]\n").await;
    let code = r#"
out = {}
for target in ["harness::state::wipe", "state::claim-namespace", "engine::register_trigger", "my-app::greet"]:
    try:
        iii.trigger({"function_id": "engine::register_trigger",
                     "payload": {"trigger_type": "cron", "function_id": target, "config": {}}})
        out[target] = None
    except IIIError as e:
        out[target] = [e.code, e.message]
result = out
"#;
    let answer = server.run(code).await;
    let out = &answer.ok()["result"];
    for (target, part) in [
        ("harness::state::wipe", "harness::state::*"),
        ("state::claim-namespace", "state::claim-namespace"),
        ("engine::register_trigger", "another trigger registration"),
    ] {
        assert_eq!(out[target][0], "forbidden", "{target}: {out}");
        assert!(
            out[target][1].as_str().unwrap().contains(part),
            "{target}: {out}"
        );
    }
    assert_eq!(out["my-app::greet"][0], "function_not_found", "{out}");
}

/// The rules hold wherever guest code runs: in a nested run and in a
/// registered handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_runs_and_handlers_are_bridged_too() {
    let server = Server::start().await;
    let probe = "try:\n    iii.trigger({'function_id': 'state::claim-namespace', 'payload': {}})\n    caught = None\nexcept IIIError as e:\n    caught = e.code\n";
    let nested = format!("{probe}result = caught\n");
    let code = format!(
        "inner = iii.trigger({{'function_id': 'code-runner::run', 'payload': {{'lang': 'python', 'code': {nested:?}}}}})\nresult = inner['result']\n"
    );
    assert_eq!(server.run(&code).await.ok()["result"], "forbidden");
    server
        .registered(
            "python",
            "app::probe",
            &format!(
                "def handler(p):\n{}    return caught\n",
                probe
                    .lines()
                    .map(|l| format!("    {l}\n"))
                    .collect::<String>()
            ),
        )
        .await;
    assert_eq!(server.call("app::probe", json!({})).await.ok(), "forbidden");
    // An ordinary call from the handler's runtime still works.
    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["app::probe"]}))
        .await;
    assert!(info.ok()["functions"][0]["error"].is_null());
}
