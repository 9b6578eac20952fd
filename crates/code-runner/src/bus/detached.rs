//! Calls that run to their end whether or not the caller is still waiting.
//!
//! A bus call's future is dropped when its HTTP client disconnects or when
//! `iii.trigger`'s budget runs out. Dropped half-way, a run would lose its
//! runtime while the guest is still writing to the directory being removed
//! (leaking it), and skip the cleanup that frees its slot in order. So every
//! call runs as its own task: the caller awaits the task's answer, and
//! dropping the caller drops only that wait. A run's own timeout still bounds
//! how long the task lives.

use std::future::Future;

use code_runner_core::RunnerError;
use serde_json::Value;

use crate::bus::CallError;

/// Runs `call` as a spawned task and waits for its answer; the task goes on
/// (and cleans up after itself) if this future is dropped.
///
/// # Errors
/// The call's own error; `code-runner::engine` if the call panicked.
pub(crate) async fn detached<F>(call: F) -> Result<Value, CallError>
where
    F: Future<Output = Result<Value, CallError>> + Send + 'static,
{
    match tokio::spawn(call).await {
        Ok(answer) => answer,
        Err(err) => {
            tracing::error!("a bus call ended abnormally: {err}");
            Err(RunnerError::engine("the call ended abnormally (see the worker's log)").into())
        }
    }
}
