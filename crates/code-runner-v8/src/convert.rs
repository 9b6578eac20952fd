//! Values across the engine boundary: a V8 value to lossless JSON.
//!
//! The walk is done in Rust against V8's API, so a guest that rebinds
//! `JSON.stringify`, `Array.isArray` or `Object.prototype.toJSON` cannot change
//! what the host receives. It follows `JSON.stringify`'s rules (own enumerable
//! string keys, `toJSON`, boxed primitives unwrapped) but refuses, instead of
//! silently dropping or rewriting, whatever JSON cannot carry: `undefined`
//! inside a value, functions, symbols, BigInts, `NaN` and infinities, holes,
//! cycles, lone surrogates, proxies, and objects that are neither plain nor
//! arrays (a `Map` would become `{}`).

use code_runner_core::caps::ResultShape;
use serde_json::{Map, Number, Value};

/// How deep a value may nest before it is refused (and the walk's recursion bound).
pub const MAX_DEPTH: usize = 200;

/// What a value turned into.
#[derive(Debug)]
pub enum Converted {
    /// A lossless JSON value.
    Value(Value),
    /// `undefined` at the top: no value at all.
    Undefined,
    /// Not lossless JSON; the text says where and why.
    NotJson(String),
    /// Bigger than the transfer limit: its approximate size and its shape.
    Oversize {
        /// Approximate serialized size in bytes.
        bytes: u64,
        /// The top-level shape, for the omission marker.
        shape: ResultShape,
    },
    /// Reading the value ran guest code that threw (or was terminated).
    Threw,
}

enum Fail {
    NotJson(String),
    Threw,
}

struct Walk<'s> {
    object_prototype: v8::Local<'s, v8::Object>,
    max_bytes: u64,
    bytes: u64,
    active: Vec<v8::Local<'s, v8::Object>>,
    path: Vec<Segment>,
}

enum Segment {
    Index(u32),
    Key(String),
}

impl Walk<'_> {
    fn path(&self, root: &str) -> String {
        let mut out = root.to_string();
        for segment in &self.path {
            match segment {
                Segment::Index(i) => out.push_str(&format!("[{i}]")),
                Segment::Key(key) => out.push_str(&format!("[{key:?}]")),
            }
        }
        out
    }

    fn counting_only(&self) -> bool {
        self.bytes > self.max_bytes
    }

    fn add(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes as u64);
    }
}

/// Converts `value` to JSON, refusing anything lossy; `root` names it in messages
/// (`result`, `argument`). Past `max_bytes` of JSON the value is only measured.
pub fn to_json<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    value: v8::Local<'s, v8::Value>,
    object_prototype: &v8::Global<v8::Object>,
    root: &str,
    max_bytes: u64,
) -> Converted {
    if value.is_undefined() {
        return Converted::Undefined;
    }
    let mut walk = Walk {
        object_prototype: v8::Local::new(scope, object_prototype),
        max_bytes,
        bytes: 0,
        active: Vec::new(),
        path: Vec::new(),
    };
    match walk_value(scope, &mut walk, value, 0, true) {
        Ok(_) if walk.counting_only() => Converted::Oversize {
            bytes: walk.bytes,
            shape: shape_of(scope, value),
        },
        Ok(json) => Converted::Value(json),
        Err(Fail::NotJson(why)) => Converted::NotJson(why.replace("{root}", root)),
        Err(Fail::Threw) => Converted::Threw,
    }
}

fn shape_of<'s>(scope: &mut v8::PinScope<'s, '_>, value: v8::Local<'s, v8::Value>) -> ResultShape {
    if let Ok(array) = v8::Local::<v8::Array>::try_from(value) {
        return ResultShape::Array(u64::from(array.length()));
    }
    if let Ok(string) = v8::Local::<v8::String>::try_from(value) {
        return ResultShape::String(string.length() as u64);
    }
    if let Ok(object) = v8::Local::<v8::Object>::try_from(value) {
        let args = v8::GetPropertyNamesArgs {
            mode: v8::KeyCollectionMode::OwnOnly,
            property_filter: v8::PropertyFilter::ONLY_ENUMERABLE | v8::PropertyFilter::SKIP_SYMBOLS,
            index_filter: v8::IndexFilter::IncludeIndices,
            key_conversion: v8::KeyConversionMode::ConvertToString,
        };
        if let Some(keys) = object.get_own_property_names(scope, args) {
            return ResultShape::Object(u64::from(keys.length()));
        }
    }
    ResultShape::Scalar
}

