//! Live configuration: the authoritative value, the value in force, and the reload tiers.
//!
//! The *authoritative* value lives in a [`ConfigStore`]: standalone, the YAML
//! file `<data-dir>/configuration/code-runner.yaml` ([`ConfigFile`]); on an
//! iii engine, the engine's configuration worker. [`Settings`] never trusts a
//! value handed to it by an event: [`Settings::reload`] reads the store in
//! force, and [`Settings::set`] writes through it.
//!
//! The value *in force* is the value captured at boot with the
//! [`NEXT_CALL_KEYS`] taken from the authoritative value: those apply to the
//! very next call, every other key when the worker next starts. Until then
//! the differing keys are *pending a restart*, and the log and `/healthz` say so.

mod file;
mod validate;
pub(crate) use validate::secret_specs;
mod watch;

use std::sync::{Arc, RwLock};

use code_runner_core::{BoxFuture, Config, NEXT_CALL_KEYS, RunnerError};
use serde::Serialize;
use serde_json::Value;

pub(crate) use file::ConfigFile;
pub(crate) use validate::{config_schema, parse_value, parse_yaml};
pub(crate) use watch::ConfigWatch;

/// Where the authoritative configuration lives.
pub(crate) trait ConfigStore: Send + Sync {
    /// The authoritative value now, validated; an error names its source and the key.
    fn load(&self) -> BoxFuture<'_, Result<Config, RunnerError>>;
    /// Replaces the authoritative value; a failure leaves the old one intact.
    fn save<'a>(&'a self, config: &'a Config) -> BoxFuture<'a, Result<(), RunnerError>>;
}

/// What one accepted value changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Keys that apply to the next call.
    pub now: Vec<String>,
    /// Keys saved but waiting for a restart (all of them, not only this change's).
    pub pending_restart: Vec<String>,
}

/// The configuration's state for `/healthz`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Status {
    /// Keys whose stored value differs from the one in force until a restart.
    pub pending_restart: Vec<String>,
    /// Why the last value read from the store was refused, until one is accepted.
    pub last_rejected: Option<String>,
}

struct State {
    /// The last authoritative value accepted.
    stored: Config,
    /// What calls use.
    in_force: Config,
    last_rejected: Option<String>,
}

/// The worker's configuration, live.
pub(crate) struct Settings {
    boot: Config,
    state: RwLock<State>,
    /// The store in force: the file, until an engine's configuration worker takes over.
    store: RwLock<Arc<dyn ConfigStore>>,
    /// Serialises reads-then-applies, so two changes cannot apply out of order.
    writer: tokio::sync::Mutex<()>,
    /// Changes applied since boot (for the metrics).
    reloads: std::sync::atomic::AtomicU64,
}

