//! One python runtime's thread: it boots the interpreter, feeds it turns, and
//! reboots it (lazily, on the next turn) when a turn kills it.
//!
//! The thread owns the `Store`; async callers talk to it by [`Command`]s on a
//! channel and get each [`TurnOutcome`] back on a oneshot.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use code_runner_core::caps::{ResultShape, Stream, StreamBuffer};
use code_runner_core::{
    AbortSignal, BindingCall, BindingError, Bindings, Completion, Fault, RuntimeOptions,
    TurnEnding, TurnOutcome, TurnSpec,
};
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::host::{self, Originals};
use crate::protocol::{self, CallFrame, DoneFrame, GuestFrame};
use crate::work_quota::{WORK_MAX_BYTES, WORK_MAX_FILES, WorkQuota};
use crate::{Shared, WRAPPER};

/// A request to the runtime thread.
pub enum Command {
    /// Run one turn and answer on the oneshot.
    Turn(TurnSpec, tokio::sync::oneshot::Sender<TurnOutcome>),
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
    /// The wrapper broke the protocol.
    Protocol(String),
    /// A limit left the interpreter unusable; the turn was already answered.
    Discard,
}

/// How long the wrapper may run between ending a turn and parking on fd 0.
const PARK_GRACE: Duration = Duration::from_millis(50);

#[derive(PartialEq, Eq)]
enum Phase {
    Booting,
    Parked,
    Running,
}

struct ActiveTurn {
    deadline: Instant,
    budget: Duration,
    abort: AbortSignal,
    bindings: Bindings,
    stdout: StreamBuffer,
    stderr: StreamBuffer,
    reply: tokio::sync::oneshot::Sender<TurnOutcome>,
}

/// Linear-memory ceiling; remembers that the guest asked for more.
pub struct MemoryLimiter {
    max_bytes: usize,
    /// Set when a grow past the ceiling was refused during the current turn.
    pub hit: bool,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The store's data: WASI, limits, and the channel to the wrapper.
pub struct Host {
    wasi: WasiP1Ctx,
    pub(crate) originals: Option<Originals>,
    pub(crate) quota: WorkQuota,
    limiter: MemoryLimiter,
    memory_mb: u64,
    pub(crate) clock_base: Instant,
    pub(crate) stop: Option<Stop>,
    /// Whether a file operation was refused during the current turn.
    pub(crate) denied: bool,
    token: String,
    inbound: Vec<u8>,
    inbound_pos: usize,
    phase: Phase,
    /// When the last turn ended, until the wrapper parks again.
    parked_at: Option<Instant>,
    turn: Option<ActiveTurn>,
    pending: Option<Command>,
    commands: Receiver<Command>,
    ready: Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
    boot_output: StreamBuffer,
    link: Arc<Link>,
    runtime: tokio::runtime::Handle,
}

impl Host {
    /// Whether the guest must stop now, and why.
    pub fn should_stop(&self) -> Option<Stop> {
        if self.link.closing.load(Ordering::SeqCst) {
            return Some(Stop::Closing);
        }
        if let Some(parked_at) = self.parked_at {
            // After a turn ends the wrapper is back in fd_read within
            // microseconds; code still running past the grace period ended
            // its turn early to escape the deadline.
            return (parked_at.elapsed() > PARK_GRACE)
                .then(|| Stop::Protocol("the program kept running after its turn ended".into()));
        }
        let turn = self.turn.as_ref()?;
        if turn.abort.is_aborted() {
            return Some(Stop::Aborted);
        }
        (Instant::now() >= turn.deadline).then_some(Stop::Timeout)
    }

    /// Makes sure a wrapper read of fd 0 has bytes, parking for the next turn when idle.
    pub fn fill_inbound(&mut self) -> Result<(), Stop> {
        if self.inbound_pos < self.inbound.len() || self.phase == Phase::Running {
            return Ok(());
        }
        self.parked_at = None;
        if self.phase == Phase::Booting {
            self.phase = Phase::Parked;
            if let Some(ready) = self.ready.take() {
                let _ = ready.send(Ok(()));
            }
        }
        // A parked interpreter blocks here without polling: closing the runtime
        // drops the only sender, which ends the wait.
        let command = match self.pending.take() {
            Some(command) => command,
            None => self.commands.recv().map_err(|_| Stop::Closing)?,
        };
        self.start(command);
        Ok(())
    }

