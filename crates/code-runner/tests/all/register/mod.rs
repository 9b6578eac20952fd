//! `code-runner::register_function` and teardown by namespace, through real
//! HTTP and the real python engine: registration, invocation, state kept
//! between calls, handler errors, replacement, one registry across
//! languages, and what a namespace teardown undoes.

mod guest;
mod node;

use serde_json::{Value, json};

use crate::helpers::{
    FUNCTION_NOT_FOUND, FUNCTIONS_INFO, HANDLER_ERROR, INVALID_REQUEST, REGISTER,
    RUNTIME_NOT_FOUND, Server, TEARDOWN, TIMEOUT,
};

/// The contract's python example, verbatim.
const GREET: &str = r#"import json

_greetings = {"en": "hello", "pt": "olá"}

def handler(payload):
    return _greetings.get(payload.get("lang", "en"), "hello")
"#;

/// The contract's done-when: the seed's example registered answers "olá"
/// for `{"lang": "pt"}` over `POST /v1/call/my-app::greet`; a namespace
/// teardown lists it and it stops resolving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_greet_example_registers_answers_and_tears_down() {
    let server = Server::start().await;
    server.registered("python", "my-app::greet", GREET).await;
    assert_eq!(
        server
            .call("my-app::greet", json!({"lang": "pt"}))
            .await
            .ok(),
        "olá"
    );
    assert_eq!(server.call("my-app::greet", json!({})).await.ok(), "hello");

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

/// Source without a callable handler fails the registration, not the
/// first call: the id never reaches the bus, and a corrected redeploy of
/// the same id works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_without_handler_is_refused_and_a_corrected_redeploy_works() {
    let server = Server::start().await;
    for source in ["x = 1\n", "handler = 42\n"] {
        server
            .register("python", "app::f", source)
            .await
            .assert_error(INVALID_REQUEST, "no callable handler");
    }
    server
        .register("python", "app::f", "def handler(p):\n    return 1 +\n")
        .await
        .assert_error(INVALID_REQUEST, "SyntaxError");
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
    // Nothing was left behind for the failed first registration.
    server
        .call(TEARDOWN, json!({"namespace": "app"}))
        .await
        .assert_error(RUNTIME_NOT_FOUND, "app::");

    server
        .registered(
            "python",
            "app::f",
            "def handler(p):\n    return p['n'] * 2\n",
        )
        .await;
    assert_eq!(server.call("app::f", json!({"n": 21})).await.ok(), 42);
}

/// The namespace runs on one pinned interpreter: module state persists
/// from one call to the next, and whatever one source defines is there for
/// the handlers of the namespace's other functions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_kept_between_invocations_and_shared_in_the_namespace() {
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

/// A handler that raises is `code-runner::handler_error` carrying its
/// message; the function keeps serving good input afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raising_handler_is_handler_error_with_its_message() {
    let server = Server::start().await;
    let source = "def handler(payload):\n    if payload.get('lang') not in ('en', 'pt'):\n        raise ValueError('unknown lang ' + str(payload.get('lang')))\n    return payload['lang']\n";
    server.registered("python", "app::lang", source).await;
    let answer = server.call("app::lang", json!({"lang": "xx"})).await;
    answer.assert_error(HANDLER_ERROR, "ValueError: unknown lang xx");
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
    // A huge exception message comes back bounded.
    server
        .registered(
            "python",
            "app::loud",
            "def handler(p):\n    raise RuntimeError('x' * 1_000_000)\n",
        )
        .await;
    let answer = server.call("app::loud", json!({})).await;
    answer.assert_error(HANDLER_ERROR, "RuntimeError");
    assert!(
        answer.error_message().len() < 8192,
        "{}",
        answer.error_message().len()
    );
}

/// Re-registering an id replaces it (handler and description); a failed
/// redeploy of an existing id leaves the old one serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reregistering_replaces_and_a_failed_redeploy_keeps_the_old() {
    let server = Server::start().await;
    server
        .registered("python", "app::v", "def handler(p):\n    return 1\n")
        .await;
    assert_eq!(server.call("app::v", json!({})).await.ok(), 1);
    let v2 = server
        .call(
            REGISTER,
            json!({"function_id": "app::v", "lang": "python", "description": "Version two.",
                   "source": "def handler(p):\n    return 2\n"}),
        )
        .await;
    v2.ok();
    assert_eq!(server.call("app::v", json!({})).await.ok(), 2);
    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["app::v"]}))
        .await;
    assert_eq!(info.ok()["functions"][0]["description"], "Version two.");

    server
        .register("python", "app::v", "def helper():\n    pass\n")
        .await
        .assert_error(INVALID_REQUEST, "no callable handler");
    assert_eq!(server.call("app::v", json!({})).await.ok(), 2);
}

