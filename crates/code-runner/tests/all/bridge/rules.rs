//! The bus bridge rules, through real HTTP and real guests of both
//! languages: denied functions are refused before dispatch with an error
//! the guest catches (python's `IIIError`, node's rejected promise), for
//! plain, fire-and-forget and queued calls and for trigger registrations,
//! in runs, nested runs and handlers, while ordinary calls keep working.

use serde_json::{Value, json};

use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{FUNCTION_NOT_FOUND, FUNCTIONS_INFO, INVALID_REQUEST, Server};

/// A `lang` run of `code` with a long budget; asserts it exits 0.
async fn run(server: &Server, lang: &str, code: &str) -> Value {
    let answer = server
        .run_in_with(lang, code, json!({"timeout_ms": 20_000}))
        .await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{lang}: {body}");
    body.clone()
}

/// The contract's done-when: a run's
/// `iii.trigger({"function_id": "state::claim-namespace", "payload": {}})`
/// is refused, and the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_namespace_is_refused_and_the_run_goes_on() {
    let server = Server::start().await;
    let python = r#"
try:
    iii.trigger({"function_id": "state::claim-namespace", "payload": {}})
    caught = None
except IIIError as e:
    caught = [e.code, e.message]
print("still running")
result = caught
"#;
    let node = r#"
let caught = null;
try {
  await iii.trigger({ function_id: "state::claim-namespace", payload: {} });
} catch (e) {
  caught = [e.code, e.message];
}
console.log("still running");
return caught;
"#;
    for lang in LANGS {
        let body = run(&server, lang, pick(lang, python, node)).await;
        assert_eq!(body["stdout"], "still running\n", "{lang}");
        assert_eq!(body["result"][0], "forbidden", "{lang}: {body}");
        let message = body["result"][1].as_str().unwrap();
        assert!(message.contains("state::claim-namespace"), "{message}");
        assert!(message.contains("bus bridge rule"), "{message}");
    }
}

/// Every denied pattern, with ids of each, and the rule that names it.
const DENIED: [(&str, &str); 10] = [
    ("state::claim-namespace", "state::claim-namespace"),
    ("harness::state::get", "harness::state::*"),
    ("harness::state::set", "harness::state::*"),
    ("harness::state::x", "harness::state::*"),
    (
        "provider-openai-codex::state::tokens",
        "provider-openai-codex::state::*",
    ),
    (
        "provider-openai-codex::state::x",
        "provider-openai-codex::state::*",
    ),
    (
        "provider::openai-codex::login::start",
        "provider::openai-codex::{login,auth}::*",
    ),
    (
        "provider::openai-codex::login::x",
        "provider::openai-codex::{login,auth}::*",
    ),
    (
        "provider::openai-codex::auth::refresh",
        "provider::openai-codex::{login,auth}::*",
    ),
    (
        "provider::openai-codex::auth::x",
        "provider::openai-codex::{login,auth}::*",
    ),
];

