//! The worker's integration tests: one binary, one module per area.
//!
//! Everything goes through real components: a real `Worker` on real
//! V8 and wasmtime, called over real HTTP on `127.0.0.1:0` (in-process, or the
//! real `code-runner` binary where a regression could kill the process).
//! Needs the python snapshot in its cache: `scripts/fetch-python-wasm`.

mod bridge;
mod cli;
mod config;
mod console;
mod faults;
mod guidance;
mod hardening;
mod helpers;
mod http;
mod iii;
mod keep;
mod lifetimes;
mod namespaces;
mod register;
mod run;
mod slots;
