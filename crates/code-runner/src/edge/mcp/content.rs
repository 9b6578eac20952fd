//! A tool's answer as MCP content blocks, beside its `structuredContent`.
//!
//! Every byte of a figure or a file appears once in the answer: in its
//! content block. The first block is the answer's JSON as text, with the
//! base64 of figures and files left out; then each figure is an `image`
//! block, and each collected file a `resource_link` block when it was
//! linked (`collect_mode: "link"`, the default over MCP: its `uri` is read
//! with `resources/read`, and the text block carries its preview) or an
//! embedded `resource` block when it came inline (`text` when it is
//! textual UTF-8, else `blob`). An omission marker (figures' or files') is
//! a `text` block. [`structured`] is the `structuredContent`: the answer
//! with the same bytes left out, so a host that gives the model both does
//! not give it each figure twice.

use base64::Engine;
use code_runner_core::files::is_textual;
use rmcp::model::{ContentBlock, Resource, ResourceContents};
use serde_json::Value;

/// The scheme of an inline collected file's URI: `code-runner://files/<path>`,
/// the path relative to the runtime's root (`/work` for python,
/// `iii.files` for JavaScript), each segment percent-encoded. (A linked
/// file's uri carries its link's token: `code-runner://files/lk_…/<path>`.)
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
    let mut text = structured(value.clone());
    if let (Some(object), Some(images)) = (text.as_object_mut(), images) {
        object.insert("images".into(), Value::from(images.len()));
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
        blocks.push(
            match (field("path"), file.get("uri").and_then(Value::as_str)) {
                // The omission marker: its `base64` is plain text.
                ("", _) => ContentBlock::text(field("base64")),
                (path, Some(uri)) => ContentBlock::resource_link(link(
                    uri,
                    path,
                    field("mime_type"),
                    file.get("size").and_then(Value::as_u64),
                )),
                // A figure the code showed and also saved and collected:
                // its bytes are in the image block already.
                (path, None) => match images.into_iter().flatten().position(|image| {
                    image.get("data").and_then(Value::as_str) == Some(field("base64"))
                }) {
                    Some(index) => ContentBlock::text(format!(
                        "{path}: the same bytes as figure {} above",
                        index + 1
                    )),
                    None => ContentBlock::resource(resource(
                        file_uri(path),
                        field("mime_type"),
                        field("base64"),
                    )),
                },
            },
        );
    }
    blocks
}

/// The content of `read_file`'s answer: the file as an embedded resource
/// (text when textual UTF-8, else a blob) under the uri it was read by.
pub fn read_file_content(value: &Value) -> Vec<ContentBlock> {
    let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default();
    vec![ContentBlock::resource(resource(
        field("uri").to_string(),
        field("mime_type"),
        field("base64"),
    ))]
}

/// The answer as `structuredContent`: figures' `data` and files' `base64`
/// left out (their content blocks carry them), markers kept (plain text).
pub fn structured(mut value: Value) -> Value {
    let strip = |list: Option<&mut Value>, field: &str, is_marker: &dyn Fn(&Value) -> bool| {
        for item in list.and_then(Value::as_array_mut).into_iter().flatten() {
            if !is_marker(item)
                && let Some(object) = item.as_object_mut()
            {
                object.remove(field);
            }
        }
    };
    if let Some(object) = value.as_object_mut() {
        strip(object.get_mut("images"), "data", &|image| {
            image.get("mime_type").and_then(Value::as_str) == Some("text/plain")
        });
        strip(object.get_mut("files"), "base64", &|file| {
            file.get("path").and_then(Value::as_str) == Some("")
        });
        // A read file's bytes (`read_file`'s answer).
        if object.contains_key("uri") {
            object.remove("base64");
        }
    }
    value
}

/// A linked file as a `resource_link`: its uri, its path as name, its type
/// and size (its preview is in the text block).
fn link(uri: &str, path: &str, mime: &str, size: Option<u64>) -> Resource {
    let mut link = Resource::new(uri, path);
    link.mime_type = Some(mime.to_string());
    link.size = size;
    link.description = Some(format!(
        "{mime}, {} bytes; read it with resources/read",
        size.unwrap_or_default()
    ));
    link
}

/// A collected file as a resource: `text` when its type is textual
/// ([`is_textual`]) and its bytes are UTF-8, so a model reads it as it is;
/// else its base64 as `blob`.
pub(super) fn resource(uri: String, mime: &str, base64: &str) -> ResourceContents {
    let text = is_textual(mime)
        .then(|| {
            base64::engine::general_purpose::STANDARD
                .decode(base64)
                .ok()
        })
        .flatten()
        .and_then(|bytes| String::from_utf8(bytes).ok());
    match text {
        Some(text) => ResourceContents::text(text, uri),
        None => ResourceContents::blob(base64, uri),
    }
    .with_mime_type(mime)
}

/// The URI of a collected file at `path` (relative, `/`-separated).
pub fn file_uri(path: &str) -> String {
    let mut uri = FILE_URI_PREFIX.to_string();
    crate::runtimes::links::push_path(&mut uri, path);
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

    /// A linked file is a `resource_link` (uri, path, type, size); its
    /// preview stays in the text block; a figure's bytes are in its image
    /// block only, neither in the text nor in the structured content.
    #[test]
    fn links_are_resource_links_and_bytes_appear_once() {
        let uri = "code-runner://files/lk_x/out/r.csv";
        let answer = json!({"exit_code": 0,
            "images": [{"mime_type": "image/png", "data": "iVBORw0KGgo="},
                       {"mime_type": "text/plain", "data": "<1 more image omitted>"}],
            "files": [{"path": "out/r.csv", "mime_type": "text/csv", "size": 3, "uri": uri, "preview": "a,b"}]});
        let blocks = serde_json::to_value(content_of(&answer)).unwrap();
        let text = blocks[0]["text"].as_str().unwrap();
        assert!(!text.contains("iVBORw0KGgo"), "{text}");
        assert!(text.contains("\"preview\":\"a,b\""), "{text}");
        assert_eq!(blocks[1]["type"], "image");
        assert_eq!(
            blocks[2],
            json!({"type": "text", "text": "<1 more image omitted>"})
        );
        assert_eq!(blocks[3]["type"], "resource_link");
        assert_eq!(blocks[3]["uri"], uri);
        assert_eq!(blocks[3]["name"], "out/r.csv");
        assert_eq!(blocks[3]["mimeType"], "text/csv");
        assert_eq!(blocks[3]["size"], 3);
        let structured = structured(answer);
        assert_eq!(structured["images"][0], json!({"mime_type": "image/png"}));
        assert_eq!(structured["images"][1]["data"], "<1 more image omitted>");
        assert_eq!(structured["files"][0]["uri"], uri);
        let all = serde_json::to_string(&blocks).unwrap() + &structured.to_string();
        assert_eq!(all.matches("iVBORw0KGgo").count(), 1, "{all}");
    }
}
