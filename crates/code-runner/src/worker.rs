//! The worker: configuration, engines, the runtime registry and the bus, wired together.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use code_runner_core::wire::FunctionsInfoResponse;
use code_runner_core::{Config, RunnerError};
use serde_json::{Value, json};

use crate::bus::CallError;
use crate::bus::outbound::Outbound;
use crate::edge::iii::{IiiLink, IiiOptions};
use crate::edge::ui;
use crate::ops::Ops;
use crate::runtimes::engines::Engines;
use crate::settings::{ConfigFile, ConfigWatch, Settings};

/// What a worker needs to start.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Where runtimes keep their files; locked for this process.
    pub data_dir: PathBuf,
    /// The initial configuration: persisted to
    /// `<data-dir>/configuration/code-runner.yaml` on the first boot. A data
    /// directory that already holds one keeps it: that file is the
    /// configuration, changed live with `configuration::set` or by hand.
    pub config: Config,
    /// The python snapshot's directory (built by `scripts/fetch-python-wasm`),
    /// if not at its default location.
    pub python_wasm: Option<PathBuf>,
}

/// A running worker; cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Parts>,
}

/// What the root owns: the operations (and through them everything they
/// share), the iii link once joined, the configuration file's watch and the
/// data directory's lock.
struct Parts {
    ops: Arc<Ops>,
    link: OnceLock<Arc<IiiLink>>,
    _watch: Option<ConfigWatch>,
    _lock: File,
}

impl Worker {
    /// Locks the data directory, clears runtime directories a previous process
    /// left behind, loads the engines and registers the functions.
    ///
    /// # Errors
    /// `code-runner::engine` when the data directory is unusable or locked by
    /// another worker. A missing python snapshot is not fatal: python runs
    /// then answer `code-runner::engine` saying how to build it.
    pub async fn start(options: WorkerOptions) -> Result<Worker, RunnerError> {
        Worker::start_with(options, true).await
    }

    /// [`Worker::start`] for a process that makes one call: no interpreters
    /// are booted ahead of time, whatever `warm_pool` says.
    ///
    /// # Errors
    /// As [`Worker::start`].
    pub async fn start_for_one_call(options: WorkerOptions) -> Result<Worker, RunnerError> {
        Worker::start_with(options, false).await
    }

    async fn start_with(options: WorkerOptions, warm_pool: bool) -> Result<Worker, RunnerError> {
        options.config.validate()?;
        let lock = lock_data_dir(&options.data_dir)?;
        let file = ConfigFile::in_data_dir(&options.data_dir);
        let config = file.load_or_seed(&options.config)?;
        let runtimes_dir = options.data_dir.join("runtimes");
        clear_dir(&runtimes_dir)?;
        let engines = Engines::start(
            &config,
            options.python_wasm.clone(),
            runtimes_dir.clone(),
            warm_pool,
            crate::ops::guest::warm_up_bindings,
        )
        .await?;
        let watched = file.path().to_path_buf();
        let settings = Arc::new(Settings::new(config, Arc::new(file)));
        let ops = Arc::new(Ops::new(settings.clone(), engines, runtimes_dir));
        let sinks = crate::telemetry::Sinks {
            otlp: settings.in_force().otlp_endpoint,
            engine: None,
        };
        ops.bus
            .traces()
            .export(sinks, &service_instance())
            .map_err(RunnerError::invalid)?;
        for (id, function) in crate::ops::functions(&ops)
            .into_iter()
            .chain([ui::function()])
        {
            ops.bus.register(id, function);
        }
        tokio::spawn(reap_idle(Arc::downgrade(&ops)));
        tokio::spawn(crate::ops::registrations::publish_kept(Arc::downgrade(
            &ops,
        )));
        let inner = Arc::new(Parts {
            ops,
            link: OnceLock::new(),
            _watch: ConfigWatch::start(&watched, Arc::downgrade(&settings)),
            _lock: lock,
        });
        Ok(Worker { inner })
    }

