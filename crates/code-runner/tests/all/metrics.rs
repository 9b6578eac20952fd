//! The operator's metrics (issue 49): `GET /metrics` moves as a scripted
//! workload of known size says it must, passes `promtool check metrics`,
//! is scraped by a real Prometheus (Debian's, which `scripts/test` unpacks
//! into `target/prometheus`), holds no runtime id, code or output, and is
//! served alone by `--metrics-listen` for a worker without HTTP; usage is
//! summed per tenant (a published function's namespace, or host) and read
//! with `code-runner::usage`, which guest code cannot.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Server, client};

/// Prometheus's binaries: `$PROMETHEUS_BIN_DIR`, else where `scripts/test` unpacks them.
fn prometheus_bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("PROMETHEUS_BIN_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/prometheus/usr/bin"),
        PathBuf::from,
    );
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: scripts/test unpacks Debian's prometheus package there (apt-get download prometheus)",
        path.display()
    );
    path
}

/// The samples of `text`: `name{labels}` (labels sorted) → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let key = match series.split_once('{') {
            Some((name, labels)) => {
                let mut parts: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
                parts.sort_unstable();
                format!("{name}{{{}}}", parts.join(","))
            }
            None => series.to_string(),
        };
        out.insert(key, value.parse().unwrap_or(f64::NAN));
    }
    out
}

