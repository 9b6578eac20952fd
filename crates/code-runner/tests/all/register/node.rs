//! `code-runner::register_function` with `lang: "node"`, through real HTTP
//! and real V8: the seed's example as an ES module, state kept between
//! invocations, registration refused without a handler, handler errors,
//! replacement, one registry across languages, teardown of a namespace that
//! holds both languages, and a namespace runtime that recovers after a fault.

use serde_json::json;

use crate::helpers::{
    FUNCTION_NOT_FOUND, FUNCTIONS_INFO, INVALID_REQUEST, RESOURCE_EXHAUSTED, RUN,
    RUNTIME_NOT_FOUND, Server, TEARDOWN, TIMEOUT,
};
use crate::helpers::{HANDLER_ERROR, REGISTER};

/// The contract's `my-app::greet` example, written as node source.
const GREET: &str = r#"const greetings = { en: "hello", pt: "olá" };

export function handler(payload) {
  return greetings[payload.lang ?? "en"] ?? "hello";
}
"#;

/// The seed's example in node answers "olá" for `{"lang": "pt"}` over
/// `POST /v1/call/my-app::greet`; the info says node; a namespace teardown
/// lists it and it stops resolving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_greet_example_registers_answers_and_tears_down() {
    let server = Server::start().await;
    server.registered("node", "my-app::greet", GREET).await;
    let answer = server
        .post_raw("my-app::greet", br#"{"lang":"pt"}"#.to_vec())
        .await;
    assert_eq!(answer.ok(), "olá");
    assert_eq!(server.call("my-app::greet", json!({})).await.ok(), "hello");
    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["my-app::greet"]}))
        .await;
    assert_eq!(
        info.ok()["functions"][0]["metadata"],
        json!({"lang": "node", "namespace": "my-app::"})
    );

    let torn = server.call(TEARDOWN, json!({"namespace": "my-app"})).await;
    assert_eq!(
        torn.ok(),
        &json!({"torn_down": true, "unregistered": ["my-app::greet"], "namespace": "my-app::"})
    );
    server
        .call("my-app::greet", json!({"lang": "pt"}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, "my-app::greet");
    server.assert_still_serves().await;
}

/// Module state persists from one call to the next; `globalThis` is
/// shared by the namespace's handlers; `iii.namespace` is the namespace
/// string in a namespace runtime (with node's registrar beside it) and, in a
/// plain node run, the run's own namespace (`rt-…`, see `own_namespace.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_state_is_kept_and_iii_namespace_is_the_namespace() {
    let server = Server::start().await;
    let counter = "let calls = 0;\nexport function handler() {\n  calls += 1;\n  globalThis.seen = calls;\n  return calls;\n}\n";
    server.registered("node", "count::up", counter).await;
    for expected in 1..=3 {
        assert_eq!(server.call("count::up", json!({})).await.ok(), expected);
    }
    server.registered("node", "count::who",
        "export async function handler() {\n  await null;\n  return [globalThis.seen, iii.namespace, typeof iii.registerFunction];\n}\n",
    )
    .await;
    assert_eq!(
        server.call("count::who", json!(null)).await.ok(),
        &json!([3, "count", "function"])
    );
    assert_eq!(server.call("count::up", json!({})).await.ok(), 4);
    let plain = server
        .call(RUN, json!({"lang": "node", "code": "return iii.namespace"}))
        .await;
    let own = plain.ok()["result"].as_str().unwrap_or("");
    assert!(own.starts_with("rt-"), "{}", plain.body);
}

