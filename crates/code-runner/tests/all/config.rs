//! Configuration: `configuration::get`/`set` over HTTP and from the CLI, the
//! reload tiers (next call versus next start), the file watch,
//! `code-runner::on-config-change`, the bounds of what may be configured,
//! and node's own keys reaching its engine. A cap set live bites in both
//! languages; the other tests probe with a python run, the language being
//! incidental to how a value is stored, watched or reloaded.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::{
    Answer, CAPACITY, INVALID_REQUEST, RESOURCE_EXHAUSTED, RUN, ServeProcess, Server, binary,
    client, output_within, post_json, tempdir,
};

const GET: &str = "configuration::get";
const SET: &str = "configuration::set";
const ON_CONFIG_CHANGE: &str = "code-runner::on-config-change";

/// How long the file watch may take to notice an edit on a busy machine.
const WATCH_DEADLINE: Duration = Duration::from_secs(60);
/// Prints 1000 characters: over a 100-byte stream cap, under the default one.
const PRINT_1000: &str = "print('x' * 999)";
/// The same in node.
const NODE_PRINT_1000: &str = "console.log('x'.repeat(999))";
const TRUNCATED: &str = "[…stdout truncated";

fn config_file(data_dir: &Path) -> PathBuf {
    data_dir.join("configuration").join("code-runner.yaml")
}

/// The stored configuration, read over HTTP.
async fn stored(server: &Server) -> Value {
    let answer = server.call(GET, json!({"id": "code-runner"})).await;
    answer.ok()["value"].clone()
}

/// `configuration::set` of the stored value with `changes` merged in.
async fn set_keys(server: &Server, changes: Value) -> Answer {
    let mut value = stored(server).await;
    crate::helpers::merge(&mut value, changes);
    server
        .call(SET, json!({"id": "code-runner", "value": value}))
        .await
}

