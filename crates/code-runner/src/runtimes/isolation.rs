//! `isolation: process`: the engines as proxies to confined sandbox
//! processes (`code-runner-sandbox`), and what those processes are told.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use code_runner_core::{Config, Engine, Isolation, Lang};
use code_runner_sandbox::{Init, Pool, PythonInit, SandboxEngine, SandboxOptions};

use crate::runtimes::loading::{Loaded, load_python};

/// The hidden argument that starts a sandbox process.
pub const SANDBOX_ROLE: &str = "__sandbox";

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
static OVERRIDE: OnceLock<Isolation> = OnceLock::new();

/// Sets the program sandbox processes run (default: this executable). A
/// test binary is not `code-runner`, so its tests name the real binary here.
pub fn set_sandbox_program(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// `--isolation`: wins over the configuration's `isolation` for this process.
pub fn set_isolation(isolation: Isolation) {
    let _ = OVERRIDE.set(isolation);
}

/// The isolation this process runs with.
pub fn isolation(config: &Config) -> Isolation {
    OVERRIDE.get().copied().unwrap_or(config.isolation)
}

/// The descriptor ceiling of a sandbox process: python holds up to 512
/// descriptors per runtime; a process hosts a share of `max_runtimes`.
fn max_files(config: &Config) -> u64 {
    (config.max_runtimes as u64)
        .saturating_mul(64)
        .clamp(1024, 65_536)
}

/// Starts the sandbox processes and answers an engine per language over
/// them. The python snapshot is loaded once here first (and dropped), so
/// its compiled form is in the cache before any confined process needs it
/// read-only, and so a missing snapshot is reported as in-process mode does.
pub(crate) async fn load(
    config: &Config,
    python_dir: Option<PathBuf>,
    packages: Option<code_runner_python::PythonPackages>,
    runtimes_dir: &Path,
    one_call: bool,
) -> Loaded {
    let limits = code_runner_python::EngineLimits {
        max_runtimes: 1,
        max_memory_mb: config.max_memory_mb,
    };
    // The parent resolves `auto` (and compiles the image into the cache):
    // every sandbox process then loads the same interpreter, read-only.
    let (probe_dir, choice) = (python_dir.clone(), config.python_interpreter);
    let python_ok = tokio::task::spawn_blocking(move || {
        load_python(probe_dir, choice, limits, packages.as_ref()).map(|(_, name)| name)
    })
    .await
    .map_err(|err| format!("python engine loader panicked: {err}"))
    .and_then(|loaded| loaded.map_err(|err| err.to_string()));
    let interpreter = python_ok.as_ref().ok().copied();
    let program = match PROGRAM.get() {
        Some(program) => program.clone(),
        None => match std::env::current_exe() {
            Ok(program) => program,
            Err(err) => {
                let why = format!("cannot find this executable to start sandbox processes: {err}");
                return Loaded {
                    python: Err(why.clone()),
                    python_interpreter: None,
                    node: Err(why.clone()),
                    typescript: Err(why),
                    sandbox: None,
                };
            }
        },
    };
    let cache = code_runner_python::cache_dir();
    let mut writable = vec![runtimes_dir.to_path_buf()];
    writable.extend(config.scratch_root.clone());
    let processes = match (one_call, config.sandbox_processes) {
        (true, _) => 1,
        (false, 0) => std::thread::available_parallelism().map_or(2, |n| n.get()),
        (false, n) => n,
    };
    let options = SandboxOptions {
        program,
        args: vec![SANDBOX_ROLE.to_string()],
        env: sandbox_env(&cache),
        processes,
        init: Init {
            python: PythonInit {
                dir: python_dir.clone(),
                interpreter: interpreter.unwrap_or("lean").to_string(),
                max_runtimes: config.max_runtimes,
                max_memory_mb: config.max_memory_mb,
                packages: config.python_packages.clone(),
            },
            node_packages: config.node_packages.clone(),
            npm_registry: config.npm_registry.clone(),
            writable,
            readable: python_dir
                .into_iter()
                .chain([
                    code_runner_python::default_snapshot_dir(),
                    code_runner_python::default_data_dir(),
                    cache,
                ])
                .collect(),
            data_limit_mb: None,
            max_files: max_files(config),
            probe: false,
        },
    };
    let pool = Pool::start(options).await;
    if let Some(why) = pool.failure() {
        tracing::warn!("no sandbox process started: {why}");
    }
    tracing::info!(pids = ?pool.pids(), "guest code runs in sandbox processes");
    let python = python_ok
        .map(|_| Arc::new(SandboxEngine::new(Lang::Python, pool.clone())) as Arc<dyn Engine>);
    let node = Ok(Arc::new(SandboxEngine::new(Lang::Node, pool.clone())) as Arc<dyn Engine>);
    let typescript =
        Ok(Arc::new(SandboxEngine::new(Lang::TypeScript, pool.clone())) as Arc<dyn Engine>);
    Loaded {
        python,
        python_interpreter: interpreter,
        node,
        typescript,
        sandbox: Some(pool),
    }
}

/// A sandbox process's whole environment: the cache it loads the artifacts
/// from, and `CODE_RUNNER_WRITE_TRACKING=off` when the worker was told so
/// (the process then opens no userfaultfd either).
fn sandbox_env(cache: &Path) -> Vec<(String, String)> {
    let mut env = vec![(
        "CODE_RUNNER_CACHE_DIR".to_string(),
        cache.display().to_string(),
    )];
    if std::env::var("CODE_RUNNER_WRITE_TRACKING").as_deref() == Ok("off") {
        env.push(("CODE_RUNNER_WRITE_TRACKING".to_string(), "off".to_string()));
    }
    env
}
