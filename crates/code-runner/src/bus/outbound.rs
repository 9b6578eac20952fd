//! Calls that leave this worker: the seam the iii engine link plugs into.
//!
//! The operations call a function id this worker's bus does not hold
//! through an [`Outbound`]; the iii link (`crate::edge::iii`) implements it,
//! as its configuration store implements `settings::ConfigStore`, so nothing
//! below the edge knows the engine.

use std::time::Duration;

use code_runner_core::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bus::CallError;

/// Where calls go that this worker's bus cannot answer.
pub(crate) trait Outbound: Send + Sync {
    /// This worker's name there (a kept runtime's id carries it, so a call
    /// reaches the worker that holds the runtime).
    fn worker_name(&self) -> &str;

    /// Calls `function_id` within `timeout`, on behalf of guest code with
    /// lineage `guest` (the callee charges it), or of the host when `None`.
    fn call<'a>(
        &'a self,
        function_id: &'a str,
        payload: Value,
        timeout: Duration,
        guest: Option<RemoteGuest>,
    ) -> BoxFuture<'a, Result<Value, CallError>>;

    /// Guest code of this worker's tree `tree` (its [`RemoteGuest::tree`]
    /// name) called other workers and the tree has now ended: tells them,
    /// so what they started for it (kept runtimes) ends too, rather than
    /// at the calling turn's deadline or their idle TTL. Best effort.
    fn release<'a>(&'a self, tree: String) -> BoxFuture<'a, ()>;
}

/// The lineage of a guest call, as it crosses to another worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RemoteGuest {
    /// The calling worker's name (filled in by its link).
    #[serde(default)]
    pub worker: String,
    /// The calling worker's name for the caller's tree.
    pub tree: String,
    /// Milliseconds left of the calling turn's budget when the call was made.
    pub left_ms: u64,
}
