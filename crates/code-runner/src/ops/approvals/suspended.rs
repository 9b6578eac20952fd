//! Runs suspended on a call that waits for a person, filed by runtime id
//! until `code-runner::resume` (or the idle TTL) takes them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_runner_core::caps::{Stream, StreamBuffer};
use code_runner_core::wire::{RunResponse, SuspendedCall, Usage};
use code_runner_core::{Config, LiveOutput, RunnerError};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Pending;
use crate::bus::CallError;
use crate::ids::redact;
use crate::ops::{Ops, retire};

/// A run that may suspend: its task, and the end of its gate.
pub(crate) struct Job {
    /// The runtime id it is filed under while suspended: the kept
    /// runtime's, or one made for this run (a one-shot is kept while
    /// suspended; a `keep` run keeps this id once it ends).
    pub id: String,
    /// Whether `id` names a runtime kept before this run.
    pub existing: bool,
    /// The run, answering as `run` does once it ends.
    pub task: JoinHandle<Result<Value, CallError>>,
    /// Where its guest code's calls that wait for a person arrive.
    pub calls: mpsc::Receiver<Pending>,
    /// Its output so far, when it may suspend.
    pub progress: Option<Arc<Progress>>,
    /// When it started.
    pub started: Instant,
}

/// A suspended run, the call it waits on, and the timer that ends it at
/// the idle TTL (stopped when a resume takes it, so a client suspending and
/// resuming fast leaves no timers behind).
pub(crate) struct Suspended {
    pub job: Job,
    pub call: Pending,
    reaper: tokio::task::AbortHandle,
}

/// The suspended runs, by runtime id. Each holds its runtime's slot, so
/// there are at most `max_runtimes`.
#[derive(Default)]
pub(crate) struct Suspensions {
    runs: Mutex<HashMap<String, Suspended>>,
    /// Whether a function with `requires_approval` was ever published.
    flagged: AtomicBool,
}

impl Suspensions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Suspended>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many runs are suspended now.
    pub(crate) fn count(&self) -> usize {
        self.lock().len()
    }

    /// A function that requires approval was published.
    pub(crate) fn flag(&self) {
        self.flagged.store(true, Ordering::SeqCst);
    }

    /// Whether a run may suspend under `config` (so its output is kept).
    pub(crate) fn possible(&self, config: &Config) -> bool {
        !config.approval_required.is_empty() || self.flagged.load(Ordering::SeqCst)
    }

    /// Whether a run is suspended under `id`.
    pub(crate) fn is_suspended(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// The function the run suspended under `id` waits to call, if one is.
    pub(crate) fn waiting_on(&self, id: &str) -> Option<String> {
        self.lock().get(id).map(|s| s.call.function_id.clone())
    }

    /// Takes the run suspended under `id` on the call `call_id`.
    ///
    /// # Errors
    /// `None` when nothing is suspended under `id`; a clear error when the
    /// call is not the one it waits on.
    pub(crate) fn take(&self, id: &str, call_id: &str) -> Option<Result<Suspended, RunnerError>> {
        let mut runs = self.lock();
        let suspended = runs.get(id)?;
        if suspended.call.call_id != call_id {
            return Some(Err(RunnerError::invalid(format!(
                "runtime {} waits on another call than this call_id (a used or a wrong one); resume with the call_id its last answer carried",
                redact(id)
            ))));
        }
        let suspended = runs.remove(id)?;
        suspended.reaper.abort();
        Some(Ok(suspended))
    }

    /// Removes what is suspended under `id` on `call_id`.
    fn remove(&self, id: &str, call_id: &str) -> Option<Suspended> {
        let mut runs = self.lock();
        (runs.get(id)?.call.call_id == call_id)
            .then(|| runs.remove(id))
            .flatten()
    }

    /// Removes what is suspended under `id`, whatever the call.
    fn remove_any(&self, id: &str) -> Option<Suspended> {
        let suspended = self.lock().remove(id)?;
        suspended.reaper.abort();
        Some(suspended)
    }
}

/// Ends the run suspended under `id`, if one is (`code-runner::teardown`):
/// its waiting call fails, its turn stops, and its runtime goes (a kept
/// one is torn down; a one-shot's id answers `expired`). What the ended
/// runtime had published, as [`retire::remove_kept`] lists it; `None` when
/// nothing was suspended under `id`.
pub(crate) async fn end(ops: &Ops, id: &str) -> Option<Vec<String>> {
    let suspended = ops.suspensions.remove_any(id)?;
    tracing::info!(runtime = %redact(id), "a suspended run is torn down");
    Some(stop(ops, id, suspended).await)
}

