//! Registrations outlive the worker (issue 47, item 5): what a host
//! registered is published again by a worker that starts on the same data
//! directory (after a SIGKILL too: it is kept when it is registered), with
//! its schema and approval flag; `teardown {namespace}` removes it for good;
//! what guest code registered is not kept.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{ServeProcess, client, post_json};

async fn call(url: &str, id: &str, payload: Value) -> crate::helpers::Answer {
    post_json(&client(), url, id, &payload).await
}

/// Calls `id` until it answers 200 (the kept registrations are published
/// once the engines are settled), at most `limit`.
async fn answered(url: &str, id: &str, payload: Value, limit: Duration) -> crate::helpers::Answer {
    let until = std::time::Instant::now() + limit;
    loop {
        let answer = call(url, id, payload.clone()).await;
        if answer.status.is_success() || std::time::Instant::now() > until {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_registration_survives_a_restart_until_its_namespace_is_torn_down() {
    let temp = crate::helpers::tempdir();
    let data = temp.path().join("data");
    let mut first = ServeProcess::spawn(&data, None);
    let schema =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let registered = call(
        &first.url,
        "code-runner::register_function",
        json!({
            "function_id": "durable::greet",
            "lang": "node",
            "description": "Greets by name",
            "request_format": schema,
            "source": "export function handler(p) { return `hello ${p.name}`; }",
        }),
    )
    .await;
    registered.ok();
    let registered = call(
        &first.url,
        "code-runner::register_function",
        json!({
            "function_id": "durable::twice",
            "lang": "python",
            "requires_approval": true,
            "source": "def handler(p):\n    return p['x'] * 2\n",
        }),
    )
    .await;
    registered.ok();
    // Guest code's own registration belongs to its lineage: not kept.
    let guest = call(&first.url, "code-runner::run", json!({
        "lang": "node",
        "code": "await iii.trigger({ function_id: 'code-runner::register_function', payload: { function_id: 'guesty::f', lang: 'node', source: 'export function handler() { return 1 }' } }); return 1",
    }))
    .await;
    assert_eq!(guest.ok()["exit_code"], 0, "{}", guest.body);
    assert_eq!(
        call(&first.url, "guesty::f", json!({})).await.ok(),
        &json!(1)
    );
    first.kill();

    let second = ServeProcess::spawn(&data, None);
    let answer = answered(
        &second.url,
        "durable::greet",
        json!({"name": "again"}),
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(answer.ok(), &json!("hello again"), "{}", second.log());
    let answer = answered(
        &second.url,
        "durable::twice",
        json!({"x": 21}),
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(answer.ok(), &json!(42), "{}", second.log());
    let info = call(
        &second.url,
        "engine::functions::info",
        json!({"function_ids": ["durable::greet", "durable::twice"]}),
    )
    .await;
    let text = info.ok().to_string();
    assert!(
        text.contains("Greets by name") && text.contains("\"required\":[\"name\"]"),
        "{text}"
    );
    assert!(text.contains("requires_approval"), "{text}");
    let guesty = call(&second.url, "guesty::f", json!({})).await;
    assert!(
        !guesty.status.is_success(),
        "a guest's registration came back: {}",
        guesty.body
    );

    let torn = call(
        &second.url,
        "code-runner::teardown",
        json!({"namespace": "durable"}),
    )
    .await;
    torn.ok();
    drop(second);
    let third = ServeProcess::spawn(&data, None);
    // Give a start the time it takes to publish what it kept: nothing is.
    let gone = answered(
        &third.url,
        "durable::greet",
        json!({"name": "x"}),
        Duration::from_secs(10),
    )
    .await;
    assert!(
        !gone.status.is_success(),
        "a torn-down registration came back: {}",
        gone.body
    );
}
