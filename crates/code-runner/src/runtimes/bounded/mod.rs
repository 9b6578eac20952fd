//! The worker's outer bound on a turn: an engine that does not answer a
//! turn some time after its deadline has lost that runtime.
//!
//! Engines stop their own turns at the deadline; this is the backstop for
//! when one fails to (a guest that caught the engine's own code in a loop).
//! Every runtime a run, a registration or a call of a published function
//! uses is a [`Bounded`] (`ops::retire::attach`): a turn still unanswered
//! [`TURN_GRACE`] past its deadline answers `code-runner::timeout`, its
//! runtime is discarded (closed in the background, never awaited by a
//! caller) and the worker lets go of it (`ops::retire::discard`: a kept id then
//! answers `code-runner::expired`, a namespace loses its runtime and its
//! functions), so its slot is free again. A thread stuck in a loop costs a
//! core until the engine's close stops it; it holds no slot and no request.
//!
//! A turn's [`AbortSignal`] also fires when the turn answers, so whatever
//! its guest code started on its behalf (nested runs, chained to it with
//! [`AbortSignal::child`]) ends with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use code_runner_core::caps::{Stream, StreamBuffer};
use code_runner_core::{
    BoxFuture, Fault, Lang, Runtime, Task, TurnEnding, TurnImages, TurnOutcome, TurnSpec,
};

/// How long past its deadline a turn may go unanswered before the worker
/// gives its runtime up.
pub const TURN_GRACE: Duration = Duration::from_secs(2);
/// How long a runtime may take to write a run's files (at most a request
/// body's worth, through a sandbox process's pipe on a busy machine).
pub const FILES_GRACE: Duration = Duration::from_secs(30);

/// How often a wait looks at a stopped turn clock again.
const CLOCK_LOOK: Duration = Duration::from_millis(100);

/// Runs `turn` on `runtime` and waits at most its timeout plus
/// [`TURN_GRACE`]; `None` when no answer came (the turn's abort signal has
/// been fired). The turn's signal fires when it answers, too.
pub(crate) async fn run_within(
    runtime: &dyn Runtime,
    turn: TurnSpec,
) -> Option<(TurnOutcome, TurnImages)> {
    let (bound, abort) = (turn.timeout.saturating_add(TURN_GRACE), turn.abort.clone());
    // Measured on the turn's clock: the time a call waited for a person
    // does not count.
    let clock = turn.bindings.clock().clone();
    let base = Instant::now() + bound;
    let mut running = std::pin::pin!(runtime.run_with_images(turn));
    let answer = loop {
        let wake = match clock.is_paused() {
            true => Instant::now() + CLOCK_LOOK,
            false => clock.deadline(base),
        };
        tokio::select! {
            answer = &mut running => break Some(answer),
            () = tokio::time::sleep_until(wake.into()) => {
                if clock.past(base, Instant::now()) {
                    break None;
                }
            }
        }
    };
    abort.abort();
    answer
}

/// Closes `runtime` as its own task and waits for it at most [`TURN_GRACE`];
/// whether it closed in time (if not, the close goes on in the background).
pub(crate) async fn close_within(runtime: Arc<dyn Runtime>) -> bool {
    let closing = tokio::spawn(async move { runtime.close().await });
    tokio::time::timeout(TURN_GRACE, closing).await.is_ok()
}

/// A runtime whose turns are bounded, and which is given up when one is not answered.
pub(crate) struct Bounded {
    runtime: Arc<dyn Runtime>,
    lost: AtomicBool,
    /// Turns that the engine runs one at a time wait here, so a turn's
    /// bound starts when its turn does, not while it waits behind another.
    order: tokio::sync::Mutex<()>,
    on_lost: Box<dyn Fn() + Send + Sync>,
}

impl Bounded {
    /// Bounds `runtime`; `on_lost` runs once if it is given up.
    pub(crate) fn new(
        runtime: Arc<dyn Runtime>,
        on_lost: impl Fn() + Send + Sync + 'static,
    ) -> Arc<Bounded> {
        Arc::new(Bounded {
            runtime,
            lost: AtomicBool::new(false),
            order: tokio::sync::Mutex::new(()),
            on_lost: Box::new(on_lost),
        })
    }

    /// Whether the engine runs `task` after the runtime's other turns: python
    /// runs everything in order; node orders programs and definitions and
    /// runs a call of a handler beside them (a program may call its own
    /// runtime's handler and wait for it).
    fn ordered(&self, task: &Task) -> bool {
        !self.runtime.lang().on_node_engine() || !matches!(task, Task::Invoke { .. })
    }

    /// Gives up a runtime that is gone without a close (its sandbox
    /// process died): the worker lets go of it as of a lost one.
    fn give_up(&self, why: &str) {
        if self.lost.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::warn!(lang = %self.runtime.lang(), "a runtime is gone: {why}; it is discarded");
        (self.on_lost)();
    }

