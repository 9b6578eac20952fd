//! Sessions that outlive one runtime (issues 47, 48): `code-runner::snapshot`
//! writes a kept runtime's state (python's data interpreter by its memory,
//! node's and TypeScript's by their turn ledger) to the snapshot store; `code-runner::restore` makes a new kept runtime from it,
//! while the original runs on: a fork. Both are host authority: guest code
//! can never call them.
//!
//! A snapshot is sealed by `code_runner_snapshot` (a MAC over every byte
//! with the worker's key, checked before anything is parsed) and kept in
//! `<data-dir>/snapshots` under an `sn_` id, a capability like a
//! `runtime_id`: unguessable, never logged in full. It loads only into the
//! image it was taken from. A restore reseeds `random` and numpy's global
//! generator (node: `Math.random`), as a fresh runtime's first turn does, so
//! a fork's draws differ from its original's.

use std::sync::Arc;
use std::time::Duration;

use code_runner_core::{Bindings, ErrorCode, Lang, RunnerError, Task, TurnEnding, TurnSpec};
use code_runner_snapshot::Kind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::seal;
use crate::bus::bridge;
use crate::bus::names::{DELETE_SNAPSHOT, RESTORE, SNAPSHOT};
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ids::{new_runtime_id, redact};
use crate::ops::{Ops, handler_as};

/// What a restore runs first: fresh entropy for the fork's generators.
const RESEED: &str = "import random as _cr_random, sys as _cr_sys\n_cr_random.seed()\nif 'numpy' in _cr_sys.modules:\n    _cr_sys.modules['numpy'].random.seed()\ndel _cr_random, _cr_sys\n";

/// `code-runner::snapshot`'s request.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// The kept runtime to snapshot (between its turns).
    pub runtime_id: String,
}

/// `code-runner::snapshot`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SnapshotResponse {
    /// The snapshot's id: a capability, pass it to `code-runner::restore`.
    pub snapshot_id: String,
    /// Its size as stored.
    pub bytes: u64,
    /// When it was taken, in Unix seconds.
    pub created_at: u64,
}

/// `code-runner::restore`'s request.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// The snapshot to make a runtime of.
    pub snapshot_id: String,
}

/// `code-runner::restore`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RestoreResponse {
    /// The new kept runtime, in the snapshot's state.
    pub runtime_id: String,
}

/// `code-runner::delete_snapshot`'s request.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteSnapshotRequest {
    /// The snapshot to delete.
    pub snapshot_id: String,
}

/// `code-runner::delete_snapshot`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DeleteSnapshotResponse {
    /// Whether the store held it.
    pub deleted: bool,
}

/// The three functions, for the composition root.
pub(crate) fn functions(ops: &Arc<Ops>) -> Vec<(&'static str, Function)> {
    vec![
        (
            SNAPSHOT,
            Function::new(
                "Snapshot a kept runtime between its runs: python's (the data interpreter) variables, imported modules, objects, arrays and /work; node's and typescript's by their turn ledger (replayed on restore). Answers a snapshot_id; code-runner::restore makes a new runtime from it (a fork: the original runs on).",
                code_runner_core::wire::schema_of::<SnapshotRequest>(),
                code_runner_core::wire::schema_of::<SnapshotResponse>(),
                handler_as(ops, snapshot),
            ),
        ),
        (
            RESTORE,
            Function::new(
                "Make a new kept runtime from a snapshot_id: it sees exactly the state its runtime had when the snapshot was taken (its random generators reseeded: python's random and numpy, node's Math.random). Answers its runtime_id.",
                code_runner_core::wire::schema_of::<RestoreRequest>(),
                code_runner_core::wire::schema_of::<RestoreResponse>(),
                handler_as(ops, restore),
            ),
        ),
        (
            DELETE_SNAPSHOT,
            Function::new(
                "Delete a snapshot_id from the snapshot store: it can no longer be restored (runtimes already restored from it run on). Answers whether there was one.",
                code_runner_core::wire::schema_of::<DeleteSnapshotRequest>(),
                code_runner_core::wire::schema_of::<DeleteSnapshotResponse>(),
                handler_as(ops, delete),
            ),
        ),
    ]
}

