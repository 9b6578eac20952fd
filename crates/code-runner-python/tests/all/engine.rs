//! The python engine through real wasmtime: turns, persistence and limits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runner_core::{
    AbortSignal, BindingNamespace, Bindings, Completion, Engine, Fault, Runtime, RuntimeOptions,
    Task, TurnEnding, TurnOutcome, TurnSpec,
};
use serde_json::{Value, json};

use code_runner_python::{EngineLimits, PythonEngine};

use crate::engine;

async fn runtime(memory_mb: u64) -> (Arc<dyn Runtime>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        memory_mb,
        work_dir: dir.path().to_path_buf(),
        ..RuntimeOptions::default()
    };
    (engine().spawn(options).await.expect("boot"), dir)
}

fn turn(program: &str) -> TurnSpec {
    TurnSpec {
        live: None,
        task: Task::program(program),
        timeout: Duration::from_secs(10),
        bindings: Bindings::none(),
        max_stream_bytes: Some(16_384),
        abort: AbortSignal::new(),
    }
}

fn value(outcome: &TurnOutcome) -> Value {
    match &outcome.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::Value(v),
            ..
        } => v.clone(),
        other => panic!(
            "expected a value, got {other:?}; stderr: {}",
            outcome.stderr.render()
        ),
    }
}

/// The smallest turn: a value comes back through the framed channel.
#[tokio::test(flavor = "multi_thread")]
async fn result_comes_back() {
    let (rt, _dir) = runtime(128).await;
    let out = rt.run(turn("result = 2 + 2\nprint('hi')")).await;
    assert_eq!(value(&out), json!(4));
    assert_eq!(out.stdout.render(), "hi\n");
    rt.close().await;
}

/// Globals persist between turns; `result` does not.
#[tokio::test(flavor = "multi_thread")]
async fn globals_persist_and_result_is_cleared() {
    let (rt, _dir) = runtime(128).await;
    assert_eq!(
        value(&rt.run(turn("x = 41\nresult = 'set'")).await),
        json!("set")
    );
    assert_eq!(value(&rt.run(turn("result = x + 1")).await), json!(42));
    let out = rt.run(turn("y = 1")).await;
    assert!(matches!(
        out.ending,
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::Absent,
            ..
        }
    ));
    rt.close().await;
}

/// Handlers are kept by key: a source without one is refused and keeps the
/// previous handler; state the source defines persists between invocations.
#[tokio::test(flavor = "multi_thread")]
async fn handlers_are_defined_kept_and_invoked() {
    let (rt, _dir) = runtime(128).await;
    let with_task = |task: Task| TurnSpec { task, ..turn("") };
    let define = |key: &str, source: &str| {
        with_task(Task::Define {
            key: key.into(),
            source: source.into(),
        })
    };
    let invoke = |key: &str, payload: Value| {
        with_task(Task::Invoke {
            key: key.into(),
            payload,
        })
    };
    let source = "calls = 0\ndef handler(payload):\n    global calls\n    calls += 1\n    return {'hi': payload['name'], 'calls': calls}\n";
    let out = rt.run(define("app::greet", source)).await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
        "{:?}",
        out.ending
    );
    assert_eq!(
        value(&rt.run(invoke("app::greet", json!({"name": "ana"}))).await),
        json!({"hi": "ana", "calls": 1})
    );
    assert_eq!(
        value(&rt.run(invoke("app::greet", json!({"name": "bo"}))).await),
        json!({"hi": "bo", "calls": 2})
    );

    let out = rt.run(define("app::greet", "x = 1")).await;
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 1,
            exception: Some(text),
            ..
        } => {
            assert!(text.contains("no callable handler"), "{text}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        value(&rt.run(invoke("app::greet", json!({"name": "cy"}))).await)["calls"],
        json!(3)
    );

    let out = rt.run(invoke("app::missing", json!(null))).await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 1, .. }),
        "{:?}",
        out.ending
    );
    let out = rt
        .run(define(
            "app::boom",
            "def handler(p):\n    raise ValueError('bad ' + p)\n",
        ))
        .await;
    assert!(matches!(
        out.ending,
        TurnEnding::Exited { exit_code: 0, .. }
    ));
    let out = rt.run(invoke("app::boom", json!("input"))).await;
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 1,
            exception: Some(text),
            ..
        } => {
            assert!(text.contains("ValueError: bad input"), "{text}")
        }
        other => panic!("{other:?}"),
    }
    rt.close().await;
}

