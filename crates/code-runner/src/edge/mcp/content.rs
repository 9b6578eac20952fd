//! A tool's answer as MCP content blocks, beside its `structuredContent`.
//!
//! The first block is the answer's JSON as text, with the base64 of figures
//! and collected files left out (the structured content carries them whole).
//! Then each figure is an `image` block and each collected file a `resource`
//! block: an embedded resource with the file's MIME type and the URI
//! [`file_uri`] gives, whose `text` is the file when it is textual UTF-8,
//! else whose `blob` is its base64. An omission marker (figures' or
//! files') is a `text` block. Nothing here grows the answer past what the
//! run's caps (`max_images`, `max_image_bytes`, `max_collect_files`,
//! `max_collect_bytes`) let through: each byte appears once in the blocks.

use base64::Engine;
use rmcp::model::{ContentBlock, ResourceContents};
use serde_json::Value;

/// The scheme of a collected file's URI: `code-runner://files/<path>`, the
/// path relative to the runtime's root (`/work` for python, `iii.files`
/// for JavaScript), each segment percent-encoded.
pub const FILE_URI_PREFIX: &str = "code-runner://files/";

/// The content blocks of a tool's answer `value`.
pub fn content_of(value: &Value) -> Vec<ContentBlock> {
    let listed = |name: &str| {
        value
            .get(name)
            .and_then(Value::as_array)
            .filter(|items| !items.is_empty())
    };
    let (images, files) = (listed("images"), listed("files"));
    let mut text = value.clone();
    if let Some(object) = text.as_object_mut() {
        if let Some(images) = images {
            object.insert("images".into(), Value::from(images.len()));
        }
        if let Some(files) = files {
            object.insert("files".into(), files.iter().map(without_base64).collect());
        }
    }
    let mut blocks = vec![ContentBlock::text(
        serde_json::to_string(&text).unwrap_or_default(),
    )];
    for image in images.into_iter().flatten() {
        let field = |name: &str| image.get(name).and_then(Value::as_str).unwrap_or_default();
        blocks.push(match field("mime_type") {
            "text/plain" => ContentBlock::text(field("data")),
            mime => ContentBlock::image(field("data"), mime),
        });
    }
    for file in files.into_iter().flatten() {
        let field = |name: &str| file.get(name).and_then(Value::as_str).unwrap_or_default();
        blocks.push(match field("path") {
            // The omission marker: its `base64` is plain text.
            "" => ContentBlock::text(field("base64")),
            path => ContentBlock::resource(resource(path, field("mime_type"), field("base64"))),
        });
    }
    blocks
}

/// A collected file as a resource: `text` when its type is textual
/// ([`is_textual`]) and its bytes are UTF-8, so a model reads it as it is;
/// else its base64 as `blob`.
fn resource(path: &str, mime: &str, base64: &str) -> ResourceContents {
    let text = is_textual(mime)
        .then(|| {
            base64::engine::general_purpose::STANDARD
                .decode(base64)
                .ok()
        })
        .flatten()
        .and_then(|bytes| String::from_utf8(bytes).ok());
    match text {
        Some(text) => ResourceContents::text(text, file_uri(path)),
        None => ResourceContents::blob(base64, file_uri(path)),
    }
    .with_mime_type(mime)
}

/// `text/*`, JSON, XML and SVG: the types whose bytes are text to read.
fn is_textual(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/xml" | "image/svg+xml"
        )
}

/// A collected file in the text block: its `base64` left out, except a
/// marker's (plain text, and short).
fn without_base64(file: &Value) -> Value {
    let mut file = file.clone();
    let marker = file.get("path").and_then(Value::as_str) == Some("");
    if let Some(object) = file.as_object_mut()
        && !marker
    {
        object.remove("base64");
    }
    file
}

/// The URI of a collected file at `path` (relative, `/`-separated).
pub fn file_uri(path: &str) -> String {
    let mut uri = String::with_capacity(FILE_URI_PREFIX.len() + path.len());
    uri.push_str(FILE_URI_PREFIX);
    for byte in path.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(char::from(byte));
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every byte outside the unreserved set is escaped; `/` separates.
    #[test]
    fn uris_escape_what_is_not_unreserved() {
        assert_eq!(file_uri("out/a b.csv"), "code-runner://files/out/a%20b.csv");
        assert_eq!(file_uri("é#?"), "code-runner://files/%C3%A9%23%3F");
    }

    /// A file is a resource block (text when textual UTF-8, else a blob)
    /// and its base64 leaves the text; the marker is a text block and stays.
    #[test]
    fn files_become_resources_and_the_marker_text() {
        let answer = json!({"exit_code": 0, "files": [
            {"path": "out/r.csv", "mime_type": "text/csv", "size": 3, "base64": "YSxi"},
            {"path": "x.bin", "mime_type": "application/octet-stream", "size": 3, "base64": "YSxi"},
            {"path": "bad.txt", "mime_type": "text/plain", "size": 1, "base64": "/w=="},
            {"path": "", "mime_type": "text/plain", "size": 0, "base64": "[1 file omitted]"},
        ]});
        let blocks = serde_json::to_value(content_of(&answer)).unwrap();
        let text: Value = serde_json::from_str(blocks[0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            text["files"][0],
            json!({"path": "out/r.csv", "mime_type": "text/csv", "size": 3})
        );
        assert_eq!(text["files"][3]["base64"], "[1 file omitted]");
        let resource = |i: usize| blocks[i]["resource"].clone();
        assert_eq!(blocks[1]["type"], "resource");
        assert_eq!(
            resource(1),
            json!({"uri": "code-runner://files/out/r.csv", "mimeType": "text/csv", "text": "a,b"})
        );
        assert_eq!(resource(2)["blob"], "YSxi", "not textual: a blob");
        assert_eq!(resource(3)["blob"], "/w==", "not UTF-8: a blob");
        assert_eq!(resource(3)["mimeType"], "text/plain");
        assert_eq!(
            blocks[4],
            json!({"type": "text", "text": "[1 file omitted]"})
        );
        assert_eq!(blocks.as_array().unwrap().len(), 5);
    }
}
