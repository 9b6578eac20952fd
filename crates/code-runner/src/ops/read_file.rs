//! `code-runner::read_file`: a linked file's bytes by its `uri` (a run's
//! `collect_mode: "link"`), from the worker's link store. The uri is the
//! capability: whoever holds it reads the file, host or guest code (a
//! guest's nested run may link its files too), while the link lives.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use code_runner_core::wire::schema_of;
use code_runner_core::{ReadFileRequest, ReadFileResponse};
use serde_json::Value;

use crate::bus::names::READ_FILE;
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ops::{Ops, handler_as};

/// `code-runner::read_file`, for the composition root.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        READ_FILE,
        Function::new(
            "Read a file a run linked (collect_mode: \"link\"): pass its uri (code-runner://files/lk_…/path); answers its path, MIME type, size and bytes as base64. A link lives while its kept runtime does, or for the idle TTL since it was made or last read.",
            schema_of::<ReadFileRequest>(),
            schema_of::<ReadFileResponse>(),
            handler_as(ops, read_file),
        ),
    )
}

async fn read_file(ops: Arc<Ops>, payload: Value, _caller: Caller) -> Result<Value, CallError> {
    let request: ReadFileRequest = parse(payload)?;
    let ttl = Duration::from_secs(ops.config().idle_ttl_secs);
    let file = ops.links.read(&request.uri, ttl)?;
    let response = ReadFileResponse {
        uri: request.uri,
        path: file.path,
        mime_type: file.mime_type.to_string(),
        size: file.bytes.len() as u64,
        base64: base64::engine::general_purpose::STANDARD.encode(&file.bytes),
    };
    Ok(serde_json::to_value(response).unwrap_or_default())
}
