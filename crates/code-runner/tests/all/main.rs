//! The worker's integration tests: one binary, one module per area.
//!
//! Everything goes through real components: a real `Worker` on real
//! V8 and wasmtime, called over real HTTP on `127.0.0.1:0` (in-process, or the
//! real `code-runner` binary where a regression could kill the process).
//! Needs the python snapshot in its cache: `scripts/fetch-python-wasm`.

mod attacks;
mod bad_input;
mod bridge;
mod capacity;
mod cli;
mod config;
mod cross_worker;
mod edge_limits;
mod edge_rules;
mod engine_util;
mod error_text;
mod fanout;
mod faults;
mod guidance;
mod hardening;
mod http;
mod iii_engine;
mod info;
mod keep;
mod lifetimes;
mod limits;
mod nesting;
mod node;
mod node_engine;
mod node_guest;
mod node_hardening;
mod node_register;
mod operator;
mod outer_bound;
mod own_namespace;
mod register;
mod run;
mod tenants;
mod ui;
mod util;
