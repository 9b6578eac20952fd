//! Registered handlers, in both languages: the seed's example end to end,
//! the state a namespace keeps between calls, `iii.namespace`, handler
//! errors, and handlers calling other functions.

use serde_json::json;

use super::greet;
use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{
    FUNCTION_NOT_FOUND, FUNCTIONS_INFO, HANDLER_ERROR, INVALID_REQUEST, RUN, Server, TEARDOWN,
};

/// The contract's done-when: the seed's example registered answers "olá"
/// for `{"lang": "pt"}` over `POST /v1/call/my-app::greet`; the info names
/// its language and namespace; a namespace teardown lists it and it stops
/// resolving.
async fn the_greet_example_registers_answers_and_tears_down(lang: &str) {
    let server = Server::start().await;
    server.registered(lang, "my-app::greet", greet(lang)).await;
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
        json!({"lang": lang, "namespace": "my-app::"})
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_greet_example_registers_answers_and_tears_down_in_python() {
    the_greet_example_registers_answers_and_tears_down("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_greet_example_registers_answers_and_tears_down_in_node() {
    the_greet_example_registers_answers_and_tears_down("node").await;
}

/// The python namespace runs on one pinned interpreter: module state
/// persists from one call to the next, and whatever one source defines is
/// there for the handlers of the namespace's other functions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_kept_between_invocations_and_shared_in_the_namespace_in_python() {
    let server = Server::start().await;
    let counter = "calls = 0\ndef bump():\n    global calls\n    calls += 1\n    return calls\ndef handler(payload):\n    return bump()\n";
    server.registered("python", "count::up", counter).await;
    for expected in 1..=3 {
        assert_eq!(server.call("count::up", json!({})).await.ok(), expected);
    }
    server
        .registered(
            "python",
            "count::peek",
            "def handler(payload):\n    return calls\n",
        )
        .await;
    assert_eq!(server.call("count::peek", json!(null)).await.ok(), 3);
    assert_eq!(server.call("count::up", json!({})).await.ok(), 4);
}

/// The node namespace is one isolate: module state persists from one call
/// to the next; `globalThis` is shared by the namespace's handlers;
/// `iii.namespace` is the namespace string in a namespace runtime (with
/// node's registrar beside it) and, in a plain node run, the run's own
/// namespace (`rt-…`, see `namespaces::own`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_kept_between_invocations_and_shared_in_the_namespace_in_node() {
    let server = Server::start().await;
    let counter = "let calls = 0;\nexport function handler() {\n  calls += 1;\n  globalThis.seen = calls;\n  return calls;\n}\n";
    server.registered("node", "count::up", counter).await;
    for expected in 1..=3 {
        assert_eq!(server.call("count::up", json!({})).await.ok(), expected);
    }
    server
        .registered(
            "node",
            "count::who",
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

/// `iii.namespace` is the namespace (no `::`) in a namespace runtime and
/// the run's own namespace in a plain run (`rt-…`, see `namespaces::own`);
/// python's `iii` has no registerFunction, node's has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iii_namespace_is_the_namespace_in_a_namespace_runtime() {
    let server = Server::start().await;
    for (lang, id, source, registrar) in [
        (
            "python",
            "my-app::who",
            "def handler(p):\n    return [iii.namespace, hasattr(iii, 'registerFunction')]\n",
            false,
        ),
        (
            "node",
            "node-app::who",
            "export function handler() {\n  return [iii.namespace, typeof iii.registerFunction === 'function'];\n}\n",
            true,
        ),
    ] {
        server.registered(lang, id, source).await;
        let namespace = id.split("::").next().unwrap();
        assert_eq!(
            server.call(id, json!({})).await.ok(),
            &json!([namespace, registrar])
        );
        let plain = server
            .run_in(
                lang,
                pick(lang, "result = iii.namespace", "return iii.namespace"),
            )
            .await;
        let own = plain.ok()["result"].as_str().unwrap_or("");
        assert!(own.starts_with("rt-"), "{lang}: {}", plain.body);
    }
}

/// A handler that raises (or throws, or whose promise rejects) is
/// `code-runner::handler_error` carrying its message and the id, a 502; the
/// function keeps serving good input afterwards; a huge message comes back
/// bounded.
async fn a_failing_handler_is_handler_error_with_its_message(lang: &str) {
    let server = Server::start().await;
    let (source, error, loud, loud_error) = pick(
        lang,
        (
            "def handler(payload):\n    if payload.get('lang') not in ('en', 'pt'):\n        raise ValueError('unknown lang ' + str(payload.get('lang')))\n    return payload['lang']\n",
            "ValueError: unknown lang xx",
            "def handler(p):\n    raise RuntimeError('x' * 1_000_000)\n",
            "RuntimeError",
        ),
        (
            "export function handler(p) {\n  if (p.lang !== 'en' && p.lang !== 'pt') throw new RangeError('unknown lang ' + p.lang);\n  return p.lang;\n}\n",
            "RangeError: unknown lang xx",
            "export function handler() { throw new Error('x'.repeat(1_000_000)); }\n",
            "Error: xxx",
        ),
    );
    server.registered(lang, "app::lang", source).await;
    let answer = server.call("app::lang", json!({"lang": "xx"})).await;
    answer.assert_error(HANDLER_ERROR, error);
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
    if lang == "node" {
        // A promise that rejects later (python's handlers are synchronous).
        server
            .registered(
                "node",
                "app::later",
                "export async function handler() {\n  await new Promise((r) => setTimeout(r, 5));\n  throw new Error('rejected later');\n}\n",
            )
            .await;
        server
            .call("app::later", json!({}))
            .await
            .assert_error(HANDLER_ERROR, "Error: rejected later");
    }
    server.registered(lang, "app::loud", loud).await;
    let answer = server.call("app::loud", json!({})).await;
    answer.assert_error(HANDLER_ERROR, loud_error);
    assert!(
        answer.error_message().len() < 8192,
        "{}",
        answer.error_message().len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_is_handler_error_with_its_message_in_python() {
    a_failing_handler_is_handler_error_with_its_message("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_is_handler_error_with_its_message_in_node() {
    a_failing_handler_is_handler_error_with_its_message("node").await;
}

/// Models write every handler form: each registers over HTTP and answers.
/// (Node's module forms: python's handler is a function named `handler`.)
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

/// A handler reaches the bus through `iii.trigger` like any guest code;
/// calling a function of its own runtime is refused clearly (the runtime
/// runs one turn at a time) instead of waiting for the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_call_other_functions_but_not_their_own_runtime() {
    let python = r#"
def handler(p):
    out = {"other": iii.trigger({"function_id": "a::double", "payload": p})}
    try:
        iii.trigger({"function_id": "b::self", "payload": p})
    except IIIError as e:
        out["self"] = [e.code, e.message]
    return out
"#;
    let node = r#"
export async function handler(p) {
  const out = { other: await iii.trigger({ function_id: "a::double", payload: p }) };
  try {
    await iii.trigger({ function_id: "b::self", payload: p });
  } catch (e) {
    out.self = [e.code, e.message];
  }
  return out;
}
"#;
    for lang in LANGS {
        let server = Server::start().await;
        let double = pick(
            lang,
            "def handler(p):\n    return p * 2\n",
            "export function handler(p) { return p * 2; }\n",
        );
        server.registered(lang, "a::double", double).await;
        server
            .registered(lang, "b::self", pick(lang, python, node))
            .await;
        let answer = server.call("b::self", json!(21)).await;
        let body = answer.ok();
        assert_eq!(body["other"], 42, "{lang}: {body}");
        assert_eq!(body["self"][0], INVALID_REQUEST, "{lang}: {body}");
        assert!(
            body["self"][1]
                .as_str()
                .unwrap()
                .contains("this same runtime"),
            "{lang}: {body}"
        );
    }
}
