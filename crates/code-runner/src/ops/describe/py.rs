//! Python stubs: a `TypedDict` per object with properties (its properties'
//! descriptions as attribute docstrings), a `Protocol` per function whose
//! `__call__` is its signature (its description as docstring), and a class
//! per namespace whose attributes are its functions and namespaces. Object
//! payloads are taken as keywords (`Unpack`) or as one dict (an overload).
//! A namespace's body names only classes named apart from every part of
//! every id, so a function called `list` or `str` shadows nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde_json::Value;

use super::Entry;
use super::schema::{Object, Ty};
use super::text::{py_comment, py_docstring, py_string};

/// The first lines of the stubs.
pub(super) const HEADER: &str =
    "from typing import Any, Literal, NotRequired, Protocol, TypedDict, Unpack, overload\n\n";

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
                    let _ = writeln!(self.text, "    {}", py_docstring(doc, "    "));
                }
            }
        } else {
            for (field, _, doc) in &fields {
                if let Some(doc) = doc {
                    let _ = writeln!(self.text, "# {}: {}", py_string(field), py_comment(doc));
                }
            }
            let body: Vec<String> = fields
                .iter()
                .map(|(field, ty, _)| format!("{}: {ty}", py_string(field)))
                .collect();
            let _ = writeln!(
                self.text,
                "{name} = TypedDict({}, {{{}}})",
                py_string(&name),
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
            Value::String(text) => py_string(text),
            other => other.to_string(),
        })
        .collect();
    format!("Literal[{}]", spelled.join(", "))
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

/// One function: its classes (into `classes`) and its `__call__`'s text (an
/// object payload overloaded: one dict, or its fields as keywords).
pub(super) fn function(entry: &Entry, input: &Ty, output: &Ty, classes: &mut Classes) -> String {
    let mut base: String = entry.parts.iter().map(|p| camel(p)).collect();
    if base.starts_with(|c: char| c.is_ascii_digit()) {
        base.insert(0, 'T'); // `1x::y` is `_1x.y`: a class name cannot start with `1`
    }
    let result = classes.ty(output, &format!("{base}Output"));
    let mut doc = entry.doc.clone().unwrap_or_default();
    if !doc.is_empty() {
        doc.push_str("\n\n");
    }
    let _ = write!(doc, "Calls `{}`.", entry.id);
    let doc = |extra: &str| py_docstring(&format!("{doc}{extra}"), "        ");
    match input {
        Ty::Object(object) if !object.props.is_empty() => {
            let class = classes.object(object, &format!("{base}Input"));
            format!(
                "    @overload\n    def __call__(self, /, **payload: Unpack[{class}]) -> {result}:\n        {}\n    @overload\n    def __call__(self, payload: {class}, /) -> {result}: ...\n",
                doc(" Pass the fields as keywords, or one dict.")
            )
        }
        Ty::Unknown | Ty::Null => format!(
            "    def __call__(self, payload: Any = None, /) -> {result}:\n        {}\n",
            doc("")
        ),
        other => {
            let ty = classes.ty(other, &format!("{base}Input"));
            format!(
                "    def __call__(self, payload: {ty}, /) -> {result}:\n        {}\n",
                doc("")
            )
        }
    }
}

/// A namespace's node: the function and namespaces under it.
#[derive(Default)]
struct Node {
    own: Option<String>,
    children: BTreeMap<String, Node>,
}

/// The stubs: `classes`, then the functions' protocols and one class per
/// namespace (each before its use: the stubs run as Python too), then `iii`.
pub(super) fn assemble(classes: &str, rendered: &[(&Entry, String)]) -> String {
    let mut root = Node::default();
    // The namespaces' classes are named apart from every part, so no
    // attribute of a namespace hides a class its body names.
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for (entry, method) in rendered {
        let mut node = &mut root;
        for part in &entry.parts {
            taken.insert(part.clone());
            node = node.children.entry(part.clone()).or_default();
        }
        node.own = Some(method.clone());
    }
    let mut out = String::from(HEADER);
    out.push_str(classes);
    let mut names = Names { taken };
    let fn_class = emit(&root, "", &mut names, &mut out);
    let _ = write!(out, "class _iii:\n    fn: {fn_class}\n\n\niii: _iii\n");
    out
}

/// Class names, each taken once.
struct Names {
    taken: BTreeSet<String>,
}

