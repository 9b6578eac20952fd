//! Hibernation (issue 47, item 4) through real HTTP and real wasmtime: an
//! idle kept python runtime is written to the store and its slot freed, its
//! id keeps working (the next answer says `restored: true`), so more
//! sessions than `max_runtimes` stay reachable; a stored session changed or
//! filed under another id is refused, each saying why, and the worker
//! serves on; teardown ends a hibernated session (node: `node.rs`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::helpers::{EXPIRED, INVALID_REQUEST, Server, wait_until};

/// Where the worker keeps `id`'s hibernated session.
pub(super) fn stored(data_dir: &std::path::Path, id: &str) -> PathBuf {
    data_dir
        .join("sessions")
        .join(code_runner_snapshot::session_name(id))
}

/// Waits until `id` is hibernated (its session stored).
pub(super) async fn asleep(data_dir: &std::path::Path, id: &str) {
    let path = stored(data_dir, id);
    wait_until("the runtime hibernates", Duration::from_secs(90), || {
        path.exists()
    })
    .await;
}

fn setup(n: usize) -> String {
    format!(
        "import pandas as pd\nn = {n}\ndf = pd.DataFrame({{'a': range(10)}})\nopen('/work/n.txt', 'w').write(str(n))\nresult = n"
    )
}

const STATE: &str = "result = [n, int(df.a.sum()), open('/work/n.txt').read()]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_hibernate_and_wake_by_id_past_max_runtimes() {
    let server =
        Server::with_config("python_interpreter: data\nhibernate_after_secs: 1\nmax_runtimes: 2\n")
            .await;
    // Three sessions on two slots: each sleeps once idle, freeing its slot.
    let mut ids = Vec::new();
    for n in 0..3 {
        let id = server.keep(&setup(n)).await;
        asleep(&server.data_dir, &id).await;
        ids.push(id);
    }
    let health = server.get("/healthz").await;
    assert_eq!(health.ok()["runtimes"]["kept"], 0, "{}", health.body);

    // Each wakes by its id with its state; two at a time, as the slots allow.
    for pair in [&ids[..2], &ids[2..]] {
        for (n, id) in pair.iter().enumerate() {
            let n = if pair.len() == 1 { 2 } else { n };
            let answer = server.run_on(id, STATE).await;
            let body = answer.ok();
            assert_eq!(body["result"], json!([n, 45, n.to_string()]), "{body}");
            assert_eq!(body["restored"], true, "{body}");
            assert!(
                !stored(&server.data_dir, id).exists(),
                "a woken session lives in one place"
            );
            // Awake now: the next answer says nothing of it.
            let again = server.run_on(id, "n += 10\nresult = n").await;
            assert!(again.ok().get("restored").is_none(), "{}", again.body);
        }
        for id in pair {
            asleep(&server.data_dir, id).await;
        }
    }
    let answer = server.run_on(&ids[0], "result = n").await;
    assert_eq!(answer.ok()["result"], 10, "{}", answer.body);
    asleep(&server.data_dir, &ids[0]).await;

    // A stored session changed in the store is refused; the worker serves on.
    let first = stored(&server.data_dir, &ids[0]);
    let whole = std::fs::read(&first).unwrap();
    let mut changed = whole.clone();
    let at = changed.len() / 2;
    changed[at] ^= 1;
    std::fs::write(&first, &changed).unwrap();
    server
        .run_on(&ids[0], STATE)
        .await
        .assert_error(INVALID_REQUEST, "MAC does not match");
    // One session's bytes filed under another's id are refused too.
    std::fs::copy(stored(&server.data_dir, &ids[1]), &first).unwrap();
    server
        .run_on(&ids[0], STATE)
        .await
        .assert_error(INVALID_REQUEST, "belongs to another runtime");
    std::fs::write(&first, &whole).unwrap();
    let answer = server.run_on(&ids[0], "result = n").await;
    assert_eq!(answer.ok()["result"], 10, "{}", answer.body);
    let answer = server.run("result = 6 * 7").await;
    assert_eq!(answer.ok()["result"], 42, "{}", answer.body);

    // Teardown ends a hibernated session for good.
    let answer = server
        .call("code-runner::teardown", json!({"runtime_id": ids[2]}))
        .await;
    assert_eq!(answer.ok()["torn_down"], true, "{}", answer.body);
    assert!(!stored(&server.data_dir, &ids[2]).exists());
    server
        .run_on(&ids[2], STATE)
        .await
        .assert_error(EXPIRED, "");
}
