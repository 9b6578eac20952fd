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
use code_runner_core::json::{MAX_GUEST_DEPTH, MAX_JSON_VALUES};
use serde_json::{Map, Number, Value};

/// How deep a value may nest before it is refused (and the walk's recursion
/// bound): the limit every engine enforces in its guest.
pub const MAX_DEPTH: usize = MAX_GUEST_DEPTH;

/// Values walked between two looks at the watchdog: a value of millions of
/// elements is walked without running JavaScript, which V8 cannot interrupt.
const STOP_CHECK_EVERY: u64 = 4096;

/// What a value turned into.
#[derive(Debug)]
pub enum Converted {
    /// A lossless JSON value.
    Value {
        /// The value.
        json: Value,
        /// Its serialized size in bytes (escapes aside).
        bytes: u64,
        /// How many JSON values (scalars, arrays, objects) it holds.
        values: u64,
    },
    /// `undefined` at the top: no value at all.
    Undefined,
    /// Not lossless JSON; the text says where and why.
    NotJson(String),
    /// Past the byte or value limit: measured, never built.
    Oversize {
        /// Serialized size in bytes (escapes aside).
        bytes: u64,
        /// How many JSON values (scalars, arrays, objects) it holds.
        values: u64,
        /// The top-level shape, for the omission marker.
        shape: ResultShape,
    },
    /// Reading the value ran guest code that threw (or was terminated).
    Threw,
    /// The watchdog asked for the thread back mid-walk (a deadline, an abort).
    Stopped,
}

/// How much of a value is built on the host; past either limit it is only measured.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Serialized bytes.
    pub bytes: u64,
    /// JSON values (scalars, arrays, objects).
    pub values: u64,
}

impl Limits {
    /// At most `bytes` of JSON and [`MAX_JSON_VALUES`] values.
    pub fn bytes(bytes: u64) -> Limits {
        Limits {
            bytes,
            values: MAX_JSON_VALUES as u64,
        }
    }
}

enum Fail {
    NotJson(String),
    Threw,
    Stopped,
}

/// Where a value sits in its holder: what its `toJSON` is called with.
#[derive(Clone, Copy)]
enum Holder<'a> {
    Root,
    Index(u32),
    Key(v8::Local<'a, v8::String>),
}

struct Walk<'p, 'f> {
    object_prototype: v8::Local<'p, v8::Object>,
    limits: Limits,
    bytes: u64,
    values: u64,
    path: Vec<Segment>,
    stopped: &'f dyn Fn() -> bool,
}

/// The objects being walked, innermost first: a cycle is one met again.
struct Active<'a> {
    object: v8::Local<'a, v8::Object>,
    parent: Option<&'a Active<'a>>,
}

impl Active<'_> {
    fn holds(&self, object: v8::Local<'_, v8::Object>) -> bool {
        let hash = object.get_identity_hash();
        let mut link = Some(self);
        while let Some(active) = link {
            if active.object.get_identity_hash() == hash
                && active.object.strict_equals(object.into())
            {
                return true;
            }
            link = active.parent;
        }
        false
    }
}

enum Segment {
    Index(u32),
    Key(String),
}

/// Longest piece of a key quoted in a path (a key may be megabytes long).
const MAX_PATH_KEY_CHARS: usize = 64;
/// Segments of a path shown at its start and at its end.
const MAX_PATH_SEGMENTS: usize = 8;

impl Walk<'_, '_> {
    fn path(&self, root: &str) -> String {
        let mut out = root.to_string();
        let n = self.path.len();
        for (i, segment) in self.path.iter().enumerate() {
            if n > 2 * MAX_PATH_SEGMENTS && i >= MAX_PATH_SEGMENTS && i < n - MAX_PATH_SEGMENTS {
                if i == MAX_PATH_SEGMENTS {
                    out.push_str(&format!("[…{} more…]", n - 2 * MAX_PATH_SEGMENTS));
                }
                continue;
            }
            match segment {
                Segment::Index(i) => out.push_str(&format!("[{i}]")),
                Segment::Key(key) => out.push_str(&format!("[{key:?}]")),
            }
        }
        out
    }

    fn counting_only(&self) -> bool {
        self.bytes > self.limits.bytes || self.values > self.limits.values
    }