impl Names {
    fn take(&mut self, base: String) -> String {
        let mut name = base.clone();
        let mut n = 2;
        while !self.taken.insert(name.clone()) {
            name = format!("{base}{n}");
            n += 1;
        }
        name
    }
}

/// Writes the classes of `node` at `path` (its children's first); answers
/// the name of its class.
fn emit(node: &Node, path: &str, names: &mut Names, out: &mut String) -> String {
    let mut members = Vec::new();
    for (name, child) in &node.children {
        let class = emit(child, &format!("{path}_{name}"), names, out);
        members.push((name, class));
    }
    let call = node.own.as_ref().map(|method| {
        let call = names.take(format!("_call{path}"));
        let _ = write!(out, "class {call}(Protocol):\n{method}\n\n");
        call
    });
    if let (true, Some(call)) = (node.children.is_empty(), &call) {
        return call.clone();
    }
    let class = names.take(format!("_fn{path}"));
    match &call {
        Some(call) => {
            let _ = writeln!(out, "class {class}({call}):");
        }
        None => {
            let _ = writeln!(out, "class {class}:");
        }
    }
    for (name, member) in &members {
        let _ = writeln!(out, "    {name}: {member}");
    }
    if members.is_empty() {
        out.push_str("    pass\n");
    }
    out.push_str("\n\n");
    class
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, doc: Option<&str>) -> Entry {
        Entry {
            id: id.into(),
            parts: super::super::names::parts_of(id),
            doc: doc.map(str::to_string),
        }
    }

    /// A description ending in a quote cannot end its docstring early (mypy
    /// found `"""… e.g. "PT""""`: an unterminated string).
    #[test]
    fn a_docstring_ending_in_a_quote_stays_closed() {
        assert_eq!(
            py_docstring("e.g. \"PT\"", "    "),
            "\"\"\"e.g. \"PT\\\"\"\"\""
        );
        assert_eq!(py_docstring("a\n\nb \\", "  "), "\"\"\"a\n\n  b \\\\\"\"\"");
    }

    /// A function named `list` or `str` hides no type: the namespace's body
    /// names only classes no part of any id is (mypy found `Function
    /// "list" is not valid as a type`); an object payload is one dict or
    /// keywords; a part with a leading digit still makes a class name.
    #[test]
    fn names_in_a_namespace_shadow_no_type() {
        let mut taken = BTreeSet::new();
        let object = Ty::Object(Object {
            props: vec![super::super::schema::Prop {
                name: "self".into(),
                ty: Ty::Str,
                required: false,
                doc: None,
            }],
            rest: None,
        });
        let list = entry("app::list", None);
        let str_ = entry("app::str", Some("Says \"hi\""));
        let digit = entry("1x::_call_app_list", None);
        let mut classes = Classes::new(&mut taken);
        let rendered: Vec<(&Entry, String)> = vec![
            (
                &list,
                function(
                    &list,
                    &Ty::Unknown,
                    &Ty::Array(Box::new(Ty::Int)),
                    &mut classes,
                ),
            ),
            (&str_, function(&str_, &object, &Ty::Str, &mut classes)),
            (&digit, function(&digit, &object, &Ty::Null, &mut classes)),
        ];
        let text = classes.text.clone();
        let stubs = assemble(&text, &rendered);
        assert!(
            stubs.contains("class T1xCallAppListInput(TypedDict):"),
            "{stubs}"
        );
        assert!(
            stubs.contains("class _fn_app:\n    list: _call_app_list2\n    str: _call_app_str\n"),
            "{stubs}"
        );
        assert!(stubs.contains("class _call_app_list2(Protocol):\n    def __call__(self, payload: Any = None, /) -> list[int]:"), "{stubs}");
        assert!(stubs.contains("    @overload\n    def __call__(self, /, **payload: Unpack[AppStrInput]) -> str:\n        \"\"\"Says \"hi\"\n\n        Calls `app::str`."), "{stubs}");
        assert!(
            stubs.contains(
                "    @overload\n    def __call__(self, payload: AppStrInput, /) -> str: ...\n"
            ),
            "{stubs}"
        );
        assert!(
            stubs.contains("class _fn__1x:\n    _call_app_list: _call__1x__call_app_list\n"),
            "{stubs}"
        );
    }
}
