//! One runtime's thread: it owns the isolate, starts each turn as it
//! arrives, drives deno_core's event loop, and answers each turn when its
//! promise settles, its deadline passes, its abort fires or its limits bite.
//!
//! Turns run concurrently in the one event loop: a program's turn that
//! triggers a function this same runtime published gets that function's
//! `Invoke` turn run beside it, instead of waiting behind it (the handle
//! serializes programs; invokes are never held back).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use code_runner_core::caps::{Stream, StreamBuffer};
use code_runner_core::{
    Completion, Fault, RuntimeOptions, Task, TurnEnding, TurnOutcome, TurnSpec,
};
use deno_core::PollEventLoopOptions;
use tokio::sync::{mpsc, oneshot};

mod ending;
pub mod replay;

use crate::files::{FilesLimits, Scratch};
use crate::isolate::{self, Isolate, IsolateLimits};
use crate::ops::MAX_TRANSFER_BYTES;
use crate::state::{Io, SharedIo, TurnIo};
use crate::turn::{self, Internal, InternalArg, Launch, Settled, Turn, capped};
use crate::watchdog::{TICK, Watch};

/// A request to the runtime thread.
pub enum Command {
    /// Run one turn and answer on the oneshot.
    Turn(TurnSpec, oneshot::Sender<TurnOutcome>),
    /// Write a run's files into the scratch directory, within its quotas.
    PutFiles(
        Vec<code_runner_core::files::InputFile>,
        oneshot::Sender<Result<(), crate::files::FilesError>>,
    ),
    /// Make a package set importable in this runtime, now and after an
    /// isolate is replaced.
    AddPackages(Arc<crate::packages::PackageSet>, oneshot::Sender<()>),
    /// Keep a turn ledger from now on.
    Record(code_runner_core::LedgerOptions, oneshot::Sender<()>),
    /// The ledger's sections, or why there are none.
    Ledger(oneshot::Sender<Result<code_runner_core::SnapshotSections, String>>),
    /// Replay the ledger the runtime booted with, within this long, then go live.
    Replay(Duration, oneshot::Sender<Result<replay::Replayed, String>>),
}

/// Everything a runtime thread needs.
pub struct Boot {
    /// The startup snapshot.
    pub snapshot: &'static [u8],
    /// Per-runtime limits and the scratch directory.
    pub options: RuntimeOptions,
    /// The binding namespace that also gets `files`.
    pub files_namespace: Option<String>,
    /// Whether programs and handler sources are TypeScript, stripped before compiling.
    pub typescript: bool,
    /// The package sets bare specifiers resolve in: the operator's, then
    /// the ones `install` added.
    pub packages: Vec<Arc<crate::packages::PackageSet>>,
    /// Where binding calls run.
    pub host: tokio::runtime::Handle,
    /// This runtime's side of the watchdog.
    pub watch: Arc<Watch>,
    /// A ledger to replay before the runtime goes live (a restore).
    pub replay: Option<crate::ledger::Book>,
}

