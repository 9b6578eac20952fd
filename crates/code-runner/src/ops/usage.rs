//! `code-runner::usage` (issue 49): what each tenant (a namespace, or
//! `host`) used in a period, from the sums `telemetry::usage` keeps per
//! minute for a day, so a platform can bill or cap. Host authority: one
//! tenant's usage is not another's to read, so guest code is refused.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use code_runner_core::RunnerError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bus::bridge;
use crate::bus::names::USAGE;
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ops::{Ops, handler_as};
use crate::telemetry::Totals;

/// `code-runner::usage`'s request.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageRequest {
    /// The period's start, in Unix seconds (default: a day before `to`; sums older than a day are not kept).
    #[serde(default)]
    pub from: Option<u64>,
    /// The period's end, in Unix seconds (default: now).
    #[serde(default)]
    pub to: Option<u64>,
}

/// `code-runner::usage`'s answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UsageResponse {
    /// The period's start, in Unix seconds (whole minutes are summed).
    pub from: u64,
    /// The period's end, in Unix seconds.
    pub to: u64,
    /// What each tenant used in it: a namespace (`ns::`), `host` for what no namespace owns, `other` past 64 tenants.
    pub tenants: std::collections::BTreeMap<String, Totals>,
}

/// The function, for the composition root.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        USAGE,
        Function::new(
            "Per-tenant usage for a period (host only): calls, CPU and wall milliseconds and egress bytes of runs and published functions' calls, by namespace (host for the rest), summed per minute for the last day.",
            code_runner_core::wire::schema_of::<UsageRequest>(),
            code_runner_core::wire::schema_of::<UsageResponse>(),
            handler_as(ops, usage),
        ),
    )
}

async fn usage(ops: Arc<Ops>, payload: Value, caller: Caller) -> Result<Value, CallError> {
    if caller.guest.is_some() {
        return Err(bridge::refuse_guest(USAGE, "reading usage"));
    }
    let request: UsageRequest = parse(payload)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let to = request.to.unwrap_or(now);
    let from = request.from.unwrap_or(to.saturating_sub(24 * 3600));
    if from > to {
        return Err(
            RunnerError::invalid(format!("usage: from ({from}) is after to ({to})")).into(),
        );
    }
    let tenants = ops.metrics.tally.period(from, to);
    let answer = UsageResponse { from, to, tenants };
    Ok(serde_json::to_value(answer).unwrap_or(Value::Null))
}
