//! A kept runtime's state to sealed bytes ([`capture`]) and back to a live
//! runtime ([`revive`]): python's data interpreter by its memory, node and
//! TypeScript by their turn ledger, replayed. The bytes are `code_runner_snapshot`'s
//! format (a MAC over every byte with the worker's key, checked before
//! anything is parsed); beside the engine's own sections they carry one of
//! ours, `runtime`: the runtime's memory ceiling and, for a hibernated
//! session, the hash of the id it belongs to, so a session's bytes filed
//! under another id are refused.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use code_runner_core::{ErrorCode, Lang, RunnerError, Runtime};
use code_runner_snapshot::{Contents, SnapshotError, session_name};
use serde::{Deserialize, Serialize};

use crate::bus::Caller;
use crate::ids::{RuntimeKey, redact};
use crate::ops::Ops;
use crate::ops::retire::{self, Live};
use crate::runtimes::lineage::Lasting;
use crate::runtimes::registry::{Held, Kept, Slot, WorkDir};

/// The engine whose state a snapshot of a `lang` runtime holds.
fn engine_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => "python-data",
        Lang::Node => "node-ledger",
        Lang::TypeScript => "typescript-ledger",
    }
}

/// The language whose engine is `name`.
fn lang_of(name: &str) -> Option<Lang> {
    [Lang::Python, Lang::Node, Lang::TypeScript]
        .into_iter()
        .find(|lang| engine_name(*lang) == name)
}

/// Why `lang`'s engine on this worker keeps no snapshots.
fn no_image(lang: Lang) -> RunnerError {
    unsupported(match lang {
        Lang::Python => {
            "this worker's python runs the lean interpreter (or sandbox processes), whose runtimes cannot be snapshotted"
        }
        _ => "this worker runs node in sandbox processes, whose runtimes keep no turn ledger",
    })
}
/// Our section: what the runtime was.
const RUNTIME: &str = "runtime";

/// What the `runtime` section says.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeSection {
    /// Its memory ceiling in MiB.
    memory_mb: u64,
    /// Whether its turns keep a checkpoint.
    #[serde(default)]
    checkpoint: bool,
    /// For a hibernated session: [`session_name`] of its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session: Option<String>,
}

/// Why a runtime cannot be snapshotted.
fn unsupported(why: &str) -> RunnerError {
    RunnerError::invalid(format!("snapshot_unsupported: {why}"))
}

/// The sealed state of `kept`, whose id is `id`; `session` says the bytes
/// belong to that id (hibernation), not to whoever holds them (a fork).
/// The caller holds `kept` between its turns.
///
/// # Errors
/// `invalid_request` (`snapshot_unsupported: …`) for a runtime that
/// cannot be snapshotted, or the engine's reason (a file is open);
/// `resource_exhausted` past `max_snapshot_mb`.
pub(super) async fn capture(
    ops: &Arc<Ops>,
    kept: &Kept,
    id: &str,
    session: bool,
) -> Result<(Vec<u8>, u64), RunnerError> {
    let engine = ops.engine(kept.lang, &Caller::host()).await?;
    let image = engine.snapshot_image().ok_or_else(|| no_image(kept.lang))?;
    let mut sections = kept.runtime.snapshot().await.map_err(|err| {
        let why = err.message.trim_start_matches("snapshot_unsupported: ");
        match err.code {
            ErrorCode::InvalidRequest => unsupported(&format!("runtime {}: {why}", redact(id))),
            _ => err,
        }
    })?;
    let ours = RuntimeSection {
        memory_mb: kept.memory_mb,
        checkpoint: kept.checkpoint,
        session: session.then(|| session_name(id)),
    };
    sections.push((
        RUNTIME.into(),
        serde_json::to_vec(&ours).map_err(|err| RunnerError::engine(err.to_string()))?,
    ));
    let created_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let contents = Contents {
        engine: engine_name(kept.lang).into(),
        image,
        created_at,
        sections,
    };
    let config = ops.config();
    let sealed = code_runner_snapshot::seal(&contents, ops.sessions.keys(&config)?.signing())
        .map_err(|err| RunnerError::engine(err.to_string()))?;
    if sealed.len() as u64 > super::bounds(&config).max_stored {
        return Err(RunnerError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "the snapshot is {} bytes, over max_snapshot_mb ({} MiB)",
                sealed.len(),
                config.max_snapshot_mb
            ),
        ));
    }
    Ok((sealed, created_at))
}

