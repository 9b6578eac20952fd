//! The sandbox process's side: read the worker's [`Init`], confine, load the
//! engines, then serve frames until the worker closes the socket.
//!
//! The child holds runtimes by the worker's handles and knows nothing else:
//! no runtime ids, no configuration beyond what loading needs, no
//! functions (a binding is a name; calling it is a frame to the worker).

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use code_runner_core::caps::{LiveOutput, Stream};
use code_runner_core::{
    AbortSignal, BindingError, BindingNamespace, Bindings, Engine, Fault, Lang, Runtime, TurnClock,
    TurnEnding, TurnImages, TurnOutcome, TurnSpec,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::confine::{self, SOCKET_FD};
use crate::protocol::Report;
use crate::protocol::{
    self, ErrorWire, Frame, FromChild, Init, MAX_PARENT_FRAME_BYTES, NamespaceWire, OutcomeWire,
    ToChild,
};

/// The engines a sandbox process hosts, as the worker's loader made them:
/// each language's engine, or why it is unavailable.
pub type LoadedEngines = Vec<(Lang, Result<Arc<dyn Engine>, String>)>;

/// Runs a sandbox process on the socket at descriptor 3: reads the
/// [`Init`], confines the process (first step on this, its only thread,
/// calling `open_early` once the descriptors are closed and before
/// Landlock), starts the async runtime, calls `load` inside it, applies
/// seccomp to every thread, reports `Ready` and serves. Returns the
/// process's exit status (0 when the worker closed the socket).
pub fn main(
    open_early: impl FnOnce() -> Result<String, String>,
    load: impl FnOnce(&Init) -> LoadedEngines,
) -> i32 {
    // SAFETY: the worker passes the socket as descriptor 3 and nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(SOCKET_FD) };
    let mut stream = std::os::unix::net::UnixStream::from(socket);
    let init = match read_init(&mut stream) {
        Ok(init) => init,
        Err(why) => {
            tracing::error!("sandbox process: no init frame: {why}");
            return 2;
        }
    };
    confine::ignore_file_size_signal();
    let (mut report, tracking) = confine::before_threads(&init, open_early);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("sandbox process: no async runtime: {err}");
            return 2;
        }
    };
    runtime.block_on(async move {
        let engines = load(&init);
        confine::seccomp(&mut report, &tracking);
        if stream.set_nonblocking(true).is_err() {
            return 2;
        }
        let Ok(stream) = tokio::net::UnixStream::from_std(stream) else {
            return 2;
        };
        serve(stream, engines, report, init.probe.then_some(tracking)).await;
        0
    })
}

fn read_init(stream: &mut std::os::unix::net::UnixStream) -> Result<Init, String> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(|e| e.to_string())?;
    let len = u32::from_le_bytes(len) as usize;
    if len > 1 << 20 {
        return Err(format!("an init frame of {len} bytes"));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).map_err(|e| e.to_string())?;
    protocol::decode::<Init>(&body)
        .map(|frame| frame.header)
        .map_err(|err| format!("{err:?}"))
}

/// What the serving tasks share.
struct State {
    engines: LoadedEngines,
    runtimes: Mutex<HashMap<u64, Arc<dyn Runtime>>>,
    aborts: Mutex<HashMap<u64, AbortSignal>>,
    /// Each turn's clock, which the worker stops while a call of the turn
    /// waits for a person.
    clocks: Mutex<HashMap<u64, TurnClock>>,
    calls: Mutex<HashMap<u64, oneshot::Sender<Result<Value, BindingError>>>>,
    next_call: AtomicU64,
    out: mpsc::UnboundedSender<Outgoing>,
}

/// An encoded frame, and who waits until it is written to the socket.
type Outgoing = (Vec<u8>, Option<oneshot::Sender<()>>);

impl State {
    fn send(&self, frame: Frame<FromChild>) {
        let _ = self.out.send((frame.encode(), None));
    }

    /// Sends `frame` and waits until it is in the socket, where the worker
    /// reads it even if this process dies the next instant.
    async fn send_written(&self, frame: Frame<FromChild>) {
        let (tx, rx) = oneshot::channel();
        if self.out.send((frame.encode(), Some(tx))).is_ok() {
            let _ = rx.await;
        }
    }
}

async fn serve(
    stream: tokio::net::UnixStream,
    engines: LoadedEngines,
    report: Report,
    probe: Option<confine::PageTracking>,
) {
    let (mut reader, mut writer) = stream.into_split();
    let (out, mut frames) = mpsc::unbounded_channel::<Outgoing>();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Some((bytes, written)) = frames.recv().await {
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
            if let Some(written) = written {
                let _ = written.send(());
            }
        }
    });
    let state = Arc::new(State {
        engines,
        runtimes: Mutex::default(),
        aborts: Mutex::default(),
        clocks: Mutex::default(),
        calls: Mutex::default(),
        next_call: AtomicU64::new(1),
        out,
    });
    state.send(Frame::new(FromChild::Ready { report }));
    if let Some(tracking) = probe {
        state.send(Frame::new(FromChild::Probe {
            results: crate::probe::probe_confinement(&tracking),
        }));
    }
    loop {
        let frame =
            match protocol::read_frame::<ToChild, _>(&mut reader, MAX_PARENT_FRAME_BYTES).await {
                Ok(frame) => frame,
                // The worker went away (or broke the protocol): nothing is left to serve.
                Err(_) => std::process::exit(0),
            };
        match frame.header {
            ToChild::PutFiles { id, runtime, paths } => {
                put_files(&state, id, runtime, paths, frame.blobs)
            }
            header => handle(&state, header),
        }
    }
}

