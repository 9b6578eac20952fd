//! The iii engine connection: code-runner as a worker of an iii engine.
//!
//! [`IiiLink::connect`] registers this process with the engine through
//! `iii-sdk` and keeps the engine's view in step with the embedded bus
//! ([`mirror`]): every function the bus holds is a function of the engine,
//! with its description, schemas and metadata, so the console, other workers
//! and `iii trigger` call it. Guest `iii.trigger` goes the other way, through
//! [`IiiLink::trigger`], and reaches any worker's function. The SDK
//! reconnects by itself and replays functions and triggers; what it does not
//! replay (calls made with `trigger`, such as the configuration entry) runs
//! again on every return to `Connected` ([`watch`]). How a worker joins is
//! [`IiiOptions`].

mod config;
mod mirror;
mod options;
mod remote;
mod routing;
mod watch;

pub use options::IiiOptions;
pub use routing::{minted_by, scoped_id};

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::protocol::{RegisterTriggerInput, TriggerRequest};
use iii_sdk::runtime::{IIIConnectionState, WorkerMetadata};
use iii_sdk::{IIIClient, InitOptions, TriggerAction};
use serde_json::Value;

use crate::bus::CallError;
use crate::bus::names::INJECT_GUIDANCE;
use crate::bus::outbound::{Outbound, RemoteGuest};
use crate::ops::Ops;

/// A live connection to an engine; cheap to share.
pub struct IiiLink {
    client: IIIClient,
    worker_name: String,
    mirror: mirror::Mirror,
    router: routing::Router,
    /// Trigger bindings this worker made (console assets, the prompt hook);
    /// the SDK replays them after a reconnect, so they are made once.
    bindings: std::sync::Mutex<Vec<iii_sdk::trigger::Trigger>>,
}

/// The guest-facing shape of a call through the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Wait for the answer.
    Call,
    /// Fire and forget: the engine's void invocation, answered at once with null.
    Void,
}

impl IiiLink {
    /// Registers with the engine at `options.url` (the SDK connects in the
    /// background and reconnects forever) and starts mirroring the bus.
    pub(crate) fn connect(ops: &Arc<Ops>, options: &IiiOptions) -> Arc<IiiLink> {
        let client = iii_sdk::register_worker(
            &options.url,
            InitOptions {
                metadata: Some(WorkerMetadata {
                    name: options.worker_name.clone(),
                    description: Some(
                        "Runs untrusted JavaScript and Python in-process, with hard limits.".into(),
                    ),
                    ..WorkerMetadata::default()
                }),
                ..Default::default()
            },
        );
        let link = Arc::new(IiiLink {
            client,
            worker_name: options.worker_name.clone(),
            mirror: mirror::Mirror::default(),
            router: routing::Router::new(),
            bindings: std::sync::Mutex::default(),
        });
        routing::install(ops, &link);
        link.mirror.sync(&link.client, ops);
        ops.settings.use_store(Arc::new(config::IiiConfigStore::new(
            &link,
            crate::settings::ConfigFile::in_data_dir(ops.data_dir()),
        )));
        link.bind(&bindings());
        watch::watch(&link, ops);
        link
    }

    /// This worker's name on the engine.
    pub fn worker_name(&self) -> &str {
        &self.worker_name
    }

    /// Whether the engine is reachable right now.
    pub fn connected(&self) -> bool {
        self.client.get_connection_state() == IIIConnectionState::Connected
    }

    /// The connection state, for `/healthz`.
    pub fn state(&self) -> &'static str {
        match self.client.get_connection_state() {
            IIIConnectionState::Connected => "connected",
            IIIConnectionState::Connecting => "connecting",
            IIIConnectionState::Reconnecting => "reconnecting",
            IIIConnectionState::Disconnected => "disconnected",
            IIIConnectionState::Failed => "failed",
        }
    }

    /// Makes trigger bindings; a refused one is logged and skipped.
    fn bind(&self, inputs: &[RegisterTriggerInput]) {
        let mut held = self.bindings.lock().unwrap_or_else(|p| p.into_inner());
        for input in inputs {
            match self.client.register_trigger(input.clone()) {
                Ok(trigger) => held.push(trigger),
                Err(err) => tracing::warn!(
                    trigger_type = %input.trigger_type,
                    function = %input.function_id,
                    "cannot bind a trigger on the engine: {err}"
                ),
            }
        }
    }

    /// Calls `function_id` through the engine within `timeout`.
    ///
    /// # Errors
    /// The callee's error with its code intact; `code-runner::timeout` when
    /// no answer came in time; `code-runner::engine` when the engine is
    /// unreachable.
    pub async fn trigger(
        &self,
        function_id: &str,
        payload: Value,
        timeout: Duration,
        delivery: Delivery,
    ) -> Result<Value, CallError> {
        self.send(function_id, payload, timeout, delivery, None)
            .await
    }

    /// Calls `function_id` through the engine within `timeout` on behalf of
    /// guest code with lineage `guest` (carried as the call's metadata, so
    /// the callee charges it; see [`remote`]), or of the host when `None`.
    ///
    /// # Errors
    /// As [`IiiLink::trigger`].
    pub(crate) async fn trigger_as(
        &self,
        function_id: &str,
        payload: Value,
        timeout: Duration,
        guest: Option<RemoteGuest>,
    ) -> Result<Value, CallError> {
        let metadata = guest.map(|guest| guest.metadata(&self.worker_name));
        self.send(function_id, payload, timeout, Delivery::Call, metadata)
            .await
    }

    async fn send(
        &self,
        function_id: &str,
        payload: Value,
        timeout: Duration,
        delivery: Delivery,
        metadata: Option<Value>,
    ) -> Result<Value, CallError> {
        let request = TriggerRequest {
            function_id: function_id.to_string(),
            payload,
            action: (delivery == Delivery::Void).then_some(TriggerAction::Void),
            timeout_ms: Some(
                u64::try_from(timeout.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            ),
        };
        let answer = match metadata {
            Some(metadata) => self.client.trigger(request.metadata(metadata)).await,
            None => self.client.trigger(request).await,
        };
        answer.map_err(|err| from_sdk(function_id, timeout, err))
    }

    /// Unregisters everything and stops the connection.
    pub async fn shutdown(&self) {
        for trigger in self
            .bindings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            trigger.unregister();
        }
        self.mirror.clear();
        self.client.shutdown_async().await;
    }
}

