//! The bus bridge rules: bus functions guest code may not reach.
//!
//! Guest code reaches the bus only through its `iii.trigger`, whatever its
//! language, so this one check covers both engines. It runs before dispatch,
//! for plain, fire-and-forget and queued calls alike, and it also looks
//! through trigger registrations: a call to a trigger-registration function
//! whose payload targets a function guest code may not call is refused, and
//! so is one that targets another trigger-registration function (that would
//! install a second binding nothing checked). Ordinary calls pass untouched.
//!
//! The contract's rules protect a few functions of other workers. Beyond
//! them, code-runner keeps guest code off what belongs to the operator:
//!
//! - **configuration**: every `configuration::*` call that changes an entry
//!   (`register`, `set`, anything but `get`, `list` and `schema`), whatever
//!   the entry: code-runner's holds the limits the guest runs under, other
//!   workers' hold theirs, and a stored value outlives the process;
//! - **administration**: the engine's functions that wipe or rewrite what
//!   the operator reads ([`ADMINISTRATIVE`]);
//! - **trigger bindings** ([`triggers`]): a guest may bind a trigger only of
//!   a type the operator opened (`guest_trigger_types`, empty by default;
//!   UI slots, hooks, `configuration`, `log` and `trace` never), and may
//!   unregister only the triggers its own lineage registered; never to a
//!   function that waits for a person's approval (the binding would call
//!   it as the host, with nobody asked);
//! - **authority that is a person's or the host's** ([`HOST_ONLY`]): the
//!   functions that decide for a person (`code-runner::resume` approves or
//!   denies a call that waits for one) are never the code's to call, on
//!   this worker or another's (a scoped `code-runner@<worker>::resume` too).
//!   Their handlers refuse a guest caller again themselves
//!   ([`refuse_guest`]), so a path that skips this check (a call through
//!   the engine, a future edge) still cannot mint the authority.

#[cfg(test)]
mod tests;
mod triggers;

pub use triggers::GuestTriggers;
#[cfg(test)]
use triggers::MAX_TRIGGERS_PER_LINEAGE;

use std::fmt;

use serde_json::Value;

use crate::bus::names::CONFIG_ID;
use crate::ids::RuntimeKey;

/// The functions guest code may not call, as the contract spells them.
/// `x::*` matches `x` itself and every id under `x::`. Ids are compared
/// ignoring ASCII case and surrounding whitespace.
pub const DENIED: &[&str] = &[
    "state::claim-namespace",
    "harness::state::*",
    "provider-openai-codex::state::*",
    "provider::openai-codex::{login,auth}::*",
];

/// Functions that register a trigger binding: their payload's `function_id`
/// is the binding's target, its `trigger_type` the binding's type.
pub const TRIGGER_REGISTRATIONS: &[&str] = &["engine::register_trigger"];

/// Functions that remove a trigger binding by its `id`.
pub const TRIGGER_UNREGISTRATIONS: &[&str] = &["engine::unregister_trigger"];

/// The configuration functions guest code may call: the readers. Every
/// other `configuration::*` function changes an entry.
pub const CONFIGURATION_READS: &[&str] = &[
    "configuration::get",
    "configuration::list",
    "configuration::schema",
];

/// The engine's administrative functions: they wipe what the operator
/// reads (logs, traces), rewrite this worker's identity on the engine, or
/// act on queues' dead letters.
pub const ADMINISTRATIVE: &[&str] = &[
    "engine::logs::clear",
    "engine::traces::clear",
    "engine::workers::register",
    "iii::queue::discard_message",
    "iii::queue::redrive",
    "iii::queue::redrive_message",
];

/// Functions that carry a person's or the host's authority over the code
/// that calls them, by their shared id: guest code may never call them (nor
/// their worker-scoped twins, `code-runner@<worker>::<op>`).
pub const HOST_ONLY: &[&str] = &[
    "code-runner::resume",
    "code-runner::install",
    "code-runner::snapshot",
    "code-runner::restore",
    "code-runner::delete_snapshot",
    "code-runner::usage",
];

/// Whether `function_id` is one of [`HOST_ONLY`], in any spelling: the
/// shared id, or a worker's scoped twin (`code-runner@w1::resume`).
pub fn is_host_only(function_id: &str) -> bool {
    let id = normalise(function_id);
    HOST_ONLY.iter().any(|shared| {
        id == *shared
            || shared.strip_prefix("code-runner::").is_some_and(|op| {
                id.strip_prefix("code-runner@")
                    .and_then(|rest| rest.rsplit_once("::"))
                    .is_some_and(|(worker, tail)| !worker.is_empty() && tail == op)
            })
    })
}

/// The refusal a host-only handler answers a guest caller with: its own
/// assertion, beside the bridge's (defence in depth: the authority is never
/// minted to the code it governs, whichever path the call took).
pub fn refuse_guest(function_id: &str, what: &str) -> crate::bus::CallError {
    crate::bus::CallError {
        code: FORBIDDEN.into(),
        message: format!(
            "guest code may not call {function_id}: {what} is a person's or the host's decision, never the code's"
        ),
        output: None,
    }
}

/// Why a guest call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The function the guest called.
    pub function_id: String,
    /// What the rule says.
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "iii.trigger refused `{}` before dispatch: {}",
            self.function_id, self.reason
        )
    }
}

/// The error code a refused call carries in the guest (`IIIError.code`, the
/// rejected promise's `code`), beside `function_not_found` and the contract's.
pub const FORBIDDEN: &str = "forbidden";

