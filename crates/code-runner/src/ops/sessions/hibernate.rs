//! Hibernation: a kept runtime idle past `hibernate_after_secs` is
//! written to the snapshot store and closed, freeing its slot; its id keeps
//! working, and the next call for it wakes it (`restored: true` in that
//! run's answer). So `max_runtimes` bounds the *active* runtimes, and the
//! sessions are bounded by the store (`max_sessions`).
//!
//! This decides which runtimes sleep and how they come back:
//! - **who**: a kept runtime that can be snapshotted (python's data
//!   interpreter; node or TypeScript whose turn ledger can be replayed)
//!   that a host started (not guest code), that started no runtime still
//!   alive, published nothing, waits on no approval and is between calls;
//!   one whose hibernation failed (a file open, past `max_snapshot_mb`, a
//!   ledger that cannot be replayed) stays
//!   live until its next call, and the idle TTL ends it as before;
//! - **where**: the store, under the SHA-256 of its id (never the id), its
//!   state bound to that id (a session's bytes filed under another id are
//!   refused);
//! - **waking**: on this worker after a restart, or on another that shares
//!   the store; the stored copy is deleted once the runtime is live again
//!   (a session lives in exactly one place); a worker that woke a session
//!   another worker minted leaves a holder record in a shared store, so
//!   calls routed by the id's minter find it;
//! - **ending**: `session_ttl_secs` after it slept, a session is deleted
//!   (checked at most once a minute); `teardown` deletes it at once;
//! - **shutdown** ([`drain`]): new runs are refused, running turns finish
//!   within their deadlines, and every kept runtime that can sleep does.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use code_runner_core::{ErrorCode, RunnerError};
use code_runner_snapshot::{Kind, session_name};

use super::{Sessions, seal};
use crate::bus::Caller;
use crate::bus::catalog::Owner;
use crate::ids::redact;
use crate::ops::Ops;
use crate::ops::retire;
use crate::runtimes::registry::{Kept, Passage};

/// How often hibernated sessions are checked against `session_ttl_secs`.
const EXPIRY_EVERY: Duration = Duration::from_secs(60);
/// The most a holder record (a worker's name) may be.
const MAX_HOLDER_BYTES: u64 = 256;

/// Whether `kept` (id `id`) may hibernate now.
fn eligible(ops: &Ops, id: &str, kept: &Kept) -> bool {
    !kept.is_sleepless()
        && ops.lineage.root(kept.key) == Some(kept.key)
        && !ops.lineage.has_children(kept.key)
        && ops.suspensions.waiting_on(id).is_none()
        && !ops.published.owns_any(&Owner::Runtime(kept.key))
}

/// Whether hibernation is on: `hibernate_after_secs` set and shorter than
/// the idle TTL (which otherwise ends the runtime first).
fn enabled(ops: &Ops) -> Option<Duration> {
    let config = ops.config();
    let after = config.hibernate_after_secs;
    (after > 0 && after < config.idle_ttl_secs).then(|| Duration::from_secs(after))
}

/// The reaper's turn: hibernates the runtimes idle past
/// `hibernate_after_secs`, and ends the sessions past `session_ttl_secs`.
pub(crate) async fn sweep(ops: &Arc<Ops>) {
    let Some(after) = enabled(ops) else {
        return;
    };
    hibernate_idle(ops, after).await;
    expire(ops).await;
}

/// Hibernates every eligible runtime idle for at least `after`; returns how many slept.
async fn hibernate_idle(ops: &Arc<Ops>, after: Duration) -> usize {
    let taken = ops
        .registry
        .take_sleepy(after, |id, kept| eligible(ops, id, kept));
    let mut slept = 0;
    for (id, kept, passage) in taken {
        slept += usize::from(hibernate(ops, id, kept, passage).await);
    }
    slept
}

/// Writes `kept` to the store and closes it, or files it again under `id`
/// when that fails (saying why in the log); says whether it slept.
async fn hibernate(ops: &Arc<Ops>, id: String, kept: Arc<Kept>, passage: Passage) -> bool {
    let written = async {
        let (sealed, _) = seal::capture(ops, &kept, &id, true).await?;
        let config = ops.config();
        let store = ops.sessions.store(&config)?;
        let name = session_name(&id);
        let bytes = sealed.len();
        store
            .put(Kind::Session, &name, sealed, Some(config.max_sessions))
            .await
            .map_err(|why| RunnerError::new(ErrorCode::ResourceExhausted, why))?;
        if Sessions::shared(&config) {
            // It lives in the store now, not with a worker.
            if let Err(why) = store.delete(Kind::Holder, &name).await {
                tracing::warn!("a hibernated session's holder record stays: {why}");
            }
        }
        Ok::<usize, RunnerError>(bytes)
    }
    .await;
    match written {
        Ok(bytes) => {
            ops.links.release(kept.key);
            kept.close().await;
            retire::retire(ops, kept.key).await;
            tracing::info!(runtime = %redact(&id), bytes, "runtime hibernated");
            ops.metrics.hibernated();
            drop(kept);
            drop(passage);
            true
        }
        Err(err) => {
            tracing::info!(runtime = %redact(&id), "runtime stays live, not hibernated: {}", err.message);
            kept.mark_sleepless();
            ops.registry.put_back(id, kept);
            drop(passage);
            false
        }
    }
}