/// One registry across languages: an id held by python cannot be
/// registered in node, and the error names python. (The check comes before
/// the node engine is needed, so it holds in a build without it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_held_in_python_cannot_be_registered_in_node() {
    let server = Server::start().await;
    server.registered("python", "my-app::greet", GREET).await;
    let answer = server
        .call(
            REGISTER,
            json!({"function_id": "my-app::greet", "lang": "node",
                   "source": "export function handler(p) { return 'hi'; }"}),
        )
        .await;
    answer.assert_error(INVALID_REQUEST, "already registered in python");
    assert_eq!(
        server
            .call("my-app::greet", json!({"lang": "pt"}))
            .await
            .ok(),
        "olá"
    );
}

/// `engine::functions::info` shows a registered function's description and
/// formats; without them, the description says so and each format is the
/// schema titled "any".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_shows_description_and_formats_or_any() {
    let server = Server::start().await;
    let request_format = json!({"type": "object", "properties": {"lang": {"type": "string"}}});
    server
        .call(
            REGISTER,
            json!({"function_id": "my-app::greet", "lang": "python", "source": GREET,
                   "description": "Greets in en or pt.", "request_format": request_format,
                   "response_format": {"type": "string"}}),
        )
        .await
        .ok();
    server
        .registered("python", "my-app::bare", "def handler(p):\n    return p\n")
        .await;
    let info = server
        .call(
            FUNCTIONS_INFO,
            json!({"function_ids": ["my-app::greet", "my-app::bare"]}),
        )
        .await;
    let functions = &info.ok()["functions"];
    assert_eq!(functions[0]["description"], "Greets in en or pt.");
    assert_eq!(functions[0]["request_schema"], request_format);
    assert_eq!(functions[0]["response_schema"], json!({"type": "string"}));
    assert_eq!(
        functions[0]["metadata"],
        json!({"lang": "python", "namespace": "my-app::"})
    );
    assert!(
        functions[1]["description"]
            .as_str()
            .unwrap()
            .contains("no description"),
        "{}",
        functions[1]
    );
    assert_eq!(functions[1]["request_schema"]["title"], "any");
    assert_eq!(functions[1]["response_schema"]["title"], "any");
    // The listing shows them too.
    let listed = server.get("/v1/functions").await;
    let ids: Vec<&str> = listed.ok()["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["function_id"].as_str())
        .collect();
    assert!(
        ids.contains(&"my-app::greet") && ids.contains(&"code-runner::register_function"),
        "{ids:?}"
    );
}

/// Bad registrations are `invalid_request` naming the problem: reserved or
/// malformed ids, formats that constrain nothing or are too big, unknown
/// fields, oversized source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_registrations_are_invalid_requests_naming_the_problem() {
    let server = Server::start().await;
    let good = "def handler(p):\n    return p\n";
    let cases: Vec<(Value, &str)> = vec![
        (json!({"function_id": "code-runner::run"}), "reserved"),
        (
            json!({"function_id": "engine::functions::info"}),
            "reserved",
        ),
        (json!({"function_id": "configuration::set"}), "reserved"),
        (json!({"function_id": "state::claim-namespace"}), "reserved"),
        (json!({"function_id": "harness::state::x"}), "reserved"),
        (
            json!({"function_id": "provider::openai-codex::login::x"}),
            "reserved",
        ),
        (
            json!({"function_id": "provider-openai-codex::state::x"}),
            "reserved",
        ),
        (json!({"function_id": "greet"}), "has no namespace"),
        (json!({"function_id": "my app::greet"}), "may hold only"),
        (json!({"function_id": "app::"}), "is empty"),
        (
            json!({"function_id": "app::f", "request_format": {"description": "x"}}),
            "must constrain",
        ),
        (
            json!({"function_id": "app::f", "response_format": "string"}),
            "JSON Schema object",
        ),
        (
            json!({"function_id": "app::f", "request_format": {"type": "object", "description": "d".repeat(20_000)}}),
            "16 KiB",
        ),
        (json!({"function_id": "app::f", "lang": "ruby"}), "lang"),
        (
            json!({"function_id": "app::f", "colour": "red"}),
            "unknown field `colour`",
        ),
        (
            json!({"function_id": "app::f", "source": format!("# {}\n{good}", "x".repeat(1_100_000))}),
            "1 MiB",
        ),
    ];
    for (fields, why) in cases {
        let mut payload = json!({"lang": "python", "source": good});
        crate::helpers::merge(&mut payload, fields.clone());
        server
            .call(REGISTER, payload)
            .await
            .assert_error(INVALID_REQUEST, why);
    }
    server
        .call(REGISTER, json!({"lang": "python", "source": good}))
        .await
        .assert_error(INVALID_REQUEST, "function_id");
    server.assert_still_serves().await;
}

