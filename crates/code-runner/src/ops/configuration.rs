//! The configuration's bus functions: `configuration::get` and
//! `configuration::set` (shaped like the iii configuration worker's, for a
//! worker running standalone) and `code-runner::on-config-change` (the
//! reload hook an engine's configuration trigger calls).
//!
//! `set` replaces the whole value, as the iii configuration worker's does: a
//! key left out takes its default. To change one key, `get`, edit, `set`.

use std::sync::Arc;

use code_runner_core::wire::schema_of;
use code_runner_core::{Config, RunnerError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bus::names::{CONFIG_ID, CONFIGURATION_GET, CONFIGURATION_SET, ON_CONFIG_CHANGE};
use crate::bus::payload::parse;
use crate::bus::{CallError, Function};
use crate::ops::{Ops, handler};
use crate::settings::Settings;

/// `configuration::get`'s payload.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ConfigurationGetRequest")]
pub struct GetRequest {
    /// The entry: `code-runner`, the only one this worker serves.
    pub id: String,
    /// Accepted for the iii shape; values are never expanded here, so it changes nothing.
    #[serde(default)]
    #[allow(dead_code, reason = "read by serde and the schema only")]
    pub raw: bool,
}

/// `configuration::get`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(title = "ConfigurationGetResponse")]
pub struct GetResponse {
    /// The entry's id.
    pub id: String,
    /// The stored configuration, every key present.
    pub value: Config,
    /// Keys whose stored value applies only after a restart (the running worker still uses the old one).
    pub pending_restart: Vec<String>,
}

/// `configuration::set`'s payload.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ConfigurationSetRequest")]
pub struct SetRequest {
    /// The entry: `code-runner`.
    pub id: String,
    /// The whole new configuration: a key left out takes its default.
    #[schemars(with = "Config")]
    pub value: Value,
}

/// `configuration::set`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(title = "ConfigurationSetResponse")]
pub struct SetResponse {
    /// The stored configuration before.
    pub old_value: Config,
    /// The stored configuration now.
    pub new_value: Config,
    /// Keys changed by this call that apply to the next call.
    pub applied: Vec<String>,
    /// Keys whose stored value applies only after a restart.
    pub pending_restart: Vec<String>,
}

// `code-runner::on-config-change`'s payload (whatever the engine sends,
// ignored) and answer. Crate-private and undocumented so that their schemas
// are exactly the contract's (schemars turns doc comments into descriptions).
#[derive(Debug, JsonSchema)]
#[schemars(title = "OnConfigChangeRequest")]
pub(crate) struct OnConfigChangeRequest {}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(title = "OnConfigChangeResponse")]
pub(crate) struct OnConfigChangeResponse {
    ok: bool,
}

/// Registers the three functions on the bus.
pub(crate) fn functions(ops: &Arc<Ops>) -> Vec<(&'static str, Function)> {
    vec![
        (
        CONFIGURATION_GET,
        Function::new(
            "Read the code-runner configuration (id: \"code-runner\"): every key with its stored value, and the keys pending a restart.",
            schema_of::<GetRequest>(),
            schema_of::<GetResponse>(),
            handler(ops, get),
        ),
        ),
        (
        CONFIGURATION_SET,
        Function::new(
            "Replace the code-runner configuration (id: \"code-runner\") with a whole value (a key left out takes its default), validated against its JSON Schema. Caps, timeouts and inject_guidance apply to the next call; other keys are saved and apply at the next restart.",
            schema_of::<SetRequest>(),
            schema_of::<SetResponse>(),
            handler(ops, set),
        ),
        ),
        (
        ON_CONFIG_CHANGE,
        Function::new(
            "Internal: re-read the code-runner configuration from the store in force (never from this payload) and apply it. Caps, timeouts and inject_guidance apply to the next call; runtime, memory and scratch limits at the next restart.",
            schema_of::<OnConfigChangeRequest>(),
            schema_of::<OnConfigChangeResponse>(),
            handler(ops, on_config_change),
        )
        .internal(),
        ),
    ]
}

fn check_id(id: &str) -> Result<(), RunnerError> {
    if id == CONFIG_ID {
        return Ok(());
    }
    Err(RunnerError::invalid(format!(
        "no configuration `{id}` here: this worker serves only `{CONFIG_ID}`"
    )))
}

async fn get(settings: Arc<Settings>, payload: Value) -> Result<Value, CallError> {
    let request: GetRequest = parse(payload)?;
    check_id(&request.id)?;
    let response = GetResponse {
        id: request.id,
        value: settings.stored(),
        pending_restart: settings.pending_restart(),
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

async fn set(settings: Arc<Settings>, payload: Value) -> Result<Value, CallError> {
    let request: SetRequest = parse(payload)?;
    check_id(&request.id)?;
    let (old_value, new_value, applied) = settings.set(&request.value).await?;
    let response = SetResponse {
        old_value,
        new_value,
        applied: applied.now,
        pending_restart: applied.pending_restart,
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// Never reads its payload: an event's copy of the value could be stale or forged.
async fn on_config_change(settings: Arc<Settings>, _payload: Value) -> Result<Value, CallError> {
    settings.reload().await?;
    Ok(serde_json::to_value(OnConfigChangeResponse { ok: true }).unwrap_or(Value::Null))
}
