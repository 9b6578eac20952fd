//! The engine seam: what every engine implements and what it reports.
//!
//! An [`Engine`] boots [`Runtime`]s; a runtime runs one [`TurnSpec`] at a time
//! and answers a [`TurnOutcome`]. Engines never see the bus, HTTP or the
//! output-cap policy: they report raw facts (bounded streams, the completion,
//! a [`Fault`]) and the caller settles them ([`crate::settle`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::bindings::{Bindings, BoxFuture};
use crate::caps::{ResultShape, StreamBuffer};
use crate::error::{ErrorCode, RunnerError};
use crate::wire::Lang;

/// A runtime's state as a snapshot's named sections, in its engine's
/// format ([`Runtime::snapshot`], [`Engine::restore`]).
pub type SnapshotSections = Vec<(String, Vec<u8>)>;

/// What a runtime that is snapshotted by replay (node's turn ledger) may
/// keep, and how a restored one goes on ([`Runtime::record`],
/// [`RuntimeOptions::ledger`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LedgerOptions {
    /// The most bytes the ledger may hold (`max_snapshot_mb`): past them it
    /// is dropped and the runtime says it cannot be snapshotted.
    pub max_bytes: u64,
    /// The most CPU its turns may add up to (`max_replay_ms`): past it,
    /// likewise, since a restore would replay them all.
    pub max_replay_ms: u64,
    /// For a restore: after the replay, draw a fresh seed for the
    /// runtime's random numbers (a fork), instead of going on with the
    /// stream it had (the same session, moved).
    pub reseed: bool,
}

/// Options fixed when a runtime is created (the per-runtime tier of limits).
///
/// Engines add their own keys here with a default, so that callers build it
/// as `RuntimeOptions { work_dir, ..RuntimeOptions::default() }`. Each engine
/// reads the keys of its language and ignores the others. Serializable, so
/// that a sandbox process gets them whole.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RuntimeOptions {
    /// Python: the linear-memory ceiling in MiB (default [`crate::DEFAULT_MEMORY_MB`]).
    pub memory_mb: u64,
    /// The runtime's host directory: python's `/work`, node's `iii.files`
    /// scratch directory. Removed by its owner when the runtime goes.
    pub work_dir: PathBuf,
    /// Python: mount `/work` read-only. Node: `iii.files` refuses writes and removals.
    pub read_only: bool,
    /// Python (the data interpreter): before each turn the runtime keeps its
    /// state (memory and `/work`) aside, and a turn that loses the
    /// interpreter (a timeout, a memory cap, an exit) puts it back instead
    /// of starting a fresh interpreter ([`TurnOutcome::went_back`]).
    #[serde(default)]
    pub checkpoint: bool,
    /// Node: keep a turn ledger from boot on ([`Runtime::record`]); for
    /// [`Engine::restore`], how the replayed runtime goes on.
    #[serde(default)]
    pub ledger: Option<LedgerOptions>,
    /// The largest completion value the engine hands over as a value: past
    /// it the engine reports only its size and shape
    /// ([`Completion::Oversize`]), without ever parsing it on the host.
    /// `None`: the engine's own ceiling.
    pub max_result_bytes: Option<usize>,
    /// Node: the V8 object-heap ceiling in MiB (default [`crate::DEFAULT_HEAP_MB`]).
    /// Past it the turn is `resource_exhausted` and the isolate is replaced.
    /// ArrayBuffers are not on this heap: see `external_mb`.
    pub heap_mb: u64,
    /// Node: the ceiling on ArrayBuffer and typed-array memory in MiB
    /// (default [`crate::DEFAULT_EXTERNAL_MB`]). An allocation past it throws a
    /// `RangeError` in the guest; a turn that then fails is `resource_exhausted`.
    pub external_mb: u64,
    /// Node: the `iii.files` byte quota in MiB (default [`crate::DEFAULT_SCRATCH_MB`]).
    /// `None` (the configuration's `scratch_mb: 0`) disables `iii.files`:
    /// every write is refused, never unbounded.
    pub scratch_mb: Option<u64>,
    /// Node: how many files `iii.files` may hold (default [`crate::DEFAULT_SCRATCH_FILES`]).
    pub scratch_files: u64,
}

