//! code-runner as a worker of a real iii engine (issue 7, and issue 12's
//! engine for node): the link itself (`link`: calls both ways, typed
//! functions, our error codes), functions published on the engine
//! (`functions`), an engine restart that loses nothing (`restart`),
//! several workers on one engine (`workers`), and the peers that fetch our
//! cards and bind our hook (`peers`). Each test starts its own engine (the
//! binary from `III_BIN` or `../shared/iii/iii`, see `helpers::engine`).

mod approvals;
mod functions;
mod link;
mod peers;
mod restart;
mod workers;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::engine::{EngineProc, WorkerProc, is_not_found};
use crate::helpers::lang::{pick, returning};

/// How long a worker may take to (re)appear on the engine on a busy machine.
const REGISTERED: Duration = Duration::from_secs(90);

/// How long a registration may take to appear on (or leave) the engine.
const SETTLE: Duration = Duration::from_secs(90);

/// Waits until `worker` answers a python run through `engine`.
fn wait_ready(engine: &EngineProc, worker: &WorkerProc) {
    wait_ready_in(engine, worker, "python");
}

/// Waits until `worker` answers a `lang` run through `engine`.
fn wait_ready_in(engine: &EngineProc, worker: &WorkerProc, lang: &str) {
    let answer = engine
        .trigger_when_registered(
            "code-runner::run",
            &json!({"lang": lang, "code": returning(lang, "'ready'"), "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(answer["result"], "ready", "{lang}: {answer}");
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

/// A handler of `lang` answering `payload.lang`'s greeting (the seed's example).
fn greet_source(lang: &str) -> &'static str {
    pick(
        lang,
        "_greetings = {'en': 'hello', 'pt': 'olá'}\n\ndef handler(payload):\n    return _greetings.get(payload.get('lang', 'en'), 'hello')\n",
        "const greetings = { en: 'hello', pt: 'olá' };\nexport function handler(payload) {\n  return greetings[payload.lang ?? 'en'] ?? 'hello';\n}\n",
    )
}
