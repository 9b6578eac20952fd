//! What a publication may declare: a `description` of at most 4 KiB, and a
//! `request_format` or `response_format`, each a small JSON Schema object
//! that constrains something, or absent (shown as [`any_schema`]).

use code_runner_core::RunnerError;
use serde_json::{Value, json};

/// Most bytes a `request_format` or `response_format` may serialize to.
pub const MAX_FORMAT_BYTES: usize = 16 * 1024;

/// Most bytes a published function's `description` may hold.
pub const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;

/// Checks a publication's `description`.
///
/// # Errors
/// `code-runner::invalid_request` when it is over [`MAX_DESCRIPTION_BYTES`].
pub fn check_description(description: Option<String>) -> Result<Option<String>, RunnerError> {
    match description {
        Some(text) if text.len() > MAX_DESCRIPTION_BYTES => Err(RunnerError::invalid(format!(
            "description is {} bytes; at most {MAX_DESCRIPTION_BYTES} (4 KiB): say what the function does and put the rest in its formats",
            text.len()
        ))),
        other => Ok(other),
    }
}

/// Checks a `request_format` / `response_format` and returns the schema
/// `engine::functions::info` shows: the format itself, or [`any_schema`].
///
/// # Errors
/// `code-runner::invalid_request` naming `field` when the format is not a
/// JSON object, is over [`MAX_FORMAT_BYTES`], constrains nothing (has none
/// of `type`, `properties`, `$ref`), or reaches too much to check
/// ([`super::cost::expansion`]: past 2000 subschemas, 128 levels, or a
/// `$ref` out of the schema).
pub fn check_format(field: &str, format: Option<Value>) -> Result<Value, RunnerError> {
    let Some(format) = format.filter(|f| !f.is_null()) else {
        return Ok(any_schema());
    };
    let Value::Object(map) = &format else {
        return Err(RunnerError::invalid(format!(
            "{field} must be a JSON Schema object, e.g. {{\"type\": \"object\"}}"
        )));
    };
    let bytes = serde_json::to_vec(&format).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_FORMAT_BYTES {
        return Err(RunnerError::invalid(format!(
            "{field} is {bytes} bytes; at most {MAX_FORMAT_BYTES} (16 KiB)"
        )));
    }
    if !["type", "properties", "$ref"]
        .iter()
        .any(|key| map.contains_key(*key))
    {
        return Err(RunnerError::invalid(format!(
            "{field} must constrain something: give it `type`, `properties` or `$ref`"
        )));
    }
    // Checking a payload against it is bounded by work, not bytes.
    super::cost::expansion(&format)
        .map_err(|why| RunnerError::invalid(format!("{field} is refused: {why}")))?;
    Ok(format)
}

/// The schema shown for a function registered without a format: one that
/// accepts any JSON value and says so in its title.
pub fn any_schema() -> Value {
    json!({
        "title": "any",
        "description": "No format was registered: any JSON value."
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A description is at most 4 KiB; absent stays absent.
    #[test]
    fn descriptions_stay_small() {
        assert_eq!(check_description(None).unwrap(), None);
        let ok = "d".repeat(MAX_DESCRIPTION_BYTES);
        assert_eq!(check_description(Some(ok.clone())).unwrap(), Some(ok));
        let err = check_description(Some("d".repeat(MAX_DESCRIPTION_BYTES + 1))).unwrap_err();
        assert!(
            err.message.contains("description is 4097 bytes"),
            "{}",
            err.message
        );
        assert!(err.message.contains("4 KiB"), "{}", err.message);
    }

    /// Formats: absent is "any", an object must constrain something and
    /// stay under 16 KiB.
    #[test]
    fn formats_must_constrain_and_stay_small() {
        assert_eq!(
            check_format("request_format", None).unwrap()["title"],
            "any"
        );
        assert_eq!(
            check_format("request_format", Some(Value::Null)).unwrap()["title"],
            "any"
        );
        let ok = json!({"type": "object", "properties": {"lang": {"type": "string"}}});
        assert_eq!(
            check_format("request_format", Some(ok.clone())).unwrap(),
            ok
        );
        let referred = json!({"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}});
        assert!(check_format("request_format", Some(referred)).is_ok());
        for (bad, why) in [
            (json!({"description": "anything"}), "must constrain"),
            (json!({}), "must constrain"),
            (json!("object"), "must be a JSON Schema object"),
            (json!(true), "must be a JSON Schema object"),
            (json!({"$ref": "#/x"}), "names nothing in the schema"),
            (
                json!({"$ref": "https://elsewhere.example/s.json"}),
                "points outside the schema",
            ),
            (
                json!({"type": "string", "description": "x".repeat(17_000)}),
                "16 KiB",
            ),
        ] {
            let err = check_format("response_format", Some(bad)).unwrap_err();
            assert!(err.message.contains("response_format"), "{}", err.message);
            assert!(err.message.contains(why), "{}", err.message);
        }
    }
}
