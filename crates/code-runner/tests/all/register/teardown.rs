//! What a namespace teardown undoes, in both languages, and how long a
//! namespace lives otherwise: it outlives the idle sweep, and it recovers
//! by itself from a handler's timeout (or, in node, a heap kill).

use std::time::Duration;

use serde_json::json;

use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{
    EXPIRED, FUNCTION_NOT_FOUND, INVALID_REQUEST, RESOURCE_EXHAUSTED, RUNTIME_NOT_FOUND, Server,
    TEARDOWN, TIMEOUT, wait_until,
};

/// A `lang` handler source answering `word`.
fn answering(lang: &str, word: &str) -> String {
    pick(
        lang,
        format!("def handler(p):\n    return {word:?}\n"),
        format!("export function handler() {{ return {word:?}; }}\n"),
    )
}

/// A namespace teardown destroys its runtime, lists every id it
/// unregistered (sorted), and frees the slot; those ids then answer
/// `function_not_found`; a namespace with nothing behind it is
/// `runtime_not_found`, and a reserved one `invalid_request`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_by_namespace_lists_every_id_and_they_stop_resolving() {
    for lang in LANGS {
        let server = Server::start().await;
        let live = server.live();
        let before = live();
        for id in ["shop::list", "shop::cart::add", "shop::buy"] {
            server.registered(lang, id, &answering(lang, "ok")).await;
        }
        server
            .registered(lang, "other::keep", &answering(lang, "still here"))
            .await;
        assert_eq!(live(), before + 2, "{lang}: one runtime per namespace");

        let torn = server.call(TEARDOWN, json!({"namespace": "shop::"})).await;
        assert_eq!(
            torn.ok(),
            &json!({"torn_down": true, "namespace": "shop::",
                    "unregistered": ["shop::buy", "shop::cart::add", "shop::list"]})
        );
        for id in ["shop::list", "shop::cart::add", "shop::buy"] {
            server
                .call(id, json!({}))
                .await
                .assert_error(FUNCTION_NOT_FOUND, id);
        }
        assert_eq!(live(), before + 1);
        assert_eq!(
            server.call("other::keep", json!({})).await.ok(),
            "still here"
        );
        server
            .call(TEARDOWN, json!({"namespace": "shop"}))
            .await
            .assert_error(RUNTIME_NOT_FOUND, "shop::");
        server
            .call(TEARDOWN, json!({"namespace": "never-used"}))
            .await
            .assert_error(RUNTIME_NOT_FOUND, "never-used::");
        server
            .call(TEARDOWN, json!({"namespace": "code-runner"}))
            .await
            .assert_error(INVALID_REQUEST, "reserved");
        // The namespace can be used again afterwards.
        server
            .registered(lang, "shop::list", &answering(lang, "new"))
            .await;
        assert_eq!(server.call("shop::list", json!({})).await.ok(), "new");
    }
}

/// A python handler that overruns is `code-runner::timeout`; the namespace
/// then recovers on its own: its handlers are defined again and keep
/// serving. (Node's namespace after a timeout and a heap kill is the next
/// test: V8 has a heap limit of its own to kill.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_namespace_defines_its_handlers_again() {
    let server = Server::with_config("default_timeout_ms: 2000").await;
    let source = "import time\nGREETING = 'hi'\ndef handler(p):\n    if p.get('hang'):\n        while True:\n            pass\n    return GREETING\n";
    server.registered("python", "slow::f", source).await;
    server
        .registered(
            "python",
            "slow::g",
            "def handler(p):\n    return GREETING + '!'\n",
        )
        .await;
    server
        .call("slow::f", json!({"hang": true}))
        .await
        .assert_error(TIMEOUT, "ms");
    assert_eq!(server.call("slow::g", json!({})).await.ok(), "hi!");
    assert_eq!(server.call("slow::f", json!({})).await.ok(), "hi");
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

/// Namespace runtimes are exempt from the idle sweep: after a kept runtime
/// has been reaped, registered functions of both languages still answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_runtimes_outlive_the_idle_sweep() {
    let server = Server::with_config("idle_ttl_secs: 1").await;
    for (lang, id) in [("python", "stay::f"), ("node", "staynode::f")] {
        server.registered(lang, id, &answering(lang, "here")).await;
    }
    let id = server.keep("pass").await;
    let worker = server.worker().clone();
    wait_until(
        "the kept runtime is reaped",
        Duration::from_secs(60),
        || worker.health()["runtimes"]["kept"] == 0,
    )
    .await;
    server
        .run_on(&id, "pass")
        .await
        .assert_error(EXPIRED, "reaped");
    for id in ["stay::f", "staynode::f"] {
        assert_eq!(server.call(id, json!({})).await.ok(), "here", "{id}");
    }
}
