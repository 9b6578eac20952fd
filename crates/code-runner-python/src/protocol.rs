//! What crosses the component boundary, as JSON text (see `guest/runner.wit`).
//!
//! Host to guest: the task frame of a turn, and the reply to each binding
//! call. Guest to host: the head of a turn's end plus the result's JSON text,
//! and binding call frames. Everything the guest sends is hostile: its size is
//! checked before it is parsed, and a malformed frame costs the guest its own
//! turn (or its own binding call), nothing more.

use code_runner_core::json::{MAX_JSON_DEPTH, MAX_JSON_VALUES};
use serde::Deserialize;
use serde_json::{Map, Value};

use code_runner_core::{BindingError, Bindings, Task};

/// The deepest nesting of a result or binding argument, enforced by the
/// runner (a deeper value is not JSON to it), below serde_json's own limit
/// of 128 so that every value the runner accepts parses on the host.
pub const MAX_DEPTH: usize = code_runner_core::json::MAX_GUEST_DEPTH;

/// Largest turn head the host parses (the runner caps exception text at 64 KiB).
pub const MAX_HEAD: usize = 1 << 20;
/// Largest result text the host ever parses, whatever the runtime's
/// `max_result_bytes` (the runner sends facts, not the value, past it).
pub const MAX_RESULT: usize = code_runner_core::json::MAX_GUEST_JSON_BYTES;
/// Largest binding call frame the host parses.
pub const MAX_CALL: usize = code_runner_core::json::MAX_GUEST_JSON_BYTES;

/// A turn frame: the task, the shape of its bindings and the limits the
/// runner enforces on what it hands back.
pub fn turn(task: &Task, bindings: &Bindings, max_result: usize) -> String {
    let namespaces: Vec<Value> = bindings
        .namespaces()
        .iter()
        .map(|ns| {
            let mut spec = Map::new();
            spec.insert("global".into(), Value::from(ns.global.clone()));
            spec.insert(
                "functions".into(),
                Value::from(ns.functions.keys().cloned().collect::<Vec<_>>()),
            );
            if !ns.paths.is_empty() {
                spec.insert(
                    "paths".into(),
                    Value::from(ns.paths.iter().cloned().collect::<Vec<_>>()),
                );
            }
            spec.insert("values".into(), Value::Object(ns.values.clone()));
            if let Some(class) = &ns.error_class {
                spec.insert(
                    "error_class".into(),
                    serde_json::json!({ "name": class.name, "member_name_property": class.member_name_property }),
                );
            }
            Value::Object(spec)
        })
        .collect();
    let mut frame = match task {
        Task::Program(code) => serde_json::json!({ "code": code }),
        Task::Define { key, source } => serde_json::json!({ "define": key, "code": source }),
        Task::Invoke { key, payload } => serde_json::json!({ "invoke": key, "payload": payload }),
    };
    frame["bindings"] = Value::Array(namespaces);
    frame["max_depth"] = Value::from(MAX_DEPTH);
    frame["max_result"] = Value::from(max_result);
    frame.to_string()
}

/// The reply to a binding call.
pub fn reply(result: Result<Value, BindingError>) -> String {
    match result {
        Ok(value) => serde_json::json!({ "ok": value }),
        Err(err) => serde_json::json!({ "err": { "code": err.code, "message": err.message } }),
    }
    .to_string()
}

/// A binding call.
#[derive(Debug, Deserialize)]
pub struct CallFrame {
    /// Namespace global.
    pub ns: String,
    /// Member name.
    #[serde(rename = "fn")]
    pub member: String,
    /// The lossless JSON argument.
    #[serde(default)]
    pub args: Value,
}

/// Parses a binding call frame; the error is the binding error the guest gets.
pub fn parse_call(frame: &str) -> Result<CallFrame, String> {
    if frame.len() > MAX_CALL {
        return Err(format!(
            "a binding call's argument is limited to {} MiB",
            MAX_CALL >> 20
        ));
    }
    // Measured first: 16 MiB of `[0,0,…]` would be ~1.5 GB of host memory
    // as a tree, per call, per runtime.
    let shape = code_runner_core::json::measure(frame.as_bytes());
    if shape.values > MAX_JSON_VALUES {
        return Err(format!(
            "a binding call's argument is limited to {MAX_JSON_VALUES} JSON values (this one holds about {})",
            shape.values
        ));
    }
    code_runner_core::json::parse_guest(frame.as_bytes())
        .map_err(|err| format!("malformed binding call: {err}"))
}

/// The end of a turn, as the runner reports it.
#[derive(Debug, Deserialize)]
pub struct Head {
    /// 0, 1 for an exception, n for `SystemExit(n)`.
    pub exit_code: i64,
    /// Why the completion is not JSON.
    #[serde(default)]
    pub not_json: Option<String>,
    /// Facts of a result too large to hand over.
    #[serde(default)]
    pub oversize: Option<Oversize>,
    /// The uncaught exception's traceback.
    #[serde(default)]
    pub exception: Option<String>,
    /// The first value the runner rewrote into its JSON form (`NaN` as
    /// null, a date as ISO-8601 text), with its path.
    #[serde(default)]
    pub converted: Option<String>,
    /// What the caller is told about the result (bytes as base64, the last
    /// line an expression whose value was not kept).
    #[serde(default)]
    pub note: Option<String>,
}

/// Facts of a result too large to carry.
#[derive(Debug, Deserialize)]
pub struct Oversize {
    /// Serialized size.
    pub bytes: u64,
    /// `[kind, n]`.
    pub shape: (String, u64),
}

/// Parses a turn's head; the error is the protocol fault's text.
pub fn parse_head(head: &str) -> Result<Head, String> {
    if head.len() > MAX_HEAD {
        return Err(format!("the turn's head is {} bytes", head.len()));
    }
    code_runner_core::json::parse_bounded(head.as_bytes(), MAX_JSON_DEPTH, None)
        .map_err(|err| format!("malformed turn head: {err}"))
}

/// Whether a result text holds more values than the host builds a tree
/// of ([`MAX_JSON_VALUES`]): such a result is carried as its size only,
/// like one past `max_result_bytes`.
pub fn result_too_wide(text: &str) -> bool {
    code_runner_core::json::measure(text.as_bytes()).values > MAX_JSON_VALUES
}

/// Parses the result's JSON text, which the runner has checked; the error is
/// the reason it is not JSON after all (a guest that replaced the runner's
/// checks gets its own `invalid-output`, nothing worse). The caller has
/// checked its size and width.
pub fn parse_result(text: &str) -> Result<Value, String> {
    code_runner_core::json::parse_guest(text.as_bytes())
        .map_err(|err| format!("the result is not JSON: {err}"))
}
