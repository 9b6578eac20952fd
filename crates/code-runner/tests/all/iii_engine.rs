//! code-runner as a worker of a real iii engine (issue 7): registration with
//! schemas, calls both ways, injected fields, error codes, and an engine
//! restart that loses nothing.

use std::time::{Duration, Instant};

use iii_sdk::{InitOptions, RegisterFunction};
use serde_json::{Value, json};

use crate::engine_util::{EngineProc, WorkerProc};

/// How long a worker may take to (re)appear on the engine on a busy machine.
const REGISTERED: Duration = Duration::from_secs(90);

/// The first check: `iii trigger code-runner::run lang=python
/// code='result = 2 + 2'` answers 4 through the engine, and the engine shows
/// our functions typed, with their descriptions.
#[test]
fn iii_trigger_runs_python_and_functions_are_typed() {
    let engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, "cr-typed");
    wait_ready(&engine, &worker);
    let answer = engine
        .trigger_kv(
            "code-runner::run",
            &["lang=python", "code=result = 2 + 2", "timeout_ms=30000"],
        )
        .unwrap();
    assert_eq!(answer["result"], 4, "{answer}");
    assert_eq!(answer["exit_code"], 0);
    assert!(answer.get("runtime_id").is_none(), "{answer}");

    for id in ["code-runner::run", "code-runner::teardown"] {
        let info = engine
            .trigger("engine::functions::info", &json!({ "function_id": id }))
            .unwrap();
        assert!(
            info["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{info}"
        );
        assert!(
            info["request_schema"]["properties"].is_object(),
            "{id} is not typed on the engine: {info}"
        );
        assert!(info["response_schema"]["properties"].is_object(), "{info}");
    }
    let info = engine
        .trigger(
            "engine::functions::info",
            &json!({ "function_id": "code-runner::run" }),
        )
        .unwrap();
    assert!(info["request_schema"]["properties"]["code"].is_object());
    worker.assert_alive();
}

/// Waits until `worker`'s functions answer through `engine`.
fn wait_ready(engine: &EngineProc, worker: &WorkerProc) {
    let answer = engine
        .trigger_when_registered(
            "code-runner::run",
            &json!({"lang": "python", "code": "result = 'ready'", "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["result"], "ready", "{answer}");
}

/// Our error codes survive the engine: a timeout is `code-runner::timeout`,
/// and a typo is `invalid_request` naming the field, while the engine's own
/// `_caller_worker_id` (added to every call) is accepted.
#[test]
fn errors_reach_the_caller_with_our_codes() {
    let engine = EngineProc::start();
    let worker = WorkerProc::start(&engine, "cr-errors");
    wait_ready(&engine, &worker);
    let err = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "python", "code": "while True: pass", "timeout_ms": 300}),
        )
        .unwrap_err();
    assert_eq!(err["code"], "code-runner::timeout", "{err}");
    let err = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "python", "code": "x = 1", "timeot_ms": 300}),
        )
        .unwrap_err();
    assert_eq!(err["code"], "code-runner::invalid_request", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("timeot_ms"),
        "{err}"
    );
    let err = engine
        .trigger("code-runner::teardown", &json!({"runtime_id": "rt_nope"}))
        .unwrap_err();
    assert_eq!(err["code"], "code-runner::runtime_not_found", "{err}");
}

/// A guest's `iii.trigger` goes through the engine and reaches a function of
/// another worker.
#[test]
fn python_trigger_reaches_another_workers_function() {
    let engine = EngineProc::start();
    // No warm pool: the run boots its interpreter inside the engine's call.
    let worker = WorkerProc::with_config(&engine, "cr-caller", "warm_pool: 0\n");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let other = iii_sdk::register_worker(&engine.url(), InitOptions::default());
    let _echo = other.register_function(
        "demo::echo",
        RegisterFunction::new_async(|input: Value| async move { Ok(json!({ "echo": input })) })
            .description("Echo the payload back."),
    );
    engine
        .trigger_when_registered("demo::echo", &json!({"ping": 1}))
        .unwrap();
    wait_ready(&engine, &worker);
    let code = "answer = iii.trigger({'function_id': 'demo::echo', 'payload': {'n': 41}})\n\
                result = answer['echo']['n'] + 1";
    let answer = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "python", "code": code, "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["result"], 42, "{answer}");
    other.shutdown();
}

/// Killing and restarting the engine loses nothing: the worker reconnects by
/// itself, its functions come back, and a kept runtime still answers with
/// its state.
#[test]
fn engine_restart_keeps_functions_and_kept_runtimes() {
    let mut engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, "cr-restart");
    wait_ready(&engine, &worker);
    let kept = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "python", "keep": true, "code": "x = 41", "timeout_ms": 30000}),
        )
        .unwrap();
    let id = kept["runtime_id"].as_str().expect("runtime_id").to_string();

    engine.restart();
    let until = Instant::now() + REGISTERED;
    let answer = loop {
        let answer = engine.trigger(
            "code-runner::run",
            &json!({"runtime_id": id, "code": "result = x + 1"}),
        );
        match answer {
            Ok(answer) => break answer,
            Err(err) if Instant::now() < until => {
                let _ = err;
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(err) => panic!("not back after the restart: {err}\n{}", worker.log()),
        }
    };
    assert_eq!(answer["result"], 42, "{answer}");
    worker.assert_alive();
}
