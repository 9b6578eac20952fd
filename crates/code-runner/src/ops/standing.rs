//! Where a runtime id stands: the one lookup that knows every state an id
//! can be in, so `run`, `resume` and `teardown` agree about each.
//!
//! An id names a kept runtime (idle or in a turn), or a run suspended on a
//! call that waits for a person (a kept runtime's turn, or a one-shot filed
//! under an id of its own while it waits, holding its slot), or something
//! that ended (`expired`), or nothing (`runtime_not_found`). A suspended
//! run is looked at first: its id may also name a kept runtime, and while it
//! waits only `resume` and `teardown` may touch it.
//!
//! An id may also name a hibernated session: not in the registry but in
//! the snapshot store ([`crate::ops::sessions::hibernate`]). [`present`] and
//! [`enter`] wake it, so a call finds it as it left it.

use std::sync::Arc;

use code_runner_core::{ErrorCode, RunnerError};

use crate::ids::redact;
use crate::ops::Ops;
use crate::ops::sessions::hibernate;
use crate::runtimes::registry::{BusyGuard, Kept};

/// The most times a call looks for its runtime while it moves between
/// hibernation and life.
const LOOKS: usize = 4;

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

/// As [`for_run`], waking the runtime first if it is hibernated.
///
/// # Errors
/// As [`for_run`]; a hibernated session that cannot be woken says why
/// (a refused snapshot, no slot).
pub(crate) async fn present(ops: &Arc<Ops>, id: &str) -> Result<Arc<Kept>, RunnerError> {
    let mut looks = 0;
    loop {
        match for_run(ops, id) {
            Err(err) if err.code == ErrorCode::RuntimeNotFound && looks < LOOKS => {
                looks += 1;
                if !hibernate::wake(ops, id).await? {
                    return Err(err);
                }
            }
            found => return found,
        }
    }
}

/// The kept runtime `id` names, entered for a call: the reaper and
/// hibernation pass it by while the guard lives. A hibernated one is woken
/// first; one taken for hibernation between the lookup and the entry is
/// looked for again.
///
/// # Errors
/// As [`present`]; `capacity` when it kept moving.
pub(crate) async fn enter(ops: &Arc<Ops>, id: &str) -> Result<(Arc<Kept>, BusyGuard), RunnerError> {
    for _ in 0..LOOKS {
        let kept = present(ops, id).await?;
        let busy = kept.enter();
        if ops.registry.is_current(id, &kept) {
            return Ok((kept, busy));
        }
    }
    Err(RunnerError::new(
        ErrorCode::Capacity,
        format!(
            "runtime {} is moving between hibernation and life; retry",
            redact(id)
        ),
    ))
}
