//! A review's attacks, each against the real binary or a real worker over
//! real HTTP: what a hostile guest or client tried, and the bound that now
//! holds. Each test failed before its fix.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{Server, peak_rss_mib};

/// Longest the queued calls may take to be refused on a loaded machine.
const REFUSALS_WITHIN: Duration = Duration::from_secs(90);

/// A guest handing the host 16 MiB of tiny JSON values in one binding call
/// (here `iii.trigger`'s payload) is refused before the host builds a tree
/// of it. Before, each such call cost the host ~1.5 GB at peak (a tree of
/// 8 million values), per runtime, and a few runtimes at once took the
/// machine's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_argument_of_millions_of_values_is_refused_unparsed() {
    let mut server = Server::process("").await;
    let answer = server
        .run_with(
            "import wit_world\n\
             frame = '{\"ns\":\"iii\",\"fn\":\"trigger\",\"args\":{\"function_id\":\"nope::x\",\"payload\":[' + '0,' * 8_000_000 + '0]}}'\n\
             result = [wit_world.call(frame) for _ in range(2)][-1]\n\
             try:\n    iii.trigger({'function_id': 'nope::x', 'payload': [0] * 300_000})\n\
             except IIIError as err:\n    result = [result, str(err)]",
            json!({"timeout_ms": 60_000, "memory_mb": 256}),
        )
        .await;
    let body = answer.ok();
    let raw = body["result"][0].as_str().unwrap_or_default();
    assert!(raw.contains("limited to 262144 JSON values"), "{body}");
    let caught = body["result"][1].as_str().unwrap_or_default();
    assert!(caught.contains("limited to 262144 JSON values"), "{body}");
    let peak = peak_rss_mib(server.pid());
    assert!(peak < 600, "the host peaked at {peak} MiB");
    server.assert_alive();
    server.assert_still_serves().await;
}

/// With `max_result_bytes: 0` (the cap disabled), a result of millions of
/// small values comes back as `null` rather than as a host-side tree of
/// ~1.6 GB; one under the value limit still comes back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncapped_result_of_millions_of_values_is_not_parsed() {
    let mut server = Server::process("max_result_bytes: 0\n").await;
    let wide = server
        .run_with(
            "result = [0] * 8_000_000",
            json!({"timeout_ms": 60_000, "memory_mb": 256}),
        )
        .await;
    let body = wide.ok();
    assert_eq!(body["exit_code"], 0, "{body}");
    assert_eq!(body["result"], json!(null), "{body}");
    let peak = peak_rss_mib(server.pid());
    assert!(peak < 600, "the host peaked at {peak} MiB");
    let whole = server.run("result = [1] * 200_000").await;
    assert_eq!(whole.ok()["result"].as_array().map(Vec::len), Some(200_000));
    server.assert_alive();
}

