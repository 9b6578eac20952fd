//! The naming rule for published functions, the same for every language.
//!
//! A function id is `namespace::name`: the namespace is the segment before
//! the first `::`, the name is one or more segments after it (`app::greet`,
//! `app::users::get`). Every segment starts with an ASCII letter and goes
//! on with ASCII letters, digits, `_` or `-`, at most 64 characters; a whole
//! id is at most 256 bytes. Namespaces that name the worker itself, the iii
//! engine, or a worker the bus bridge protects are reserved, so nothing can
//! be published in front of them. Reservations compare ids folded: ASCII
//! case ignored and `_`/`-` dropped, so `Code_Runner`, `coderunner` and
//! `engine_` are look-alikes of reserved names and reserved too.

use code_runner_core::RunnerError;

/// Longest segment of a function id, in characters.
pub const MAX_SEGMENT_CHARS: usize = 64;

/// Longest function id, in bytes: enough for a few nested names.
pub const MAX_FUNCTION_ID_BYTES: usize = 256;

/// Namespaces nothing may be published under: this worker's (`code-runner`),
/// the engine's and its built-in workers' (`engine`, `configuration`, `iii`
/// and every `iii-…`), and those whose functions the bus bridge refuses to
/// guest code (`state`, `harness`, `provider`, `provider-openai-codex`).
pub const RESERVED_NAMESPACES: &[&str] = &[
    "code-runner",
    "engine",
    "configuration",
    "iii",
    "state",
    "harness",
    "provider",
    "provider-openai-codex",
];

/// A checked function id and where its namespace ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionId {
    id: String,
    namespace_len: usize,
}

impl FunctionId {
    /// Checks `id` against the naming rule.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the id and what is wrong with it.
    pub fn parse(id: &str) -> Result<FunctionId, RunnerError> {
        if id.len() > MAX_FUNCTION_ID_BYTES {
            return Err(RunnerError::invalid(format!(
                "function_id is {} bytes; at most {MAX_FUNCTION_ID_BYTES}",
                id.len()
            )));
        }
        let Some((namespace, name)) = id.split_once("::") else {
            return Err(RunnerError::invalid(format!(
                "function_id `{id}` has no namespace: write it as `namespace::name`, e.g. `my-app::greet`"
            )));
        };
        check_namespace(namespace)?;
        for segment in name.split("::") {
            check_segment(segment).map_err(|why| {
                RunnerError::invalid(format!(
                    "function_id `{id}`: name segment `{segment}` {why}"
                ))
            })?;
        }
        Ok(FunctionId {
            id: id.to_string(),
            namespace_len: namespace.len(),
        })
    }

    /// The whole id.
    pub fn as_str(&self) -> &str {
        &self.id
    }

    /// The namespace, without `::`.
    pub fn namespace(&self) -> &str {
        &self.id[..self.namespace_len]
    }
}

/// Checks a namespace (no `::`) against the naming rule and the reserved set.
///
/// # Errors
/// `code-runner::invalid_request` naming the namespace and the rule it breaks.
pub fn check_namespace(namespace: &str) -> Result<(), RunnerError> {
    check_segment(namespace)
        .map_err(|why| RunnerError::invalid(format!("namespace `{namespace}` {why}")))?;
    if is_reserved(namespace) {
        return Err(RunnerError::invalid(format!(
            "namespace `{namespace}` is reserved (reserved: {}, and every iii-…; compared ignoring case, `_` and `-`)",
            RESERVED_NAMESPACES.join(", ")
        )));
    }
    Ok(())
}

/// Whether `namespace` is reserved or a look-alike of a reserved one.
fn is_reserved(namespace: &str) -> bool {
    let folded = fold(namespace);
    let lower = namespace.to_ascii_lowercase();
    RESERVED_NAMESPACES.iter().any(|r| fold(r) == folded)
        || lower.starts_with("iii-")
        || lower.starts_with("iii_")
}

