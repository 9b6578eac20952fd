//! Redeploys and the registry, in both languages: source that defines no
//! handler is refused at registration, a re-registration replaces, one
//! registry holds an id in one language only, the catalog shows what a
//! registration declares, and bad registrations name their problem.

use serde_json::{Value, json};

use super::greet;
use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{
    FUNCTION_NOT_FOUND, FUNCTIONS_INFO, INVALID_REQUEST, REGISTER, RUNTIME_NOT_FOUND, Server,
    TEARDOWN,
};

/// Source without a callable handler (python's `handler`, node's exported
/// `handler`), or that does not compile or throws as it loads, fails the
/// registration, not the first call: the id never reaches the bus, no
/// runtime is left behind, and a corrected redeploy of the same id works.
async fn source_without_handler_is_refused_and_a_corrected_redeploy_works(lang: &str) {
    let server = Server::start().await;
    let (no_handler, missing, broken, throws, corrected) = pick(
        lang,
        (
            ["x = 1\n", "handler = 42\n"],
            "no callable handler",
            "def handler(p):\n    return 1 +\n",
            "raise RuntimeError('at import')\n",
            "def handler(p):\n    return p['n'] * 2\n",
        ),
        (
            ["export const x = 1;\n", "export const handler = 42;\n"],
            "exports no handler function",
            "export function handler(p) { return 1 +; }\n",
            "throw new Error('at import');\n",
            "export function handler(p) { return p.n * 2; }\n",
        ),
    );
    for source in no_handler {
        server
            .register(lang, "app::f", source)
            .await
            .assert_error(INVALID_REQUEST, missing);
    }
    server
        .register(lang, "app::f", broken)
        .await
        .assert_error(INVALID_REQUEST, "SyntaxError");
    server
        .register(lang, "app::f", throws)
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
    // Nothing was left behind for the failed first registration.
    server
        .call(TEARDOWN, json!({"namespace": "app"}))
        .await
        .assert_error(RUNTIME_NOT_FOUND, "app::");

    server.registered(lang, "app::f", corrected).await;
    assert_eq!(server.call("app::f", json!({"n": 21})).await.ok(), 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_without_handler_is_refused_and_a_corrected_redeploy_works_in_python() {
    source_without_handler_is_refused_and_a_corrected_redeploy_works("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_without_handler_is_refused_and_a_corrected_redeploy_works_in_node() {
    source_without_handler_is_refused_and_a_corrected_redeploy_works("node").await;
}

/// Re-registering an id replaces it (handler and description); a failed
/// redeploy of an existing id leaves the old one serving.
async fn reregistering_replaces_and_a_failed_redeploy_keeps_the_old(lang: &str) {
    let server = Server::start().await;
    let (one, two, helper, missing) = pick(
        lang,
        (
            "def handler(p):\n    return 1\n",
            "def handler(p):\n    return 2\n",
            "def helper():\n    pass\n",
            "no callable handler",
        ),
        (
            "export function handler() { return 1; }\n",
            "export function handler() { return 2; }\n",
            "export function helper() {}\n",
            "exports no handler function",
        ),
    );
    server.registered(lang, "app::v", one).await;
    assert_eq!(server.call("app::v", json!({})).await.ok(), 1);
    server
        .call(
            REGISTER,
            json!({"function_id": "app::v", "lang": lang, "description": "Version two.",
                   "source": two}),
        )
        .await
        .ok();
    assert_eq!(server.call("app::v", json!({})).await.ok(), 2);
    let info = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ["app::v"]}))
        .await;
    assert_eq!(info.ok()["functions"][0]["description"], "Version two.");

    server
        .register(lang, "app::v", helper)
        .await
        .assert_error(INVALID_REQUEST, missing);
    assert_eq!(server.call("app::v", json!({})).await.ok(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reregistering_replaces_and_a_failed_redeploy_keeps_the_old_in_python() {
    reregistering_replaces_and_a_failed_redeploy_keeps_the_old("python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reregistering_replaces_and_a_failed_redeploy_keeps_the_old_in_node() {
    reregistering_replaces_and_a_failed_redeploy_keeps_the_old("node").await;
}

/// One registry across languages: an id held by python cannot be
/// registered in node, and the error names python. (The check comes before
/// the node engine is needed, so it holds in a build without it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_held_in_python_cannot_be_registered_in_node() {
    let server = Server::start().await;
    server
        .registered("python", "my-app::greet", greet("python"))
        .await;
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

/// One registry across languages, node first this time: an id held in node
/// cannot be registered in python (the error names node). Both languages
/// may share the namespace under different ids, and one namespace teardown
/// destroys both runtimes, listing every id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_python_share_one_registry_and_one_namespace_teardown() {
    let server = Server::start().await;
    let live = server.live();
    let before = live();
    server
        .registered("node", "my-app::greet", greet("node"))
        .await;
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

/// `engine::functions::info` shows a registered function's description and
/// formats; without them, the description says so and each format is the
/// schema titled "any", in either language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_shows_description_and_formats_or_any() {
    for lang in LANGS {
        let server = Server::start().await;
        let request_format = json!({"type": "object", "properties": {"lang": {"type": "string"}}});
        server
            .call(
                REGISTER,
                json!({"function_id": "my-app::greet", "lang": lang, "source": greet(lang),
                       "description": "Greets in en or pt.", "request_format": request_format,
                       "response_format": {"type": "string"}}),
            )
            .await
            .ok();
        let bare = pick(
            lang,
            "def handler(p):\n    return p\n",
            "export function handler(p) { return p; }\n",
        );
        server.registered(lang, "my-app::bare", bare).await;
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
            json!({"lang": lang, "namespace": "my-app::"})
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
}

/// Bad registrations are `invalid_request` naming the problem: reserved or
/// malformed ids, formats that constrain nothing or are too big, unknown
/// fields, oversized source, in either language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_registrations_are_invalid_requests_naming_the_problem() {
    let server = Server::start().await;
    for lang in LANGS {
        let good = pick(
            lang,
            "def handler(p):\n    return p\n",
            "export function handler(p) { return p; }\n",
        );
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
                json!({"function_id": "app::f", "source": format!("{} {}\n{good}", pick(lang, "#", "//"), "x".repeat(1_100_000))}),
                "1 MiB",
            ),
        ];
        for (fields, why) in cases {
            let mut payload = json!({"lang": lang, "source": good});
            crate::helpers::merge(&mut payload, fields.clone());
            server
                .call(REGISTER, payload)
                .await
                .assert_error(INVALID_REQUEST, why);
        }
        server
            .call(REGISTER, json!({"lang": lang, "source": good}))
            .await
            .assert_error(INVALID_REQUEST, "function_id");
    }
    server.assert_still_serves().await;
}
