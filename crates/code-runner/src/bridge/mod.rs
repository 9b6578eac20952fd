//! The bus bridge rules: bus functions guest code may not reach.
//!
//! Guest code reaches the bus only through its `iii.trigger`, whatever its
//! language, so this one check covers both engines. It runs before dispatch,
//! for plain, fire-and-forget and queued calls alike, and it also looks
//! through trigger registrations: a call to a trigger-registration function
//! whose payload targets a denied function is refused, and so is one that
//! targets another trigger-registration function (that would install a
//! second binding nothing checked). Ordinary calls pass untouched.
//!
//! These rules protect a few functions of other workers; they are not a
//! general sandbox for what bus calls may do.
//!
//! One rule is code-runner's own, beyond the contract's list: guest code may
//! not replace code-runner's configuration (`configuration::set` with
//! `id: "code-runner"`, here or through the engine's configuration worker),
//! nor bind a trigger to `configuration::set`. The configuration sets the
//! limits that hold the guest (timeouts, caps, slots, memory), and a change
//! persists across restarts.

use std::fmt;

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
/// is the binding's target.
pub const TRIGGER_REGISTRATIONS: &[&str] = &["engine::register_trigger"];

/// The function that replaces a configuration entry, and the entry guest
/// code may not replace through it (code-runner's own rule).
pub const CONFIGURATION_SET: &str = "configuration::set";
/// The configuration entry holding code-runner's limits.
pub const OWN_CONFIGURATION: &str = "code-runner";

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

/// Checks a guest call of `function_id` with `payload`.
///
/// # Errors
/// The [`Refusal`] naming the function and the rule.
pub fn check(function_id: &str, payload: &serde_json::Value) -> Result<(), Refusal> {
    let refuse = |reason: String| Refusal {
        function_id: bounded(function_id),
        reason,
    };
    if let Some(rule) = denied_by(function_id) {
        return Err(refuse(format!(
            "guest code may not call {rule} (a bus bridge rule)"
        )));
    }
    if normalise(function_id) == CONFIGURATION_SET {
        let entry = payload.get("id").and_then(serde_json::Value::as_str);
        if entry.is_some_and(|entry| normalise(entry) == OWN_CONFIGURATION) {
            return Err(refuse(format!(
                "guest code may not change code-runner's own configuration (id `{OWN_CONFIGURATION}`): it sets the limits guest code runs under (code-runner's rule); configuration::get reads it"
            )));
        }
    }
    if is_trigger_registration(function_id) {
        let target = payload
            .get("function_id")
            .and_then(serde_json::Value::as_str);
        if let Some(target) = target {
            if normalise(target) == CONFIGURATION_SET {
                return Err(refuse(format!(
                    "its target `{}` would change a configuration from a binding nothing checks (code-runner's rule)",
                    bounded(target)
                )));
            }
            if let Some(rule) = denied_by(target) {
                return Err(refuse(format!(
                    "its target `{}` matches {rule}, which guest code may not reach through a trigger either (a bus bridge rule)",
                    bounded(target)
                )));
            }
            if is_trigger_registration(target) {
                return Err(refuse(format!(
                    "a trigger binding cannot target another trigger registration (`{}`); that would install a binding nothing checked (a bus bridge rule)",
                    bounded(target)
                )));
            }
        }
    }
    Ok(())
}

/// The rule of [`DENIED`] that `function_id` matches, if any.
pub fn denied_by(function_id: &str) -> Option<&'static str> {
    let id = function_id.trim().to_ascii_lowercase();
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every denied pattern bites, whatever the case or padding; ordinary
    /// ids and near misses pass.
    #[test]
    fn each_denied_pattern_is_refused() {
        for (id, rule) in [
            ("state::claim-namespace", "state::claim-namespace"),
            (" State::Claim-Namespace ", "state::claim-namespace"),
            ("harness::state::get", "harness::state::*"),
            ("harness::state", "harness::state::*"),
            (
                "provider-openai-codex::state::set",
                "provider-openai-codex::state::*",
            ),
            (
                "provider::openai-codex::login::start",
                "provider::openai-codex::{login,auth}::*",
            ),
            (
                "provider::openai-codex::auth::token",
                "provider::openai-codex::{login,auth}::*",
            ),
        ] {
            assert_eq!(denied_by(id), Some(rule), "{id}");
            let refusal = check(id, &json!({})).unwrap_err();
            assert!(refusal.to_string().contains(rule), "{refusal}");
            assert!(refusal.to_string().contains(id), "{refusal}");
        }
        for ok in [
            "state::get",
            "state::claim-namespaces",
            "harness::stateful",
            "harness::hook::pre-generate",
            "provider::openai-codex::generate",
            "provider::openai-codex::loginx::a",
            "code-runner::run",
            "engine::functions::info",
        ] {
            assert_eq!(denied_by(ok), None, "{ok}");
            assert!(
                check(ok, &json!({"function_id": "state::claim-namespace"})).is_ok(),
                "{ok}"
            );
        }
    }

    /// A trigger registration is checked by its target: a denied target, or
    /// another trigger registration, is refused; an ordinary one passes.
    #[test]
    fn trigger_registration_targets_are_checked() {
        let register = "engine::register_trigger";
        let err = check(
            register,
            &json!({"trigger_type": "cron", "function_id": "harness::state::wipe"}),
        )
        .unwrap_err();
        assert!(err.reason.contains("harness::state::*"), "{err}");
        let err = check(
            register,
            &json!({"function_id": "engine::register_trigger"}),
        )
        .unwrap_err();
        assert!(err.reason.contains("another trigger registration"), "{err}");
        assert!(
            check(
                register,
                &json!({"function_id": "my-app::greet", "config": {}})
            )
            .is_ok()
        );
        assert!(check(register, &json!({"config": {}})).is_ok());
    }

    /// Guest code cannot replace code-runner's configuration, however the
    /// id is spelled, nor bind a trigger to `configuration::set`; other
    /// entries and reading stay open.
    #[test]
    fn own_configuration_cannot_be_set_by_guests() {
        for (id, entry) in [
            ("configuration::set", "code-runner"),
            (" Configuration::SET ", " Code-Runner "),
        ] {
            let err = check(id, &json!({"id": entry, "value": {}})).unwrap_err();
            assert!(err.reason.contains("own configuration"), "{err}");
        }
        let err = check(
            "engine::register_trigger",
            &json!({"trigger_type": "cron", "function_id": "configuration::set"}),
        )
        .unwrap_err();
        assert!(err.reason.contains("configuration"), "{err}");
        assert!(check("configuration::set", &json!({"id": "my-app", "value": {}})).is_ok());
        assert!(check("configuration::get", &json!({"id": "code-runner"})).is_ok());
    }

    /// A huge id is quoted back bounded.
    #[test]
    fn refusals_quote_ids_bounded() {
        let id = format!("state::claim-namespace{}", "x".repeat(10_000));
        assert!(check(&id, &json!({})).is_ok());
        let target = format!("harness::state::{}", "y".repeat(10_000));
        let err = check(
            "engine::register_trigger",
            &json!({ "function_id": target }),
        )
        .unwrap_err();
        assert!(err.to_string().len() < 600, "{}", err.to_string().len());
    }
}
