//! What a publication may declare about its payloads: a `request_format` or
//! `response_format` is a small JSON Schema object that constrains something,
//! or absent (shown as [`any_schema`]).

use code_runner_core::RunnerError;
use serde_json::{Value, json};

/// Most bytes a `request_format` or `response_format` may serialize to.
pub const MAX_FORMAT_BYTES: usize = 16 * 1024;

/// Checks a `request_format` / `response_format` and returns the schema
/// `engine::functions::info` shows: the format itself, or [`any_schema`].
///
/// # Errors
/// `code-runner::invalid_request` naming `field` when the format is not a
/// JSON object, is over [`MAX_FORMAT_BYTES`], or constrains nothing (has none
/// of `type`, `properties`, `$ref`).
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
        assert!(check_format("request_format", Some(json!({"$ref": "#/x"}))).is_ok());
        for (bad, why) in [
            (json!({"description": "anything"}), "must constrain"),
            (json!({}), "must constrain"),
            (json!("object"), "must be a JSON Schema object"),
            (json!(true), "must be a JSON Schema object"),
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
