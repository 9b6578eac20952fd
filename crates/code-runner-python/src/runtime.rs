//! A python runtime: an engine thread (from [`crate::THREADS`], its own for
//! the runtime's life) owning one wasmtime `Store` (the
//! lean flavour's `session`, the data flavour's `data::session`), started by
//! [`PythonEngine::boot`], and [`PythonRuntime`], the handle the seam holds:
//! turns go to the thread one at a time over a channel; closing drops the
//! channel and awaits the thread's exit.

use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use code_runner_core::files::InputFile;
use code_runner_core::{
    BoxFuture, Fault, Lang, RunnerError, Runtime, RuntimeOptions, TurnEnding, TurnImages,
    TurnOutcome, TurnSpec,
    caps::{Stream, StreamBuffer},
};

use crate::PythonEngine;
use crate::control::{Boot, Command, Link};
use crate::ending::crashed;
use crate::session;

impl PythonEngine {
    /// Starts a runtime on its own thread and waits until its instance is ready.
    pub(crate) async fn boot(
        &self,
        options: RuntimeOptions,
    ) -> Result<Arc<dyn Runtime>, RunnerError> {
        self.boot_with(options, None).await
    }

    /// Starts a runtime whose first instance takes a snapshot's state:
    /// `/work` written first (its quota recounts it), then memory and clock.
    pub(crate) async fn restore(
        &self,
        options: RuntimeOptions,
        sections: crate::data::state::Sections,
    ) -> Result<Arc<dyn Runtime>, RunnerError> {
        if !matches!(self.shared.flavour, crate::Flavour::Data(_)) {
            return Err(snapshot_unsupported());
        }
        code_runner_core::create_private_dir(&options.work_dir)
            .map_err(|err| RunnerError::engine(format!("cannot create /work: {err}")))?;
        crate::data::state::restore_work(&sections, &options.work_dir)?;
        self.boot_with(options, Some(Arc::new(sections))).await
    }

    /// The image a snapshot of this engine's runtimes belongs to; `None`
    /// for the lean flavour, which cannot be snapshotted.
    pub fn snapshot_image(&self) -> Option<String> {
        match &self.shared.flavour {
            crate::Flavour::Data(loaded) => Some(loaded.image_key.clone()),
            crate::Flavour::Lean { .. } => None,
        }
    }

    async fn boot_with(
        &self,
        options: RuntimeOptions,
        restore: Option<Arc<crate::data::state::Sections>>,
    ) -> Result<Arc<dyn Runtime>, RunnerError> {
        if options.memory_mb > self.shared.limits.max_memory_mb {
            return Err(RunnerError::new(
                code_runner_core::ErrorCode::ResourceExhausted,
                format!(
                    "memory_mb {} is above this engine's {} MiB",
                    options.memory_mb, self.shared.limits.max_memory_mb
                ),
            ));
        }
        code_runner_core::create_private_dir(&options.work_dir).map_err(|err| {
            RunnerError::engine(format!(
                "cannot create {}: {err}",
                options.work_dir.display()
            ))
        })?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| RunnerError::engine("the python engine needs a tokio runtime"))?;
        let slot = self.shared.claim()?;
        let link = Arc::new(Link::default());
        let (commands, receiver) = std::sync::mpsc::channel();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (exited_tx, exited_rx) = tokio::sync::oneshot::channel::<()>();
        let boot = Boot {
            shared: self.shared.clone(),
            options,
            link: link.clone(),
            runtime,
            restore,
            slot,
        };
        crate::THREADS
            .spawn(Box::new(move || {
                thread_main(boot, receiver, ready_tx);
                let _ = exited_tx.send(());
            }))
            .map_err(|err| RunnerError::engine(format!("cannot start a runtime thread: {err}")))?;
        let runtime = PythonRuntime {
            commands: Mutex::new(Some(commands)),
            link,
            turn_lock: tokio::sync::Mutex::new(()),
            exited: tokio::sync::Mutex::new(Some(exited_rx)),
        };
        match ready_rx.await {
            Ok(Ok(())) => Ok(Arc::new(runtime)),
            Ok(Err(message)) => {
                runtime.close().await;
                Err(RunnerError::engine(format!(
                    "python failed to start: {message}"
                )))
            }
            Err(_) => Err(RunnerError::engine(
                "python runtime thread ended during start-up",
            )),
        }
    }
}

/// A live python runtime: a handle to its thread.
struct PythonRuntime {
    commands: Mutex<Option<std::sync::mpsc::Sender<Command>>>,
    link: Arc<Link>,
    turn_lock: tokio::sync::Mutex<()>,
    exited: tokio::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
}

