//! The snapshot store on a real S3-compatible server (issue 47, item 3):
//! moto's server (from PyPI, installed by scripts/test into
//! `target/s3-venv`) on loopback, the worker reaching it through the
//! `object_store` crate. Snapshots and hibernated sessions land in the
//! bucket under the configured prefix, fork and wake from it, and an object
//! changed in the bucket is refused.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::engine::free_port;
use crate::helpers::{INVALID_REQUEST, Reaped, ServeProcess, client, post_json, venv_program};

/// moto's server, from `CODE_RUNNER_MOTO_SERVER` or `target/s3-venv`.
fn moto_server() -> PathBuf {
    if let Some(path) = std::env::var_os("CODE_RUNNER_MOTO_SERVER") {
        return PathBuf::from(path);
    }
    venv_program(
        "s3-venv",
        "moto_server",
        "moto (or set CODE_RUNNER_MOTO_SERVER)",
    )
}

/// A moto server on a free loopback port; killed on drop.
struct Moto {
    _child: Reaped,
    url: String,
}

impl Moto {
    async fn start() -> Moto {
        let port = free_port();
        let child = Command::new(moto_server())
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let moto = Moto {
            _child: Reaped(child),
            url: format!("http://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while client().get(&moto.url).send().await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "moto_server did not listen"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        moto
    }

    /// Writes `body` as `bucket`'s `key` with boto3 (moto's own venv),
    /// a signed S3 PUT as any client of the bucket would make.
    fn put(&self, bucket: &str, key: &str, body: &str) {
        let python = moto_server().with_file_name("python");
        let status = Command::new(python)
            .args([
                "-c",
                "import sys, boto3\nboto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='test', aws_secret_access_key='test').put_object(Bucket=sys.argv[2], Key=sys.argv[3], Body=sys.argv[4].encode())",
                &self.url,
                bucket,
                key,
                body,
            ])
            .status()
            .expect("run boto3");
        assert!(status.success(), "boto3 put_object failed");
    }

    /// The keys under `prefix` in `bucket` (its listing, as XML).
    async fn list(&self, bucket: &str, prefix: &str) -> String {
        client()
            .get(format!("{}/{bucket}?list-type=2&prefix={prefix}", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_and_sessions_live_in_an_s3_bucket() {
    let moto = Moto::start().await;
    let made = client()
        .put(format!("{}/sessions", moto.url))
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "{}", made.status());
    let temp = crate::helpers::tempdir();
    let config = temp.path().join("config.yaml");
    std::fs::write(
        &config,
        "python_interpreter: data\nhibernate_after_secs: 1\nsnapshot_store: s3://sessions/team-a\n",
    )
    .unwrap();
    let env = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", moto.url.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
    ];
    let server = ServeProcess::spawn_with_env(&temp.path().join("data"), Some(&config), &[], &env);
    let http = client();
    let call = |id: &'static str, payload: serde_json::Value| {
        let (http, url) = (http.clone(), server.url.clone());
        async move { post_json(&http, &url, id, &payload).await }
    };
    let kept = call(
        "code-runner::run",
        json!({"lang": "python", "keep": true, "code": "x = 41\nopen('/work/f.txt', 'w').write('in s3')"}),
    )
    .await;
    let id = kept.ok()["runtime_id"].as_str().unwrap().to_string();

    // It hibernates into the bucket, under the hash of its id.
    let name = code_runner_snapshot::session_name(&id);
    let started = Instant::now();
    while !moto
        .list("sessions", "team-a/sessions/")
        .await
        .contains(&name)
    {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no session in the bucket:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let listing = moto.list("sessions", "").await;
    assert!(
        !listing.contains(&id[3..]),
        "the id is never a key: {listing}"
    );
    let answer = call(
        "code-runner::run",
        json!({"runtime_id": id, "code": "result = [x + 1, open('/work/f.txt').read()]"}),
    )
    .await;
    assert_eq!(
        answer.ok()["result"],
        json!([42, "in s3"]),
        "{}",
        answer.body
    );
    assert_eq!(answer.ok()["restored"], true, "{}", answer.body);

    // A fork through the bucket.
    let taken = call("code-runner::snapshot", json!({"runtime_id": id})).await;
    let snapshot_id = taken.ok()["snapshot_id"].as_str().unwrap().to_string();
    assert!(
        moto.list("sessions", "team-a/snapshots/")
            .await
            .contains(&snapshot_id),
        "the snapshot is in the bucket"
    );
    let restored = call("code-runner::restore", json!({"snapshot_id": snapshot_id})).await;
    let fork = restored.ok()["runtime_id"].as_str().unwrap().to_string();
    let answer = call(
        "code-runner::run",
        json!({"runtime_id": fork, "code": "result = x"}),
    )
    .await;
    assert_eq!(answer.ok()["result"], 41, "{}", answer.body);

    // An object changed in the bucket is refused, and the worker serves on.
    let forged = "not a snapshot, forged in the bucket; ".repeat(8);
    moto.put(
        "sessions",
        &format!("team-a/snapshots/{snapshot_id}"),
        &forged,
    );
    call("code-runner::restore", json!({"snapshot_id": snapshot_id}))
        .await
        .assert_error(INVALID_REQUEST, "not a code-runner snapshot");
    let answer = call(
        "code-runner::run",
        json!({"lang": "python", "code": "result = 3"}),
    )
    .await;
    assert_eq!(answer.ok()["result"], 3, "{}", answer.body);
}
