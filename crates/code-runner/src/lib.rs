//! The code-runner worker: runs untrusted code in-process behind a small bus.
//!
//! - [`Worker`] (`worker`): the composition root; it builds every part and
//!   registers the operations on the bus. No part knows it.
//! - `edge`: the surfaces: [`http`] (the HTTP API and its edge rules), [`mcp`]
//!   (stdio and streamable HTTP), [`iii`] (the iii engine link), `ui` (the console
//!   cards and the playground), [`logging`]; [`cli`]: `serve`, `mcp`, `run`, `call`.
//! - `ops`: one module per bus function (`run`, `resume`, `teardown`, `register`,
//!   `describe`, `configuration`, `guidance`, `info`) and what they share: `guest`
//!   (the guest's `iii`), `invoke` and `namespaces` (published functions), `egress`,
//!   `files`, `approvals`, `retire`, `tenancy`.
//! - `bus`: the in-process bus, its `bridge` (what guest code may call), `catalog`
//!   (published functions), `naming` and the [`names`] of the functions.
//! - `runtimes`: engines, the warm pool, the `registry` of kept runtimes, `lineage`
//!   (who started which runtime), `bounded` turns, process `isolation`.
//! - `settings`: the live configuration (the store, the file watch, the reload tiers).
//! - `ids`: runtime ids, which are capabilities.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use code_runner::{Worker, WorkerOptions};
//! let worker = Worker::start(WorkerOptions {
//!     data_dir: "./data".into(),
//!     config: Default::default(),
//!     python_wasm: None,
//! }).await.map_err(|e| anyhow::anyhow!(e.message))?;
//! let answer = worker
//!     .call("code-runner::run", serde_json::json!({"lang": "python", "code": "result = 2 + 2"}))
//!     .await?;
//! assert_eq!(answer["result"], 4);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod bus;
pub mod cli;
mod edge;
mod ids;
mod ops;
mod runtimes;
mod settings;
mod telemetry;
mod worker;

pub use bus::CallError;

/// Threads tokio's blocking pool may start (`main` builds the runtime with
/// it): see `ops::host_work` for what runs there and how it is bounded.
pub const MAX_BLOCKING_THREADS: usize = 64;

pub use bus::names;
pub use edge::{http, iii, logging, mcp};
pub use runtimes::isolation::{SANDBOX_ROLE, set_isolation, set_sandbox_program};
pub use worker::{Worker, WorkerOptions};
