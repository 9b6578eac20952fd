//! code-runner's node engine: JavaScript in V8 isolates, through deno_core.
//!
//! [`V8Engine`] makes a startup snapshot once per process (the bootstrap:
//! Node-style `console`, timers, the binding machinery) and boots runtimes
//! from it. Each runtime is one isolate owned by one OS thread; the rest of
//! the program holds a [`V8Runtime`] handle (`Send + Sync`) that talks to the
//! thread by channel. The guest's code is the body of an async function:
//! `return x` is the completion, `await` works.
//!
//! The same engine runs TypeScript ([`V8Engine::typescript`]): programs and
//! handler sources have their types stripped (erased to whitespace, as Node's
//! own type stripping does, so lines and columns stay the source's) before
//! V8 compiles them; nothing is type-checked. Syntax that would need a
//! transform (enums, namespaces, parameter properties, …) is refused as a
//! `SyntaxError` naming it and its line. In either mode an `iii.files` module
//! named `*.ts` or `*.mts` is stripped when it is imported.
//!
//! Limits: a process-wide watchdog terminates JavaScript that runs past its
//! turn's deadline (idle turns are ended by their own thread); `heap_mb`
//! caps the V8 heap (a near-heap-limit callback terminates, grants room to
//! unwind, and the isolate is replaced); `external_mb` caps ArrayBuffer
//! memory (a counting allocator); `iii.files` is bounded by `scratch_mb` and
//! `scratch_files`. Nothing of V8 or deno_core crosses this crate's API.
//!
//! ```no_run
//! # async fn demo() -> Result<(), code_runner_core::RunnerError> {
//! use code_runner_core::{AbortSignal, Bindings, Completion, Engine, RuntimeOptions, Task, TurnEnding, TurnSpec};
//! use code_runner_v8::V8Engine;
//!
//! let engine = V8Engine::new()?;
//! let work = std::env::temp_dir().join("demo-node");
//! let runtime = engine.spawn(RuntimeOptions { work_dir: work, ..RuntimeOptions::default() }).await?;
//! let outcome = runtime.run(TurnSpec {
//!     task: Task::program("console.log('hi'); return 2 + 2"),
//!     timeout: std::time::Duration::from_secs(5),
//!     bindings: Bindings::none(),
//!     max_stream_bytes: Some(16_384),
//!     abort: AbortSignal::new(),
//!     live: None,
//! }).await;
//! assert_eq!(outcome.stdout.render(), "hi\n");
//! assert!(matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, completion: Completion::Value(_), .. }));
//! runtime.close().await;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod codegen;
mod convert;
mod files;
mod gauge;
mod heap;
mod imports;
mod isolate;
mod ledger;
mod loader;
mod ops;
mod overshoot;
pub mod packages;
mod reserve;
mod state;
mod strip;
mod thread;
mod turn;
mod watchdog;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_runner_core::{
    BoxFuture, Engine, ErrorCode, Fault, Lang, RunnerError, Runtime, RuntimeOptions, Task,
    TurnEnding, TurnOutcome, TurnSpec,
};
use tokio::sync::{mpsc, oneshot};

pub use files::MAX_NAME_BYTES;
pub use ops::MAX_TRANSFER_BYTES;
pub use state::MAX_CALLS_IN_FLIGHT;

use thread::{Boot, Command};
use watchdog::Watch;

/// Native stack of a runtime thread: far above V8's own stack limit (about
/// 1 MiB), so deep guest recursion is V8's `RangeError`, never a host overflow;
/// and room for the TypeScript stripper's recursion, some 9,000 levels at
/// about 3.4 KiB each, four times what [`strip::MAX_NESTING`] lets through.
/// Reserved, not committed: untouched pages cost nothing.
const THREAD_STACK_BYTES: usize = 32 << 20;
/// The threads runtimes run on, reused from one runtime to the next (an
/// isolate is made and disposed of on its thread; the thread outlives it).
/// What a thread keeps between isolates: our `codegen` limit, set again at
/// every boot, and deno_core's thread-locals, a scratch string buffer and
/// the `v8::Eternal`s of its webidl sequence converter, which would point
/// into a disposed isolate; no op of ours takes a `#[webidl]` argument.
static THREADS: code_runner_core::threads::EngineThreads =
    code_runner_core::threads::EngineThreads::new("code-runner-v8", THREAD_STACK_BYTES);