impl PythonRuntime {
    async fn turn(&self, spec: TurnSpec) -> (TurnOutcome, TurnImages) {
        let _serial = self.turn_lock.lock().await;
        let cap = spec.max_stream_bytes;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = {
            let commands = self.commands.lock().unwrap_or_else(|p| p.into_inner());
            commands
                .as_ref()
                .is_some_and(|tx| tx.send(Command::Turn(spec, reply)).is_ok())
        };
        let fault = if !sent {
            Fault::Aborted
        } else {
            match answer.await {
                Ok(outcome) => return outcome,
                Err(_) => Fault::Crashed("the runtime thread ended mid-turn".into()),
            }
        };
        let outcome = TurnOutcome {
            usage: Default::default(),
            stdout: StreamBuffer::new(Stream::Stdout, cap),
            stderr: StreamBuffer::new(Stream::Stderr, cap),
            ending: TurnEnding::Faulted(fault),
            denied: false,
            interpreter_reset: false,
            went_back: false,
        };
        (outcome, TurnImages::default())
    }

    async fn shutdown(&self) {
        self.link
            .closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(exited) = self.exited.lock().await.take() {
            let _ = exited.await;
        }
    }
}

impl Runtime for PythonRuntime {
    fn lang(&self) -> Lang {
        Lang::Python
    }

    fn snapshot(&self) -> BoxFuture<'_, Result<code_runner_core::SnapshotSections, RunnerError>> {
        Box::pin(async move {
            let _serial = self.turn_lock.lock().await;
            let (reply, answer) = tokio::sync::oneshot::channel();
            let sent = {
                let commands = self.commands.lock().unwrap_or_else(|p| p.into_inner());
                commands
                    .as_ref()
                    .is_some_and(|tx| tx.send(Command::Capture(reply)).is_ok())
            };
            let closed = || {
                RunnerError::new(
                    code_runner_core::ErrorCode::Expired,
                    "the runtime was closed",
                )
            };
            if !sent {
                return Err(closed());
            }
            answer.await.map_err(|_| closed())?
        })
    }

    fn run(&self, turn: TurnSpec) -> BoxFuture<'_, TurnOutcome> {
        Box::pin(async move { self.turn(turn).await.0 })
    }

    fn run_with_images(&self, turn: TurnSpec) -> BoxFuture<'_, (TurnOutcome, TurnImages)> {
        Box::pin(self.turn(turn))
    }

    fn put_files(&self, files: Vec<InputFile>) -> BoxFuture<'_, Result<(), RunnerError>> {
        Box::pin(async move {
            if files.is_empty() {
                return Ok(());
            }
            let _serial = self.turn_lock.lock().await;
            let (reply, answer) = tokio::sync::oneshot::channel();
            let sent = {
                let commands = self.commands.lock().unwrap_or_else(|p| p.into_inner());
                commands
                    .as_ref()
                    .is_some_and(|tx| tx.send(Command::PutFiles(files, reply)).is_ok())
            };
            if !sent {
                return Err(RunnerError::new(
                    code_runner_core::ErrorCode::Expired,
                    "the runtime was closed",
                ));
            }
            answer
                .await
                .unwrap_or_else(|_| Err(RunnerError::engine("the runtime thread ended")))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shutdown())
    }
}

