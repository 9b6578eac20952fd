//! A guest cannot hoard capacity through nested `keep: true` runs (issue 9,
//! item 8): runtimes its `iii.trigger` calls keep belong to the runtime
//! that started them, count against an eighth of `max_runtimes` for the
//! whole tree, and are torn down with it. Before the fix, one run held 30
//! of 32 slots for the idle TTL with the ids thrown away.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{CAPACITY, EXPIRED, Server, wait_until};

/// Slots in use on `server`.
fn live(server: &Server) -> impl Fn() -> u64 + use<> {
    let worker = server.worker().clone();
    move || {
        worker.health()["runtimes"]["live"]
            .as_u64()
            .unwrap_or(u64::MAX)
    }
}

const HOARD: &str = r#"
kept, refused = [], []
for _ in range(10):
    try:
        answer = iii.trigger({"function_id": "code-runner::run",
                              "payload": {"lang": "python", "keep": True, "code": "pass"}})
        kept.append(answer["runtime_id"])
    except IIIError as e:
        refused.append([e.code, e.message])
result = {"kept": kept, "refused": refused}
"#;

/// A one-shot run keeps at most its share (2 of 16 here) through nested
/// calls; the rest are `capacity` naming the share; when the run ends its
/// nested runtimes are gone and every slot is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_keeps_are_bounded_and_end_with_the_run() {
    let server = Server::with_config("max_runtimes: 16\nwarm_pool: 0\n").await;
    let answer = server.run_with(HOARD, json!({"timeout_ms": 30_000})).await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    let kept = body["result"]["kept"].as_array().unwrap();
    let refused = body["result"]["refused"].as_array().unwrap();
    assert_eq!(kept.len(), 2, "{body}");
    assert_eq!(refused.len(), 8, "{body}");
    assert_eq!(refused[0][0], CAPACITY);
    assert!(
        refused[0][1].as_str().unwrap().contains("at most 2"),
        "{body}"
    );
    let live = live(&server);
    wait_until(
        "the nested runtimes are torn down",
        Duration::from_secs(60),
        || live() == 0,
    )
    .await;
    for id in kept {
        server
            .run_on(id.as_str().unwrap(), "pass")
            .await
            .assert_error(EXPIRED, "torn down");
    }
    // A second run gets a share of its own.
    let again = server.run_with(HOARD, json!({"timeout_ms": 30_000})).await;
    assert_eq!(again.ok()["result"]["kept"].as_array().unwrap().len(), 2);
}

/// Grandchildren count against the same share: a nested kept runtime that
/// keeps more in turn cannot exceed the tree's share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_share_covers_the_whole_tree() {
    let server = Server::with_config("max_runtimes: 16\nwarm_pool: 0\n").await;
    let code = r#"
child = iii.trigger({"function_id": "code-runner::run",
                     "payload": {"lang": "python", "keep": True, "code": "pass"}})["runtime_id"]
inner = iii.trigger({"function_id": "code-runner::run", "payload": {"runtime_id": child, "code": '''
kept, refused = 0, 0
for _ in range(5):
    try:
        iii.trigger({"function_id": "code-runner::run", "payload": {"lang": "python", "keep": True, "code": "pass"}})
        kept += 1
    except IIIError as e:
        refused += 1
result = [kept, refused]
'''}})
result = inner["result"]
"#;
    let answer = server.run_with(code, json!({"timeout_ms": 30_000})).await;
    assert_eq!(answer.ok()["result"], json!([1, 4]), "{}", answer.body);
    let live = live(&server);
    wait_until(
        "the whole tree is torn down",
        Duration::from_secs(60),
        || live() == 0,
    )
    .await;
}

/// Nested runtimes of a kept runtime live as long as it: usable from the
/// host by id meanwhile, expired once their starter is torn down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_keeps_of_a_kept_runtime_end_with_it() {
    let server = Server::with_config("warm_pool: 0\n").await;
    let parent = server
        .keep("child = iii.trigger({'function_id': 'code-runner::run', 'payload': {'lang': 'python', 'keep': True, 'code': 'x = 7'}})['runtime_id']")
        .await;
    let child = server.run_on(&parent, "result = child").await;
    let child = child.ok()["result"].as_str().unwrap().to_string();
    assert_eq!(server.run_on(&child, "result = x").await.ok()["result"], 7);
    let torn = server.teardown(&parent).await;
    assert_eq!(torn.ok()["torn_down"], true);
    server
        .run_on(&child, "result = x")
        .await
        .assert_error(EXPIRED, "torn down");
    let live = live(&server);
    wait_until("no runtime is left", Duration::from_secs(60), || {
        live() == 0
    })
    .await;
}
