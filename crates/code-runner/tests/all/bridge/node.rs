//! Node guest code on the bus, through real HTTP and real V8: the bus
//! bridge rules refuse denied functions with a rejected promise the guest
//! catches (plain, fire-and-forget and queued calls, trigger registration
//! targets, in runs and in handlers), and `iii.registerFunction` publishes
//! functions for the life of the runtime that registered them.

use serde_json::{Value, json};

use crate::helpers::{FUNCTION_NOT_FOUND, FUNCTIONS_INFO, INVALID_REQUEST, RUN, Server, TEARDOWN};

async fn node(server: &Server, code: &str) -> Value {
    let answer = server
        .call(
            RUN,
            json!({"lang": "node", "code": code, "timeout_ms": 20_000}),
        )
        .await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    body.clone()
}

/// Each denied pattern is a rejected promise the guest catches: an
/// `IIIError` with `.code` "forbidden" and a message naming the function
/// and the rule; the run goes on and an ordinary call in it succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_denied_pattern_is_a_caught_rejection_while_ordinary_calls_work() {
    let server = Server::start().await;
    let code = r#"
const denied = [
  "state::claim-namespace",
  "harness::state::x",
  "provider-openai-codex::state::x",
  "provider::openai-codex::login::x",
  "provider::openai-codex::auth::x",
];
const refused = {};
for (const id of denied) {
  try {
    await iii.trigger({ function_id: id, payload: {} });
    refused[id] = null;
  } catch (e) {
    refused[id] = [e instanceof IIIError, e.code, e.message];
  }
}
console.log("still running");
const ordinary = await iii.trigger({ function_id: "code-runner::run", payload: { lang: "python", code: "result = 6 * 7" } });
return { refused, ordinary: ordinary.result };
"#;
    let body = node(&server, code).await;
    assert_eq!(body["stdout"], "still running\n");
    assert_eq!(body["result"]["ordinary"], 42);
    for (id, rule) in [
        ("state::claim-namespace", "state::claim-namespace"),
        ("harness::state::x", "harness::state::*"),
        (
            "provider-openai-codex::state::x",
            "provider-openai-codex::state::*",
        ),
        (
            "provider::openai-codex::login::x",
            "provider::openai-codex::{login,auth}::*",
        ),
        (
            "provider::openai-codex::auth::x",
            "provider::openai-codex::{login,auth}::*",
        ),
    ] {
        let refused = &body["result"]["refused"][id];
        assert_eq!(refused[0], true, "{id}: {refused}");
        assert_eq!(refused[1], "forbidden", "{id}: {refused}");
        let message = refused[2].as_str().unwrap_or("");
        assert!(
            message.contains(id) && message.contains(rule) && message.contains("bus bridge rule"),
            "{id}: {message}"
        );
    }
}

/// Fire-and-forget and queued calls pass the same check; a trigger
/// registration is checked by its target (a denied one, or another trigger
/// registration, is refused) while an ordinary target passes the bridge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn void_enqueue_and_trigger_targets_are_checked_from_node() {
    // `cron` opened, so an ordinary target passes the bridge.
    let server = Server::with_config("guest_trigger_types: [cron]\n").await;
    let code = r#"
const attempt = async (request) => {
  try { return ["answered", await iii.trigger(request)]; } catch (e) { return [e.code, e.message]; }
};
const out = {};
out.void = await attempt({ function_id: "harness::state::wipe", payload: {}, action: { type: "void" } });
out.enqueue = await attempt({ function_id: "harness::state::wipe", payload: {}, action: { type: "enqueue", queue: "jobs" } });
out.void_ordinary = await attempt({ function_id: "engine::functions::info", payload: {}, action: { type: "void" } });
for (const target of ["provider::openai-codex::auth::x", "engine::register_trigger", "my-app::greet"]) {
  out[target] = await attempt({ function_id: "engine::register_trigger", payload: { trigger_type: "cron", function_id: target, config: {} } });
}
return out;
"#;
    let out = node(&server, code).await["result"].clone();
    assert_eq!(out["void"][0], "forbidden", "{out}");
    assert_eq!(out["enqueue"][0], "forbidden", "{out}");
    assert_eq!(out["void_ordinary"], json!(["answered", null]), "{out}");
    for (target, part) in [
        (
            "provider::openai-codex::auth::x",
            "provider::openai-codex::{login,auth}::*",
        ),
        ("engine::register_trigger", "another trigger registration"),
    ] {
        assert_eq!(out[target][0], "forbidden", "{target}: {out}");
        assert!(
            out[target][1].as_str().unwrap_or("").contains(part),
            "{target}: {out}"
        );
    }
    assert_eq!(out["my-app::greet"][0], FUNCTION_NOT_FOUND, "{out}");
}

