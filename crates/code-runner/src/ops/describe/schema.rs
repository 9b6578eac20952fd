//! JSON Schema lowered to the few shapes both languages' declarations can
//! say, within bounds: a schema is read at most [`MAX_DEPTH`] levels deep
//! and [`MAX_NODES`] subschemas wide, local `$ref`s (`#/$defs/…`,
//! `#/definitions/…`, any `#/…` pointer) are followed with a visited set
//! (a cycle becomes [`Ty::Unknown`]), and every keyword that does not map
//! (`allOf` of several, `not`, `if`, tuples, remote refs) is `Unknown` too.

use serde_json::{Map, Value};

/// Deepest nesting of subschemas read; deeper is [`Ty::Unknown`].
pub(crate) const MAX_DEPTH: usize = 12;
/// Most subschemas lowered for one function's schema; past it, the rest are
/// [`Ty::Unknown`] (a 16 KiB schema of `$ref`s can stand for exponentially many).
pub(crate) const MAX_NODES: usize = 2_000;
/// Most members of an `enum` spelled out; a longer one is its base type.
const MAX_ENUM: usize = 64;
/// Longest description kept, in bytes.
pub(crate) const MAX_DOC_BYTES: usize = 1_024;

/// What a declaration can say of a value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ty {
    /// Anything: no schema, or one that does not map.
    Unknown,
    Null,
    Bool,
    Int,
    Num,
    Str,
    /// One of these JSON scalars (`const`, `enum`).
    Literals(Vec<Value>),
    Array(Box<Ty>),
    Object(Object),
    Union(Vec<Ty>),
}

/// An object's known properties, and what its other keys hold.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Object {
    pub props: Vec<Prop>,
    /// `additionalProperties` as a schema (`None`: not said, or `false`).
    pub rest: Option<Box<Ty>>,
}

/// One property.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prop {
    pub name: String,
    pub ty: Ty,
    pub required: bool,
    pub doc: Option<String>,
}

/// Lowers `schema` (its own root for `$ref`s).
pub(crate) fn lower(schema: &Value) -> Ty {
    let mut walk = Walk {
        root: schema,
        nodes: 0,
        visiting: Vec::new(),
    };
    walk.lower(schema, 0)
}

/// `schema`'s description, cut to [`MAX_DOC_BYTES`].
pub(crate) fn doc_of(schema: &Value) -> Option<String> {
    schema
        .get("description")
        .and_then(Value::as_str)
        .map(|text| cut(text, MAX_DOC_BYTES))
        .filter(|text| !text.trim().is_empty())
}

/// `text` cut to at most `max` bytes, at a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

struct Walk<'a> {
    root: &'a Value,
    nodes: usize,
    visiting: Vec<&'a str>,
}