    fn add(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes as u64);
    }

    /// Counts one value; every so often asks whether the walk must stop.
    fn value(&mut self) -> Result<(), Fail> {
        self.values += 1;
        if self.values.is_multiple_of(STOP_CHECK_EVERY) && (self.stopped)() {
            return Err(Fail::Stopped);
        }
        Ok(())
    }
}

/// Converts `value` to JSON, refusing anything lossy; `root` names it in
/// messages (`result`, `argument`). Past `limits` the value is only
/// measured, never built; `stopped` is asked every few thousand values
/// whether the watchdog wants the thread back (then: [`Converted::Threw`]).
pub fn to_json<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    value: v8::Local<'s, v8::Value>,
    object_prototype: &v8::Global<v8::Object>,
    root: &str,
    limits: Limits,
    stopped: &dyn Fn() -> bool,
) -> Converted {
    if value.is_undefined() {
        return Converted::Undefined;
    }
    let mut walk = Walk {
        object_prototype: v8::Local::new(scope, object_prototype),
        limits,
        bytes: 0,
        values: 0,
        path: Vec::new(),
        stopped,
    };
    match walk_value(scope, &mut walk, None, Holder::Root, value, 0, true) {
        Ok(_) if walk.counting_only() => Converted::Oversize {
            bytes: walk.bytes,
            values: walk.values,
            shape: shape_of(scope, value),
        },
        Ok(json) => Converted::Value {
            json,
            bytes: walk.bytes,
            values: walk.values,
        },
        Err(Fail::NotJson(why)) => Converted::NotJson(why.replace("{root}", root)),
        Err(Fail::Threw) => Converted::Threw,
        Err(Fail::Stopped) => Converted::Stopped,
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

fn not_json(walk: &Walk<'_, '_>, what: &str) -> Fail {
    Fail::NotJson(format!("{} {what}", walk.path("{root}")))
}

fn walk_value<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'_, '_>,
    active: Option<&Active<'_>>,
    holder: Holder<'_>,
    value: v8::Local<'s, v8::Value>,
    depth: usize,
    to_json_allowed: bool,
) -> Result<Value, Fail> {
    walk.value()?;
    if value.is_null() {
        walk.add(4);
        return Ok(Value::Null);
    }
    if value.is_boolean() {
        walk.add(if value.is_true() { 4 } else { 5 });
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
            let arg = match holder {
                Holder::Key(key) => key,
                Holder::Index(i) => v8::String::new(scope, &i.to_string()).ok_or(Fail::Threw)?,
                Holder::Root => v8::String::empty(scope),
            };
            let replaced = function
                .call(scope, object.into(), &[arg.into()])
                .ok_or(Fail::Threw)?;
            if replaced.is_undefined() {
                return Err(not_json(walk, "has a toJSON() that returned undefined"));
            }
            // The replacement stands for this value: it is not counted twice.
            walk.values -= 1;
            return walk_value(scope, walk, active, holder, replaced, depth + 1, false);
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
        let truth = value.boolean_value(scope);
        walk.add(if truth { 4 } else { 5 });
        return Ok(Value::Bool(truth));
    }
    if active.is_some_and(|active| active.holds(object)) {
        return Err(not_json(walk, "is a cycle (it contains itself)"));
    }
    let active = Active {
        object,
        parent: active,
    };
    if let Ok(array) = v8::Local::<v8::Array>::try_from(value) {
        return walk_array(scope, walk, &active, array, depth);
    }
    let prototype = object.get_prototype(scope);
    let plain = match prototype {
        Some(proto) => proto.is_null() || proto.strict_equals(walk.object_prototype.into()),
        None => false,
    };
    if !plain {
        let name = object.get_constructor_name().to_rust_string_lossy(scope);
        return Err(not_json(
            walk,
            &format!("is a {name}, which JSON cannot represent (only plain objects and arrays)"),
        ));
    }
    walk_object(scope, walk, &active, object, depth)
}

/// A number written as `JSON.stringify` writes it (V8's own shortest form).
fn number<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'_, '_>,
    value: v8::Local<'s, v8::Value>,
) -> Result<Value, Fail> {
    let n = value.number_value(scope).unwrap_or(f64::NAN);
    if !n.is_finite() {
        return Err(not_json(
            walk,
            &format!("is {n}, which JSON cannot represent"),
        ));
    }
    const SAFE: f64 = 9_007_199_254_740_992.0;
    if n.fract() == 0.0 && n.abs() < SAFE {
        // The cast is exact: |n| < 2^53 and n is integral.
        #[allow(
            clippy::cast_possible_truncation,
            reason = "exact for integral values below 2^53"
        )]
        let integer = n as i64;
        walk.add(decimal_len(integer));
        return Ok(Value::from(integer));
    }
    let text = value
        .to_string(scope)
        .ok_or(Fail::Threw)?
        .to_rust_string_lossy(scope);
    walk.add(text.len());
    serde_json::from_str::<Number>(&text)
        .ok()
        .or_else(|| Number::from_f64(n))
        .map(Value::Number)
        .ok_or_else(|| not_json(walk, "is not a finite number"))
}

