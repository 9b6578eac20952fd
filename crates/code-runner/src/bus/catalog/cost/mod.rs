//! What checking a payload against a JSON Schema costs, measured before
//! anything is checked: bounded by work, not by the schema's bytes.
//!
//! A 2.8 KB schema can cost 2⁴⁰ validation steps (40 `$defs`, each an
//! `allOf` of two `$ref`s to the next), and a small recursive one can cost as
//! much on a payload nested deep enough. Two measures close both:
//!
//! - [`expansion`], at registration (and for another worker's schema before
//!   its first check): the subschemas reachable from the root, `$ref`s
//!   followed and counted each time they are reached (a cycle is cut where it
//!   closes), and the deepest such path. Past [`MAX_SCHEMA_EXPANSION`] nodes
//!   or [`MAX_SCHEMA_DEPTH`] levels the schema is refused.
//! - [`check_steps`], before each check: the applications a validator could
//!   make of the schema's nodes to the payload's values (every branch of
//!   `anyOf`/`oneOf`/`if` counted, every property under `patternProperties`),
//!   plus what the leaf keywords cost (`enum` and `const` by their values,
//!   `pattern` and `format` by the string's length, `uniqueItems` by the
//!   array's values). Counting stops at the budget, so the count itself costs
//!   at most the budget; past it the check is refused, never started.
//!
//! `$ref`s are resolved within the schema: `#`, JSON pointers (`#/$defs/x`),
//! plain-name anchors (`#name`), and the root's own `$id`. Anything else (a
//! remote document, a nested `$id` that moves the base) cannot be measured,
//! so such a schema is refused here and never reaches the validator.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// Most subschemas a schema may reach, each `$ref` counted every time it is
/// followed: what one payload value can cost at most, in nodes (the same
/// bound `describe` puts on its lowering).
pub const MAX_SCHEMA_EXPANSION: usize = 2000;

/// Deepest a path of subschemas may go (through applicators and `$ref`s):
/// the validator recurses once per level, on a thread whose stack holds this
/// times the payload's own nesting.
pub const MAX_SCHEMA_DEPTH: usize = 128;

/// Most steps one payload check may take ([`check_steps`]): about 4 million,
/// tens of milliseconds of one core; a payload of 262 144 values fits with a
/// schema of a dozen nodes per value.
pub const MAX_CHECK_STEPS: u64 = 1 << 22;

/// Keywords whose value is one subschema applied to the same value.
const SAME_ONE: &[&str] = &["not", "if", "then", "else"];
/// Keywords whose value is a list of subschemas applied to the same value.
const SAME_LIST: &[&str] = &["allOf", "anyOf", "oneOf"];
/// Keywords whose value is a map of subschemas applied to the same value.
const SAME_MAP: &[&str] = &["dependentSchemas", "dependencies"];
/// Keywords that refer to another subschema.
const REFS: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];
/// Keywords applied to an object's properties: one subschema for each.
const EACH_PROPERTY: &[&str] = &["additionalProperties", "unevaluatedProperties"];
/// Keywords applied to an array's elements: one subschema for each.
const EACH_ELEMENT: &[&str] = &["additionalItems", "unevaluatedItems", "contains", "items"];

/// What [`expansion`] measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expansion {
    /// Subschemas reached, with multiplicity.
    pub nodes: usize,
    /// The deepest path.
    pub depth: usize,
}

/// A schema's `$ref` targets, found once per measure.
struct Document<'a> {
    root: &'a Value,
    /// The root's `$id`, if any: a `$ref` may name it.
    id: Option<&'a str>,
    /// Plain-name anchors (`$anchor`, `$dynamicAnchor`, draft 6/7's `$id: "#name"`).
    anchors: HashMap<&'a str, &'a Value>,
}

