//! The worker's engines: python (wasmtime) and node (V8), each with its warm
//! pool, and the per-runtime options the configuration gives them.

use std::path::PathBuf;
use std::sync::Arc;

use code_runner_core::{
    Bindings, Config, DEFAULT_MEMORY_MB, Engine, Isolation, Lang, RunnerError, RuntimeOptions,
};
use serde_json::{Value, json};

use crate::ids::new_dir_name;
use crate::runtimes::loading::{Loaded, install_packages, load_python};
use crate::runtimes::pool::WarmPool;
use crate::runtimes::workdir::WorkDir;

/// The binding namespace the node engine attaches `iii.files` to.
pub const FILES_NAMESPACE: &str = "iii";

/// Loads both engines into this process (`isolation: in-process`), and
/// names python's interpreter.
async fn load_in_process(
    config: &Config,
    python_dir: Option<PathBuf>,
    packages: Option<code_runner_python::PythonPackages>,
) -> Result<Loaded, RunnerError> {
    let limits = code_runner_python::EngineLimits {
        max_runtimes: config.max_runtimes,
        max_memory_mb: config.max_memory_mb,
    };
    let choice = config.python_interpreter;
    let python = tokio::task::spawn_blocking(move || {
        load_python(python_dir, choice, limits, packages.as_ref())
    })
    .await
    .map_err(|err| RunnerError::engine(format!("python engine loader panicked: {err}")))?;
    let interpreter = python.as_ref().ok().map(|(_, name)| *name);
    let python = python
        .map(|(engine, _)| Arc::new(engine) as Arc<dyn Engine>)
        .map_err(|err| err.to_string());
    let v8 = tokio::task::spawn_blocking(code_runner_v8::V8Engine::new)
        .await
        .map_err(|err| RunnerError::engine(format!("node engine loader panicked: {err}")))?
        .map(|engine| engine.files_namespace(FILES_NAMESPACE))
        .map_err(|err| err.to_string());
    let node = v8.clone().map(|engine| Arc::new(engine) as Arc<dyn Engine>);
    let typescript = v8.map(|engine| Arc::new(engine.typescript()) as Arc<dyn Engine>);
    Ok(Loaded {
        python,
        python_interpreter: interpreter,
        node,
        typescript,
        sandbox: None,
    })
}

/// The engine of each language (or why it is unavailable) and the warm pools.
///
/// Node and typescript are one V8 engine (one startup snapshot) in two
/// modes: a runtime strips types or does not from its boot on, so each has
/// its own pool. The node pool fills at start; the typescript pool fills
/// after the first typescript run, so a worker that never sees TypeScript
/// never boots isolates for it.
pub struct Engines {
    python: Result<Arc<dyn Engine>, String>,
    /// Which interpreter the python engine runs, once loaded: `lean` or `data`.
    python_interpreter: Option<&'static str>,
    node: Result<Arc<dyn Engine>, String>,
    typescript: Result<Arc<dyn Engine>, String>,
    node_pool: Option<Arc<WarmPool>>,
    typescript_pool: Option<Arc<WarmPool>>,
    /// With `isolation: process`, the sandbox processes behind both engines.
    sandbox: Option<Arc<code_runner_sandbox::Pool>>,
    /// The operator's packages python imports from `/packages`, as `name==version`.
    python_packages: Vec<String>,
    runtimes_dir: PathBuf,
    scratch_root: Option<PathBuf>,
}

impl Engines {
    /// Loads both engines off the async threads and starts filling their pools
    /// (a pooled runtime's warm-up turn gets `warm_up_bindings`, the `iii`
    /// shape of a real turn, from the layer that builds them).
    /// A missing engine is not fatal: its runs answer `code-runner::engine`.
    ///
    /// # Errors
    /// `code-runner::engine` when a loader task panicked.
    pub async fn load(
        config: &Config,
        python_dir: Option<PathBuf>,
        runtimes_dir: PathBuf,
        warm_pool: bool,
        warm_up_bindings: impl Fn(Lang) -> Bindings,
    ) -> Result<Engines, RunnerError> {
        // Guest writes (python's /work, iii.files) can meet the host's
        // RLIMIT_FSIZE: they fail with EFBIG rather than kill the worker.
        code_runner_sandbox::confine::ignore_file_size_signal();
        // Before any engine: a package that cannot be installed stops the start.
        let packages = install_packages(config).await?;
        let installed = packages.as_ref().map(|p| p.installed.clone());
        let loaded = match crate::runtimes::isolation::isolation(config) {
            Isolation::Process => {
                crate::runtimes::isolation::load(
                    config,
                    python_dir,
                    packages,
                    &runtimes_dir,
                    !warm_pool,
                )
                .await
            }
            Isolation::InProcess => load_in_process(config, python_dir, packages).await?,
        };
        let mut engines = Engines::with(config, loaded, runtimes_dir, warm_pool, warm_up_bindings)?;
        if engines.python.is_ok() {
            engines.python_packages = installed.unwrap_or_default();
        }
        Ok(engines)
    }

