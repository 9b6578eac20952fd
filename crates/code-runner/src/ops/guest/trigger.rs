//! `iii.trigger`: a guest's call to any function, through the bridge, within
//! what is left of its turn; fire-and-forget calls are bounded per turn.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use code_runner_core::{BindingCall, BindingError, ErrorCode, RunnerError};
use serde::Deserialize;
use serde_json::Value;

use super::{GuestContext, binding_error};
use crate::bus::bridge;
use crate::bus::names::RUN;
use crate::bus::outbound::RemoteGuest;
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, GuestCaller};
use crate::ops::Ops;
use crate::ops::approvals;
use crate::telemetry::CallKind;

/// Fire-and-forget calls one turn may have in flight; one more is refused.
pub const MAX_FIRE_AND_FORGET: usize = 16;

/// The payload of `iii.trigger`, shaped like the iii SDK's `TriggerRequest`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TriggerRequest {
    pub function_id: String,
    #[serde(default)]
    pub payload: Value,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub action: Option<TriggerAction>,
}

/// How a call is routed, as the iii SDK spells it.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub(super) enum TriggerAction {
    /// Through a named queue.
    Enqueue { queue: String },
    /// Fire-and-forget: answered at once with null.
    Void,
}

/// How long a call that ran out of the run's time holds its answer past the
/// run's deadline, so the engine's stop, not the call's rejection, ends the
/// turn (the rejection reaches only a guest the engine failed to stop).
const RUN_DEADLINE_GRACE: Duration = Duration::from_millis(1000);

/// A call's timeout this close to the run's deadline is the run's own.
const RUN_DEADLINE_NEAR: Duration = Duration::from_millis(50);

/// `iii.trigger`: a bus call that passes the bridge first, whose budget is
/// clamped to what is left of the calling turn.
pub(super) async fn trigger(
    ops: Weak<Ops>,
    ctx: Arc<GuestContext>,
    in_flight: Arc<AtomicUsize>,
    args: Value,
    call: BindingCall,
) -> Result<Value, BindingError> {
    let ops = ops
        .upgrade()
        .ok_or_else(|| BindingError::message("the worker is shutting down"))?;
    let request: TriggerRequest = parse(args)
        .map_err(|err| BindingError::message(format!("iii.trigger: {}", err.message)))?;
    dispatch(ops, ctx, in_flight, request, call).await
}