impl<'a> Document<'a> {
    /// Indexes `root`'s anchors; refuses a nested `$id` (it moves the base
    /// the validator resolves `$ref`s against).
    fn new(root: &'a Value) -> Result<Self, String> {
        let id = root.get("$id").and_then(Value::as_str);
        let mut doc = Document {
            root,
            id,
            anchors: HashMap::new(),
        };
        let mut stack = vec![(root, true)];
        while let Some((value, is_root)) = stack.pop() {
            match value {
                Value::Object(map) => {
                    for key in ["$anchor", "$dynamicAnchor"] {
                        if let Some(name) = map.get(key).and_then(Value::as_str) {
                            doc.anchors.insert(name, value);
                        }
                    }
                    if let Some(nested) = map.get("$id").and_then(Value::as_str) {
                        match nested.strip_prefix('#') {
                            Some(name) => {
                                doc.anchors.insert(name, value);
                            }
                            None if !is_root => {
                                return Err(format!(
                                    "a nested `$id` (`{}`) moves the base its `$ref`s resolve against; give it `$anchor`s instead",
                                    clip(nested)
                                ));
                            }
                            None => {}
                        }
                    }
                    stack.extend(map.values().map(|v| (v, false)));
                }
                Value::Array(items) => stack.extend(items.iter().map(|v| (v, false))),
                _ => {}
            }
        }
        Ok(doc)
    }

    /// The subschema `reference` names, within this document.
    fn resolve(&self, reference: &str) -> Result<&'a Value, String> {
        let local = match (self.id, reference.split_once('#')) {
            (_, Some(("", fragment))) => fragment,
            (Some(id), Some((base, fragment))) if base == id.trim_end_matches('#') => fragment,
            (Some(id), None) if reference == id => "",
            _ => {
                return Err(format!(
                    "`$ref` `{}` points outside the schema; only `#`, `#/json/pointer` and `#anchor` are measured",
                    clip(reference)
                ));
            }
        };
        if local.is_empty() {
            return Ok(self.root);
        }
        if let Some(pointer) = local.strip_prefix('/') {
            let mut at = self.root;
            for part in pointer.split('/') {
                let part = percent_decode(part).replace("~1", "/").replace("~0", "~");
                at = match at {
                    Value::Object(map) => map.get(&part),
                    Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
                    _ => None,
                }
                .ok_or_else(|| {
                    format!("`$ref` `{}` names nothing in the schema", clip(reference))
                })?;
            }
            return Ok(at);
        }
        self.anchors
            .get(local)
            .copied()
            .ok_or_else(|| format!("`$ref` `{}` names no anchor in the schema", clip(reference)))
    }
}

/// Measures what `schema` reaches ([`Expansion`]), refusing it past
/// [`MAX_SCHEMA_EXPANSION`] nodes or [`MAX_SCHEMA_DEPTH`] levels, or when a
/// `$ref` cannot be resolved within it.
///
/// # Errors
/// A message naming the bound or the reference.
pub fn expansion(schema: &Value) -> Result<Expansion, String> {
    let doc = Document::new(schema)?;
    let mut measure = Expansion { nodes: 0, depth: 0 };
    let mut path: Vec<*const Value> = Vec::new();
    expand(&doc, schema, &mut path, &mut measure)?;
    Ok(measure)
}

fn expand<'a>(
    doc: &Document<'a>,
    node: &'a Value,
    path: &mut Vec<*const Value>,
    measure: &mut Expansion,
) -> Result<(), String> {
    measure.nodes += 1;
    measure.depth = measure.depth.max(path.len() + 1);
    if measure.nodes > MAX_SCHEMA_EXPANSION {
        return Err(format!(
            "it reaches more than {MAX_SCHEMA_EXPANSION} subschemas, counting each `$ref` every time it is followed, so checking one value against it could cost that much (or, nested, exponentially more)"
        ));
    }
    if measure.depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "its subschemas (through `$ref`s) nest more than {MAX_SCHEMA_DEPTH} deep"
        ));
    }
    let Value::Object(map) = node else {
        return Ok(());
    };
    path.push(node as *const Value);
    let result = children(doc, map, |child| {
        if path.contains(&(child as *const Value)) {
            return Ok(()); // a cycle closes here: the payload's nesting bounds it
        }
        expand(doc, child, path, measure)
    });
    path.pop();
    result
}

