//! The naming rules of bindings: which globals a namespace or an error class
//! may take, and which property may carry an error's member name. Checked
//! by [`super::Bindings::new`] for every engine alike.

use crate::error::RunnerError;

/// Reserved words of every supported language: JavaScript's (strict mode
/// included) and Python's hard keywords. A namespace may not use any of them.
pub const RESERVED_WORDS: &[&str] = &[
    // JavaScript
    "arguments",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "eval",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "undefined",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "NaN",
    "Infinity",
    // Python
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "def",
    "del",
    "elif",
    "except",
    "from",
    "global",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
];

/// Globals the engines own: a namespace there would hide or break them.
pub const RESERVED_BINDING_GLOBALS: &[&str] = &[
    "console",
    "globalThis",
    "result",
    "__builtins__",
    "__name__",
    "__file__",
    "__code_runner__",
];

/// Members an error instance already has in some language; the member-name
/// property may not be one of them (nor a dunder name, checked separately).
pub const RESERVED_ERROR_MEMBERS: &[&str] = &[
    "name",
    "message",
    "stack",
    "cause",
    "errors",
    "code",
    "constructor",
    "prototype",
    "toString",
    "valueOf",
    "args",
    "with_traceback",
    "add_note",
];

/// Checks a global a binding defines (a namespace, an error class): a portable
/// identifier, no reserved word, no global the engines own.
pub(super) fn check_global(what: &str, name: &str) -> Result<(), RunnerError> {
    let mut chars = name.chars();
    let portable = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !portable {
        return Err(RunnerError::invalid(format!(
            "{what} `{name}` must match [A-Za-z_][A-Za-z0-9_]*"
        )));
    }
    if RESERVED_WORDS.contains(&name) {
        return Err(RunnerError::invalid(format!(
            "{what} `{name}` is a reserved word"
        )));
    }
    if RESERVED_BINDING_GLOBALS.contains(&name) {
        return Err(RunnerError::invalid(format!(
            "{what} `{name}` is a reserved global"
        )));
    }
    Ok(())
}

/// Checks an error class's member-name property: not empty, not a member an
/// error already has, not a dunder name.
pub(super) fn check_member_property(name: &str) -> Result<(), RunnerError> {
    let dunder = name.len() > 4 && name.starts_with("__") && name.ends_with("__");
    if name.is_empty() || dunder || RESERVED_ERROR_MEMBERS.contains(&name) {
        return Err(RunnerError::invalid(format!(
            "binding error class member property `{name}` is empty, reserved or a dunder name"
        )));
    }
    Ok(())
}
