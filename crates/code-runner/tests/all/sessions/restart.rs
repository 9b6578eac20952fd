//! A worker restart (issue 47, item 5) through the real binary: SIGTERM
//! lets a running turn finish, hibernates the kept python runtimes and
//! exits; a worker started on the same data directory serves the same ids
//! with their state (globals, a DataFrame, `/work`, the random generator's
//! stream, the monotonic clock going on, never back).

use std::time::Duration;

use serde_json::json;

use crate::helpers::{ServeProcess, client, post_json};

const SETUP: &str = "import pandas as pd, random, time\n\
random.seed(7)\n\
drawn = [random.random(), random.random()]\n\
df = pd.DataFrame({'a': range(100000)})\n\
open('/work/kept.txt', 'w').write('on disk')\n\
t0 = time.monotonic()\n\
result = 'ready'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_a_drain_and_a_restart() {
    let temp = crate::helpers::tempdir();
    let data = temp.path().join("data");
    let config = temp.path().join("config.yaml");
    std::fs::write(&config, "python_interpreter: data\n").unwrap();
    let mut first = ServeProcess::spawn(&data, Some(&config));
    let http = client();
    let kept = post_json(
        &http,
        &first.url,
        "code-runner::run",
        &json!({"lang": "python", "keep": true, "code": SETUP, "timeout_ms": 60000}),
    )
    .await;
    let id = kept.ok()["runtime_id"].as_str().unwrap().to_string();
    // What the third draw of seed 7 is, from a one-shot.
    let third = post_json(
        &http,
        &first.url,
        "code-runner::run",
        &json!({"lang": "python", "code": "import random\nrandom.seed(7)\nresult = [random.random() for _ in range(3)][2]"}),
    )
    .await;
    let third = third.ok()["result"].clone();

    // A turn in flight when SIGTERM comes finishes, and its answer arrives.
    let running = {
        let (http, url, id) = (http.clone(), first.url.clone(), id.clone());
        tokio::spawn(async move {
            post_json(&http, &url, "code-runner::run", &json!({"runtime_id": id, "code": "import time\ntime.sleep(3)\nlate = 'finished'\nresult = late", "timeout_ms": 30000})).await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = tokio::task::spawn_blocking(move || {
        let status = first.terminate(Duration::from_secs(120));
        (status, first.log())
    })
    .await
    .unwrap();
    let answer = running.await.unwrap();
    assert_eq!(answer.ok()["result"], "finished", "{}", answer.body);
    assert!(status.0.success(), "exit {:?}:\n{}", status.0, status.1);
    assert!(status.1.contains("hibernated for shutdown"), "{}", status.1);
    assert!(!status.1.contains(&id), "the id is never logged in full");

    let second = ServeProcess::spawn(&data, Some(&config));
    let answer = post_json(
        &http,
        &second.url,
        "code-runner::run",
        &json!({"runtime_id": id, "code": "import random, time\nresult = [late, drawn[1] > 0, int(df.a.sum()), open('/work/kept.txt').read(), random.random(), time.monotonic() >= t0]"}),
    )
    .await;
    let body = answer.ok();
    assert_eq!(
        body["result"],
        json!(["finished", true, 4_999_950_000u64, "on disk", third, true]),
        "{body}"
    );
    assert_eq!(body["restored"], true, "{body}");
    // A new run on the restarted worker is as ever.
    let answer = post_json(
        &http,
        &second.url,
        "code-runner::run",
        &json!({"lang": "python", "code": "result = 2 + 2"}),
    )
    .await;
    assert_eq!(answer.ok()["result"], 4, "{}", answer.body);
}