impl Default for RuntimeOptions {
    /// The contract's defaults; no directory (set one), writable.
    fn default() -> Self {
        RuntimeOptions {
            memory_mb: crate::DEFAULT_MEMORY_MB,
            work_dir: PathBuf::new(),
            read_only: false,
            checkpoint: false,
            ledger: None,
            max_result_bytes: None,
            heap_mb: crate::DEFAULT_HEAP_MB,
            external_mb: crate::DEFAULT_EXTERNAL_MB,
            scratch_mb: Some(crate::DEFAULT_SCRATCH_MB),
            scratch_files: crate::DEFAULT_SCRATCH_FILES,
        }
    }
}

/// What one turn does.
///
/// A plain run is a [`Task::Program`]. The other two serve functions
/// published on the bus (`register_function`, node's `iii.registerFunction`):
/// a runtime keeps handlers by key, and each call of a published function is
/// one [`Task::Invoke`] turn on the runtime that holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Task {
    /// Run a program. Python: a module whose `result` global is the
    /// completion. Node: the body of an async function whose return value is
    /// the completion.
    Program(String),
    /// Load handler source and keep its `handler` under `key`.
    ///
    /// Python: a module that defines `handler(payload)`; node: an ES module
    /// that exports `handler`. Whatever else the source defines stays in the
    /// runtime's globals for later turns. A source that leaves no callable
    /// `handler` ends the turn with exit code 1 and an exception saying so,
    /// and the handler kept under `key` before, if any, stays.
    Define {
        /// The key the handler is kept under (the worker uses the function id).
        key: String,
        /// The handler source, in the runtime's language.
        source: String,
    },
    /// Call the handler kept under `key` with `payload`; its (awaited) return
    /// value is the completion. A raised exception is an ordinary exit-code-1
    /// outcome; an unknown key is one too, with an exception naming the key.
    Invoke {
        /// The key given to [`Task::Define`] or to a binding registrar.
        key: String,
        /// The lossless JSON argument.
        payload: Value,
    },
}

impl Task {
    /// A plain program.
    pub fn program(source: impl Into<String>) -> Task {
        Task::Program(source.into())
    }
}

/// One turn: a task, its budget, its bindings and its caps.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    /// What to run, in the runtime's language.
    pub task: Task,
    /// Wall-clock budget, already clamped by the caller.
    pub timeout: Duration,
    /// Host functions exposed as globals for this turn.
    pub bindings: Bindings,
    /// Per-stream ceiling the engine's buffers keep (`None`: the hard ceiling).
    pub max_stream_bytes: Option<usize>,
    /// Fires to stop the turn hard.
    pub abort: AbortSignal,
    /// Where output goes while it is written, for a caller that streams.
    pub live: Option<crate::caps::LiveOutput>,
}

/// A cancellation flag shared between a caller and a running turn.
///
/// A signal may have a parent ([`AbortSignal::child`]): it counts as fired
/// once it or any signal above it fired, so stopping one turn can stop
/// every turn started on its behalf.
#[derive(Debug, Clone, Default)]
pub struct AbortSignal(Arc<SignalNode>);

#[derive(Debug, Default)]
struct SignalNode {
    fired: AtomicBool,
    parent: Option<AbortSignal>,
}

impl AbortSignal {
    /// A signal that has not fired.
    pub fn new() -> Self {
        AbortSignal::default()
    }

    /// A signal that fires with this one (and on its own, without firing this one).
    #[must_use]
    pub fn child(&self) -> AbortSignal {
        AbortSignal(Arc::new(SignalNode {
            fired: AtomicBool::new(false),
            parent: Some(self.clone()),
        }))
    }

    /// Fires the signal: the turn stops at its next check (within milliseconds).
    pub fn abort(&self) {
        self.0.fired.store(true, Ordering::SeqCst);
    }

    /// Whether the signal, or a signal it is a child of, fired.
    pub fn is_aborted(&self) -> bool {
        let mut signal = Some(self);
        while let Some(current) = signal {
            if current.0.fired.load(Ordering::SeqCst) {
                return true;
            }
            signal = current.0.parent.as_ref();
        }
        false
    }
}

