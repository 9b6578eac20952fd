//! Values across the engine boundary: a V8 value to JSON.
//!
//! The walk is done in Rust against V8's API, so a guest that rebinds
//! `JSON.stringify`, `Array.isArray` or `Object.prototype.toJSON` cannot change
//! what the host receives. Two modes ([`Mode`]):
//!
//! - [`Mode::Strict`] (a binding call's argument): `JSON.stringify`'s rules
//!   (own enumerable string keys, `toJSON`, boxed primitives unwrapped), but
//!   whatever JSON cannot carry is refused, never dropped or rewritten:
//!   `undefined` inside a value, functions, symbols, BigInts, `NaN` and
//!   infinities, holes, cycles, lone surrogates, proxies, and objects that
//!   are neither plain nor arrays (a `Map` would become `{}`).
//! - [`Mode::Stringify`] (a turn's result): exactly what `JSON.stringify`
//!   gives (an `undefined`, function or symbol property dropped, in an array
//!   `null`; `NaN` and infinities `null`; holes `null`; any object by its own
//!   enumerable keys, so a `Map` is `{}`; a lone surrogate U+FFFD), with the
//!   first rewrite reported ([`Converted::Value`]'s `substituted`) and a note
//!   for what is almost always a mistake (a `Map`, a `Set`, a typed array).
//!   What `JSON.stringify` refuses is refused with a note naming the path and
//!   the fix: a BigInt, a cycle; and a proxy, which is not read.

use code_runner_core::caps::ResultShape;
use code_runner_core::json::{MAX_GUEST_DEPTH, MAX_JSON_VALUES};
use serde_json::Value;

mod walk;

use walk::walk_value;

/// How deep a value may nest before it is refused (and the walk's recursion
/// bound): the limit every engine enforces in its guest.
pub const MAX_DEPTH: usize = MAX_GUEST_DEPTH;

/// Values walked between two looks at the watchdog: a value of millions of
/// elements is walked without running JavaScript, which V8 cannot interrupt.
const STOP_CHECK_EVERY: u64 = 4096;

/// What a value turned into.
#[derive(Debug)]
pub enum Converted {
    /// A JSON value (lossless, unless `substituted` says otherwise).
    Value {
        /// The value.
        json: Value,
        /// Its serialized size in bytes (escapes aside).
        bytes: u64,
        /// How many JSON values (scalars, arrays, objects) it holds.
        values: u64,
        /// The first value [`Mode::Stringify`] rewrote, with its path.
        substituted: Option<String>,
        /// What the caller should be told about it (a `Map` written as `{}`).
        note: Option<String>,
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

/// How a value that JSON cannot carry as it is is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Refused: a binding call's argument must be lossless.
    Strict,
    /// As `JSON.stringify` treats it: a turn's result.
    Stringify,
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
    mode: Mode,
    substituted: Option<String>,
    note: Option<String>,
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

    /// Records the first value rewritten (`what` follows its path).
    fn substitute(&mut self, what: &str) {
        if self.substituted.is_none() {
            self.substituted = Some(format!("{}: {what}", self.path("result")));
        }
    }

    /// Records what the caller should be told (the first such thing).
    fn tell(&mut self, what: &str) {
        if self.note.is_none() {
            self.note = Some(format!("{}: {what}", self.path("result")));
        }
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

/// Converts `value` to JSON in `mode`; `root` names it in messages
/// (`result`, `argument`). Past `limits` the value is only measured, never
/// built; `stopped` is asked every few thousand values whether the watchdog
/// wants the thread back (then: [`Converted::Threw`]).
pub fn to_json<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    value: v8::Local<'s, v8::Value>,
    object_prototype: &v8::Global<v8::Object>,
    root: &str,
    limits: Limits,
    stopped: &dyn Fn() -> bool,
    mode: Mode,
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
        mode,
        substituted: None,
        note: None,
    };
    match walk_value(scope, &mut walk, None, Holder::Root, value, 0, true) {
        Ok(_) if walk.counting_only() => Converted::Oversize {
            bytes: walk.bytes,
            values: walk.values,
            shape: shape_of(scope, value),
        },
        // What `JSON.stringify` gives no text for (a function, a symbol):
        // said, not a silent null.
        Ok(None) => Converted::NotJson(format!(
            "{root} is {}, which JSON.stringify gives no text for; return the data it stands for",
            if value.is_function() {
                "a function"
            } else if value.is_symbol() {
                "a symbol"
            } else {
                "a value whose toJSON() returned undefined"
            }
        )),
        Ok(Some(json)) => Converted::Value {
            json,
            bytes: walk.bytes,
            values: walk.values,
            substituted: walk.substituted,
            note: walk.note,
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