/// Source without a callable exported `handler` (or that does not compile)
/// fails the registration with `invalid_request`: the id never reaches the
/// bus, no runtime is left behind, and a corrected redeploy of the same id
/// works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_source_without_handler_is_refused_and_a_corrected_redeploy_works() {
    let server = Server::start().await;
    for source in ["export const x = 1;\n", "export const handler = 42;\n"] {
        server
            .register("node", "app::f", source)
            .await
            .assert_error(INVALID_REQUEST, "exports no handler function");
    }
    server
        .register(
            "node",
            "app::f",
            "export function handler(p) { return 1 +; }\n",
        )
        .await
        .assert_error(INVALID_REQUEST, "SyntaxError");
    server
        .register("node", "app::f", "throw new Error('at import');\n")
        .await
        .assert_error(INVALID_REQUEST, "at import");
    server
        .call("app::f", json!({}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, "app::f");
    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["app::f"]}))
        .await;
    assert!(
        info.ok()["functions"][0]["error"].is_string(),
        "{}",
        info.body
    );
    server
        .call(TEARDOWN, json!({"namespace": "app"}))
        .await
        .assert_error(RUNTIME_NOT_FOUND, "app::");

    server
        .registered(
            "node",
            "app::f",
            "export function handler(p) { return p.n * 2; }\n",
        )
        .await;
    assert_eq!(server.call("app::f", json!({"n": 21})).await.ok(), 42);
}

/// A handler that throws, or whose promise rejects, is
/// `code-runner::handler_error` carrying its message (and the id); the
/// function keeps serving good input afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throwing_node_handler_is_handler_error_with_its_message() {
    let server = Server::start().await;
    let source = "export function handler(p) {\n  if (p.lang !== 'en' && p.lang !== 'pt') throw new RangeError('unknown lang ' + p.lang);\n  return p.lang;\n}\n";
    server.registered("node", "app::lang", source).await;
    let answer = server.call("app::lang", json!({"lang": "xx"})).await;
    answer.assert_error(HANDLER_ERROR, "RangeError: unknown lang xx");
    assert_eq!(answer.status.as_u16(), 502);
    assert!(
        answer.error_message().contains("app::lang"),
        "{}",
        answer.body
    );
    assert_eq!(
        server.call("app::lang", json!({"lang": "pt"})).await.ok(),
        "pt"
    );

    server.registered("node", "app::later",
        "export async function handler() {\n  await new Promise((r) => setTimeout(r, 5));\n  throw new Error('rejected later');\n}\n",
    )
    .await;
    server
        .call("app::later", json!({}))
        .await
        .assert_error(HANDLER_ERROR, "Error: rejected later");
    server
        .registered(
            "node",
            "app::loud",
            "export function handler() { throw new Error('x'.repeat(1_000_000)); }\n",
        )
        .await;
    let answer = server.call("app::loud", json!({})).await;
    answer.assert_error(HANDLER_ERROR, "Error: xxx");
    assert!(
        answer.error_message().len() < 8192,
        "{}",
        answer.error_message().len()
    );
}

/// Re-registering a node id replaces its handler and description; a failed
/// redeploy of an existing id leaves the old one serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reregistering_a_node_id_replaces_and_a_failed_redeploy_keeps_the_old() {
    let server = Server::start().await;
    server
        .registered(
            "node",
            "app::v",
            "export function handler() { return 1; }\n",
        )
        .await;
    assert_eq!(server.call("app::v", json!({})).await.ok(), 1);
    server
        .call(
            REGISTER,
            json!({"function_id": "app::v", "lang": "node", "description": "Version two.",
                   "source": "export function handler() { return 2; }\n"}),
        )
        .await
        .ok();
    assert_eq!(server.call("app::v", json!({})).await.ok(), 2);
    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["app::v"]}))
        .await;
    assert_eq!(info.ok()["functions"][0]["description"], "Version two.");
    server
        .register("node", "app::v", "export function helper() {}\n")
        .await
        .assert_error(INVALID_REQUEST, "exports no handler function");
    assert_eq!(server.call("app::v", json!({})).await.ok(), 2);
}

