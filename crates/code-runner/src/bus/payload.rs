//! Reading a bus payload: [`parse`] into a request type, with an error that
//! names the field, and [`json_kind`] for messages about a value's shape.

use code_runner_core::RunnerError;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Deserializes a payload, which must be a JSON object (serde would also
/// take a struct's fields as an array, in order); the error names the
/// offending field.
///
/// # Errors
/// `code-runner::invalid_request` for a non-object, else with the field path
/// and serde's reason.
pub fn parse<T: DeserializeOwned>(payload: Value) -> Result<T, RunnerError> {
    if !payload.is_object() {
        return Err(RunnerError::invalid(format!(
            "the payload must be a JSON object of named fields, got {}",
            json_kind(&payload)
        )));
    }
    serde_path_to_error::deserialize(payload).map_err(|err| {
        let path = err.path().to_string();
        let reason = err.into_inner();
        if path == "." {
            RunnerError::invalid(format!("invalid payload: {reason}"))
        } else {
            RunnerError::invalid(format!("invalid field `{path}`: {reason}"))
        }
    })
}

/// The kind of a JSON value, for messages: "an array", "a string", ….
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
