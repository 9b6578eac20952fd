//! Node's `iii.registerFunction`, through real HTTP and real V8: a runtime
//! publishes functions for its own life (a one-shot run's end with the run,
//! a kept runtime's with its teardown, a lost isolate's with the isolate).
//! (Node's: python's `iii` has no registrar; python guest code registers
//! through `code-runner::register_function`, see `namespaces::own`.)

use serde_json::{Value, json};

use crate::helpers::{
    EXPIRED, FUNCTION_NOT_FOUND, FUNCTIONS_INFO, HANDLER_ERROR, INVALID_REQUEST,
    RESOURCE_EXHAUSTED, RUN, Server, TEARDOWN,
};

/// A node run of `code` with a long budget; asserts it exits 0.
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
        .assert_error(HANDLER_ERROR, "TypeError: tool broke");

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
/// is refused: the id is the capability, see `namespaces::tenants`).
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
        .assert_error(INVALID_REQUEST, "runtime_id");
    let torn = server.call(TEARDOWN, json!({"runtime_id": id})).await;
    assert_eq!(
        torn.ok(),
        &json!({"torn_down": true, "runtime_id": id, "unregistered": ["tools::x"]})
    );
    server
        .run_on(&id, "return 1")
        .await
        .assert_error(EXPIRED, "torn down");
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
        .assert_error(RESOURCE_EXHAUSTED, "heap limit 48 MiB");
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
        .assert_error(RESOURCE_EXHAUSTED, "heap limit 48 MiB");
    server
        .call("ns::extra", json!({}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, "ns::extra");
    assert_eq!(server.call("ns::main", json!({})).await.ok(), "main");
    let torn = server.call(TEARDOWN, json!({"namespace": "ns"})).await;
    assert_eq!(torn.ok()["unregistered"], json!(["ns::main"]));
}