async fn metrics(url: &str) -> String {
    let response = client().get(format!("{url}/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    response.text().await.unwrap()
}

fn runs(outcome: &str, kept: bool) -> String {
    format!(
        "code_runner_runs_total{{flavour=\"-\",kept=\"{kept}\",lang=\"node\",outcome=\"{outcome}\"}}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counters_move_as_the_workload_says_and_prometheus_scrapes_them() {
    let server = Server::start().await;
    // Three successes, two script errors, one timeout, one refused request,
    // and a kept runtime with two turns: node one-shots, known sizes.
    for n in 0..3 {
        let answer = server
            .run_in(
                "node",
                &format!("console.log('secret-output-{n}'); return {n}"),
            )
            .await;
        assert_eq!(answer.ok()["exit_code"], 0, "{}", answer.body);
    }
    for _ in 0..2 {
        server
            .run_in("node", "throw new Error('secret-code-path')")
            .await
            .ok();
    }
    server
        .run_in_with("node", "while (true) {}", json!({"timeout_ms": 300}))
        .await
        .assert_error("code-runner::timeout", "");
    server
        .run_in_with("node", "return 1", json!({"timeout_ms": -1}))
        .await
        .assert_error("code-runner::invalid_request", "");
    let id = server.keep_in("node", "globalThis.k = 1; return 1").await;
    server.run_on(&id, "return k").await.ok();

    // A run given a 5-byte file that asks for a host no entry allows (refused, caught):
    // its input bytes and the refusal's reason are counted.
    let answer = server
        .run_in_with(
            "node",
            "try { await fetch('https://example.com/'); return 'fetched' } catch (e) { return 'refused' }",
            json!({"files": [{"path": "in.txt", "text": "hello"}]}),
        )
        .await;
    assert_eq!(answer.ok()["result"], "refused", "{}", answer.body);
    // A published function's calls are charged to its namespace.
    server
        .registered(
            "node",
            "bill::add",
            "export function handler(p) { return p.a + p.b }",
        )
        .await;
    for _ in 0..3 {
        let answer = server.call("bill::add", json!({"a": 1, "b": 2})).await;
        assert_eq!(answer.ok(), &json!(3), "{}", answer.body);
    }
    let usage = server.call("code-runner::usage", json!({})).await;
    let tenants = usage.ok()["tenants"].clone();
    assert_eq!(tenants["bill::"]["calls"], 3, "{tenants}");
    assert_eq!(tenants["host"]["calls"], 10, "{tenants}");
    assert!(tenants["host"]["cpu_ms"].as_f64() > Some(0.0), "{tenants}");
    // Not guest code's to read.
    let refused = server
        .run_on(&id, "try { await iii.trigger({ function_id: 'code-runner::usage', payload: {} }); return 'read' } catch (e) { return e.message }")
        .await;
    assert!(
        refused.ok()["result"]
            .as_str()
            .unwrap_or_default()
            .contains("forbidden"),
        "{}",
        refused.body
    );

    let text = metrics(&server.url).await;
    let found = samples(&text);
    assert_eq!(
        found.get("code_runner_usage_calls_total{tenant=\"bill::\"}"),
        Some(&3.0),
        "{text}"
    );
    assert_eq!(found.get(&runs("success", false)), Some(&4.0), "{text}");
    assert_eq!(
        found.get("code_runner_files_in_bytes_total{lang=\"node\"}"),
        Some(&5.0),
        "{text}"
    );
    assert_eq!(
        found.get("code_runner_egress_refusals_total{reason=\"not_allowed\"}"),
        Some(&1.0),
        "{text}"
    );
    assert_eq!(
        found.get(&runs("script_error", false)),
        Some(&2.0),
        "{text}"
    );
    assert_eq!(found.get(&runs("timeout", false)), Some(&1.0), "{text}");
    assert_eq!(found.get(&runs("success", true)), Some(&3.0), "{text}");
    assert_eq!(
        found.get("code_runner_runs_total{flavour=\"-\",kept=\"false\",lang=\"unknown\",outcome=\"invalid_request\"}"),
        Some(&1.0),
        "{text}"
    );
    assert_eq!(
        found.get("code_runner_run_seconds_count{lang=\"node\"}"),
        Some(&9.0),
        "{text}"
    );
    assert_eq!(found.get("code_runner_kept_runtimes"), Some(&1.0), "{text}");
    assert!(found["code_runner_resident_memory_bytes"] > 1e6, "{text}");
    assert!(
        found.get("code_runner_http_requests_total{status=\"504\"}") >= Some(&1.0),
        "{text}"
    );
    assert!(
        found.get("code_runner_http_requests_total{status=\"200\"}") >= Some(&7.0),
        "{text}"
    );
    // Nothing of a runtime, its code or its output.
    for secret in [
        id.as_str(),
        &id[..12],
        "secret-output",
        "secret-code-path",
        "rt_",
    ] {
        assert!(!text.contains(secret), "the metrics hold {secret:?}");
    }

    // promtool, Prometheus's own linter, accepts the text.
    let mut check = Command::new(prometheus_bin("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    scraped_by_prometheus(&server).await;
}

/// A real Prometheus scrapes the worker every second; its query API then
/// answers the successes counted above.
async fn scraped_by_prometheus(server: &Server) {
    let dir = crate::helpers::tempdir();
    let port = crate::helpers::engine::free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: code-runner\n    static_configs:\n      - targets: ['{}']\n",
            server.addr()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let mut prometheus = Command::new(prometheus_bin("prometheus"))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let query = format!(
        "http://127.0.0.1:{port}/api/v1/query?query=code_runner_runs_total%7Boutcome%3D%22success%22%2Ckept%3D%22false%22%7D"
    );
    let mut answered = Value::Null;
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let Ok(response) = client().get(&query).send().await else {
            continue;
        };
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if body["data"]["result"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
        {
            answered = body;
            break;
        }
    }
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    let result = &answered["data"]["result"][0];
    assert_eq!(result["metric"]["lang"], "node", "{answered}");
    assert_eq!(result["metric"]["job"], "code-runner", "{answered}");
    assert_eq!(result["value"][1], "4", "{answered}");
}

/// A worker with `--no-http` serves `/metrics` alone on `--metrics-listen`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_http_serves_its_metrics_alone() {
    let engine = crate::helpers::engine::EngineProc::start();
    let port = crate::helpers::engine::free_port();
    let addr = format!("127.0.0.1:{port}");
    let _worker = crate::helpers::engine::WorkerProc::with_args(
        &engine,
        "metrics-worker",
        "",
        "info",
        &["--metrics-listen", &addr],
    );
    let payload = json!({"lang": "node", "code": "return 2 + 2"});
    let answer = tokio::task::block_in_place(|| {
        engine.trigger_when_registered("code-runner::run", &payload)
    });
    assert_eq!(answer.unwrap()["result"], 4);
    let url = format!("http://{addr}");
    let mut counted = None;
    for _ in 0..60 {
        if let Ok(response) = client().get(format!("{url}/metrics")).send().await {
            let text = response.text().await.unwrap_or_default();
            counted = samples(&text).get(&runs("success", false)).copied();
            if counted == Some(1.0) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        counted,
        Some(1.0),
        "the --metrics-listen address never counted the run"
    );
    // Only /metrics: the API is not served there.
    let other = client()
        .post(format!("{url}/v1/call/code-runner::run"))
        .json(&json!({"lang": "node", "code": "return 1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
}

/// The engines' gauges follow their runtimes: python's instance slots in
/// use and their linear memory while a kept runtime lives, a reset counted
/// for each slot freed; node's isolates and the heap their last turns
/// peaked at, gone with the runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engines_gauges_follow_their_runtimes() {
    let server = Server::start().await;
    let value = |text: &str, series: &str| samples(text).get(series).copied().unwrap_or(0.0);
    let runtimes = |lang: &str| format!("code_runner_engine_runtimes{{lang=\"{lang}\"}}");
    let memory = |lang: &str| format!("code_runner_engine_memory_bytes{{lang=\"{lang}\"}}");
    let resets = "code_runner_engine_slot_resets_total{lang=\"python\"}";
    let before = metrics(&server.url).await;
    let python = server
        .run_in_with("python", "x = bytearray(32 << 20)", json!({"keep": true}))
        .await;
    let python = python.ok()["runtime_id"].as_str().unwrap().to_string();
    let node = server
        .run_in_with(
            "node",
            "globalThis.a = new Array(1 << 20).fill(1.5)",
            json!({"keep": true}),
        )
        .await;
    let node = node.ok()["runtime_id"].as_str().unwrap().to_string();
    let live = metrics(&server.url).await;
    assert!(value(&live, &runtimes("python")) >= 1.0, "{live}");
    assert!(
        value(&live, &memory("python")) >= f64::from(32 << 20),
        "{live}"
    );
    assert!(
        value(&live, "code_runner_engine_slots_max{lang=\"python\"}") >= 1.0,
        "{live}"
    );
    assert!(value(&live, &runtimes("node")) >= 1.0, "{live}");
    assert!(
        value(&live, &memory("node")) >= f64::from(8 << 20),
        "{live}"
    );
    server.teardown(&python).await.ok();
    server.teardown(&node).await.ok();
    // A torn-down runtime's slot is freed (and reset) as it closes.
    let started = std::time::Instant::now();
    loop {
        let now = metrics(&server.url).await;
        let freed = value(&now, &runtimes("python")) < value(&live, &runtimes("python"))
            && value(&now, resets) > value(&before, resets)
            && value(&now, &memory("python")) < f64::from(32 << 20)
            && value(&now, &memory("node")) < value(&live, &memory("node"));
        if freed {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the gauges did not follow the teardowns: before {before}\nlive {live}\nnow {now}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
