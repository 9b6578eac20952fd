//! Runtime slots, in both languages: `max_runtimes` bounds live runtimes,
//! one-shot or kept, python and node together, and a full worker answers
//! `code-runner::capacity` after a short wait for a slot (at most 5 s,
//! within the run's timeout) rather than queueing or failing; what guest code
//! starts holds a share of them, calls for one runtime wait in a bounded
//! line, and a turn that never answers gives its slot back.

mod across_workers;
mod fanout;
mod lines;
mod nested;
mod outer_bound;

use serde_json::json;

use crate::helpers::lang::{LANGS, pick, returning, two_plus_two};
use crate::helpers::{CAPACITY, RUN, Server, client, post_json};

/// `max_runtimes` kept runtimes fill the worker, the next run is
/// `capacity`, and tearing one down frees a slot. (24, a sizing no other
/// test uses: the python engine, and its instance count, is shared per
/// process and sizing, so tests of the default 32 running beside this one
/// would take slots of it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_past_max_runtimes_is_capacity_until_one_is_torn_down() {
    let server = Server::with_config("max_runtimes: 24").await;
    for lang in LANGS {
        let mut ids = Vec::new();
        for n in 0..24 {
            let code = pick(lang, format!("n = {n}"), format!("globalThis.n = {n}"));
            ids.push(server.keep_in(lang, &code).await);
        }
        server
            .run_in(lang, two_plus_two(lang))
            .await
            .assert_error(CAPACITY, "24");
        server
            .run_in_with(lang, &returning(lang, "1"), json!({"keep": true}))
            .await
            .assert_error(CAPACITY, "");
        // A full worker still serves the runtimes it holds.
        assert_eq!(
            server.run_on(&ids[23], &returning(lang, "n")).await.ok()["result"],
            23,
            "{lang}"
        );
        server.teardown(&ids[0]).await.ok();
        server.assert_still_serves().await;
        let newcomer = server.keep_in(lang, &returning(lang, "1")).await;
        server
            .run_in(lang, &returning(lang, "1"))
            .await
            .assert_error(CAPACITY, "");
        server.teardown(&newcomer).await.ok();
        server.assert_still_serves().await;
        for id in &ids[1..] {
            server.teardown(id).await.ok();
        }
    }
}

/// Both languages' runtimes count against the one `max_runtimes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_python_share_max_runtimes() {
    let server = Server::with_config("max_runtimes: 2").await;
    let a = server.keep_in("node", "globalThis.a = 1").await;
    let b = server.keep("b = 1").await;
    server
        .run_in("node", "return 1")
        .await
        .assert_error(CAPACITY, "2");
    server.run("result = 1").await.assert_error(CAPACITY, "2");
    server.teardown(&b).await.ok();
    assert_eq!(
        server.run_in("node", "return 2 + 2").await.ok()["result"],
        4
    );
    server.teardown(&a).await.ok();
    let health = server.get("/healthz").await;
    assert_eq!(health.ok()["runtimes"]["live"], 0, "{}", health.body);
}

/// Under a stampede every call is answered: a success or `capacity`, never
/// another error, a hang or a dropped connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_concurrent_clients_get_a_result_or_capacity() {
    let server = Server::with_config("max_runtimes: 4").await;
    for lang in LANGS {
        let mut clients = tokio::task::JoinSet::new();
        for n in 0..100u32 {
            let url = server.url.clone();
            let code = pick(
                lang,
                format!("import time\ntime.sleep(0.05)\nresult = {n}"),
                format!("await new Promise((r) => setTimeout(r, 50)); return {n}"),
            );
            clients.spawn(async move {
                let client = client();
                let payload = json!({"lang": lang, "code": code});
                (n, post_json(&client, &url, RUN, &payload).await)
            });
        }
        let (mut successes, mut refusals) = (0, 0);
        while let Some(joined) = clients.join_next().await {
            let (n, answer) = joined.expect("client task");
            if answer.status.is_success() {
                assert_eq!(answer.body["result"], n, "{lang}: {}", answer.body);
                successes += 1;
            } else {
                answer.assert_error(CAPACITY, "");
                refusals += 1;
            }
        }
        assert_eq!(successes + refusals, 100, "{lang}");
        assert!(successes >= 1, "{lang}: at least one client got through");
        // Every slot came back once the stampede was over.
        let health = server.get("/healthz").await;
        assert_eq!(health.ok()["runtimes"]["live"], 0, "{}", health.body);
    }
    server.assert_still_serves().await;
}

/// A burst a little past `max_runtimes` is served as one-shots end: a run
/// that finds every slot taken waits for one (bounded by its timeout and
/// `SLOT_WAIT`), and answers `capacity` saying it waited when none is freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waits_briefly_for_a_slot() {
    let server = Server::with_config("max_runtimes: 1").await;
    let slow = "await new Promise((r) => setTimeout(r, 1500)); return 'slow'";
    let (first, second) = tokio::join!(server.run_in("node", slow), async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        server.run_in("node", "return 'waited'").await
    });
    assert_eq!(first.ok()["result"], "slow", "{}", first.body);
    assert_eq!(second.ok()["result"], "waited", "{}", second.body);
    // A kept runtime holds the only slot: a run waits, then is refused
    // saying it waited, within its own timeout.
    let id = server.keep_in("node", "globalThis.x = 1").await;
    let started = std::time::Instant::now();
    let refused = server
        .run_in_with("node", "return 1", json!({"timeout_ms": 1000}))
        .await;
    refused.assert_error(CAPACITY, "none was freed within 1000 ms");
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    server.teardown(&id).await.ok();
}