/// A namespace teardown destroys its runtime, lists every id it
/// unregistered (sorted), and frees the slot; those ids then answer
/// `function_not_found`; a namespace with nothing behind it is
/// `runtime_not_found`, and a reserved one `invalid_request`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_by_namespace_lists_every_id_and_they_stop_resolving() {
    let server = Server::start().await;
    let live = |server: &Server| {
        let worker = server.worker().clone();
        move || worker.health()["runtimes"]["live"].as_u64().unwrap_or(99)
    };
    let before = live(&server)();
    for id in ["shop::list", "shop::cart::add", "shop::buy"] {
        server
            .registered("python", id, "def handler(p):\n    return 'ok'\n")
            .await;
    }
    server
        .registered(
            "python",
            "other::keep",
            "def handler(p):\n    return 'still here'\n",
        )
        .await;
    assert_eq!(live(&server)(), before + 2, "one runtime per namespace");

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
    assert_eq!(live(&server)(), before + 1);
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
        .registered(
            "python",
            "shop::list",
            "def handler(p):\n    return 'new'\n",
        )
        .await;
    assert_eq!(server.call("shop::list", json!({})).await.ok(), "new");
}

/// `iii.namespace` is the namespace (no `::`) in a namespace runtime and
/// the run's own namespace in a plain run (`rt-…`, see `own_namespace.rs`);
/// python's `iii` has no registerFunction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iii_namespace_is_the_namespace_in_a_namespace_runtime() {
    let server = Server::start().await;
    server
        .registered(
            "python",
            "my-app::who",
            "def handler(p):\n    return [iii.namespace, hasattr(iii, 'registerFunction')]\n",
        )
        .await;
    assert_eq!(
        server.call("my-app::who", json!({})).await.ok(),
        &json!(["my-app", false])
    );
    let plain = server.run("result = iii.namespace").await;
    let own = plain.ok()["result"].as_str().unwrap_or("");
    assert!(own.starts_with("rt-"), "{}", plain.body);
}

/// A handler reaches the bus through `iii.trigger` like any guest code;
/// calling a function of its own runtime is refused clearly (the runtime
/// runs one turn at a time) instead of waiting for the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_call_other_functions_but_not_their_own_runtime() {
    let server = Server::start().await;
    server
        .registered("python", "a::double", "def handler(p):\n    return p * 2\n")
        .await;
    let caller = r#"
def handler(p):
    out = {"other": iii.trigger({"function_id": "a::double", "payload": p})}
    try:
        iii.trigger({"function_id": "b::self", "payload": p})
    except IIIError as e:
        out["self"] = [e.code, e.message]
    return out
"#;
    server.registered("python", "b::self", caller).await;
    let answer = server.call("b::self", json!(21)).await;
    let body = answer.ok();
    assert_eq!(body["other"], 42);
    assert_eq!(body["self"][0], INVALID_REQUEST);
    assert!(
        body["self"][1]
            .as_str()
            .unwrap()
            .contains("this same runtime"),
        "{body}"
    );
}

/// A handler that overruns is `code-runner::timeout`; the namespace then
/// recovers on its own: its handlers are defined again and keep serving.
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

/// Namespace runtimes are exempt from the idle sweep: after a kept runtime
/// has been reaped, a registered function still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_runtimes_outlive_the_idle_sweep() {
    let server = Server::with_config("idle_ttl_secs: 1").await;
    server
        .registered("python", "stay::f", "def handler(p):\n    return 'here'\n")
        .await;
    let id = server.keep("pass").await;
    let worker = server.worker().clone();
    crate::helpers::wait_until(
        "the kept runtime is reaped",
        std::time::Duration::from_secs(60),
        || worker.health()["runtimes"]["kept"] == 0,
    )
    .await;
    server
        .run_on(&id, "pass")
        .await
        .assert_error(crate::helpers::EXPIRED, "reaped");
    assert_eq!(server.call("stay::f", json!({})).await.ok(), "here");
}
