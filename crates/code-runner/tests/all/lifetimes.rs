//! Runs that lose their caller, and the directories runtimes own (issue 9,
//! items 7 and 11): a dropped request must not leak its runtime's directory
//! or stall the server while directories are removed, and every runtime
//! directory, python's `/work` or node's `iii.files`, is private to the
//! server's user.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::helpers::{RUN, Server, client, runtime_dirs, wait_until};

/// A guest creating files under fresh names as fast as it can, after
/// marking `/work/started`: whatever removes its directory while it runs
/// races its writes.
const FILE_CHURN: &str = r#"
import os, time
open('/work/started', 'w').close()
n = 0
end = time.time() + 3
while time.time() < end:
    open(f'/work/f{n}', 'w').close()
    if n >= 2000:
        try:
            os.remove(f'/work/f{n - 2000}')
        except OSError:
            pass
    n += 1
"#;

/// The same in node, within `iii.files`' 64 files.
const NODE_FILE_CHURN: &str = r#"
await iii.files.write('started', '');
const end = Date.now() + 3000;
let n = 0;
while (Date.now() < end) {
  await iii.files.write(`f${n}`, '');
  if (n >= 50) {
    try { await iii.files.remove(`f${n - 50}`); } catch (e) {}
  }
  n++;
}
"#;

/// A client that disconnects mid-run used to drop the run half-way: its
/// directory was removed while the guest kept writing into it, and the
/// leftovers stayed until restart. The run now finishes on its own (within
/// its timeout), closes its runtime, and only then removes the directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_mid_run_leaves_no_directory_behind() {
    let server = Server::with_config("warm_pool: 0").await;
    for (lang, churn) in [("python", FILE_CHURN), ("node", NODE_FILE_CHURN)] {
        let body = serde_json::to_vec(&json!({"lang": lang, "code": churn, "timeout_ms": 20_000}))
            .unwrap();
        for round in 0..3 {
            let mut stream = TcpStream::connect(server.addr()).await.unwrap();
            let head = format!(
                "POST /v1/call/{RUN} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                server.addr(),
                body.len()
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(&body).await.unwrap();
            wait_until("the run to start writing", Duration::from_secs(60), || {
                !server.dirs_holding("started").is_empty()
            })
            .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            drop(stream);
            wait_until(
                "the dropped run's directory to go",
                Duration::from_secs(60),
                || runtime_dirs(&server.data_dir).is_empty(),
            )
            .await;
            // The slot is freed just after the directory goes.
            let started = std::time::Instant::now();
            loop {
                let health = server.get("/healthz").await;
                if health.ok()["runtimes"]["live"] == 0 {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{lang} round {round}: the dropped run still holds its slot: {}",
                    health.body
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    server.assert_still_serves().await;
}

/// Removing directories full of files runs on the blocking pool, not on the
/// async workers: `/healthz` keeps answering while many are removed at once.
/// (A liveness check with a generous budget, not a timing assertion.
/// Python's: a node runtime's scratch holds at most 64 files.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_many_directories_are_removed() {
    const RUNS: usize = 6;
    let server = Server::with_config("warm_pool: 0").await;
    let fill = "for n in range(3000):\n    open(f'/work/f{n}', 'w').close()\nresult = n";
    let runs: Vec<_> = (0..RUNS)
        .map(|_| {
            let url = server.url.clone();
            let payload = json!({"lang": "python", "code": fill, "timeout_ms": 30_000});
            tokio::spawn(
                async move { crate::helpers::post_json(&client(), &url, RUN, &payload).await },
            )
        })
        .collect();
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut answered = 0;
    while runs.iter().any(|run| !run.is_finished()) {
        let health = probe
            .get(format!("{}/healthz", server.url))
            .send()
            .await
            .expect("/healthz answers while directories are removed");
        assert_eq!(health.status(), 200);
        answered += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for run in runs {
        assert_eq!(run.await.unwrap().ok()["result"], 2999);
    }
    assert!(answered > 0);
    assert!(runtime_dirs(&server.data_dir).is_empty());
}

/// Runtime directories were created 0755: any local user could read what a
/// guest wrote. They are 0700 now, as is the directory holding them, for
/// every runtime of either language (pre-booted ones included, where an
/// engine keeps a pool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_directories_are_private_to_the_server_user() {
    let server = Server::start().await;
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&server.data_dir.join("runtimes")), 0o700);
    server.keep("open('/work/default', 'w').close()").await;
    server
        .keep_with("open('/work/small', 'w').close()", json!({"memory_mb": 64}))
        .await;
    server
        .keep_in("node", "await iii.files.write('node', '')")
        .await;
    assert_eq!(server.dirs_holding("default").len(), 1);
    assert_eq!(server.dirs_holding("small").len(), 1);
    assert_eq!(server.dirs_holding("node").len(), 1);
    let dirs = runtime_dirs(&server.data_dir);
    assert!(dirs.len() >= 3, "{dirs:?}");
    for dir in dirs {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
}
