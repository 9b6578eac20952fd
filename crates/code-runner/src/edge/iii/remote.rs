//! Guest lineage across the engine: a call that guest code on one worker
//! makes to another worker's function carries who made it, so the callee
//! charges and ends what it starts as it would for its own guests.
//!
//! The calling worker's link adds it to the invocation's `metadata` (the
//! engine carries metadata beside the payload; guest code cannot set or
//! remove it, since `iii.trigger` takes no metadata and every guest call
//! through the engine gets it): `{"code_runner_guest": {"worker", "tree",
//! "left_ms"}}`, the calling worker's name, its name for the caller's tree
//! (its host call's root) and what is left of the calling turn's budget.
//!
//! The callee ([`caller`]) turns it into a guest [`Caller`]: a lineage node
//! for the call, child of a key standing for that tree, so every runtime
//! the call starts (a nested run, kept or not) counts against the tree's
//! share on this worker, and is ended at the calling turn's deadline at
//! the latest, or when the calling worker says the tree ended
//! (`code-runner@<worker>::release`, see `routing::release`).
//! Without metadata a call is a host call. A peer that sends it for its
//! own calls only restricts itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runner_core::AbortSignal;
use serde_json::Value;

use crate::bus::outbound::RemoteGuest;
use crate::bus::{Caller, GuestCaller};
use crate::ids::RuntimeKey;
use crate::ops::Ops;
use crate::telemetry::TraceParent;

/// The metadata key a guest's lineage travels under.
pub const METADATA_KEY: &str = "code_runner_guest";

impl RemoteGuest {
    /// The invocation metadata that carries it, from worker `worker`.
    pub(crate) fn metadata(mut self, worker: &str) -> Value {
        self.worker = worker.to_string();
        serde_json::json!({ METADATA_KEY: self })
    }

    /// The lineage in an invocation's metadata, if any.
    fn from_metadata(metadata: Option<&Value>) -> Option<RemoteGuest> {
        let value = metadata?.get(METADATA_KEY)?;
        let guest: RemoteGuest = serde_json::from_value(value.clone()).ok()?;
        (!guest.worker.is_empty() && guest.worker.len() <= 256 && guest.tree.len() <= 256)
            .then_some(guest)
    }
}

/// Who makes an engine call with `metadata`: the host, or a guest of
/// another worker (see the module's documentation), whose call's node ends
/// at its deadline, capped by this worker's `max_timeout_ms`.
pub(crate) fn caller(ops: &Arc<Ops>, metadata: Option<&Value>) -> Caller {
    // Within the iii SDK's span of this invocation, a child of the engine's.
    let trace = TraceParent::current();
    let Some(guest) = RemoteGuest::from_metadata(metadata) else {
        return Caller::host().continuing(trace);
    };
    let max = Duration::from_millis(ops.config().max_timeout_ms);
    let left = Duration::from_millis(guest.left_ms).min(max);
    let tree = RuntimeKey::remote_tree(&guest.worker, &guest.tree);
    let call = ops.lineage.begin_remote(tree);
    let scope = AbortSignal::new();
    let ends = (Arc::downgrade(ops), scope.clone());
    tokio::spawn(async move {
        tokio::time::sleep(left).await;
        ends.1.abort();
        if let Some(ops) = ends.0.upgrade() {
            crate::ops::retire::retire(&ops, call).await;
        }
    });
    Caller {
        cancel: None,
        live: None,
        trace,
        guest: Some(GuestCaller {
            runtime: call,
            root: tree,
            namespace: None,
            deadline: Instant::now() + left,
            scope,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lineage survives the trip through metadata; anything else in
    /// the metadata, or none, is a host call's.
    #[test]
    fn lineage_reads_back_from_metadata() {
        let guest = RemoteGuest {
            worker: String::new(),
            tree: "salt.3".into(),
            left_ms: 900,
        };
        let metadata = guest.clone().metadata("a");
        let read = RemoteGuest::from_metadata(Some(&metadata)).unwrap();
        assert_eq!(read.worker, "a");
        assert_eq!((read.tree.as_str(), read.left_ms), ("salt.3", 900));
        assert!(RemoteGuest::from_metadata(None).is_none());
        assert!(RemoteGuest::from_metadata(Some(&serde_json::json!({"x": 1}))).is_none());
        let nameless = serde_json::json!({ METADATA_KEY: guest });
        assert!(RemoteGuest::from_metadata(Some(&nameless)).is_none());
    }
}
