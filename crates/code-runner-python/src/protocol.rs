//! The framed channel between the host and the guest wrapper (`wrapper.py`).
//!
//! Host to guest: `<decimal length>\n<json>` frames, read from fd 0.
//! Guest to host: one `fd_write` on fd 0 per frame, `<token><json>`, where the
//! token is random per interpreter boot. Anything else written to fd 0 is a
//! guest's own noise and is dropped.

use serde::Deserialize;
use serde_json::{Map, Value};

use code_runner_core::{Bindings, Task};

/// Largest guest frame the host accepts (the wrapper sends facts, not the
/// value, for a larger result).
pub const MAX_GUEST_FRAME: usize = 64 * 1024 * 1024 + 4096;

/// Encodes one host-to-guest frame.
pub fn encode(value: &Value) -> Vec<u8> {
    let body = value.to_string();
    let mut frame = format!("{}\n", body.len()).into_bytes();
    frame.extend_from_slice(body.as_bytes());
    frame
}

/// The first frame of every boot.
pub fn boot(token: &str) -> Vec<u8> {
    encode(&serde_json::json!({ "token": token }))
}

/// A turn frame: the task and the shape of its bindings.
pub fn turn(task: &Task, bindings: &Bindings) -> Vec<u8> {
    let namespaces: Vec<Value> = bindings
        .namespaces()
        .iter()
        .map(|ns| {
            let mut spec = Map::new();
            spec.insert("global".into(), Value::from(ns.global.clone()));
            spec.insert("functions".into(), Value::from(ns.functions.keys().cloned().collect::<Vec<_>>()));
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
    encode(&frame)
}

/// The reply to a binding call.
pub fn reply(result: Result<Value, code_runner_core::BindingError>) -> Vec<u8> {
    match result {
        Ok(value) => encode(&serde_json::json!({ "ok": value })),
        Err(err) => {
            encode(&serde_json::json!({ "err": { "code": err.code, "message": err.message } }))
        }
    }
}

/// A frame the wrapper sends.
#[derive(Debug)]
pub enum GuestFrame {
    /// A binding call; the wrapper blocks on fd 0 for the reply.
    Call(CallFrame),
    /// The turn ended.
    Done(DoneFrame),
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

/// The end of a turn.
#[derive(Debug, Deserialize)]
pub struct DoneFrame {
    /// 0, 1 for an exception, n for `SystemExit(n)`.
    pub exit_code: i64,
    /// The completion value, when it is JSON and not oversized.
    #[serde(default)]
    pub result: Option<Value>,
    /// Why the completion is not JSON.
    #[serde(default)]
    pub not_json: Option<String>,
    /// Facts of a result too large for a frame.
    #[serde(default)]
    pub oversize: Option<Oversize>,
    /// The uncaught exception's traceback.
    #[serde(default)]
    pub exception: Option<String>,
}

/// Facts of a result too large to carry.
#[derive(Debug, Deserialize)]
pub struct Oversize {
    /// Serialized size.
    pub bytes: u64,
    /// `[kind, n]`.
    pub shape: (String, u64),
}

/// Parses a guest frame written to fd 0: `None` when it is not ours (noise).
///
/// Frames are decoded through `Value` (no tagged enums), so numbers keep
/// their exact text.
pub fn parse_guest(token: &[u8], bytes: &[u8]) -> Option<Result<GuestFrame, String>> {
    let body = bytes.strip_prefix(token)?;
    Some(decode(body).map_err(|err| format!("malformed wrapper frame: {err}")))
}

fn decode(body: &[u8]) -> Result<GuestFrame, serde_json::Error> {
    let mut value: Value = serde_json::from_slice(body)?;
    let tag = value.as_object_mut().and_then(|map| map.remove("t"));
    match tag.as_ref().and_then(Value::as_str) {
        Some("call") => Ok(GuestFrame::Call(serde_json::from_value(value)?)),
        Some("done") => Ok(GuestFrame::Done(serde_json::from_value(value)?)),
        _ => Err(serde::de::Error::custom("missing or unknown frame tag `t`")),
    }
}