    /// Joins the iii engine at `options.url`: every bus function becomes an
    /// engine function and guest `iii.trigger` calls go through the engine.
    /// Returns at once; the connection is made (and remade) in the background.
    ///
    /// # Errors
    /// `code-runner::invalid_request` when this worker is already connected.
    pub fn join_iii(&self, options: &IiiOptions) -> Result<Arc<IiiLink>, RunnerError> {
        if self.inner.link.get().is_some() {
            return Err(RunnerError::invalid(
                "this worker is already connected to an engine",
            ));
        }
        // Spans go to the engine's trace pipeline too, beside its own.
        let sinks = crate::telemetry::Sinks {
            otlp: None,
            engine: Some(options.url.clone()),
        };
        if let Err(err) = self
            .inner
            .ops
            .bus
            .traces()
            .export(sinks, &service_instance())
        {
            tracing::warn!("spans will not reach the engine: {err}");
        }
        let link = IiiLink::connect(&self.inner.ops, options);
        self.inner
            .link
            .set(link.clone())
            .map_err(|_| RunnerError::invalid("this worker is already connected to an engine"))?;
        let outbound: Arc<dyn Outbound> = link.clone();
        let _ = self.inner.ops.outbound.set(outbound);
        Ok(link)
    }

    /// Resolves once every engine the worker loads at start is ready or
    /// unavailable (the worker answers before: a run waits for its own
    /// language only).
    pub async fn ready(&self) {
        self.inner.ops.engines.settled().await;
    }

    /// The iii link, once joined.
    pub fn iii_link(&self) -> Option<&Arc<IiiLink>> {
        self.inner.link.get()
    }

    /// Calls a bus function by id.
    ///
    /// # Errors
    /// The function's error, or `function_not_found`.
    pub async fn call(&self, function_id: &str, payload: Value) -> Result<Value, CallError> {
        self.inner.ops.bus.call(function_id, payload).await
    }

    /// Describes every registered function, built on a blocking thread (the
    /// listing is bounded: at most 256 KiB of descriptions and formats per
    /// runtime, beside the worker's own).
    ///
    /// # Errors
    /// `code-runner::engine` when the blocking thread failed.
    pub async fn functions(&self) -> Result<FunctionsInfoResponse, CallError> {
        let ops = self.inner.ops.clone();
        tokio::task::spawn_blocking(move || ops.bus.info(&ops.bus.ids()))
            .await
            .map_err(|err| RunnerError::engine(format!("listing functions failed: {err}")).into())
    }

    /// The worker's metrics in the Prometheus text format (what `GET /metrics` serves).
    pub fn metrics(&self) -> String {
        let followers = crate::edge::mcp::followers() as u64;
        self.inner.ops.metrics_text(followers)
    }

    /// Liveness and load, for `/healthz`.
    pub fn health(&self) -> Value {
        let config = self.inner.ops.config();
        json!({
            "status": "ok",
            "runtimes": { "live": self.inner.ops.registry.used(), "kept": self.inner.ops.registry.kept_count(), "max": config.max_runtimes },
            "engines": self.inner.ops.engines.health(),
            "iii": self.inner.link.get().map(|link| json!({"state": link.state(), "worker_name": link.worker_name()})),
            "configuration": self.inner.ops.settings.status(),
            "mcp": { "followers": crate::edge::mcp::followers() },
            "linked_files": {
                "bytes": self.inner.ops.links.held().0,
                "sets": self.inner.ops.links.held().1,
                "max_bytes": crate::runtimes::links::STORE_BYTES,
            },
        })
    }

    /// The configuration in force: the stored one, except restart-tier keys
    /// changed since start, which keep their boot value until a restart.
    pub fn config(&self) -> Config {
        self.inner.ops.config()
    }

    #[cfg(test)]
    pub(crate) fn ops(&self) -> &Arc<Ops> {
        &self.inner.ops
    }

    /// Refuses new runs, lets running ones finish and hibernates the kept
    /// runtimes that can sleep (a restarted worker, or another sharing the
    /// store, wakes them by id); then leaves the iii engine and closes every
    /// kept and namespace runtime.
    pub async fn shutdown(&self) {
        crate::ops::sessions::hibernate::drain(&self.inner.ops).await;
        if let Some(link) = self.inner.link.get() {
            link.shutdown().await;
        }
        self.inner.ops.engines.drain().await;
        crate::ops::retire::shutdown(&self.inner.ops).await;
        // The last spans, sent before the process ends.
        let ops = self.inner.ops.clone();
        let _ = tokio::task::spawn_blocking(move || ops.bus.traces().flush()).await;
    }
}

