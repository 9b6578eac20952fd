//! The end of a runtime: what it published and what it started go with it.
//!
//! Whichever way a runtime ends (a one-shot run's end, teardown by id or by
//! namespace, the idle reaper, shutdown), [`retire`] unpublishes the
//! functions its guest code registered and tears down the kept runtimes its
//! guest code started, recursively. A runtime that survives a fault but
//! may have lost its interpreter loses what its guest code registered
//! ([`forget_lost_registrations`], [`forget_unsourced`]).

use std::sync::Arc;
use std::time::Duration;

use code_runner_core::{FailureKind, Runtime, TurnEnding};

use crate::bus::catalog::Owner;
use crate::ids::RuntimeKey;
use crate::ops::Ops;
use crate::ops::namespaces::NamespaceRuntime;

/// Unpublishes what `key` published and tears down the kept runtimes it
/// started (its runtime is already closed or closing); returns every id
/// unregistered on the way.
pub(crate) async fn retire(ops: &Ops, key: RuntimeKey) -> Vec<String> {
    let mut ids = ops
        .published
        .unpublish_owner(&Owner::Runtime(key), &ops.bus);
    ops.guest_triggers.forget(key);
    ops.links.forget(key);
    if ops.lineage.take_called_out(key)
        && let Some(out) = ops.outbound.get()
    {
        let (out, tree) = (out.clone(), ops.lineage.tree_name(key));
        tokio::spawn(async move { out.release(tree).await });
    }
    for child in ops.lineage.end(key) {
        if let Some(kept) = ops.registry.take_by_key(child) {
            kept.runtime.close().await;
            tracing::debug!("closed a runtime whose starter ended");
            ids.extend(Box::pin(retire(ops, child)).await);
        }
    }
    ids
}

/// After a turn on the plain runtime `key`: a fault of the seam's
/// worker-exit kind (a memory kill, a crash) may have cost the runtime its
/// interpreter (node replaces a heap-killed isolate), and with it the
/// handlers its guest code registered with `iii.registerFunction`. Those ids
/// are unregistered rather than left published answering errors; a later
/// turn may register them again. A timeout keeps them: node keeps its
/// isolate, and python has no registrar.
pub(crate) fn forget_lost_registrations(ops: &Ops, key: RuntimeKey, ending: &TurnEnding) {
    let TurnEnding::Faulted(fault) = ending else {
        return;
    };
    if fault.kind() != FailureKind::WorkerExit {
        return;
    }
    let ids = ops
        .published
        .unpublish_owner(&Owner::Runtime(key), &ops.bus);
    if !ids.is_empty() {
        tracing::info!(functions = ?ids, "a runtime may have lost its interpreter; unregistered what its guest code published");
    }
}

/// After a turn on a namespace runtime whose handlers were defined again
/// from their sources: the ids its guest code registered itself (node's
/// `iii.registerFunction` inside a handler) have no source and went with the
/// old interpreter, so they are unregistered; returns them.
pub(crate) fn forget_unsourced(ops: &Ops, runtime: &NamespaceRuntime) -> Vec<String> {
    if !runtime.take_redefined() {
        return Vec::new();
    }
    let owner = Owner::Namespace {
        namespace: runtime.namespace.clone(),
        lang: runtime.lang,
    };
    let ids = ops
        .published
        .unpublish_owner_except(&owner, &runtime.defined_ids(), &ops.bus);
    if !ids.is_empty() {
        tracing::info!(functions = ?ids, "registered from guest code in a namespace runtime that lost its interpreter; unregistered");
    }
    ids
}

/// Guest code of worker `worker`'s tree `tree` called this worker and the
/// tree has ended there: ends the calls it made here, and with them the
/// runtimes they started and kept; returns how many calls were ended.
pub(crate) async fn release_remote(ops: &Ops, worker: &str, tree: &str) -> usize {
    let calls = ops
        .lineage
        .remote_calls(RuntimeKey::remote_tree(worker, tree));
    for call in &calls {
        retire(ops, *call).await;
    }
    calls.len()
}

