//! One escaping function per place `describe` writes text someone else
//! wrote (descriptions, property names, enum values, ids), each total over
//! Unicode: whatever the text, the output parses as what it is (Python for
//! the stubs, TypeScript for the declarations), the text cannot end its
//! comment, string or docstring early, and nothing invisible reaches the
//! reader raw (NUL, terminal escapes, bidi overrides, zero-width and tag
//! characters, separators: [`visible`]); those are written as the escape
//! that names them (`\x1b`, `\u202e`), so a reader sees that they are there.

use std::fmt::Write;

use crate::bus::catalog::visible;

/// A Python string literal (`"…"`) holding `text`.
pub(super) fn py_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if visible(c) => out.push(c),
            c => py_escape(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// A Python triple-quoted docstring holding `text`, its later lines
/// indented by `indent`; nothing in it can end it early.
pub(super) fn py_docstring(text: &str, indent: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '\n' | '\t' => escaped.push(c),
            c if visible(c) => escaped.push(c),
            c => py_escape(&mut escaped, c),
        }
    }
    // No run of three quotes: every third quote of a run is escaped.
    let escaped = escaped.replace("\"\"\"", "\"\"\\\"");
    let mut body = String::new();
    for (i, line) in escaped.split('\n').map(str::trim_end).enumerate() {
        if i > 0 {
            body.push('\n');
            if !line.is_empty() {
                body.push_str(indent);
            }
        }
        body.push_str(line);
    }
    // A closing quote would end the string early: `"x""""`.
    let body = match body.strip_suffix('"') {
        Some(rest) => format!("{rest}\\\""),
        None => body,
    };
    format!("\"\"\"{body}\"\"\"")
}

/// `text` on one line, for after a Python `#`.
pub(super) fn py_comment(text: &str) -> String {
    let mut out = String::new();
    for c in one_line(text).chars() {
        if visible(c) {
            out.push(c);
        } else {
            py_escape(&mut out, c);
        }
    }
    out
}

/// A TypeScript string literal (`"…"`) holding `text`.
pub(super) fn ts_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if visible(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// One line of a TypeScript block comment (`/** … */`) holding `text`'s
/// line: it cannot end the comment, and shows what is invisible as escapes.
pub(super) fn ts_comment_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\t' => out.push(' '),
            c if visible(c) && c != '\n' => out.push(c),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    out.trim_end().replace("*/", "*\\/")
}

/// `text` on one line of a TypeScript block comment.
pub(super) fn ts_inline(text: &str) -> String {
    ts_comment_line(&one_line(text))
}

/// `text`'s words joined by single spaces (every kind of whitespace,
/// separators included, is a break).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn py_escape(out: &mut String, c: char) {
    let code = u32::from(c);
    let _ = match code {
        0..=0xff => write!(out, "\\x{code:02x}"),
        0x100..=0xffff => write!(out, "\\u{code:04x}"),
        _ => write!(out, "\\U{code:08x}"),
    };
}

#[cfg(test)]
mod tests;
