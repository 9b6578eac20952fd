//! Integration tests of the node engine, through real V8.
//!
//! One binary (each links V8): a module per area and the shared helpers
//! below. The engine (V8's initialisation and the startup snapshot) is made
//! once per process, behind a `Once`.

mod abuse;
mod basics;
mod bindings;
mod fetch;
mod files;
mod handlers;
mod hostile;
mod isolation;
mod json;
mod ledger;
mod limits;
mod seam;
mod shared;
mod typescript;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use code_runner_core::{
    AbortSignal, Bindings, Completion, Engine, Runtime, RuntimeOptions, Task, TurnEnding,
    TurnOutcome, TurnSpec,
};
use code_runner_v8::V8Engine;
use serde_json::Value;

/// The process-wide engine, with `iii.files` attached to namespace `iii`.
pub fn engine() -> V8Engine {
    static ENGINE: OnceLock<V8Engine> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            V8Engine::new()
                .expect("the V8 engine starts")
                .files_namespace("iii")
        })
        .clone()
}

/// A runtime with the default limits and its scratch directory.
pub async fn runtime() -> (Arc<dyn Runtime>, tempfile::TempDir) {
    runtime_with(RuntimeOptions::default()).await
}

/// A runtime with `options` (its `work_dir` replaced by a fresh temporary one).
pub async fn runtime_with(options: RuntimeOptions) -> (Arc<dyn Runtime>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        work_dir: dir.path().join("files"),
        ..options
    };
    (engine().spawn(options).await.expect("boot"), dir)
}

/// A program turn with a 10 s budget and no bindings.
pub fn turn(program: &str) -> TurnSpec {
    task(Task::program(program))
}

/// A turn of `task` with a 10 s budget and no bindings.
pub fn task(task: Task) -> TurnSpec {
    TurnSpec {
        live: None,
        task,
        timeout: Duration::from_secs(10),
        bindings: Bindings::none(),
        max_stream_bytes: Some(16_384),
        abort: AbortSignal::new(),
    }
}

/// A program turn with the worker's `iii` shape: a namespace with an error
/// class, to which the engine adds `files`.
pub fn with_iii(program: &str) -> TurnSpec {
    let ns = code_runner_core::BindingNamespace::new("iii")
        .value("namespace", Value::Null)
        .error_class("IIIError", "member");
    let mut spec = turn(program);
    spec.bindings = Bindings::new(vec![ns]).unwrap();
    spec
}

/// The completion value of a successful turn, or a panic showing what happened.
#[track_caller]
pub fn value(outcome: &TurnOutcome) -> Value {
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

/// The exception text of a turn that failed with exit code 1.
#[track_caller]
pub fn exception(outcome: &TurnOutcome) -> String {
    match &outcome.ending {
        TurnEnding::Exited {
            exit_code: 1,
            exception: Some(text),
            ..
        } => text.clone(),
        other => panic!(
            "expected exit 1 with an exception, got {other:?}; stderr: {}",
            outcome.stderr.render()
        ),
    }
}

/// Runs the ignored test `name` of this binary in a child process and
/// asserts it passed: a regression that aborts kills the child only.
pub fn in_child(name: &str) {
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args(["--exact", name, "--ignored", "--test-threads=1"])
        .output()
        .expect("run the child test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "child test {name} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