/// Stops a suspended run taken out of the map: the turn's scope fires, the
/// decision's sender goes (the guest's call fails), the run's task is
/// awaited, then its runtime ends.
async fn stop(ops: &Ops, id: &str, suspended: Suspended) -> Vec<String> {
    suspended.call.scope.abort();
    let existing = suspended.job.existing;
    drop(suspended.call);
    let _ = suspended.job.task.await;
    ended(ops, id, existing).await
}

/// A run's output so far, kept (bounded like the run's own) while it may
/// suspend, for the `suspended` answer.
pub(crate) struct Progress(Mutex<[StreamBuffer; 2]>);

impl Progress {
    /// Output kept within `cap` per stream.
    pub(crate) fn new(cap: Option<usize>) -> Arc<Self> {
        Arc::new(Progress(Mutex::new([
            StreamBuffer::new(Stream::Stdout, cap),
            StreamBuffer::new(Stream::Stderr, cap),
        ])))
    }

    /// A tap that keeps each piece of output here, then hands it to `outer`.
    pub(crate) fn tee(self: &Arc<Self>, outer: Option<LiveOutput>) -> LiveOutput {
        let progress = self.clone();
        LiveOutput::new(move |stream, bytes| {
            {
                let mut streams = progress.0.lock().unwrap_or_else(|p| p.into_inner());
                streams[usize::from(stream == Stream::Stderr)].push(bytes);
            }
            if let Some(outer) = &outer {
                outer.call(stream, bytes);
            }
        })
    }

    fn render(&self) -> (String, String) {
        let streams = self.0.lock().unwrap_or_else(|p| p.into_inner());
        (streams[0].render(), streams[1].render())
    }
}

/// Waits until `job` answers, or suspends on a call: then files it under
/// its id and answers `suspended` (the output so far, the runtime id, the
/// call), and the idle TTL starts to run for it.
///
/// # Errors
/// The run's own error.
pub(crate) async fn answer(ops: &Arc<Ops>, mut job: Job) -> Result<Value, CallError> {
    let call = tokio::select! {
        done = &mut job.task => {
            return done.unwrap_or_else(|err| {
                Err(RunnerError::engine(format!("the run ended abnormally: {err}")).into())
            });
        }
        Some(call) = job.calls.recv() => call,
    };
    let (stdout, stderr) = job
        .progress
        .as_ref()
        .map(|p| p.render())
        .unwrap_or_default();
    let response = RunResponse {
        stdout,
        stderr,
        // Not finished: a host that reads `success` must not take the run
        // for done (issue 45); `suspended` says what it waits for.
        exit_code: 0,
        success: false,
        duration_ms: u64::try_from(job.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        result: Value::Null,
        runtime_id: Some(job.id.clone()),
        usage: Usage::default(),
        images: Vec::new(),
        files: Vec::new(),
        suspended: Some(SuspendedCall {
            call_id: call.call_id.clone(),
            function_id: call.function_id.clone(),
            payload: call.payload.clone(),
        }),
        result_note: None,
        runtime_reset: None,
        restored: false,
    };
    let (id, call_id) = (job.id.clone(), call.call_id.clone());
    tracing::debug!(runtime = %redact(&id), function = %call.function_id, "a run is suspended on a call that waits for approval");
    let ttl = Duration::from_secs(ops.config().idle_ttl_secs);
    // Filed under the lock the reaper takes, so it cannot look before.
    let mut runs = ops.suspensions.lock();
    let reaper = reap_after(ops, ttl, id.clone(), call_id);
    runs.insert(id, Suspended { job, call, reaper });
    drop(runs);
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// Ends the run suspended under `id` on `call_id` if it still is after
/// `ttl`: its turn is stopped (the guest's call fails), its runtime closed.
fn reap_after(
    ops: &Arc<Ops>,
    ttl: Duration,
    id: String,
    call_id: String,
) -> tokio::task::AbortHandle {
    let weak = Arc::downgrade(ops);
    let reaper = tokio::spawn(async move {
        tokio::time::sleep(ttl).await;
        let Some(ops) = weak.upgrade() else {
            return;
        };
        let Some(suspended) = ops.suspensions.remove(&id, &call_id) else {
            return;
        };
        tracing::info!(runtime = %redact(&id), "a run suspended for the idle TTL is ended");
        stop(&ops, &id, suspended).await;
    });
    reaper.abort_handle()
}

/// A suspended run was stopped: its runtime goes, and its id answers
/// `expired` from now on. What the runtime had published.
async fn ended(ops: &Ops, id: &str, existing: bool) -> Vec<String> {
    if existing || ops.registry.get(id).is_ok() {
        retire::remove_kept(ops, id).await.unwrap_or_default()
    } else {
        ops.registry.remember_expired(id);
        Vec::new()
    }
}

/// After a resumed run answered for good: a one-shot's id answers `expired`.
pub(crate) fn finished(ops: &Ops, id: &str) {
    if ops.registry.get(id).is_err() {
        ops.registry.remember_expired(id);
    }
}