    fn with(
        config: &Config,
        loaded: Loaded,
        runtimes_dir: PathBuf,
        warm_pool: bool,
        warm_up_bindings: impl Fn(Lang) -> Bindings,
    ) -> Result<Engines, RunnerError> {
        let Loaded {
            python,
            python_interpreter,
            node,
            typescript,
            sandbox,
        } = loaded;
        for (lang, engine) in [(Lang::Python, &python), (Lang::Node, &node)] {
            if let Err(message) = engine {
                tracing::warn!("{lang} engine unavailable: {message}");
            }
        }
        if let Some(name) = python_interpreter {
            tracing::info!("python runs the {name} interpreter");
        }
        let mut engines = Engines {
            python,
            python_interpreter,
            node,
            typescript,
            sandbox,
            python_packages: Vec::new(),
            node_pool: None,
            typescript_pool: None,
            runtimes_dir,
            scratch_root: config.scratch_root.clone(),
        };
        // Python instantiates its snapshot per run (about a millisecond, no
        // boot to hide), so only node keeps booted runtimes ready.
        if warm_pool && config.warm_pool > 0 {
            for lang in [Lang::Node, Lang::TypeScript] {
                let Ok(engine) = engines.engine(lang) else {
                    continue;
                };
                let template = engines.runtime_options(
                    config,
                    lang,
                    DEFAULT_MEMORY_MB.min(config.max_memory_mb),
                    PathBuf::new(),
                );
                let pool = WarmPool::new(
                    engine,
                    template,
                    warm_up_bindings(lang),
                    config.warm_pool,
                    engines.dir_root(lang),
                );
                match lang {
                    Lang::TypeScript => engines.typescript_pool = Some(pool),
                    _ => {
                        pool.refill();
                        engines.node_pool = Some(pool);
                    }
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
            Lang::TypeScript => self.typescript.clone(),
        }
        .map_err(RunnerError::engine)
    }

    /// The warm pool of `lang`, if it has one.
    pub fn pool(&self, lang: Lang) -> Option<&Arc<WarmPool>> {
        match lang {
            Lang::Python => None,
            Lang::Node => self.node_pool.as_ref(),
            Lang::TypeScript => self.typescript_pool.as_ref(),
        }
    }

    /// Where `lang`'s runtime directories live: the node engine's (node,
    /// typescript) under `scratch_root` when it is set, everything else
    /// under `<data-dir>/runtimes`.
    fn dir_root(&self, lang: Lang) -> PathBuf {
        match &self.scratch_root {
            Some(root) if lang.on_node_engine() => root.clone(),
            _ => self.runtimes_dir.clone(),
        }
    }

    /// A fresh directory for a runtime of `lang`: created (0700) for
    /// python's `/work`; for node only named, since the engine creates its
    /// `iii.files` directory (0700) on the first write.
    ///
    /// # Errors
    /// `code-runner::engine` when the directory cannot be created.
    pub fn work_dir(&self, lang: Lang) -> Result<WorkDir, RunnerError> {
        let path = self.dir_root(lang).join(new_dir_name());
        match lang.on_node_engine() {
            false => WorkDir::create(path),
            true => Ok(WorkDir(path)),
        }
    }

    /// The per-runtime options of a new runtime: `memory_mb` for python, the
    /// configuration's heap, external and scratch limits for node, and the
    /// result ceiling the engine hands over as a value.
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
            max_result_bytes: config.output_caps().max_result_bytes,
            ..RuntimeOptions::default()
        };
        match lang.on_node_engine() {
            false => defaults,
            true => RuntimeOptions {
                heap_mb: config.heap_mb,
                external_mb: config.external_mb,
                // `scratch_mb: 0` disables iii.files (every write refused), never "no quota".
                scratch_mb: (config.scratch_mb > 0).then_some(config.scratch_mb),
                scratch_files: config.scratch_files,
                ..defaults
            },
        }
    }

    /// Whether python runs the data stack (numpy, pandas, matplotlib, …).
    pub fn python_has_data_stack(&self) -> bool {
        self.python_interpreter == Some("data")
    }

    /// Each engine's status, for `/healthz`.
    pub fn health(&self) -> Value {
        let status = |engine: &Result<Arc<dyn Engine>, String>| match engine {
            Ok(_) => "ready".to_string(),
            Err(message) => format!("unavailable: {message}"),
        };
        let isolation = match &self.sandbox {
            Some(pool) => pool.health(),
            None => json!({ "mode": "in-process" }),
        };
        json!({
            "python": status(&self.python),
            "python_interpreter": self.python_interpreter,
            "python_packages": self.python_packages,
            "node": status(&self.node),
            "isolation": isolation,
        })
    }

    /// Closes every pooled runtime.
    pub async fn drain(&self) {
        if let Some(pool) = &self.node_pool {
            pool.drain().await;
        }
    }
}
