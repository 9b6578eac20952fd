//! The worker's integration tests: one binary, one module per feature area.
//!
//! Everything goes through real components: a real `Worker` on real
//! V8 and wasmtime, called over real HTTP on `127.0.0.1:0` (in-process, or the
//! real `code-runner` binary where a regression could kill the process).
//! Needs the python snapshot in its cache: `scripts/fetch-python-wasm`.
//!
//! Each contract test runs for both languages (a loop over
//! `helpers::lang::LANGS`, or a `…_in_python` / `…_in_node` pair through one
//! helper); a test of one language says why in its doc comment.

// — What a run answers —
// `code-runner::run` one-shot: the response, results and caps, request limits.
mod run;
// Kept runtimes: what persists across turns, teardown, reaping, directories.
mod keep;
// `lang: "typescript"`: stripped types, refused transforms, kept and registered.
mod typescript;
// The fault matrix: hostile or broken programs and their documented endings.
mod faults;
// Python's data stack: numpy and pandas in plain python runs, `images`, a lean worker.
mod data;
// Python's urllib and http.client through the worker's egress, in both interpreters.
mod fetch_python;
// JavaScript's `fetch` through the worker's egress, against loopback servers.
mod fetch;
// Files in (`files`) and out (`collect`): paths, quotas, caps, symlinks.
mod files;
// `python_packages`: pure-Python wheels from PyPI in both interpreters; refusals stop the start.
mod packages;
/// Snapshots and forks of python sessions (issue 47).
mod sessions;

// — What bounds a tenant —
// Runtime slots: `max_runtimes`, the shares of what guest code starts, lines.
mod slots;
// What a hostile guest cannot do to the host: memory, descriptors, error text.
mod hardening;
// Runs that lose their caller, and the privacy of runtime directories.
mod lifetimes;
// `isolation: process`: sandbox processes, their faults and their confinement.
mod isolation;

// — Guest code on the bus —
// The bus bridge rules, and what belongs to the operator.
mod bridge;
// `register_function`, namespace teardown, and node's `iii.registerFunction`.
mod register;
// A runtime's own namespace, and who may write or tear down a namespace.
mod namespaces;
// Code mode: `describe`'s declarations, and calls by name through `iii.fn`.
mod codemode;

// — How the worker is reached and run —
// Configuration: get/set, reload tiers, the file watch, what may be set.
mod config;
// The HTTP edge: routes, who may call, the edge's limits, property tests.
mod http;
// MCP's tool list: guest-published tools per session, its followers.
mod mcp_tools;
// The real binary: `call`, `serve`, and what a SIGKILL leaves behind.
mod cli;
// On a real iii engine: the link, published functions, restarts, peers.
mod iii;
// The console's UI content and the playground.
mod console;
// The `pre_generate` guidance hook and how internal functions present.
mod guidance;
// The operator's metrics: `/metrics`, promtool, a real Prometheus.
mod metrics;
// Traces: spans over OTLP/HTTP to a real receiver, and into the engine.
mod traces;

// Shared helpers: ids and codes, `Server`, the binary, the engine, languages.
mod helpers;
