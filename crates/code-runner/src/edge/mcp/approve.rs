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
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use serde_json::{Value, json};

use super::clean::clean;

/// Most characters of the payload the person is shown.
const MAX_SHOWN_PAYLOAD: usize = 2000;
/// Longest reason passed on to the guest, in bytes (resume's own bound).
const MAX_REASON_BYTES: usize = 1024;

/// The `code-runner::resume` payload for `answer`'s suspended call, as the
/// session's person decided it; `None` when `answer` is not suspended, the
/// client cannot ask, or no answer came within `wait`. (The handshake
/// protocols' way: a request from the server to the client. On 2026-07-28
/// the same form goes out as an `input_required` round: [`super::modern`].)
pub(super) async fn ask(peer: &Peer<RoleServer>, answer: &Value, wait: Duration) -> Option<Value> {
    let asked = Asked::of(answer)?;
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return None;
    }
    let asked_now = peer.create_elicitation(asked.form()?);
    let result = match tokio::time::timeout(wait, asked_now).await {
        Ok(Ok(result)) => result,
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "the client did not answer an approval; the run stays suspended");
            return None;
        }
        Err(_) => return None,
    };
    Some(asked.resume(&result))
}

/// A suspended call, as the person is asked about it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Asked {
    /// The suspended run's id.
    pub runtime_id: String,
    /// The call it waits on.
    pub call_id: String,
    /// The function guest code called, cleaned.
    pub function_id: String,
    /// Its payload as the person is shown it: cleaned, cut.
    pub payload: String,
}

impl Asked {
    /// The suspended call of `answer`, if it is one.
    pub(super) fn of(answer: &Value) -> Option<Asked> {
        let call = answer.get("suspended")?;
        let payload = serde_json::to_string(call.get("payload")?).ok()?;
        Some(Asked {
            runtime_id: answer.get("runtime_id")?.as_str()?.to_string(),
            call_id: call.get("call_id")?.as_str()?.to_string(),
            function_id: clean(call.get("function_id")?.as_str()?, 256),
            payload: clean(&payload, MAX_SHOWN_PAYLOAD),
        })
    }

    /// The form the person fills in.
    pub(super) fn form(&self) -> Option<ElicitRequestParams> {
        let message = format!(
            "Code running in a sandbox wants to call {} with this payload:\n{}\nAllow the call?",
            self.function_id, self.payload
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
        Some(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        })
    }

    /// The `code-runner::resume` payload for what the person answered.
    pub(super) fn resume(&self, result: &ElicitResult) -> Value {
        let (approve, reason) = match result.action {
            ElicitationAction::Accept => {
                let content = result.content.clone().unwrap_or_default();
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
            "runtime_id": self.runtime_id,
            "call_id": self.call_id,
            "approve": approve,
        });
        if let Some(reason) = reason.filter(|r| !r.is_empty()) {
            resume["reason"] = Value::String(reason);
        }
        resume
    }
}

/// `text` cut to at most `max` bytes, at a character.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