impl<'a> Walk<'a> {
    fn lower(&mut self, schema: &'a Value, depth: usize) -> Ty {
        self.nodes += 1;
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            return Ty::Unknown;
        }
        let Value::Object(map) = schema else {
            return Ty::Unknown; // `true`, `false` or not a schema
        };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            return self.follow(reference, depth);
        }
        if let Some(value) = map.get("const") {
            return literals(std::slice::from_ref(value));
        }
        if let Some(Value::Array(members)) = map.get("enum") {
            // An enum of objects, or a long one: its base type says enough.
            return match literals(members) {
                Ty::Unknown => self.typed(map, depth),
                spelled => spelled,
            };
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = map.get(key) {
                let options: Vec<Ty> = options.iter().map(|o| self.lower(o, depth + 1)).collect();
                return union(options);
            }
        }
        if let Some(Value::Array(all)) = map.get("allOf") {
            return match all.as_slice() {
                [one] => self.lower(one, depth + 1),
                _ => Ty::Unknown,
            };
        }
        self.typed(map, depth)
    }

    /// A local `$ref`, once per path through the schema: a cycle is unknown.
    fn follow(&mut self, reference: &'a str, depth: usize) -> Ty {
        let Some(pointer) = reference.strip_prefix('#') else {
            return Ty::Unknown; // a remote reference
        };
        if self.visiting.contains(&reference) {
            return Ty::Unknown;
        }
        let Some(target) = self.root.pointer(pointer) else {
            return Ty::Unknown;
        };
        self.visiting.push(reference);
        let ty = self.lower(target, depth + 1);
        self.visiting.pop();
        ty
    }

    /// By `type` (one, or a list: a union), or by the keywords that imply one.
    fn typed(&mut self, map: &'a Map<String, Value>, depth: usize) -> Ty {
        match map.get("type") {
            Some(Value::String(name)) => self.of_type(name, map, depth),
            Some(Value::Array(names)) => {
                let options = names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|name| self.of_type(name, map, depth))
                    .collect();
                union(options)
            }
            _ if map.contains_key("properties") => self.of_type("object", map, depth),
            _ if map.contains_key("items") => self.of_type("array", map, depth),
            _ => Ty::Unknown,
        }
    }

    fn of_type(&mut self, name: &str, map: &'a Map<String, Value>, depth: usize) -> Ty {
        match name {
            "null" => Ty::Null,
            "boolean" => Ty::Bool,
            "integer" => Ty::Int,
            "number" => Ty::Num,
            "string" => Ty::Str,
            "array" => match map.get("items") {
                Some(items @ Value::Object(_)) => Ty::Array(Box::new(self.lower(items, depth + 1))),
                _ => Ty::Array(Box::new(Ty::Unknown)),
            },
            "object" => self.object(map, depth),
            _ => Ty::Unknown,
        }
    }

    fn object(&mut self, map: &'a Map<String, Value>, depth: usize) -> Ty {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut props = Vec::new();
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (name, schema) in properties {
                if self.nodes > MAX_NODES {
                    break;
                }
                props.push(Prop {
                    name: cut(name, 256),
                    ty: self.lower(schema, depth + 1),
                    required: required.contains(&name.as_str()),
                    doc: doc_of(schema),
                });
            }
        }
        let rest = match map.get("additionalProperties") {
            Some(schema @ Value::Object(_)) => Some(Box::new(self.lower(schema, depth + 1))),
            _ => None,
        };
        Ty::Object(Object { props, rest })
    }
}

/// The scalars of an `enum` or `const`; `Unknown` if one is not a scalar or
/// there are too many.
fn literals(values: &[Value]) -> Ty {
    let scalar = |v: &Value| !(v.is_array() || v.is_object());
    if values.is_empty() || values.len() > MAX_ENUM || !values.iter().all(scalar) {
        return Ty::Unknown;
    }
    let kept = values
        .iter()
        .map(|v| match v {
            Value::String(s) => Value::String(cut(s, 256)),
            other => other.clone(),
        })
        .collect();
    Ty::Literals(kept)
}

/// A union of `options`: one option is itself; any unknown makes it unknown.
fn union(mut options: Vec<Ty>) -> Ty {
    if options.is_empty() || options.contains(&Ty::Unknown) {
        return Ty::Unknown;
    }
    options.dedup();
    if options.len() == 1 {
        return options.remove(0);
    }
    Ty::Union(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A `$ref` cycle ends in `Unknown` where it comes round again.
    #[test]
    fn a_ref_cycle_becomes_unknown() {
        let schema = json!({
            "$ref": "#/$defs/node",
            "$defs": {"node": {"type": "object", "properties": {
                "next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}}
        });
        let Ty::Object(node) = lower(&schema) else {
            panic!("not an object")
        };
        assert_eq!(node.props[0].ty, Ty::Unknown);
        assert_eq!(node.props[1].ty, Ty::Int);
    }

    /// A schema whose refs double at each level stops at the node budget.
    #[test]
    fn exponential_refs_stop_at_the_node_budget() {
        let mut defs = serde_json::Map::new();
        for level in 0..40 {
            defs.insert(
                format!("d{level}"),
                json!({"type": "object", "properties": {
                    "a": {"$ref": format!("#/definitions/d{}", level + 1)},
                    "b": {"$ref": format!("#/definitions/d{}", level + 1)}}}),
            );
        }
        let schema = json!({"$ref": "#/definitions/d0", "definitions": defs});
        let mut walk = Walk {
            root: &schema,
            nodes: 0,
            visiting: Vec::new(),
        };
        let _ = walk.lower(&schema, 0);
        assert!(walk.nodes <= MAX_NODES + 64, "{}", walk.nodes);
    }
}
