//! `code-runner call`: one call, made in-process, over HTTP or through an
//! iii engine, with its payload built from `--json` and `key=value`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Map, Value};

use super::seed_config;
use crate::bus::CallError;
use crate::worker::{Worker, WorkerOptions};

/// Builds a payload from `--json` and `key=value` arguments.
///
/// # Errors
/// A malformed `--json`, a non-object `--json`, or an argument without `=`.
pub fn payload(json: Option<&str>, args: &[String]) -> anyhow::Result<Value> {
    let mut map = match json {
        Some(text) => match serde_json::from_str(text).context("--json is not valid JSON")? {
            Value::Object(map) => map,
            other => anyhow::bail!("--json must be a JSON object, got {other}"),
        },
        None => Map::new(),
    };
    for arg in args {
        let (key, raw) = arg
            .split_once('=')
            .with_context(|| format!("argument `{arg}` is not key=value"))?;
        let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
        map.insert(key.to_string(), value);
    }
    Ok(Value::Object(map))
}

/// Calls `function_id` through the engine at `url`, as a short-lived worker.
pub(super) async fn call_through_iii(
    url: &str,
    function_id: &str,
    payload: Value,
    timeout_ms: u64,
) -> anyhow::Result<Result<Value, CallError>> {
    let answer = crate::edge::iii::call_once(url, function_id, payload, timeout_ms).await?;
    Ok(answer)
}

pub(super) async fn call_local(
    function_id: &str,
    payload: Value,
    data_dir: Option<PathBuf>,
    config: Option<&Path>,
) -> anyhow::Result<Result<Value, CallError>> {
    let (data_dir, _temp) = match data_dir {
        Some(dir) => (dir, None),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("code-runner-call-")
                .tempdir()?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let config = seed_config(&data_dir, config)?;
    // One call: interpreters booted ahead of time would only be thrown away.
    let worker = Worker::start_for_one_call(WorkerOptions {
        data_dir,
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    let answer = worker.call(function_id, payload).await;
    worker.shutdown().await;
    Ok(answer)
}

/// The largest answer `call --url` and `run --url` read: a server (which may
/// be anyone's) cannot make the CLI hold more. An answer past it is an
/// error naming the bound.
pub const MAX_REMOTE_ANSWER_BYTES: usize = 256 << 20;

/// The most JSON values and the deepest nesting a remote answer may have
/// before it is parsed (a real one holds a few dozen values; collected
/// files and figures are single base64 strings).
const MAX_REMOTE_ANSWER_VALUES: usize = 4 << 20;
const MAX_REMOTE_ANSWER_DEPTH: usize = 128;

pub(super) async fn call_remote(
    url: &str,
    function_id: &str,
    payload: &Value,
) -> anyhow::Result<Result<Value, CallError>> {
    let endpoint = format!("{}/v1/call/{function_id}", url.trim_end_matches('/'));
    let mut response = reqwest::Client::new()
        .post(&endpoint)
        .json(payload)
        .send()
        .await
        .with_context(|| format!("cannot reach {endpoint}"))?;
    let status = response.status();
    let too_large = || {
        anyhow::anyhow!(
            "{endpoint} answered more than {} MiB; code-runner reads no more than that",
            MAX_REMOTE_ANSWER_BYTES >> 20
        )
    };
    if response
        .content_length()
        .is_some_and(|len| len > MAX_REMOTE_ANSWER_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .with_context(|| format!("reading {endpoint}'s answer"))?
    {
        if bytes.len() + chunk.len() > MAX_REMOTE_ANSWER_BYTES {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    let body: Value = code_runner_core::json::parse_bounded(
        &bytes,
        MAX_REMOTE_ANSWER_DEPTH,
        Some(MAX_REMOTE_ANSWER_VALUES),
    )
    .map_err(|why| anyhow::anyhow!("{endpoint} did not answer JSON within bounds: {why}"))?;
    if status.is_success() {
        return Ok(Ok(body));
    }
    let error = body.get("error").cloned().unwrap_or(body);
    Ok(Err(CallError {
        code: error
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("http_error")
            .to_string(),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| format!("HTTP {status}"), str::to_string),
        // A stopped run's output so far, when the server kept it.
        output: serde_json::from_value::<code_runner_core::PartialOutput>(error.clone())
            .ok()
            .filter(|output| !output.stdout.is_empty() || !output.stderr.is_empty())
            .map(Box::new),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `k=v` values parse as JSON where they can and stay strings otherwise.
    #[test]
    fn key_value_arguments_parse_as_json_where_they_can() {
        let args = [
            "lang=python",
            "code=result = 2 + 2",
            "keep=true",
            "timeout_ms=100",
            "x={\"a\":1}",
        ];
        let payload = payload(Some(r#"{"keep": false, "y": 1}"#), &args.map(String::from)).unwrap();
        assert_eq!(
            payload,
            serde_json::json!({"keep": true, "y": 1, "lang": "python", "code": "result = 2 + 2", "timeout_ms": 100, "x": {"a": 1}})
        );
        assert!(super::payload(None, &["novalue".to_string()]).is_err());
        assert!(super::payload(Some("[1]"), &[]).is_err());
    }
}
