//! Sessions that outlive one runtime (issue 47): `code-runner::snapshot`
//! writes a kept python runtime's state (the data interpreter's) to the
//! snapshot store; `code-runner::restore` makes a new kept runtime from it,
//! while the original runs on: a fork. Both are host authority: guest code
//! can never call them.
//!
//! A snapshot is sealed by `code_runner_snapshot` (a MAC over every byte
//! with the worker's key, checked before anything is parsed) and kept in
//! `<data-dir>/snapshots` under an `sn_` id, a capability like a
//! `runtime_id`: unguessable, never logged in full. It loads only into the
//! image it was taken from. A restore reseeds `random` and numpy's global
//! generator, as a fresh runtime's first turn does, so a fork's draws differ
//! from its original's.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use code_runner_core::{Bindings, ErrorCode, Lang, RunnerError, Task, TurnEnding, TurnSpec};
use code_runner_snapshot::{Bounds, Contents, DirStore, Keys, SnapshotError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bus::bridge;
use crate::bus::names::{RESTORE, SNAPSHOT};
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ids::{new_runtime_id, redact};
use crate::ops::retire::{self, Live};
use crate::ops::{Ops, handler_as};
use crate::runtimes::lineage::Lasting;

/// The engine whose state the snapshots hold.
const ENGINE: &str = "python-data";
/// What a restore runs first: fresh entropy for the fork's generators.
const RESEED: &str = "import random as _cr_random, sys as _cr_sys\n_cr_random.seed()\nif 'numpy' in _cr_sys.modules:\n    _cr_sys.modules['numpy'].random.seed()\ndel _cr_random, _cr_sys\n";

/// The worker's snapshot keys and store, opened at their first use.
#[derive(Debug)]
pub(crate) struct Sessions {
    data_dir: PathBuf,
    keys: OnceLock<Result<Keys, String>>,
    store: OnceLock<Result<DirStore, String>>,
}

impl Sessions {
    /// The sessions of the data directory `data_dir`.
    pub(crate) fn new(data_dir: &std::path::Path) -> Sessions {
        Sessions {
            data_dir: data_dir.to_path_buf(),
            keys: OnceLock::new(),
            store: OnceLock::new(),
        }
    }

    fn keys(&self) -> Result<&Keys, RunnerError> {
        self.keys
            .get_or_init(|| Keys::load_or_create(&self.data_dir))
            .as_ref()
            .map_err(|why| RunnerError::engine(format!("the snapshot keys: {why}")))
    }

    fn store(&self) -> Result<&DirStore, RunnerError> {
        self.store
            .get_or_init(|| DirStore::open(&self.data_dir.join("snapshots")))
            .as_ref()
            .map_err(|why| RunnerError::engine(format!("the snapshot store: {why}")))
    }
}

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

/// Both functions, for the composition root.
pub(crate) fn functions(ops: &Arc<Ops>) -> Vec<(&'static str, Function)> {
    vec![
        (
            SNAPSHOT,
            Function::new(
                "Snapshot a kept python runtime (the data interpreter) between its runs: its variables, imported modules, objects, arrays and /work. Answers a snapshot_id; code-runner::restore makes a new runtime from it (a fork: the original runs on).",
                code_runner_core::wire::schema_of::<SnapshotRequest>(),
                code_runner_core::wire::schema_of::<SnapshotResponse>(),
                handler_as(ops, snapshot),
            ),
        ),
        (
            RESTORE,
            Function::new(
                "Make a new kept python runtime from a snapshot_id: it sees exactly the state its runtime had when the snapshot was taken ('random' and numpy's generator reseeded). Answers its runtime_id.",
                code_runner_core::wire::schema_of::<RestoreRequest>(),
                code_runner_core::wire::schema_of::<RestoreResponse>(),
                handler_as(ops, restore),
            ),
        ),
    ]
}

fn bounds(ops: &Ops) -> Bounds {
    let max = ops.config().max_snapshot_mb.saturating_mul(1 << 20);
    // Pages compress well; what they expand to is bounded by the memory a
    // runtime may have, with /work beside it.
    let raw = (ops.config().max_memory_mb.saturating_mul(1 << 20)).saturating_add(1 << 30);
    Bounds {
        max_stored: max,
        max_raw: raw.max(max),
    }
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
    let kept = crate::ops::standing::for_run(&ops, &request.runtime_id)?;
    if kept.lang != Lang::Python {
        return Err(RunnerError::invalid(format!(
            "snapshot_unsupported: runtime {} runs {}; only python runtimes can be snapshotted yet",
            redact(&request.runtime_id),
            kept.lang
        ))
        .into());
    }
    let engine = ops.engine(Lang::Python, &caller).await?;
    let image = engine.snapshot_image().ok_or_else(|| {
        RunnerError::invalid("snapshot_unsupported: this worker's python runs the lean interpreter (or sandbox processes), whose runtimes cannot be snapshotted")
    })?;
    // Between turns only: its turns and published calls wait meanwhile.
    let _place = ops.lineage.wait_for(kept.key)?;
    let _busy = kept.enter();
    let sections = kept.runtime.snapshot().await?;
    let created_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let contents = Contents {
        engine: ENGINE.into(),
        image,
        created_at,
        sections,
    };
    let sessions = &ops.sessions;
    let sealed = code_runner_snapshot::seal(&contents, sessions.keys()?.signing())
        .map_err(|err| RunnerError::engine(err.to_string()))?;
    let bounds = bounds(&ops);
    if sealed.len() as u64 > bounds.max_stored {
        return Err(RunnerError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "the snapshot is {} bytes, over max_snapshot_mb ({} MiB)",
                sealed.len(),
                ops.config().max_snapshot_mb
            ),
        )
        .into());
    }
    let id = code_runner_snapshot::new_snapshot_id();
    sessions
        .store()?
        .put(&id, &sealed)
        .map_err(|why| RunnerError::new(ErrorCode::ResourceExhausted, why))?;
    tracing::info!(snapshot = %code_runner_snapshot::redact(&id), runtime = %redact(&request.runtime_id), bytes = sealed.len(), "snapshot taken");
    let response = SnapshotResponse {
        snapshot_id: id,
        bytes: sealed.len() as u64,
        created_at,
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// Each refusal of a stored snapshot, as the caller reads it.
fn refused(err: SnapshotError) -> RunnerError {
    RunnerError::invalid(format!("the snapshot cannot be restored: {err}"))
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
    let engine = ops.engine(Lang::Python, &caller).await?;
    let image = engine.snapshot_image().ok_or_else(|| {
        RunnerError::invalid("snapshot_unsupported: this worker's python runs the lean interpreter (or sandbox processes), which restores no snapshots")
    })?;
    let bounds = bounds(&ops);
    let store = ops.sessions.store()?;
    let bytes = store
        .get(&request.snapshot_id, bounds.max_stored)
        .map_err(|why| RunnerError::new(ErrorCode::RuntimeNotFound, why))?;
    let contents = code_runner_snapshot::open(&bytes, ops.sessions.keys()?, ENGINE, &image, bounds)
        .map_err(refused)?;
    drop(bytes);
    let config = ops.config();
    let key = ops.lineage.begin(
        crate::ops::parent_of(&caller),
        Lasting::Yes,
        config.max_runtimes,
    )?;
    let live = Live::new(&ops, key);
    let slot = ops
        .registry
        .acquire_waiting(config.max_runtimes, crate::runtimes::registry::SLOT_WAIT)
        .await?;
    let dir = ops.engines.work_dir(Lang::Python)?;
    // The runtime may hold what its original grew to: the operator's ceiling.
    let options =
        ops.engines
            .runtime_options(&config, Lang::Python, config.max_memory_mb, dir.0.clone());
    let runtime = match engine.restore(options, contents.sections).await {
        Ok(runtime) => runtime,
        Err(err) => {
            dir.remove().await;
            live.finish().await;
            return Err(err.into());
        }
    };
    let runtime = retire::attach(&ops, key, runtime);
    let reseed = TurnSpec {
        task: Task::program(RESEED),
        timeout: Duration::from_secs(30),
        bindings: Bindings::default(),
        max_stream_bytes: Some(4096),
        abort: code_runner_core::AbortSignal::new(),
        live: None,
    };
    let outcome = runtime.run(reseed).await;
    if !matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, .. }) {
        runtime.close().await;
        dir.remove().await;
        live.finish().await;
        return Err(RunnerError::engine(
            "the restored runtime did not run its first turn (reseeding its generators)",
        )
        .into());
    }
    let id = new_runtime_id(ops.worker_name());
    ops.registry
        .keep(id.clone(), Lang::Python, key, runtime, dir, slot);
    live.keep();
    tracing::info!(snapshot = %code_runner_snapshot::redact(&request.snapshot_id), runtime = %redact(&id), "snapshot restored");
    Ok(serde_json::to_value(RestoreResponse { runtime_id: id }).unwrap_or(Value::Null))
}
