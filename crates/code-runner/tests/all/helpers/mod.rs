//! Shared helpers: the function ids and error codes, HTTP answers that keep
//! status and body together, and the small utilities every area repeats.
//! [`Server`] (a worker behind real HTTP) is in `server`, the real binary in
//! `process`, a real iii engine in `engine`, and the per-language forms of
//! the programs bilingual tests run in `lang`.

pub mod engine;
pub mod lang;
pub mod process;
mod server;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

pub use process::{
    Reaped, ServeProcess, binary, dirs_holding, output_within, peak_rss_mib, raw_http,
    runtime_dirs, venv_program,
};
pub use server::Server;

pub const INVALID_REQUEST: &str = "code-runner::invalid_request";
pub const RUNTIME_NOT_FOUND: &str = "code-runner::runtime_not_found";
pub const EXPIRED: &str = "code-runner::expired";
pub const CAPACITY: &str = "code-runner::capacity";
pub const TIMEOUT: &str = "code-runner::timeout";
pub const RESOURCE_EXHAUSTED: &str = "code-runner::resource_exhausted";
pub const FUNCTION_NOT_FOUND: &str = "function_not_found";

pub const RUN: &str = "code-runner::run";
pub const TEARDOWN: &str = "code-runner::teardown";
pub const FUNCTIONS_INFO: &str = "engine::functions::info";
pub const REGISTER: &str = "code-runner::register_function";
pub const HANDLER_ERROR: &str = "code-runner::handler_error";

/// Longest any single HTTP call may take before the test calls it a hang.
const CALL_DEADLINE: Duration = Duration::from_secs(120);

/// One HTTP answer: the status and the JSON body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// The body of a 200, or a panic showing the error.
    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "expected 200, got {}: {}",
            self.status,
            self.body
        );
        &self.body
    }

    /// The error's code, if the answer is an error.
    pub fn error_code(&self) -> Option<&str> {
        self.body["error"]["code"].as_str()
    }

    /// The error's message, or "".
    pub fn error_message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }

    /// Asserts an error: its `code` first, then that its message contains `part`.
    #[track_caller]
    pub fn assert_error(&self, code: &str, part: &str) {
        assert_eq!(
            self.error_code(),
            Some(code),
            "expected error {code}, got HTTP {}: {}",
            self.status,
            self.body
        );
        assert!(
            !self.status.is_success(),
            "an error must not be a 2xx: {}",
            self.status
        );
        assert!(
            self.error_message().contains(part),
            "message of {code} should contain {part:?}: {:?}",
            self.error_message()
        );
    }
}

/// Merges the fields of `extra` (an object) into `target` (an object).
pub fn merge(target: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (target.as_object_mut(), extra) {
        target.extend(extra);
    }
}

/// An HTTP client whose every call has a deadline, so a hang fails the test.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(CALL_DEADLINE)
        .build()
        .unwrap()
}

pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    function_id: &str,
    payload: &Value,
) -> Answer {
    post_raw(
        client,
        url,
        function_id,
        serde_json::to_vec(payload).unwrap(),
    )
    .await
}

pub async fn post_raw(
    client: &reqwest::Client,
    url: &str,
    function_id: &str,
    body: Vec<u8>,
) -> Answer {
    let response = client
        .post(format!("{url}/v1/call/{function_id}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|err| panic!("POST {function_id}: {err}"));
    answer(response).await
}

pub(crate) async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status();
    let bytes = response.bytes().await.expect("response body");
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|err| {
        panic!(
            "HTTP {status} answered non-JSON ({err}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    Answer { status, body }
}

/// Posts a run to `url` asking for server-sent events and sends each
/// `(event, data)` to `seen` as it arrives, until the stream ends.
pub async fn stream_run(
    url: &str,
    payload: &Value,
    seen: tokio::sync::mpsc::UnboundedSender<(String, Value)>,
) {
    let mut response = client()
        .post(format!("{url}/v1/call/{RUN}"))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(payload.to_string())
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let mut event = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event:") {
                    event = name.trim().to_string();
                } else if let Some(part) = line.strip_prefix("data:") {
                    data.push_str(part.trim_start());
                }
            }
            if !event.is_empty() {
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                let _ = seen.send((event, data));
            }
        }
    }
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("code-runner-test-")
        .tempdir()
        .unwrap()
}

/// Polls `condition` every 20 ms until it holds; panics with `what` after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