/// Characters of `n` in decimal, its sign included.
fn decimal_len(n: i64) -> usize {
    let digits = n
        .unsigned_abs()
        .checked_ilog10()
        .map_or(1, |log| log as usize + 1);
    digits + usize::from(n < 0)
}

fn string_value<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'_, '_>,
    string: v8::Local<'s, v8::String>,
) -> Result<String, Fail> {
    // UTF-16 units never outnumber UTF-8 bytes: a string past the limit by
    // its length is measured without a pass over its text.
    walk.add(string.length() + 2);
    if walk.counting_only() {
        return Ok(String::new());
    }
    walk.add(string.utf8_length(scope).saturating_sub(string.length()));
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
    walk: &mut Walk<'_, '_>,
    active: &Active<'_>,
    array: v8::Local<'s, v8::Array>,
    depth: usize,
) -> Result<Value, Fail> {
    let length = array.length();
    walk.add(2 + length.saturating_sub(1) as usize);
    let mut items = Vec::new();
    for i in 0..length {
        // Each element's handles go with it: a walk of millions holds a few.
        v8::scope!(let scope, scope);
        walk.path.push(Segment::Index(i));
        let item = if array.has_index(scope, i).ok_or(Fail::Threw)? {
            let value = array.get_index(scope, i).ok_or(Fail::Threw)?;
            walk_value(
                scope,
                walk,
                Some(active),
                Holder::Index(i),
                value,
                depth + 1,
                true,
            )
        } else {
            Err(not_json(walk, "is a hole, which JSON turns into null"))
        };
        walk.path.pop();
        let item = item?;
        if !walk.counting_only() {
            items.push(item);
        }
    }
    Ok(Value::Array(items))
}

fn walk_object<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'_, '_>,
    active: &Active<'_>,
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
    // Braces, a colon per key, a comma between members.
    walk.add(2 + 2 * keys.length() as usize - usize::from(keys.length() > 0));
    let mut map = Map::new();
    for i in 0..keys.length() {
        v8::scope!(let scope, scope);
        let key = keys.get_index(scope, i).ok_or(Fail::Threw)?;
        let key_string = key.to_string(scope).ok_or(Fail::Threw)?;
        let name = string_value(scope, walk, key_string)?;
        walk.path.push(Segment::Key(key_prefix(scope, key_string)));
        let holder = Holder::Key(key_string);
        let item = object.get(scope, key).ok_or(Fail::Threw).and_then(|value| {
            walk_value(scope, walk, Some(active), holder, value, depth + 1, true)
        });
        walk.path.pop();
        let item = item?;
        if !walk.counting_only() {
            map.insert(name, item);
        }
    }
    Ok(Value::Object(map))
}

/// A key as a path quotes it: at most [`MAX_PATH_KEY_CHARS`] UTF-16 units
/// (a key may be megabytes long, and is not built at all past the limits).
fn key_prefix(scope: &v8::PinScope<'_, '_>, key: v8::Local<'_, v8::String>) -> String {
    let mut units = [0u16; MAX_PATH_KEY_CHARS];
    let n = key.length().min(MAX_PATH_KEY_CHARS);
    key.write_v2(scope, 0, &mut units[..n], v8::WriteFlags::empty());
    let mut text = String::from_utf16_lossy(&units[..n]);
    if key.length() > n {
        text.push('…');
    }
    text
}
