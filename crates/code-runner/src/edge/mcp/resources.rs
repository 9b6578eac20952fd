//! MCP resources: the files a run linked (`collect_mode: "link"`, the
//! default over MCP), read with `resources/read` by the uri of their
//! `resource_link` block. This decides how a linked file reaches a host:
//! through `code-runner::read_file` on the bus (the same capability check
//! and lifetime as everywhere), as text when it is textual UTF-8, else as
//! a blob. `resources/list` lists nothing: a link is a capability handed
//! to the one caller whose run made it, never advertised.

use base64::Engine as _;
use code_runner_core::files::is_textual;
use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceRequestParams, ReadResourceResult, ResourceContents};
use serde_json::{Value, json};

use crate::bus::names::READ_FILE;
use crate::edge::api::Api;

/// `resources/read` of a linked file's `uri`.
///
/// # Errors
/// `invalid_params` for a uri that is not a linked file's; MCP's
/// resource-not-found (-32002) for one that is unknown, expired or pushed
/// out, its message saying which.
pub async fn read<A: Api>(
    api: &A,
    request: &ReadResourceRequestParams,
) -> Result<ReadResourceResult, McpError> {
    let uri = request.uri.clone();
    let answer = api
        .call(READ_FILE, json!({ "uri": uri }))
        .await
        .map_err(|err| match err.code.as_str() {
            "code-runner::invalid_request" => McpError::invalid_params(err.message, None),
            _ => McpError::resource_not_found(err.message, Some(json!({ "uri": uri }))),
        })?;
    let field = |name: &str| answer.get(name).and_then(Value::as_str).unwrap_or_default();
    let (mime, base64) = (field("mime_type"), field("base64"));
    let text = is_textual(mime)
        .then(|| {
            base64::engine::general_purpose::STANDARD
                .decode(base64)
                .ok()
        })
        .flatten()
        .and_then(|bytes| String::from_utf8(bytes).ok());
    let contents = match text {
        Some(text) => ResourceContents::text(text, uri.as_str()),
        None => ResourceContents::blob(base64, uri.as_str()),
    }
    .with_mime_type(mime);
    Ok(ReadResourceResult::new(vec![contents]))
}
