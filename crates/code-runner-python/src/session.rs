//! One python runtime's thread: it owns the `Store`, instantiates the
//! snapshot copy-on-write, runs turns through the runner's `turn` export, and
//! instantiates afresh (on the next turn, on the same `/work`) when a turn
//! kills the instance.
//!
//! Async callers talk to the thread by [`Command`]s on a channel and get
//! each [`TurnOutcome`] back on a oneshot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_runner_core::caps::{ResultShape, Stream, StreamBuffer};
use code_runner_core::{
    Completion, Fault, RuntimeOptions, TurnEnding, TurnImages, TurnOutcome, TurnSpec,
};
use wasmtime::component::{ResourceTable, TypedFunc};
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::fs::Guard;
use crate::host::{Host, MemoryLimiter, TurnLimits};
use crate::output::{GuestOutput, Streams};
use crate::protocol;
use crate::work_quota::{WORK_MAX_BYTES, WORK_MAX_FILES, WorkQuota};
use crate::{Shared, Slot};

/// A request to the runtime thread.
pub enum Command {
    /// Run one turn and answer on the oneshot.
    Turn(
        TurnSpec,
        tokio::sync::oneshot::Sender<(TurnOutcome, TurnImages)>,
    ),
}

/// State shared between the runtime handle and its thread.
#[derive(Default)]
pub struct Link {
    /// Set by `close`: every wait and the epoch callback stop at once.
    pub closing: AtomicBool,
}

/// Why the host stopped the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The turn's budget expired.
    Timeout,
    /// The turn's abort signal fired.
    Aborted,
    /// The runtime is being closed.
    Closing,
    /// The runner broke the protocol.
    Protocol(String),
}

/// The runner's `turn` export.
type TurnFn = TypedFunc<(String,), ((String, Option<String>),)>;

/// A live instance: its store and its entry point.
struct Instance {
    store: Store<Host>,
    turn: TurnFn,
    /// The largest result text this runtime hands over as a value.
    max_result: usize,
}

/// Everything a runtime thread needs to (re)instantiate the snapshot.
pub struct Boot {
    pub(crate) shared: Arc<Shared>,
    pub(crate) options: RuntimeOptions,
    pub(crate) link: Arc<Link>,
    pub(crate) runtime: tokio::runtime::Handle,
    /// The pool slot this runtime holds until its thread ends.
    #[allow(
        dead_code,
        reason = "held for its Drop: the slot is freed when the thread ends"
    )]
    pub(crate) slot: Slot,
}

/// The runtime thread's body: instantiate, serve turns, instantiate again after a death.
pub fn thread_main(
    boot: Boot,
    commands: Receiver<Command>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    match &boot.shared.flavour {
        crate::Flavour::Lean { .. } => serve(boot, commands, ready, instantiate, |i, spec| {
            let (outcome, survivor) = run_turn(i, spec);
            (outcome, TurnImages::default(), survivor)
        }),
        crate::Flavour::Data(_) => serve(
            boot,
            commands,
            ready,
            crate::data::session::instantiate,
            crate::data::session::run_turn,
        ),
    }
}

/// Serves turns with one flavour's `instantiate` and `run`.
fn serve<I>(
    boot: Boot,
    commands: Receiver<Command>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
    instantiate: fn(&Boot) -> Result<I, String>,
    run: fn(I, TurnSpec) -> (TurnOutcome, TurnImages, Option<I>),
) {
    let mut live = match instantiate(&boot) {
        Ok(instance) => {
            let _ = ready.send(Ok(()));
            Some(instance)
        }
        Err(message) => {
            let _ = ready.send(Err(message));
            return;
        }
    };
    while let Ok(Command::Turn(spec, reply)) = commands.recv() {
        if boot.link.closing.load(Ordering::SeqCst) {
            break;
        }
        let instance = match live.take() {
            Some(instance) => instance,
            None => match instantiate(&boot) {
                Ok(instance) => instance,
                Err(message) => {
                    let crashed = crashed(spec.max_stream_bytes, message);
                    let _ = reply.send((crashed, TurnImages::default()));
                    continue;
                }
            },
        };
        let (outcome, images, survivor) = run(instance, spec);
        live = survivor;
        let _ = reply.send((outcome, images));
    }
    drop(live);
    drop(boot);
}