/// What the program left as its completion value.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// No value (python: `result` unassigned or `None`; node: `undefined`).
    Absent,
    /// No value, where the engine saw a likely mistake (python's last line
    /// an expression whose value was not kept): the text says so.
    AbsentWithNote(String),
    /// A lossless JSON value.
    Value(Value),
    /// The value's JSON form, with something in it rewritten rather than
    /// carried (`NaN` as `null`, a date as ISO-8601 text, an `undefined`
    /// property dropped as `JSON.stringify` drops it): faithful for a
    /// caller that asked for JSON (the worker's result), refused by the
    /// seam's lossless policy.
    Converted {
        /// The JSON form.
        value: Value,
        /// The first value rewritten, with its path (`result[3]: NaN became null`).
        substituted: String,
        /// What the caller is told with the value, if anything (a `Map`
        /// written as `{}`, bytes as base64).
        note: Option<String>,
    },
    /// A value with no JSON form: the text names its path and type and
    /// how to fix it.
    NotJson(String),
    /// A value too large to carry across the engine boundary: its facts only.
    Oversize {
        /// Serialized size in bytes.
        bytes: u64,
        /// Its shape, for the omission marker.
        shape: ResultShape,
    },
}

/// Why a turn did not run to its program's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The wall-clock budget expired.
    Timeout {
        /// The budget that expired.
        budget: Duration,
    },
    /// The [`AbortSignal`] fired.
    Aborted,
    /// A per-runtime cap (memory, `/work` quota, stack) was hit; the text names it and its number.
    ResourceExhausted(String),
    /// The substrate died without settling.
    Crashed(String),
    /// Host and guest disagreed about the protocol.
    Protocol(String),
    /// The engine could not be started at all (e.g. python.wasm missing).
    Unavailable(String),
    /// The runtime was gone before the turn began (its sandbox process
    /// died): the turn's code never ran, so a caller may run it elsewhere.
    NotStarted(String),
}

impl Fault {
    /// The seam's failure kind for this fault.
    pub fn kind(&self) -> FailureKind {
        match self {
            Fault::Timeout { .. } => FailureKind::Timeout,
            Fault::Aborted => FailureKind::Abort,
            Fault::ResourceExhausted(_) | Fault::Crashed(_) => FailureKind::WorkerExit,
            Fault::Protocol(_) => FailureKind::Protocol,
            Fault::Unavailable(_) | Fault::NotStarted(_) => FailureKind::SandboxUnavailable,
        }
    }

    /// The worker's contract error for this fault.
    pub fn to_runner_error(&self) -> RunnerError {
        let (code, message) = match self {
            Fault::Timeout { budget } => (
                ErrorCode::Timeout,
                format!("run exceeded its {} ms budget", budget.as_millis()),
            ),
            Fault::Aborted => (
                ErrorCode::Expired,
                "the runtime was torn down mid-run".to_string(),
            ),
            Fault::ResourceExhausted(what) => (ErrorCode::ResourceExhausted, what.clone()),
            Fault::Crashed(what) => (ErrorCode::Engine, format!("the interpreter died: {what}")),
            Fault::Protocol(what) => (ErrorCode::Engine, format!("engine protocol error: {what}")),
            Fault::Unavailable(what) => (ErrorCode::Engine, what.clone()),
            Fault::NotStarted(what) => (
                ErrorCode::Expired,
                format!("the runtime ended before the run began ({what})"),
            ),
        };
        RunnerError::new(code, message)
    }

    /// The human-readable message, as the seam reports it.
    pub fn message(&self) -> String {
        match self {
            Fault::Timeout { budget } => {
                format!("wall-clock budget of {} ms expired", budget.as_millis())
            }
            Fault::Aborted => "the run was aborted".to_string(),
            other => other.to_runner_error().message,
        }
    }
}

/// The seam's failure taxonomy: orthogonal outcomes, reported independently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The program threw or failed to parse.
    Exception,
    /// A budget expired; the message says which.
    Timeout,
    /// The abort signal fired.
    Abort,
    /// The substrate died without settling (e.g. out of memory).
    WorkerExit,
    /// The completion value was not lossless JSON.
    InvalidOutput,
    /// The serialized logs plus value or message exceeded the cap.
    OutputLimit,
    /// Host and guest disagreed about the protocol.
    Protocol,
    /// The engine could not run the program at all.
    SandboxUnavailable,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnding {
    /// The program ran to its end (or raised, or exited).
    Exited {
        /// 0, 1 for an uncaught exception, `n` for an explicit exit.
        exit_code: i64,
        /// The completion value; `Absent` when the program failed.
        completion: Completion,
        /// The uncaught exception's text, also written to stderr.
        exception: Option<String>,
    },
    /// The turn was stopped; the runtime may have lost its interpreter.
    Faulted(Fault),
}

