//! The worker's engines: python (wasmtime) and node (V8), each with its warm
//! pool, and the per-runtime options the configuration gives them.

use std::path::PathBuf;
use std::sync::Arc;

use code_runner_core::{Config, DEFAULT_MEMORY_MB, Engine, Lang, RunnerError, RuntimeOptions};
use serde_json::{Value, json};

use crate::ids::new_dir_name;
use crate::pool::WarmPool;
use crate::registry::WorkDir;

/// The binding namespace the node engine attaches `iii.files` to.
pub const FILES_NAMESPACE: &str = "iii";

/// Both engines (or why one is unavailable) and their warm pools.
pub struct Engines {
    python: Result<Arc<dyn Engine>, String>,
    node: Result<Arc<dyn Engine>, String>,
    python_pool: Option<Arc<WarmPool>>,
    node_pool: Option<Arc<WarmPool>>,
    runtimes_dir: PathBuf,
    scratch_root: Option<PathBuf>,
}

impl Engines {
    /// Loads both engines off the async threads and starts filling their pools.
    /// A missing engine is not fatal: its runs answer `code-runner::engine`.
    ///
    /// # Errors
    /// `code-runner::engine` when a loader task panicked.
    pub async fn load(
        config: &Config,
        python_wasm: Option<PathBuf>,
        runtimes_dir: PathBuf,
    ) -> Result<Engines, RunnerError> {
        let wasm = python_wasm.unwrap_or_else(code_runner_python::default_wasm_path);
        let python =
            tokio::task::spawn_blocking(move || code_runner_python::PythonEngine::load(&wasm))
                .await
                .map_err(|err| {
                    RunnerError::engine(format!("python engine loader panicked: {err}"))
                })?
                .map(|engine| Arc::new(engine) as Arc<dyn Engine>)
                .map_err(|err| err.to_string());
        let node = tokio::task::spawn_blocking(code_runner_v8::V8Engine::new)
            .await
            .map_err(|err| RunnerError::engine(format!("node engine loader panicked: {err}")))?
            .map(|engine| Arc::new(engine.files_namespace(FILES_NAMESPACE)) as Arc<dyn Engine>)
            .map_err(|err| err.to_string());
        for (lang, engine) in [(Lang::Python, &python), (Lang::Node, &node)] {
            if let Err(message) = engine {
                tracing::warn!("{lang} engine unavailable: {message}");
            }
        }
        let mut engines = Engines {
            python,
            node,
            python_pool: None,
            node_pool: None,
            runtimes_dir,
            scratch_root: config.scratch_root.clone(),
        };
        if config.warm_pool > 0 {
            for lang in [Lang::Python, Lang::Node] {
                let Ok(engine) = engines.engine(lang) else {
                    continue;
                };
                let template = engines.runtime_options(
                    config,
                    lang,
                    DEFAULT_MEMORY_MB.min(config.max_memory_mb),
                    PathBuf::new(),
                );
                // The warm-up turn brings the bindings runs bring (its program
                // is empty, so the dangling worker handle is never used).
                let warm_bindings = crate::functions::iii_bindings(std::sync::Weak::new());
                let pool = WarmPool::new(
                    engine,
                    template,
                    warm_bindings,
                    config.warm_pool,
                    engines.dir_root(lang),
                );
                pool.refill();
                match lang {
                    Lang::Python => engines.python_pool = Some(pool),
                    Lang::Node => engines.node_pool = Some(pool),
                }
            }
        }
        Ok(engines)
    }

    /// The engine of `lang`.
    ///
    /// # Errors
    /// `code-runner::engine` saying why it is unavailable.
    pub fn engine(&self, lang: Lang) -> Result<Arc<dyn Engine>, RunnerError> {
        match lang {
            Lang::Python => self.python.clone(),
            Lang::Node => self.node.clone(),
        }
        .map_err(RunnerError::engine)
    }

    /// The warm pool of `lang`, if it has one.
    pub fn pool(&self, lang: Lang) -> Option<&Arc<WarmPool>> {
        match lang {
            Lang::Python => self.python_pool.as_ref(),
            Lang::Node => self.node_pool.as_ref(),
        }
    }

    /// Where `lang`'s runtime directories live: node's under `scratch_root`
    /// when it is set, everything else under `<data-dir>/runtimes`.
    fn dir_root(&self, lang: Lang) -> PathBuf {
        match (lang, &self.scratch_root) {
            (Lang::Node, Some(root)) => root.clone(),
            _ => self.runtimes_dir.clone(),
        }
    }

    /// A fresh directory (not yet created) for a runtime of `lang`.
    pub fn work_dir(&self, lang: Lang) -> WorkDir {
        WorkDir(self.dir_root(lang).join(new_dir_name()))
    }

    /// The per-runtime options of a new runtime: `memory_mb` for python, the
    /// configuration's heap, external and scratch limits for node.
    pub fn runtime_options(
        &self,
        config: &Config,
        lang: Lang,
        memory_mb: u64,
        work_dir: PathBuf,
    ) -> RuntimeOptions {
        let defaults = RuntimeOptions {
            memory_mb,
            work_dir,
            ..RuntimeOptions::default()
        };
        match lang {
            Lang::Python => defaults,
            Lang::Node => RuntimeOptions {
                heap_mb: config.heap_mb,
                external_mb: config.external_mb,
                // `scratch_mb: 0` disables iii.files (every write refused), never "no quota".
                scratch_mb: (config.scratch_mb > 0).then_some(config.scratch_mb),
                scratch_files: config.scratch_files,
                ..defaults
            },
        }
    }

    /// Each engine's status, for `/healthz`.
    pub fn health(&self) -> Value {
        let status = |engine: &Result<Arc<dyn Engine>, String>| match engine {
            Ok(_) => "ready".to_string(),
            Err(message) => format!("unavailable: {message}"),
        };
        json!({ "python": status(&self.python), "node": status(&self.node) })
    }

    /// Closes every pooled runtime.
    pub async fn drain(&self) {
        for pool in [&self.python_pool, &self.node_pool].into_iter().flatten() {
            pool.drain().await;
        }
    }
}