/// A fresh instance of the snapshot on the runtime's directory.
fn instantiate(boot: &Boot) -> Result<Instance, String> {
    let shared = &boot.shared;
    let crate::Flavour::Lean { instance_pre, lib } = &shared.flavour else {
        return Err("not the lean flavour".into());
    };
    let options = &boot.options;
    let streams = Arc::new(Mutex::new(Streams::new(Some(8192))));
    let perms = if options.read_only {
        FsPerms::ReadOnly
    } else {
        FsPerms::ReadWrite
    };
    let mut builder = WasiCtxBuilder::new();
    builder
        .allow_blocking_current_thread(true)
        .stdout(GuestOutput::new(streams.clone(), Stream::Stdout))
        .stderr(GuestOutput::new(streams.clone(), Stream::Stderr));
    builder
        .preopened_dir(&options.work_dir, "/work", perms)
        .map_err(|err| {
            format!(
                "cannot mount {} as /work: {err:#}",
                options.work_dir.display()
            )
        })?;
    builder
        .preopened_dir(lib, "/python", FsPerms::ReadOnly)
        .map_err(|err| format!("cannot mount {} as /python: {err:#}", lib.display()))?;
    let guard = Guard::new(WorkQuota::new(
        &options.work_dir,
        WORK_MAX_BYTES,
        WORK_MAX_FILES,
    ));
    let host = Host {
        wasi: builder.build(),
        table: ResourceTable::new(),
        guard: Arc::new(Mutex::new(guard)),
        limiter: MemoryLimiter {
            max_bytes: (options.memory_mb as usize).saturating_mul(1 << 20),
            hit: false,
            total: None,
        },
        streams,
        turn: None,
        stop: None,
        link: boot.link.clone(),
        runtime: boot.runtime.clone(),
        clock_base: Instant::now(),
    };
    let mut store = Store::new(&shared.engine, host);
    store.limiter(|host| &mut host.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| match ctx.data().should_stop() {
        Some(stop) => {
            ctx.data_mut().stop = Some(stop);
            Err(wasmtime::Error::msg("code-runner stopped the guest"))
        }
        None => Ok(UpdateDeadline::Continue(1)),
    });
    let instance = instance_pre
        .instantiate(&mut store)
        .map_err(|err| format!("cannot instantiate the python snapshot: {err:#}"))?;
    let turn = instance
        .get_typed_func::<(String,), ((String, Option<String>),)>(&mut store, "turn")
        .map_err(|err| format!("the python snapshot has no turn export: {err:#}"))?;
    let max_result = options
        .max_result_bytes
        .map_or(protocol::MAX_RESULT, |cap| cap.min(protocol::MAX_RESULT));
    Ok(Instance {
        store,
        turn,
        max_result,
    })
}

/// Runs one turn; the instance comes back unless the turn killed it.
fn run_turn(mut instance: Instance, spec: TurnSpec) -> (TurnOutcome, Option<Instance>) {
    let max_result = instance.max_result;
    let frame = protocol::turn(&spec.task, &spec.bindings, max_result);
    let cap = spec.max_stream_bytes;
    {
        let host = instance.store.data_mut();
        *host.streams.lock().unwrap_or_else(|p| p.into_inner()) = Streams::new(cap);
        host.limiter.hit = false;
        host.stop = None;
        {
            let mut guard = host.guard.lock().unwrap_or_else(|p| p.into_inner());
            guard.quota.hit = false;
            guard.denied = false;
        }
        host.turn = Some(TurnLimits {
            deadline: Instant::now() + spec.timeout,
            budget: spec.timeout,
            abort: spec.abort,
            bindings: spec.bindings,
        });
    }
    let called = instance.turn.call(&mut instance.store, (frame,));
    let host = instance.store.data_mut();
    let budget = host.turn.take().map_or(Duration::ZERO, |t| t.budget);
    let streams = std::mem::replace(
        &mut *host.streams.lock().unwrap_or_else(|p| p.into_inner()),
        Streams::new(Some(8192)),
    );
    let (denied, quota_hit, quota_message) = {
        let guard = host.guard.lock().unwrap_or_else(|p| p.into_inner());
        (guard.denied, guard.quota.hit, guard.quota.describe())
    };
    let outcome = |ending| TurnOutcome {
        stdout: streams.stdout,
        stderr: streams.stderr,
        ending,
        denied,
    };
    let facts = Facts {
        memory_hit: host.limiter.hit,
        memory_message: format!("memory limit {} MiB exceeded", host.limiter.max_bytes >> 20),
        quota_hit,
        quota_message,
    };
    let ((head, result),) = match called {
        Ok(answer) => answer,
        Err(err) => {
            let ending = death(
                host.stop.take(),
                facts.memory_hit,
                facts.memory_message,
                budget,
                &err,
            );
            return (outcome(ending), None);
        }
    };
    let (ending, keep) = finish(&head, result.map(Ok), max_result, facts);
    (outcome(ending), keep.then_some(instance))
}

