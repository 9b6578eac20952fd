//! TypeScript declarations: one `declare namespace iii.fn.<namespace>` per
//! namespace, a `function` per id with its description as JSDoc, object
//! types inline with their properties' descriptions.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use super::Entry;
use super::schema::{Object, Ty};
use super::text::{ts_comment_line, ts_inline, ts_string};

/// `ty` as a TypeScript type.
fn ty(t: &Ty) -> String {
    match t {
        Ty::Unknown => "unknown".into(),
        Ty::Null => "null".into(),
        Ty::Bool => "boolean".into(),
        Ty::Int | Ty::Num => "number".into(),
        Ty::Str => "string".into(),
        Ty::Literals(values) => join(values.iter().map(|v| match v {
            Value::String(text) => ts_string(text),
            other => other.to_string(),
        })),
        Ty::Array(item) => format!("Array<{}>", ty(item)),
        Ty::Union(options) => join(options.iter().map(ty)),
        Ty::Object(object) => obj(object),
    }
}

fn join(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(" | ")
}

fn obj(object: &Object) -> String {
    if object.props.is_empty() {
        let rest = object.rest.as_deref().map_or("unknown".into(), ty);
        return format!("Record<string, {rest}>");
    }
    let mut out = String::from("{ ");
    for prop in &object.props {
        if let Some(doc) = &prop.doc {
            let _ = write!(out, "/** {} */ ", ts_inline(doc));
        }
        let optional = if prop.required { "" } else { "?" };
        let _ = write!(out, "{}{optional}: {}; ", key(&prop.name), ty(&prop.ty));
    }
    if object.rest.is_some() {
        // Other keys are allowed; an index signature's type must hold every
        // property's too, so it says no more than `unknown`.
        out.push_str("[key: string]: unknown; ");
    }
    out.push('}');
    out
}

/// A property name: bare when it is an identifier, else a string literal.
fn key(name: &str) -> String {
    let mut chars = name.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        name.to_string()
    } else {
        ts_string(name)
    }
}

/// One function's declaration, indented for its namespace block.
pub(super) fn function(entry: &Entry, input: &Ty, output: &Ty) -> String {
    let mut out = String::new();
    out.push_str("  /**\n");
    if let Some(doc) = &entry.doc {
        for line in doc.split('\n') {
            let _ = writeln!(out, "   * {}", ts_comment_line(line));
        }
    }
    let _ = writeln!(out, "   * Calls `{}`.", ts_comment_line(&entry.id));
    out.push_str("   */\n");
    let optional = match input {
        Ty::Unknown | Ty::Null => true,
        Ty::Object(object) => object.props.iter().all(|p| !p.required),
        _ => false,
    };
    let name = entry.parts.last().map_or("_", String::as_str);
    let _ = writeln!(
        out,
        "  function {name}(input{}: {}): Promise<{}>;",
        if optional { "?" } else { "" },
        ty(input),
        ty(output)
    );
    out
}

/// The declarations of `rendered` (each entry with its text), one block per
/// namespace.
pub(super) fn assemble(rendered: &[(&Entry, String)]) -> String {
    let mut blocks: BTreeMap<String, String> = BTreeMap::new();
    for (entry, text) in rendered {
        let namespace = entry.parts[..entry.parts.len().saturating_sub(1)].join(".");
        blocks.entry(namespace).or_default().push_str(text);
    }
    let mut out = String::new();
    for (namespace, body) in blocks {
        let path = if namespace.is_empty() {
            "iii.fn".to_string()
        } else {
            format!("iii.fn.{namespace}")
        };
        let _ = write!(out, "declare namespace {path} {{\n{body}}}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::describe::schema::lower;

    /// Properties beside `additionalProperties` take other keys too (tsc
    /// refused `{ hits: 1, misses: 2 }` as an excess property); with no
    /// properties the rest's own type is kept.
    #[test]
    fn additional_properties_beside_properties_allow_other_keys() {
        let counters = lower(&serde_json::json!({"type": "object",
            "properties": {"hits": {"type": "integer"}},
            "additionalProperties": {"type": "integer"}}));
        assert_eq!(ty(&counters), "{ hits?: number; [key: string]: unknown; }");
        let closed = lower(&serde_json::json!({"type": "object",
            "properties": {"hits": {"type": "integer"}}, "additionalProperties": false}));
        assert_eq!(ty(&closed), "{ hits?: number; }");
        let map = lower(
            &serde_json::json!({"type": "object", "additionalProperties": {"type": "string"}}),
        );
        assert_eq!(ty(&map), "Record<string, string>");
    }
}