/// Tears down the runtime behind `key` wherever it lives (kept, or in its
/// first call); returns what that unregistered, or `None` if it is gone.
pub(crate) async fn teardown_key(ops: &Ops, key: RuntimeKey) -> Option<Vec<String>> {
    if let Some(kept) = ops.registry.take_by_key(key) {
        kept.runtime.close().await;
    } else {
        ops.lineage.runtime(key)?.close().await;
    }
    Some(retire(ops, key).await)
}

/// Tears down the kept runtime `id`; returns what that unregistered.
///
/// # Errors
/// `runtime_not_found` / `expired`, as [`crate::runtimes::registry::Registry::get`].
pub(crate) async fn remove_kept(
    ops: &Ops,
    id: &str,
) -> Result<Vec<String>, code_runner_core::RunnerError> {
    let kept = ops.registry.remove(id).await?;
    Ok(retire(ops, kept.key).await)
}

/// Reaps idle kept runtimes and retires them.
pub(crate) async fn reap(ops: &Ops, ttl: Duration) {
    for (id, kept) in ops.registry.take_idle(ttl) {
        // What it published goes first, so nothing routes to it while it closes.
        retire(ops, kept.key).await;
        kept.close().await;
        tracing::info!(runtime = %crate::ids::redact(&id), "reaped idle runtime");
    }
}

/// Closes every namespace runtime and kept runtime (shutdown).
pub(crate) async fn shutdown(ops: &Ops) {
    for runtime in ops.namespaces.take_all() {
        runtime.runtime.close().await;
        retire(ops, runtime.key).await;
    }
    for kept in ops.registry.close_all().await {
        retire(ops, kept.key).await;
    }
}

/// Retires a runtime in its first call when the call ends, however it ends:
/// [`Live::finish`] on the normal path, a spawned retire when the call's
/// future is dropped (a client that went away).
pub(crate) struct Live {
    ops: Option<Arc<Ops>>,
    key: RuntimeKey,
}

impl Live {
    /// Watches `key`.
    pub fn new(ops: &Arc<Ops>, key: RuntimeKey) -> Live {
        Live {
            ops: Some(ops.clone()),
            key,
        }
    }

    /// The runtime was kept: it now ends with its registry entry.
    pub fn keep(mut self) {
        self.ops = None;
    }

    /// The call is over and the runtime closed: retire it now.
    pub async fn finish(mut self) -> Vec<String> {
        match self.ops.take() {
            Some(ops) => retire(&ops, self.key).await,
            None => Vec::new(),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let Some(ops) = self.ops.take() else {
            return;
        };
        let key = self.key;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Some(runtime) = ops.lineage.runtime(key) {
                        runtime.close().await;
                    }
                    retire(&ops, key).await;
                });
            }
            Err(_) => {
                ops.lineage.end(key);
            }
        }
    }
}

/// Bounds `runtime`, the runtime behind lineage key `key`, and records it
/// there; the worker uses what this returns from then on.
pub(crate) fn attach(
    ops: &Arc<Ops>,
    key: RuntimeKey,
    runtime: Arc<dyn Runtime>,
) -> Arc<dyn Runtime> {
    let weak = Arc::downgrade(ops);
    let bounded: Arc<dyn Runtime> = crate::runtimes::bounded::Bounded::new(runtime, move || {
        if let Some(ops) = weak.upgrade() {
            tokio::spawn(discard(ops, key));
        }
    });
    ops.lineage.attach(key, bounded.clone());
    bounded
}

/// Lets go of the runtime behind `key`, which was given up: a kept runtime
/// leaves the registry (its id answers `code-runner::expired`), a namespace
/// runtime leaves its namespace (its functions are unregistered), and what
/// it published or started goes with it. A runtime in its first call is
/// closed and retired by that call.
async fn discard(ops: Arc<Ops>, key: RuntimeKey) {
    if let Some(kept) = ops.registry.take_by_key(key) {
        kept.runtime.close().await;
        tracing::warn!("a kept runtime was discarded; its id now answers expired");
    } else if let Some(ids) = crate::ops::namespaces::discard(&ops, key).await {
        tracing::warn!(functions = ?ids, "a namespace runtime was discarded; its functions were unregistered");
    } else {
        return;
    }
    retire(&ops, key).await;
}