/// Checks a guest call of `function_id` with `payload` by the rules that
/// need no state: the denied list, configuration changes, administrative
/// functions, and what a trigger registration targets.
///
/// # Errors
/// The [`Refusal`] naming the function and the rule.
pub fn check(function_id: &str, payload: &Value) -> Result<(), Refusal> {
    let refuse = |reason: String| Refusal {
        function_id: bounded(function_id),
        reason,
    };
    if let Some(reason) = call_refusal(function_id, payload) {
        return Err(refuse(reason));
    }
    if is_trigger_registration(function_id)
        && let Some(target) = payload.get("function_id").and_then(Value::as_str)
    {
        if is_trigger_registration(target) || is_trigger_unregistration(target) {
            return Err(refuse(format!(
                "a trigger binding cannot target another trigger registration (`{}`); that would install a binding nothing checked (a bus bridge rule)",
                bounded(target)
            )));
        }
        if let Some(reason) = call_refusal(target, &Value::Null) {
            return Err(refuse(format!(
                "its target `{}` is refused to guest code, through a trigger too: {reason}",
                bounded(target)
            )));
        }
    }
    Ok(())
}

/// [`check`], then the rules that depend on the configuration in force and
/// on what the calling lineage (`root`) registered: a trigger binding's type
/// must be one the operator opened, and a trigger may be unregistered only by
/// the lineage that registered it.
///
/// # Errors
/// The [`Refusal`] naming the function and the rule.
pub(crate) fn admit(
    triggers: &GuestTriggers,
    open_types: &[String],
    root: RuntimeKey,
    function_id: &str,
    payload: &Value,
    needs_approval: impl Fn(&str) -> bool,
) -> Result<(), Refusal> {
    check(function_id, payload)?;
    let refuse = |reason: String| Refusal {
        function_id: bounded(function_id),
        reason,
    };
    if is_trigger_registration(function_id) {
        let trigger_type = payload.get("trigger_type").and_then(Value::as_str);
        triggers::admit_type(trigger_type, open_types).map_err(&refuse)?;
        if let Some(target) = payload
            .get("function_id")
            .and_then(Value::as_str)
            .filter(|target| needs_approval(target))
        {
            return Err(refuse(format!(
                "its target `{}` waits for a person's approval, and a trigger would call it with nobody asked",
                bounded(target)
            )));
        }
        triggers.has_room(root).map_err(&refuse)?;
    }
    if is_trigger_unregistration(function_id) {
        let id = payload.get("id").and_then(Value::as_str);
        triggers.take(root, id).map_err(refuse)?;
    }
    Ok(())
}

/// After a guest call of `function_id` by the lineage `root` (still live)
/// answered `answer`: a trigger it registered is remembered as its own, so
/// it may unregister it later, while its root lives. (An unregistration
/// forgets its id when admitted.)
pub(crate) fn observe(
    triggers: &GuestTriggers,
    root: RuntimeKey,
    function_id: &str,
    answer: &Value,
) {
    if is_trigger_registration(function_id)
        && let Some(id) = answer.get("id").and_then(Value::as_str)
    {
        triggers.record(root, id);
    }
}

/// Why a direct guest call of `function_id` is refused, if it is.
fn call_refusal(function_id: &str, payload: &Value) -> Option<String> {
    if let Some(rule) = denied_by(function_id) {
        return Some(format!(
            "guest code may not call {rule} (a bus bridge rule)"
        ));
    }
    if is_host_only(function_id) {
        return Some(format!(
            "`{}` decides for a person or the host ({}), never for the code it governs (code-runner's rule)",
            bounded(function_id),
            HOST_ONLY.join(", ")
        ));
    }
    let id = normalise(function_id);
    if id.starts_with("configuration::") && !CONFIGURATION_READS.contains(&id.as_str()) {
        let entry = payload.get("id").and_then(Value::as_str).map(normalise);
        let whose = if entry.as_deref() == Some(CONFIG_ID) {
            format!(
                "code-runner's own configuration (entry `{CONFIG_ID}`) sets the limits guest code runs under"
            )
        } else {
            "an entry holds a worker's settings, and a stored value outlives the process".into()
        };
        return Some(format!(
            "guest code may not change any configuration entry: {whose} (code-runner's rule); {} read it",
            CONFIGURATION_READS.join(", ")
        ));
    }
    if ADMINISTRATIVE.contains(&id.as_str()) {
        return Some(format!(
            "`{id}` is one of the engine's administrative functions ({}), which are the operator's (code-runner's rule)",
            ADMINISTRATIVE.join(", ")
        ));
    }
    None
}

/// The rule of [`DENIED`] that `function_id` matches, if any.
pub fn denied_by(function_id: &str) -> Option<&'static str> {
    let id = normalise(function_id);
    let under = |prefix: &str| id == prefix || id.starts_with(&format!("{prefix}::"));
    DENIED.iter().copied().find(|rule| match *rule {
        "provider::openai-codex::{login,auth}::*" => {
            under("provider::openai-codex::login") || under("provider::openai-codex::auth")
        }
        rule => match rule.strip_suffix("::*") {
            Some(prefix) => under(prefix),
            None => id == rule,
        },
    })
}

fn is_trigger_registration(function_id: &str) -> bool {
    TRIGGER_REGISTRATIONS.contains(&normalise(function_id).as_str())
}

/// Whether `function_id` unregisters a trigger (whatever its spelling).
pub fn is_trigger_unregistration(function_id: &str) -> bool {
    TRIGGER_UNREGISTRATIONS.contains(&normalise(function_id).as_str())
}

/// An id as the rules compare it: trimmed, ASCII lower case.
fn normalise(id: &str) -> String {
    id.trim().to_ascii_lowercase()
}

/// An id as quoted back in an error: at most 200 bytes of it.
fn bounded(id: &str) -> String {
    if id.len() <= 200 {
        return id.to_string();
    }
    let mut end = 200;
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &id[..end])
}
