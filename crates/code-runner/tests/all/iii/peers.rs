//! The engine's other peers and what they get from us: a console fetches
//! both of our cards through the content function, and a harness's
//! `pre-generate` hook point gets the guidance hook bound fail-open.
//! (No guest code runs here, so no language.)

use std::time::{Duration, Instant};

use iii_sdk::InitOptions;
use serde_json::{Value, json};

use super::{REGISTERED, wait_ready};
use crate::helpers::engine::{EngineProc, WorkerProc};

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
