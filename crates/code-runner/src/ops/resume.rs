//! `code-runner::resume`: goes on with a run suspended on a call that waits
//! for a person's approval ([`crate::ops::approvals`]), and answers as
//! `code-runner::run` does (or `suspended` again, on its next such call).

use std::sync::Arc;

use code_runner_core::RunnerError;
use code_runner_core::wire::{ResumeRequest, RunResponse, schema_of};
use serde_json::Value;

use crate::bus::bridge;
use crate::bus::names::RESUME;
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ids::redact;
use crate::ops::approvals::{self, Decision, MAX_REASON_BYTES};
use crate::ops::standing::{self, Standing};
use crate::ops::{Ops, handler_as};

/// `code-runner::resume`, for the composition root.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        RESUME,
        Function::new(
            "Go on with a run that answered `suspended`: its code called a function that waits for a person's approval. approve: true lets the call proceed; false makes the code's call fail with an error carrying reason. Answers as code-runner::run does, or `suspended` again at the run's next such call.",
            schema_of::<ResumeRequest>(),
            schema_of::<RunResponse>(),
            handler_as(ops, resume),
        ),
    )
}

/// `code-runner::resume`.
pub(crate) async fn resume(
    ops: Arc<Ops>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    // The bridge keeps guest code off this id already; the handler says so
    // again, whichever way the call came (through the engine, a new edge).
    if caller.guest.is_some() {
        return Err(bridge::refuse_guest(RESUME, "approving or denying a call"));
    }
    let request: ResumeRequest = parse(payload)?;
    if request
        .reason
        .as_ref()
        .is_some_and(|r| r.len() > MAX_REASON_BYTES)
    {
        return Err(RunnerError::invalid(format!(
            "reason is longer than {MAX_REASON_BYTES} bytes"
        ))
        .into());
    }
    let id = request.runtime_id;
    let suspended = match ops.suspensions.take(&id, &request.call_id) {
        Some(found) => found?,
        None => {
            // Not suspended: a kept runtime between turns, or an id that
            // ended or never was.
            let Standing::Kept(_) = standing::of(&ops, &id)? else {
                return Err(RunnerError::invalid(format!(
                    "runtime {} waits on another call than this call_id; resume with the call_id its last answer carried",
                    redact(&id)
                ))
                .into());
            };
            return Err(RunnerError::invalid(format!(
                "runtime {} has no call waiting for approval (it was resumed already, or never suspended)",
                redact(&id)
            ))
            .into());
        }
    };
    let decision = if request.approve {
        Decision::Approve
    } else {
        Decision::Deny(request.reason)
    };
    // The guest's call may have ended meanwhile (its turn stopped): the
    // run's answer says so.
    let _ = suspended.call.decide.send(decision);
    let answer = approvals::suspended::answer(&ops, suspended.job).await;
    if !ops.suspensions.is_suspended(&id) {
        approvals::suspended::finished(&ops, &id);
    }
    answer
}