/// A namespace as reservations and look-alikes compare it: ASCII lower
/// case, `_` and `-` dropped.
pub(crate) fn fold(namespace: &str) -> String {
    namespace
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The namespace a teardown names: `app` or `app::`, checked.
///
/// # Errors
/// As [`check_namespace`].
pub fn parse_namespace_arg(input: &str) -> Result<String, RunnerError> {
    let namespace = input.strip_suffix("::").unwrap_or(input);
    check_namespace(namespace)?;
    Ok(namespace.to_string())
}

/// The canonical `app::` form a teardown echoes.
pub fn canonical(namespace: &str) -> String {
    format!("{namespace}::")
}

fn check_segment(segment: &str) -> Result<(), String> {
    let mut chars = segment.chars();
    let Some(first) = chars.next() else {
        return Err("is empty".into());
    };
    if !first.is_ascii_alphabetic() {
        return Err("must start with an ASCII letter".into());
    }
    if let Some(bad) = chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
        return Err(format!(
            "may hold only ASCII letters, digits, `_` and `-`, not {bad:?}"
        ));
    }
    if segment.len() > MAX_SEGMENT_CHARS {
        return Err(format!("is longer than {MAX_SEGMENT_CHARS} characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one rule: what it accepts, and where the namespace ends.
    #[test]
    fn ids_follow_one_rule() {
        for ok in [
            "my-app::greet",
            "a::b",
            "App_2::getUser",
            "my-app::users::get",
        ] {
            assert!(FunctionId::parse(ok).is_ok(), "{ok}");
        }
        let id = FunctionId::parse("my-app::users::get").unwrap();
        assert_eq!(id.namespace(), "my-app");
        assert_eq!(id.as_str(), "my-app::users::get");
        for (bad, why) in [
            ("greet", "has no namespace"),
            ("::greet", "namespace `` is empty"),
            ("my-app::", "is empty"),
            ("my-app::a::", "is empty"),
            ("my app::greet", "not ' '"),
            ("1app::greet", "must start with an ASCII letter"),
            ("app::gr.eet", "not '.'"),
            ("app::grüß", "not 'ü'"),
            ("app:::greet", "must start with an ASCII letter"),
        ] {
            let err = FunctionId::parse(bad).unwrap_err();
            assert!(err.message.contains(why), "{bad}: {}", err.message);
        }
        let long = format!("a::{}", "b".repeat(65));
        assert!(FunctionId::parse(&long).unwrap_err().message.contains("64"));
        let huge = format!("a::{}", ["b"; 200].join("::"));
        assert!(
            FunctionId::parse(&huge)
                .unwrap_err()
                .message
                .contains("256")
        );
    }

    /// The worker's, the engine's and the bridge-protected namespaces are
    /// reserved, whatever their case.
    #[test]
    fn reserved_namespaces_are_refused() {
        for reserved in [
            "code-runner::x",
            "engine::functions::info",
            "configuration::set",
            "state::claim-namespace",
            "harness::state::x",
            "provider::openai-codex::login::x",
            "provider-openai-codex::state::x",
            "iii::x",
            "iii-queue::x",
            "Engine::x",
            "code_runner::x",
            "coderunner::x",
            "Code-Runner::x",
            "CODE_RUNNER::x",
            "engine_::x",
            "en-gine::x",
            "Configuration_::x",
            "iii_queue::x",
            "III-x::x",
            "provider_openai_codex::x",
            "State-::x",
        ] {
            let err = FunctionId::parse(reserved).unwrap_err();
            assert!(
                err.message.contains("is reserved"),
                "{reserved}: {}",
                err.message
            );
        }
        assert!(FunctionId::parse("stateful::x").is_ok());
        assert!(FunctionId::parse("engineer::x").is_ok());
        assert!(FunctionId::parse("code-runners::x").is_ok());
        assert!(FunctionId::parse("iiiapp::x").is_ok());
    }

    /// A teardown may name `app` or `app::`; both mean the same namespace.
    #[test]
    fn teardown_names_a_namespace_either_way() {
        assert_eq!(parse_namespace_arg("app").unwrap(), "app");
        assert_eq!(parse_namespace_arg("app::").unwrap(), "app");
        assert_eq!(canonical("app"), "app::");
        assert!(parse_namespace_arg("app::x").is_err());
        assert!(parse_namespace_arg("engine").is_err());
    }
}