/// Turns that may wait in a runtime's channel before senders wait too.
const CHANNEL_DEPTH: usize = 64;

/// Errors of the node engine.
#[derive(Debug, thiserror::Error)]
pub enum V8Error {
    /// The startup snapshot or the watchdog could not be made.
    #[error("the V8 engine cannot start: {0}")]
    Unavailable(String),
}

impl From<V8Error> for RunnerError {
    fn from(err: V8Error) -> Self {
        RunnerError::engine(err.to_string())
    }
}

/// The node engine: one startup snapshot per process, one isolate per runtime.
#[derive(Clone)]
pub struct V8Engine {
    snapshot: &'static [u8],
    files_namespace: Option<String>,
    lang: Lang,
    packages: Option<Arc<packages::PackageSet>>,
    /// Its live runtimes and their heaps, for [`Engine::stats`].
    gauge: Arc<gauge::Gauge>,
}

impl std::fmt::Debug for V8Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("V8Engine")
            .field("snapshot_bytes", &self.snapshot.len())
            .field("files_namespace", &self.files_namespace)
            .field("lang", &self.lang)
            .finish()
    }
}

impl V8Engine {
    /// Initialises V8 (once per process) and makes the startup snapshot
    /// (once per process, tens of milliseconds; call it off async threads).
    ///
    /// # Errors
    /// [`V8Error::Unavailable`] when the bootstrap cannot be snapshotted.
    pub fn new() -> Result<V8Engine, V8Error> {
        let snapshot = isolate::snapshot().map_err(V8Error::Unavailable)?;
        Ok(V8Engine {
            snapshot,
            files_namespace: None,
            lang: Lang::Node,
            packages: None,
            gauge: Arc::default(),
        })
    }

    /// The same engine for TypeScript: its runtimes report [`Lang::TypeScript`]
    /// and strip the types of every program and handler source before V8
    /// compiles it (the snapshot is shared; a clone costs nothing).
    #[must_use]
    pub fn typescript(mut self) -> Self {
        self.lang = Lang::TypeScript;
        // Counted apart from node's.
        self.gauge = Arc::default();
        self
    }

    /// Attaches `iii.files` (the runtime's scratch directory) to the binding
    /// namespace named `global`, in every turn whose bindings include it.
    /// Without this, no namespace gets `files`; modules in the scratch
    /// directory are importable either way.
    #[must_use]
    pub fn files_namespace(mut self, global: impl Into<String>) -> Self {
        self.files_namespace = Some(global.into());
        self
    }

    /// Makes the operator's npm packages importable in every runtime.
    #[must_use]
    pub fn packages(mut self, set: Arc<packages::PackageSet>) -> Self {
        self.packages = Some(set);
        self
    }

    /// The operator's npm packages, if any.
    pub fn package_set(&self) -> Option<&Arc<packages::PackageSet>> {
        self.packages.as_ref()
    }

    /// Bytes of the startup snapshot.
    pub fn snapshot_bytes(&self) -> usize {
        self.snapshot.len()
    }

    /// Boots a bare deno_core runtime from this engine's snapshot on the
    /// calling thread and drops it: no engine thread, no limits, no scratch
    /// directory, no turn. For the benchmark, which sets its cost between
    /// deno_core's own floor and a one-shot's.
    ///
    /// # Errors
    /// [`V8Error::Unavailable`] when the snapshot cannot be booted.
    pub fn boot_snapshot_only(&self) -> Result<(), V8Error> {
        isolate::boot_bare(self.snapshot).map_err(V8Error::Unavailable)
    }