impl Drop for PythonRuntime {
    fn drop(&mut self) {
        self.link
            .closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The runtime thread's body: instantiate, serve turns, instantiate again after a death.
pub fn thread_main(
    boot: Boot,
    commands: Receiver<Command>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    match &boot.shared.flavour {
        crate::Flavour::Lean { .. } => {
            let flavour = Flavour {
                instantiate: session::instantiate,
                run: |i, spec| {
                    let (outcome, survivor) = session::run_turn(i, spec);
                    (outcome, TurnImages::default(), survivor)
                },
                put_files: session::put_files,
                capture: |_, _| Err(snapshot_unsupported()),
                apply: |_, _| Err(snapshot_unsupported()),
            };
            serve(boot, commands, ready, flavour)
        }
        crate::Flavour::Data(_) => {
            let flavour = Flavour {
                instantiate: crate::data::session::instantiate,
                run: crate::data::session::run_turn,
                put_files: crate::data::session::put_files,
                capture: data_capture,
                apply: crate::data::state::apply,
            };
            serve(boot, commands, ready, flavour)
        }
    }
}

/// What a flavour's instance does on its thread.
struct Flavour<I> {
    instantiate: fn(&Boot) -> Result<I, String>,
    run: fn(I, TurnSpec) -> (TurnOutcome, TurnImages, Option<I>),
    put_files: PutFiles<I>,
    /// A snapshot's sections of the instance between turns.
    capture: fn(&mut I, &Boot) -> Result<crate::data::state::Sections, RunnerError>,
    /// Puts a snapshot's state into a fresh instance.
    apply: fn(&mut I, &crate::data::state::Sections) -> Result<(), RunnerError>,
}

/// Why a runtime cannot be snapshotted: the lean flavour is a component,
/// whose core state wasmtime does not expose.
fn snapshot_unsupported() -> RunnerError {
    RunnerError::invalid(
        "snapshot_unsupported: only a python runtime of the data interpreter can be snapshotted (the lean interpreter is a component whose core state wasmtime does not expose)",
    )
}

/// The data flavour's capture: the image's page hashes made once per engine
/// (from a fresh instance of the same image), then the instance's state.
fn data_capture(
    instance: &mut crate::data::session::DataInstance,
    boot: &Boot,
) -> Result<crate::data::state::Sections, RunnerError> {
    use crate::data::state;
    state::check_quiet(instance)?;
    let crate::Flavour::Data(loaded) = &boot.shared.flavour else {
        return Err(snapshot_unsupported());
    };
    let pristine = match loaded.pristine.get() {
        Some(hashes) => hashes,
        None => {
            // One at a time: the pool keeps room for one fresh instance.
            let _hashing = loaded.hashing.lock().unwrap_or_else(|p| p.into_inner());
            match loaded.pristine.get() {
                Some(hashes) => hashes,
                None => {
                    let mut fresh =
                        crate::data::session::instantiate(boot).map_err(RunnerError::engine)?;
                    let hashes = state::page_hashes(fresh.memory_bytes());
                    drop(fresh);
                    loaded.pristine.get_or_init(|| hashes)
                }
            }
        }
    };
    state::capture(
        instance,
        pristine,
        &boot.options.work_dir,
        boot.options.memory_mb,
    )
}

/// A runtime's state put back from its checkpoint: `/work` emptied and
/// written as it was, then a fresh instance given the memory.
fn go_back<I>(
    boot: &Boot,
    saved: &crate::data::state::Sections,
    instantiate: fn(&Boot) -> Result<I, String>,
    apply: fn(&mut I, &crate::data::state::Sections) -> Result<(), RunnerError>,
) -> Result<I, RunnerError> {
    let work = &boot.options.work_dir;
    crate::data::state::clear_work(work)?;
    crate::data::state::restore_work(saved, work)?;
    let mut instance = instantiate(boot).map_err(RunnerError::engine)?;
    apply(&mut instance, saved)?;
    Ok(instance)
}

/// Writes a run's files into `/work` within an instance's quota.
type PutFiles<I> = fn(&mut I, &std::path::Path, &[InputFile]) -> Result<(), RunnerError>;

/// Serves turns (and the files written before them) with one flavour.
fn serve<I>(
    boot: Boot,
    commands: Receiver<Command>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
    flavour: Flavour<I>,
) {
    let Flavour {
        instantiate,
        run,
        put_files,
        capture,
        apply,
    } = flavour;
    let first = instantiate(&boot).and_then(|mut instance| match &boot.restore {
        Some(sections) => apply(&mut instance, sections)
            .map(|()| instance)
            .map_err(|err| format!("cannot restore the snapshot: {}", err.message)),
        None => Ok(instance),
    });
    let mut live = match first {
        Ok(instance) => {
            let _ = ready.send(Ok(()));
            Some(instance)
        }
        Err(message) => {
            let _ = ready.send(Err(message));
            return;
        }
    };
    while let Ok(command) = commands.recv() {
        if boot.link.closing.load(Ordering::SeqCst) {
            break;
        }
        let (spec, reply) = match command {
            Command::Turn(spec, reply) => (spec, reply),
            Command::Capture(reply) => {
                let captured = match live.as_mut() {
                    Some(instance) => capture(instance, &boot),
                    None => Err(RunnerError::invalid(
                        "the runtime lost its interpreter with its last turn: nothing to snapshot",
                    )),
                };
                let _ = reply.send(captured);
                continue;
            }
            Command::PutFiles(files, reply) => {
                let written =
                    match live.as_mut() {
                        _ if boot.options.read_only => Err(RunnerError::invalid(
                            "this runtime's /work is read-only: it takes no files",
                        )),
                        Some(instance) => put_files(instance, &boot.options.work_dir, &files),
                        None => instantiate(&boot).map_err(RunnerError::engine).and_then(
                            |mut instance| {
                                let written =
                                    put_files(&mut instance, &boot.options.work_dir, &files);
                                live = Some(instance);
                                written
                            },
                        ),
                    };
                let _ = reply.send(written);
                continue;
            }
        };
        let mut instance = match live.take() {
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
        // A checkpoint: the state before the turn, set aside (a runtime
        // holding a file open between turns has none this turn).
        let saved = match boot.options.checkpoint {
            true => capture(&mut instance, &boot).ok(),
            false => None,
        };
        let (mut outcome, images, survivor) = run(instance, spec);
        live = match (survivor, saved) {
            (Some(instance), _) => Some(instance),
            // The interpreter went with the turn: back to the checkpoint.
            (None, Some(saved)) => match go_back(&boot, &saved, instantiate, apply) {
                Ok(instance) => {
                    outcome.went_back = true;
                    Some(instance)
                }
                Err(_) => {
                    outcome.interpreter_reset = true;
                    None
                }
            },
            // Gone (a trap, an exit): the next turn instantiates a fresh
            // one on the same /work.
            (None, None) => {
                outcome.interpreter_reset = true;
                None
            }
        };
        let _ = reply.send((outcome, images));
    }
    drop(live);
    drop(boot);
}