/// A guest's call of `request.function_id` (from `iii.trigger` or `iii.fn`):
/// the bridge first, then the call within what is left of the turn.
pub(super) async fn dispatch(
    ops: Arc<Ops>,
    ctx: Arc<GuestContext>,
    in_flight: Arc<AtomicUsize>,
    request: TriggerRequest,
    call: BindingCall,
) -> Result<Value, BindingError> {
    let config = ops.config();
    bridge::admit(
        &ops.guest_triggers,
        &config.guest_trigger_types,
        ctx.root,
        &request.function_id,
        &request.payload,
        |target| approvals::needs_approval(&config.approval_required, &ops.bus, target),
    )
    .map_err(|refusal| BindingError {
        code: Some(bridge::FORBIDDEN.into()),
        message: refusal.to_string(),
    })?;
    if ops.published.owner_of(&request.function_id) == Some(ctx.owner()) {
        return Err(binding_error(RunnerError::invalid(format!(
            "iii.trigger({}): that function is served by this same runtime, which runs one turn at a time; call its handler directly",
            request.function_id
        ))));
    }
    let mut call = call;
    if approvals::needs_approval(&config.approval_required, &ops.bus, &request.function_id) {
        if request.action.is_some() {
            return Err(binding_error(RunnerError::invalid(format!(
                "iii.trigger({}): the function waits for a person's approval; call it without an action",
                request.function_id
            ))));
        }
        // The wait does not count against the run: its deadline moves on.
        let stood = approvals::wait(
            &ctx.approvals,
            &ctx.clock,
            &ctx.scope,
            &request.function_id,
            &request.payload,
        )
        .await?;
        call.deadline += stood;
    }
    let left = call.deadline.saturating_duration_since(Instant::now());
    let budget = request
        .timeout_ms
        .map_or(left, |ms| Duration::from_millis(ms).min(left));
    let caller = Caller {
        cancel: None,
        live: None,
        trace: ctx.trace.clone(),
        guest: Some(GuestCaller {
            runtime: ctx.key,
            root: ctx.root,
            namespace: ctx.namespace.clone(),
            deadline: Instant::now() + budget,
            scope: ctx.scope.clone(),
        }),
    };
    let mut payload = request.payload;
    if let Some(map) = payload
        .as_object_mut()
        .filter(|_| is_run(&request.function_id))
    {
        let asked = map
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .unwrap_or(config.default_timeout_ms);
        let clamped = asked
            .min(u64::try_from(budget.as_millis()).unwrap_or(u64::MAX))
            .max(1);
        map.insert("timeout_ms".into(), Value::from(clamped));
    }
    let function_id = request.function_id;
    match request.action {
        None => {
            let answer = route(&ops, &function_id, payload, caller, budget).await;
            let timed_out = match &answer {
                Err(_) => true,
                Ok(Err(err)) => err.code == ErrorCode::Timeout.as_str(),
                Ok(Ok(_)) => false,
            };
            // A timeout that comes as the run's own time runs out is the
            // run's: its deadline, not a rejection the guest could race it
            // with, ends the turn.
            let run_left = call.deadline.saturating_duration_since(Instant::now());
            if timed_out && run_left < RUN_DEADLINE_NEAR {
                // The engine stops the turn at the deadline; the answer
                // below only reaches a guest that outlived it.
                tokio::time::sleep_until((call.deadline + RUN_DEADLINE_GRACE).into()).await;
            }
            match answer {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(err)) => Err(BindingError {
                    code: Some(err.code),
                    message: err.message,
                }),
                Err(_) => Err(BindingError {
                    code: Some(ErrorCode::Timeout.as_str().into()),
                    message: format!(
                        "iii.trigger({function_id}) got no answer within {} ms",
                        budget.as_millis()
                    ),
                }),
            }
        }
        Some(TriggerAction::Void) => {
            // Answered at once; the call runs on within the turn's budget,
            // and at most MAX_FIRE_AND_FORGET of a turn's at a time, whether
            // this worker or another worker behind the engine serves it. (The
            // engine's own void would be answered at once with nothing to
            // wait for, so a loop sent 34 000 of them in 3 s.) Through the
            // engine it is a plain call whose answer is dropped.
            let reserved = in_flight.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_FIRE_AND_FORGET).then_some(n + 1)
            });
            if reserved.is_err() {
                return Err(binding_error(RunnerError::new(
                    ErrorCode::Capacity,
                    format!(
                        "iii.trigger: {MAX_FIRE_AND_FORGET} fire-and-forget calls of this turn are still running; wait for one or call without an action"
                    ),
                )));
            }
            tokio::spawn(async move {
                if let Ok(Err(err)) = route(&ops, &function_id, payload, caller, budget).await {
                    tracing::debug!(function = %function_id, code = %err.code, "a fire-and-forget call failed");
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
            });
            Ok(Value::Null)
        }
        Some(TriggerAction::Enqueue { queue }) => {
            Err(binding_error(RunnerError::invalid(format!(
                "iii.trigger: action enqueue (queue `{}`) needs a queue provider, and this worker has none; call without an action, or with {{\"type\": \"void\"}}",
                queue.chars().take(100).collect::<String>()
            ))))
        }
    }
}

/// Whether `id` starts a run: `code-runner::run` or a worker's scoped
/// `code-runner@<worker>::run`, whose timeout is clamped to the caller's.
fn is_run(id: &str) -> bool {
    id == RUN || (id.starts_with("code-runner@") && id.ends_with("::run"))
}

/// The lineage of a call made by guest code `guest` of this worker, as it
/// crosses to another worker.
fn remote_guest(ops: &Ops, guest: &GuestCaller) -> RemoteGuest {
    let left = guest
        .deadline
        .saturating_duration_since(std::time::Instant::now());
    RemoteGuest {
        worker: String::new(),
        tree: ops.lineage.tree_name(guest.root),
        left_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
    }
}

/// Calls `function_id` as `caller`, waiting at most `budget`: on this
/// worker's bus when it holds the id, else through the engine (when linked).
async fn route(
    ops: &Ops,
    function_id: &str,
    payload: Value,
    caller: Caller,
    budget: Duration,
) -> Result<Result<Value, CallError>, tokio::time::error::Elapsed> {
    let root = caller.guest.as_ref().map(|g| g.root);
    let call = async {
        match ops.outbound_for(function_id) {
            Some(out) => {
                if let Some(root) = root {
                    ops.lineage.mark_called_out(root);
                }
                let guest = caller.guest.as_ref().map(|g| remote_guest(ops, g));
                // The engine's call span is a child of this one: the iii
                // SDK sends the context the call is polled in.
                let span = ops
                    .bus
                    .traces()
                    .start(function_id, CallKind::Outbound, &caller.trace);
                let answer = span
                    .parent()
                    .around(out.call(function_id, payload, budget, guest))
                    .await;
                span.end(answer.as_ref().err().map(|err| err.code.as_str()));
                answer
            }
            None => ops.bus.call_as(function_id, payload, caller).await,
        }
    };
    let answer = tokio::time::timeout(budget, call).await;
    if let (Some(root), Ok(Ok(value))) = (root, &answer)
        && ops.lineage.root(root).is_some()
    {
        bridge::observe(&ops.guest_triggers, root, function_id, value);
    }
    answer
}
