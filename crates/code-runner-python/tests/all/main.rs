//! Integration tests of the python engine, through real wasmtime.

mod data;
mod engine;
mod files;
mod hardening;
mod seam;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use code_runner_core::{
    AbortSignal, Bindings, Completion, Engine, Runtime, RuntimeOptions, Task, TurnEnding,
    TurnOutcome, TurnSpec,
};
use code_runner_python::PythonEngine;
use serde_json::Value;

/// The process-wide engine: the snapshot compiled (or loaded from the cache) once.
pub fn engine() -> PythonEngine {
    static ENGINE: OnceLock<PythonEngine> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            PythonEngine::from_default_location()
                .expect("the python snapshot: run scripts/fetch-python-wasm")
        })
        .clone()
}

/// A runtime with `options`, its `/work` a fresh temporary directory.
pub async fn runtime(options: RuntimeOptions) -> (Arc<dyn Runtime>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        work_dir: dir.path().to_path_buf(),
        ..options
    };
    (engine().spawn(options).await.expect("start"), dir)
}

/// A program turn with a 60 s budget and no bindings.
pub fn turn(program: &str) -> TurnSpec {
    TurnSpec {
        live: None,
        task: Task::program(program),
        timeout: Duration::from_secs(60),
        bindings: Bindings::none(),
        max_stream_bytes: Some(16_384),
        abort: AbortSignal::new(),
    }
}

/// The completion value of a successful turn, or a panic showing what happened.
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

/// Runs the ignored test `name` of this binary alone in a child process and
/// asserts it passed: for tests that count what the whole process holds.
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