fn not_json(walk: &Walk<'_>, what: &str) -> Fail {
    Fail::NotJson(format!("{} {what}", walk.path("{root}")))
}

fn walk_value<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'s>,
    value: v8::Local<'s, v8::Value>,
    depth: usize,
    to_json_allowed: bool,
) -> Result<Value, Fail> {
    if value.is_null() {
        walk.add(4);
        return Ok(Value::Null);
    }
    if value.is_boolean() {
        walk.add(5);
        return Ok(Value::Bool(value.is_true()));
    }
    if value.is_number() {
        return number(scope, walk, value);
    }
    if let Ok(string) = v8::Local::<v8::String>::try_from(value) {
        return string_value(scope, walk, string).map(Value::String);
    }
    if value.is_undefined() {
        return Err(not_json(walk, "is undefined, which JSON drops"));
    }
    if value.is_big_int() {
        return Err(not_json(walk, "is a BigInt, which JSON cannot represent"));
    }
    if value.is_symbol() {
        return Err(not_json(walk, "is a symbol, which JSON cannot represent"));
    }
    if value.is_function() {
        return Err(not_json(walk, "is a function, which JSON cannot represent"));
    }
    if value.is_proxy() {
        return Err(not_json(walk, "is a Proxy, which JSON cannot represent"));
    }
    let Ok(object) = v8::Local::<v8::Object>::try_from(value) else {
        return Err(not_json(walk, "has no JSON form"));
    };
    if depth >= MAX_DEPTH {
        return Err(not_json(
            walk,
            &format!("is nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    if to_json_allowed {
        let key = v8::String::new(scope, "toJSON").ok_or(Fail::Threw)?;
        let to_json = object.get(scope, key.into()).ok_or(Fail::Threw)?;
        if let Ok(function) = v8::Local::<v8::Function>::try_from(to_json) {
            let arg = match walk.path.last() {
                Some(Segment::Key(key)) => v8::String::new(scope, key).ok_or(Fail::Threw)?,
                Some(Segment::Index(i)) => {
                    v8::String::new(scope, &i.to_string()).ok_or(Fail::Threw)?
                }
                None => v8::String::empty(scope),
            };
            let replaced = function
                .call(scope, object.into(), &[arg.into()])
                .ok_or(Fail::Threw)?;
            if replaced.is_undefined() {
                return Err(not_json(walk, "has a toJSON() that returned undefined"));
            }
            return walk_value(scope, walk, replaced, depth + 1, false);
        }
    }
    if value.is_number_object() {
        let n = value.number_value(scope).unwrap_or(f64::NAN);
        let primitive = v8::Number::new(scope, n);
        return number(scope, walk, primitive.into());
    }
    if value.is_string_object() {
        let string = value.to_string(scope).ok_or(Fail::Threw)?;
        return string_value(scope, walk, string).map(Value::String);
    }
    if value.is_boolean_object() {
        walk.add(5);
        return Ok(Value::Bool(value.boolean_value(scope)));
    }
    let hash = object.get_identity_hash();
    let cycle = walk
        .active
        .iter()
        .any(|active| active.get_identity_hash() == hash && active.strict_equals(object.into()));
    if cycle {
        return Err(not_json(walk, "is a cycle (it contains itself)"));
    }
    walk.active.push(object);
    let result = if let Ok(array) = v8::Local::<v8::Array>::try_from(value) {
        walk_array(scope, walk, array, depth)
    } else {
        let prototype = object.get_prototype(scope);
        let plain = match prototype {
            Some(proto) => proto.is_null() || proto.strict_equals(walk.object_prototype.into()),
            None => false,
        };
        if plain {
            walk_object(scope, walk, object, depth)
        } else {
            let name = object.get_constructor_name().to_rust_string_lossy(scope);
            Err(not_json(
                walk,
                &format!(
                    "is a {name}, which JSON cannot represent (only plain objects and arrays)"
                ),
            ))
        }
    };
    walk.active.pop();
    result
}

/// A number written as `JSON.stringify` writes it (V8's own shortest form).
fn number<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'s>,
    value: v8::Local<'s, v8::Value>,
) -> Result<Value, Fail> {
    let n = value.number_value(scope).unwrap_or(f64::NAN);
    if !n.is_finite() {
        return Err(not_json(
            walk,
            &format!("is {n}, which JSON cannot represent"),
        ));
    }
    walk.add(8);
    const SAFE: f64 = 9_007_199_254_740_992.0;
    if n.fract() == 0.0 && n.abs() < SAFE {
        // The cast is exact: |n| < 2^53 and n is integral.
        #[allow(
            clippy::cast_possible_truncation,
            reason = "exact for integral values below 2^53"
        )]
        return Ok(Value::from(n as i64));
    }
    let text = value
        .to_string(scope)
        .ok_or(Fail::Threw)?
        .to_rust_string_lossy(scope);
    serde_json::from_str::<Number>(&text)
        .ok()
        .or_else(|| Number::from_f64(n))
        .map(Value::Number)
        .ok_or_else(|| not_json(walk, "is not a finite number"))
}

