//! Approvals: calls from guest code that wait until a person says yes.
//!
//! A function needs approval when the configuration's `approval_required`
//! names it (an id or `namespace::*`) or it was published with
//! `requires_approval`. Guest code calling one hands the call to its run's
//! [`Gate`] and waits, its turn's clock stopped (the time does not count
//! against the run's timeout). The run, which waits on the other end of the
//! gate ([`suspended::answer`]), answers `suspended` and files the run
//! under its `runtime_id`; `code-runner::resume` sends the person's
//! [`Decision`] through, and the same turn goes on.
//!
//! Bounds: one call of a run waits at a time (a second is refused at once);
//! a suspended run holds its runtime's slot (so suspensions count against
//! `max_runtimes`, one-shots included); the idle TTL ends a run left
//! suspended.
//!
//! Who may decide: only the host. Only a `code-runner::run` that a host
//! started can wait ([`Approver::Run`]); a published function's call and a
//! run that guest code started (a nested run, on this worker or through the
//! engine) refuse such a call with `forbidden` ([`Approver::Nobody`]), so
//! guest code never holds a suspension it could resume itself; and
//! `code-runner::resume` is host-only, in the bridge and in its handler.

pub(crate) mod suspended;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use code_runner_core::{AbortSignal, BindingError, TurnClock, guest_policy};
use rand::RngExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::bus::Bus;
use crate::bus::bridge::FORBIDDEN;

pub(crate) use suspended::Suspensions;

/// Longest `reason` a resume may carry, in bytes.
pub(crate) const MAX_REASON_BYTES: usize = 1024;

/// What a person decided about a suspended call.
#[derive(Debug)]
pub(crate) enum Decision {
    /// The call proceeds.
    Approve,
    /// The guest's call fails, with the reason if one was given.
    Deny(Option<String>),
}

/// A call waiting for a decision, as the run that answers `suspended` sees it.
pub(crate) struct Pending {
    /// Names the call in `code-runner::resume`.
    pub call_id: String,
    /// The function called.
    pub function_id: String,
    /// Its payload.
    pub payload: Value,
    /// Where the decision goes.
    pub decide: oneshot::Sender<Decision>,
    /// The turn's scope: fired, it ends the turn (the idle TTL's reap).
    pub scope: AbortSignal,
}

/// Who can decide a turn's calls that wait for a person.
#[derive(Debug, Clone)]
pub(crate) enum Approver {
    /// The host that started this run: the call waits at the run's gate.
    Run(Arc<Gate>),
    /// Nobody can: such a call is refused `forbidden`, for the reason given.
    Nobody(&'static str),
}

/// Why a published function's call cannot wait for a person.
pub(crate) const PUBLISHED_CALL: &str = "only a code-runner::run a host started can wait for one, and this is a published function's call";

/// Why a run guest code started cannot wait for a person.
pub(crate) const GUEST_STARTED: &str = "only a code-runner::run a host started can wait for one, and this run was started by guest code (a nested run), which may not hold the decision";

/// One run's way to its waiting caller: guest code that calls a function
/// needing approval hands the call over here.
pub(crate) struct Gate {
    calls: mpsc::Sender<Pending>,
    waiting: AtomicBool,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("waiting", &self.waiting.load(Ordering::SeqCst))
            .finish()
    }
}

/// A new gate, and the end the run waits on.
pub(crate) fn gate() -> (Arc<Gate>, mpsc::Receiver<Pending>) {
    let (calls, rx) = mpsc::channel(1);
    let gate = Gate {
        calls,
        waiting: AtomicBool::new(false),
    };
    (Arc::new(gate), rx)
}

/// Whether guest code's call of `function_id` waits for a person.
pub(crate) fn needs_approval(approval_required: &[String], bus: &Bus, function_id: &str) -> bool {
    guest_policy::approval_required(approval_required, function_id)
        || bus.has_flag(function_id, "requires_approval")
}

/// A new call id: not guessable, so only who saw the suspension resumes it.
fn new_call_id() -> String {
    let body: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(24)
        .map(char::from)
        .collect();
    format!("call_{body}")
}

/// Hands guest code's call of `function_id` to its run and waits for the
/// decision, the turn's `clock` stopped meanwhile. Approved: how long the
/// clock stood (the call's deadline moves by as much). Denied, or the run
/// ended while it waited: the guest's error.
pub(crate) async fn wait(
    approver: &Approver,
    clock: &TurnClock,
    scope: &AbortSignal,
    function_id: &str,
    payload: &Value,
) -> Result<Duration, BindingError> {
    let gate = match approver {
        Approver::Run(gate) => gate,
        Approver::Nobody(why) => {
            return Err(BindingError {
                code: Some(FORBIDDEN.into()),
                message: format!("{function_id} needs a person's approval: {why}"),
            });
        }
    };
    if gate.waiting.swap(true, Ordering::SeqCst) {
        return Err(BindingError::from(code_runner_core::RunnerError::invalid(
            format!(
                "{function_id} needs a person's approval, and another call of this run already waits for one; wait for it first"
            ),
        )));
    }
    let _one_at_a_time = Waiting(gate);
    let (decide, decision) = oneshot::channel();
    let pending = Pending {
        call_id: new_call_id(),
        function_id: function_id.to_string(),
        payload: payload.clone(),
        decide,
        scope: scope.clone(),
    };
    clock.pause();
    let stopped = Stopped(clock);
    let decided = async {
        gate.calls.send(pending).await.ok()?;
        decision.await.ok()
    };
    let decision = tokio::select! {
        decision = decided => decision,
        () = ended(scope) => None,
    };
    let stood = clock.resume();
    drop(stopped);
    match decision {
        Some(Decision::Approve) => Ok(stood),
        Some(Decision::Deny(reason)) => Err(BindingError {
            code: Some(FORBIDDEN.into()),
            message: match reason {
                Some(reason) => format!("a person denied the call of {function_id}: {reason}"),
                None => format!("a person denied the call of {function_id}"),
            },
        }),
        None => Err(BindingError::message(format!(
            "the run ended while its call of {function_id} waited for approval"
        ))),
    }
}

/// Resolves once `scope` fired (looked at every 50 ms).
async fn ended(scope: &AbortSignal) {
    while !scope.is_aborted() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Lets the run's next call wait once this one is decided.
struct Waiting<'a>(&'a Gate);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.store(false, Ordering::SeqCst);
    }
}

/// Runs the turn's clock again, however the wait ended.
struct Stopped<'a>(&'a TurnClock);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}