    fn start(&mut self, Command::Turn(spec, reply): Command) {
        self.set_inbound(protocol::turn(&spec.task, &spec.bindings));
        self.limiter.hit = false;
        self.quota.hit = false;
        self.denied = false;
        self.phase = Phase::Running;
        self.turn = Some(ActiveTurn {
            deadline: Instant::now() + spec.timeout,
            budget: spec.timeout,
            abort: spec.abort,
            bindings: spec.bindings,
            stdout: StreamBuffer::new(Stream::Stdout, spec.max_stream_bytes),
            stderr: StreamBuffer::new(Stream::Stderr, spec.max_stream_bytes),
            reply,
        });
    }

    fn set_inbound(&mut self, bytes: Vec<u8>) {
        self.inbound = bytes;
        self.inbound_pos = 0;
    }

    /// Copies pending inbound bytes into `dest`; returns how many.
    pub fn take_inbound(&mut self, dest: &mut [u8]) -> usize {
        let available = &self.inbound[self.inbound_pos..];
        let n = available.len().min(dest.len());
        dest[..n].copy_from_slice(&available[..n]);
        self.inbound_pos += n;
        n
    }

    /// Captures guest output on fd 1 or 2.
    pub fn capture(&mut self, fd: i32, bytes: &[u8]) {
        match (&mut self.turn, fd) {
            (Some(turn), 1) => turn.stdout.push(bytes),
            (Some(turn), _) => turn.stderr.push(bytes),
            (None, _) => self.boot_output.push(bytes),
        }
    }

    /// Handles one fd-0 write: a wrapper frame, or noise to drop.
    pub fn guest_frame(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        match protocol::parse_guest(self.token.as_bytes(), bytes) {
            None => Ok(()),
            Some(Err(message)) => Err(Stop::Protocol(message)),
            Some(Ok(GuestFrame::Call(call))) => {
                let answer = self.call_binding(call)?;
                self.set_inbound(protocol::reply(answer));
                Ok(())
            }
            Some(Ok(GuestFrame::Done(done))) => self.finish(done),
        }
    }

    fn call_binding(
        &mut self,
        call: CallFrame,
    ) -> Result<Result<serde_json::Value, BindingError>, Stop> {
        let turn = self
            .turn
            .as_ref()
            .ok_or_else(|| Stop::Protocol("binding call outside a turn".into()))?;
        let Some(function) = turn.bindings.lookup(&call.ns, &call.member) else {
            return Ok(Err(BindingError::message(format!(
                "{} has no function {:?}",
                call.ns, call.member
            ))));
        };
        let future = function(
            call.args,
            BindingCall {
                deadline: turn.deadline,
            },
        );
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        Ok(host::wait_for(self, &rx)?.unwrap_or_else(|| {
            Err(BindingError::message(
                "the binding call ended without an answer",
            ))
        }))
    }

    fn finish(&mut self, done: DoneFrame) -> Result<(), Stop> {
        let turn = self
            .turn
            .take()
            .ok_or_else(|| Stop::Protocol("turn end outside a turn".into()))?;
        self.phase = Phase::Parked;
        self.parked_at = Some(Instant::now());
        let completion = match (done.result, done.not_json, done.oversize) {
            (Some(value), _, _) => Completion::Value(value),
            (None, Some(why), _) => Completion::NotJson(why),
            (None, None, Some(big)) => Completion::Oversize {
                bytes: big.bytes,
                shape: shape_of(&big.shape),
            },
            (None, None, None) => Completion::Absent,
        };
        let failed = done.exit_code != 0;
        let (ending, discard) = if failed && self.limiter.hit {
            (
                TurnEnding::Faulted(Fault::ResourceExhausted(self.memory_message())),
                true,
            )
        } else if failed && self.quota.hit {
            (
                TurnEnding::Faulted(Fault::ResourceExhausted(self.quota.describe())),
                false,
            )
        } else {
            (
                TurnEnding::Exited {
                    exit_code: done.exit_code,
                    completion,
                    exception: done.exception,
                },
                false,
            )
        };
        let _ = turn.reply.send(TurnOutcome {
            stdout: turn.stdout,
            stderr: turn.stderr,
            ending,
            denied: self.denied,
        });
        if discard { Err(Stop::Discard) } else { Ok(()) }
    }