impl Outbound for IiiLink {
    fn worker_name(&self) -> &str {
        &self.worker_name
    }

    fn call<'a>(
        &'a self,
        function_id: &'a str,
        payload: Value,
        timeout: Duration,
        guest: Option<RemoteGuest>,
    ) -> code_runner_core::BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(self.trigger_as(function_id, payload, timeout, guest))
    }

    fn release<'a>(&'a self, tree: String) -> code_runner_core::BoxFuture<'a, ()> {
        Box::pin(routing::release(self, tree))
    }
}

/// The bindings every worker makes: its configuration entry's changes to
/// `code-runner::on-config-change`, its console assets to the console's
/// `console:script`/`console:style` slots, and the guidance hook to the
/// harness's `pre-generate` point (fail-open: a slow or absent code-runner
/// never fails an agent turn). Both wait, parked by the engine, until a
/// console or a harness joins.
fn bindings() -> Vec<RegisterTriggerInput> {
    let mut inputs: Vec<RegisterTriggerInput> = crate::edge::ui::console_assets()
        .filter_map(|asset| {
            Some(RegisterTriggerInput::new(
                asset.trigger_type?,
                crate::bus::names::UI_CONTENT,
                serde_json::json!({ "path": asset.path }),
            ))
        })
        .collect();
    inputs.push(config::change_trigger());
    inputs.push(RegisterTriggerInput::new(
        PRE_GENERATE,
        INJECT_GUIDANCE,
        serde_json::json!({ "priority": 100, "timeout_ms": 2000, "on_error": "fail_open" }),
    ));
    inputs
}

/// The harness hook point our guidance binds to (the shipped harness's spelling).
pub const PRE_GENERATE: &str = "harness::hook::pre-generate";

/// An SDK error as a bus error, with the callee's code kept.
fn from_sdk(function_id: &str, timeout: Duration, err: iii_sdk::Error) -> CallError {
    use code_runner_core::ErrorCode;
    match err {
        // Another worker's text: bounded like ours (a code is an identifier).
        iii_sdk::Error::Remote { code, message, .. } => CallError::new(
            code.chars().take(128).collect::<String>(),
            code_runner_core::bound_message(message),
        ),
        iii_sdk::Error::Timeout => CallError::new(
            ErrorCode::Timeout.as_str(),
            format!(
                "{function_id} got no answer through the iii engine within {} ms",
                timeout.as_millis()
            ),
        ),
        iii_sdk::Error::NotConnected => CallError::new(
            ErrorCode::Engine.as_str(),
            format!("cannot call {function_id}: the iii engine is not connected"),
        ),
        other => CallError::new(
            ErrorCode::Engine.as_str(),
            format!("calling {function_id} through the iii engine failed: {other}"),
        ),
    }
}

/// One call through the engine at `url` from a short-lived connection, as
/// `code-runner call --engine` makes it.
///
/// # Errors
/// The engine is unreachable within `timeout_ms`; a function's own error is
/// the ops `Err`.
pub async fn call_once(
    url: &str,
    function_id: &str,
    payload: Value,
    timeout_ms: u64,
) -> anyhow::Result<Result<Value, CallError>> {
    let client = iii_sdk::register_worker(
        url,
        InitOptions {
            metadata: Some(WorkerMetadata {
                name: format!("code-runner-call-{}", std::process::id()),
                ..WorkerMetadata::default()
            }),
            ..Default::default()
        },
    );
    let timeout = Duration::from_millis(timeout_ms.max(1));
    let deadline = tokio::time::Instant::now() + timeout;
    while client.get_connection_state() != IIIConnectionState::Connected {
        if tokio::time::Instant::now() >= deadline || client.fatal_error().is_some() {
            client.shutdown_async().await;
            anyhow::bail!(
                "cannot reach the iii engine at {url} within {timeout_ms} ms ({})",
                client
                    .fatal_error()
                    .map_or_else(|| "no connection".to_string(), |e| e.to_string())
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let request = TriggerRequest {
        function_id: function_id.to_string(),
        payload,
        action: None,
        timeout_ms: Some(u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1)),
    };
    let answer = client
        .trigger(request)
        .await
        .map_err(|err| from_sdk(function_id, left, err));
    client.shutdown_async().await;
    Ok(answer)
}