/// What the host saw of a turn besides the runner's report.
pub(crate) struct Facts {
    /// A grow past the memory limit was refused.
    pub(crate) memory_hit: bool,
    /// The memory limit's message.
    pub(crate) memory_message: String,
    /// A `/work` reservation was refused.
    pub(crate) quota_hit: bool,
    /// The quota's message.
    pub(crate) quota_message: String,
}

/// How a turn whose runner reported its end ended, and whether its instance
/// may serve another turn. `result` is the result's JSON text, or the length
/// of one the host did not copy (past the cap).
pub(crate) fn finish(
    head: &str,
    result: Option<Result<String, u64>>,
    max_result: usize,
    facts: Facts,
) -> (TurnEnding, bool) {
    let head = match protocol::parse_head(head) {
        Ok(head) => head,
        Err(message) => return (TurnEnding::Faulted(Fault::Protocol(message)), false),
    };
    let failed = head.exit_code != 0;
    if failed && facts.memory_hit {
        // The interpreter met a refused grow and may be left inconsistent: discard it.
        let ending = TurnEnding::Faulted(Fault::ResourceExhausted(facts.memory_message));
        return (ending, false);
    }
    if failed && facts.quota_hit {
        let ending = TurnEnding::Faulted(Fault::ResourceExhausted(facts.quota_message));
        return (ending, true);
    }
    let completion = match (result, head.not_json, head.oversize) {
        (Some(Err(bytes)), _, _) => Completion::Oversize {
            bytes,
            shape: ResultShape::Scalar,
        },
        // Measured before it is parsed: a runner that ignored the cap costs
        // the host a length check, nothing more.
        (Some(Ok(text)), _, _) if text.len() > max_result => Completion::Oversize {
            bytes: text.len() as u64,
            shape: ResultShape::Scalar,
        },
        // Within the byte cap (up to 16 MiB when it is off) but too many
        // values to build a tree of: its size only, never parsed.
        (Some(Ok(text)), _, _) if protocol::result_too_wide(&text) => Completion::Oversize {
            bytes: text.len() as u64,
            shape: ResultShape::Scalar,
        },
        (Some(Ok(text)), _, _) => match protocol::parse_result(&text) {
            Ok(value) => Completion::Value(value),
            Err(why) => Completion::NotJson(why),
        },
        (None, Some(why), _) => Completion::NotJson(why),
        (None, None, Some(big)) => Completion::Oversize {
            bytes: big.bytes,
            shape: shape_of(&big.shape),
        },
        (None, None, None) => Completion::Absent,
    };
    let ending = TurnEnding::Exited {
        exit_code: head.exit_code,
        completion,
        exception: head.exception,
    };
    (ending, true)
}

/// How a turn that trapped ended.
pub(crate) fn death(
    stop: Option<Stop>,
    memory_hit: bool,
    memory_message: String,
    budget: Duration,
    err: &wasmtime::Error,
) -> TurnEnding {
    let fault = match stop {
        Some(Stop::Timeout) => Fault::Timeout { budget },
        Some(Stop::Aborted | Stop::Closing) => Fault::Aborted,
        Some(Stop::Protocol(message)) => Fault::Protocol(message),
        None if memory_hit => Fault::ResourceExhausted(memory_message),
        None => {
            if let Some(exit) = err.downcast_ref::<I32Exit>() {
                return TurnEnding::Exited {
                    exit_code: i64::from(exit.0),
                    completion: Completion::Absent,
                    exception: None,
                };
            }
            if err.downcast_ref::<Trap>() == Some(&Trap::StackOverflow) {
                Fault::ResourceExhausted("wasm stack exhausted (recursion too deep)".into())
            } else {
                Fault::Crashed(format!("{err:#}"))
            }
        }
    };
    TurnEnding::Faulted(fault)
}

fn shape_of((kind, n): &(String, u64)) -> ResultShape {
    match kind.as_str() {
        "array" => ResultShape::Array(*n),
        "object" => ResultShape::Object(*n),
        "string" => ResultShape::String(*n),
        _ => ResultShape::Scalar,
    }
}

pub(crate) fn crashed(cap: Option<usize>, message: String) -> TurnOutcome {
    TurnOutcome {
        stdout: StreamBuffer::new(Stream::Stdout, cap),
        stderr: StreamBuffer::new(Stream::Stderr, cap),
        ending: TurnEnding::Faulted(Fault::Crashed(message)),
        denied: false,
    }
}
