//! code-runner's python engine: CPython 3.12 for WASI inside wasmtime.
//!
//! [`PythonEngine`] compiles python.wasm once per machine (a cached compiled
//! module) and boots runtimes; each runtime is one OS thread owning a wasmtime
//! `Store` in which the interpreter never returns from `_start`: our wrapper
//! (`wrapper.py`, embedded) parks on fd 0 between turns, so globals, imports
//! and `/work` persist from one turn to the next.
//!
//! Limits: a ticker bumps the engine epoch every few milliseconds and each
//! store's epoch callback stops a turn past its deadline, abort or teardown;
//! host calls that block (fd 0, sleeps, binding calls) check the same
//! conditions themselves. Linear memory is capped per runtime by a resource
//! limiter; `/work` by [`work_quota`].
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
//! }).await;
//! assert!(matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, completion: Completion::Value(_), .. }));
//! runtime.close().await;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod host;
mod module;
mod protocol;
mod session;
pub mod work_quota;

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use code_runner_core::{
    BoxFuture, Engine, Fault, Lang, RunnerError, Runtime, RuntimeOptions, TurnEnding, TurnOutcome,
    TurnSpec,
    caps::{Stream, StreamBuffer},
};
use wasmtime::{InstancePre, Linker};

pub use module::{PYTHON_WASM_ENV, PYTHON_WASM_SHA256, cache_dir, default_wasm_path, verify};

use session::{Boot, Command, Host, Link};

/// The guest wrapper's source, run with `python -c`.
pub(crate) const WRAPPER: &str = include_str!("wrapper.py");

/// How often the epoch ticks: the resolution of timeouts and aborts.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Native stack for a runtime thread; above `MAX_WASM_STACK` so that a deep
/// guest recursion traps instead of overflowing the host stack.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;
/// Wasm stack ceiling: deep enough for CPython's default recursion limit.
const MAX_WASM_STACK: usize = 8 * 1024 * 1024;

/// Errors of the python engine.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    /// python.wasm is missing, wrong or cannot be compiled; the text says what to do.
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

pub(crate) struct Shared {
    pub(crate) engine: wasmtime::Engine,
    pub(crate) base_linker: Linker<Host>,
    pub(crate) instance_pre: InstancePre<Host>,
    pub(crate) trampoline: wasmtime::Module,
}

/// The python engine: one wasmtime engine and one compiled python.wasm per process.
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
    /// Loads python.wasm from [`default_wasm_path`].
    ///
    /// # Errors
    /// `code-runner::engine` when the file is missing or wrong, saying how to fetch it.
    pub fn from_default_location() -> Result<Self, RunnerError> {
        Ok(Self::load(&default_wasm_path())?)
    }

    /// Loads, verifies and (once per machine) compiles python.wasm at `wasm`.
    ///
    /// The engine is shared per process and path: a second call (another
    /// worker in the same process, a test) gets the same compiled module.
    ///
    /// # Errors
    /// [`PythonError::Unavailable`] for a missing, corrupt or uncompilable file.
    pub fn load(wasm: &Path) -> Result<Self, PythonError> {
        static LOADED: OnceLock<Mutex<Vec<(std::path::PathBuf, PythonEngine)>>> = OnceLock::new();
        let mut loaded = LOADED
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some((_, engine)) = loaded.iter().find(|(path, _)| path == wasm) {
            return Ok(engine.clone());
        }
        let engine = Self::load_uncached(wasm)?;
        loaded.push((wasm.to_path_buf(), engine.clone()));
        Ok(engine)
    }

    fn load_uncached(wasm: &Path) -> Result<Self, PythonError> {
        let mut config = wasmtime::Config::new();
        config
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .async_stack_size(MAX_WASM_STACK + (1 << 20))
            .parallel_compilation(true);
        let engine =
            wasmtime::Engine::new(&config).map_err(|e| PythonError::Wasmtime(format!("{e:#}")))?;
        let module = module::load(&engine, wasm)?;
        let mut base_linker: Linker<Host> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut base_linker, Host::wasi)
            .map_err(|e| PythonError::Wasmtime(format!("{e:#}")))?;
        let mut linker = base_linker.clone();
        host::add_shadows(&mut linker).map_err(|e| PythonError::Wasmtime(format!("{e:#}")))?;
        let instance_pre = linker
            .instantiate_pre(&module)
            .map_err(|e| PythonError::Wasmtime(format!("{e:#}")))?;
        let trampoline = wasmtime::Module::new(&engine, host::trampoline_wat())
            .map_err(|e| PythonError::Wasmtime(format!("trampoline: {e:#}")))?;
        start_ticker(&engine);
        Ok(PythonEngine {
            shared: Arc::new(Shared {
                engine,
                base_linker,
                instance_pre,
                trampoline,
            }),
        })
    }

    /// Boots a runtime on its own thread and waits until its interpreter is parked.
    async fn boot(&self, options: RuntimeOptions) -> Result<Arc<dyn Runtime>, RunnerError> {
        std::fs::create_dir_all(&options.work_dir).map_err(|err| {
            RunnerError::engine(format!(
                "cannot create {}: {err}",
                options.work_dir.display()
            ))
        })?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| RunnerError::engine("the python engine needs a tokio runtime"))?;
        let link = Arc::new(Link::default());
        let (commands, receiver) = std::sync::mpsc::channel();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (exited_tx, exited_rx) = tokio::sync::oneshot::channel::<()>();
        let boot = Boot {
            shared: self.shared.clone(),
            options,
            link: link.clone(),
            runtime,
        };
        std::thread::Builder::new()
            .name("code-runner-python".into())
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || {
                session::thread_main(boot, receiver, ready_tx);
                let _ = exited_tx.send(());
            })
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
                    "python failed to boot: {message}"
                )))
            }
            Err(_) => Err(RunnerError::engine(
                "python runtime thread ended during boot",
            )),
        }
    }
}

impl Engine for PythonEngine {
    fn lang(&self) -> Lang {
        Lang::Python
    }

    fn spawn(
        &self,
        options: RuntimeOptions,
    ) -> BoxFuture<'_, Result<Arc<dyn Runtime>, RunnerError>> {
        Box::pin(self.boot(options))
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
    async fn turn(&self, spec: TurnSpec) -> TurnOutcome {
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
        TurnOutcome {
            stdout: StreamBuffer::new(Stream::Stdout, cap),
            stderr: StreamBuffer::new(Stream::Stderr, cap),
            ending: TurnEnding::Faulted(fault),
            denied: false,
        }
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

    fn run(&self, turn: TurnSpec) -> BoxFuture<'_, TurnOutcome> {
        Box::pin(self.turn(turn))
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

/// A fresh random token (128 bits, hex) for framing the wrapper channel and naming temp files.
pub(crate) fn random_token() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
