//! Integration tests of the python engine, through real wasmtime.

mod engine;
mod files;
mod hardening;
mod seam;

use std::sync::OnceLock;

use code_runner_python::PythonEngine;

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
