//! An engine restart loses nothing: the worker reconnects by itself, its
//! kept runtimes (of both languages) answer with their state, and its
//! configuration entry is registered again so `configuration::set` through
//! the engine keeps applying to the next call.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{REGISTERED, wait_ready};
use crate::helpers::engine::{EngineProc, WorkerProc};

/// Killing and restarting the engine loses nothing: the worker reconnects by
/// itself, its functions come back, and a kept runtime of either language
/// still answers with its state.
#[test]
fn engine_restart_keeps_functions_and_kept_runtimes() {
    let mut engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, "cr-restart");
    wait_ready(&engine, &worker);
    let mut kept = Vec::new();
    for (lang, keep, turn) in [
        ("python", "x = 41", "result = x + 1"),
        ("node", "globalThis.x = 41", "return x + 1"),
    ] {
        let answer = engine
            .trigger(
                "code-runner::run",
                &json!({"lang": lang, "keep": true, "code": keep, "timeout_ms": 30000}),
            )
            .unwrap();
        let id = answer["runtime_id"]
            .as_str()
            .expect("runtime_id")
            .to_string();
        kept.push((lang, id, turn));
    }

    engine.restart();
    for (lang, id, turn) in kept {
        let until = Instant::now() + REGISTERED;
        let answer = loop {
            let answer =
                engine.trigger("code-runner::run", &json!({"runtime_id": id, "code": turn}));
            match answer {
                Ok(answer) => break answer,
                Err(err) if Instant::now() < until => {
                    let _ = err;
                    std::thread::sleep(Duration::from_millis(300));
                }
                Err(err) => panic!(
                    "{lang}: not back after the restart: {err}\n{}",
                    worker.log()
                ),
            }
        };
        assert_eq!(answer["result"], 42, "{lang}: {answer}");
    }
    worker.assert_alive();
}

/// The engine's configuration worker is the authority on an engine: the
/// worker registers its entry (seeded from its own file), a
/// `configuration::set` through the engine applies to the very next call,
/// and after an engine restart the entry is registered again, so `set`
/// keeps working (the engine refuses it for an entry nobody re-registered).
/// (The probe is a python run: the caps bite both languages alike, see
/// `config`.)
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
