//! Code mode (issue 32): `code-runner::describe` declares what guest code may
//! call, from the functions' JSON Schemas, in TypeScript and Python; guest
//! code calls a function by name through `iii.fn`, its payload checked on
//! the host against the request schema before dispatch.

mod approvals;
mod authority;
mod bounds;
mod calls;
mod describe;
mod engine;
mod mcp;

use serde_json::{Value, json};

use crate::helpers::{REGISTER, Server};

pub const DESCRIBE: &str = "code-runner::describe";

/// A python handler that greets and counts its calls, so a test can tell
/// whether a refused payload reached it.
const GREET: &str = "calls = 0\ndef handler(payload):\n    global calls\n    calls += 1\n    return f\"hello {payload['name']} #{calls}\"\n";

/// `my-app::greet`'s request schema: an object with a described property
/// and an optional enum.
fn greet_format() -> Value {
    json!({
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "description": "Who to greet."},
            "lang": {"enum": ["en", "pt"]}
        },
        "additionalProperties": false
    })
}

/// Registers python `source` as `id` with formats and a description.
async fn publish(server: &Server, id: &str, source: &str, formats: Value) {
    let mut payload = json!({"function_id": id, "lang": "python", "source": source});
    crate::helpers::merge(&mut payload, formats);
    let answer = server.call(REGISTER, payload).await;
    assert_eq!(
        answer.ok(),
        &json!({"function_id": id, "registered": true}),
        "{id}"
    );
}

/// A worker with `my-app::greet` (schemas, a description) published.
async fn with_greet() -> Server {
    let server = Server::start().await;
    publish(
        &server,
        "my-app::greet",
        GREET,
        json!({
            "description": "Greets someone by name.",
            "request_format": greet_format(),
            "response_format": {"type": "string"}
        }),
    )
    .await;
    server
}
