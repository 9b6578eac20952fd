//! code-runner as a worker of a real iii engine (issue 7): registration with
//! schemas, calls both ways, injected fields, error codes, and an engine
//! restart that loses nothing.

mod node;

use std::time::{Duration, Instant};

use iii_sdk::{InitOptions, RegisterFunction};
use serde_json::{Value, json};

use crate::helpers::engine::{EngineProc, WorkerProc};

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

/// Calls `function_id` until it answers something other than "not found",
/// or panics after [`REGISTERED`].
fn until_registered(engine: &EngineProc, function_id: &str, payload: &Value) -> Value {
    engine
        .trigger_when_registered(function_id, payload)
        .unwrap_or_else(|e| panic!("{function_id}: {e}"))
}

/// Two workers on one engine: one-shot and new kept runs spread over both,
/// a runtime_id reaches the worker that minted it whichever worker fronts
/// the shared id, scoped ids never route, and when the front goes away the
/// other worker takes the shared ids over.
#[test]
fn two_workers_share_the_engine() {
    let engine = EngineProc::start();
    let alpha = WorkerProc::start(&engine, "alpha");
    let beta = WorkerProc::start(&engine, "beta");
    let probe = json!({"lang": "python", "code": "result = 'ready'", "timeout_ms": 30000});
    until_registered(&engine, "code-runner@alpha::run", &probe);
    until_registered(&engine, "code-runner@beta::run", &probe);
    wait_ready(&engine, &alpha);

    // New kept runs go round-robin: both workers mint ids.
    let mut minted = std::collections::BTreeMap::new();
    for n in 0..6 {
        let kept = engine
            .trigger(
                "code-runner::run",
                &json!({"lang": "python", "keep": true, "code": format!("n = {n}"), "timeout_ms": 30000}),
            )
            .unwrap();
        let id = kept["runtime_id"].as_str().expect("runtime_id").to_string();
        let worker = code_runner::iii::minted_by(&id)
            .expect("a scoped id")
            .to_string();
        minted.insert(worker, id);
    }
    assert_eq!(
        minted.keys().cloned().collect::<Vec<_>>(),
        ["alpha", "beta"],
        "runs did not spread: {minted:?}"
    );

    // Each id reaches its worker through the shared id, state intact.
    for (worker, id) in &minted {
        let answer = engine
            .trigger(
                "code-runner::run",
                &json!({"runtime_id": id, "code": "result = n", "timeout_ms": 30000}),
            )
            .unwrap_or_else(|e| panic!("{worker}: {e}"));
        assert!(answer["result"].is_number(), "{worker}: {answer}");
        // A scoped id runs locally only: the other worker does not know the id.
        let other = if worker == "alpha" { "beta" } else { "alpha" };
        let err = engine
            .trigger(
                &format!("code-runner@{other}::run"),
                &json!({"runtime_id": id, "code": "result = n"}),
            )
            .unwrap_err();
        assert_eq!(err["code"], "code-runner::runtime_not_found", "{err}");
    }
    let beta_id = &minted["beta"];
    let torn = engine
        .trigger("code-runner::teardown", &json!({"runtime_id": beta_id}))
        .unwrap();
    assert_eq!(torn["torn_down"], true, "{torn}");

    // The front leaves; the other worker claims the shared ids.
    let front = engine
        .trigger(
            "engine::functions::info",
            &json!({"function_id": "code-runner::run"}),
        )
        .unwrap()["worker_name"]
        .as_str()
        .expect("an owner")
        .to_string();
    let mut workers = vec![("alpha", alpha), ("beta", beta)];
    workers.retain(|(name, _)| *name != front);
    let survivor = workers[0].0;
    let until = Instant::now() + REGISTERED;
    loop {
        let info = engine.trigger(
            "engine::functions::info",
            &json!({"function_id": "code-runner::run"}),
        );
        if let Ok(info) = &info
            && info["worker_name"] == survivor
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "{survivor} never took over: {info:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let answer = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "python", "code": "result = 7", "timeout_ms": 30000}),
        )
        .unwrap();
    assert_eq!(answer["result"], 7, "{answer}");
}

/// A stand-in for a console: provides the `console:script` and
/// `console:style` trigger types and, like the real one, fetches each bound
/// asset through the bound content function at registration.
struct FakeConsole {
    client: iii_sdk::IIIClient,
    fetched: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
}

#[async_trait::async_trait]
impl iii_sdk::trigger::TriggerHandler for FakeConsole {
    async fn register_trigger(
        &self,
        config: iii_sdk::trigger::TriggerConfig,
    ) -> Result<(), iii_sdk::Error> {
        let asset = self
            .client
            .trigger(iii_sdk::protocol::TriggerRequest {
                function_id: config.function_id.clone(),
                payload: config.config.clone(),
                action: None,
                timeout_ms: Some(10_000),
            })
            .await?;
        self.fetched.lock().unwrap().push((
            config.config["path"].as_str().unwrap_or("").to_string(),
            asset,
        ));
        Ok(())
    }

    async fn unregister_trigger(
        &self,
        _config: iii_sdk::trigger::TriggerConfig,
    ) -> Result<(), iii_sdk::Error> {
        Ok(())
    }
}

