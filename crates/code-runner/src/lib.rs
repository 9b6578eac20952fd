//! The code-runner worker: runs untrusted code in-process behind a small bus.
//!
//! - [`Worker`]: configuration, engines, the runtime [`registry`] and the [`bus`].
//! - [`functions`]: `code-runner::run`, `code-runner::teardown`, `engine::functions::info`;
//!   `register`: `code-runner::register_function` and the published functions it serves.
//! - `guest`: the guest's `iii` global; [`bridge`]: the bus functions guest code may not reach;
//!   [`namespaces`]: the naming rule; [`lineage`]: who started which runtime.
//! - [`configuration`]: `configuration::get`/`set` and `code-runner::on-config-change`
//!   over the live settings (the store, the file watch, the reload tiers);
//!   [`guidance`]: the `code-runner::inject-guidance` hook.
//! - [`http`]: the HTTP API and its edge rules; [`cli`]: `serve` and `call`;
//!   [`logging`]: the process log; [`iii`]: the iii engine link.
//! - [`ui`]: the console cards (`code-runner::ui-content`) and the playground at `GET /`.
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
mod worker;

pub use bus::CallError;
pub use bus::names;
pub use edge::{http, iii, logging, mcp};
pub use runtimes::isolation::{SANDBOX_ROLE, set_isolation, set_sandbox_program};
pub use worker::{Worker, WorkerOptions};
