//! `iii.fn.<name>(payload)`: a call by name (code mode). The name is found
//! among the functions guest code may call by the one naming rule
//! ([`crate::ops::describe::names`]); the payload is checked against the
//! function's request schema here, on the host, before dispatch, so a
//! payload that does not match never reaches the handler; then the call
//! goes the way `iii.trigger`'s does (the bridge, the turn's budget).

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Weak};
use std::time::Instant;

use code_runner_core::{BindingCall, BindingError, RunnerError};
use serde::Deserialize;
use serde_json::Value;

use super::GuestContext;
use super::check::{Rejected, TurnChecks, check};
use super::trigger::{TriggerRequest, dispatch};
use crate::bus::FUNCTION_NOT_FOUND;
use crate::bus::payload::parse;
use crate::ops::describe::{LIST_TIMEOUT, named, with_schemas};
use crate::ops::{Ops, Reach, Slice};

/// Most names in a path (the engines refuse more before calling).
const MAX_PATH_PARTS: usize = 8;
/// Longest name in a path, in bytes.
const MAX_PART_BYTES: usize = 256;

/// What the engines send for `iii.fn.a.b(args)`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathCall {
    path: Vec<String>,
    #[serde(default)]
    args: Value,
}

/// `iii.fn.<name>(payload)`.
pub(super) async fn call_by_name(
    ops: Weak<Ops>,
    ctx: Arc<GuestContext>,
    in_flight: Arc<AtomicUsize>,
    checks: TurnChecks,
    args: Value,
    call: BindingCall,
) -> Result<Value, BindingError> {
    let ops = ops
        .upgrade()
        .ok_or_else(|| BindingError::message("the worker is shutting down"))?;
    let request: PathCall =
        parse(args).map_err(|err| BindingError::message(format!("iii.fn: {}", err.message)))?;
    let name = checked_name(&request.path).map_err(BindingError::from)?;
    let wait = LIST_TIMEOUT.min(call.deadline.saturating_duration_since(Instant::now()));
    let reach = Reach::of(&ops);
    let found = named(&reach, &name, wait).await;
    let mut callable = match found.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(BindingError {
                code: Some(FUNCTION_NOT_FOUND.into()),
                message: format!(
                    "iii.fn.{name}: no function guest code may call has this name (an id's name is its `::` parts joined with `.`, other characters than letters, digits and _ as _); code-runner::describe lists them"
                ),
            });
        }
        many => {
            let ids: Vec<&str> = many.iter().map(|c| c.id.as_str()).collect();
            return Err(RunnerError::invalid(format!(
                "iii.fn.{name} is the name of {} functions ({}); call the one you mean with iii.trigger",
                ids.len(),
                ids.join(", ")
            ))
            .into());
        }
    };
    if callable.remote {
        with_schemas(&reach, std::slice::from_mut(&mut callable), wait).await;
    }
    let schema = callable.request.clone();
    let checked = check(schema, request.args, &checks, &ctx.scope, call.deadline).await;
    let payload = checked.map_err(|rejected| match rejected {
        Rejected::Mismatch(why) => BindingError::from(RunnerError::invalid(format!(
            "iii.fn.{name} ({}): the payload does not match its request schema: {why}; it was not sent",
            callable.id
        ))),
        Rejected::Refused(err) => BindingError::from(RunnerError::new(
            err.code,
            format!(
                "iii.fn.{name} ({}): {}; it was not sent (iii.trigger sends a payload unchecked)",
                callable.id, err.message
            ),
        )),
    })?;
    let trigger = TriggerRequest {
        function_id: callable.id,
        payload,
        timeout_ms: None,
        action: None,
    };
    dispatch(ops, ctx, in_flight, trigger, call).await
}

/// The path as a name (`my_app.greet`), within its bounds.
fn checked_name(path: &[String]) -> Result<String, RunnerError> {
    if path.is_empty() {
        return Err(RunnerError::invalid(
            "iii.fn: name a function, e.g. iii.fn.my_app.greet(payload) for my-app::greet",
        ));
    }
    if path.len() > MAX_PATH_PARTS || path.iter().any(|p| p.len() > MAX_PART_BYTES) {
        return Err(RunnerError::invalid(format!(
            "iii.fn: a name is at most {MAX_PATH_PARTS} parts of at most {MAX_PART_BYTES} bytes"
        )));
    }
    Ok(path.join("."))
}
