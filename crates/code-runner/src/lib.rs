//! The code-runner worker: runs untrusted code in-process behind a small bus.
//!
//! - [`Worker`]: configuration, engines, the runtime [`registry`] and the [`bus`].
//! - [`functions`]: `code-runner::run`, `code-runner::teardown`, and the guest's `iii`.
//! - [`http`]: the HTTP API; [`cli`]: `serve`, `call` and `bench` ([`bench`]).
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

pub mod bench;
pub mod bus;
pub mod cli;
pub mod engines;
pub mod functions;
pub mod http;
mod ids;
pub mod pool;
pub mod registry;
mod worker;

pub use bus::CallError;
pub use worker::{Worker, WorkerOptions};