/// Each refusal of a stored snapshot, as the caller reads it.
fn refused(err: SnapshotError) -> RunnerError {
    RunnerError::invalid(format!("the snapshot cannot be restored: {err}"))
}

/// A runtime made from a snapshot, not yet kept under an id.
pub(super) struct Revived {
    pub key: RuntimeKey,
    pub runtime: Arc<dyn Runtime>,
    pub dir: WorkDir,
    pub slot: Slot,
    pub live: Live,
    pub memory_mb: u64,
    pub checkpoint: bool,
    pub lang: Lang,
}

impl Revived {
    /// Keeps it under `id`; it ends with its registry entry from now on.
    pub fn keep(self, ops: &Ops, id: &str) -> Arc<Kept> {
        let held = Held {
            lang: self.lang,
            key: self.key,
            runtime: self.runtime,
            memory_mb: self.memory_mb,
            checkpoint: self.checkpoint,
        };
        let kept = ops.registry.keep(id.to_string(), held, self.dir, self.slot);
        self.live.keep();
        kept
    }

    /// Closes it (a first turn failed, or it cannot be kept).
    pub async fn discard(self) {
        self.runtime.close().await;
        self.dir.remove().await;
        self.live.finish().await;
    }
}

/// Opens `bytes` (whole, ours and within bounds, or refused before anything
/// is parsed) and makes a runtime of them, charged to `caller`. `session`:
/// the id the bytes must belong to (a hibernated session), or `None` for a
/// snapshot, which belongs to no id.
///
/// # Errors
/// `invalid_request` naming why the snapshot is refused;
/// `snapshot_unsupported` on a worker without the data interpreter;
/// `capacity` when no slot frees in time; the engine's error.
pub(super) async fn revive(
    ops: &Arc<Ops>,
    caller: &Caller,
    bytes: &[u8],
    session: Option<&str>,
) -> Result<Revived, RunnerError> {
    let config = ops.config();
    let keys = ops.sessions.keys(&config)?;
    let name = code_runner_snapshot::header_of(bytes, keys, super::bounds(&config))
        .map_err(refused)?
        .engine;
    let lang = lang_of(&name).ok_or_else(|| {
        refused(SnapshotError::OtherImage(format!(
            "it holds {name} state, which this worker does not run"
        )))
    })?;
    let engine = ops.engine(lang, caller).await?;
    let image = engine.snapshot_image().ok_or_else(|| no_image(lang))?;
    let mut contents = code_runner_snapshot::open(
        bytes,
        keys,
        engine_name(lang),
        &image,
        super::bounds(&config),
    )
    .map_err(refused)?;
    let ours = match contents
        .sections
        .iter()
        .position(|(name, _)| name == RUNTIME)
    {
        Some(at) => {
            let (_, raw) = contents.sections.remove(at);
            serde_json::from_slice::<RuntimeSection>(&raw).map_err(|err| {
                refused(SnapshotError::Damaged(format!(
                    "its runtime section: {err}"
                )))
            })?
        }
        None => RuntimeSection {
            memory_mb: config.max_memory_mb,
            checkpoint: false,
            session: None,
        },
    };
    if ours.session.as_deref() != session.map(session_name).as_deref() {
        return Err(refused(SnapshotError::Damaged(
            "it belongs to another runtime".into(),
        )));
    }
    let memory_mb = ours.memory_mb.clamp(1, config.max_memory_mb);
    let key = ops.lineage.begin(
        crate::ops::parent_of(caller),
        Lasting::Yes,
        config.max_runtimes,
    )?;
    let live = Live::new(ops, key);
    let slot = ops
        .registry
        .acquire_waiting(config.max_runtimes, crate::runtimes::registry::SLOT_WAIT)
        .await?;
    let dir = ops.engines.work_dir(lang)?;
    let options = code_runner_core::RuntimeOptions {
        checkpoint: ours.checkpoint,
        // A node runtime replays its ledger; a fork (no session) draws a fresh seed after.
        ledger: Some(super::ledger_options(&config, session.is_none())),
        ..ops
            .engines
            .runtime_options(&config, lang, memory_mb, dir.0.clone())
    };
    let runtime = match engine.restore(options, contents.sections).await {
        Ok(runtime) => runtime,
        Err(err) => {
            dir.remove().await;
            live.finish().await;
            return Err(err);
        }
    };
    Ok(Revived {
        key,
        runtime: retire::attach(ops, key, runtime),
        dir,
        slot,
        live,
        memory_mb,
        checkpoint: ours.checkpoint,
        lang,
    })
}
