//! `describe` as an MCP tool, through a real `/mcp` session.

use serde_json::json;

use super::with_greet;
use crate::mcp_tools::client::Session;

/// The tool list has `describe` beside `run`; calling it answers the
/// declarations, with `my-app::greet`'s name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_is_an_mcp_tool() {
    let server = with_greet().await;
    let mut session = Session::open(&server.url).await;
    let tools = session.tools().await;
    let describe = tools
        .iter()
        .find(|t| t["name"] == "describe")
        .unwrap_or_else(|| panic!("no describe tool: {tools:?}"));
    assert!(
        describe["description"]
            .as_str()
            .is_some_and(|d| d.contains("iii.fn.my_app.greet")),
        "{describe}"
    );
    let answer = session
        .call(
            "describe",
            json!({"lang": "typescript", "query": "greets someone"}),
        )
        .await;
    let content = &answer["structuredContent"];
    assert_eq!(
        content["functions"],
        json!([{"function_id": "my-app::greet", "name": "my_app.greet"}]),
        "{answer}"
    );
    assert!(
        content["declarations"]
            .as_str()
            .is_some_and(|d| d.contains("function greet(")),
        "{answer}"
    );
    session.close().await;
}