    /// The image a ledger belongs to: V8's version, the bootstrap, the
    /// language, and the operator's packages (a replay imports them).
    fn image(&self) -> String {
        let packages = self.packages.as_ref().map_or_else(
            || "none".to_string(),
            |set| set.lock_sha256.chars().take(12).collect(),
        );
        format!(
            "v8-{}/bootstrap-{}/{}/packages-{packages}",
            v8::VERSION_STRING,
            isolate::bootstrap_hash(),
            self.lang
        )
    }

    /// Boots a runtime and, when `replay` holds a ledger, replays it
    /// before the runtime is handed over.
    async fn boot_replaying(
        &self,
        options: RuntimeOptions,
        replay: ledger::Book,
    ) -> Result<Arc<dyn Runtime>, RunnerError> {
        let budget = options.ledger.map_or(DEFAULT_REPLAY_BUDGET, |o| {
            Duration::from_millis(o.max_replay_ms.saturating_mul(2)) + REPLAY_SLACK
        });
        let runtime = self.boot_with(options, Some(replay)).await?;
        let replayed = runtime
            .ask(|reply| Command::Replay(budget, reply))
            .await
            .unwrap_or_else(|| Err("the runtime ended during the replay".into()));
        match replayed {
            Ok(done) => {
                tracing::debug!(
                    turns = done.turns,
                    recorded_cpu_ms = done.recorded_cpu_ns / 1_000_000,
                    "a node ledger was replayed"
                );
                Ok(Arc::new(runtime))
            }
            Err(why) => {
                runtime.shutdown().await;
                Err(RunnerError::invalid(format!("restore_diverged: {why}")))
            }
        }
    }

    async fn boot(&self, options: RuntimeOptions) -> Result<Arc<dyn Runtime>, RunnerError> {
        Ok(Arc::new(self.boot_with(options, None).await?))
    }

    async fn boot_with(
        &self,
        options: RuntimeOptions,
        replay: Option<ledger::Book>,
    ) -> Result<V8Runtime, RunnerError> {
        let host = tokio::runtime::Handle::try_current()
            .map_err(|_| RunnerError::engine("the node engine needs a tokio runtime"))?;
        let watch = Watch::new().map_err(RunnerError::engine)?;
        let (commands, receiver) = mpsc::channel(CHANNEL_DEPTH);
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stopped_tx, stopped_rx) = oneshot::channel::<()>();
        let boot = Boot {
            snapshot: self.snapshot,
            options,
            files_namespace: self.files_namespace.clone(),
            typescript: self.lang == Lang::TypeScript,
            packages: self.packages.iter().cloned().collect(),
            host,
            watch: watch.clone(),
            replay,
        };
        THREADS
            .spawn(Box::new(move || {
                thread::thread_main(boot, receiver, ready_tx, stopped_tx);
            }))
            .map_err(|err| RunnerError::engine(format!("cannot start a runtime thread: {err}")))?;
        let runtime = V8Runtime {
            lang: self.lang,
            commands: Mutex::new(Some(commands)),
            watch,
            turn_lock: tokio::sync::Mutex::new(()),
            stopped: tokio::sync::Mutex::new(Some(stopped_rx)),
            added: Mutex::new((0, 0)),
            counted: gauge::Counted::new(&self.gauge),
        };
        match ready_rx.await {
            Ok(Ok(())) => Ok(runtime),
            Ok(Err(message)) => {
                runtime.shutdown().await;
                Err(RunnerError::engine(format!(
                    "a node runtime failed to boot: {message}"
                )))
            }
            Err(_) => Err(RunnerError::engine(
                "a node runtime's thread ended during boot",
            )),
        }
    }
}

impl Engine for V8Engine {
    fn lang(&self) -> Lang {
        self.lang
    }

