//! `lang: "node"` through the worker: the quickstart, kept runtimes, the
//! shared capacity, the configuration's node limits, and HTTP.

use serde_json::{Value, json};

use crate::helpers::{CAPACITY, INVALID_REQUEST, RESOURCE_EXHAUSTED, RUN, Server, TIMEOUT};

async fn node(server: &Server, code: &str, extra: Value) -> crate::helpers::Answer {
    let mut payload = json!({"lang": "node", "code": code});
    crate::helpers::merge(&mut payload, extra);
    server.call(RUN, payload).await
}

async fn keep_node(server: &Server, code: &str) -> String {
    let answer = node(server, code, json!({"keep": true})).await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    body["runtime_id"]
        .as_str()
        .expect("a runtime_id")
        .to_string()
}

/// A kept node runtime keeps its globals and its files; teardown removes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_node_runtime_keeps_globals_and_files_until_teardown() {
    let server = Server::start().await;
    let id = keep_node(
        &server,
        "globalThis.n = 41; await iii.files.write('kept.txt', 'still here')",
    )
    .await;
    let answer = server
        .run_on(
            &id,
            "return [n + 1, await iii.files.readText('kept.txt'), iii.namespace]",
        )
        .await;
    assert_eq!(answer.ok()["result"][0], 42, "{}", answer.body);
    assert_eq!(answer.ok()["result"][1], "still here");
    let own = answer.ok()["result"][2].as_str().unwrap_or("");
    assert!(own.starts_with("rt-"), "its own namespace: {}", answer.body);
    assert_eq!(answer.ok()["runtime_id"], id);
    assert_eq!(server.dirs_holding("kept.txt").len(), 1);
    let wrong = server
        .call(
            RUN,
            json!({"runtime_id": id, "lang": "python", "code": "result = 1"}),
        )
        .await;
    wrong.assert_error(INVALID_REQUEST, "contradicts");
    server.teardown(&id).await.ok();
    assert!(server.dirs_holding("kept.txt").is_empty());
    server
        .run_on(&id, "return 1")
        .await
        .assert_error(crate::helpers::EXPIRED, "");
}

/// A kept node runtime survives its own timeout with its globals intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_node_runtime_serves_after_a_timeout() {
    let server = Server::start().await;
    let id = keep_node(&server, "globalThis.kept = 'yes'").await;
    let answer = server
        .call(
            RUN,
            json!({"runtime_id": id, "code": "while (true) {}", "timeout_ms": 200}),
        )
        .await;
    answer.assert_error(TIMEOUT, "200 ms");
    assert_eq!(
        server.run_on(&id, "return kept").await.ok()["result"],
        "yes"
    );
    server.teardown(&id).await.ok();
}

/// Node runtimes count against the one `max_runtimes`, with python's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_python_share_max_runtimes() {
    let server = Server::with_config("max_runtimes: 2").await;
    let a = keep_node(&server, "globalThis.a = 1").await;
    let b = server.keep("b = 1").await;
    node(&server, "return 1", json!({}))
        .await
        .assert_error(CAPACITY, "2");
    server.run("result = 1").await.assert_error(CAPACITY, "2");
    server.teardown(&b).await.ok();
    assert_eq!(
        node(&server, "return 2 + 2", json!({})).await.ok()["result"],
        4
    );
    server.teardown(&a).await.ok();
    let health = server.get("/healthz").await;
    assert_eq!(health.ok()["runtimes"]["live"], 0, "{}", health.body);
}

/// The configuration's node limits reach the engine: a smaller heap is the
/// limit that bites, `scratch_mb: 0` turns `iii.files` off, and node scratch
/// directories live under `scratch_root`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_node_limits_reach_the_engine() {
    let root = crate::helpers::tempdir();
    let yaml = format!(
        "heap_mb: 48\nscratch_mb: 0\nwarm_pool: 0\nscratch_root: {}\n",
        root.path().display()
    );
    let server = Server::with_config(&yaml).await;
    node(
        &server,
        "const a = []; for (;;) a.push(new Array(1e6).fill(1))",
        json!({}),
    )
    .await
    .assert_error(RESOURCE_EXHAUSTED, "heap limit 48 MiB exceeded");
    let answer = node(
        &server,
        "try { await iii.files.write('a', 'x') } catch (e) { return e.message }",
        json!({}),
    )
    .await;
    assert!(
        answer.ok()["result"]
            .as_str()
            .unwrap()
            .contains("scratch_mb: 0"),
        "{}",
        answer.body
    );

    let yaml = format!("scratch_mb: 1\nscratch_root: {}\n", root.path().display());
    let server = Server::with_config(&yaml).await;
    let id = keep_node(&server, "await iii.files.write('where.txt', 'here')").await;
    let under_root: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().join("where.txt").exists())
        .collect();
    assert_eq!(
        under_root.len(),
        1,
        "the scratch directory is under scratch_root"
    );
    server.teardown(&id).await.ok();
    assert!(!under_root[0].path().exists(), "teardown removes it");
}
