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
use code_runner_core::{Config, DEFAULT_MEMORY_MB, Engine, Lang, RunnerError};
use serde_json::{Value, json};

use crate::bus::{Bus, CallError, FUNCTIONS_INFO, Function, Handler};
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
    pub(crate) runtimes_dir: PathBuf,
    python: Result<Arc<dyn Engine>, String>,
    python_pool: Option<Arc<WarmPool>>,
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
        match lang {
            Lang::Python => self.python_pool.as_ref(),
            Lang::Node => None,
        }
    }

    pub(crate) fn engine(&self, lang: Lang) -> Result<Arc<dyn Engine>, RunnerError> {
        match lang {
            Lang::Python => self.python.clone().map_err(RunnerError::engine),
            Lang::Node => Err(RunnerError::engine(
                "lang node is not available in this build yet: the V8 engine lands in a later release; use lang python",
            )),
        }
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
        let wasm = options
            .python_wasm
            .clone()
            .unwrap_or_else(code_runner_python::default_wasm_path);
        let python =
            tokio::task::spawn_blocking(move || code_runner_python::PythonEngine::load(&wasm))
                .await
                .map_err(|err| {
                    RunnerError::engine(format!("python engine loader panicked: {err}"))
                })?
                .map(|engine| Arc::new(engine) as Arc<dyn Engine>)
                .map_err(|err| err.to_string());
        if let Err(message) = &python {
            tracing::warn!("python engine unavailable: {message}");
        }
        let python_pool = python
            .as_ref()
            .ok()
            .filter(|_| options.config.warm_pool > 0)
            .map(|engine| {
                let memory_mb = DEFAULT_MEMORY_MB.min(options.config.max_memory_mb);
                WarmPool::new(
                    engine.clone(),
                    memory_mb,
                    options.config.warm_pool,
                    runtimes_dir.clone(),
                )
            });
        if let Some(pool) = &python_pool {
            pool.refill();
        }
        let inner = Arc::new(Inner {
            config: RwLock::new(options.config),
            registry: Registry::default(),
            bus: Bus::default(),
            runtimes_dir,
            python,
            python_pool,
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
            "engines": {
                "python": match &self.inner.python { Ok(_) => "ready".to_string(), Err(message) => format!("unavailable: {message}") },
                "node": "not in this build",
            },
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        self.inner.config()
    }

    /// Closes every kept runtime.
    pub async fn shutdown(&self) {
        if let Some(pool) = &self.inner.python_pool {
            pool.drain().await;
        }
        self.inner.registry.close_all().await;
    }
}

fn register_functions(inner: &Arc<Inner>) {
    inner.bus.register(
        RUN,
        Function::new(
        "Run code in a sandbox (no network, host filesystem or packages). One-shot by default: nothing persists and no runtime_id is returned. keep: true keeps the runtime and returns its runtime_id to reuse until code-runner::teardown or the idle TTL reaps it. A failing script is a response, not an error.",
        schema_of::<RunRequest>(),
        schema_of::<RunResponse>(),
        handler(inner, functions::run),
    ));
    inner.bus.register(
        TEARDOWN,
        Function::new(
        "Destroy a runtime: unregister its bus functions, kill it and free its slot. Pass exactly one of runtime_id (from a keep: true run) or namespace (a register_function namespace, e.g. \"app\" for app::greet).",
        schema_of::<TeardownRequest>(),
        schema_of::<TeardownResponse>(),
        handler(inner, functions::teardown),
    ));
    inner.bus.register(
        FUNCTIONS_INFO,
        Function::new(
        "Describe bus functions: description, request_schema and response_schema for each id asked (an unknown id gets an entry with an error).",
        schema_of::<FunctionsInfoRequest>(),
        schema_of::<FunctionsInfoResponse>(),
        handler(inner, |inner, payload| async move {
            let request: FunctionsInfoRequest = functions::parse(payload)?;
            Ok(serde_json::to_value(inner.bus.info(&request.function_ids)).unwrap_or(Value::Null))
        }),
    ));
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
        Box::pin(crate::detached::detached(async move {
            let inner = weak.upgrade().ok_or_else(shutting_down)?;
            f(inner, payload).await
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
    code_runner_core::create_private_dir(dir)
        .map_err(|err| RunnerError::engine(format!("cannot create {}: {err}", dir.display())))
}