/// Calls `visit` for every subschema `map` applies or refers to.
fn children<'a>(
    doc: &Document<'a>,
    map: &'a Map<String, Value>,
    mut visit: impl FnMut(&'a Value) -> Result<(), String>,
) -> Result<(), String> {
    for (key, value) in map {
        let key = key.as_str();
        if REFS.contains(&key) {
            if let Some(reference) = value.as_str() {
                visit(doc.resolve(reference)?)?;
            }
        } else if SAME_ONE.contains(&key)
            || EACH_PROPERTY.contains(&key)
            || EACH_ELEMENT.contains(&key)
            || key == "propertyNames"
        {
            match value {
                Value::Array(items) => items.iter().try_for_each(&mut visit)?,
                other => visit(other)?,
            }
        } else if SAME_LIST.contains(&key) || key == "prefixItems" {
            if let Value::Array(items) = value {
                items.iter().try_for_each(&mut visit)?;
            }
        } else if SAME_MAP.contains(&key) || key == "properties" || key == "patternProperties" {
            if let Value::Object(subs) = value {
                subs.values()
                    .filter(|sub| !sub.is_array())
                    .try_for_each(&mut visit)?;
            }
        } else if key == "contentSchema" {
            return Err(
                "`contentSchema` checks a decoded string whose cost cannot be measured beforehand"
                    .into(),
            );
        }
    }
    Ok(())
}

/// A check past its budget, or stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// More than the budget's steps.
    Over(u64),
    /// `stop` said so (the turn that asked ended).
    Stopped,
    /// The schema cannot be measured.
    Unmeasurable(String),
}

/// Counts the steps checking `payload` against `schema` could take, up to
/// `budget` (see the module's doc); asks `stop` every 4 096 steps.
///
/// # Errors
/// [`Refused`] past the budget, when stopped, or for a schema whose `$ref`s
/// leave it.
pub fn check_steps(
    schema: &Value,
    payload: &Value,
    budget: u64,
    stop: &dyn Fn() -> bool,
) -> Result<u64, Refused> {
    let doc = Document::new(schema).map_err(Refused::Unmeasurable)?;
    let mut count = Count {
        doc,
        steps: 0,
        budget,
        stop,
    };
    count.apply(schema, payload, &mut Vec::new())?;
    Ok(count.steps)
}

struct Count<'a, 's> {
    doc: Document<'a>,
    steps: u64,
    budget: u64,
    stop: &'s dyn Fn() -> bool,
}