/// What one turn cost, measured by the engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnUsage {
    /// CPU time the runtime's thread spent on the turn, in nanoseconds.
    pub cpu_ns: u64,
    /// The most memory the sandbox held during the turn, in bytes, as the
    /// engine counts it (see each engine).
    pub peak_memory_bytes: u64,
}

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(rustix::time::ClockId::ThreadCPUTime)
}

/// `clock`'s reading in nanoseconds.
pub(crate) fn clock_ns(clock: rustix::time::ClockId) -> u64 {
    let now = rustix::time::clock_gettime(clock);
    u64::try_from(now.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(now.tv_nsec).unwrap_or(0))
}

/// Everything a turn produced.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// Bounded standard output.
    pub stdout: StreamBuffer,
    /// Bounded standard error.
    pub stderr: StreamBuffer,
    /// How it ended.
    pub ending: TurnEnding,
    /// Whether the sandbox refused a file operation during the turn (a
    /// capability or permission denial, a read-only mount, the `/work` quota),
    /// as the engine observed it, not as the program reported it.
    pub denied: bool,
    /// What the turn cost (zero for a turn that never ran).
    pub usage: TurnUsage,
    /// The runtime's interpreter was lost with this turn (python's instance
    /// trapped, or exited): its variables are gone, its files stay, and its
    /// next turn starts a fresh interpreter. Never set by an engine whose
    /// state survives a stopped turn (node's isolate).
    pub interpreter_reset: bool,
    /// The interpreter was lost with this turn and the runtime went back to
    /// its checkpoint, its state before the turn ([`RuntimeOptions::checkpoint`]):
    /// its variables and `/work` are as they were, nothing of the turn is left.
    pub went_back: bool,
}

pub use crate::wire::Image;

/// The images of one turn: those the engine hands over, in order, and how
/// many it dropped past its own ceilings (the caller's caps come on top).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnImages {
    /// The images, in the order the program produced them.
    pub images: Vec<Image>,
    /// How many more the program produced than the engine keeps.
    pub omitted: usize,
}

/// A live runtime: state that persists from one turn to the next.
pub trait Runtime: Send + Sync {
    /// The runtime's language.
    fn lang(&self) -> Lang;

    /// Runs one turn. Program failures and faults are part of the outcome;
    /// turns on one runtime are serialized by the runtime.
    fn run(&self, turn: TurnSpec) -> BoxFuture<'_, TurnOutcome>;

    /// Runs one turn like [`Runtime::run`] and also answers the images it
    /// produced, in order, within the engine's own ceilings. The default
    /// answers none: only engines that make images override it.
    fn run_with_images(&self, turn: TurnSpec) -> BoxFuture<'_, (TurnOutcome, TurnImages)> {
        Box::pin(async move { (self.run(turn).await, TurnImages::default()) })
    }

    /// Writes `files` (normalised, checked: [`crate::files::decode_inputs`])
    /// into the runtime's root (python's `/work`, node's `iii.files`
    /// directory) before a turn, on the runtime's own thread and within its
    /// own quotas, so that they count as if the guest had written them.
    ///
    /// # Errors
    /// `code-runner::resource_exhausted` when they do not fit the quotas
    /// (nothing is written then), `code-runner::invalid_request` when a path
    /// meets a file where a directory must be (or a symlink), a read-only
    /// runtime, or an engine that takes no files.
    fn put_files(
        &self,
        files: Vec<crate::files::InputFile>,
    ) -> BoxFuture<'_, Result<(), RunnerError>> {
        Box::pin(async move {
            if files.is_empty() {
                return Ok(());
            }
            Err(RunnerError::invalid(format!(
                "a {} runtime here takes no files",
                self.lang()
            )))
        })
    }

    /// The runtime's state between turns, as a snapshot's named sections
    /// (its engine's format: `code_runner_snapshot` seals them).
    ///
    /// # Errors
    /// `invalid_request` naming why this runtime cannot be snapshotted now
    /// (its kind, an open file, a lost interpreter).
    fn snapshot(&self) -> BoxFuture<'_, Result<SnapshotSections, RunnerError>> {
        Box::pin(async move {
            Err(RunnerError::invalid(format!(
                "snapshot_unsupported: a {} runtime cannot be snapshotted here",
                self.lang()
            )))
        })
    }

    /// From now on, keeps what the runtime needs to be made again by
    /// replay ([`Runtime::snapshot`] of a node runtime is its turn ledger).
    /// Called by an owner that keeps the runtime, before its first turn
    /// and its first files. Engines that snapshot memory ignore it.
    fn record(&self, options: LedgerOptions) -> BoxFuture<'_, ()> {
        let _ = options;
        Box::pin(async {})
    }

    /// Makes the packages installed at `dir` (by the worker, for this
    /// runtime alone) importable from its next turn on, beside the
    /// operator's; answers what they are, as `name@version` (node) or
    /// `name==version` (python).
    ///
    /// # Errors
    /// `invalid_request` for an engine that takes no packages; `engine`
    /// when the install cannot be read.
    fn add_packages(&self, dir: PathBuf) -> BoxFuture<'_, Result<Vec<String>, RunnerError>> {
        let _ = dir;
        Box::pin(async move {
            Err(RunnerError::invalid(format!(
                "a {} runtime here takes no added packages",
                self.lang()
            )))
        })
    }

    /// Whether the runtime is gone for good without being closed (its
    /// sandbox process died): every later turn faults, so its owner should
    /// let go of it. In-process runtimes never are.
    fn is_gone(&self) -> bool {
        false
    }

    /// Stops any running turn and frees the runtime; resolves once it is gone.
    fn close(&self) -> BoxFuture<'_, ()>;
}

