//! A small MCP client over raw streamable HTTP: JSON-RPC posts whose
//! answers come as JSON or server-sent events, a session's standalone
//! event stream, and stateless (2026-07-28) requests without a session.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::client;

/// The protocol version a session negotiates.
const SESSION_VERSION: &str = "2025-06-18";
/// The version whose requests carry no session.
const STATELESS_VERSION: &str = "2026-07-28";

/// Longest a test waits for a message it expects.
const WAIT: Duration = Duration::from_secs(60);

/// One MCP session on `<url>/mcp`.
pub struct Session {
    url: String,
    id: String,
    client: reqwest::Client,
    next: u64,
    /// Every message the standalone stream delivered, once [`Session::listen`]ed.
    pub heard: Arc<Mutex<Vec<Value>>>,
}

impl Session {
    /// Initializes a session (`initialize`, then `notifications/initialized`).
    pub async fn open(url: &str) -> Session {
        let client = client();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": SESSION_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "code-runner-tests", "version": "1"},
        }});
        let response = client
            .post(format!("{url}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .expect("POST initialize");
        assert!(response.status().is_success(), "{}", response.status());
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_string();
        let answer = reply(response, 0).await;
        assert!(answer.get("result").is_some(), "{answer}");
        let session = Session {
            url: url.to_string(),
            id,
            client,
            next: 1,
            heard: Arc::default(),
        };
        let done = session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert!(done.status().is_success(), "{}", done.status());
        session
    }

    /// Opens the session's standalone stream; what it delivers goes to `heard`.
    pub async fn listen(&self) {
        let response = reqwest::Client::new()
            .get(format!("{}/mcp", self.url))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", SESSION_VERSION)
            .send()
            .await
            .expect("GET /mcp");
        assert!(response.status().is_success(), "{}", response.status());
        let heard = self.heard.clone();
        tokio::spawn(async move {
            let mut events = Events::new(response);
            while let Some(message) = events.next().await {
                heard.lock().unwrap().push(message);
            }
        });
    }

    /// How many `notifications/tools/list_changed` the stream delivered.
    pub fn list_changes(&self) -> usize {
        let heard = self.heard.lock().unwrap();
        heard
            .iter()
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .count()
    }

    /// Waits until the stream delivered more than `seen` list changes.
    pub async fn await_list_change(&self, seen: usize) {
        let started = Instant::now();
        while self.list_changes() <= seen {
            assert!(
                started.elapsed() < WAIT,
                "no tools/list_changed within {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Calls `method` with `params`; the JSON-RPC answer (`result` or `error`).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let response = self.post(&body).await;
        assert!(response.status().is_success(), "{}", response.status());
        reply(response, id).await
    }

    /// The tools `tools/list` names now.
    pub async fn tools(&mut self) -> Vec<Value> {
        let answer = self.request("tools/list", json!({})).await;
        answer["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("tools/list answered {answer}"))
    }

    /// Calls tool `name` with `arguments`; the tool's result.
    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        answer["result"].clone()
    }

    /// Ends the session (`DELETE /mcp`).
    pub async fn close(self) {
        let response = self
            .client
            .delete(format!("{}/mcp", self.url))
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", SESSION_VERSION)
            .send()
            .await
            .expect("DELETE /mcp");
        assert!(response.status().is_success(), "{}", response.status());
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}/mcp", self.url))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", SESSION_VERSION)
            .json(body)
            .send()
            .await
            .expect("POST /mcp")
    }
}

/// A stateless `tools/list` (protocol 2026-07-28, no session); the answer.
pub async fn stateless_tools_list(url: &str, id: u64) -> Value {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "code-runner-tests", "version": "1"},
    });
    let body =
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"_meta": meta}});
    let response = client()
        .post(format!("{url}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", STATELESS_VERSION)
        .header("mcp-method", "tools/list")
        .json(&body)
        .send()
        .await
        .expect("POST /mcp");
    assert!(response.status().is_success(), "{}", response.status());
    reply(response, id).await
}

/// The answer to request `id` in `response`: its JSON body, or the event of
/// its stream that carries it.
async fn reply(response: reqwest::Response, id: u64) -> Value {
    let sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if !sse {
        return response.json().await.expect("a JSON answer");
    }
    let mut events = Events::new(response);
    let started = Instant::now();
    while let Some(message) = events.next().await {
        if message["id"] == id {
            return message;
        }
        assert!(started.elapsed() < WAIT, "no answer to request {id}");
    }
    panic!("the stream ended without an answer to request {id}")
}

/// The JSON messages of a server-sent event stream, one at a time.
struct Events {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Events {
    fn new(response: reqwest::Response) -> Events {
        Events {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next message with JSON data (priming events carry none).
    async fn next(&mut self) -> Option<Value> {
        loop {
            // Split on bytes: a chunk may end inside a character.
            let end = self.buffer.windows(2).position(|w| w == b"\n\n");
            if let Some(end) = end {
                let rest = self.buffer.split_off(end + 2);
                let event = String::from_utf8_lossy(&self.buffer).into_owned();
                self.buffer = rest;
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if let Ok(message) = serde_json::from_str(&data.join("\n")) {
                    return Some(message);
                }
                continue;
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }
}
