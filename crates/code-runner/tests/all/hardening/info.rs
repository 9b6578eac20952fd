//! `engine::functions::info` cannot take the host down (issue 9, item 1):
//! a long id list is refused while it is parsed, repeated ids are
//! described once, from HTTP and from guest code (either language) alike. These run the real
//! binary: before the fix, 150 000 ids cloned the schemas 150 000 times and
//! the process aborted.

use serde_json::json;

use crate::helpers::{FUNCTIONS_INFO, INVALID_REQUEST, Server};

/// 150 000 ids over HTTP are `invalid_request` naming the bound; the
/// worker lives on and serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_id_list_is_refused_by_its_bound() {
    let mut server = Server::process("warm_pool: 0\n").await;
    let ids = vec!["code-runner::run"; 150_000];
    let answer = server
        .call(FUNCTIONS_INFO, json!({ "function_ids": ids }))
        .await;
    answer.assert_error(INVALID_REQUEST, "more than 1000 function ids");
    server.assert_alive();
    server.assert_still_serves().await;
}

/// A list within the bound answers one entry per distinct id, in the
/// order first asked: 1000 copies of one id cost one description.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_ids_are_described_once() {
    let server = Server::start().await;
    let mut ids = vec!["code-runner::run"; 999];
    ids.push("nope::x");
    let answer = server
        .call(FUNCTIONS_INFO, json!({ "function_ids": ids }))
        .await;
    let functions = answer.ok()["functions"].as_array().unwrap().clone();
    assert_eq!(functions.len(), 2);
    assert_eq!(functions[0]["function_id"], "code-runner::run");
    assert!(functions[0]["request_schema"].is_object());
    assert_eq!(functions[1]["function_id"], "nope::x");
    assert!(functions[1]["error"].is_string());
}

/// Guest code asking through `iii.trigger` meets the same bound and the
/// same deduplication, in either language; the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_meets_the_same_bound() {
    let mut server = Server::process("warm_pool: 0\n").await;
    let python = r#"
out = {}
try:
    iii.trigger({"function_id": "engine::functions::info", "payload": {"function_ids": ["code-runner::run"] * 150000}})
except IIIError as e:
    out["huge"] = [e.code, e.message]
answer = iii.trigger({"function_id": "engine::functions::info", "payload": {"function_ids": ["code-runner::run"] * 1000}})
out["repeated"] = len(answer["functions"])
result = out
"#;
    let node = r#"
const out = {};
const ask = (n) => iii.trigger({ function_id: "engine::functions::info",
  payload: { function_ids: new Array(n).fill("code-runner::run") } });
try { await ask(150000); } catch (e) { out.huge = [e.code, e.message]; }
out.repeated = (await ask(1000)).functions.length;
return out;
"#;
    for (lang, code) in [("python", python), ("node", node)] {
        let answer = server
            .call(
                "code-runner::run",
                json!({"lang": lang, "code": code, "timeout_ms": 20_000}),
            )
            .await;
        let body = answer.ok();
        assert_eq!(body["exit_code"], 0, "{lang}: {body}");
        assert_eq!(body["result"]["huge"][0], INVALID_REQUEST, "{lang}: {body}");
        assert!(
            body["result"]["huge"][1]
                .as_str()
                .unwrap()
                .contains("more than 1000"),
            "{lang}: {body}"
        );
        assert_eq!(body["result"]["repeated"], 1, "{lang}");
    }
    server.assert_alive();
}
