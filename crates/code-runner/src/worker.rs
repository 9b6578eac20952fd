//! The worker: configuration, engines, the runtime registry and the bus, wired together.

use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use code_runner_core::wire::{
    FunctionsInfoRequest, FunctionsInfoResponse, RunRequest, RunResponse, TeardownRequest,
    TeardownResponse, schema_of,
};
use code_runner_core::{Config, Engine, Lang, RunnerError};
use serde_json::{Value, json};

use crate::bus::{Bus, CallError, FUNCTIONS_INFO, Handler};
use crate::engines::Engines;
use crate::functions::{self, RUN, TEARDOWN};
use crate::pool::WarmPool;
use crate::registry::Registry;

/// What a worker needs to start.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Where runtimes keep their files; locked for this process.
    pub data_dir: PathBuf,
    /// The configuration in force.
    pub config: Config,
    /// python.wasm, if not at its default location.
    pub python_wasm: Option<PathBuf>,
}

/// A running worker; cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    config: RwLock<Config>,
    pub(crate) registry: Registry,
    pub(crate) bus: Bus,
    pub(crate) engines: Engines,
    _lock: File,
}

impl Inner {
    pub(crate) fn config(&self) -> Config {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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
    /// another worker. A missing python.wasm is not fatal: python runs then
    /// answer `code-runner::engine` saying how to fetch it.
    pub async fn start(options: WorkerOptions) -> Result<Worker, RunnerError> {
        options.config.validate()?;
        let lock = lock_data_dir(&options.data_dir)?;
        let runtimes_dir = options.data_dir.join("runtimes");
        clear_dir(&runtimes_dir)?;
        let engines =
            Engines::load(&options.config, options.python_wasm.clone(), runtimes_dir).await?;
        let inner = Arc::new(Inner {
            config: RwLock::new(options.config),
            registry: Registry::default(),
            bus: Bus::default(),
            engines,
            _lock: lock,
        });
        register_functions(&inner);
        tokio::spawn(reap_idle(Arc::downgrade(&inner)));
        Ok(Worker { inner })
    }

    /// Calls a bus function by id.
    ///
    /// # Errors
    /// The function's error, or `function_not_found`.
    pub async fn call(&self, function_id: &str, payload: Value) -> Result<Value, CallError> {
        self.inner.bus.call(function_id, payload).await
    }

    /// Describes every registered function.
    pub fn functions(&self) -> FunctionsInfoResponse {
        self.inner.bus.info(&self.inner.bus.ids())
    }

    /// Liveness and load, for `/healthz`.
    pub fn health(&self) -> Value {
        let config = self.inner.config();
        json!({
            "status": "ok",
            "runtimes": { "live": self.inner.registry.used(), "kept": self.inner.registry.kept_count(), "max": config.max_runtimes },
            "engines": self.inner.engines.health(),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        self.inner.config()
    }

    /// Closes every kept runtime.
    pub async fn shutdown(&self) {
        self.inner.engines.drain().await;
        self.inner.registry.close_all().await;
    }
}

fn register_functions(inner: &Arc<Inner>) {
    inner.bus.register(
        RUN,
        "Run code in a sandbox (no network, host filesystem or packages). One-shot by default: nothing persists and no runtime_id is returned. keep: true keeps the runtime and returns its runtime_id to reuse until code-runner::teardown or the idle TTL reaps it. A failing script is a response, not an error.",
        schema_of::<RunRequest>(),
        schema_of::<RunResponse>(),
        handler(inner, functions::run),
    );
    inner.bus.register(
        TEARDOWN,
        "Destroy a runtime: unregister its bus functions, kill it and free its slot. Pass exactly one of runtime_id (from a keep: true run) or namespace (a register_function namespace, e.g. \"app\" for app::greet).",
        schema_of::<TeardownRequest>(),
        schema_of::<TeardownResponse>(),
        handler(inner, functions::teardown),
    );
    inner.bus.register(
        FUNCTIONS_INFO,
        "Describe bus functions: description, request_schema and response_schema for each id asked (an unknown id gets an entry with an error).",
        schema_of::<FunctionsInfoRequest>(),
        schema_of::<FunctionsInfoResponse>(),
        handler(inner, |inner, payload| async move {
            let request: FunctionsInfoRequest = functions::parse(payload)?;
            Ok(serde_json::to_value(inner.bus.info(&request.function_ids)).unwrap_or(Value::Null))
        }),
    );
}

/// A bus handler over the worker that holds it only weakly, so the bus
/// never keeps the worker alive.
fn handler<F, Fut>(inner: &Arc<Inner>, f: F) -> Handler
where
    F: Fn(Arc<Inner>, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, CallError>> + Send + 'static,
{
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let f = Arc::new(f);
    Arc::new(move |payload: Value| {
        let (weak, f) = (weak.clone(), f.clone());
        Box::pin(async move {
            let inner = weak.upgrade().ok_or_else(shutting_down)?;
            f(inner, payload).await
        })
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
        inner.registry.reap(ttl).await;
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
    std::fs::create_dir_all(dir)
        .map_err(|err| RunnerError::engine(format!("cannot create {}: {err}", dir.display())))
}
