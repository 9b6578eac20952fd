//! The link to a real iii engine, in both languages: `iii trigger` runs the
//! quickstart, the engine shows our functions typed, our error codes reach
//! the caller, and a guest's `iii.trigger` reaches another worker's
//! function through the engine (a denied one refused before dispatch).

use iii_sdk::{InitOptions, RegisterFunction};
use serde_json::{Value, json};

use super::{wait_ready, wait_ready_in, when_published};
use crate::helpers::engine::{EngineProc, WorkerProc};
use crate::helpers::lang::{LANGS, pick};

/// Issue 7's done-when, per language: `iii trigger code-runner::run
/// lang=python code='result = 2 + 2'` answers 4 through the engine, and
/// node's `code='console.log("hi"); return 2 + 2'` answers 4 with stdout
/// `hi\n`, one-shot (no `runtime_id`); the engine shows our functions
/// typed, with their descriptions.
fn iii_trigger_runs_the_quickstart_and_functions_are_typed(lang: &str) {
    let engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, &format!("cr-typed-{lang}"));
    wait_ready_in(&engine, &worker, lang);
    let (code, stdout) = pick(
        lang,
        ("code=result = 2 + 2", ""),
        (r#"code=console.log("hi"); return 2 + 2"#, "hi\n"),
    );
    let answer = engine
        .trigger_kv(
            "code-runner::run",
            &[&format!("lang={lang}"), code, "timeout_ms=30000"],
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["result"], 4, "{answer}");
    assert_eq!(answer["stdout"], stdout, "{answer}");
    assert_eq!(answer["exit_code"], 0, "{answer}");
    assert_eq!(answer["success"], true, "{answer}");
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

#[test]
fn iii_trigger_runs_the_quickstart_and_functions_are_typed_in_python() {
    iii_trigger_runs_the_quickstart_and_functions_are_typed("python");
}

#[test]
fn iii_trigger_runs_the_quickstart_and_functions_are_typed_in_node() {
    iii_trigger_runs_the_quickstart_and_functions_are_typed("node");
}

/// Our error codes survive the engine: a timeout is `code-runner::timeout`
/// (in either language), a typo is `invalid_request` naming the field,
/// while the engine's own `_caller_worker_id` (added to every call) is
/// accepted, and an unknown runtime is `runtime_not_found`.
#[test]
fn errors_reach_the_caller_with_our_codes() {
    let engine = EngineProc::start();
    let worker = WorkerProc::start(&engine, "cr-errors");
    wait_ready(&engine, &worker);
    for lang in LANGS {
        let spin = pick(lang, "while True: pass", "while (true) {}");
        let err = engine
            .trigger(
                "code-runner::run",
                &json!({"lang": lang, "code": spin, "timeout_ms": 300}),
            )
            .unwrap_err();
        assert_eq!(err["code"], "code-runner::timeout", "{lang}: {err}");
    }
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

/// A guest's `iii.trigger` goes through the engine and reaches a function
/// of another worker, and a denied function is refused before dispatch.
/// (Python's worker has no warm pool: its run boots its interpreter inside
/// the engine's call.)
fn guest_trigger_reaches_another_workers_function(lang: &str) {
    let engine = EngineProc::start();
    let config = pick(lang, "warm_pool: 0\n", "");
    let mut worker = WorkerProc::with_config(&engine, &format!("cr-caller-{lang}"), config);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let other = iii_sdk::register_worker(&engine.url(), InitOptions::default());
    let _echo = other.register_function(
        "demo::echo",
        RegisterFunction::new_async(|input: Value| async move { Ok(json!({ "echo": input })) })
            .description("Echo the payload back."),
    );
    when_published(&engine, "demo::echo", &json!({"ping": 1}));
    wait_ready_in(&engine, &worker, lang);
    let code = pick(
        lang,
        r#"
answer = iii.trigger({"function_id": "demo::echo", "payload": {"n": 41}})
refused = None
try:
    iii.trigger({"function_id": "state::claim-namespace", "payload": {}})
except IIIError as e:
    refused = e.code
result = [answer["echo"]["n"] + 1, refused]
"#,
        r#"
const answer = await iii.trigger({ function_id: "demo::echo", payload: { n: 41 } });
let refused = null;
try { await iii.trigger({ function_id: "state::claim-namespace", payload: {} }); } catch (e) { refused = e.code; }
return [answer.echo.n + 1, refused];
"#,
    );
    let answer = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": lang, "code": code, "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["result"], json!([42, "forbidden"]), "{answer}");
    other.shutdown();
    worker.assert_alive();
}

#[test]
fn guest_trigger_reaches_another_workers_function_in_python() {
    guest_trigger_reaches_another_workers_function("python");
}

#[test]
fn guest_trigger_reaches_another_workers_function_in_node() {
    guest_trigger_reaches_another_workers_function("node");
}