/// Runs `program` with a 300 ms budget and asserts it is stopped as a timeout, on time.
async fn assert_stopped_on_time(rt: &Arc<dyn Runtime>, program: &str) {
    let mut spec = turn(program);
    spec.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let out = rt.run(spec).await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Timeout { .. })),
        "{:?}",
        out.ending
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A busy loop is stopped by the epoch callback on time.
#[tokio::test(flavor = "multi_thread")]
async fn busy_loop_times_out() {
    let (rt, _dir) = runtime(128).await;
    assert_stopped_on_time(&rt, "while True: pass").await;
    rt.close().await;
}

/// A binding call crosses to the host and back.
#[tokio::test(flavor = "multi_thread")]
async fn binding_round_trip() {
    let (rt, _dir) = runtime(128).await;
    let tools = BindingNamespace::new("tools")
        .function("echo", |args, _| async move { Ok(json!({ "got": args })) })
        .value("name", json!("tools-ns"));
    let mut spec = turn("result = [tools.echo({'a': 'é'}), tools.name]");
    spec.bindings = Bindings::new(vec![tools]).unwrap();
    assert_eq!(
        value(&rt.run(spec).await),
        json!([{ "got": { "a": "é" } }, "tools-ns"])
    );
    rt.close().await;
}

/// A kept runtime's error class is one class from turn to turn: a class
/// kept from the first turn catches the second turn's rejection.
#[tokio::test(flavor = "multi_thread")]
async fn the_error_class_is_the_same_in_every_turn() {
    let (rt, _dir) = runtime(128).await;
    let tools = || {
        Bindings::new(vec![
            BindingNamespace::new("tools")
                .function("deny", |_, _| async {
                    Err(code_runner_core::BindingError::message("not allowed"))
                })
                .error_class("ToolError", "tool"),
        ])
        .unwrap()
    };
    let mut first = turn("kept = ToolError\nresult = kept.__name__");
    first.bindings = tools();
    assert_eq!(value(&rt.run(first).await), json!("ToolError"));
    let mut second =
        turn("try:\n    tools.deny()\nexcept kept as e:\n    result = [ToolError is kept, e.tool]");
    second.bindings = tools();
    assert_eq!(value(&rt.run(second).await), json!([true, "deny"]));
    rt.close().await;
}

/// A missing snapshot is an error that names the directory and how to build it.
#[test]
fn missing_snapshot_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("python-snapshot");
    let err = PythonEngine::load(&missing, EngineLimits::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("no python snapshot")
            && text.contains(&missing.display().to_string())
            && text.contains("scripts/fetch-python-wasm"),
        "{text}"
    );
}

/// A snapshot whose component lost bytes is refused by its sha256, never run,
/// and the message names the file and the fix.
#[test]
fn corrupt_snapshot_is_refused_by_hash() {
    let built = code_runner_python::default_snapshot_dir();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(built.join("manifest"), dir.path().join("manifest")).unwrap();
    std::fs::create_dir(dir.path().join("lib")).unwrap();
    std::fs::write(dir.path().join("lib/os.py"), b"").unwrap();
    let wasm = dir.path().join("runner.wasm");
    std::fs::write(&wasm, b"\0asm\x0d\0\x01\0 not really python").unwrap();
    let err = PythonEngine::load(dir.path(), EngineLimits::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("sha256")
            && text.contains(&wasm.display().to_string())
            && text.contains("scripts/fetch-python-wasm"),
        "{text}"
    );
}

