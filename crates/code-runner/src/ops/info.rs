//! `engine::functions::info`: what each bus function is and takes.

use std::sync::Arc;

use code_runner_core::wire::{FunctionsInfoRequest, FunctionsInfoResponse, schema_of};
use serde_json::Value;

use crate::bus::names::FUNCTIONS_INFO;
use crate::bus::payload::parse;
use crate::bus::{Bus, CallError, Caller, Function};
use crate::ops::{Ops, handler_as};

/// `engine::functions::info`, for the composition root.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        FUNCTIONS_INFO,
        Function::new(
            "Describe bus functions: description, request_schema and response_schema for each id asked (an unknown id gets an entry with an error).",
            schema_of::<FunctionsInfoRequest>(),
            schema_of::<FunctionsInfoResponse>(),
            handler_as(ops, info),
        ),
    )
}

/// `engine::functions::info`: at most [`code_runner_core::wire::MAX_INFO_IDS`]
/// ids (refused while parsing), each distinct id described once, the answer
/// built off the async workers.
pub(crate) async fn info(
    bus: Arc<Bus>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    let request: FunctionsInfoRequest = parse(payload)?;
    let job = move || serde_json::to_value(bus.info(&request.function_ids)).unwrap_or(Value::Null);
    Ok(crate::ops::host_work::run(&caller, "describing functions", job).await?)
}