/// The rules hold in a node handler published with register_function, and
/// in a node run nested inside a python run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_handlers_and_nested_node_runs_are_bridged_too() {
    let server = Server::start().await;
    server.registered("node", "app::probe",
        "export async function handler() {\n  try { await iii.trigger({ function_id: 'state::claim-namespace', payload: {} }); return null; }\n  catch (e) { return e.code; }\n}\n",
    )
    .await;
    assert_eq!(server.call("app::probe", json!({})).await.ok(), "forbidden");
    let nested = "try { await iii.trigger({ function_id: 'harness::state::get', payload: {} }); return null } catch (e) { return e.code }";
    let code = format!(
        "inner = iii.trigger({{'function_id': 'code-runner::run', 'payload': {{'lang': 'node', 'code': {nested:?}}}}})\nresult = inner['result']\n"
    );
    assert_eq!(server.run(&code).await.ok()["result"], "forbidden");
}

/// `iii.registerFunction` from a kept node runtime publishes a function:
/// listed in `engine::functions::info` with its description and formats,
/// callable over HTTP with the runtime's state, its handler's throw a
/// `handler_error`; a refused registration is a caught rejection. Tearing the
/// kept runtime down unregisters it and lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_node_runtime_publishes_with_register_function_until_teardown() {
    let server = Server::start().await;
    let code = r#"
globalThis.count = 0;
const answer = await iii.registerFunction("tools::echo", (payload) => ({ echo: payload, n: ++globalThis.count }),
  { description: "Echo it.", request_format: { type: "object" } });
await iii.registerFunction("tools::fail", () => { throw new TypeError("tool broke"); });
let refused;
try { await iii.registerFunction("state::claim-namespace", () => 1); } catch (e) { refused = [e.code, e.message]; }
return { answer, refused };
"#;
    let answer = server
        .call(RUN, json!({"lang": "node", "keep": true, "code": code}))
        .await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    let id = body["runtime_id"].as_str().expect("runtime_id").to_string();
    assert_eq!(
        body["result"]["answer"],
        json!({"function_id": "tools::echo", "registered": true})
    );
    assert_eq!(body["result"]["refused"][0], INVALID_REQUEST, "{body}");
    assert!(
        body["result"]["refused"][1]
            .as_str()
            .unwrap_or("")
            .contains("reserved"),
        "{body}"
    );

    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["tools::echo"]}))
        .await;
    let entry = &info.ok()["functions"][0];
    assert_eq!(entry["description"], "Echo it.");
    assert_eq!(entry["request_schema"], json!({"type": "object"}));
    assert_eq!(entry["response_schema"]["title"], "any");
    assert_eq!(entry["metadata"]["lang"], "node");
    for n in 1..=2 {
        assert_eq!(
            server.call("tools::echo", json!({"x": 1})).await.ok(),
            &json!({"echo": {"x": 1}, "n": n})
        );
    }
    assert_eq!(server.run_on(&id, "return count").await.ok()["result"], 2);
    server
        .call("tools::fail", json!({}))
        .await
        .assert_error(crate::helpers::HANDLER_ERROR, "TypeError: tool broke");

    let torn = server.teardown(&id).await;
    assert_eq!(
        torn.ok()["unregistered"],
        json!(["tools::echo", "tools::fail"])
    );
    for gone in ["tools::echo", "tools::fail"] {
        server
            .call(gone, json!({}))
            .await
            .assert_error(FUNCTION_NOT_FOUND, gone);
    }
}

