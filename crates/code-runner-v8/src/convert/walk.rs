//! The walk itself: one V8 value at a time, in `JSON.stringify`'s order,
//! each array element and object member in its own handle scope.

use serde_json::{Map, Number, Value};

use super::{Active, Fail, Holder, MAX_DEPTH, MAX_PATH_KEY_CHARS, Mode, Segment, Walk};

fn not_json(walk: &Walk<'_, '_>, what: &str) -> Fail {
    Fail::NotJson(format!("{} {what}", walk.path("{root}")))
}

/// A value `JSON.stringify` gives no text for (`undefined`, a function, a
/// symbol): in [`Mode::Stringify`] no value (the member is dropped, an
/// array's element is `null`); in [`Mode::Strict`] refused.
fn no_text(walk: &Walk<'_, '_>, what: &str) -> Result<Option<Value>, Fail> {
    match walk.mode {
        Mode::Stringify => Ok(None),
        Mode::Strict => Err(not_json(walk, what)),
    }
}

/// A walked value: `None` for what `JSON.stringify` gives no text for.
type Walked = Result<Option<Value>, Fail>;

pub(super) fn walk_value<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'_, '_>,
    active: Option<&Active<'_>>,
    holder: Holder<'_>,
    value: v8::Local<'s, v8::Value>,
    depth: usize,
    to_json_allowed: bool,
) -> Walked {
    walk.value()?;
    if value.is_null() {
        walk.add(4);
        return Ok(Some(Value::Null));
    }
    if value.is_boolean() {
        walk.add(if value.is_true() { 4 } else { 5 });
        return Ok(Some(Value::Bool(value.is_true())));
    }
    if value.is_number() {
        return number(scope, walk, value).map(Some);
    }
    if let Ok(string) = v8::Local::<v8::String>::try_from(value) {
        return string_value(scope, walk, string).map(|s| Some(Value::String(s)));
    }
    if value.is_undefined() {
        return no_text(walk, "is undefined, which JSON drops");
    }
    if value.is_big_int() {
        let text = value
            .to_string(scope)
            .map(|t| t.to_rust_string_lossy(scope))
            .unwrap_or_default();
        let shown: String = text.chars().take(40).collect();
        return Err(not_json(
            walk,
            &format!(
                "is a BigInt ({shown}n), which JSON.stringify refuses; return Number(x) (exact below 2^53) or x.toString()"
            ),
        ));
    }
    if value.is_symbol() {
        return no_text(walk, "is a symbol, which JSON cannot represent");
    }
    if value.is_function() {
        return no_text(walk, "is a function, which JSON cannot represent");
    }
    if value.is_proxy() {
        return Err(not_json(
            walk,
            "is a Proxy, which code-runner does not read (its traps are code); return a plain copy, e.g. {...x} or structuredClone(x)",
        ));
    }
    let Ok(object) = v8::Local::<v8::Object>::try_from(value) else {
        return no_text(walk, "has no JSON form");
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
                return no_text(walk, "has a toJSON() that returned undefined");
            }
            // The replacement stands for this value: it is not counted twice.
            walk.values -= 1;
            return walk_value(scope, walk, active, holder, replaced, depth + 1, false);
        }
    }
    if value.is_number_object() {
        let n = value.number_value(scope).unwrap_or(f64::NAN);
        let primitive = v8::Number::new(scope, n);
        return number(scope, walk, primitive.into()).map(Some);
    }
    if value.is_string_object() {
        let string = value.to_string(scope).ok_or(Fail::Threw)?;
        return string_value(scope, walk, string).map(|s| Some(Value::String(s)));
    }
    if value.is_boolean_object() {
        let truth = value.boolean_value(scope);
        walk.add(if truth { 4 } else { 5 });
        return Ok(Some(Value::Bool(truth)));
    }
    if value.is_big_int_object() {
        return Err(not_json(
            walk,
            "is a BigInt object, which JSON.stringify refuses; return Number(x) or x.toString()",
        ));
    }
    if active.is_some_and(|active| active.holds(object)) {
        return Err(not_json(
            walk,
            "is a cycle (it contains itself), which JSON.stringify refuses",
        ));
    }
    let active = Active {
        object,
        parent: active,
    };
    if let Ok(array) = v8::Local::<v8::Array>::try_from(value) {
        return walk_array(scope, walk, &active, array, depth).map(Some);
    }
    let prototype = object.get_prototype(scope);
    let plain = match prototype {
        Some(proto) => proto.is_null() || proto.strict_equals(walk.object_prototype.into()),
        None => false,
    };
    if !plain {
        let name = object.get_constructor_name().to_rust_string_lossy(scope);
        if walk.mode == Mode::Strict {
            return Err(not_json(
                walk,
                &format!(
                    "is a {name}, which JSON cannot represent (only plain objects and arrays)"
                ),
            ));
        }
        // `JSON.stringify` writes any object by its own enumerable keys; say
        // so where that is almost never what the code meant.
        if let Some(fix) = container_fix(value) {
            walk.tell(&format!("a {name}, which JSON.stringify writes as {fix}"));
            walk.substitute(&format!("a {name} became its own enumerable keys"));
        }
    }
    walk_object(scope, walk, &active, object, depth).map(Some)
}

/// How `JSON.stringify` writes a container that keeps its items out of its
/// own keys, and how to return the items instead; `None` for other objects.
fn container_fix(value: v8::Local<'_, v8::Value>) -> Option<&'static str> {
    if value.is_map() {
        Some("{} (no own keys); return Object.fromEntries(m) or [...m]")
    } else if value.is_set() {
        Some("{} (no own keys); return [...s]")
    } else if value.is_weak_map() || value.is_weak_set() || value.is_promise() {
        Some("{} (no own keys); return what it holds instead")
    } else if value.is_typed_array() {
        Some("an object keyed by index; return Array.from(a)")
    } else if value.is_array_buffer() || value.is_data_view() {
        Some("{} (no own keys); return Array.from(new Uint8Array(b))")
    } else {
        None
    }
}

/// A number written as `JSON.stringify` writes it (V8's own shortest form).
fn number<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    walk: &mut Walk<'_, '_>,
    value: v8::Local<'s, v8::Value>,
) -> Result<Value, Fail> {
    let n = value.number_value(scope).unwrap_or(f64::NAN);
    if !n.is_finite() {
        if walk.mode == Mode::Stringify {
            walk.substitute(&format!("{n} became null"));
            walk.add(4);
            return Ok(Value::Null);
        }
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
    match String::from_utf16(&units) {
        Ok(text) => Ok(text),
        Err(_) if walk.mode == Mode::Stringify => {
            walk.substitute("a lone surrogate became U+FFFD");
            walk.tell("the string held a lone surrogate, written as U+FFFD");
            Ok(String::from_utf16_lossy(&units))
        }
        Err(_) => Err(not_json(
            walk,
            "holds a lone surrogate, which UTF-8 JSON cannot carry",
        )),
    }
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
            no_text(walk, "is a hole, which JSON turns into null")
        };
        // An element with no text is `null`, as `JSON.stringify` writes it.
        let item = match item {
            Ok(None) => {
                walk.substitute("an element with no JSON text became null");
                walk.add(4);
                Ok(Value::Null)
            }
            other => other.map(|item| item.unwrap_or(Value::Null)),
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
        if let Ok(None) = &item {
            walk.substitute("a member with no JSON text was dropped");
        }
        walk.path.pop();
        // A member with no text is dropped, as `JSON.stringify` drops it.
        if let Some(item) = item?
            && !walk.counting_only()
        {
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
