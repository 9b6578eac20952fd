//! The worker's integration tests: one binary, one module per area.
//!
//! Everything goes through real components: a real `Worker` on real
//! V8 and wasmtime, called over real HTTP on `127.0.0.1:0` (in-process, or the
//! real `code-runner` binary where a regression could kill the process).
//! Needs python.wasm in its cache: `scripts/fetch-python-wasm`.

mod bad_input;
mod capacity;
mod cli;
mod faults;
mod http;
mod keep;
mod limits;
mod node;
mod run;
mod util;