/// Each denied pattern is an error the guest catches: an `IIIError` with
/// `.code` "forbidden" and a message naming the function and the rule; the
/// run goes on and an ordinary call in it succeeds.
async fn each_denied_pattern_is_refused(lang: &str) {
    let server = Server::start().await;
    let ids = serde_json::to_string(&DENIED.map(|(id, _)| id)).unwrap();
    let code = pick(
        lang,
        format!(
            r#"
import json
refused = {{}}
for fid in json.loads({ids:?}):
    try:
        iii.trigger({{"function_id": fid, "payload": {{"key": "k"}}}})
        refused[fid] = None
    except IIIError as e:
        refused[fid] = [isinstance(e, IIIError), e.code, e.message]
print("still running")
ordinary = iii.trigger({{"function_id": "code-runner::run", "payload": {{"lang": "python", "code": "result = 6 * 7"}}}})
result = {{"refused": refused, "ordinary": ordinary["result"]}}
"#
        ),
        format!(
            r#"
const refused = {{}};
for (const id of {ids}) {{
  try {{
    await iii.trigger({{ function_id: id, payload: {{}} }});
    refused[id] = null;
  }} catch (e) {{
    refused[id] = [e instanceof IIIError, e.code, e.message];
  }}
}}
console.log("still running");
const ordinary = await iii.trigger({{ function_id: "code-runner::run", payload: {{ lang: "python", code: "result = 6 * 7" }} }});
return {{ refused, ordinary: ordinary.result }};
"#
        ),
    );
    let body = run(&server, lang, &code).await;
    assert_eq!(body["stdout"], "still running\n", "{lang}");
    assert_eq!(body["result"]["ordinary"], 42, "{lang}");
    for (id, rule) in DENIED {
        let refused = &body["result"]["refused"][id];
        assert_eq!(refused[0], true, "{lang} {id}: {refused}");
        assert_eq!(refused[1], "forbidden", "{lang} {id}: {refused}");
        let message = refused[2].as_str().unwrap_or("");
        assert!(
            message.contains(id) && message.contains(rule) && message.contains("bus bridge rule"),
            "{lang} {id}: {message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_denied_pattern_is_refused_in_python() {
    each_denied_pattern_is_refused("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_denied_pattern_is_refused_in_node() {
    each_denied_pattern_is_refused("node").await;
}

/// Fire-and-forget and queued calls pass the same check first; an
/// ordinary fire-and-forget call answers null at once and runs in the
/// background (a registration made so is published); a queued call is
/// refused clearly, there being no queue.
async fn fire_and_forget_and_queued_calls_are_checked(lang: &str) {
    let server = Server::start().await;
    let python = r#"
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
out["void_ordinary"] = ["answered", iii.trigger({"function_id": "engine::functions::info", "payload": {}, "action": {"type": "void"}})]
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
    let node = r#"
const attempt = async (request) => {
  try { return ["answered", await iii.trigger(request)]; } catch (e) { return [e.code, e.message]; }
};
const out = {};
out.void = (await attempt({ function_id: "harness::state::wipe", payload: {}, action: { type: "void" } }))[0];
out.enqueue = (await attempt({ function_id: "harness::state::wipe", payload: {}, action: { type: "enqueue", queue: "jobs" } }))[0];
out.enqueue_ordinary = await attempt({ function_id: "engine::functions::info", payload: { function_ids: [] }, action: { type: "enqueue", queue: "jobs" } });
out.void_ordinary = await attempt({ function_id: "engine::functions::info", payload: {}, action: { type: "void" } });
out.void_answer = await iii.trigger({ function_id: "code-runner::register_function",
  payload: { function_id: "bg::f", lang: "python", source: "def handler(p):\n    return 'from the background'\n" },
  action: { type: "void" } });
let info;
for (let i = 0; i < 400; i++) {
  info = await iii.trigger({ function_id: "engine::functions::info", payload: { function_ids: ["bg::f"] } });
  if (!("error" in info.functions[0])) break;
  await new Promise((r) => setTimeout(r, 20));
}
out.published = !("error" in info.functions[0]);
return out;
"#;
    let body = run(&server, lang, pick(lang, python, node)).await;
    let out = &body["result"];
    assert_eq!(out["void"], "forbidden", "{lang}: {out}");
    assert_eq!(out["enqueue"], "forbidden", "{lang}: {out}");
    assert_eq!(out["enqueue_ordinary"][0], INVALID_REQUEST, "{lang}: {out}");
    assert!(
        out["enqueue_ordinary"][1]
            .as_str()
            .unwrap()
            .contains("queue provider"),
        "{lang}: {out}"
    );
    assert_eq!(
        out["void_ordinary"],
        json!(["answered", null]),
        "{lang}: {out}"
    );
    assert_eq!(out["void_answer"], Value::Null, "{lang}: {out}");
    assert_eq!(out["published"], true, "{lang}: {out}");
    assert_eq!(
        server.call("bg::f", json!({})).await.ok(),
        "from the background"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_and_forget_and_queued_calls_are_checked_in_python() {
    fire_and_forget_and_queued_calls_are_checked("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_and_forget_and_queued_calls_are_checked_in_node() {
    fire_and_forget_and_queued_calls_are_checked("node").await;
}

/// A trigger registration is checked by its target: a denied target, or
/// another trigger registration, is refused before dispatch; an ordinary
/// target of an opened type (`cron` here) passes the bridge (and,
/// standalone, finds no trigger function).
async fn trigger_registration_targets_are_checked(lang: &str) {
    let server = Server::with_config("guest_trigger_types: [cron]\n").await;
    let targets = [
        ("harness::state::wipe", "harness::state::*"),
        ("state::claim-namespace", "state::claim-namespace"),
        (
            "provider::openai-codex::auth::x",
            "provider::openai-codex::{login,auth}::*",
        ),
        ("engine::register_trigger", "another trigger registration"),
    ];
    let mut ids: Vec<&str> = targets.iter().map(|(id, _)| *id).collect();
    ids.push("my-app::greet");
    let ids = serde_json::to_string(&ids).unwrap();
    let code = pick(
        lang,
        format!(
            r#"
import json
out = {{}}
for target in json.loads({ids:?}):
    try:
        iii.trigger({{"function_id": "engine::register_trigger",
                     "payload": {{"trigger_type": "cron", "function_id": target, "config": {{}}}}}})
        out[target] = None
    except IIIError as e:
        out[target] = [e.code, e.message]
result = out
"#
        ),
        format!(
            r#"
const out = {{}};
for (const target of {ids}) {{
  try {{
    await iii.trigger({{ function_id: "engine::register_trigger", payload: {{ trigger_type: "cron", function_id: target, config: {{}} }} }});
    out[target] = null;
  }} catch (e) {{
    out[target] = [e.code, e.message];
  }}
}}
return out;
"#
        ),
    );
    let body = run(&server, lang, &code).await;
    let out = &body["result"];
    for (target, part) in targets {
        assert_eq!(out[target][0], "forbidden", "{lang} {target}: {out}");
        assert!(
            out[target][1].as_str().unwrap_or("").contains(part),
            "{lang} {target}: {out}"
        );
    }
    assert_eq!(out["my-app::greet"][0], FUNCTION_NOT_FOUND, "{lang}: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_registration_targets_are_checked_in_python() {
    trigger_registration_targets_are_checked("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_registration_targets_are_checked_in_node() {
    trigger_registration_targets_are_checked("node").await;
}

/// The rules hold wherever guest code runs: in a `lang` run nested inside a
/// python run, and in a `lang` handler published with register_function
/// (whose runtime's ordinary calls still work).
async fn nested_runs_and_handlers_are_bridged(lang: &str) {
    let server = Server::start().await;
    let (nested, handler) = pick(
        lang,
        (
            "try:\n    iii.trigger({'function_id': 'state::claim-namespace', 'payload': {}})\n    result = None\nexcept IIIError as e:\n    result = e.code\n",
            "def handler(p):\n    try:\n        iii.trigger({'function_id': 'state::claim-namespace', 'payload': {}})\n        return None\n    except IIIError as e:\n        return e.code\n",
        ),
        (
            "try { await iii.trigger({ function_id: 'harness::state::get', payload: {} }); return null } catch (e) { return e.code }",
            "export async function handler() {\n  try { await iii.trigger({ function_id: 'state::claim-namespace', payload: {} }); return null; }\n  catch (e) { return e.code; }\n}\n",
        ),
    );
    let code = format!(
        "inner = iii.trigger({{'function_id': 'code-runner::run', 'payload': {{'lang': {lang:?}, 'code': {nested:?}}}}})\nresult = inner['result']\n"
    );
    assert_eq!(
        server.run(&code).await.ok()["result"],
        "forbidden",
        "{lang}"
    );
    server.registered(lang, "app::probe", handler).await;
    assert_eq!(
        server.call("app::probe", json!({})).await.ok(),
        "forbidden",
        "{lang}"
    );
    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["app::probe"]}))
        .await;
    assert!(info.ok()["functions"][0]["error"].is_null(), "{lang}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_runs_and_handlers_are_bridged_in_python() {
    nested_runs_and_handlers_are_bridged("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_runs_and_handlers_are_bridged_in_node() {
    nested_runs_and_handlers_are_bridged("node").await;
}
