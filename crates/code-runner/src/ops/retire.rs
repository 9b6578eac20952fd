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

use code_runner_core::{FailureKind, TurnEnding};

use crate::bus::catalog::Owner;
use crate::ids::RuntimeKey;
use crate::ops::namespaces::NamespaceRuntime;
use crate::worker::Inner;

/// Unpublishes what `key` published and tears down the kept runtimes it
/// started (its runtime is already closed or closing); returns every id
/// unregistered on the way.
pub(crate) async fn retire(inner: &Inner, key: RuntimeKey) -> Vec<String> {
    let mut ids = inner
        .published
        .unpublish_owner(&Owner::Runtime(key), &inner.bus);
    inner.guest_triggers.forget(key);
    for child in inner.lineage.end(key) {
        if let Some(kept) = inner.registry.take_by_key(child) {
            kept.runtime.close().await;
            tracing::debug!("closed a runtime whose starter ended");
            ids.extend(Box::pin(retire(inner, child)).await);
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
pub(crate) fn forget_lost_registrations(inner: &Inner, key: RuntimeKey, ending: &TurnEnding) {
    let TurnEnding::Faulted(fault) = ending else {
        return;
    };
    if fault.kind() != FailureKind::WorkerExit {
        return;
    }
    let ids = inner
        .published
        .unpublish_owner(&Owner::Runtime(key), &inner.bus);
    if !ids.is_empty() {
        tracing::info!(functions = ?ids, "a runtime may have lost its interpreter; unregistered what its guest code published");
    }
}

/// After a turn on a namespace runtime whose handlers were defined again
/// from their sources: the ids its guest code registered itself (node's
/// `iii.registerFunction` inside a handler) have no source and went with the
/// old interpreter, so they are unregistered; returns them.
pub(crate) fn forget_unsourced(inner: &Inner, runtime: &NamespaceRuntime) -> Vec<String> {
    if !runtime.take_redefined() {
        return Vec::new();
    }
    let owner = Owner::Namespace {
        namespace: runtime.namespace.clone(),
        lang: runtime.lang,
    };
    let ids = inner
        .published
        .unpublish_owner_except(&owner, &runtime.defined_ids(), &inner.bus);
    if !ids.is_empty() {
        tracing::info!(functions = ?ids, "registered from guest code in a namespace runtime that lost its interpreter; unregistered");
    }
    ids
}

/// Tears down the runtime behind `key` wherever it lives (kept, or in its
/// first call); returns what that unregistered, or `None` if it is gone.
pub(crate) async fn teardown_key(inner: &Inner, key: RuntimeKey) -> Option<Vec<String>> {
    if let Some(kept) = inner.registry.take_by_key(key) {
        kept.runtime.close().await;
    } else {
        inner.lineage.runtime(key)?.close().await;
    }
    Some(retire(inner, key).await)
}

/// Tears down the kept runtime `id`; returns what that unregistered.
///
/// # Errors
/// `runtime_not_found` / `expired`, as [`crate::runtimes::registry::Registry::get`].
pub(crate) async fn remove_kept(
    inner: &Inner,
    id: &str,
) -> Result<Vec<String>, code_runner_core::RunnerError> {
    let kept = inner.registry.remove(id).await?;
    Ok(retire(inner, kept.key).await)
}

/// Reaps idle kept runtimes and retires them.
pub(crate) async fn reap(inner: &Inner, ttl: Duration) {
    for kept in inner.registry.reap(ttl).await {
        retire(inner, kept.key).await;
    }
}

/// Closes every namespace runtime and kept runtime (shutdown).
pub(crate) async fn shutdown(inner: &Inner) {
    for runtime in inner.namespaces.take_all() {
        runtime.runtime.close().await;
        retire(inner, runtime.key).await;
    }
    for kept in inner.registry.close_all().await {
        retire(inner, kept.key).await;
    }
}

/// Retires a runtime in its first call when the call ends, however it ends:
/// [`Live::finish`] on the normal path, a spawned retire when the call's
/// future is dropped (a client that went away).
pub(crate) struct Live {
    inner: Option<Arc<Inner>>,
    key: RuntimeKey,
}

impl Live {
    /// Watches `key`.
    pub fn new(inner: &Arc<Inner>, key: RuntimeKey) -> Live {
        Live {
            inner: Some(inner.clone()),
            key,
        }
    }

    /// The runtime was kept: it now ends with its registry entry.
    pub fn keep(mut self) {
        self.inner = None;
    }

    /// The call is over and the runtime closed: retire it now.
    pub async fn finish(mut self) -> Vec<String> {
        match self.inner.take() {
            Some(inner) => retire(&inner, self.key).await,
            None => Vec::new(),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let key = self.key;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Some(runtime) = inner.lineage.runtime(key) {
                        runtime.close().await;
                    }
                    retire(&inner, key).await;
                });
            }
            Err(_) => {
                inner.lineage.end(key);
            }
        }
    }
}