impl Settings {
    /// Settings whose value at boot is `boot`, kept in `store`.
    pub fn new(boot: Config, store: Arc<dyn ConfigStore>) -> Settings {
        Settings {
            state: RwLock::new(State {
                stored: boot.clone(),
                in_force: boot.clone(),
                last_rejected: None,
            }),
            boot,
            store: RwLock::new(store),
            writer: tokio::sync::Mutex::new(()),
            reloads: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many changes of the configuration were applied since boot.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Makes `store` the authority from now on (the iii engine's
    /// configuration worker, once the worker joins an engine).
    pub fn use_store(&self, store: Arc<dyn ConfigStore>) {
        *self.store.write().unwrap_or_else(|p| p.into_inner()) = store;
    }

    fn store(&self) -> Arc<dyn ConfigStore> {
        self.store.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The configuration calls use now.
    pub fn in_force(&self) -> Config {
        self.read(|state| state.in_force.clone())
    }

    /// The last authoritative value accepted (with restart-tier keys possibly pending).
    pub fn stored(&self) -> Config {
        self.read(|state| state.stored.clone())
    }

    /// Keys whose stored value waits for a restart.
    pub fn pending_restart(&self) -> Vec<String> {
        self.read(|state| state.in_force.changed_keys(&state.stored))
    }

    /// Pending keys and the last refusal, for `/healthz`.
    pub fn status(&self) -> Status {
        Status {
            pending_restart: self.pending_restart(),
            last_rejected: self.read(|state| state.last_rejected.clone()),
        }
    }

    /// Re-reads the store in force and applies what changed. A value the
    /// store cannot give (unreadable, invalid) is logged and ignored: the
    /// running configuration stays.
    ///
    /// # Errors
    /// The store's error, naming the offending key.
    pub async fn reload(&self) -> Result<Applied, RunnerError> {
        let _writer = self.writer.lock().await;
        match self.store().load().await {
            Ok(config) => Ok(self.apply(config)),
            Err(err) => {
                // The store's message names its source (the file) and the key.
                tracing::warn!(
                    "configuration change ignored: {}; the running configuration stays",
                    err.message
                );
                self.write(|state| state.last_rejected = Some(err.message.clone()));
                Err(err)
            }
        }
    }

    /// Validates `value` (a whole configuration: missing keys take their
    /// defaults), saves it in the store and applies it. Returns the old and
    /// the new stored value.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the offending key, before
    /// anything is written; the store's error if saving fails.
    pub async fn set(&self, value: &Value) -> Result<(Config, Config, Applied), RunnerError> {
        let config = parse_value(value)?;
        let _writer = self.writer.lock().await;
        let old = self.stored();
        self.store().save(&config).await?;
        let applied = self.apply(config.clone());
        Ok((old, config, applied))
    }

    /// Makes `config` the stored value: next-call keys go in force, the
    /// rest wait for a restart. Logs what changed.
    fn apply(&self, config: Config) -> Applied {
        let (changed, applied) = self.write(|state| {
            let changed = state.stored.changed_keys(&config);
            state.in_force = self.boot.with_next_call_keys_from(&config);
            state.stored = config;
            state.last_rejected = None;
            let applied = Applied {
                now: changed
                    .iter()
                    .filter(|key| NEXT_CALL_KEYS.contains(&key.as_str()))
                    .cloned()
                    .collect(),
                pending_restart: state.in_force.changed_keys(&state.stored),
            };
            (changed, applied)
        });
        if !changed.is_empty() {
            self.reloads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(
                "configuration changed ({}): applies to the next call: [{}]; pending a restart: [{}]",
                changed.join(", "),
                applied.now.join(", "),
                applied.pending_restart.join(", ")
            );
        }
        applied
    }

    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.read().unwrap_or_else(|p| p.into_inner()))
    }

    fn write<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.write().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A store in memory: what a test puts there is what `load` reads.
    struct Memory(Mutex<Result<Config, RunnerError>>);

    impl ConfigStore for Memory {
        fn load(&self) -> BoxFuture<'_, Result<Config, RunnerError>> {
            let value = self.0.lock().unwrap().clone();
            Box::pin(async move { value })
        }
        fn save<'a>(&'a self, config: &'a Config) -> BoxFuture<'a, Result<(), RunnerError>> {
            *self.0.lock().unwrap() = Ok(config.clone());
            Box::pin(async { Ok(()) })
        }
    }

    fn settings() -> (Settings, Arc<Memory>) {
        let store = Arc::new(Memory(Mutex::new(Ok(Config::default()))));
        (Settings::new(Config::default(), store.clone()), store)
    }

    /// A next-call key is in force at once; a restart key is stored and pending.
    #[tokio::test]
    async fn next_call_keys_apply_and_restart_keys_wait() {
        let (settings, _) = settings();
        let (old, new, applied) = settings
            .set(&serde_json::json!({"max_stream_bytes": 100, "max_runtimes": 3}))
            .await
            .unwrap();
        assert_eq!(old, Config::default());
        assert_eq!((new.max_stream_bytes, new.max_runtimes), (100, 3));
        assert_eq!(applied.now, ["max_stream_bytes"]);
        assert_eq!(applied.pending_restart, ["max_runtimes"]);
        let in_force = settings.in_force();
        assert_eq!(
            (in_force.max_stream_bytes, in_force.max_runtimes),
            (100, 32)
        );
        // Setting the boot value back clears the pending key.
        settings.set(&serde_json::json!({})).await.unwrap();
        assert!(settings.pending_restart().is_empty());
        assert_eq!(settings.in_force(), Config::default());
    }

    /// A refused value is never saved, and the store keeps its old value.
    #[tokio::test]
    async fn a_refused_value_never_reaches_the_store() {
        let (settings, store) = settings();
        let err = settings
            .set(&serde_json::json!({"max_stream_bytes": -1}))
            .await
            .unwrap_err();
        assert!(err.message.contains("max_stream_bytes"), "{}", err.message);
        assert_eq!(store.0.lock().unwrap().clone().unwrap(), Config::default());
    }

    /// Reload reads the store; an unreadable store leaves the running value and says why.
    #[tokio::test]
    async fn reload_reads_the_store_and_keeps_running_on_a_bad_value() {
        let (settings, store) = settings();
        *store.0.lock().unwrap() = Ok(Config {
            max_result_bytes: 5,
            ..Config::default()
        });
        assert_eq!(settings.reload().await.unwrap().now, ["max_result_bytes"]);
        *store.0.lock().unwrap() = Err(RunnerError::invalid("config key heap_mb: bad"));
        assert!(settings.reload().await.is_err());
        assert_eq!(settings.in_force().max_result_bytes, 5);
        assert_eq!(
            settings.status().last_rejected.as_deref(),
            Some("config key heap_mb: bad")
        );
    }
}
