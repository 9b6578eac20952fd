//! Parsing JSON that someone else wrote: measured before it is parsed.
//!
//! serde_json guards its recursion with a depth limit of 128. A dependency
//! (the iii SDK) builds it with `unbounded_depth`, which only makes
//! `Deserializer::disable_recursion_limit` available (nothing calls it: a
//! 60 000-deep `--json` is refused at column 128); the depth check here
//! holds whatever a later dependency does. The larger danger is width: with
//! `arbitrary_precision` and `preserve_order` a parsed `Value` costs ~110
//! bytes per JSON value, so a 16 MiB `[0,0,…]` becomes ~900 MB (1.5 GB at
//! peak) before anything can refuse it. [`parse_bounded`] scans the bytes
//! once (no allocation) for both numbers first, and only then builds a tree.
//! Every parse of guest or client bytes goes through it, with
//! [`MAX_JSON_VALUES`] when the result is a tree ([`parse_guest`]).

use serde::de::DeserializeOwned;

/// Deepest nesting of arrays and objects accepted from outside: serde_json's
/// own default, which the engines' result limits stay below.
pub const MAX_JSON_DEPTH: usize = 128;

/// Deepest nesting of arrays and objects in a value a guest hands the host
/// (a result, a binding call's argument), in every engine: a deeper value is
/// not JSON to the engine, which refuses it in the guest. Below
/// [`MAX_JSON_DEPTH`], so whatever an engine accepts parses on the host.
pub const MAX_GUEST_DEPTH: usize = 100;

/// Largest JSON text of one value a guest hands the host (a binding call's
/// argument, a result when `max_result_bytes` is off), in every engine.
pub const MAX_GUEST_JSON_BYTES: usize = 16 << 20;

/// Most JSON values (scalars, arrays, objects) accepted from outside in one
/// text parsed into a tree: a request body, a guest's binding argument, a
/// guest's result. 262 144 values are ~30 MB of host memory at most.
pub const MAX_JSON_VALUES: usize = 256 * 1024;

/// What a JSON text holds, measured without parsing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonShape {
    /// An upper bound on the values (scalars, arrays, objects) in the text.
    pub values: usize,
    /// The deepest nesting of arrays and objects.
    pub depth: usize,
}

/// Measures `bytes` in one pass: separators and openings outside strings
/// bound the value count, brackets give the depth. Malformed text is
/// measured too (the parse that follows rejects it).
pub fn measure(bytes: &[u8]) -> JsonShape {
    let (mut values, mut depth, mut deepest) = (1usize, 0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in bytes {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b',' => values += 1,
            b'[' | b'{' => {
                values += 1;
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    JsonShape {
        values,
        depth: deepest,
    }
}

/// Parses `bytes` into `T` after checking that it nests at most `max_depth`
/// deep and holds at most `max_values` values (`None`: no value limit).
///
/// # Errors
/// A message naming the limit that was passed, or serde_json's parse error.
pub fn parse_bounded<T: DeserializeOwned>(
    bytes: &[u8],
    max_depth: usize,
    max_values: Option<usize>,
) -> Result<T, String> {
    let shape = measure(bytes);
    if shape.depth > max_depth {
        return Err(format!(
            "the JSON nests arrays and objects {} deep, past the limit of {max_depth}",
            shape.depth
        ));
    }
    if let Some(max) = max_values.filter(|max| shape.values > *max) {
        return Err(format!(
            "the JSON holds more than {max} values (about {})",
            shape.values
        ));
    }
    serde_json::from_slice(bytes).map_err(|err| err.to_string())
}

/// Parses JSON a guest wrote (a binding call's argument, a result):
/// [`parse_bounded`] with [`MAX_JSON_DEPTH`] and [`MAX_JSON_VALUES`], so a
/// guest's text never costs the host more than a bounded tree. Engines use
/// it for everything their guests hand the host.
///
/// # Errors
/// As [`parse_bounded`].
pub fn parse_guest<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    parse_bounded(bytes, MAX_JSON_DEPTH, Some(MAX_JSON_VALUES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Depth and count come from the bytes; brackets inside strings do not count.
    #[test]
    fn measures_depth_and_values_outside_strings() {
        assert_eq!(
            measure(b"1"),
            JsonShape {
                values: 1,
                depth: 0
            }
        );
        assert_eq!(
            measure(br#"{"a": [1, "x,[{\"]"]}"#),
            JsonShape {
                values: 4,
                depth: 2
            }
        );
    }

    /// A million-deep array is refused without recursing, whatever serde_json's
    /// own limit is in this build; a shallow one parses.
    #[test]
    fn deep_json_is_refused_before_parsing() {
        let deep = "[".repeat(1_000_000) + &"]".repeat(1_000_000);
        let err = parse_bounded::<Value>(deep.as_bytes(), MAX_JSON_DEPTH, None).unwrap_err();
        assert!(err.contains("1000000 deep"), "{err}");
        let ok: Value = parse_bounded(b"[[1]]", MAX_JSON_DEPTH, None).unwrap();
        assert_eq!(ok, serde_json::json!([[1]]));
        let err = parse_bounded::<Value>(b"[0,0,0,0]", 8, Some(3)).unwrap_err();
        assert!(err.contains("more than 3 values"), "{err}");
    }
}