/// A console that joins the engine receives both of our assets through the
/// content function, as it would to inject the cards.
#[test]
fn a_console_fetches_our_cards() {
    let engine = EngineProc::start();
    let worker = WorkerProc::start(&engine, "cr-ui");
    wait_ready(&engine, &worker);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let client = iii_sdk::register_worker(&engine.url(), InitOptions::default());
    let fetched = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    for slot in ["console:script", "console:style"] {
        client.register_trigger_type(iii_sdk::RegisterTriggerType::new(
            slot,
            "fake console slot",
            FakeConsole {
                client: client.clone(),
                fetched: fetched.clone(),
            },
        ));
    }
    let until = Instant::now() + REGISTERED;
    loop {
        let got = fetched.lock().unwrap().clone();
        let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
        if paths.contains(&"code-runner/page.js") && paths.contains(&"code-runner/styles.css") {
            // The engine's own observability UI binds the same slots: skip it.
            for (path, asset) in got.iter().filter(|(p, _)| p.starts_with("code-runner/")) {
                let content = asset["content"].as_str().unwrap_or("");
                if path.ends_with(".js") {
                    assert!(
                        content.contains("export"),
                        "page.js is not a module: {asset}"
                    );
                } else {
                    assert!(content.contains("[data-iii-ui=code-runner]"), "{asset}");
                }
            }
            break;
        }
        assert!(
            Instant::now() < until,
            "the console got {paths:?}\n{}",
            worker.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    client.shutdown();
}

/// The engine's configuration worker is the authority on an engine: the
/// worker registers its entry (seeded from its own file), a
/// `configuration::set` through the engine applies to the very next call,
/// and after an engine restart the entry is registered again, so `set`
/// keeps working (the engine refuses it for an entry nobody re-registered).
#[test]
fn configuration_set_through_the_engine_applies_to_the_next_call() {
    let mut engine = EngineProc::start();
    let worker = WorkerProc::with_config(&engine, "cr-config", "max_result_bytes: 5000\n");
    wait_ready(&engine, &worker);
    let until = Instant::now() + REGISTERED;
    let seeded = loop {
        match engine.trigger("configuration::get", &json!({"id": "code-runner"})) {
            Ok(entry) => break entry,
            Err(err) => {
                assert!(Instant::now() < until, "no entry: {err}\n{}", worker.log());
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    assert_eq!(seeded["value"]["max_result_bytes"], 5000, "{seeded}");

    let flood = json!({"lang": "python", "code": "print('x' * 1000)", "timeout_ms": 30000});
    let capped = |engine: &EngineProc| {
        engine.trigger("code-runner::run", &flood).map(|answer| {
            answer["stdout"]
                .as_str()
                .is_some_and(|out| out.contains("[…stdout truncated"))
        })
    };
    assert_eq!(capped(&engine), Ok(false));
    engine
        .trigger(
            "configuration::set",
            &json!({"id": "code-runner", "value": {"max_stream_bytes": 100}}),
        )
        .unwrap();
    let until = Instant::now() + REGISTERED;
    while capped(&engine) != Ok(true) {
        assert!(
            Instant::now() < until,
            "the cap never applied\n{}",
            worker.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    engine.restart();
    let until = Instant::now() + REGISTERED;
    loop {
        let set = engine.trigger(
            "configuration::set",
            &json!({"id": "code-runner", "value": {"max_stream_bytes": 16384}}),
        );
        if set.is_ok() {
            break;
        }
        assert!(
            Instant::now() < until,
            "set never worked again: {set:?}\n{}",
            worker.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let until = Instant::now() + REGISTERED;
    while capped(&engine) != Ok(false) {
        assert!(
            Instant::now() < until,
            "the new cap never applied\n{}",
            worker.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A stand-in for the agent harness: provides the `pre-generate` hook point
/// and, when a binding arrives, calls the bound function as the harness would
/// before a generation.
struct FakeHarness {
    client: iii_sdk::IIIClient,
    answers: std::sync::Arc<std::sync::Mutex<Vec<(Value, Value)>>>,
}

#[async_trait::async_trait]
impl iii_sdk::trigger::TriggerHandler for FakeHarness {
    async fn register_trigger(
        &self,
        config: iii_sdk::trigger::TriggerConfig,
    ) -> Result<(), iii_sdk::Error> {
        let event = json!({
            "point": "pre_generate", "session_id": "s_1", "turn_id": "t_1", "step": 1, "depth": 0,
            "generate": { "system_prompt": "You are helpful.", "messages": [], "model": "m" }
        });
        let answer = self
            .client
            .trigger(iii_sdk::protocol::TriggerRequest {
                function_id: config.function_id.clone(),
                payload: event,
                action: None,
                timeout_ms: Some(10_000),
            })
            .await?;
        self.answers
            .lock()
            .unwrap()
            .push((config.config.clone(), answer));
        Ok(())
    }

    async fn unregister_trigger(
        &self,
        _config: iii_sdk::trigger::TriggerConfig,
    ) -> Result<(), iii_sdk::Error> {
        Ok(())
    }
}

/// The guidance hook waits, parked, for a harness; when one joins, the
/// binding arrives fail-open and the hook appends our guidance to the prompt.
#[test]
fn a_harness_gets_the_guidance_hook() {
    let engine = EngineProc::start();
    let worker = WorkerProc::start(&engine, "cr-hook");
    wait_ready(&engine, &worker);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let client = iii_sdk::register_worker(&engine.url(), InitOptions::default());
    let answers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    client.register_trigger_type(iii_sdk::RegisterTriggerType::new(
        code_runner::iii::PRE_GENERATE,
        "fake harness hook point",
        FakeHarness {
            client: client.clone(),
            answers: answers.clone(),
        },
    ));
    let until = Instant::now() + REGISTERED;
    let (config, answer) = loop {
        if let Some(first) = answers.lock().unwrap().first().cloned() {
            break first;
        }
        assert!(
            Instant::now() < until,
            "no binding arrived\n{}",
            worker.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(config["on_error"], "fail_open", "{config}");
    let prompt = answer["mutations"]["system_prompt"].as_str().unwrap_or("");
    assert!(prompt.starts_with("You are helpful."), "{answer}");
    assert!(prompt.contains("code-runner::run"), "{answer}");
    client.shutdown();
}