    fn spawn(
        &self,
        options: RuntimeOptions,
    ) -> BoxFuture<'_, Result<Arc<dyn Runtime>, RunnerError>> {
        Box::pin(self.boot(options))
    }

    fn snapshot_image(&self) -> Option<String> {
        Some(self.image())
    }

    /// Live runtimes (pooled ones included) and the heap their last turns
    /// peaked at; the worker's `max_runtimes` bounds them, not the engine.
    fn stats(&self) -> Option<code_runner_core::EngineStats> {
        let (live, heap) = self.gauge.read();
        Some(code_runner_core::EngineStats {
            live,
            memory_bytes: heap,
            ..code_runner_core::EngineStats::default()
        })
    }

    /// Replays a ledger ([`Runtime::snapshot`] of a kept runtime) into a
    /// fresh runtime; `options.ledger` bounds the replay and says whether
    /// the runtime reseeds `Math.random` after it (a fork).
    fn restore(
        &self,
        options: RuntimeOptions,
        sections: code_runner_core::SnapshotSections,
    ) -> BoxFuture<'_, Result<Arc<dyn Runtime>, RunnerError>> {
        Box::pin(async move {
            let refused = |why: String| {
                RunnerError::invalid(format!("the snapshot cannot be restored: {why}"))
            };
            let Some((_, json)) = sections.iter().find(|(name, _)| name == ledger::SECTION) else {
                return Err(refused("it holds no ledger".into()));
            };
            let book: ledger::Book = serde_json::from_slice(json)
                .map_err(|err| refused(format!("its ledger: {err}")))?;
            if book.version != ledger::VERSION {
                return Err(refused(format!("ledger version {}", book.version)));
            }
            let options = RuntimeOptions {
                ledger: Some(options.ledger.unwrap_or(DEFAULT_LEDGER)),
                ..options
            };
            self.boot_replaying(options, book).await
        })
    }
}

/// A replay's budget when the options set none.
const DEFAULT_REPLAY_BUDGET: Duration = Duration::from_secs(20);
/// What a replay may take beyond twice `max_replay_ms` (a cold isolate).
const REPLAY_SLACK: Duration = Duration::from_secs(2);
/// A restored runtime's ledger when the options set none.
const DEFAULT_LEDGER: code_runner_core::LedgerOptions = code_runner_core::LedgerOptions {
    max_bytes: 256 << 20,
    max_replay_ms: 10_000,
    reseed: false,
};

/// A live node runtime: the `Send + Sync` handle to its thread.
///
/// [`Runtime::close`] resolves once the runtime has stopped: no guest code
/// will run again and its scratch files are deleted. The isolate's memory is
/// released by its thread right after, off the caller's path.
pub struct V8Runtime {
    lang: Lang,
    commands: Mutex<Option<mpsc::Sender<Command>>>,
    watch: Arc<Watch>,
    /// Serializes programs and definitions; invokes pass (see [`thread`]).
    turn_lock: tokio::sync::Mutex<()>,
    stopped: tokio::sync::Mutex<Option<oneshot::Receiver<()>>>,
    /// Package sets `install` added, and their bytes.
    added: Mutex<(usize, u64)>,
    /// Its part of the engine's gauge.
    counted: gauge::Counted,
}

impl V8Runtime {
    async fn turn(&self, spec: TurnSpec) -> TurnOutcome {
        let cap = spec.max_stream_bytes;
        let _serial = match spec.task {
            Task::Invoke { .. } => None,
            _ => Some(self.turn_lock.lock().await),
        };
        let sender = self
            .commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(sender) = sender else {
            return thread::outcome(cap, TurnEnding::Faulted(Fault::Aborted));
        };
        let (reply, answer) = oneshot::channel();
        if sender.send(Command::Turn(spec, reply)).await.is_err() {
            return thread::outcome(cap, TurnEnding::Faulted(Fault::Aborted));
        }
        let outcome = answer.await.unwrap_or_else(|_| {
            let fault = if self.watch.is_closing() {
                Fault::Aborted
            } else {
                Fault::Crashed("the runtime thread ended mid-turn".into())
            };
            thread::outcome(cap, TurnEnding::Faulted(fault))
        });
        self.counted.turned(outcome.usage.peak_memory_bytes);
        outcome
    }

    /// Sends the command `make` builds and awaits its answer (`None`: the runtime is closed).
    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let sender = self
            .commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        let (reply, answer) = oneshot::channel();
        sender.send(make(reply)).await.ok()?;
        answer.await.ok()
    }

    async fn shutdown(&self) {
        self.watch.close();
        self.commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(stopped) = self.stopped.lock().await.take() {
            let _ = stopped.await;
        }
    }
}

