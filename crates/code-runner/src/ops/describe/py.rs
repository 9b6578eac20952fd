//! Python stubs: a `TypedDict` per object with properties (its properties'
//! descriptions as attribute docstrings), and a class per namespace whose
//! static methods are the functions, with their descriptions as docstrings.
//! Object payloads are taken as keywords (`Unpack`); one dict works too.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde_json::Value;

use super::Entry;
use super::schema::{Object, Ty};

/// The first lines of the stubs.
pub(super) const HEADER: &str =
    "from typing import Any, Literal, NotRequired, TypedDict, Unpack\n\n";

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The `TypedDict`s one function needs, named apart from every other's.
pub(super) struct Classes<'a> {
    taken: &'a mut BTreeSet<String>,
    /// The names this one took, to give back if its text is dropped.
    pub added: Vec<String>,
    pub text: String,
}

impl<'a> Classes<'a> {
    pub(super) fn new(taken: &'a mut BTreeSet<String>) -> Self {
        Classes {
            taken,
            added: Vec::new(),
            text: String::new(),
        }
    }

    fn name(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut n = 2;
        while !self.taken.insert(name.clone()) {
            name = format!("{base}{n}");
            n += 1;
        }
        self.added.push(name.clone());
        name
    }

    /// `t` as a Python type; objects with properties become classes named from `base`.
    fn ty(&mut self, t: &Ty, base: &str) -> String {
        match t {
            Ty::Unknown => "Any".into(),
            Ty::Null => "None".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Num => "float".into(),
            Ty::Str => "str".into(),
            Ty::Literals(values) => literal(values),
            Ty::Array(item) => format!("list[{}]", self.ty(item, &format!("{base}Item"))),
            Ty::Union(options) => options
                .iter()
                .enumerate()
                .map(|(i, o)| self.ty(o, &format!("{base}{}", i + 1)))
                .collect::<Vec<_>>()
                .join(" | "),
            Ty::Object(object) => self.object(object, base),
        }
    }

    fn object(&mut self, object: &Object, base: &str) -> String {
        if object.props.is_empty() {
            let rest = match object.rest.as_deref() {
                Some(rest) => self.ty(rest, &format!("{base}Value")),
                None => "Any".into(),
            };
            return format!("dict[str, {rest}]");
        }
        let name = self.name(base);
        let fields: Vec<(String, String, Option<&String>)> = object
            .props
            .iter()
            .map(|prop| {
                let ty = self.ty(&prop.ty, &format!("{name}{}", camel(&prop.name)));
                let ty = if prop.required {
                    ty
                } else {
                    format!("NotRequired[{ty}]")
                };
                (prop.name.clone(), ty, prop.doc.as_ref())
            })
            .collect();
        let plain = fields.iter().all(|(n, _, _)| is_identifier(n));
        if plain {
            let _ = writeln!(self.text, "class {name}(TypedDict):");
            for (field, ty, doc) in &fields {
                let _ = writeln!(self.text, "    {field}: {ty}");
                if let Some(doc) = doc {
                    let _ = writeln!(self.text, "    {}", docstring(doc, "    "));
                }
            }
        } else {
            for (field, _, doc) in &fields {
                if let Some(doc) = doc {
                    let line = doc.split_whitespace().collect::<Vec<_>>().join(" ");
                    let _ = writeln!(self.text, "# {}: {line}", quoted(field));
                }
            }
            let body: Vec<String> = fields
                .iter()
                .map(|(field, ty, _)| format!("{}: {ty}", quoted(field)))
                .collect();
            let _ = writeln!(
                self.text,
                "{name} = TypedDict({}, {{{}}})",
                quoted(&name),
                body.join(", ")
            );
        }
        self.text.push('\n');
        name
    }
}

fn literal(values: &[Value]) -> String {
    if values.iter().any(|v| v.is_f64()) {
        return "float".into(); // Literal takes no floats
    }
    let spelled: Vec<String> = values
        .iter()
        .map(|v| match v {
            Value::Null => "None".into(),
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            other => other.to_string(),
        })
        .collect();
    format!("Literal[{}]", spelled.join(", "))
}

fn quoted(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
}

/// `text` in CamelCase, identifier characters only.
pub(super) fn camel(text: &str) -> String {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map_or(String::new(), |c| {
                c.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// A triple-quoted docstring whose text cannot end it.
fn docstring(doc: &str, indent: &str) -> String {
    let body = doc
        .replace('\\', "\\\\")
        .replace("\"\"\"", "\\\"\\\"\\\"")
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join(&format!("\n{indent}"));
    format!("\"\"\"{body}\"\"\"")
}

/// One function: its classes (into `classes`) and its method's text.
pub(super) fn function(entry: &Entry, input: &Ty, output: &Ty, classes: &mut Classes) -> String {
    let base: String = entry.parts.iter().map(|p| camel(p)).collect();
    let result = classes.ty(output, &format!("{base}Output"));
    let params = match input {
        Ty::Object(object) if !object.props.is_empty() => {
            let class = classes.object(object, &format!("{base}Input"));
            format!("**payload: Unpack[{class}]")
        }
        Ty::Unknown | Ty::Null => "payload: Any = None, /".into(),
        other => format!("payload: {}, /", classes.ty(other, &format!("{base}Input"))),
    };
    let mut doc = entry.doc.clone().unwrap_or_default();
    if !doc.is_empty() {
        doc.push_str("\n\n");
    }
    let _ = write!(doc, "Calls `{}`.", entry.id);
    if params.starts_with("**") {
        doc.push_str(" Pass the fields as keywords, or one dict.");
    }
    format!(
        "(self, {params}) -> {result}:\n        {}\n",
        docstring(&doc, "        ")
    )
}

/// A namespace's node: the functions and namespaces under it.
#[derive(Default)]
struct Node {
    own: Option<String>,
    children: BTreeMap<String, Node>,
}

/// The stubs: `classes`, then one class per namespace, then `iii`.
pub(super) fn assemble(classes: &str, rendered: &[(&Entry, String)]) -> String {
    let mut root = Node::default();
    for (entry, method) in rendered {
        let mut node = &mut root;
        for part in &entry.parts {
            node = node.children.entry(part.clone()).or_default();
        }
        node.own = Some(method.clone());
    }
    let mut out = String::from(HEADER);
    out.push_str(classes);
    emit(&root, "_fn", &mut out);
    out.push_str("class _iii:\n    fn: _fn\n\n\niii: _iii\n");
    out
}

/// The class of `node` (after its children's), named `class`.
fn emit(node: &Node, class: &str, out: &mut String) {
    for (name, child) in &node.children {
        if !child.children.is_empty() {
            emit(child, &format!("{class}_{name}"), out);
        }
    }
    let _ = writeln!(out, "class {class}:");
    if let Some(method) = &node.own {
        let _ = write!(out, "    def __call__{method}");
    }
    for (name, child) in &node.children {
        if child.children.is_empty() {
            if let Some(method) = &child.own {
                let _ = write!(out, "    def {name}{method}");
            }
        } else {
            let _ = writeln!(out, "    {name}: {class}_{name}");
        }
    }
    if node.own.is_none() && node.children.is_empty() {
        out.push_str("    pass\n");
    }
    out.push_str("\n\n");
}
