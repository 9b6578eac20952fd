//! The worker's engines: python (wasmtime) and node (V8), each with its warm
//! pool, and the per-runtime options the configuration gives them.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use code_runner_core::{
    Bindings, Config, DEFAULT_MEMORY_MB, Engine, Isolation, Lang, RunnerError, RuntimeOptions,
};
use serde_json::{Value, json};

use crate::ids::new_dir_name;
use crate::runtimes::loading::Loaded;
use crate::runtimes::pool::WarmPool;
use crate::runtimes::ready::{Cell, State};
use crate::runtimes::workdir::WorkDir;

mod node;
mod python;

pub(crate) use node::open_node_packages;

pub use python::Offer;
use python::PythonLoad;

/// The binding namespace the node engine attaches `iii.files` to.
pub const FILES_NAMESPACE: &str = "iii";

/// The engine of each language (or why it is unavailable, or that it is
/// still loading) and the warm pools.
///
/// The engines load in the background ([`Engines::start`]): node's in well
/// under a second, python's in as long as its image takes on a machine that
/// has not made it yet (minutes, once). The worker answers meanwhile; a run
/// waits for its own language only ([`Engines::ready`]), never for another's.
///
/// Node and typescript are one V8 engine (one startup snapshot) in two
/// modes: a runtime strips types or does not from its boot on, so each has
/// its own pool. The node pool fills once V8 is loaded; the typescript pool
/// fills after the first typescript run, so a worker that never sees
/// TypeScript never boots isolates for it.
pub struct Engines {
    python: Cell,
    /// Which interpreter the python engine runs, once loaded: `lean` or `data`.
    python_interpreter: OnceLock<&'static str>,
    /// Whether python runs the data stack, as the configuration and the
    /// installed artifacts say before it loads (tool texts are made at start).
    python_data: bool,
    node: Cell,
    typescript: Cell,
    node_pool: OnceLock<Arc<WarmPool>>,
    typescript_pool: OnceLock<Arc<WarmPool>>,
    /// With `isolation: process`, the sandbox processes behind both engines.
    sandbox: OnceLock<Arc<code_runner_sandbox::Pool>>,
    /// The operator's packages python imports from `/packages`, as
    /// `name==version`, once installed.
    python_packages: OnceLock<Vec<String>>,
    /// Modules of those the interpreter shadows, each with what an import
    /// really gives, once installed (see `code_runner_python::shadowed_packages`).
    python_shadowed: Mutex<Vec<String>>,
    /// What the list takes from the data stack instead of installing, as
    /// `name==version`, once resolved.
    python_provided: OnceLock<Vec<String>>,
    /// Python's load when it waits for a first use (a one-call process
    /// whose call is not python's makes no image).
    python_on_use: Mutex<Option<PythonLoad>>,
    /// The operator's npm packages as `name@version`, once installed.
    node_packages: OnceLock<Vec<String>>,
    /// How long a run waits for its engine while it loads: [`ENGINE_WAIT`]
    /// for a server (a client hears what is being prepared, then
    /// `capacity`); an hour for a process that makes one call (its user
    /// waits for exactly that, told what is being prepared).
    wait: Duration,
    isolation: Isolation,
    runtimes_dir: PathBuf,
    scratch_root: Option<PathBuf>,
}

/// How long a run waits for its language's engine to finish loading before
/// it is answered `capacity` (with what is being prepared, and how long so far).
pub const ENGINE_WAIT: Duration = Duration::from_secs(30);

/// How long a one-call process's run waits for its engine (the data image
/// of a cold machine takes minutes, once).
const ONE_CALL_WAIT: Duration = Duration::from_secs(3600);