/// A sleeping guest is stopped by the host sleep itself, on time.
#[tokio::test(flavor = "multi_thread")]
async fn blocked_sleep_times_out() {
    let (rt, _dir) = runtime(128).await;
    assert_stopped_on_time(&rt, "import time\ntime.sleep(60)").await;
    // The interpreter was lost; the next turn boots a fresh one.
    assert_eq!(
        value(&rt.run(turn("result = 'again'")).await),
        json!("again")
    );
    rt.close().await;
}

/// Output is bounded while the guest writes it, and the marker names the stream.
#[tokio::test(flavor = "multi_thread")]
async fn output_is_bounded_while_written() {
    let (rt, _dir) = runtime(128).await;
    let out = rt
        .run(turn(
            "import sys\nfor i in range(200000): print(i)\nsys.stderr.write('e' * 100000)",
        ))
        .await;
    assert!(out.stdout.total_bytes() > 1_000_000);
    let stdout = out.stdout.render();
    assert!(stdout.len() < 17_000 && stdout.starts_with("0\n1\n") && stdout.ends_with("199999\n"));
    assert!(
        out.stderr
            .render()
            .contains("[…stderr truncated: was ~98 KB; middle omitted]")
    );
    rt.close().await;
}

/// Modules outside the snapshot import from the read-only stdlib mount, and
/// importing them is no sandbox denial (no bytecode is written there).
#[tokio::test(flavor = "multi_thread")]
async fn the_whole_stdlib_imports_from_the_read_only_mount() {
    let (rt, _dir) = runtime(128).await;
    let out = rt
        .run(turn(
            "import sys\nfresh = [m for m in ('tomllib', 'xml.dom.minidom', 'email.mime.text', 'graphlib') if m not in sys.modules]\n\
             import tomllib, xml.dom.minidom, email.mime.text, graphlib\n\
             result = [fresh, tomllib.loads('a = 1'), xml.dom.minidom.parseString('<a/>').documentElement.tagName]",
        ))
        .await;
    assert_eq!(
        value(&out),
        json!([["tomllib", "xml.dom.minidom", "email.mime.text", "graphlib"], {"a": 1}, "a"])
    );
    assert!(!out.denied, "reading the stdlib is no denial");
    rt.close().await;
}

/// The snapshot froze one PRNG state; every instance reseeds it, so two
/// runtimes draw different numbers.
#[tokio::test(flavor = "multi_thread")]
async fn every_instance_reseeds_the_prng() {
    let (a, _da) = runtime(128).await;
    let (b, _db) = runtime(128).await;
    let program = "import random\nresult = [random.random() for _ in range(4)]";
    let first = value(&a.run(turn(program)).await);
    let second = value(&b.run(turn(program)).await);
    assert_ne!(first, second);
    a.close().await;
    b.close().await;
}

/// A turn's usage is measured: its thread's CPU for a busy loop, and the
/// interpreter's linear memory, which a 64 MiB allocation raises.
#[tokio::test(flavor = "multi_thread")]
async fn usage_is_measured() {
    let (rt, _dir) = runtime(512).await;
    let quiet = rt.run(turn("result = 1")).await;
    assert!(quiet.usage.peak_memory_bytes > 0, "{:?}", quiet.usage);
    let busy = rt
        .run(turn(
            "x = 0\nfor i in range(2_000_000):\n    x = (x + i * 7) % 1_000_003\n\
             block = bytearray(64 << 20)\nresult = len(block)",
        ))
        .await;
    assert_eq!(value(&busy), json!(64 << 20));
    // Fixed work, not a wall-clock loop a busy machine would starve.
    assert!(busy.usage.cpu_ns >= 20_000_000, "{:?}", busy.usage);
    assert!(busy.usage.cpu_ns < 60_000_000_000, "{:?}", busy.usage);
    assert!(
        busy.usage.peak_memory_bytes >= quiet.usage.peak_memory_bytes + (64 << 20),
        "{:?} then {:?}",
        quiet.usage,
        busy.usage
    );
    rt.close().await;
}
