//! MCP resources: the files a run linked (`collect_mode: "link"`, the
//! default over MCP), read with `resources/read` by the uri of their
//! `resource_link` block. This decides how a linked file reaches a host:
//! through `code-runner::read_file` on the bus (the same capability check
//! and lifetime as everywhere), as text when it is textual UTF-8, else as
//! a blob. `resources/list` lists nothing: a link is a capability handed
//! to the one caller whose run made it, never advertised.

use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceRequestParams, ReadResourceResult};
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
    let contents = super::content::resource(uri, field("mime_type"), field("base64"));
    Ok(ReadResourceResult::new(vec![contents]))
}
