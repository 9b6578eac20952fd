//! The `pre_generate` hook `code-runner::inject-guidance`, and how the
//! internal functions present themselves in `engine::functions::info`.

use serde_json::{Value, json};

use crate::helpers::{FUNCTIONS_INFO, Server};

const INJECT: &str = "code-runner::inject-guidance";

/// What the harness sends: far more than the hook reads, plus the engine's `_caller_worker_id`.
fn event(prompt: &str) -> Value {
    json!({
        "point": "pre_generate", "session_id": "s_1", "turn_id": "t_1", "step": 3, "depth": 0,
        "_caller_worker_id": "w-1",
        "generate": {"system_prompt": prompt, "messages": [], "model": "m", "tools": []},
    })
}

/// On: the guidance is appended once (a redelivered step changes nothing);
/// off, set live, the hook answers the no-op.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_guidance_appends_once_and_turns_off_live() {
    let server = Server::start().await;
    let answer = server.call(INJECT, event("You are helpful.")).await;
    let prompt = answer.ok()["mutations"]["system_prompt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.starts_with("You are helpful.\n\n"), "{prompt}");
    for needed in [
        "code-runner::run",
        "keep",
        "runtime_id",
        "register_function",
        "teardown",
        "16384 bytes",
        "32768 bytes",
        "No network",
    ] {
        assert!(
            prompt.contains(needed),
            "guidance lacks {needed:?}: {prompt}"
        );
    }
    let again = server.call(INJECT, event(&prompt)).await;
    assert_eq!(again.ok(), &json!({"mutations": {}}));

    let mut value = server
        .call("configuration::get", json!({"id": "code-runner"}))
        .await
        .ok()["value"]
        .clone();
    value["inject_guidance"] = json!(false);
    server
        .call(
            "configuration::set",
            json!({"id": "code-runner", "value": value}),
        )
        .await
        .ok();
    let off = server.call(INJECT, event("You are helpful.")).await;
    assert_eq!(off.ok(), &json!({"mutations": {}}));
}

/// Hooks are internal and carry the seed's schemas; the configuration
/// functions a person calls are not internal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_are_internal_with_their_schemas() {
    let server = Server::start().await;
    let ids = [
        INJECT,
        "code-runner::on-config-change",
        "configuration::get",
        "configuration::set",
    ];
    let answer = server
        .call(FUNCTIONS_INFO, json!({"function_ids": ids}))
        .await;
    let functions = answer.ok()["functions"].as_array().unwrap().clone();
    let internal: Vec<Value> = functions
        .iter()
        .map(|f| f["metadata"]["internal"].clone())
        .collect();
    assert_eq!(
        internal,
        [json!(true), json!(true), Value::Null, Value::Null]
    );

    let inject = &functions[0];
    assert_eq!(inject["request_schema"]["title"], "PreGenerateEvent");
    assert_eq!(
        inject["request_schema"]["properties"]["generate"]["$ref"],
        "#/definitions/GenerateContext"
    );
    assert_eq!(
        inject["request_schema"]["definitions"]["GenerateContext"]["properties"]["system_prompt"]["default"],
        ""
    );
    assert_eq!(inject["response_schema"]["title"], "PreGenerateResponse");
    assert_eq!(inject["response_schema"]["required"], json!(["mutations"]));
    let change = &functions[1];
    assert_eq!(change["request_schema"]["title"], "OnConfigChangeRequest");
    assert_eq!(change["request_schema"]["type"], "object");
    assert_eq!(change["request_schema"].get("properties"), None);
    assert_eq!(change["response_schema"]["title"], "OnConfigChangeResponse");
    assert_eq!(change["response_schema"]["required"], json!(["ok"]));

    let set = &functions[3];
    let config = &set["request_schema"]["definitions"]["Config"];
    assert_eq!(config["additionalProperties"], false, "{set}");
    assert_eq!(config["properties"]["max_runtimes"]["minimum"], 1);
}
