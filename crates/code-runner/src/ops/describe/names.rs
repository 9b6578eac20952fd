//! The one rule that maps a function id to its name under `iii.fn`.
//!
//! The id is split at `::`; in each part every character that is not an
//! ASCII letter, digit or `_` becomes `_`, a part that starts with a digit
//! (or is empty) gets a leading `_`, and a part that is a reserved word of
//! JavaScript, TypeScript or Python gets a trailing `_`. The parts joined
//! with `.` are the name: `my-app::greet` is `my_app.greet`
//! (`iii.fn.my_app.greet`), `engine::functions::info` is
//! `engine.functions.info`, `code-runner@w1::run` is `code_runner_w1.run`.
//! Two ids with the same name clash: `describe` reports them and a call by
//! that name is refused (call them with `iii.trigger`).

use std::collections::BTreeMap;

/// Words no part may be, in either language (JavaScript's and TypeScript's
/// reserved words and Python's keywords and soft keywords that would break
/// a declaration).
const RESERVED: &[&str] = &[
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "def",
    "default",
    "del",
    "delete",
    "do",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "from",
    "function",
    "global",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "is",
    "lambda",
    "let",
    "match",
    "new",
    "nonlocal",
    "not",
    "null",
    "or",
    "package",
    "pass",
    "private",
    "protected",
    "public",
    "raise",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "type",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// The name parts of `id` (see the module's rule).
pub(crate) fn parts_of(id: &str) -> Vec<String> {
    id.split("::").map(part).collect()
}

/// The name of `id`: its parts joined with `.`.
pub(crate) fn name_of(id: &str) -> String {
    parts_of(id).join(".")
}

fn part(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if RESERVED.contains(&out.as_str()) {
        out.push('_');
    }
    out
}

/// The names of `ids`, and the names more than one id has (each with its
/// ids, sorted).
pub(crate) fn clashes<'a>(ids: impl Iterator<Item = &'a str>) -> BTreeMap<String, Vec<String>> {
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for id in ids {
        by_name.entry(name_of(id)).or_default().push(id.to_string());
    }
    by_name.retain(|_, ids| ids.len() > 1);
    for ids in by_name.values_mut() {
        ids.sort();
    }
    by_name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule's examples, as the docs give them.
    #[test]
    fn ids_map_to_names_by_one_rule() {
        assert_eq!(name_of("my-app::greet"), "my_app.greet");
        assert_eq!(name_of("engine::functions::info"), "engine.functions.info");
        assert_eq!(name_of("code-runner@w1::run"), "code_runner_w1.run");
        assert_eq!(name_of("app::delete"), "app.delete_");
        assert_eq!(name_of("1x::ünï"), "_1x._n_");
        assert_eq!(name_of("solo"), "solo");
        assert_eq!(name_of("a::::b"), "a._.b");
    }

    /// `my-app::greet` and `my_app::greet` share a name: a clash.
    #[test]
    fn two_ids_with_one_name_clash() {
        let found = clashes(["my-app::greet", "my_app::greet", "other::x"].into_iter());
        assert_eq!(found.len(), 1);
        assert_eq!(found["my_app.greet"], ["my-app::greet", "my_app::greet"]);
    }
}