/// One registry across languages, node first this time: an id held in node
/// cannot be registered in python (the error names node). Both languages
/// may share the namespace under different ids, and one namespace teardown
/// destroys both runtimes, listing every id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_python_share_one_registry_and_one_namespace_teardown() {
    let server = Server::start().await;
    let live = || {
        server.worker().health()["runtimes"]["live"]
            .as_u64()
            .unwrap_or(99)
    };
    let before = live();
    server.registered("node", "my-app::greet", GREET).await;
    let answer = server
        .call(
            REGISTER,
            json!({"function_id": "my-app::greet", "lang": "python",
                   "source": "def handler(p):\n    return 'hi'\n"}),
        )
        .await;
    answer.assert_error(INVALID_REQUEST, "already registered in node");
    assert_eq!(
        server
            .call("my-app::greet", json!({"lang": "pt"}))
            .await
            .ok(),
        "olá"
    );

    server
        .registered(
            "python",
            "my-app::shout",
            "def handler(p):\n    return p['text'].upper()\n",
        )
        .await;
    server
        .registered(
            "node",
            "my-app::users::count",
            "export function handler() { return 2; }\n",
        )
        .await;
    assert_eq!(live(), before + 2, "one runtime per namespace and language");
    assert_eq!(
        server
            .call("my-app::shout", json!({"text": "oi"}))
            .await
            .ok(),
        "OI"
    );

    let torn = server
        .call(TEARDOWN, json!({"namespace": "my-app::"}))
        .await;
    assert_eq!(
        torn.ok(),
        &json!({"torn_down": true, "namespace": "my-app::",
                "unregistered": ["my-app::greet", "my-app::shout", "my-app::users::count"]})
    );
    for id in ["my-app::greet", "my-app::shout", "my-app::users::count"] {
        server
            .call(id, json!({}))
            .await
            .assert_error(FUNCTION_NOT_FOUND, id);
    }
    assert_eq!(live(), before);
    // With node's hold gone, python may take the id.
    server
        .registered(
            "python",
            "my-app::greet",
            "def handler(p):\n    return 'py'\n",
        )
        .await;
    assert_eq!(server.call("my-app::greet", json!({})).await.ok(), "py");
}

/// A node handler that times out, or exhausts its heap (the isolate is
/// replaced), answers the fault's own error; the namespace then recovers on
/// its own: the next call of every handler works, defined again from the
/// stored source where the isolate was lost, as python's namespaces do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faulted_node_namespace_serves_its_next_call() {
    let server = Server::with_config("default_timeout_ms: 3000\nheap_mb: 48\n").await;
    let source = "globalThis.GREETING = 'hi';\nlet calls = 0;\nexport function handler(p) {\n  if (p.hang) for (;;) {}\n  if (p.bomb) { const a = []; for (;;) a.push(new Array(1e6).fill(1)); }\n  calls += 1;\n  return [GREETING, calls];\n}\n";
    server.registered("node", "slow::f", source).await;
    server
        .registered(
            "node",
            "slow::g",
            "export function handler() { return GREETING + '!'; }\n",
        )
        .await;
    assert_eq!(
        server.call("slow::f", json!({})).await.ok(),
        &json!(["hi", 1])
    );

    server
        .call("slow::f", json!({"hang": true}))
        .await
        .assert_error(TIMEOUT, "ms");
    assert_eq!(server.call("slow::g", json!({})).await.ok(), "hi!");
    let after_timeout = server.call("slow::f", json!({})).await;
    assert_eq!(after_timeout.ok()[0], "hi", "{}", after_timeout.body);

    server
        .call("slow::f", json!({"bomb": true}))
        .await
        .assert_error(RESOURCE_EXHAUSTED, "heap limit 48 MiB exceeded");
    // A fresh isolate: every handler defined again, in registration order,
    // so the global the first source sets is there for the second.
    assert_eq!(server.call("slow::g", json!({})).await.ok(), "hi!");
    assert_eq!(
        server.call("slow::f", json!({})).await.ok(),
        &json!(["hi", 1])
    );
    server.assert_still_serves().await;
}

/// Models write every handler form: each registers over HTTP and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_handlers_register_in_every_common_form() {
    let server = Server::start().await;
    for (i, source) in [
        "function handler(p) { return p.n * 2; }",
        "async function handler(p) { return p.n * 2; }",
        "export function handler(p) { return p.n * 2; }",
        "export const handler = (p) => p.n * 2;",
        "export default function (p) { return p.n * 2; }",
    ]
    .iter()
    .enumerate()
    {
        let id = format!("forms::f{i}");
        server.registered("node", &id, source).await;
        assert_eq!(
            server.call(&id, json!({"n": 21})).await.ok(),
            42,
            "{source}"
        );
    }
    server
        .register("node", "forms::none", "const nothing = 1;")
        .await
        .assert_error(INVALID_REQUEST, "exports no handler function");
}