/// How an engine's runtimes use what it holds, for an operator's gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Runtimes live now (python: pooled instance slots in use).
    pub live: u64,
    /// The most runtimes the engine holds at once.
    pub max: u64,
    /// Instance slots freed since the engine started; each was reset (its
    /// memory copied back or zeroed) before another instance used it.
    pub resets: u64,
    /// Guest memory the live runtimes hold, in bytes (python: their linear
    /// memories).
    pub memory_bytes: u64,
    /// Bytes of freed slots kept resident for the next instance.
    pub resident_bytes: u64,
}

/// An engine: boots runtimes of one language.
pub trait Engine: Send + Sync {
    /// The language this engine runs.
    fn lang(&self) -> Lang;

    /// Boots a runtime with per-runtime options.
    ///
    /// # Errors
    /// `code-runner::engine` when the engine cannot start (its message says
    /// what to do), `code-runner::resource_exhausted` when the options cannot
    /// be honoured.
    fn spawn(
        &self,
        options: RuntimeOptions,
    ) -> BoxFuture<'_, Result<Arc<dyn Runtime>, RunnerError>>;

    /// The image a snapshot of this engine's runtimes belongs to (a
    /// snapshot loads into that image only); `None` when its runtimes
    /// cannot be snapshotted.
    fn snapshot_image(&self) -> Option<String> {
        None
    }

    /// What its runtimes use now; `None` for an engine that does not count
    /// (its runtimes live in other processes, or it keeps no pool).
    fn stats(&self) -> Option<EngineStats> {
        None
    }

    /// Boots a runtime whose state is a snapshot's (from
    /// [`Runtime::snapshot`] of a runtime of the same image).
    ///
    /// # Errors
    /// `invalid_request` when this engine restores no snapshots, or the
    /// sections are not its state; as [`Engine::spawn`] otherwise.
    fn restore(
        &self,
        options: RuntimeOptions,
        sections: SnapshotSections,
    ) -> BoxFuture<'_, Result<Arc<dyn Runtime>, RunnerError>> {
        let _ = (options, sections);
        Box::pin(async move {
            Err(RunnerError::invalid(format!(
                "snapshot_unsupported: {} runtimes here are not restored from snapshots",
                self.lang()
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::AbortSignal;

    /// A child fires with its parent, never the other way round; a
    /// grandchild sees its grandparent.
    #[test]
    fn child_signals_fire_with_their_parent() {
        let parent = AbortSignal::new();
        let child = parent.child();
        let grandchild = child.child();
        let sibling = parent.child();
        sibling.abort();
        assert!(sibling.is_aborted());
        assert!(!parent.is_aborted() && !child.is_aborted());
        parent.abort();
        assert!(child.is_aborted() && grandchild.is_aborted());
    }
}
