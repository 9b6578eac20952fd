//! The worker: configuration, engines, the runtime registry and the bus, wired together.

use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use code_runner_core::wire::{
    FunctionsInfoRequest, FunctionsInfoResponse, RegisterRequest, RegisterResponse, RunRequest,
    RunResponse, TeardownRequest, TeardownResponse, schema_of,
};
use code_runner_core::{Config, Engine, Lang, RunnerError};
use serde_json::{Value, json};

use crate::bus::catalog::Published;
use crate::bus::names::FUNCTIONS_INFO;
use crate::bus::names::REGISTER_FUNCTION;
use crate::bus::names::{RUN, TEARDOWN};
use crate::bus::{Bus, CallError, Caller, Function, Handler};
use crate::edge::iii::{EngineLink, EngineOptions};
use crate::ops::functions;
use crate::ops::namespaces::NamespaceRuntimes;
use crate::ops::register;
use crate::runtimes::engines::Engines;
use crate::runtimes::lineage::Lineage;
use crate::runtimes::pool::WarmPool;
use crate::runtimes::registry::Registry;
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
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) settings: Settings,
    _watch: Option<ConfigWatch>,
    pub(crate) registry: Registry,
    pub(crate) bus: Bus,
    pub(crate) lineage: Lineage,
    pub(crate) published: Published,
    /// Trigger bindings guest code registered, by lineage.
    pub(crate) guest_triggers: crate::bus::bridge::GuestTriggers,
    pub(crate) namespaces: NamespaceRuntimes,
    pub(crate) runtimes_dir: PathBuf,
    pub(crate) engines: Engines,
    /// The iii engine this worker serves, once connected.
    pub(crate) engine_link: OnceLock<Arc<EngineLink>>,
    _lock: File,
}

impl Inner {
    /// The configuration calls use now.
    pub(crate) fn config(&self) -> Config {
        self.settings.in_force()
    }

    /// The data directory (runtimes and the configuration live under it).
    pub(crate) fn data_dir(&self) -> &std::path::Path {
        self.runtimes_dir
            .parent()
            .unwrap_or(std::path::Path::new("."))
    }

    /// Where a guest's call of `id` goes: the iii engine for a function this
    /// worker does not hold (so any worker's function is reachable), else
    /// this worker's own bus. Our own functions stay local even on an engine:
    /// the call keeps its guest [`Caller`] (what it starts is charged to the
    /// calling runtime, and a call back into the same runtime is refused),
    /// which a hop through the engine would lose.
    pub(crate) fn engine_for(&self, id: &str) -> Option<&Arc<EngineLink>> {
        self.engine_link.get().filter(|_| !self.bus.contains(id))
    }

    /// The warm pool of `lang`, if it has one.
    pub(crate) fn pool(&self, lang: Lang) -> Option<&Arc<WarmPool>> {
        self.engines.pool(lang)
    }

    pub(crate) fn engine(&self, lang: Lang) -> Result<Arc<dyn Engine>, RunnerError> {
        self.engines.engine(lang)
    }
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
        let engines = Engines::load(
            &config,
            options.python_wasm.clone(),
            runtimes_dir.clone(),
            warm_pool,
        )
        .await?;
        let watched = file.path().to_path_buf();
        let inner = Arc::new_cyclic(|weak| Inner {
            settings: Settings::new(config, Arc::new(file)),
            _watch: ConfigWatch::start(&watched, weak.clone()),
            registry: Registry::default(),
            bus: Bus::default(),
            lineage: Lineage::default(),
            published: Published::default(),
            guest_triggers: Default::default(),
            namespaces: NamespaceRuntimes::default(),
            runtimes_dir,
            engines,
            engine_link: OnceLock::new(),
            _lock: lock,
        });
        register_functions(&inner);
        tokio::spawn(reap_idle(Arc::downgrade(&inner)));
        Ok(Worker { inner })
    }

    /// Joins the iii engine at `options.url`: every bus function becomes an
    /// engine function and guest `iii.trigger` calls go through the engine.
    /// Returns at once; the connection is made (and remade) in the background.
    ///
    /// # Errors
    /// `code-runner::invalid_request` when this worker is already connected.
    pub fn connect_engine(&self, options: &EngineOptions) -> Result<Arc<EngineLink>, RunnerError> {
        if self.inner.engine_link.get().is_some() {
            return Err(RunnerError::invalid(
                "this worker is already connected to an engine",
            ));
        }
        let link = EngineLink::connect(&self.inner, options);
        self.inner
            .engine_link
            .set(link.clone())
            .map_err(|_| RunnerError::invalid("this worker is already connected to an engine"))?;
        Ok(link)
    }

    /// The engine link, when connected.
    pub fn engine(&self) -> Option<&Arc<EngineLink>> {
        self.inner.engine_link.get()
    }

    /// Calls a bus function by id.
    ///
    /// # Errors
    /// The function's error, or `function_not_found`.
    pub async fn call(&self, function_id: &str, payload: Value) -> Result<Value, CallError> {
        self.inner.bus.call(function_id, payload).await
    }

    /// Describes every registered function, built on a blocking thread (the
    /// listing is bounded: at most 256 KiB of descriptions and formats per
    /// runtime, beside the worker's own).
    ///
    /// # Errors
    /// `code-runner::engine` when the blocking thread failed.
    pub async fn functions(&self) -> Result<FunctionsInfoResponse, CallError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.bus.info(&inner.bus.ids()))
            .await
            .map_err(|err| RunnerError::engine(format!("listing functions failed: {err}")).into())
    }

    /// Liveness and load, for `/healthz`.
    pub fn health(&self) -> Value {
        let config = self.inner.config();
        json!({
            "status": "ok",
            "runtimes": { "live": self.inner.registry.used(), "kept": self.inner.registry.kept_count(), "max": config.max_runtimes },
            "engines": self.inner.engines.health(),
            "iii": self.inner.engine_link.get().map(|link| json!({"state": link.state(), "worker_name": link.worker_name()})),
            "configuration": self.inner.settings.status(),
        })
    }

    /// The configuration in force: the stored one, except restart-tier keys
    /// changed since start, which keep their boot value until a restart.
    pub fn config(&self) -> Config {
        self.inner.config()
    }

    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Leaves the engine and closes every kept and namespace runtime.
    pub async fn shutdown(&self) {
        if let Some(link) = self.inner.engine_link.get() {
            link.shutdown().await;
        }
        self.inner.engines.drain().await;
        crate::ops::retire::shutdown(&self.inner).await;
    }
}