impl Engines {
    /// Loads the engines off the async threads in the background and
    /// answers at once: python's after the configuration's packages are
    /// installed (pip resolves and fetches them at the first start of a
    /// list; one that cannot be installed leaves python unavailable, naming
    /// the package and why, and node serving). With
    /// `eager`, python loads at once too and the node pool fills as soon as
    /// V8 is loaded (a pooled runtime's warm-up turn gets `warm_up_bindings`,
    /// the `iii` shape of a real turn); without (a process that makes one
    /// call), python loads on its first use and no runtime is booted ahead.
    /// A missing engine is not fatal: its runs answer `code-runner::engine`.
    ///
    /// # Errors
    /// None today (a missing engine is its runs' error).
    pub async fn start<F>(
        config: &Config,
        python_dir: Option<PathBuf>,
        runtimes_dir: PathBuf,
        eager: bool,
        warm_up_bindings: F,
    ) -> Result<Arc<Engines>, RunnerError>
    where
        F: Fn(Lang) -> Bindings + Send + Sync + 'static,
    {
        // Guest writes (python's /work, iii.files) can meet the host's
        // RLIMIT_FSIZE: they fail with EFBIG rather than kill the worker.
        code_runner_sandbox::confine::ignore_file_size_signal();
        let python_data = python_dir.is_none()
            && match config.python_interpreter {
                code_runner_core::PythonInterpreter::Lean => false,
                code_runner_core::PythonInterpreter::Data => true,
                code_runner_core::PythonInterpreter::Auto => {
                    code_runner_python::Interpreter::Auto.resolved()
                        == code_runner_python::Interpreter::Data
                }
            };
        let engines = Arc::new(Engines {
            python: Cell::default(),
            python_interpreter: OnceLock::new(),
            python_data,
            node: Cell::default(),
            typescript: Cell::default(),
            node_pool: OnceLock::new(),
            typescript_pool: OnceLock::new(),
            sandbox: OnceLock::new(),
            python_packages: OnceLock::new(),
            python_shadowed: Mutex::new(Vec::new()),
            python_provided: OnceLock::new(),
            python_on_use: Mutex::new(None),
            node_packages: OnceLock::new(),
            wait: if eager { ENGINE_WAIT } else { ONE_CALL_WAIT },
            isolation: crate::runtimes::isolation::isolation(config),
            runtimes_dir,
            scratch_root: config.scratch_root.clone(),
        });
        let warm_pool = eager && config.warm_pool > 0;
        let load = PythonLoad {
            config: config.clone(),
            python_dir,
        };
        match crate::runtimes::isolation::isolation(config) {
            Isolation::Process => {
                // The sandbox processes load both engines, after the parent
                // made python's image: both are ready together.
                let started = engines.clone();
                tokio::spawn(async move {
                    let runtimes_dir = started.runtimes_dir.clone();
                    let packages = started.install(&load.config).await;
                    let node_packages = started.install_node(&load.config).await;
                    let loaded = crate::runtimes::isolation::load(
                        &load.config,
                        load.python_dir,
                        packages.clone().unwrap_or_default(),
                        &runtimes_dir,
                        !eager,
                    )
                    .await;
                    let loaded = match packages {
                        // Node serves; python says which package failed.
                        Err(why) => Loaded {
                            python: Err(why),
                            python_interpreter: None,
                            ..loaded
                        },
                        Ok(_) => loaded,
                    };
                    let loaded = match node_packages {
                        // Python serves; node says which package failed.
                        Err(why) => Loaded {
                            node: Err(why.clone()),
                            typescript: Err(why),
                            ..loaded
                        },
                        Ok(_) => loaded,
                    };
                    started.loaded(&load.config, loaded, warm_pool, &warm_up_bindings);
                });
            }
            Isolation::InProcess => {
                let started = engines.clone();
                let config = config.clone();
                tokio::spawn(async move {
                    started.load_v8(&config, warm_pool, &warm_up_bindings).await;
                });
                if eager {
                    engines.load_python(load);
                } else {
                    *engines
                        .python_on_use
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(load);
                }
            }
        }
        if eager {
            let watching = engines.clone();
            tokio::spawn(async move {
                watching.settled().await;
                tracing::info!(
                    "engines settled: node {}, python {}",
                    watching.health()["node"].as_str().unwrap_or_default(),
                    watching.health()["python"].as_str().unwrap_or_default()
                );
            });
        }
        Ok(engines)
    }

    /// Resolves once no engine is still loading (each ready or unavailable;
    /// python's, when it waits for a first use, counts as settled).
    pub async fn settled(&self) {
        for lang in [Lang::Node, Lang::TypeScript, Lang::Python] {
            if lang == Lang::Python
                && self
                    .python_on_use
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_some()
            {
                continue;
            }
            self.cell(lang).settled().await;
        }
    }

    /// How long a run waits for its engine while it loads.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Loads V8 (node and typescript) in this process, then fills the node pool.
    async fn load_v8<F: Fn(Lang) -> Bindings>(
        &self,
        config: &Config,
        warm_pool: bool,
        warm_up_bindings: &F,
    ) {
        let packages = self.install_node(config).await;
        let v8 = tokio::task::spawn_blocking(code_runner_v8::V8Engine::new)
            .await
            .map_err(|err| format!("node engine loader panicked: {err}"))
            .and_then(|loaded| loaded.map_err(|err| err.to_string()))
            .and_then(|engine| {
                let engine = engine.files_namespace(FILES_NAMESPACE);
                match packages? {
                    Some(set) => Ok(engine.packages(set)),
                    None => Ok(engine),
                }
            });
        if let Err(why) = &v8 {
            tracing::warn!("node engine unavailable: {why}");
        }
        let typescript = v8
            .clone()
            .map(|engine| Arc::new(engine.typescript()) as Arc<dyn Engine>);
        self.node
            .set(v8.map(|engine| Arc::new(engine) as Arc<dyn Engine>));
        self.typescript.set(typescript);
        if warm_pool {
            self.fill_pools(config, warm_up_bindings);
        }
    }