    fn memory_message(&self) -> String {
        format!("memory limit {} MiB exceeded", self.memory_mb)
    }

    /// Answers the turn in flight (if any) after the interpreter ended with `result`.
    fn settle_death(&mut self, result: wasmtime::Result<()>) -> Option<String> {
        let stop = self.stop.clone();
        if stop == Some(Stop::Discard) || (stop == Some(Stop::Closing) && self.turn.is_none()) {
            return None;
        }
        let fault = match (&stop, &result) {
            (Some(Stop::Discard), _) => None,
            (Some(Stop::Timeout), _) => Some(Fault::Timeout {
                budget: self.turn.as_ref().map_or(Duration::ZERO, |t| t.budget),
            }),
            (Some(Stop::Aborted | Stop::Closing), _) => Some(Fault::Aborted),
            (Some(Stop::Protocol(message)), _) => Some(Fault::Protocol(message.clone())),
            (None, _) if self.limiter.hit => Some(Fault::ResourceExhausted(self.memory_message())),
            (None, Err(err)) if err.downcast_ref::<I32Exit>().is_some() => None,
            (None, Err(err)) if err.downcast_ref::<Trap>() == Some(&Trap::StackOverflow) => Some(
                Fault::ResourceExhausted("wasm stack exhausted (recursion too deep)".into()),
            ),
            (None, Err(err)) => Some(Fault::Crashed(format!("{err:#}"))),
            (None, Ok(())) => Some(Fault::Crashed("the interpreter exited".into())),
        };
        let exit = result
            .as_ref()
            .err()
            .and_then(|err| err.downcast_ref::<I32Exit>())
            .map(|exit| exit.0);
        let Some(turn) = self.turn.take() else {
            return Some(
                fault
                    .map(|f| f.message())
                    .unwrap_or_else(|| format!("exit status {exit:?}")),
            );
        };
        let ending = match (fault, exit) {
            (Some(fault), _) => TurnEnding::Faulted(fault),
            (None, code) => TurnEnding::Exited {
                exit_code: code.map_or(1, i64::from),
                completion: Completion::Absent,
                exception: None,
            },
        };
        let _ = turn.reply.send(TurnOutcome {
            stdout: turn.stdout,
            stderr: turn.stderr,
            ending,
            denied: self.denied,
        });
        None
    }
}

fn shape_of((kind, n): &(String, u64)) -> ResultShape {
    match kind.as_str() {
        "array" => ResultShape::Array(*n),
        "object" => ResultShape::Object(*n),
        "string" => ResultShape::String(*n),
        _ => ResultShape::Scalar,
    }
}

struct GuestClock(Instant);

impl wasmtime_wasi::HostMonotonicClock for GuestClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Everything a runtime thread needs to (re)boot interpreters.
pub struct Boot {
    pub(crate) shared: Arc<Shared>,
    pub(crate) options: RuntimeOptions,
    pub(crate) link: Arc<Link>,
    pub(crate) runtime: tokio::runtime::Handle,
}

/// The runtime thread's body: boot, serve turns, reboot on the next turn after a death.
pub fn thread_main(
    boot: Boot,
    commands: Receiver<Command>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    let mut commands = commands;
    let mut ready = Some(ready);
    let mut pending = None;
    loop {
        let (outcome, returned) = run_interpreter(&boot, commands, pending.take(), ready.take());
        commands = returned;
        if let Err(message) = outcome {
            let message = code_runner_core::bound_message(message);
            tracing::warn!("python interpreter ended: {message}");
        }
        if boot.link.closing.load(Ordering::SeqCst) {
            return;
        }
        match commands.recv() {
            Ok(command) => pending = Some(command),
            Err(_) => return,
        }
    }
}

fn run_interpreter(
    boot: &Boot,
    commands: Receiver<Command>,
    pending: Option<Command>,
    ready: Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
) -> (Result<(), String>, Receiver<Command>) {
    let clock_base = Instant::now();
    let perms = if boot.options.read_only {
        FsPerms::ReadOnly
    } else {
        FsPerms::ReadWrite
    };
    let mut builder = WasiCtxBuilder::new();
    builder
        .args(&["python", "-I", "-S", "-B", "-c", WRAPPER])
        .allow_blocking_current_thread(true)
        .monotonic_clock(GuestClock(clock_base));
    let preopened = builder
        .preopened_dir(&boot.options.work_dir, "/work", perms)
        .map(|_| ());
    let token = crate::random_token();
    let host = Host {
        wasi: builder.build_p1(),
        originals: None,
        quota: WorkQuota::new(&boot.options.work_dir, WORK_MAX_BYTES, WORK_MAX_FILES),
        limiter: MemoryLimiter {
            max_bytes: (boot.options.memory_mb as usize).saturating_mul(1 << 20),
            hit: false,
        },
        memory_mb: boot.options.memory_mb,
        clock_base,
        stop: None,
        denied: false,
        inbound: protocol::boot(&token),
        token,
        inbound_pos: 0,
        phase: Phase::Booting,
        parked_at: None,
        turn: None,
        pending,
        commands,
        ready,
        boot_output: StreamBuffer::new(Stream::Stderr, Some(8192)),
        link: boot.link.clone(),
        runtime: boot.runtime.clone(),
    };
    if let Err(err) = preopened {
        let message = format!(
            "cannot mount {} as /work: {err:#}",
            boot.options.work_dir.display()
        );
        return (Err(message.clone()), fail_boot(host, message));
    }
    let mut store = Store::new(&boot.shared.engine, host);
    store.limiter(|host| &mut host.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| match ctx.data().should_stop() {
        Some(stop) => {
            ctx.data_mut().stop = Some(stop);
            Err(wasmtime::Error::msg("code-runner stopped the guest"))
        }
        None => Ok(UpdateDeadline::Continue(1)),
    });
    let started = boot
        .shared
        .instance_pre
        .instantiate(&mut store)
        .and_then(|instance| {
            let memory = instance
                .get_memory(&mut store, "memory")
                .ok_or_else(|| wasmtime::Error::msg("python.wasm exports no memory"))?;
            let originals = Originals::new(
                &boot.shared.base_linker,
                &boot.shared.trampoline,
                memory,
                &mut store,
            )?;
            store.data_mut().originals = Some(originals);
            instance.get_typed_func::<(), ()>(&mut store, "_start")
        })
        .and_then(|start| start.call(&mut store, ()));
    let mut host = store.into_data();
    let death = host.settle_death(started);
    let outcome = match death {
        Some(message) => {
            let detail = format!(
                "{message}; interpreter output: {}",
                host.boot_output.render().trim()
            );
            if let Some(ready) = host.ready.take() {
                let _ = ready.send(Err(detail.clone()));
            }
            if let Some(Command::Turn(_, reply)) = host.pending.take() {
                let _ = reply.send(crashed(detail.clone()));
            }
            Err(detail)
        }
        None => Ok(()),
    };
    (outcome, host.commands)
}

fn fail_boot(mut host: Host, message: String) -> Receiver<Command> {
    if let Some(ready) = host.ready.take() {
        let _ = ready.send(Err(message.clone()));
    }
    if let Some(Command::Turn(_, reply)) = host.pending.take() {
        let _ = reply.send(crashed(message));
    }
    host.commands
}

fn crashed(message: String) -> TurnOutcome {
    TurnOutcome {
        stdout: StreamBuffer::new(Stream::Stdout, Some(0)),
        stderr: StreamBuffer::new(Stream::Stderr, Some(0)),
        ending: TurnEnding::Faulted(Fault::Crashed(message)),
        denied: false,
    }
}

impl Host {
    /// wasmtime-wasi's context, for the linker's projection.
    pub fn wasi(&mut self) -> &mut WasiP1Ctx {
        &mut self.wasi
    }
}