/// The thread's body: boot, report readiness, serve turns until closed,
/// then report `stopped` (no guest code will run again, the scratch files
/// are gone) before disposing of the isolate, so a closer need not wait for that.
pub fn thread_main(
    boot: Boot,
    commands: mpsc::Receiver<Command>,
    ready: oneshot::Sender<Result<(), String>>,
    stopped: oneshot::Sender<()>,
) {
    // Timers only: guest code has no sockets, so no I/O driver (and its descriptors).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            let _ = ready.send(Err(format!("cannot start the runtime's event loop: {err}")));
            return;
        }
    };
    runtime.block_on(async move {
        let mut engine = match Engine::boot(boot) {
            Ok(engine) => engine,
            Err(message) => {
                let _ = ready.send(Err(message));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let mut commands = commands;
        let mut tick: Option<Pin<Box<tokio::time::Sleep>>> = None;
        std::future::poll_fn(|cx| engine.poll(cx, &mut commands, &mut tick)).await;
        engine.shutdown(stopped);
    });
}

struct Engine {
    boot: Boot,
    isolate: Option<Isolate>,
    io: SharedIo,
    turns: Vec<Turn>,
    next_marker: u32,
    generation: u64,
    installed: Option<String>,
    /// The largest result built on the host: `max_result_bytes`, at most
    /// [`MAX_TRANSFER_BYTES`](crate::ops::MAX_TRANSFER_BYTES).
    result_limit: u64,
    /// The ledger's sources as the isolate's bootstrap has them.
    js_ledger: replay::JsLedger,
    /// A replay under way.
    replaying: Option<replay::ReplayRun>,
    /// A seed `Math.random` takes before the next turn (a fork's).
    reseed: Option<[u32; 4]>,
}

impl Engine {
    fn boot(mut boot: Boot) -> Result<Engine, String> {
        let limits = FilesLimits {
            max_bytes: boot.options.scratch_mb.map(|mb| mb.saturating_mul(1 << 20)),
            max_files: boot.options.scratch_files,
            read_only: boot.options.read_only,
        };
        let scratch = Scratch::open(&boot.options.work_dir, limits).map_err(|err| {
            format!(
                "cannot create the scratch directory {}: {err}",
                boot.options.work_dir.display()
            )
        })?;
        let io = Io::new(
            boot.host.clone(),
            scratch,
            boot.watch.clone(),
            crate::state::max_transfer_in(boot.options.heap_mb),
        );
        io.borrow_mut().ledger = replay::ledger_at_boot(&mut boot);
        let result_limit = boot
            .options
            .max_result_bytes
            .map_or(MAX_TRANSFER_BYTES, |cap| {
                (cap as u64).min(MAX_TRANSFER_BYTES)
            });
        let mut engine = Engine {
            boot,
            isolate: None,
            io,
            turns: Vec::new(),
            next_marker: 1,
            generation: 0,
            installed: None,
            result_limit,
            js_ledger: replay::JsLedger::default(),
            replaying: None,
            reseed: None,
        };
        engine.ensure_isolate()?;
        Ok(engine)
    }

    fn ensure_isolate(&mut self) -> Result<&mut Isolate, String> {
        if self.isolate.is_none() {
            let limits = IsolateLimits {
                heap_mb: self.boot.options.heap_mb,
                external_mb: self.boot.options.external_mb,
            };
            self.boot.watch.reset_heap();
            let isolate = isolate::boot(
                self.boot.snapshot,
                limits,
                &self.io,
                &self.boot.watch,
                self.boot.packages.clone(),
            )?;
            self.installed = None;
            self.js_ledger = replay::JsLedger::default();
            self.isolate = Some(isolate);
        }
        self.isolate
            .as_mut()
            .ok_or_else(|| "no isolate".to_string())
    }

    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        commands: &mut mpsc::Receiver<Command>,
        tick: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    ) -> Poll<()> {
        loop {
            let mut closed = false;
            while let Poll::Ready(command) = commands.poll_recv(cx) {
                match command {
                    Some(Command::Turn(spec, reply)) => self.start(spec, reply),
                    Some(Command::PutFiles(files, reply)) => {
                        let mut io = self.io.borrow_mut();
                        let put = io.scratch.put(&files);
                        if let (Ok(()), Some(ledger)) = (&put, io.ledger.as_mut()) {
                            ledger.files(&files);
                        }
                        let _ = reply.send(put);
                    }
                    Some(Command::AddPackages(set, reply)) => {
                        if let Some(isolate) = self.isolate.as_ref() {
                            isolate.loader.add_packages(set.clone());
                        }
                        self.boot.packages.push(set);
                        self.spoil_ledger("packages were installed into it (install), and its ledger does not hold them");
                        let _ = reply.send(());
                    }
                    Some(Command::Record(options, reply)) => {
                        self.record(options);
                        let _ = reply.send(());
                    }
                    Some(Command::Ledger(reply)) => {
                        let _ = reply.send(self.ledger_sections());
                    }
                    Some(Command::Replay(budget, reply)) => self.replay(budget, reply),
                    None => {
                        closed = true;
                        break;
                    }
                }
            }
            if closed || self.boot.watch.is_closing() {
                self.end_all(|_| Fault::Aborted);
                return Poll::Ready(());
            }
            self.replay_progress();
            if self.turns.is_empty() {
                // A condemned isolate goes now, not when the next turn comes:
                // its heap is past its cap.
                self.handle_stop();
                return Poll::Pending;
            }
            if self.turns.iter().any(|t| t.clock.stood() != t.armed_stood) {
                // A turn's clock ran again after standing still: its
                // deadline moved, and the watchdog hears of it before any
                // of the turn's JavaScript runs again (the call that waited
                // resolves in the poll below).
                for turn in &mut self.turns {
                    turn.armed_stood = turn.clock.stood();
                }
                self.rearm();
            }
            if let Some(isolate) = self.isolate.as_mut() {
                let polled = {
                    let _js = self.boot.watch.enter();
                    isolate
                        .runtime
                        .poll_event_loop(cx, PollEventLoopOptions::default())
                };
                let stopped = self.handle_stop();
                if let Poll::Ready(Err(err)) = polled
                    && !stopped
                {
                    self.fail_all(&capped(format!("Uncaught {err}")));
                }
            }
            let before = self.turns.len();
            self.settle(Instant::now());
            if self.turns.len() != before {
                continue;
            }
            let Some(earliest) = self
                .turns
                .iter()
                .filter(|t| !t.clock.is_paused())
                .map(Turn::due)
                .min()
            else {
                if self.turns.is_empty() {
                    continue;
                }
                // Every turn waits for a person: nothing is due until a
                // call resolves (its op wakes this thread; an abort ends
                // the wait, which resolves it too). No tick polls the idle
                // isolate meanwhile: the watchdog, still armed with the
                // deadline as it was, would take a poll past it for
                // JavaScript running late.
                return Poll::Pending;
            };
            let wake = earliest.min(Instant::now() + TICK);
            let sleep = tick.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(wake.into())));
            sleep.as_mut().reset(wake.into());
            if sleep.as_mut().poll(cx).is_ready() {
                continue;
            }
            return Poll::Pending;
        }
    }

    /// Starts one turn: its output buffers, its bindings, its JavaScript.
    fn start(&mut self, spec: TurnSpec, reply: oneshot::Sender<TurnOutcome>) {
        self.start_with(spec, reply, None);
    }

    /// Starts one turn; `install`: the binding globals' spec to install
    /// instead of the one `spec.bindings` makes (a replayed turn's).
    fn start_with(
        &mut self,
        spec: TurnSpec,
        reply: oneshot::Sender<TurnOutcome>,
        install: Option<String>,
    ) {
        let cap = spec.max_stream_bytes;
        // A stop recorded since the last poll (a condemned heap above all)
        // is handled first: a new turn never starts in a condemned isolate.
        self.handle_stop();
        if let Err(message) = self.ensure_isolate() {
            let _ = reply.send(outcome(cap, TurnEnding::Faulted(Fault::Crashed(message))));
            return;
        }
        let marker = self.next_marker;
        self.next_marker = self.next_marker.wrapping_add(1).max(1);
        let deadline = Instant::now() + spec.timeout;
        let has_value = !matches!(spec.task, Task::Define { .. });
        let payload_json = match &spec.task {
            Task::Invoke { payload, .. } => {
                let text = serde_json::to_string(payload).unwrap_or_else(|_| "null".into());
                if let Err(message) = self.admit_payload(text.len()) {
                    let _ = reply.send(outcome(
                        cap,
                        TurnEnding::Faulted(Fault::ResourceExhausted(message)),
                    ));
                    return;
                }
                Some(text)
            }
            _ => None,
        };
        let payload_bytes = payload_json.as_ref().map_or(0, String::len);
        let installing = install.unwrap_or_else(|| {
            turn::bindings_spec(&spec.bindings, self.boot.files_namespace.as_deref())
        });
        if let Some(ledger) = self.io.borrow_mut().ledger.as_mut() {
            ledger.begin_turn(&spec.task, &installing);
        }
        let clock = spec.bindings.clock().clone();
        self.io.borrow_mut().turns.insert(
            marker,
            TurnIo {
                stdout: StreamBuffer::with_live(Stream::Stdout, cap, spec.live.clone()),
                stderr: StreamBuffer::with_live(Stream::Stderr, cap, spec.live),
                bindings: spec.bindings,
                deadline,
                uncaught: None,
            },
        );
        self.turns.push(Turn {
            marker,
            promise: None,
            has_value,
            reply,
            deadline,
            budget: spec.timeout,
            clock,
            armed_stood: Duration::ZERO,
            abort: spec.abort,
            payload_bytes,
            cpu_start: code_runner_core::thread_cpu_ns(),
        });
        if let Some(isolate) = self.isolate.as_mut() {
            isolate.heap_peak.reset(isolate.runtime.v8_isolate());
        }
        self.rearm();
        let Some(isolate) = self.isolate.as_mut() else {
            return;
        };
        let launched = {
            let _js = self.boot.watch.enter();
            replay::sync_sources(isolate, &self.io, &mut self.js_ledger, &mut self.reseed);
            if self.installed.as_deref() != Some(installing.as_str()) {
                turn::call_internal(
                    isolate,
                    Internal::Install,
                    InternalArg::Text(installing.clone()),
                );
                self.installed = Some(installing);
            }
            turn::launch(
                isolate,
                marker,
                spec.task,
                payload_json,
                self.boot.typescript,
            )
        };
        if self.handle_stop() {
            return;
        }
        match launched {
            Launch::Running(promise) => {
                if let Some(turn) = self.turns.iter_mut().find(|t| t.marker == marker) {
                    turn.promise = Some(promise);
                }
            }
            Launch::Failed(text) => self.fail(marker, text),
            Launch::Terminated => self.finish(
                marker,
                TurnEnding::Faulted(Fault::Crashed(
                    "the isolate stopped while starting the turn".into(),
                )),
            ),
        }
    }

    /// Whether a handler's payload of `bytes` bytes of JSON may enter the
    /// isolate: at most [`max_transfer_in`](crate::state::max_transfer_in)
    /// each, and twice that for every call in flight together, so calls
    /// carrying large payloads are refused before they fill the heap that
    /// the other calls on this runtime share.
    fn admit_payload(&self, bytes: usize) -> Result<(), String> {
        let single = self.io.borrow().max_transfer_in;
        if bytes > single {
            return Err(format!(
                "the payload is {bytes} bytes of JSON; a node handler takes at most {single} (a sixteenth of heap_mb)"
            ));
        }
        let held: usize = self.turns.iter().map(|t| t.payload_bytes).sum();
        let all = single.saturating_mul(2);
        if held.saturating_add(bytes) > all {
            return Err(format!(
                "the calls in flight on this runtime already carry {held} bytes of payload, and this one {bytes}; together they may carry {all} (an eighth of heap_mb): retry once they have answered"
            ));
        }
        Ok(())
    }

    /// Answers every turn that is over: settled, uncaught, out of time or aborted.
    fn settle(&mut self, now: Instant) {
        let mut index = 0;
        while index < self.turns.len() {
            let marker = self.turns[index].marker;
            let uncaught = self
                .io
                .borrow_mut()
                .turns
                .get_mut(&marker)
                .and_then(|io| io.uncaught.take());
            let (diverged, held) = self.replay_hold();
            if diverged {
                self.finish(
                    marker,
                    TurnEnding::Faulted(Fault::Crashed("restore_diverged".into())),
                );
                continue;
            }
            let ending = if let Some(text) = uncaught {
                Some(TurnEnding::Exited {
                    exit_code: 1,
                    completion: Completion::Absent,
                    exception: Some(text),
                })
            } else {
                match self.isolate.as_mut().and_then(|isolate| {
                    let _js = self.boot.watch.enter();
                    turn::settled(isolate, &self.turns[index], self.result_limit)
                }) {
                    Some(Settled::Threw(text)) => {
                        if let Some(io) = self.io.borrow_mut().turns.get_mut(&marker) {
                            io.stderr.push(text.as_bytes());
                            io.stderr.push(b"\n");
                        }
                        Settled::Threw(text).ending()
                    }
                    // A replayed turn that settled before the ledger's
                    // answers and timers of it were all handed over goes on.
                    Some(_) if held => {
                        let mut io = self.io.borrow_mut();
                        let io = &mut *io;
                        if let Some(ledger) = io.ledger.as_mut() {
                            ledger.check_stalled(|call| io.calls.contains_key(&call));
                        }
                        None
                    }
                    Some(settled) => settled.ending(),
                    None => None,
                }
            };
            if self.handle_stop() {
                return;
            }
            let turn = &self.turns[index];
            let ending = ending.or_else(|| {
                if turn.past(now) {
                    Some(TurnEnding::Faulted(Fault::Timeout {
                        budget: turn.budget,
                    }))
                } else if turn.abort.is_aborted() {
                    Some(TurnEnding::Faulted(Fault::Aborted))
                } else {
                    None
                }
            });
            match ending {
                Some(ending) => self.finish(marker, ending),
                None => index += 1,
            }
        }
    }

    /// Tells the watchdog about the turns in flight now.
    fn rearm(&mut self) {
        let deadline = self.turns.iter().map(Turn::due).min();
        let turns = if self.turns.len() > 1 {
            self.turns.iter().map(|t| (t.marker, t.due())).collect()
        } else {
            Vec::new()
        };
        self.boot.watch.set_turn_deadlines(turns);
        let aborts = self.turns.iter().map(|t| t.abort.clone()).collect();
        self.generation = self.boot.watch.set_turns(deadline, aborts);
    }

    /// Answers what is left, deletes the scratch files, reports `stopped`, then
    /// disposes of the isolate, all on this thread.
    fn shutdown(mut self, stopped: oneshot::Sender<()>) {
        self.end_all(|_| Fault::Aborted);
        self.io.borrow_mut().scratch.clear();
        let _ = stopped.send(());
        self.boot.watch.set_isolate(None);
        self.isolate = None;
    }
}

/// An outcome with no output.
pub fn outcome(cap: Option<usize>, ending: TurnEnding) -> TurnOutcome {
    TurnOutcome {
        usage: Default::default(),
        stdout: StreamBuffer::new(Stream::Stdout, cap),
        stderr: StreamBuffer::new(Stream::Stderr, cap),
        ending,
        denied: false,
        interpreter_reset: false,
        went_back: false,
    }
}