/// `code-runner::snapshot`.
pub(crate) async fn snapshot(
    ops: Arc<Ops>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    if caller.guest.is_some() {
        return Err(bridge::refuse_guest(SNAPSHOT, "snapshotting a runtime"));
    }
    let request: SnapshotRequest = parse(payload)?;
    // Between turns only: its turns and published calls wait meanwhile.
    let (kept, _busy) = crate::ops::standing::enter(&ops, &request.runtime_id).await?;
    let _place = ops.lineage.wait_for(kept.key)?;
    let (sealed, created_at) = seal::capture(&ops, &kept, &request.runtime_id, false).await?;
    let bytes = sealed.len() as u64;
    let id = code_runner_snapshot::new_snapshot_id();
    let config = ops.config();
    ops.sessions
        .store(&config)?
        .put(
            Kind::Snapshot,
            &id,
            sealed,
            Some(code_runner_snapshot::store::MAX_SNAPSHOTS),
        )
        .await
        .map_err(|why| RunnerError::new(ErrorCode::ResourceExhausted, why))?;
    tracing::info!(snapshot = %code_runner_snapshot::redact(&id), runtime = %redact(&request.runtime_id), bytes, "snapshot taken");
    let response = SnapshotResponse {
        snapshot_id: id,
        bytes,
        created_at,
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// `code-runner::restore`.
pub(crate) async fn restore(
    ops: Arc<Ops>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    if caller.guest.is_some() {
        return Err(bridge::refuse_guest(RESTORE, "restoring a snapshot"));
    }
    let request: RestoreRequest = parse(payload)?;
    let config = ops.config();
    let bytes = ops
        .sessions
        .store(&config)?
        .get(
            Kind::Snapshot,
            &request.snapshot_id,
            super::bounds(&config).max_stored,
        )
        .await
        .map_err(|why| RunnerError::new(ErrorCode::RuntimeNotFound, why))?
        .ok_or_else(|| {
            RunnerError::new(
                ErrorCode::RuntimeNotFound,
                format!(
                    "no snapshot {}",
                    code_runner_snapshot::redact(&request.snapshot_id)
                ),
            )
        })?;
    let revived = seal::revive(&ops, &caller, &bytes, None).await?;
    drop(bytes);
    // Python reseeds its generators in a first turn; node did after its
    // replay (LedgerOptions::reseed).
    if revived.lang == Lang::Python {
        let reseed = TurnSpec {
            task: Task::program(RESEED),
            timeout: Duration::from_secs(30),
            bindings: Bindings::default(),
            max_stream_bytes: Some(4096),
            abort: code_runner_core::AbortSignal::new(),
            live: None,
        };
        let outcome = revived.runtime.run(reseed).await;
        if !matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, .. }) {
            revived.discard().await;
            return Err(RunnerError::engine(
                "the restored runtime did not run its first turn (reseeding its generators)",
            )
            .into());
        }
    }
    let id = new_runtime_id(ops.worker_name());
    revived.keep(&ops, &id);
    tracing::info!(snapshot = %code_runner_snapshot::redact(&request.snapshot_id), runtime = %redact(&id), "snapshot restored");
    Ok(serde_json::to_value(RestoreResponse { runtime_id: id }).unwrap_or(Value::Null))
}

/// `code-runner::delete_snapshot`.
pub(crate) async fn delete(
    ops: Arc<Ops>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    if caller.guest.is_some() {
        return Err(bridge::refuse_guest(DELETE_SNAPSHOT, "deleting a snapshot"));
    }
    let request: DeleteSnapshotRequest = parse(payload)?;
    Kind::Snapshot
        .check(&request.snapshot_id)
        .map_err(RunnerError::invalid)?;
    let config = ops.config();
    let store = ops.sessions.store(&config)?;
    // One byte says it is there; nothing of it is read.
    let held = store
        .get(Kind::Snapshot, &request.snapshot_id, 0)
        .await
        .map_err(RunnerError::engine)?
        .is_some();
    store
        .delete(Kind::Snapshot, &request.snapshot_id)
        .await
        .map_err(RunnerError::engine)?;
    if held {
        tracing::info!(snapshot = %code_runner_snapshot::redact(&request.snapshot_id), "snapshot deleted");
    }
    Ok(serde_json::to_value(DeleteSnapshotResponse { deleted: held }).unwrap_or(Value::Null))
}
