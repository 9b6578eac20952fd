//! Where a runtime id stands: the one lookup that knows every state an id
//! can be in, so `run`, `resume` and `teardown` agree about each.
//!
//! An id names a kept runtime (idle or in a turn), or a run suspended on a
//! call that waits for a person (a kept runtime's turn, or a one-shot filed
//! under an id of its own while it waits, holding its slot), or something
//! that ended (`expired`), or nothing (`runtime_not_found`). A suspended
//! run is looked at first: its id may also name a kept runtime, and while it
//! waits only `resume` and `teardown` may touch it.

use std::sync::Arc;

use code_runner_core::RunnerError;

use crate::ids::redact;
use crate::ops::Ops;
use crate::runtimes::registry::Kept;

/// What a runtime id names now.
pub(crate) enum Standing {
    /// A kept runtime, not suspended.
    Kept(Arc<Kept>),
    /// A run suspended on a call that waits for a person (`function_id`):
    /// a kept runtime's turn, or a one-shot's.
    Suspended {
        /// The function its code called.
        function_id: String,
    },
}

/// Where `id` stands.
///
/// # Errors
/// `code-runner::expired` for an id that was reaped or torn down,
/// `code-runner::runtime_not_found` for one that never was.
pub(crate) fn of(ops: &Ops, id: &str) -> Result<Standing, RunnerError> {
    if let Some(function_id) = ops.suspensions.waiting_on(id) {
        return Ok(Standing::Suspended { function_id });
    }
    ops.registry.get(id).map(Standing::Kept)
}

/// The kept runtime `id` names, for a run on it.
///
/// # Errors
/// As [`of`], and `code-runner::invalid_request` while a run on it is
/// suspended (answer it with `code-runner::resume` first).
pub(crate) fn for_run(ops: &Ops, id: &str) -> Result<Arc<Kept>, RunnerError> {
    match of(ops, id)? {
        Standing::Kept(kept) => Ok(kept),
        Standing::Suspended { function_id } => Err(RunnerError::invalid(format!(
            "runtime {} is suspended: its call of {function_id} waits for approval; answer it with code-runner::resume (or end it with code-runner::teardown) first",
            redact(id),
        ))),
    }
}
