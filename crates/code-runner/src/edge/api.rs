//! The worker as its callers see it: what the HTTP API and the MCP server
//! serve. The composition root implements [`Api`] for [`crate::Worker`];
//! nothing in `edge/` imports the root.

use std::future::Future;

use code_runner_core::Config;
use code_runner_core::wire::FunctionsInfoResponse;
use serde_json::Value;

use crate::bus::{CallError, Caller, Listing};
use crate::ids::RuntimeKey;

/// The worker's facade.
pub trait Api: Clone + Send + Sync + 'static {
    /// Calls bus function `function_id` with `payload`, as the host.
    fn call(
        &self,
        function_id: &str,
        payload: Value,
    ) -> impl Future<Output = Result<Value, CallError>> + Send;

    /// [`Api::call`] as `caller`, a host caller the edge made: one that
    /// takes the call back when its `cancel` fires (a run the call started
    /// is aborted and answers as an aborted run does), that is handed a
    /// run's output while the guest writes it, and that continues the
    /// caller's trace ([`Caller::host_streaming`], [`Caller::continuing`]).
    fn call_as(
        &self,
        function_id: &str,
        payload: Value,
        caller: Caller,
    ) -> impl Future<Output = Result<Value, CallError>> + Send;

    /// Describes every function this worker's bus holds.
    fn functions(&self) -> impl Future<Output = Result<FunctionsInfoResponse, CallError>> + Send;

    /// Every function as listings show it, built once per change of the bus
    /// and shared by every caller until the next (MCP's `tools/list`).
    fn listing(&self) -> impl Future<Output = Result<std::sync::Arc<Listing>, CallError>> + Send;

    /// The lineage root of the live kept runtime `runtime_id` (what its
    /// guest code publishes carries it), if it is one of this worker's.
    fn runtime_root(&self, runtime_id: &str) -> Option<RuntimeKey>;

    /// Liveness and load, for `/healthz`.
    fn health(&self) -> Value;

    /// The worker's metrics in the Prometheus text format, for `GET /metrics`.
    fn metrics(&self) -> String;

    /// An HTTP request was answered with `status` (counted in the metrics).
    fn answered_http(&self, status: u16);

    /// The configuration in force (caps and timeouts for tool descriptions).
    fn config(&self) -> Config;

    /// What python offers (the data stack, shadowed packages), for what
    /// tool descriptions promise.
    fn offer(&self) -> crate::runtimes::engines::Offer;

    /// Wakes on every change of the bus's listing (not on a function
    /// registered again as it was).
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;
}
