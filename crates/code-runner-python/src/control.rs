//! What a runtime's thread and its host calls share: the [`Link`] to the
//! handle, why the host stops a guest ([`Stop`]), the turn in flight
//! ([`TurnLimits`]), what starts an instance ([`Boot`]) and the requests the
//! thread serves ([`Command`]); and the two waits every flavour's host calls
//! make: [`stop_reason`] and [`run_binding`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use code_runner_core::{
    AbortSignal, BindingCall, BindingError, Bindings, RuntimeOptions, TurnImages, TurnOutcome,
    TurnSpec,
};

use crate::protocol;
use crate::{Shared, Slot};

/// How often a blocked host call re-checks its stop conditions.
pub const SLICE: Duration = Duration::from_millis(5);

/// A request to the runtime thread.
pub enum Command {
    /// Run one turn and answer on the oneshot.
    Turn(
        TurnSpec,
        tokio::sync::oneshot::Sender<(TurnOutcome, TurnImages)>,
    ),
    /// Write a run's files into `/work` within the instance's quota, between turns.
    PutFiles(
        Vec<code_runner_core::files::InputFile>,
        tokio::sync::oneshot::Sender<Result<(), code_runner_core::RunnerError>>,
    ),
    /// Capture the instance's state between turns (a snapshot's sections).
    Capture(
        tokio::sync::oneshot::Sender<
            Result<code_runner_core::SnapshotSections, code_runner_core::RunnerError>,
        >,
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

/// Everything a runtime thread needs to (re)instantiate the snapshot.
pub struct Boot {
    pub(crate) shared: Arc<Shared>,
    pub(crate) options: RuntimeOptions,
    pub(crate) link: Arc<Link>,
    pub(crate) runtime: tokio::runtime::Handle,
    /// A snapshot's state to put into the first instance (a restore).
    pub(crate) restore: Option<Arc<code_runner_core::SnapshotSections>>,
    /// The pool slot this runtime holds until its thread ends.
    #[allow(
        dead_code,
        reason = "held for its Drop: the slot is freed when the thread ends"
    )]
    pub(crate) slot: Slot,
}

/// The turn in flight, as the host calls see it.
pub struct TurnLimits {
    /// When the turn's budget runs out, as it started (its bindings' clock
    /// moves it by the time a call waited for a person).
    pub deadline: Instant,
    /// The budget, for the timeout's message.
    pub budget: Duration,
    /// Fires to stop the turn.
    pub abort: AbortSignal,
    /// The turn's host functions.
    pub bindings: Bindings,
}

/// Whether a guest must stop now, and why: the runtime is closing, or the
/// turn in flight was aborted or is past its deadline.
pub(crate) fn stop_reason(link: &Link, turn: Option<&TurnLimits>) -> Option<Stop> {
    if link.closing.load(Ordering::SeqCst) {
        return Some(Stop::Closing);
    }
    let turn = turn?;
    if turn.abort.is_aborted() {
        return Some(Stop::Aborted);
    }
    turn.bindings
        .clock()
        .past(turn.deadline, Instant::now())
        .then_some(Stop::Timeout)
}

/// One binding call frame from a runner: the reply frame, or why the guest
/// must stop. The binding runs on the tokio runtime; the wait checks the
/// stop conditions every `slice`, so a call that never answers ends on time.
pub(crate) fn run_binding(
    link: &Link,
    turn: Option<&TurnLimits>,
    runtime: &tokio::runtime::Handle,
    frame: &str,
    slice: Duration,
) -> Result<String, Stop> {
    let active = turn.ok_or_else(|| Stop::Protocol("binding call outside a turn".into()))?;
    // Refusals quote what the guest sent: bounded like every error text.
    let refuse = |message: String| {
        protocol::reply(Err(BindingError::message(code_runner_core::bound_message(
            message,
        ))))
    };
    let call = match protocol::parse_call(frame) {
        Ok(call) => call,
        Err(message) => return Ok(refuse(message)),
    };
    let Some(function) = active.bindings.lookup(&call.ns, &call.member) else {
        return Ok(refuse(format!(
            "{} has no function {:?}",
            call.ns, call.member
        )));
    };
    let future = function(
        call.args,
        BindingCall {
            deadline: active.bindings.clock().deadline(active.deadline),
        },
    );
    let (tx, rx) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        let _ = tx.send(future.await);
    });
    let answer = loop {
        if let Some(stop) = stop_reason(link, turn) {
            return Err(stop);
        }
        match rx.recv_timeout(slice) {
            Ok(answer) => break answer,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                break Err(BindingError::message(
                    "the binding call ended without an answer",
                ));
            }
        }
    };
    Ok(protocol::reply(answer))
}
