//! Traces (issue 49, item 2): a call that carries a W3C `traceparent` (an
//! HTTP header, MCP's `_meta`) is a span within the caller's trace, with
//! the run's facts as attributes and what its guest code did (a nested run
//! through `iii.trigger`, a `fetch`) as child spans, sent over OTLP/HTTP to
//! `otlp_endpoint`: here a receiver that decodes with OpenTelemetry's own
//! protobuf definitions (`tests/otlp/receiver.py`, the venv scripts/test
//! installs). On an iii engine the spans reach the engine's own trace store,
//! nested in the engine's span of the call. No span holds a runtime id,
//! code or output.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::engine::{EngineProc, WorkerProc};
use crate::helpers::{Reaped, Server, client, venv_program};
use crate::mcp_tools::client::Session;

/// How long spans may take to arrive (a batch goes every half second; a
/// busy machine is slower).
const ARRIVAL: Duration = Duration::from_secs(60);

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// The receiver's python, from `target/otlp-venv`.
fn receiver_python() -> PathBuf {
    venv_program("otlp-venv", "python", "opentelemetry-proto")
}

/// The OTLP/HTTP receiver on a loopback port; killed on drop.
struct Receiver {
    _child: Reaped,
    url: String,
}

impl Receiver {
    fn start() -> Receiver {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py");
        let mut child = Command::new(receiver_python())
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the OTLP receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the receiver said {line:?}"));
        Receiver {
            _child: Reaped(child),
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// The spans of trace `trace` received so far.
    async fn spans(&self, trace: &str) -> Vec<Value> {
        let all: Vec<Value> = client()
            .get(format!("{}/spans", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        all.into_iter().filter(|s| s["trace_id"] == trace).collect()
    }

    /// Waits until trace `trace` has a span named `name` whose parent is
    /// `parent`; every span of the trace then.
    async fn wait_for(&self, trace: &str, name: &str, parent: &str) -> Vec<Value> {
        self.wait_for_all(trace, &[(name, parent)]).await
    }

    /// Waits until trace `trace` has, for each `(name, parent)`, a span
    /// named `name` whose parent is `parent`; every span of the trace then.
    async fn wait_for_all(&self, trace: &str, wanted: &[(&str, &str)]) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans = self.spans(trace).await;
            let has = |(name, parent): &(&str, &str)| {
                spans
                    .iter()
                    .any(|s| s["name"] == *name && s["parent_span_id"] == *parent)
            };
            if wanted.iter().all(has) {
                return spans;
            }
            assert!(
                started.elapsed() < ARRIVAL,
                "not every span of {wanted:?} in trace {trace} within {ARRIVAL:?}: {spans:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The one span of `spans` named `name` under `parent`.
fn span<'a>(spans: &'a [Value], name: &str, parent: &str) -> &'a Value {
    let found: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == name && s["parent_span_id"] == parent)
        .collect();
    assert_eq!(found.len(), 1, "spans {name} under {parent}: {spans:#?}");
    found[0]
}

/// OTLP's span kinds.
const INTERNAL: u64 = 1;
const SERVER: u64 = 2;
const CLIENT: u64 = 3;
/// OTLP's status codes.
const OK: u64 = 1;
const ERROR: u64 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_http_call_reaches_the_otlp_receiver_with_its_children() {
    let receiver = Receiver::start();
    let port = receiver.url.rsplit(':').next().unwrap().to_string();
    let server = Server::with_config(&format!(
        "otlp_endpoint: {}\negress_allow: [\"127.0.0.1:{port}\"]\n",
        receiver.url
    ))
    .await;
    server
        .registered(
            "node",
            "bill::add",
            "export function handler(p) { return p.a + p.b }",
        )
        .await;
    // Guest code that starts a nested run, calls a published function,
    // fetches a page and prints a marker; kept, so the answer has a runtime
    // id no span may carry.
    let code = format!(
        "const inner = await iii.trigger({{ function_id: 'code-runner::run', payload: {{ lang: 'node', code: 'return 6 * 7' }} }});\n\
         const sum = await iii.trigger({{ function_id: 'bill::add', payload: {{ a: 40, b: 2 }} }});\n\
         const page = await fetch('{}/ping?token=SECRET-IN-QUERY');\n\
         console.log('PRINTED-MARKER');\n\
         return [inner.result, sum, await page.text()];",
        receiver.url
    );
    let response = client()
        .post(format!("{}/v1/call/code-runner::run", server.url))
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .json(&json!({"lang": "node", "code": code, "keep": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["result"], json!([42, 42, "pong"]), "{answer}");
    let runtime_id = answer["runtime_id"].as_str().unwrap().to_string();

    let spans = receiver.wait_for(TRACE, "code-runner::run", PARENT).await;
    // The run: a server span continuing the caller's, with the run's facts.
    let run = span(&spans, "code-runner::run", PARENT);
    assert_eq!(run["kind"], SERVER);
    assert_eq!(run["status"], OK);
    let attributes = &run["attributes"];
    assert_eq!(attributes["code_runner.lang"], "node");
    assert_eq!(attributes["code_runner.flavour"], "-");
    assert_eq!(attributes["code_runner.kept"], true);
    assert_eq!(attributes["code_runner.outcome"], "success");
    assert_eq!(attributes["code_runner.tenant"], "host");
    assert!(attributes["code_runner.cpu_ms"].as_f64().unwrap() > 0.0);
    assert!(
        attributes["code_runner.peak_memory_bytes"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(attributes["code_runner.egress.requests"], 1);
    assert_eq!(run["resource"]["service.name"], "code-runner");
    let run_id = run["span_id"].as_str().unwrap().to_string();

    // Its children, whichever batch brought them.
    let children = [
        ("code-runner::run", run_id.as_str()),
        ("bill::add", run_id.as_str()),
        ("fetch", run_id.as_str()),
    ];
    let spans = receiver.wait_for_all(TRACE, &children).await;
    let nested = span(&spans, "code-runner::run", &run_id);
    assert_eq!(nested["kind"], INTERNAL);
    assert_eq!(nested["attributes"]["code_runner.outcome"], "success");
    assert_eq!(nested["attributes"]["code_runner.kept"], false);
    let invoked = span(&spans, "bill::add", &run_id);
    assert_eq!(invoked["kind"], INTERNAL);
    assert_eq!(invoked["status"], OK);
    assert_eq!(invoked["attributes"]["code_runner.lang"], "node");
    assert_eq!(invoked["attributes"]["code_runner.tenant"], "bill::");
    assert!(
        invoked["attributes"]["code_runner.cpu_ms"]
            .as_f64()
            .is_some()
    );
    let fetch = span(&spans, "fetch", &run_id);
    assert_eq!(fetch["kind"], CLIENT);
    assert_eq!(fetch["attributes"]["http.request.method"], "GET");
    assert_eq!(fetch["attributes"]["server.address"], "127.0.0.1");
    assert_eq!(fetch["attributes"]["http.response.status_code"], 200);

    // No span holds the runtime id (nor its prefix), the code, the output or
    // the URL's query.
    let text = serde_json::to_string(&receiver.spans(TRACE).await).unwrap();
    for secret in [
        &runtime_id,
        &runtime_id[..12],
        "6 * 7",
        "PRINTED-MARKER",
        "SECRET-IN-QUERY",
        "pong",
    ] {
        assert!(!text.contains(secret), "a span holds {secret:?}: {text}");
    }

    // A failing call: its span says the error's code, not its message.
    let other = "0af7651916cd43dd8448eb211c80319c";
    let refused = client()
        .post(format!("{}/v1/call/code-runner::run", server.url))
        .header("traceparent", format!("00-{other}-{PARENT}-01"))
        .json(&json!({"lang": "node", "code": "while (true) {}", "timeout_ms": 300}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 504);
    let spans = receiver.wait_for(other, "code-runner::run", PARENT).await;
    let run = span(&spans, "code-runner::run", PARENT);
    assert_eq!(run["status"], ERROR);
    assert_eq!(run["status_message"], "code-runner::timeout");
    assert_eq!(run["attributes"]["code_runner.outcome"], "timeout");
}

/// An MCP tool call continues the trace its `_meta.traceparent` names
/// (SEP-414), and one without any starts a trace of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_call_continues_the_trace_in_its_meta() {
    let receiver = Receiver::start();
    let server = Server::with_config(&format!("otlp_endpoint: {}/v1/traces\n", receiver.url)).await;
    let mut session = Session::open(&server.url).await;
    let trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    let answer = session
        .request(
            "tools/call",
            json!({
                "name": "run",
                "arguments": {"lang": "python", "code": "print(2 + 2)"},
                "_meta": {"traceparent": format!("00-{trace}-{PARENT}-01")},
            }),
        )
        .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let spans = receiver.wait_for(trace, "code-runner::run", PARENT).await;
    let run = span(&spans, "code-runner::run", PARENT);
    assert_eq!(run["attributes"]["code_runner.lang"], "python");
    assert_eq!(run["attributes"]["code_runner.outcome"], "success");
    session.close().await;
}

/// On an iii engine the worker's spans reach the engine's trace store: the
/// run's span sits under the engine's span of the call, so the console
/// shows a run inside the request that made it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_engine_a_run_is_a_span_in_the_engines_trace() {
    let engine = EngineProc::start();
    let _worker = WorkerProc::start(&engine, "traced-worker");
    let payload = json!({"lang": "node", "code": "return 'traced ' + (20 + 22)"});
    let answer = tokio::task::block_in_place(|| {
        engine.trigger_when_registered("code-runner::run", &payload)
    });
    assert_eq!(answer.unwrap()["result"], "traced 42");
    // Our span, as the engine stored it.
    let started = Instant::now();
    let ours = loop {
        let listed = tokio::task::block_in_place(|| {
            engine.trigger(
                "engine::traces::list",
                &json!({"name": "code-runner::run", "search_all_spans": true, "include_internal": true}),
            )
        })
        .unwrap_or_default();
        let trace = listed["spans"]
            .as_array()
            .and_then(|spans| spans.iter().find_map(|s| s["trace_id"].as_str()))
            .map(String::from);
        if let Some(trace) = trace {
            let tree = tokio::task::block_in_place(|| {
                engine.trigger("engine::traces::tree", &json!({"trace_id": trace}))
            })
            .unwrap();
            if let Some(found) = find(&tree["roots"], "code-runner::run", &mut Vec::new()) {
                break (tree, found);
            }
        }
        assert!(
            started.elapsed() < ARRIVAL,
            "no code-runner::run span in the engine's traces: {listed:#}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let (tree, (path, run)) = ours;
    // Under the iii SDK's span of the engine's invocation, not a trace of
    // its own, with the run's facts.
    assert_eq!(
        path,
        ["execute code-runner::run", "code-runner::run"],
        "{tree:#}"
    );
    let attributes = run["attributes"].as_array().unwrap();
    for pair in [
        json!(["code_runner.lang", "node"]),
        json!(["code_runner.outcome", "success"]),
    ] {
        assert!(attributes.contains(&pair), "{pair} not in {run:#}");
    }
    // Neither our spans nor the SDK's hold the code or the output (the
    // SDK's own payload events are off).
    let text = tree.to_string();
    for secret in ["20 + 22", "traced 42"] {
        assert!(!text.contains(secret), "a span holds {secret:?}: {text}");
    }
}

/// The first span named `name` under `nodes`, and the names from its root
/// down to it.
fn find(nodes: &Value, name: &str, path: &mut Vec<String>) -> Option<(Vec<String>, Value)> {
    for node in nodes.as_array()? {
        let own = node["name"].as_str().unwrap_or_default().to_string();
        path.push(own.clone());
        if own == name {
            return Some((path.clone(), node.clone()));
        }
        if let Some(found) = find(&node["children"], name, path) {
            return Some(found);
        }
        path.pop();
    }
    None
}