    /// What the sandbox processes' loader answered, put in place.
    fn loaded<F: Fn(Lang) -> Bindings>(
        &self,
        config: &Config,
        loaded: Loaded,
        warm_pool: bool,
        warm_up_bindings: &F,
    ) {
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
            let _ = self.python_interpreter.set(name);
        }
        if let Some(pool) = sandbox {
            let _ = self.sandbox.set(pool);
        }
        self.python.set(python);
        self.node.set(node);
        self.typescript.set(typescript);
        if warm_pool {
            self.fill_pools(config, warm_up_bindings);
        }
    }

    /// Makes the node engine's warm pools (the node one starts filling).
    fn fill_pools<F: Fn(Lang) -> Bindings>(&self, config: &Config, warm_up_bindings: &F) {
        // Python instantiates its snapshot per run (about a millisecond, no
        // boot to hide), so only node keeps booted runtimes ready.
        for lang in [Lang::Node, Lang::TypeScript] {
            let State::Ready(engine) = self.cell(lang).now() else {
                continue;
            };
            let template = self.runtime_options(
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
                self.dir_root(lang),
            );
            match lang {
                Lang::TypeScript => {
                    let _ = self.typescript_pool.set(pool);
                }
                _ => {
                    pool.refill();
                    let _ = self.node_pool.set(pool);
                }
            }
        }
    }

    fn cell(&self, lang: Lang) -> &Cell {
        match lang {
            Lang::Python => &self.python,
            Lang::Node => &self.node,
            Lang::TypeScript => &self.typescript,
        }
    }

    /// The engine of `lang`, waiting at most `wait` while it loads (python's
    /// is started now if it waited for a first use), `tell` hearing what is
    /// being prepared every few seconds meanwhile.
    ///
    /// # Errors
    /// `code-runner::engine` saying why it is unavailable;
    /// `code-runner::capacity` when it is still loading after `wait`.
    pub async fn ready(
        self: &Arc<Self>,
        lang: Lang,
        wait: Duration,
        tell: &mut (dyn FnMut(String) + Send),
    ) -> Result<Arc<dyn Engine>, RunnerError> {
        if lang == Lang::Python {
            let on_use = self
                .python_on_use
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(load) = on_use {
                self.load_python(load);
            }
        }
        self.cell(lang).ready(lang, wait, tell).await
    }

    /// What each loaded engine's runtimes use now, by language (engines in
    /// sandbox processes count nothing here).
    pub fn stats(&self) -> Vec<(Lang, code_runner_core::EngineStats)> {
        [Lang::Python, Lang::Node, Lang::TypeScript]
            .into_iter()
            .filter_map(|lang| match self.cell(lang).now() {
                State::Ready(engine) => engine.stats().map(|stats| (lang, stats)),
                _ => None,
            })
            .collect()
    }

    /// The warm pool of `lang`, if it has one.
    pub fn pool(&self, lang: Lang) -> Option<&Arc<WarmPool>> {
        match lang {
            Lang::Python => None,
            Lang::Node => self.node_pool.get(),
            Lang::TypeScript => self.typescript_pool.get(),
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

    /// The python interpreter this worker runs (`data`, `lean`), once settled.
    pub fn python_flavour(&self) -> Option<&'static str> {
        self.python_interpreter.get().copied()
    }

    /// Each engine's status, for `/healthz`: `ready`, `preparing: …` (what,
    /// and for how long), or `unavailable: …`.
    pub fn health(&self) -> Value {
        let status = |lang: Lang| match self.cell(lang).now() {
            State::Ready(_) => "ready".to_string(),
            State::Preparing(since) => {
                format!(
                    "preparing: {}",
                    crate::runtimes::ready::preparing(lang, since)
                )
            }
            State::Unavailable(message) => format!("unavailable: {message}"),
        };
        let isolation = match self.sandbox.get() {
            Some(pool) => pool.health(),
            None => json!({ "mode": self.isolation.as_str() }),
        };
        json!({
            "python": status(Lang::Python),
            "python_interpreter": self.python_interpreter.get(),
            "python_packages": self.python_packages.get().cloned().unwrap_or_default(),
            "python_packages_shadowed": self.shadowed_notes(),
            "python_packages_provided": self.python_provided.get().cloned().unwrap_or_default(),
            "node": status(Lang::Node),
            "node_packages": self.node_packages(),
            "isolation": isolation,
        })
    }

    /// Closes every pooled runtime.
    pub async fn drain(&self) {
        if let Some(pool) = self.node_pool.get() {
            pool.drain().await;
        }
    }
}
