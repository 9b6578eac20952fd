//! Approvals over MCP: a run that answers `suspended` (its code called a
//! function that waits for a person) in a session whose client can ask its
//! person (`elicitation/create`, form mode) is asked there, and the server
//! resumes the run itself with the answer. A client without elicitation, or
//! one that fails to answer, gets the `suspended` answer and the `resume`
//! tool.
//!
//! What the person is shown is text guest code wrote (the function id and
//! its payload): it is cleaned like a guest-published tool's description
//! and cut to a length. The wait is bounded by the idle TTL, which ends a
//! suspended run anyway.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use serde_json::{Value, json};

use super::clean::clean;

/// Most characters of the payload the person is shown.
const MAX_SHOWN_PAYLOAD: usize = 2000;
/// Longest reason passed on to the guest, in bytes (resume's own bound).
const MAX_REASON_BYTES: usize = 1024;

/// The `code-runner::resume` payload for `answer`'s suspended call, as the
/// session's person decided it; `None` when `answer` is not suspended, the
/// client cannot ask, or no answer came within `wait`.
pub(super) async fn ask(peer: &Peer<RoleServer>, answer: &Value, wait: Duration) -> Option<Value> {
    let call = answer.get("suspended")?;
    let runtime_id = answer.get("runtime_id")?.as_str()?;
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return None;
    }
    let function_id = clean(call.get("function_id")?.as_str()?, 256);
    let payload = serde_json::to_string(call.get("payload")?).ok()?;
    let message = format!(
        "Code running in a sandbox wants to call {function_id} with this payload:\n{}\nAllow the call?",
        clean(&payload, MAX_SHOWN_PAYLOAD)
    );
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "approve": {"type": "boolean", "title": "Allow", "description": "Let the call proceed."},
            "reason": {"type": "string", "title": "Reason", "description": "Shown to the code when denied.", "maxLength": MAX_REASON_BYTES}
        },
        "required": ["approve"]
    }))
    .ok()?;
    let asked = peer.create_elicitation(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    });
    let result = match tokio::time::timeout(wait, asked).await {
        Ok(Ok(result)) => result,
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "the client did not answer an approval; the run stays suspended");
            return None;
        }
        Err(_) => return None,
    };
    let (approve, reason) = match result.action {
        ElicitationAction::Accept => {
            let content = result.content.unwrap_or_default();
            let reason = content
                .get("reason")
                .and_then(Value::as_str)
                .map(|r| cut(r, MAX_REASON_BYTES));
            (content.get("approve") == Some(&Value::Bool(true)), reason)
        }
        ElicitationAction::Decline => (false, Some("the person declined".to_string())),
        ElicitationAction::Cancel => (false, Some("the person cancelled".to_string())),
        _ => (false, Some("the person did not approve".to_string())),
    };
    let mut resume = json!({
        "runtime_id": runtime_id,
        "call_id": call.get("call_id")?,
        "approve": approve,
    });
    if let Some(reason) = reason.filter(|r| !r.is_empty()) {
        resume["reason"] = Value::String(reason);
    }
    Some(resume)
}

/// `text` cut to at most `max` bytes, at a character.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