impl Runtime for V8Runtime {
    fn lang(&self) -> Lang {
        self.lang
    }

    fn run(&self, turn: TurnSpec) -> BoxFuture<'_, TurnOutcome> {
        Box::pin(self.turn(turn))
    }

    fn put_files(
        &self,
        files: Vec<code_runner_core::files::InputFile>,
    ) -> BoxFuture<'_, Result<(), RunnerError>> {
        Box::pin(async move {
            if files.is_empty() {
                return Ok(());
            }
            let _serial = self.turn_lock.lock().await;
            let sender = self
                .commands
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let closed = || RunnerError::new(ErrorCode::Expired, "the runtime was closed");
            let Some(sender) = sender else {
                return Err(closed());
            };
            let (reply, answer) = oneshot::channel();
            if sender.send(Command::PutFiles(files, reply)).await.is_err() {
                return Err(closed());
            }
            match answer.await {
                Ok(written) => written.map_err(|err| {
                    let code = ErrorCode::parse(err.code).unwrap_or(ErrorCode::Engine);
                    RunnerError::new(code, err.message)
                }),
                Err(_) => Err(closed()),
            }
        })
    }

    fn record(&self, options: code_runner_core::LedgerOptions) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _serial = self.turn_lock.lock().await;
            let _ = self.ask(|reply| Command::Record(options, reply)).await;
        })
    }

    /// The runtime's turn ledger, between turns.
    fn snapshot(&self) -> BoxFuture<'_, Result<code_runner_core::SnapshotSections, RunnerError>> {
        Box::pin(async move {
            let _serial = self.turn_lock.lock().await;
            match self.ask(Command::Ledger).await {
                Some(Ok(sections)) => Ok(sections),
                Some(Err(why)) => Err(RunnerError::invalid(format!("snapshot_unsupported: {why}"))),
                None => Err(RunnerError::new(
                    ErrorCode::Expired,
                    "the runtime was closed",
                )),
            }
        })
    }

    fn add_packages(
        &self,
        dir: std::path::PathBuf,
    ) -> BoxFuture<'_, Result<Vec<String>, RunnerError>> {
        Box::pin(async move {
            let label = format!(
                "added-{}",
                ADDED_SETS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            );
            let set = tokio::task::spawn_blocking(move || packages::PackageSet::open(&dir, &label))
                .await
                .map_err(|err| {
                    RunnerError::engine(format!("reading the packages panicked: {err}"))
                })?
                .map_err(RunnerError::engine)?;
            let set = Arc::new(set);
            let names = set.listed.iter().map(ToString::to_string).collect();
            let _serial = self.turn_lock.lock().await;
            {
                let mut added = self.added.lock().unwrap_or_else(|p| p.into_inner());
                if added.0 >= packages::MAX_ADDED
                    || added.1 + set.bytes() > packages::MAX_ADDED_BYTES
                {
                    return Err(RunnerError::new(
                        ErrorCode::ResourceExhausted,
                        format!(
                            "a runtime takes at most {} installs and {} MiB of bundled packages; this one has {} ({} MiB) and this install is {} MiB",
                            packages::MAX_ADDED,
                            packages::MAX_ADDED_BYTES >> 20,
                            added.0,
                            added.1 >> 20,
                            set.bytes() >> 20
                        ),
                    ));
                }
                added.0 += 1;
                added.1 += set.bytes();
            }
            let sender = self
                .commands
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let closed = || RunnerError::new(ErrorCode::Expired, "the runtime was closed");
            let sender = sender.ok_or_else(closed)?;
            let (reply, answer) = oneshot::channel();
            sender
                .send(Command::AddPackages(set, reply))
                .await
                .map_err(|_| closed())?;
            answer.await.map_err(|_| closed())?;
            Ok(names)
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shutdown())
    }
}

/// Numbers the package sets `install` adds, for their module URLs.
static ADDED_SETS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Drop for V8Runtime {
    fn drop(&mut self) {
        self.watch.close();
    }
}