fn register_functions(inner: &Arc<Inner>) {
    inner.bus.register(
        RUN,
        Function::new(
        "Run code in a sandbox (no network, host filesystem or packages). One-shot by default: nothing persists and no runtime_id is returned. keep: true keeps the runtime and returns its runtime_id to reuse until code-runner::teardown or the idle TTL reaps it. A failing script is a response, not an error.",
        schema_of::<RunRequest>(),
        schema_of::<RunResponse>(),
        handler_as(inner, functions::run),
    ));
    inner.bus.register(
        TEARDOWN,
        Function::new(
        "Destroy a runtime: unregister its bus functions, kill it and free its slot. Pass exactly one of runtime_id (from a keep: true run) or namespace (a register_function namespace, e.g. \"app\" for app::greet).",
        schema_of::<TeardownRequest>(),
        schema_of::<TeardownResponse>(),
        handler_as(inner, functions::teardown),
    ));
    inner.bus.register(
        FUNCTIONS_INFO,
        Function::new(
        "Describe bus functions: description, request_schema and response_schema for each id asked (an unknown id gets an entry with an error).",
        schema_of::<FunctionsInfoRequest>(),
        schema_of::<FunctionsInfoResponse>(),
        handler(inner, functions::info),
    ));
    inner.bus.register(
        REGISTER_FUNCTION,
        Function::new(
        "Publish a bus function whose handler runs in a sandbox; no runtime_id needed. source must define handler(payload) in lang; each call runs it and returns its JSON result. The namespace (function_id before `::`) shares one runtime per lang; its functions stop resolving once torn down or idle-reaped.",
        schema_of::<RegisterRequest>(),
        schema_of::<RegisterResponse>(),
        handler_as(inner, register::register_function),
    ));
    crate::edge::ui::register(&inner.bus);
    crate::ops::configuration::register(inner);
    crate::ops::guidance::register(inner);
}

/// A bus handler over the worker that holds it only weakly, so the bus
/// never keeps the worker alive.
pub(crate) fn handler<F, Fut>(inner: &Arc<Inner>, f: F) -> Handler
where
    F: Fn(Arc<Inner>, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, CallError>> + Send + 'static,
{
    handler_as(inner, move |inner, payload, _caller| f(inner, payload))
}

/// Like [`handler`], for a function that needs to know its [`Caller`].
fn handler_as<F, Fut>(inner: &Arc<Inner>, f: F) -> Handler
where
    F: Fn(Arc<Inner>, Value, Caller) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, CallError>> + Send + 'static,
{
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let f = Arc::new(f);
    Arc::new(move |payload: Value, caller: Caller| {
        let (weak, f) = (weak.clone(), f.clone());
        Box::pin(crate::bus::detached::detached(async move {
            let inner = weak.upgrade().ok_or_else(shutting_down)?;
            f(inner, payload, caller).await
        }))
    })
}

fn shutting_down() -> CallError {
    RunnerError::engine("the worker is shutting down").into()
}

/// Reaps idle kept runtimes until the worker is dropped.
async fn reap_idle(inner: Weak<Inner>) {
    loop {
        let ttl = match inner.upgrade() {
            Some(inner) => Duration::from_secs(inner.config().idle_ttl_secs),
            None => return,
        };
        tokio::time::sleep((ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(30)))
            .await;
        let Some(inner) = inner.upgrade() else { return };
        crate::ops::retire::reap(&inner, ttl).await;
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