/// Calls for one kept runtime wait in a bounded line (64, shared with its
/// published functions): the rest are `capacity` at once. Before, every
/// call queued, each holding its request (up to 16 MiB of code) for as long
/// as the runtime took to reach it: 300 dropped calls held 300 MiB and the
/// runtime for 10 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_queued_on_one_kept_runtime_are_bounded() {
    let server = Arc::new(Server::start().await);
    let id = server.keep("import time").await;
    let blocker = {
        let (server, id) = (server.clone(), id.clone());
        tokio::spawn(async move {
            server
                .call(
                    "code-runner::run",
                    json!({"runtime_id": id, "code": "time.sleep(60)", "timeout_ms": 30_000}),
                )
                .await
        })
    };
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let callers: Vec<_> = (0..80)
        .map(|_| {
            let (server, id, refused) = (server.clone(), id.clone(), refused.clone());
            tokio::spawn(async move {
                // Each caller blocks like the blocker: whichever reaches the
                // runtime first holds it, so the count of refusals does not
                // depend on the order in which the 81 calls arrive.
                let answer = server
                    .call(
                        "code-runner::run",
                        json!({"runtime_id": id, "code": "time.sleep(60)", "timeout_ms": 30_000}),
                    )
                    .await;
                if answer.error_code() == Some("code-runner::capacity") {
                    assert!(
                        answer.error_message().contains("calls already wait"),
                        "{}",
                        answer.body
                    );
                    refused.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                answer
            })
        })
        .collect();
    let until = Instant::now() + REFUSALS_WITHIN;
    while refused.load(std::sync::atomic::Ordering::SeqCst) < 16 {
        assert!(
            Instant::now() < until,
            "only {} of 80 calls behind a busy runtime were refused",
            refused.load(std::sync::atomic::Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Tearing it down ends the turn in flight and the calls still waiting.
    server.teardown(&id).await.ok();
    blocker.await.unwrap();
    for caller in callers {
        caller.await.unwrap();
    }
    server.assert_still_serves().await;
}

/// Guest code cannot rewrite code-runner's configuration through
/// `iii.trigger` (it would lift its own timeouts and caps, and a
/// `max_runtimes` of a million, saved, left python unavailable after the
/// next restart); it gets `forbidden` and the stored value is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_code_cannot_change_the_worker_configuration() {
    let server = Server::start().await;
    let answer = server
        .run(
            "try:\n    iii.trigger({'function_id': 'configuration::set', 'payload': \
             {'id': 'code-runner', 'value': {'max_timeout_ms': 10**12, 'max_result_bytes': 0}}})\n\
             except IIIError as err:\n    result = [err.code, err.message]\n\
             result.append(iii.trigger({'function_id': 'configuration::get', 'payload': {'id': 'code-runner'}})['value']['max_timeout_ms'])",
        )
        .await;
    let body = answer.ok();
    assert_eq!(body["result"][0], "forbidden", "{body}");
    assert!(
        body["result"][1]
            .as_str()
            .unwrap_or_default()
            .contains("own configuration"),
        "{body}"
    );
    assert_eq!(body["result"][2], 30_000, "{body}");
    let stored = server
        .call("configuration::get", json!({"id": "code-runner"}))
        .await;
    assert_eq!(stored.ok()["value"]["max_result_bytes"], 32_768);
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

/// A worker on an engine logging at `trace` never writes a runtime id in
/// full. Before, the WebSocket crates' trace events quoted every frame, so
/// each answer carrying a `runtime_id` was in the log whole.
#[test]
fn a_trace_log_on_an_engine_holds_no_runtime_id() {
    use crate::helpers::engine::{EngineProc, WorkerProc};
    let engine = EngineProc::start();
    let mut worker = WorkerProc::with_log_filter(&engine, "cr-trace", "", "trace");
    let kept = engine
        .trigger_when_registered(
            "code-runner::run",
            &json!({"lang": "python", "keep": true, "code": "x = 41", "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    let id = kept["runtime_id"].as_str().expect("a kept runtime's id");
    let again = engine
        .trigger(
            "code-runner::run",
            &json!({"runtime_id": id, "code": "result = x + 1", "timeout_ms": 30000}),
        )
        .unwrap();
    assert_eq!(again["result"], 42, "{again}");
    let log = worker.log();
    assert!(log.contains("TRACE"), "the worker did not log at trace");
    let secret = &id[id.len() - 32..];
    assert!(
        !log.contains(secret),
        "the log holds the runtime id in full"
    );
    worker.assert_alive();
}

/// Namespaces registered by guest code outlive the runs that registered
/// them, so all of them together hold at most an eighth of `max_runtimes`.
/// Before, each one-shot run could register its own share (4) and keep it:
/// eight runs held 31 of 32 slots, exempt from the idle sweep, for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_registered_by_guests_cannot_take_every_slot() {
    let server = Server::start().await;
    let register = |prefix: &str| {
        format!(
            "done = []\nfor i in range(4):\n    try:\n        iii.trigger({{'function_id': 'code-runner::register_function', 'payload': \
             {{'function_id': '{prefix}%d::f' % i, 'lang': 'python', 'source': 'def handler(p):\\n    return 1'}}}})\n        done.append('ok')\n\
             \x20   except IIIError as err:\n        done.append(err.code + ' ' + err.message)\nresult = done"
        )
    };
    let first = server
        .run_with(&register("first"), json!({"timeout_ms": 60_000}))
        .await;
    assert_eq!(first.ok()["result"], json!(["ok", "ok", "ok", "ok"]));
    let second = server
        .run_with(&register("second"), json!({"timeout_ms": 60_000}))
        .await;
    let body = second.ok();
    for refusal in body["result"].as_array().unwrap() {
        let text = refusal.as_str().unwrap_or_default();
        assert!(text.starts_with("code-runner::capacity"), "{body}");
        assert!(text.contains("registered by guest code"), "{body}");
    }
    let health = server.get("/healthz").await;
    assert_eq!(health.ok()["runtimes"]["live"], 4, "{}", health.body);
    // A host call still registers; a namespace torn down makes room.
    server
        .call(
            "code-runner::register_function",
            json!({"function_id": "host::f", "lang": "python", "source": "def handler(p):\n    return 2"}),
        )
        .await
        .ok();
    server
        .call("code-runner::teardown", json!({"namespace": "first0"}))
        .await
        .ok();
    let third = server
        .run_with(&register("third"), json!({"timeout_ms": 60_000}))
        .await;
    assert_eq!(third.ok()["result"][0], "ok");
    server.assert_still_serves().await;
}

/// Fire-and-forget calls through the engine are bounded like local ones: 16
/// of a turn's in flight, the 17th `capacity`. Before, they went out as the
/// engine's void invocations, which nothing waits for, and one turn sent
/// 34 000 in 3 s. The target is a slow turn on a kept runtime of a second
/// worker (calls wait in its line; new runtimes would meet the share the
/// second worker charges the calling tree first).
#[test]
fn fire_and_forget_through_the_engine_is_bounded_per_turn() {
    use crate::helpers::engine::{EngineProc, WorkerProc};
    let engine = EngineProc::start();
    let worker = WorkerProc::start(&engine, "cr-void");
    let slow = WorkerProc::start(&engine, "cr-slow");
    for (id, log) in [
        ("code-runner@cr-void::run", worker.log()),
        ("code-runner@cr-slow::run", slow.log()),
    ] {
        engine
            .trigger_when_registered(
                id,
                &json!({"lang": "python", "code": "result = 1", "timeout_ms": 30000}),
            )
            .unwrap_or_else(|e| panic!("{e}\n{log}"));
    }
    let kept = engine
        .trigger(
            "code-runner@cr-slow::run",
            &json!({"lang": "python", "keep": true, "code": "pass"}),
        )
        .unwrap();
    let id = kept["runtime_id"].as_str().unwrap();
    let answer = engine
        .trigger(
            "code-runner@cr-void::run",
            &json!({"lang": "python", "timeout_ms": 30000, "code": format!(
                "slow = {{'function_id': 'code-runner@cr-slow::run', 'action': {{'type': 'void'}}, \
                 'payload': {{'runtime_id': '{id}', 'code': 'import time\\ntime.sleep(20)', 'timeout_ms': 25000}}}}\n\
                 sent = 0\ntry:\n    for _ in range(100):\n        iii.trigger(slow)\n        sent += 1\n\
                 except IIIError as err:\n    result = [sent, err.code]")}),
        )
        .unwrap();
    assert_eq!(
        answer["result"],
        json!([16, "code-runner::capacity"]),
        "{answer}"
    );
}

/// Error text that quotes what a guest sent is bounded: a 10 MB function id
/// through `iii.trigger`, or an unknown binding named by a raw frame, comes
/// back as an error of at most 8 KiB. Before, the whole id was echoed, 10 MB
/// built by the host per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_quoting_guest_input_are_bounded() {
    let server = Server::start().await;
    let answer = server
        .run_with(
            "import wit_world\nout = []\ntry:\n    iii.trigger({'function_id': 'x' * 10_000_000})\n\
             except IIIError as err:\n    out.append([err.code, len(err.message)])\n\
             out.append(len(wit_world.call('{\"ns\":\"' + 'n' * 10_000_000 + '\",\"fn\":\"f\"}')))\n\
             result = out",
            json!({"timeout_ms": 30_000, "memory_mb": 256}),
        )
        .await;
    let body = answer.ok();
    assert_eq!(body["result"][0][0], "function_not_found", "{body}");
    let sizes = [&body["result"][0][1], &body["result"][1]];
    for size in sizes {
        assert!(size.as_u64().is_some_and(|n| n <= 8 * 1024 + 64), "{body}");
    }
}