fn handle(state: &Arc<State>, message: ToChild) {
    match message {
        ToChild::Spawn { id, lang, options } => {
            let state = state.clone();
            tokio::spawn(async move {
                let engine = state.engines.iter().find(|(l, _)| *l == lang);
                let result = match engine {
                    Some((_, Ok(engine))) => engine.spawn(options).await,
                    Some((_, Err(why))) => Err(code_runner_core::RunnerError::engine(why.clone())),
                    None => Err(code_runner_core::RunnerError::engine(format!(
                        "no {lang} engine in this sandbox process"
                    ))),
                };
                let error = match result {
                    Ok(runtime) => {
                        lock(&state.runtimes).insert(id, runtime);
                        None
                    }
                    Err(err) => Some(ErrorWire::from(&err)),
                };
                state.send(Frame::new(FromChild::Spawned { id, error }));
            });
        }
        ToChild::Run {
            turn,
            runtime,
            task,
            timeout_ms,
            max_stream_bytes,
            bindings,
            live,
            images,
        } => {
            let state = state.clone();
            tokio::spawn(async move {
                let (outcome, shots) = run(
                    &state,
                    turn,
                    runtime,
                    TurnParts {
                        task: task.into(),
                        timeout_ms,
                        max_stream_bytes,
                        bindings,
                        live,
                        images,
                    },
                )
                .await;
                state.send(outcome_frame(turn, &outcome, shots));
            });
        }
        // `serve` hands this one its blobs; without them no file is written.
        ToChild::PutFiles { id, runtime, paths } => {
            put_files(state, id, runtime, paths, Vec::new())
        }
        ToChild::AddPackages { id, runtime, dir } => {
            let state = state.clone();
            tokio::spawn(async move {
                let found = lock(&state.runtimes).get(&runtime).cloned();
                let added = match found {
                    Some(found) => found.add_packages(dir).await,
                    None => Err(code_runner_core::RunnerError::engine(format!(
                        "no runtime {runtime} in this sandbox process"
                    ))),
                };
                let added = added.map_err(|err| ErrorWire::from(&err));
                state.send(Frame::new(FromChild::PackagesAdded { id, added }));
            });
        }
        ToChild::Abort { turn } => {
            if let Some(signal) = lock(&state.aborts).get(&turn) {
                signal.abort();
            }
        }
        ToChild::Clock { turn, paused } => {
            if let Some(clock) = lock(&state.clocks).get(&turn) {
                if paused {
                    clock.pause();
                } else {
                    clock.resume();
                }
            }
        }
        ToChild::Close { runtime } => {
            let state = state.clone();
            tokio::spawn(async move {
                let found = lock(&state.runtimes).remove(&runtime);
                if let Some(found) = found {
                    found.close().await;
                }
                state.send(Frame::new(FromChild::Closed { runtime }));
            });
        }
        ToChild::Reply { call, answer } => {
            if let Some(waiter) = lock(&state.calls).remove(&call) {
                let _ = waiter.send(answer.map_err(BindingError::from));
            }
        }
    }
}

/// Writes a run's files into one of this process's runtimes and answers `FilesPut`.
fn put_files(state: &Arc<State>, id: u64, runtime: u64, paths: Vec<String>, blobs: Vec<Vec<u8>>) {
    let state = state.clone();
    tokio::spawn(async move {
        let found = lock(&state.runtimes).get(&runtime).cloned();
        let written = match found {
            _ if paths.len() != blobs.len() => Err(code_runner_core::RunnerError::engine(
                "PutFiles: as many blobs as paths expected",
            )),
            Some(found) => {
                let files = paths
                    .into_iter()
                    .zip(blobs)
                    .map(|(path, bytes)| code_runner_core::files::InputFile { path, bytes })
                    .collect();
                found.put_files(files).await
            }
            None => Err(code_runner_core::RunnerError::engine(format!(
                "no runtime {runtime} in this sandbox process"
            ))),
        };
        let error = written.err().map(|err| ErrorWire::from(&err));
        state.send(Frame::new(FromChild::FilesPut { id, error }));
    });
}

struct TurnParts {
    task: code_runner_core::Task,
    timeout_ms: u64,
    max_stream_bytes: Option<usize>,
    bindings: Vec<NamespaceWire>,
    live: bool,
    images: bool,
}