/// A one-shot node run's registrations end with the run; a kept one's end
/// with the runtime, torn down by its id (a teardown by the namespace's name
/// is refused: the id is the capability, see `tenants.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_end_with_the_run_or_the_namespace_teardown() {
    let server = Server::start().await;
    let body = node(
        &server,
        "await iii.registerFunction('brief::f', () => 1); return (await iii.trigger({ function_id: 'engine::functions::info', payload: { function_ids: ['brief::f'] } })).functions[0].description",
    )
    .await;
    assert!(
        body["result"].is_string(),
        "published during the run: {body}"
    );
    server
        .call("brief::f", json!({}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, "brief::f");

    let answer = server
        .call(
            RUN,
            json!({"lang": "node", "keep": true,
                   "code": "await iii.registerFunction('tools::x', () => 'x')"}),
        )
        .await;
    let id = answer.ok()["runtime_id"]
        .as_str()
        .expect("runtime_id")
        .to_string();
    assert_eq!(server.call("tools::x", json!({})).await.ok(), "x");
    server
        .call(TEARDOWN, json!({"namespace": "tools"}))
        .await
        .assert_error(crate::helpers::INVALID_REQUEST, "runtime_id");
    let torn = server.call(TEARDOWN, json!({"runtime_id": id})).await;
    assert_eq!(
        torn.ok(),
        &json!({"torn_down": true, "runtime_id": id, "unregistered": ["tools::x"]})
    );
    server
        .run_on(&id, "return 1")
        .await
        .assert_error(crate::helpers::EXPIRED, "torn down");
}

/// A runtime whose isolate a heap kill replaced keeps serving with fresh
/// state, and what its guest code registered goes with the old isolate:
/// unregistered (function_not_found, not listed) rather than left published
/// answering errors, and free to be registered again. The same holds for an
/// id a namespace handler registered, while the namespace's own handlers
/// are defined again from their sources.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heap_kill_unregisters_what_the_lost_isolate_registered() {
    let server = Server::with_config("heap_mb: 48\n").await;
    let bomb = "const a = []; for (;;) a.push(new Array(1e6).fill(1))";
    let register = "globalThis.g = 1; await iii.registerFunction('tools::x', () => 'x')";
    let answer = server
        .call(RUN, json!({"lang": "node", "keep": true, "code": register}))
        .await;
    let id = answer.ok()["runtime_id"]
        .as_str()
        .expect("runtime_id")
        .to_string();
    assert_eq!(server.call("tools::x", json!({})).await.ok(), "x");
    server
        .run_on(&id, bomb)
        .await
        .assert_error(crate::helpers::RESOURCE_EXHAUSTED, "heap limit 48 MiB");
    server
        .call("tools::x", json!({}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, "tools::x");
    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["tools::x"]}))
        .await;
    assert!(
        info.ok()["functions"][0]["error"].is_string(),
        "{}",
        info.body
    );
    let again = server
        .run_on(&id, &format!("{register}; return typeof g"))
        .await;
    assert_eq!(again.ok()["result"], "number", "{}", again.body);
    assert_eq!(server.call("tools::x", json!({})).await.ok(), "x");
    let torn = server.teardown(&id).await;
    assert_eq!(torn.ok()["unregistered"], json!(["tools::x"]));

    let source = format!(
        "export async function handler(p) {{\n  if (p.reg) {{ await iii.registerFunction('ns::extra', () => 'extra'); return 'reg'; }}\n  if (p.bomb) {{ {bomb} }}\n  return 'main';\n}}\n"
    );
    server.registered("node", "ns::main", &source).await;
    assert_eq!(
        server.call("ns::main", json!({"reg": true})).await.ok(),
        "reg"
    );
    assert_eq!(server.call("ns::extra", json!({})).await.ok(), "extra");
    server
        .call("ns::main", json!({"bomb": true}))
        .await
        .assert_error(crate::helpers::RESOURCE_EXHAUSTED, "heap limit 48 MiB");
    server
        .call("ns::extra", json!({}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, "ns::extra");
    assert_eq!(server.call("ns::main", json!({})).await.ok(), "main");
    let torn = server.call(TEARDOWN, json!({"namespace": "ns"})).await;
    assert_eq!(torn.ok()["unregistered"], json!(["ns::main"]));
}
