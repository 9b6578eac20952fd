//! Node through a real iii engine (issue 7 with issue 12's engine): the
//! `iii trigger` quickstart, a node run's `iii.trigger` reaching another
//! worker (bridge rules first), and node functions (register_function and
//! `iii.registerFunction`) published on the engine and gone after teardown.

use std::time::{Duration, Instant};

use iii_sdk::{InitOptions, RegisterFunction};
use serde_json::{Value, json};

use crate::helpers::engine::{EngineProc, WorkerProc, is_not_found};

/// How long a registration may take to appear on (or leave) the engine.
const SETTLE: Duration = Duration::from_secs(90);

/// Waits until `worker` answers a node run through `engine`.
fn wait_node_ready(engine: &EngineProc, worker: &WorkerProc) {
    let answer = engine
        .trigger_when_registered(
            "code-runner::run",
            &json!({"lang": "node", "code": "return 'ready'", "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["result"], "ready", "{answer}");
}

/// Calls `function_id` until it stops being "not found"; the answer.
fn when_published(engine: &EngineProc, function_id: &str, payload: &Value) -> Value {
    engine
        .trigger_when_registered(function_id, payload)
        .unwrap_or_else(|e| panic!("{function_id} never answered: {e}"))
}

/// Waits until the engine no longer lists `function_id` (the worker
/// unregistered it there, not merely answers not-found behind it); panics
/// if it is still listed after [`SETTLE`]. A call of it is then not found.
fn until_gone(engine: &EngineProc, function_id: &str) {
    let until = Instant::now() + SETTLE;
    let info = json!({ "function_id": function_id });
    while let Ok(listed) = engine.trigger("engine::functions::info", &info) {
        assert!(
            Instant::now() < until,
            "{function_id} is still registered on the engine after teardown: {listed}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let err = engine.trigger(function_id, &json!({})).unwrap_err();
    assert!(is_not_found(&err), "{function_id}: {err}");
}

/// Issue 7's done-when for node: `iii trigger code-runner::run lang=node
/// code='console.log("hi"); return 2 + 2'` answers result 4 and stdout
/// `hi\n`; a node run's `iii.trigger` reaches another worker's function
/// through the engine, and a denied function is refused before dispatch.
#[test]
fn iii_trigger_runs_node_and_node_reaches_another_worker() {
    let engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, "cr-node");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let other = iii_sdk::register_worker(&engine.url(), InitOptions::default());
    let _echo = other.register_function(
        "demo::echo",
        RegisterFunction::new_async(|input: Value| async move { Ok(json!({ "echo": input })) })
            .description("Echo the payload back."),
    );
    when_published(&engine, "demo::echo", &json!({"ping": 1}));
    wait_node_ready(&engine, &worker);

    let answer = engine
        .trigger_kv(
            "code-runner::run",
            &["lang=node", r#"code=console.log("hi"); return 2 + 2"#],
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["result"], 4, "{answer}");
    assert_eq!(answer["stdout"], "hi\n", "{answer}");
    assert_eq!(answer["exit_code"], 0, "{answer}");
    assert_eq!(answer["success"], true, "{answer}");
    assert!(answer.get("runtime_id").is_none(), "{answer}");

    let code = r#"
const answer = await iii.trigger({ function_id: "demo::echo", payload: { n: 41 } });
let refused = null;
try { await iii.trigger({ function_id: "state::claim-namespace", payload: {} }); } catch (e) { refused = e.code; }
return [answer.echo.n + 1, refused];
"#;
    let answer = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "node", "code": code, "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["result"], json!([42, "forbidden"]), "{answer}");
    other.shutdown();
    worker.assert_alive();
}

/// Node functions are functions of the engine: `register_function` with
/// lang=node called through the engine publishes an id the engine calls and
/// lists, and a namespace teardown removes it there; a kept node runtime's
/// `iii.registerFunction` is published on the engine and goes with the
/// runtime's teardown.
#[test]
fn node_functions_are_published_on_the_engine_until_teardown() {
    let engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, "cr-node-fns");
    wait_node_ready(&engine, &worker);

    let source = "const greetings = { en: 'hello', pt: 'olá' };\nexport function handler(payload) {\n  return greetings[payload.lang ?? 'en'] ?? 'hello';\n}\n";
    let registered = engine
        .trigger(
            "code-runner::register_function",
            &json!({"function_id": "my-app::greet", "lang": "node", "source": source,
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
    assert_eq!(info["description"], "Greets in en or pt.", "{info}");
    let torn = engine
        .trigger("code-runner::teardown", &json!({"namespace": "my-app"}))
        .unwrap();
    assert_eq!(torn["unregistered"], json!(["my-app::greet"]), "{torn}");
    until_gone(&engine, "my-app::greet");

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