/// This process, as its spans name it (`service.instance.id`).
fn service_instance() -> String {
    format!("code-runner-{}", std::process::id())
}

/// Hibernates and reaps idle kept runtimes until the worker is dropped.
async fn reap_idle(ops: Weak<Ops>) {
    loop {
        let (ttl, soonest) = match ops.upgrade() {
            Some(ops) => {
                let config = ops.config();
                let ttl = Duration::from_secs(config.idle_ttl_secs);
                let after = Duration::from_secs(config.hibernate_after_secs);
                (ttl, if after.is_zero() { ttl } else { ttl.min(after) })
            }
            None => return,
        };
        tokio::time::sleep(
            (soonest / 4).clamp(Duration::from_millis(100), Duration::from_secs(30)),
        )
        .await;
        let Some(ops) = ops.upgrade() else { return };
        crate::ops::sessions::hibernate::sweep(&ops).await;
        crate::ops::retire::reap(&ops, ttl).await;
    }
}

fn lock_data_dir(data_dir: &Path) -> Result<File, RunnerError> {
    std::fs::create_dir_all(data_dir).map_err(|err| {
        RunnerError::engine(format!(
            "cannot create data dir {}: {err}",
            data_dir.display()
        ))
    })?;
    let path = data_dir.join(".lock");
    let file = File::create(&path)
        .map_err(|err| RunnerError::engine(format!("cannot open {}: {err}", path.display())))?;
    file.try_lock().map_err(|_| {
        RunnerError::engine(format!(
            "data dir {} is in use by another code-runner process",
            data_dir.display()
        ))
    })?;
    Ok(file)
}

/// Removes what a previous process left in `dir` (it held the lock, so nothing else uses it).
fn clear_dir(dir: &Path) -> Result<(), RunnerError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|err| {
            RunnerError::engine(format!(
                "cannot clear stale runtimes in {}: {err}",
                dir.display()
            ))
        })?;
    }
    code_runner_core::create_private_dir(dir)
        .map_err(|err| RunnerError::engine(format!("cannot create {}: {err}", dir.display())))
}

impl crate::edge::api::Api for Worker {
    fn call(
        &self,
        function_id: &str,
        payload: Value,
    ) -> impl std::future::Future<Output = Result<Value, CallError>> + Send {
        Worker::call(self, function_id, payload)
    }

    fn call_as(
        &self,
        function_id: &str,
        payload: Value,
        caller: crate::bus::Caller,
    ) -> impl std::future::Future<Output = Result<Value, CallError>> + Send {
        let ops = self.inner.ops.clone();
        let id = function_id.to_string();
        async move { ops.bus.call_as(&id, payload, caller).await }
    }

    fn functions(
        &self,
    ) -> impl std::future::Future<Output = Result<FunctionsInfoResponse, CallError>> + Send {
        Worker::functions(self)
    }

    fn listing(
        &self,
    ) -> impl std::future::Future<Output = Result<Arc<crate::bus::Listing>, CallError>> + Send {
        let ops = self.inner.ops.clone();
        async move {
            if let Some(listing) = ops.bus.cached_listing() {
                return Ok(listing);
            }
            tokio::task::spawn_blocking(move || ops.bus.listing())
                .await
                .map_err(|err| {
                    RunnerError::engine(format!("listing functions failed: {err}")).into()
                })
        }
    }

    fn runtime_root(&self, runtime_id: &str) -> Option<crate::ids::RuntimeKey> {
        let ops = &self.inner.ops;
        let key = ops.registry.get(runtime_id).ok()?.key;
        Some(ops.lineage.root(key).unwrap_or(key))
    }

    fn health(&self) -> Value {
        Worker::health(self)
    }

    fn metrics(&self) -> String {
        Worker::metrics(self)
    }

    fn answered_http(&self, status: u16) {
        self.inner.ops.metrics.http(status);
    }

    fn config(&self) -> Config {
        Worker::config(self)
    }

    fn offer(&self) -> crate::runtimes::engines::Offer {
        self.inner.ops.engines.offer()
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.ops.bus.subscribe()
    }
}