/// Wakes the hibernated session `id` into a kept runtime if the store
/// holds it. `true`: it is live now (woken here, or by another call
/// meanwhile), look again; `false`: there is no such session.
///
/// # Errors
/// The session's snapshot is refused (each reason its own), no slot freed
/// in time, the worker is shutting down, or the store failed.
pub(crate) async fn wake(ops: &Arc<Ops>, id: &str) -> Result<bool, RunnerError> {
    if ops.registry.transit.wait(id).await {
        return Ok(true);
    }
    if !id.starts_with("rt_") || id.len() > 256 {
        return Ok(false);
    }
    let Some(passage) = ops.registry.transit.begin(id) else {
        return Ok(true);
    };
    if ops.registry.get(id).is_ok() {
        return Ok(true);
    }
    let config = ops.config();
    let store = match ops.sessions.store(&config) {
        Ok(store) => store,
        Err(err) => {
            tracing::warn!("cannot look for a hibernated session: {}", err.message);
            return Ok(false);
        }
    };
    let name = session_name(id);
    let max = super::bounds(&config).max_stored;
    let bytes = store
        .get(Kind::Session, &name, max)
        .await
        .map_err(RunnerError::engine)?;
    let Some(bytes) = bytes else {
        return Ok(false);
    };
    ops.sessions.refuse_if_draining()?;
    let revived = seal::revive(ops, &Caller::host(), &bytes, Some(id)).await?;
    drop(bytes);
    let kept = revived.keep(ops, id);
    kept.mark_woken();
    // A session lives in one place: now here.
    if let Err(why) = store.delete(Kind::Session, &name).await {
        tracing::warn!(runtime = %redact(id), "a woken session's stored copy stays: {why}");
    }
    let me = ops.worker_name();
    if Sessions::shared(&config)
        && let Some(me) = me
        && crate::ids::minted_by(id) != Some(me)
        && let Err(why) = store
            .put(Kind::Holder, &name, me.as_bytes().to_vec(), None)
            .await
    {
        tracing::warn!(runtime = %redact(id), "cannot record where a woken session lives: {why}");
    }
    tracing::info!(runtime = %redact(id), "hibernated runtime woken");
    ops.metrics.woken();
    drop(passage);
    Ok(true)
}

/// Where a session another worker minted lives now, on a shared store:
/// the worker that woke it, if one did.
pub(crate) async fn holder(ops: &Ops, id: &str) -> Option<String> {
    let config = ops.config();
    if !Sessions::shared(&config) {
        return None;
    }
    let store = ops.sessions.store(&config).ok()?;
    let bytes = store
        .get(Kind::Holder, &session_name(id), MAX_HOLDER_BYTES)
        .await
        .ok()??;
    String::from_utf8(bytes)
        .ok()
        .filter(|name| !name.is_empty() && name.len() < MAX_HOLDER_BYTES as usize)
}

/// Whether the store holds `id`'s hibernated session.
pub(crate) async fn is_stored(ops: &Ops, id: &str) -> bool {
    let config = ops.config();
    let Ok(store) = ops.sessions.store(&config) else {
        return false;
    };
    // One byte says it is there; nothing of it is parsed.
    matches!(
        store.get(Kind::Session, &session_name(id), 0).await,
        Ok(Some(_))
    )
}

/// Ends `id`'s hibernated session (its teardown); says whether there was one.
///
/// # Errors
/// The store failed.
pub(crate) async fn end(ops: &Arc<Ops>, id: &str) -> Result<bool, RunnerError> {
    if !is_stored(ops, id).await {
        return Ok(false);
    }
    let config = ops.config();
    let store = ops.sessions.store(&config)?;
    let name = session_name(id);
    store
        .delete(Kind::Session, &name)
        .await
        .map_err(RunnerError::engine)?;
    let _ = store.delete(Kind::Holder, &name).await;
    ops.registry.remember_expired(id);
    Ok(true)
}

/// Deletes the sessions hibernated longer than `session_ttl_secs` ago
/// (at most once per [`EXPIRY_EVERY`]).
async fn expire(ops: &Arc<Ops>) {
    {
        let mut swept = ops.sessions.swept.lock().unwrap_or_else(|p| p.into_inner());
        if swept.is_some_and(|at| at.elapsed() < EXPIRY_EVERY) {
            return;
        }
        *swept = Some(Instant::now());
    }
    let config = ops.config();
    let Ok(store) = ops.sessions.store(&config) else {
        return;
    };
    let ttl = Duration::from_secs(config.session_ttl_secs);
    let listed = match store
        .list(Kind::Session, code_runner_snapshot::store::MAX_LISTED)
        .await
    {
        Ok(listed) => listed,
        Err(why) => {
            tracing::warn!("cannot list hibernated sessions: {why}");
            return;
        }
    };
    let now = SystemTime::now();
    for entry in listed {
        if now.duration_since(entry.modified).unwrap_or_default() < ttl {
            continue;
        }
        match store.delete(Kind::Session, &entry.name).await {
            Ok(()) => tracing::info!("a hibernated session passed session_ttl_secs and ended"),
            Err(why) => tracing::warn!("cannot end a hibernated session: {why}"),
        }
        let _ = store.delete(Kind::Holder, &entry.name).await;
    }
}

/// Shutdown: refuses new runs, lets the running ones finish (within the
/// longest turn's deadline), then hibernates every kept runtime that can
/// sleep; returns how many did.
pub(crate) async fn drain(ops: &Arc<Ops>) -> usize {
    ops.sessions.start_draining();
    let config = ops.config();
    if config.hibernate_after_secs == 0 {
        return 0;
    }
    let until =
        Instant::now() + Duration::from_millis(config.max_timeout_ms) + Duration::from_secs(5);
    while (ops.sessions.runs_in_flight() > 0 || ops.registry.any_busy()) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let slept = hibernate_idle(ops, Duration::ZERO).await;
    if slept > 0 {
        tracing::info!(sessions = slept, "kept runtimes hibernated for shutdown");
    }
    slept
}