    /// Gives the runtime up: closes it in the background and tells the worker.
    fn lose(&self) {
        if self.lost.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::warn!(
            lang = %self.runtime.lang(),
            "a turn was not answered {} s after its deadline; its runtime is discarded",
            TURN_GRACE.as_secs()
        );
        let runtime = self.runtime.clone();
        tokio::spawn(async move { runtime.close().await });
        (self.on_lost)();
    }
}

impl Runtime for Bounded {
    fn lang(&self) -> Lang {
        self.runtime.lang()
    }

    fn run(&self, turn: TurnSpec) -> BoxFuture<'_, TurnOutcome> {
        Box::pin(async move { self.run_with_images(turn).await.0 })
    }

    fn run_with_images(&self, turn: TurnSpec) -> BoxFuture<'_, (TurnOutcome, TurnImages)> {
        Box::pin(async move {
            let cap = turn.max_stream_bytes;
            let _turn = match self.ordered(&turn.task) {
                true => Some(self.order.lock().await),
                false => None,
            };
            if self.runtime.is_gone() {
                self.give_up("its sandbox process died");
                turn.abort.abort();
                let fault = Fault::NotStarted("its sandbox process died".to_string());
                return (outcome(cap, fault), TurnImages::default());
            }
            if self.lost.load(Ordering::SeqCst) {
                turn.abort.abort();
                return (outcome(cap, Fault::Aborted), TurnImages::default());
            }
            let budget = turn.timeout;
            match run_within(self.runtime.as_ref(), turn).await {
                Some(answer) => {
                    if self.runtime.is_gone() {
                        self.give_up("its sandbox process died");
                    }
                    answer
                }
                None => {
                    self.lose();
                    (
                        outcome(cap, Fault::Timeout { budget }),
                        TurnImages::default(),
                    )
                }
            }
        })
    }

    /// In turn order.
    fn snapshot(
        &self,
    ) -> BoxFuture<'_, Result<code_runner_core::SnapshotSections, code_runner_core::RunnerError>>
    {
        Box::pin(async move {
            let _turn = self.order.lock().await;
            if self.runtime.is_gone() || self.lost.load(Ordering::SeqCst) {
                return Err(code_runner_core::RunnerError::new(
                    code_runner_core::ErrorCode::Expired,
                    "the runtime ended before it could be snapshotted",
                ));
            }
            self.runtime.snapshot().await
        })
    }

    /// In turn order.
    fn record(&self, options: code_runner_core::LedgerOptions) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _turn = self.order.lock().await;
            self.runtime.record(options).await;
        })
    }

    /// In turn order.
    fn add_packages(
        &self,
        dir: std::path::PathBuf,
    ) -> BoxFuture<'_, Result<Vec<String>, code_runner_core::RunnerError>> {
        Box::pin(async move {
            let _turn = self.order.lock().await;
            if self.runtime.is_gone() || self.lost.load(Ordering::SeqCst) {
                return Err(code_runner_core::RunnerError::new(
                    code_runner_core::ErrorCode::Expired,
                    "the runtime ended before its packages were added",
                ));
            }
            self.runtime.add_packages(dir).await
        })
    }

    /// In turn order, and within [`FILES_GRACE`]: a runtime that does not
    /// take its files in that time is discarded.
    fn put_files(
        &self,
        files: Vec<code_runner_core::files::InputFile>,
    ) -> BoxFuture<'_, Result<(), code_runner_core::RunnerError>> {
        Box::pin(async move {
            if files.is_empty() {
                return Ok(());
            }
            let _turn = self.order.lock().await;
            if self.runtime.is_gone() || self.lost.load(Ordering::SeqCst) {
                return Err(code_runner_core::RunnerError::new(
                    code_runner_core::ErrorCode::Expired,
                    "the runtime ended before its files were written",
                ));
            }
            match tokio::time::timeout(FILES_GRACE, self.runtime.put_files(files)).await {
                Ok(written) => written,
                Err(_) => {
                    self.lose();
                    Err(code_runner_core::RunnerError::engine(format!(
                        "the runtime did not take its files within {} s",
                        FILES_GRACE.as_secs()
                    )))
                }
            }
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.lost.load(Ordering::SeqCst) {
                return;
            }
            if !close_within(self.runtime.clone()).await {
                self.lost.store(true, Ordering::SeqCst);
                tracing::warn!(
                    lang = %self.runtime.lang(),
                    "a runtime did not close within {} s; it goes on closing in the background",
                    TURN_GRACE.as_secs()
                );
            }
        })
    }
}

/// An outcome with no output.
fn outcome(cap: Option<usize>, fault: Fault) -> TurnOutcome {
    TurnOutcome {
        usage: Default::default(),
        stdout: StreamBuffer::new(Stream::Stdout, cap),
        stderr: StreamBuffer::new(Stream::Stderr, cap),
        ending: TurnEnding::Faulted(fault),
        denied: false,
        interpreter_reset: false,
        went_back: false,
    }
}

#[cfg(test)]
mod tests;
