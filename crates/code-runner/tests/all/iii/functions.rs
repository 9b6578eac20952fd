//! Functions published on a real iii engine: `register_function` through
//! the engine in both languages, and node's `iii.registerFunction`, each
//! listed and callable there until its teardown removes it.

use serde_json::json;

use super::{greet_source, until_gone, wait_ready_in, when_published};
use crate::helpers::engine::{EngineProc, WorkerProc};
use crate::helpers::lang::LANGS;

/// Registered functions are functions of the engine: `register_function`
/// (of either language) called through the engine publishes an id the
/// engine calls and lists, and a namespace teardown removes it there; a kept
/// node runtime's `iii.registerFunction` (node's: python has no registrar)
/// is published on the engine and goes with the runtime's teardown.
#[test]
fn functions_are_published_on_the_engine_until_teardown() {
    let engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, "cr-node-fns");
    wait_ready_in(&engine, &worker, "node");

    for lang in LANGS {
        let registered = engine
            .trigger(
                "code-runner::register_function",
                &json!({"function_id": "my-app::greet", "lang": lang, "source": greet_source(lang),
                        "description": "Greets in en or pt."}),
            )
            .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
        assert_eq!(
            registered,
            json!({"function_id": "my-app::greet", "registered": true})
        );
        assert_eq!(
            when_published(&engine, "my-app::greet", &json!({"lang": "pt"})),
            "olá"
        );
        let info = engine
            .trigger(
                "engine::functions::info",
                &json!({"function_id": "my-app::greet"}),
            )
            .unwrap();
        assert_eq!(info["description"], "Greets in en or pt.", "{lang}: {info}");
        let torn = engine
            .trigger("code-runner::teardown", &json!({"namespace": "my-app"}))
            .unwrap();
        assert_eq!(
            torn["unregistered"],
            json!(["my-app::greet"]),
            "{lang}: {torn}"
        );
        until_gone(&engine, "my-app::greet");
    }

    let code = "globalThis.n = 0;\nawait iii.registerFunction('tools::count', (p) => ({ n: ++globalThis.n, got: p.x }), { description: 'Counts calls.' });";
    let kept = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "node", "keep": true, "code": code, "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    let id = kept["runtime_id"].as_str().expect("runtime_id").to_string();
    assert_eq!(
        when_published(&engine, "tools::count", &json!({"x": "a"})),
        json!({"n": 1, "got": "a"})
    );
    assert_eq!(
        engine.trigger("tools::count", &json!({"x": "b"})).unwrap(),
        json!({"n": 2, "got": "b"})
    );
    let info = engine
        .trigger(
            "engine::functions::info",
            &json!({"function_id": "tools::count"}),
        )
        .unwrap();
    assert_eq!(info["description"], "Counts calls.", "{info}");
    let torn = engine
        .trigger("code-runner::teardown", &json!({"runtime_id": id}))
        .unwrap();
    assert_eq!(torn["unregistered"], json!(["tools::count"]), "{torn}");
    until_gone(&engine, "tools::count");
    worker.assert_alive();
}
