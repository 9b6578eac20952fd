//! What belongs to the operator (issue 16, items 11 and 12), for guest code
//! of both languages: on a worker of its own it cannot rewrite the worker's
//! configuration; through the real engine binary and the real
//! `code-runner serve` it cannot change any configuration entry, cannot
//! bind its functions to trigger types the operator did not open (never to
//! UI slots, hooks, configuration, log or trace), cannot unregister
//! triggers it did not register, and cannot call the engine's
//! administrative functions.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::Server;
use crate::helpers::engine::{EngineProc, WorkerProc};
use crate::helpers::lang::{LANGS, pick};

/// How long a worker may take to appear on the engine on a busy machine.
const REGISTERED: Duration = Duration::from_secs(90);

/// A guest run's budget: long enough for a loaded machine.
const RUN_MS: u64 = 60_000;

/// Waits until `worker` serves runs through `engine` and its configuration
/// entry is registered.
fn wait_ready(engine: &EngineProc, worker: &WorkerProc) {
    let until = Instant::now() + REGISTERED;
    loop {
        let ran = engine.trigger_when_registered(
            "code-runner::run",
            &json!({"lang": "python", "code": "result = 1", "timeout_ms": RUN_MS}),
        );
        let entry = engine.trigger("configuration::get", &json!({"id": "code-runner"}));
        if ran.is_ok() && entry.is_ok() {
            return;
        }
        assert!(
            Instant::now() < until,
            "{ran:?} {entry:?}\n{}",
            worker.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Runs `lang` `code` through the engine; the answer.
fn run(engine: &EngineProc, worker: &WorkerProc, lang: &str, code: &str) -> Value {
    let answer = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": lang, "code": code, "timeout_ms": RUN_MS}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["exit_code"], 0, "{lang}: {answer}");
    answer
}

/// `lang` guest code that tries each `[function_id, payload]` of `calls`
/// and returns, per call, `["ok", answer]` or `[code, message]`.
fn attempts(lang: &str, calls: &Value) -> String {
    pick(
        lang,
        format!(
            "import json\nout = []\nfor fid, payload in json.loads({calls:?}):\n    try:\n        out.append(['ok', iii.trigger({{'function_id': fid, 'payload': payload}})])\n    except IIIError as e:\n        out.append([e.code, e.message])\nresult = out",
            calls = calls.to_string()
        ),
        format!(
            "const out = [];\nfor (const [fid, payload] of {calls}) {{\n  try {{ out.push(['ok', await iii.trigger({{ function_id: fid, payload }})]); }}\n  catch (e) {{ out.push([e.code, e.message]); }}\n}}\nreturn out;"
        ),
    )
}

#[track_caller]
fn assert_forbidden(outcome: &Value, part: &str) {
    assert_eq!(outcome[0], "forbidden", "{outcome}");
    let message = outcome[1].as_str().unwrap_or("");
    assert!(message.contains(part), "{part:?} not in {message:?}");
}

/// Item 11: `configuration::register` with an `initial_value` overwrote
/// code-runner's stored value (`max_stream_bytes` 16384 → 64, persisted).
/// Now every configuration change from guest code is refused, whatever the
/// spelling or the entry (another worker's, a new one); reading stays open,
/// and the stored value is unchanged.
#[test]
fn guest_code_cannot_change_any_configuration() {
    let engine = EngineProc::start();
    let worker = WorkerProc::start(&engine, "cr-cfg-guard");
    wait_ready(&engine, &worker);
    let entry = |id: &str| {
        json!({"id": id, "name": "x", "description": "x", "schema": {"type": "object"},
               "initial_value": {"max_stream_bytes": 64}})
    };
    let calls = json!([
        ["configuration::register", entry("code-runner")],
        [" Configuration::Register ", entry("code-runner")],
        ["configuration::set", {"id": "code-runner", "value": {"max_stream_bytes": 64}}],
        ["configuration::set", {"id": "iii-observability", "value": {}}],
        ["configuration::register", entry("tenant-config")],
        ["engine::register_trigger", {"trigger_type": "tick", "function_id": "configuration::register"}],
        ["configuration::get", {"id": "code-runner"}],
    ]);
    for lang in LANGS {
        let result = run(&engine, &worker, lang, &attempts(lang, &calls))["result"].clone();
        let outcomes = result.as_array().unwrap();
        for outcome in &outcomes[..6] {
            assert_forbidden(outcome, "configuration");
        }
        assert_forbidden(&outcomes[0], "code-runner's own configuration");
        assert_forbidden(&outcomes[3], "may not change any configuration entry");
        assert_eq!(outcomes[6][0], "ok", "{lang}: reading stays open: {result}");
        assert_eq!(outcomes[6][1]["value"]["max_stream_bytes"], 16384, "{lang}");

        let stored = engine
            .trigger("configuration::get", &json!({"id": "code-runner"}))
            .unwrap();
        assert_eq!(stored["value"]["max_stream_bytes"], 16384, "{stored}");
        assert!(
            engine
                .trigger("configuration::get", &json!({"id": "tenant-config"}))
                .is_err(),
            "{lang}: no entry was created"
        );
        let print = pick(lang, "print('x' * 1000)", "console.log('x'.repeat(1000))");
        let printed = run(&engine, &worker, lang, print);
        assert_eq!(
            printed["stdout"].as_str().map(str::len),
            Some(1001),
            "{lang}: {printed}"
        );
    }
}

/// Item 12: a guest bound its own function to `console:script`,
/// `harness::hook::pre-generate`, `configuration`, `log` and `trace`, and
/// unregistered other workers' triggers. Now a binding needs a type the
/// operator opened (`guest_trigger_types`: here `tick`; UI slots, hooks,
/// configuration, log and trace never), a trigger may be unregistered only
/// by the lineage that registered it, and the engine's administrative
/// functions are refused.
#[test]
fn guest_triggers_need_an_open_type_and_their_own_ids() {
    let engine = EngineProc::start();
    let worker = WorkerProc::with_config(&engine, "cr-trig-guard", "guest_trigger_types: [tick]\n");
    wait_ready(&engine, &worker);
    let bind = |trigger_type: &str, config: Value| {
        json!(["engine::register_trigger",
               {"trigger_type": trigger_type, "function_id": "code-runner::run", "config": config}])
    };
    let calls = json!([
        bind("console:script", json!({"path": "evil/page.js"})),
        bind("console:style", json!({"path": "evil/styles.css"})),
        bind("harness::hook::pre-generate", json!({"priority": 1})),
        bind("configuration", json!({})),
        bind("log", json!({})),
        bind("trace", json!({})),
        bind("cron", json!({"expression": "* * * * * *"})),
        ["engine::unregister_trigger", {"id": "iii-observability::config-watch"}],
        ["engine::logs::clear", {}],
        ["engine::traces::clear", {}],
        bind("tick", json!({})),
    ]);
    for lang in LANGS {
        let kept = engine
            .trigger(
                "code-runner::run",
                &json!({"lang": lang, "keep": true, "code": attempts(lang, &calls), "timeout_ms": RUN_MS}),
            )
            .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
        let outcomes = kept["result"].as_array().unwrap().clone();
        for outcome in &outcomes[..6] {
            assert_forbidden(outcome, "never open to guest code");
        }
        assert_forbidden(&outcomes[6], "guest_trigger_types");
        assert_forbidden(&outcomes[7], "was not registered by this run's code");
        assert_forbidden(&outcomes[8], "administrative");
        assert_forbidden(&outcomes[9], "administrative");
        assert_eq!(outcomes[10][0], "ok", "{lang}: an open type binds: {kept}");
        let tick = outcomes[10][1]["id"]
            .as_str()
            .expect("a trigger id")
            .to_string();

        let listed = engine
            .trigger("engine::registered-triggers::list", &json!({}))
            .unwrap();
        assert!(
            listed
                .to_string()
                .contains("iii-observability::config-watch"),
            "the engine's own trigger is still there: {listed}"
        );
        // Another run cannot remove the tick binding; the run that made it can.
        let unbind = json!([["engine::unregister_trigger", {"id": tick}]]);
        let other = run(&engine, &worker, lang, &attempts(lang, &unbind));
        assert_forbidden(&other["result"][0], "was not registered by this run's code");
        let runtime_id = kept["runtime_id"].as_str().unwrap();
        let own = engine
            .trigger(
                "code-runner::run",
                &json!({"runtime_id": runtime_id, "code": attempts(lang, &unbind), "timeout_ms": RUN_MS}),
            )
            .unwrap();
        assert_eq!(own["result"][0][0], "ok", "{lang}: {own}");
        assert_eq!(own["result"][0][1]["removed"], true, "{lang}: {own}");
    }
}

/// Guest code cannot rewrite code-runner's configuration through
/// `iii.trigger` (it would lift its own timeouts and caps, and a
/// `max_runtimes` of a million, saved, left python unavailable after the
/// next restart); it gets `forbidden` and the stored value is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_code_cannot_change_the_worker_configuration() {
    let server = Server::start().await;
    let python = "try:\n    iii.trigger({'function_id': 'configuration::set', 'payload': \
         {'id': 'code-runner', 'value': {'max_timeout_ms': 10**12, 'max_result_bytes': 0}}})\n\
         except IIIError as err:\n    result = [err.code, err.message]\n\
         result.append(iii.trigger({'function_id': 'configuration::get', 'payload': {'id': 'code-runner'}})['value']['max_timeout_ms'])";
    let node = "let out;\n\
         try { await iii.trigger({ function_id: 'configuration::set', payload: \
         { id: 'code-runner', value: { max_timeout_ms: 1e12, max_result_bytes: 0 } } }); out = []; }\n\
         catch (err) { out = [err.code, err.message]; }\n\
         out.push((await iii.trigger({ function_id: 'configuration::get', payload: { id: 'code-runner' } })).value.max_timeout_ms);\n\
         return out;";
    for lang in LANGS {
        let answer = server.run_in(lang, pick(lang, python, node)).await;
        let body = answer.ok();
        assert_eq!(body["result"][0], "forbidden", "{lang}: {body}");
        assert!(
            body["result"][1]
                .as_str()
                .unwrap_or_default()
                .contains("own configuration"),
            "{lang}: {body}"
        );
        assert_eq!(body["result"][2], 30_000, "{lang}: {body}");
        let stored = server
            .call("configuration::get", json!({"id": "code-runner"}))
            .await;
        assert_eq!(stored.ok()["value"]["max_result_bytes"], 32_768, "{lang}");
    }
}
