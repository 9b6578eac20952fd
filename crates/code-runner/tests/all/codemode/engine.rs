//! Code mode on a real iii engine: another worker's function (registered
//! through the SDK, with a request schema) is declared by `describe` and
//! called by name through `iii.fn`, its payload checked here first.

use iii_sdk::{InitOptions, RegisterFunction};
use serde_json::{Value, json};

use super::DESCRIBE;
use crate::helpers::INVALID_REQUEST;
use crate::helpers::engine::{EngineProc, WorkerProc};

/// The other worker's `peer-app::greet` is in `describe`'s declarations
/// (with its schema's types and its description) and a node guest calls it
/// as `iii.fn.peer_app.greet`; a payload its schema refuses never leaves.
#[test]
fn another_workers_function_is_declared_and_called_by_name() {
    let engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, "cr-codemode");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let other = iii_sdk::register_worker(&engine.url(), InitOptions::default());
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let _greet = other.register_function(
        "peer-app::greet",
        RegisterFunction::new_async(move |input: Value| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move { Ok(json!(format!("hi {}", input["name"].as_str().unwrap_or("?")))) }
        })
        .description("Greets a peer.")
        .request_format(json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}})),
    );
    engine
        .trigger_when_registered("peer-app::greet", &json!({"name": "probe"}))
        .unwrap_or_else(|e| panic!("{e}"));
    let described = engine
        .trigger_when_registered(DESCRIBE, &json!({"lang": "typescript", "query": "peer"}))
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    let text = described["declarations"].as_str().unwrap_or("");
    assert!(
        text.contains("declare namespace iii.fn.peer_app {"),
        "{described}"
    );
    assert!(text.contains("Greets a peer."), "{text}");
    assert!(
        text.contains("function greet(input: { name: string; }): Promise<unknown>;"),
        "{text}"
    );
    let code = "const ok = await iii.fn.peer_app.greet({ name: 'Ada' });\nlet refused = null;\ntry { await iii.fn.peer_app.greet({ name: 7 }); } catch (e) { refused = e.code; }\nreturn [ok, refused];";
    let before = calls.load(std::sync::atomic::Ordering::SeqCst);
    let answer = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "node", "code": code, "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(
        answer["result"],
        json!(["hi Ada", INVALID_REQUEST]),
        "{answer}"
    );
    // Ada's call reached it; the refused payload never did.
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), before + 1);
    other.shutdown();
    worker.assert_alive();
}
