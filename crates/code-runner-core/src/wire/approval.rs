//! Approvals: a run suspended on a call that waits for a person, and
//! `code-runner::resume`, which goes on with it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The call a suspended run waits on: guest code called a function that
/// needs a person's approval (configuration `approval_required`, or
/// `register_function`'s `requires_approval`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "SuspendedCall")]
pub struct SuspendedCall {
    /// Names this call in `code-runner::resume`; good for one resume.
    pub call_id: String,
    /// The function the code called.
    pub function_id: String,
    /// The payload it would be called with.
    pub payload: Value,
}

/// The request of `code-runner::resume`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ResumeRequest")]
pub struct ResumeRequest {
    /// The `runtime_id` the suspended run answered.
    pub runtime_id: String,
    /// The `suspended.call_id` it answered.
    pub call_id: String,
    /// true: the call proceeds; false: the guest's call fails with a catchable error carrying `reason`.
    pub approve: bool,
    /// Why (shown to the guest code when denied); at most 1024 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
