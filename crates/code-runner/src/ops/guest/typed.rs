//! `iii.fn.<name>(payload)`: a call by name (code mode). The name is found
//! among the functions guest code may call by the one naming rule
//! ([`crate::ops::describe::names`]); the payload is checked against the
//! function's request schema here, on the host, before dispatch, so a
//! payload that does not match never reaches the handler; then the call
//! goes the way `iii.trigger`'s does (the bridge, the turn's budget).

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Instant;

use code_runner_core::{BindingCall, BindingError, RunnerError};
use jsonschema::{PatternOptions, Validator};
use serde::Deserialize;
use serde_json::Value;

use super::GuestContext;
use super::trigger::{TriggerRequest, dispatch};
use crate::bus::FUNCTION_NOT_FOUND;
use crate::bus::catalog::MAX_FORMAT_BYTES;
use crate::bus::payload::parse;
use crate::ops::describe::{LIST_TIMEOUT, named, with_schemas};
use crate::ops::{Ops, Reach, Slice};

/// Most names in a path (the engines refuse more before calling).
const MAX_PATH_PARTS: usize = 8;
/// Longest name in a path, in bytes.
const MAX_PART_BYTES: usize = 256;
/// Most bytes a compiled `pattern` may take (the `regex` crate's engine,
/// linear in the text it matches; never backtracking).
const MAX_PATTERN_BYTES: usize = 1 << 20;

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
    let (schema, payload) = (callable.request.clone(), request.args);
    let checked =
        tokio::task::spawn_blocking(move || check_payload(&schema, &payload).map(|()| payload))
            .await
            .map_err(|err| BindingError::message(format!("iii.fn.{name}: {err}")))?;
    let payload = checked.map_err(|why| {
        BindingError::from(RunnerError::invalid(format!(
            "iii.fn.{name} ({}): the payload does not match its request schema: {why}; it was not sent",
            callable.id
        )))
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

/// Checks `payload` against `schema` (a JSON Schema of at most 16 KiB,
/// compiled with the `jsonschema` crate); the first mismatch names the
/// payload's path and the schema's rule. A schema that says nothing, is
/// larger, or does not compile (a remote `$ref`) is left to the handler.
fn check_payload(schema: &Value, payload: &Value) -> Result<(), String> {
    let constrains = schema.as_object().is_some_and(|map| {
        [
            "type",
            "properties",
            "$ref",
            "enum",
            "const",
            "anyOf",
            "oneOf",
            "allOf",
            "required",
        ]
        .iter()
        .any(|key| map.contains_key(*key))
    });
    let Some(text) = serde_json::to_string(schema)
        .ok()
        .filter(|text| constrains && text.len() <= MAX_FORMAT_BYTES)
    else {
        return Ok(());
    };
    let Some(validator) = compiled(text, schema) else {
        return Ok(());
    };
    match validator.validate(payload) {
        Ok(()) => Ok(()),
        Err(err) => {
            let at = err.instance_path().to_string();
            Err(format!(
                "at {} {} (rule {})",
                if at.is_empty() { "/" } else { at.as_str() },
                err.masked(),
                err.schema_path()
            ))
        }
    }
}

/// Most compiled request schemas kept (each from a schema of at most 16
/// KiB); when full, the cache starts again empty.
const MAX_COMPILED: usize = 256;

/// Compiled request schemas by their text, shared by every worker of the
/// process: the same text compiles to the same validator.
static COMPILED: LazyLock<Mutex<HashMap<String, Arc<Validator>>>> = LazyLock::new(Mutex::default);

/// The validator of `schema` (serialized as `text`), compiled once; `None`
/// when it does not compile (a remote `$ref`).
fn compiled(text: String, schema: &Value) -> Option<Arc<Validator>> {
    let cache = || COMPILED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(validator) = cache().get(&text) {
        return Some(validator.clone());
    }
    let built = jsonschema::options()
        .with_pattern_options(
            PatternOptions::regex()
                .size_limit(MAX_PATTERN_BYTES)
                .dfa_size_limit(MAX_PATTERN_BYTES),
        )
        .build(schema);
    let validator = match built {
        Ok(validator) => Arc::new(validator),
        Err(err) => {
            tracing::debug!(error = %err.masked(), "a request schema did not compile; the payload goes unchecked");
            return None;
        }
    };
    let mut cached = cache();
    if cached.len() >= MAX_COMPILED {
        cached.clear();
    }
    cached.insert(text, validator.clone());
    Some(validator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A mismatch names the payload's path and the schema's rule; a schema
    /// that says nothing checks nothing.
    #[test]
    fn a_mismatch_names_the_path_and_the_rule() {
        let schema = json!({"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}});
        assert_eq!(
            check_payload(&schema, &json!({"name": "x", "tags": ["a"]})),
            Ok(())
        );
        let why = check_payload(&schema, &json!({"name": 5})).unwrap_err();
        assert!(
            why.contains("at /name") && why.contains("/properties/name/type"),
            "{why}"
        );
        let why = check_payload(&schema, &json!({"name": "x", "tags": ["c"]})).unwrap_err();
        assert!(why.contains("at /tags/0") && why.contains("enum"), "{why}");
        let why = check_payload(&schema, &json!({})).unwrap_err();
        assert!(why.contains("required"), "{why}");
        let any =
            json!({"title": "any", "description": "No format was registered: any JSON value."});
        assert_eq!(check_payload(&any, &json!([1, 2])), Ok(()));
    }

    /// A backtracking-hungry pattern runs on the linear engine.
    #[test]
    fn patterns_run_in_linear_time() {
        let schema = json!({"type": "string", "pattern": "^(a+)+$"});
        let text = format!("{}b", "a".repeat(100_000));
        assert!(check_payload(&schema, &Value::String(text)).is_err());
    }
}