async fn run(
    state: &Arc<State>,
    turn: u64,
    runtime: u64,
    parts: TurnParts,
) -> (TurnOutcome, TurnImages) {
    let cap = parts.max_stream_bytes;
    let fault = |fault: Fault| {
        (
            TurnOutcome {
                stdout: code_runner_core::caps::StreamBuffer::new(Stream::Stdout, cap),
                stderr: code_runner_core::caps::StreamBuffer::new(Stream::Stderr, cap),
                ending: TurnEnding::Faulted(fault),
                denied: false,
                usage: Default::default(),
                interpreter_reset: false,
                went_back: false,
            },
            TurnImages::default(),
        )
    };
    let Some(target) = lock(&state.runtimes).get(&runtime).cloned() else {
        return fault(Fault::Aborted);
    };
    let bindings = match forwarding_bindings(state, turn, parts.bindings) {
        Ok(bindings) => bindings,
        Err(err) => return fault(Fault::Protocol(err.message)),
    };
    let clock = TurnClock::new();
    let bindings = bindings.with_clock(clock.clone());
    lock(&state.clocks).insert(turn, clock);
    let abort = AbortSignal::new();
    lock(&state.aborts).insert(turn, abort.clone());
    let live = parts.live.then(|| {
        let out = state.out.clone();
        LiveOutput::new(move |stream, bytes| {
            let frame = Frame {
                header: FromChild::Live {
                    turn,
                    stderr: stream == Stream::Stderr,
                },
                blobs: vec![bytes.to_vec()],
            };
            let _ = out.send((frame.encode(), None));
        })
    });
    let spec = TurnSpec {
        task: parts.task,
        timeout: std::time::Duration::from_millis(parts.timeout_ms),
        bindings,
        max_stream_bytes: cap,
        abort,
        live,
    };
    // Before any of the code runs: without this frame, the worker knows
    // that a death of this process came before the code (it may run it
    // again elsewhere); every frame the code causes comes after it.
    state
        .send_written(Frame::new(FromChild::Begun { turn }))
        .await;
    let answer = match parts.images {
        true => target.run_with_images(spec).await,
        false => (target.run(spec).await, TurnImages::default()),
    };
    lock(&state.aborts).remove(&turn);
    lock(&state.clocks).remove(&turn);
    answer
}

/// The turn's namespaces with every function a call to the worker.
fn forwarding_bindings(
    state: &Arc<State>,
    turn: u64,
    namespaces: Vec<NamespaceWire>,
) -> Result<Bindings, code_runner_core::RunnerError> {
    let mut built = Vec::with_capacity(namespaces.len());
    for ns in namespaces {
        let mut namespace = BindingNamespace::new(ns.global.clone());
        for name in ns.functions {
            let (state, global, member) = (state.clone(), ns.global.clone(), name.clone());
            namespace = namespace.function(name, move |args, call| {
                let (state, global, member) = (state.clone(), global.clone(), member.clone());
                async move {
                    let id = state.next_call.fetch_add(1, Ordering::Relaxed);
                    let (tx, rx) = oneshot::channel();
                    lock(&state.calls).insert(id, tx);
                    let remaining = call.deadline.saturating_duration_since(Instant::now());
                    state.send(Frame::new(FromChild::Call {
                        call: id,
                        turn,
                        global,
                        member,
                        args,
                        remaining_ms: u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX),
                    }));
                    let mut unanswered = Unanswered {
                        state: state.clone(),
                        call: Some(id),
                    };
                    let answer = rx
                        .await
                        .unwrap_or_else(|_| Err(BindingError::message("the worker went away")));
                    unanswered.call = None;
                    answer
                }
            });
        }
        namespace.registrars = ns.registrars.into_iter().collect();
        namespace.paths = ns.paths.into_iter().collect();
        namespace.values = ns.values;
        if let Some((name, property)) = ns.error_class {
            namespace = namespace.error_class(name, property);
        }
        built.push(namespace);
    }
    Bindings::new(built)
}

/// A binding call forwarded to the worker and not yet answered: dropped
/// (the engine gave the call up), it tells the worker to drop it too.
struct Unanswered {
    state: Arc<State>,
    call: Option<u64>,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(call) = self.call {
            lock(&self.state.calls).remove(&call);
            self.state.send(Frame::new(FromChild::Cancel { call }));
        }
    }
}

fn outcome_frame(turn: u64, outcome: &TurnOutcome, images: TurnImages) -> Frame<FromChild> {
    let (out_head, out_tail, out_total) = outcome.stdout.parts();
    let (err_head, err_tail, err_total) = outcome.stderr.parts();
    Frame {
        header: FromChild::Outcome {
            turn,
            outcome: OutcomeWire {
                stdout_total: out_total,
                stderr_total: err_total,
                ending: (&outcome.ending).into(),
                denied: outcome.denied,
                cpu_ns: outcome.usage.cpu_ns,
                peak_memory_bytes: outcome.usage.peak_memory_bytes,
                images: images
                    .images
                    .into_iter()
                    .map(|i| (i.mime_type, i.data))
                    .collect(),
                images_omitted: images.omitted,
                interpreter_reset: outcome.interpreter_reset,
            },
        },
        blobs: vec![out_head.to_vec(), out_tail, err_head.to_vec(), err_tail],
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
