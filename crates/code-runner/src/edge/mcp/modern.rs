//! MCP 2026-07-28, the protocol the SDKs' default clients now speak: no
//! session, no handshake, no request from the server to the client. Each
//! request says its version and the client's capabilities in `_meta`, so
//! each is served on its own:
//!
//! - **Approvals** are `input_required` rounds. A run that suspends on a
//!   call that waits for a person answers, when the request's client can
//!   fill in a form (`elicitation`), an `InputRequiredResult` holding the
//!   same form the handshake protocols send as `elicitation/create`, and a
//!   `requestState` sealed with HMAC-SHA256 (rmcp's `RequestStateCodec`, a
//!   key drawn per process): the suspended run's id and call, bound to this
//!   tool and a digest of its arguments, good for the idle TTL. The client
//!   sends the request again with the person's answer; the server opens the
//!   state (a forged, altered, expired or other request's state is one
//!   error), never runs the code again, and resumes the run with the answer.
//!   The `call_id` is single-use, so a replayed round finds nothing to let
//!   through. A client that cannot fill in forms gets the `suspended` answer
//!   and the `resume` tool, as before.
//! - **Tool-list changes** are `subscriptions/listen` streams
//!   ([`super::follow::listen`]).
//! - **Logging** is per request: a run's output goes out as log messages
//!   only when the request asks for a level (`_meta`), never by default.
//! - **Tools guest code published** cannot be a session's own (a tool list
//!   may not vary by connection): they are listed with `mcp_guest_tools`, and
//!   otherwise a `run` whose runtime published functions says how to call
//!   them ([`guest_pointer`]).

use std::sync::LazyLock;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitResult, InputRequest, InputRequests,
    InputRequiredResult, ProtocolVersion,
};
use rmcp::model::{RequestStateCodec, SealOptions};
use rmcp::service::RequestContext;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::approve::Asked;

/// The key of this process's sealed states: 32 bytes from the OS, never
/// stored (a state outlives no worker, as the run it names does not).
static CODEC: LazyLock<RequestStateCodec> = LazyLock::new(|| {
    let key: [u8; 32] = rand::random();
    // 32 bytes is the codec's minimum: `try_new` cannot refuse it.
    RequestStateCodec::try_new(key.to_vec())
        .unwrap_or_else(|_| RequestStateCodec::new_unchecked(key.to_vec()))
});

/// The key the approval's form goes under in `inputRequests`.
const APPROVAL: &str = "approval";

/// Whether `context`'s request speaks a protocol without a handshake
/// (2026-07-28 on).
pub(super) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| !ProtocolVersion::has_initialize(&version))
}

/// Whether the request's client can fill in a form (`elicitation` with form
/// mode, which an empty `elicitation: {}` means).
pub(super) fn can_ask(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|caps| caps.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// What a sealed state binds: the tool and a digest of its arguments, so a
/// state answers only the request it was issued for.
fn bound_to(request: &CallToolRequestParams) -> Vec<u8> {
    let arguments = request
        .arguments
        .as_ref()
        .map(|a| serde_json::to_vec(a).unwrap_or_default())
        .unwrap_or_default();
    let mut bound = b"tools/call\0".to_vec();
    bound.extend_from_slice(request.name.as_bytes());
    bound.push(0);
    bound.extend_from_slice(&Sha256::digest(&arguments));
    bound
}

/// The `input_required` round for a run that answered `suspended` on
/// `asked`, for `request`; good for `ttl`.
pub(super) fn round(
    asked: &Asked,
    request: &CallToolRequestParams,
    ttl: Duration,
) -> Option<InputRequiredResult> {
    let form = asked.form()?;
    let bound = bound_to(request);
    let options = SealOptions::new().associated_data(&bound).ttl(ttl);
    let state = CODEC.seal_json_with(asked, &options).ok()?;
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(form)),
    );
    Some(InputRequiredResult::new(Some(requests), Some(state)))
}

/// What a request carrying a `requestState` asks for.
pub(super) enum Retry {
    /// The person answered: resume with this payload.
    Resume(Value),
    /// No answer in the round: ask again.
    AskAgain(Box<Asked>),
}

/// Opens `request`'s sealed state and reads the person's answer.
///
/// # Errors
/// One message for every state that is not this process's, for this
/// request, within its time (forged, altered, expired, another request's).
pub(super) fn retry(request: &CallToolRequestParams) -> Result<Retry, String> {
    let sealed = request.request_state.as_deref().unwrap_or_default();
    let bound = bound_to(request);
    let asked: Asked = CODEC.open_json_with(sealed, &bound).map_err(|_| {
        "requestState is not one this server issued for this call, or it expired; call the tool again without it".to_string()
    })?;
    let answer = request
        .input_responses
        .as_ref()
        .and_then(|answers| answers.get(APPROVAL))
        .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok());
    Ok(match answer {
        Some(answer) => Retry::Resume(asked.resume(&answer)),
        None => Retry::AskAgain(Box::new(asked)),
    })
}

/// A note for a modern client whose run's runtime published functions it
/// will not see as tools (unless `mcp_guest_tools`): how to reach them.
pub(super) fn guest_pointer(ids: &[String]) -> Option<String> {
    if ids.is_empty() {
        return None;
    }
    let shown: Vec<&str> = ids.iter().take(8).map(String::as_str).collect();
    Some(format!(
        "This runtime published {} ({}{}). Under MCP 2026-07-28 a tool list cannot differ between clients, so they are not tools here unless the operator sets mcp_guest_tools; call them from code with iii.trigger({{function_id, payload}}) in a run on this runtime_id.",
        if ids.len() == 1 {
            "a function"
        } else {
            "functions"
        },
        shown.join(", "),
        if ids.len() > shown.len() { ", …" } else { "" }
    ))
}