fn string_value<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'s>,
    string: v8::Local<'s, v8::String>,
) -> Result<String, Fail> {
    walk.add(string.length() + 2);
    if walk.counting_only() {
        return Ok(String::new());
    }
    if string.contains_only_onebyte() {
        return Ok(string.to_rust_string_lossy(scope));
    }
    let mut units = vec![0u16; string.length()];
    string.write_v2(scope, 0, &mut units, v8::WriteFlags::empty());
    String::from_utf16(&units).map_err(|_| {
        not_json(
            walk,
            "holds a lone surrogate, which UTF-8 JSON cannot carry",
        )
    })
}

fn walk_array<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'s>,
    array: v8::Local<'s, v8::Array>,
    depth: usize,
) -> Result<Value, Fail> {
    let length = array.length();
    walk.add(2);
    let mut items = Vec::new();
    for i in 0..length {
        walk.path.push(Segment::Index(i));
        let item = if array.has_index(scope, i).ok_or(Fail::Threw)? {
            let value = array.get_index(scope, i).ok_or(Fail::Threw)?;
            walk_value(scope, walk, value, depth + 1, true)
        } else {
            Err(not_json(walk, "is a hole, which JSON turns into null"))
        };
        walk.path.pop();
        let item = item?;
        walk.add(1);
        if !walk.counting_only() {
            items.push(item);
        }
    }
    Ok(Value::Array(items))
}

fn walk_object<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'s>,
    object: v8::Local<'s, v8::Object>,
    depth: usize,
) -> Result<Value, Fail> {
    let args = v8::GetPropertyNamesArgs {
        mode: v8::KeyCollectionMode::OwnOnly,
        property_filter: v8::PropertyFilter::ONLY_ENUMERABLE | v8::PropertyFilter::SKIP_SYMBOLS,
        index_filter: v8::IndexFilter::IncludeIndices,
        key_conversion: v8::KeyConversionMode::ConvertToString,
    };
    let keys = object
        .get_own_property_names(scope, args)
        .ok_or(Fail::Threw)?;
    walk.add(2);
    let mut map = Map::new();
    for i in 0..keys.length() {
        let key = keys.get_index(scope, i).ok_or(Fail::Threw)?;
        let key_string = key.to_string(scope).ok_or(Fail::Threw)?;
        let name = string_value(scope, walk, key_string)?;
        walk.path.push(Segment::Key(name.clone()));
        let item = object
            .get(scope, key)
            .ok_or(Fail::Threw)
            .and_then(|value| walk_value(scope, walk, value, depth + 1, true));
        walk.path.pop();
        let item = item?;
        walk.add(2);
        if !walk.counting_only() {
            map.insert(name, item);
        }
    }
    Ok(Value::Object(map))
}