impl<'a> Count<'a, '_> {
    fn charge(&mut self, steps: u64) -> Result<(), Refused> {
        let before = self.steps;
        self.steps = self.steps.saturating_add(steps);
        if self.steps > self.budget {
            return Err(Refused::Over(self.budget));
        }
        if before >> 12 != self.steps >> 12 && (self.stop)() {
            return Err(Refused::Stopped);
        }
        Ok(())
    }

    /// `node` applied to `value`; `here` holds the `$ref` targets followed
    /// at this value (a cycle among them is cut: it makes no progress).
    fn apply(
        &mut self,
        node: &'a Value,
        value: &Value,
        here: &mut Vec<*const Value>,
    ) -> Result<(), Refused> {
        self.charge(1)?;
        let Value::Object(map) = node else {
            return Ok(());
        };
        self.charge(leaf_cost(map, value))?;
        self.keywords(map, value, here, true)?;
        // The unevaluated keywords look at what every applicator evaluated:
        // the validator may walk this node's subschemas once more.
        if map.contains_key("unevaluatedProperties") || map.contains_key("unevaluatedItems") {
            self.keywords(map, value, here, false)?;
        }
        Ok(())
    }

    /// `map`'s applicators applied to `value` (the unevaluated ones only
    /// when `unevaluated`).
    fn keywords(
        &mut self,
        map: &'a Map<String, Value>,
        value: &Value,
        here: &mut Vec<*const Value>,
        unevaluated: bool,
    ) -> Result<(), Refused> {
        for (key, sub) in map {
            let key = key.as_str();
            if REFS.contains(&key) {
                let Some(reference) = sub.as_str() else {
                    continue;
                };
                let target = self.doc.resolve(reference).map_err(Refused::Unmeasurable)?;
                if here.contains(&(target as *const Value)) {
                    continue;
                }
                here.push(target as *const Value);
                self.apply(target, value, here)?;
                here.pop();
            } else if SAME_ONE.contains(&key) {
                self.apply(sub, value, here)?;
            } else if SAME_LIST.contains(&key) {
                for each in sub.as_array().into_iter().flatten() {
                    self.apply(each, value, here)?;
                }
            } else if SAME_MAP.contains(&key) {
                for each in sub.as_object().into_iter().flat_map(Map::values) {
                    self.apply(each, value, here)?;
                }
            } else if unevaluated || !key.starts_with("unevaluated") {
                self.descend(key, sub, value)?;
            }
        }
        Ok(())
    }

    /// A keyword that applies `sub` to the members of `value`.
    fn descend(&mut self, key: &str, sub: &'a Value, value: &Value) -> Result<(), Refused> {
        let fresh = || Vec::new();
        match (key, value) {
            ("properties", Value::Object(members)) => {
                for (name, each) in sub.as_object().into_iter().flatten() {
                    if let Some(member) = members.get(name) {
                        self.apply(each, member, &mut fresh())?;
                    }
                }
            }
            ("patternProperties", Value::Object(members)) => {
                for each in sub.as_object().into_iter().flat_map(Map::values) {
                    for member in members.values() {
                        self.apply(each, member, &mut fresh())?;
                    }
                }
            }
            ("propertyNames", Value::Object(members)) => {
                for name in members.keys() {
                    self.apply(sub, &Value::String(name.clone()), &mut fresh())?;
                }
            }
            (key, Value::Object(members)) if EACH_PROPERTY.contains(&key) => {
                for member in members.values() {
                    self.apply(sub, member, &mut fresh())?;
                }
            }
            ("prefixItems", Value::Array(items)) | ("items", Value::Array(items))
                if sub.is_array() =>
            {
                for (each, item) in sub.as_array().into_iter().flatten().zip(items) {
                    self.apply(each, item, &mut fresh())?;
                }
            }
            (key, Value::Array(items)) if EACH_ELEMENT.contains(&key) => {
                for item in items {
                    self.apply(sub, item, &mut fresh())?;
                }
            }
            ("contentSchema", _) => {
                return Err(Refused::Unmeasurable(
                    "`contentSchema` checks a decoded string whose cost cannot be measured beforehand"
                        .into(),
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

/// What `map`'s own assertions cost on `value`, beyond the node's one step.
fn leaf_cost(map: &Map<String, Value>, value: &Value) -> u64 {
    let mut cost = 0u64;
    for key in ["enum", "const"] {
        if let Some(data) = map.get(key) {
            cost += values_in(data);
        }
    }
    if let Value::String(text) = value {
        for key in ["pattern", "format"] {
            if map.contains_key(key) {
                cost += 1 + text.len() as u64 / 16;
            }
        }
    }
    if let (Some(Value::Bool(true)), Value::Array(_)) = (map.get("uniqueItems"), value) {
        cost += values_in(value);
    }
    if let Some(Value::Array(names)) = map.get("required") {
        cost += names.len() as u64;
    }
    cost
}

/// The JSON values in `value`, itself included.
fn values_in(value: &Value) -> u64 {
    let mut count = 0u64;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        count += 1;
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_string();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push(((hex(h).unwrap_or(0) << 4) | hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn clip(text: &str) -> String {
    text.chars().take(100).collect()
}

#[cfg(test)]
mod tests;