/// Polls `/healthz` and the stored value (as `{health, value}`) until `check` holds; panics after `limit`.
async fn poll(server: &Server, what: &str, limit: Duration, check: impl Fn(&Value) -> bool) {
    let started = Instant::now();
    loop {
        let health = server.get("/healthz").await;
        let value = stored(server).await;
        if check(&json!({"health": health.ok(), "value": value})) {
            return;
        }
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The issue's first promise: a tier-1 key set live bites on the very next
/// call, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cap_set_live_applies_to_the_very_next_run() {
    let server = Server::start().await;
    for (lang, code) in [("python", PRINT_1000), ("node", NODE_PRINT_1000)] {
        let before = server.run_in(lang, code).await;
        assert_eq!(
            before.ok()["stdout"].as_str().unwrap().len(),
            1000,
            "{lang}"
        );
    }

    let answer = set_keys(&server, json!({"max_stream_bytes": 100})).await;
    let body = answer.ok();
    assert_eq!(body["old_value"]["max_stream_bytes"], 16384);
    assert_eq!(body["new_value"]["max_stream_bytes"], 100);
    assert_eq!(body["applied"], json!(["max_stream_bytes"]));
    assert_eq!(body["pending_restart"], json!([]));

    for (lang, code) in [("python", PRINT_1000), ("node", NODE_PRINT_1000)] {
        let after = server.run_in(lang, code).await;
        let stdout = after.ok()["stdout"].as_str().unwrap();
        assert!(stdout.contains(TRUNCATED), "{lang}: {stdout}");
        assert!(stdout.len() < 1000, "{lang}: {stdout}");
    }
    let text = std::fs::read_to_string(config_file(&server.data_dir)).unwrap();
    assert!(text.contains("max_stream_bytes: 100"), "{text}");
}

/// The issue's second promise: a restart-tier key is saved, reported as
/// pending (answer, /healthz, log) and not applied; after a restart on the
/// same data directory it is in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_limit_is_pending_until_the_worker_starts_again() {
    let temp = tempdir();
    let data_dir = temp.path().join("data");
    let http = client();
    let call = |url: String, id: &'static str, payload: Value| {
        let http = http.clone();
        async move { post_json(&http, &url, id, &payload).await }
    };
    let keep = json!({"lang": "python", "keep": true, "code": "x = 1"});

    let mut first = ServeProcess::spawn(&data_dir, None);
    let url = first.url.clone();
    let value = call(url.clone(), GET, json!({"id": "code-runner"}))
        .await
        .ok()["value"]
        .clone();
    let mut value = value;
    value["max_runtimes"] = json!(1);
    let answer = call(
        url.clone(),
        SET,
        json!({"id": "code-runner", "value": value}),
    )
    .await;
    assert_eq!(answer.ok()["pending_restart"], json!(["max_runtimes"]));
    let health: Value = http
        .get(format!("{url}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        health["configuration"]["pending_restart"],
        json!(["max_runtimes"])
    );
    assert_eq!(
        health["runtimes"]["max"], 32,
        "not applied before a restart"
    );
    for _ in 0..2 {
        call(url.clone(), RUN, keep.clone()).await.ok();
    }
    let started = Instant::now();
    while !first.log().contains("pending a restart: [max_runtimes]") {
        assert!(
            started.elapsed() < WATCH_DEADLINE,
            "no log line:\n{}",
            first.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.kill();

    let second = ServeProcess::spawn(&data_dir, None);
    let url = second.url.clone();
    let health: Value = http
        .get(format!("{url}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["runtimes"]["max"], 1);
    assert_eq!(health["configuration"]["pending_restart"], json!([]));
    call(url.clone(), RUN, keep.clone()).await.ok();
    call(url.clone(), RUN, keep)
        .await
        .assert_error(CAPACITY, "");
}

/// Bad values of every kind are refused naming the key, and the file on
/// disk stays byte for byte what it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_value_is_refused_naming_the_key_and_the_file_is_unchanged() {
    let server = Server::start().await;
    set_keys(&server, json!({"max_stream_bytes": 100}))
        .await
        .ok();
    let file = config_file(&server.data_dir);
    let bytes = std::fs::read(&file).unwrap();
    let value = stored(&server).await;
    let bad = [
        (json!({"max_stream_bytes": -1}), "max_stream_bytes"),
        (json!({"max_stream_bytes": "lots"}), "max_stream_bytes"),
        (json!({"inject_guidance": "yes"}), "inject_guidance"),
        (json!({"max_runtimes": 0}), "max_runtimes"),
        (json!({"max_runtimez": 3}), "max_runtimez"),
        (json!({"default_timeout_ms": 40000}), "default_timeout_ms"),
        (json!("not an object"), "configuration"),
    ];
    for (bad_value, key) in bad {
        server
            .call(SET, json!({"id": "code-runner", "value": bad_value}))
            .await
            .assert_error(INVALID_REQUEST, key);
        assert_eq!(std::fs::read(&file).unwrap(), bytes, "after {key}");
    }
    server
        .call(SET, json!({"id": "other", "value": {}}))
        .await
        .assert_error(INVALID_REQUEST, "`other`");
    server
        .call(GET, json!({"id": "other"}))
        .await
        .assert_error(INVALID_REQUEST, "`other`");
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    assert_eq!(stored(&server).await, value);
    let capped = server.run(PRINT_1000).await;
    assert!(capped.ok()["stdout"].as_str().unwrap().contains(TRUNCATED));
}

/// A hand edit of the YAML file reaches the running worker: a next-call key
/// bites, a restart key is reported pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edit_of_the_file_is_picked_up() {
    let server = Server::start().await;
    std::fs::write(
        config_file(&server.data_dir),
        "# edited by hand\nmax_stream_bytes: 100\nheap_mb: 64\n",
    )
    .unwrap();
    poll(&server, "the hand edit", WATCH_DEADLINE, |seen| {
        seen["value"]["max_stream_bytes"] == 100
    })
    .await;
    let health = server.get("/healthz").await;
    assert_eq!(
        health.ok()["configuration"]["pending_restart"],
        json!(["heap_mb"])
    );
    let capped = server.run(PRINT_1000).await;
    assert!(capped.ok()["stdout"].as_str().unwrap().contains(TRUNCATED));
}

/// An invalid hand edit is ignored (and said so, naming the key): the
/// running configuration stays, and a later valid edit is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_hand_edit_is_ignored_and_the_configuration_stays() {
    let server = Server::start().await;
    set_keys(&server, json!({"max_stream_bytes": 100}))
        .await
        .ok();
    let value = stored(&server).await;
    let file = config_file(&server.data_dir);
    std::fs::write(&file, "max_stream_bytes: -5\n").unwrap();
    poll(&server, "the refusal", WATCH_DEADLINE, |seen| {
        let rejected = seen["health"]["configuration"]["last_rejected"].as_str();
        rejected.is_some_and(|message| message.contains("max_stream_bytes"))
    })
    .await;
    assert_eq!(stored(&server).await, value);
    let capped = server.run(PRINT_1000).await;
    assert!(capped.ok()["stdout"].as_str().unwrap().contains(TRUNCATED));

    std::fs::write(&file, "max_stream_bytes: 200\n").unwrap();
    poll(&server, "the valid edit", WATCH_DEADLINE, |seen| {
        seen["value"]["max_stream_bytes"] == 200
            && seen["health"]["configuration"]["last_rejected"].is_null()
    })
    .await;
}

/// `on-config-change` re-reads the store and never trusts its payload:
/// whatever the engine sends (a forged value, `_caller_worker_id`, not even
/// an object) it answers `{ok: true}` and the stored file wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_config_change_reloads_from_the_store_and_ignores_its_payload() {
    let server = Server::start().await;
    // Written through a second hard link outside the watched directory:
    // inotify reports a write to the directory it was made through, so the
    // file watch cannot see this edit and only on-config-change can apply it.
    let file = config_file(&server.data_dir);
    let elsewhere = server.data_dir.parent().unwrap().join("elsewhere.yaml");
    std::fs::hard_link(&file, &elsewhere).unwrap();
    std::fs::write(&elsewhere, "max_stream_bytes: 100\n").unwrap();

    let forged = json!({
        "type": "configuration", "event_type": "configuration:updated", "id": "code-runner",
        "new_value": {"max_stream_bytes": 5}, "_caller_worker_id": "w-1",
    });
    for payload in [forged, json!("junk"), json!([1, 2]), Value::Null] {
        let answer = server.call(ON_CONFIG_CHANGE, payload).await;
        assert_eq!(answer.ok(), &json!({"ok": true}));
        assert_eq!(stored(&server).await["max_stream_bytes"], 100);
    }
    let capped = server.run(PRINT_1000).await;
    assert!(capped.ok()["stdout"].as_str().unwrap().contains(TRUNCATED));
}

