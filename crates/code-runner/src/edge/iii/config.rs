//! The configuration, on an engine: the engine's configuration worker is the
//! authority.
//!
//! On every return to `Connected` ([`ensure_entry`]) the `code-runner` entry
//! is registered with the configuration's JSON Schema: with an initial value
//! (the data directory's file, itself seeded by `--config`) only when the
//! engine has none, since registering with one overwrites what is stored.
//! The SDK does not replay these calls after a reconnect, and after an engine
//! restart `configuration::set` fails until the entry is registered again.
//! A `configuration` trigger for the entry calls `code-runner::on-config-change`,
//! which reloads from [`IiiConfigStore`], never from the event.
//!
//! The data directory's file becomes a cache of the engine's value: it is
//! what the next start reads before the engine answers.

use std::sync::{Arc, Weak};
use std::time::Duration;

use code_runner_core::{BoxFuture, Config, ErrorCode, RunnerError};
use iii_sdk::protocol::RegisterTriggerInput;
use serde_json::{Value, json};

use crate::bus::names::{CONFIG_ID, ON_CONFIG_CHANGE};
use crate::edge::iii::{Delivery, IiiLink};
use crate::settings::{ConfigFile, ConfigStore, Settings, config_schema, parse_value};

/// How long a configuration call to the engine may take.
const CALL: Duration = Duration::from_secs(10);

/// The engine's configuration worker as the store in force; the data
/// directory's file keeps a copy.
pub(crate) struct IiiConfigStore {
    link: Weak<IiiLink>,
    cache: ConfigFile,
}

impl IiiConfigStore {
    pub(crate) fn new(link: &Arc<IiiLink>, cache: ConfigFile) -> IiiConfigStore {
        IiiConfigStore {
            link: Arc::downgrade(link),
            cache,
        }
    }

    fn link(&self) -> Result<Arc<IiiLink>, RunnerError> {
        self.link
            .upgrade()
            .ok_or_else(|| RunnerError::engine("the iii engine link is closed"))
    }

    /// Keeps the file equal to `config`, off the async workers.
    async fn cache(&self, config: &Config) {
        let (file, config) = (self.cache.clone(), config.clone());
        let same = {
            let file = file.clone();
            let config = config.clone();
            tokio::task::spawn_blocking(move || file.read().is_ok_and(|c| c == config))
                .await
                .unwrap_or(false)
        };
        if !same {
            let written = tokio::task::spawn_blocking(move || file.write(&config)).await;
            if let Ok(Err(err)) = written {
                tracing::warn!(
                    "cannot keep the configuration's local copy: {}",
                    err.message
                );
            }
        }
    }
}

impl ConfigStore for IiiConfigStore {
    fn load(&self) -> BoxFuture<'_, Result<Config, RunnerError>> {
        Box::pin(async move {
            let link = self.link()?;
            let answer = link
                .trigger(
                    "configuration::get",
                    json!({ "id": CONFIG_ID }),
                    CALL,
                    Delivery::Call,
                )
                .await
                .map_err(|err| {
                    RunnerError::engine(format!(
                        "the engine's configuration worker: {}: {}",
                        err.code, err.message
                    ))
                })?;
            let config = parse_value(&answer["value"]).map_err(|err| {
                RunnerError::new(
                    err.code,
                    format!("the engine's `{CONFIG_ID}` entry: {}", err.message),
                )
            })?;
            self.cache(&config).await;
            Ok(config)
        })
    }

    fn save<'a>(&'a self, config: &'a Config) -> BoxFuture<'a, Result<(), RunnerError>> {
        Box::pin(async move {
            let link = self.link()?;
            let value = serde_json::to_value(config).unwrap_or(Value::Null);
            link.trigger(
                "configuration::set",
                json!({ "id": CONFIG_ID, "value": value }),
                CALL,
                Delivery::Call,
            )
            .await
            .map_err(|err| {
                let code = if err.code == ErrorCode::InvalidRequest.as_str()
                    || err.code.eq_ignore_ascii_case("SCHEMA_INVALID")
                {
                    ErrorCode::InvalidRequest
                } else {
                    ErrorCode::Engine
                };
                RunnerError::new(
                    code,
                    format!(
                        "the engine's configuration worker refused the value: {}: {}",
                        err.code, err.message
                    ),
                )
            })?;
            self.cache(config).await;
            Ok(())
        })
    }
}

/// The entry's registration: its schema and, on the engine's first sight of
/// it, the initial value.
fn registration(initial: Option<&Config>) -> Value {
    let mut entry = json!({
        "id": CONFIG_ID,
        "name": "code-runner",
        "description": "Limits and defaults of the code-runner worker: caps, timeouts and inject_guidance apply to the next call; runtime, memory and scratch limits at the next restart.",
        "schema": config_schema(),
        "metadata": { "owner": "code-runner" },
    });
    if let Some(initial) = initial {
        entry["initial_value"] = serde_json::to_value(initial).unwrap_or(Value::Null);
    }
    entry
}

/// Registers the entry (again) and takes the engine's value: run on every
/// return to `Connected`.
pub(crate) async fn ensure_entry(link: &Arc<IiiLink>, settings: &Settings) {
    let existing = link
        .trigger(
            "configuration::get",
            json!({ "id": CONFIG_ID }),
            CALL,
            Delivery::Call,
        )
        .await;
    let initial = match &existing {
        Err(err) if err.code.eq_ignore_ascii_case("NOT_FOUND") => Some(settings.stored()),
        Err(err) => {
            tracing::warn!(
                "cannot read the `{CONFIG_ID}` configuration entry from the engine: {}: {}",
                err.code,
                err.message
            );
            return;
        }
        Ok(_) => None,
    };
    let registered = link
        .trigger(
            "configuration::register",
            registration(initial.as_ref()),
            CALL,
            Delivery::Call,
        )
        .await;
    match registered {
        Ok(_) => {
            tracing::info!(
                seeded = initial.is_some(),
                "registered the `{CONFIG_ID}` configuration entry on the engine"
            );
            // Apply the engine's value now rather than wait for an event.
            let _ = settings.reload().await;
        }
        Err(err) => tracing::warn!(
            "the engine refused the `{CONFIG_ID}` configuration entry: {}: {}",
            err.code,
            err.message
        ),
    }
}

/// Whether the engine holds the entry's schema (it loses it on a restart
/// until the entry is registered again). An unanswered question counts as yes:
/// the connection loop handles an engine that is away.
pub(crate) async fn entry_has_schema(link: &Arc<IiiLink>) -> bool {
    let answer = link
        .trigger(
            "configuration::schema",
            json!({ "id": CONFIG_ID }),
            CALL,
            Delivery::Call,
        )
        .await;
    match answer {
        Ok(entry) => !entry["schema"].is_null(),
        Err(err) => {
            !(err.code.eq_ignore_ascii_case("NOT_FOUND")
                || err.code.eq_ignore_ascii_case("SCHEMA_UNAVAILABLE"))
        }
    }
}

/// The trigger that tells this worker the entry changed.
pub(crate) fn change_trigger() -> RegisterTriggerInput {
    RegisterTriggerInput::new(
        "configuration",
        ON_CONFIG_CHANGE,
        json!({ "configuration_id": CONFIG_ID }),
    )
}
