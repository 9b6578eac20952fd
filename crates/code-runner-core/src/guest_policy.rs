//! What the operator may open to guest code, and what no configuration can.
//!
//! Two configuration keys widen what guest code may do on the bus, both
//! empty by default:
//!
//! - `guest_writable_namespaces`: namespaces that guest code may register
//!   into and tear down even though a host call (the operator) created them;
//! - `guest_trigger_types`: trigger types guest code may bind its functions
//!   to with `engine::register_trigger`.
//!
//! Some trigger types can never be opened: the console's UI slots (what is
//! bound there runs as script or style in the operator's browser), hooks
//! (every agent's prompt), and the engine's `configuration`, `log` and
//! `trace` streams. [`never_guest_trigger_type`] names the rule.

use crate::error::RunnerError;

/// Most entries in either list.
pub const MAX_GUEST_POLICY_ENTRIES: usize = 256;

/// Longest trigger type accepted on `guest_trigger_types`, in bytes.
pub const MAX_TRIGGER_TYPE_BYTES: usize = 128;

/// A trigger type as the rules compare it: trimmed, ASCII lower case.
pub fn normalise_trigger_type(trigger_type: &str) -> String {
    trigger_type.trim().to_ascii_lowercase()
}

/// The rule that keeps `trigger_type` away from guest code whatever the
/// configuration says, if any.
pub fn never_guest_trigger_type(trigger_type: &str) -> Option<&'static str> {
    let t = normalise_trigger_type(trigger_type);
    if t.starts_with("console:") {
        Some(
            "console:* (the console's UI slots: a binding there is loaded into the operator's browser)",
        )
    } else if t == "harness" || t.starts_with("harness::") || t.starts_with("harness:") {
        Some("harness::* (agent hooks: a binding there rewrites every agent's turn)")
    } else if t == "configuration" {
        Some("configuration (every worker's configuration changes)")
    } else if t == "log" {
        Some("log (the engine's log stream)")
    } else if t == "trace" {
        Some("trace (the engine's trace stream)")
    } else {
        None
    }
}

/// Checks `guest_trigger_types`.
///
/// # Errors
/// `code-runner::invalid_request` naming the key and the entry: empty, too
/// long, or a type no configuration may open.
pub fn check_guest_trigger_types(types: &[String]) -> Result<(), RunnerError> {
    check_count("guest_trigger_types", types.len())?;
    for entry in types {
        let t = entry.trim();
        if t.is_empty() || t.len() > MAX_TRIGGER_TYPE_BYTES {
            return Err(RunnerError::invalid(format!(
                "config key guest_trigger_types: entry `{}` must be 1..={MAX_TRIGGER_TYPE_BYTES} bytes",
                quote(entry)
            )));
        }
        if let Some(rule) = never_guest_trigger_type(t) {
            return Err(RunnerError::invalid(format!(
                "config key guest_trigger_types: `{}` can never be opened to guest code: {rule}",
                quote(entry)
            )));
        }
    }
    Ok(())
}

/// Longest `approval_required` entry, in bytes (a function id's bound).
const MAX_APPROVAL_ENTRY_BYTES: usize = 256;

/// Checks `approval_required`: each entry a function id (`ns::name`) or
/// `ns::*`, at most 256 bytes, no other wildcard.
///
/// # Errors
/// `code-runner::invalid_request` naming the key and the entry.
pub fn check_approval_required(entries: &[String]) -> Result<(), RunnerError> {
    check_count("approval_required", entries.len())?;
    for entry in entries {
        let well_formed = entry.len() <= MAX_APPROVAL_ENTRY_BYTES
            && entry.split_once("::").is_some_and(|(ns, name)| {
                !ns.is_empty()
                    && !name.is_empty()
                    && !ns.contains('*')
                    && (name == "*" || !name.contains('*'))
            });
        if !well_formed {
            return Err(RunnerError::invalid(format!(
                "config key approval_required: entry `{}` must be a function id (`namespace::name`) or `namespace::*`, at most {MAX_APPROVAL_ENTRY_BYTES} bytes",
                quote(entry)
            )));
        }
    }
    Ok(())
}

/// Whether `function_id` is one `approval_required` names (an id, or
/// `namespace::*`).
pub fn approval_required(entries: &[String], function_id: &str) -> bool {
    entries.iter().any(|entry| match entry.strip_suffix("::*") {
        Some(namespace) => function_id
            .strip_prefix(namespace)
            .is_some_and(|rest| rest.starts_with("::")),
        None => entry == function_id,
    })
}

/// Checks `guest_writable_namespaces`: each entry a namespace as the naming
/// rule spells one (an ASCII letter, then letters, digits, `_`, `-`; at most
/// 64 characters; no `::`).
///
/// # Errors
/// `code-runner::invalid_request` naming the key and the entry.
pub fn check_guest_namespaces(namespaces: &[String]) -> Result<(), RunnerError> {
    check_count("guest_writable_namespaces", namespaces.len())?;
    for entry in namespaces {
        let mut chars = entry.chars();
        let well_formed = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && entry.len() <= 64;
        if !well_formed {
            return Err(RunnerError::invalid(format!(
                "config key guest_writable_namespaces: `{}` is not a namespace (an ASCII letter, then letters, digits, `_` or `-`, at most 64; write `app`, not `app::`)",
                quote(entry)
            )));
        }
    }
    Ok(())
}

fn check_count(key: &str, n: usize) -> Result<(), RunnerError> {
    if n > MAX_GUEST_POLICY_ENTRIES {
        return Err(RunnerError::invalid(format!(
            "config key {key} has {n} entries; at most {MAX_GUEST_POLICY_ENTRIES}"
        )));
    }
    Ok(())
}

fn quote(entry: &str) -> String {
    entry.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_string()).collect()
    }

    /// UI slots, hooks, configuration, log and trace can never be opened,
    /// however they are spelled; ordinary types can.
    #[test]
    fn some_trigger_types_can_never_be_opened() {
        for bad in [
            "console:script",
            " Console:Style ",
            "console:assets",
            "harness::hook::pre-generate",
            "HARNESS::hook::post-turn",
            "configuration",
            "log",
            "Trace",
        ] {
            let err = check_guest_trigger_types(&list(&[bad])).unwrap_err();
            assert!(
                err.message.contains("can never be opened"),
                "{bad}: {}",
                err.message
            );
            assert!(
                err.message.contains("guest_trigger_types"),
                "{}",
                err.message
            );
        }
        assert!(check_guest_trigger_types(&list(&["cron", "my-app:tick", "logs"])).is_ok());
        assert!(check_guest_trigger_types(&list(&[""])).is_err());
        assert!(check_guest_trigger_types(&list(&[&"x".repeat(129)])).is_err());
    }

    /// Namespaces on the list follow the naming rule.
    #[test]
    fn writable_namespaces_are_namespaces() {
        assert!(check_guest_namespaces(&list(&["shared", "team_a-1"])).is_ok());
        for bad in ["app::", "", "1app", "a b", &"a".repeat(65)] {
            let err = check_guest_namespaces(&list(&[bad])).unwrap_err();
            assert!(
                err.message.contains("guest_writable_namespaces"),
                "{}",
                err.message
            );
        }
        let many: Vec<String> = (0..257).map(|i| format!("n{i}")).collect();
        assert!(check_guest_namespaces(&many).is_err());
    }
}