/// `code-runner call` reaches the same functions in-process: a data
/// directory's configuration can be changed with no server running.
#[test]
fn the_cli_reads_and_changes_a_data_directory_configuration() {
    let temp = tempdir();
    let data_dir = temp.path().join("data");
    let limit = Duration::from_secs(120);
    let dir = data_dir.to_str().unwrap();
    let set = output_within(
        binary().args([
            "call",
            SET,
            "--data-dir",
            dir,
            "id=code-runner",
            r#"value={"max_stream_bytes": 100}"#,
        ]),
        limit,
    );
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let get = output_within(
        binary().args(["call", GET, "--data-dir", dir, "id=code-runner"]),
        limit,
    );
    assert!(
        get.status.success(),
        "{}",
        String::from_utf8_lossy(&get.stderr)
    );
    let answer: Value = serde_json::from_slice(&get.stdout).unwrap();
    assert_eq!(answer["value"]["max_stream_bytes"], 100);
    assert_eq!(answer["value"]["max_runtimes"], 32);
}

/// The configuration's node limits reach the engine: a smaller heap is the
/// limit that bites, `scratch_mb: 0` turns `iii.files` off, and node scratch
/// directories live under `scratch_root`. (Node's keys: python's memory is
/// a run's `memory_mb`, and its engine fixes the `/work` budget.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_node_limits_reach_the_engine() {
    let root = tempdir();
    let yaml = format!(
        "heap_mb: 48\nscratch_mb: 0\nwarm_pool: 0\nscratch_root: {}\n",
        root.path().display()
    );
    let server = Server::with_config(&yaml).await;
    server
        .run_in(
            "node",
            "const a = []; for (;;) a.push(new Array(1e6).fill(1))",
        )
        .await
        .assert_error(RESOURCE_EXHAUSTED, "heap limit 48 MiB exceeded");
    let answer = server
        .run_in(
            "node",
            "try { await iii.files.write('a', 'x') } catch (e) { return e.message }",
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
    let id = server
        .keep_in("node", "await iii.files.write('where.txt', 'here')")
        .await;
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

/// `max_runtimes` and `max_memory_mb` past what the engines can reserve are
/// refused naming the key. Before, `max_runtimes: 1000000` was saved, and
/// the next start failed to map the pool (python "unavailable").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_beyond_what_the_engines_can_reserve_is_refused() {
    let server = Server::start().await;
    for (key, value) in [("max_runtimes", 1_000_000u64), ("max_memory_mb", 100_000)] {
        let answer = server
            .call(
                "configuration::set",
                json!({"id": "code-runner", "value": { key: value }}),
            )
            .await;
        answer.assert_error("code-runner::invalid_request", key);
        assert!(answer.error_message().contains("4096"), "{}", answer.body);
    }
    let stored = server
        .call("configuration::get", json!({"id": "code-runner"}))
        .await;
    assert_eq!(stored.ok()["value"]["max_runtimes"], 32);
}
