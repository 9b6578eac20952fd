//! The lines of calls waiting for runtimes: each runtime runs one turn at a
//! time, so calls for it queue, and every waiting call holds its caller's
//! connection. A line is bounded per runtime and all lines together.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use code_runner_core::{ErrorCode, RunnerError};

use super::Lineage;
use crate::ids::RuntimeKey;

/// Calls of a runtime's published functions that may wait for it at once
/// (it runs one turn at a time); one more is `code-runner::capacity`.
pub const MAX_WAITING_CALLS: usize = 64;

/// Calls waiting for kept or namespace runtimes, all runtimes together.
/// Each one holds its caller's connection: without a total, 16 kept
/// runtimes with 64 calls each held all 1024 HTTP connections, for as long
/// as 64 turns take.
pub const MAX_WAITING_CALLS_TOTAL: usize = 256;

/// A place in a runtime's call queue (and in the total); dropping it frees both.
pub struct Waiting(Arc<AtomicUsize>, Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
        self.1.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Lineage {
    /// A place among the calls waiting for the runtime `key`.
    ///
    /// # Errors
    /// `code-runner::capacity` when [`MAX_WAITING_CALLS`] already wait for
    /// it, or [`MAX_WAITING_CALLS_TOTAL`] for all runtimes together;
    /// `None` inside when the runtime is gone.
    pub fn wait_for(&self, key: RuntimeKey) -> Result<Option<Waiting>, RunnerError> {
        let Some(calls) = self.lock().get(&key).map(|node| node.calls.clone()) else {
            return Ok(None);
        };
        self.waiting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_WAITING_CALLS_TOTAL).then_some(n + 1)
            })
            .map_err(|_| {
                RunnerError::new(
                    ErrorCode::Capacity,
                    format!(
                        "{MAX_WAITING_CALLS_TOTAL} calls already wait for busy runtimes on this worker; retry later"
                    ),
                )
            })?;
        calls
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_WAITING_CALLS).then_some(n + 1)
            })
            .map_err(|_| {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                RunnerError::new(
                    ErrorCode::Capacity,
                    format!(
                        "{MAX_WAITING_CALLS} calls already wait for this runtime (its runs and its published functions), which runs one turn at a time; retry later"
                    ),
                )
            })?;
        Ok(Some(Waiting(calls, self.waiting.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::lineage::Lasting;

    /// A runtime's call queue is bounded; a left place is free again; a
    /// gone runtime has no queue.
    #[test]
    fn call_queues_are_bounded() {
        let lineage = Lineage::default();
        let key = lineage.begin(None, Lasting::Yes, 32).unwrap();
        let places: Vec<Waiting> = (0..MAX_WAITING_CALLS)
            .map(|_| lineage.wait_for(key).unwrap().unwrap())
            .collect();
        let err = lineage.wait_for(key).err().unwrap();
        assert_eq!(err.code, ErrorCode::Capacity);
        assert!(err.message.contains("64 calls"), "{}", err.message);
        drop(places);
        assert!(lineage.wait_for(key).unwrap().is_some());
        lineage.end(key);
        assert!(lineage.wait_for(key).unwrap().is_none());
    }

    /// The calls waiting for all runtimes together are bounded too, so
    /// many busy runtimes cannot hold every caller's connection; a refusal
    /// by one runtime's line leaves the total as it was.
    #[test]
    fn waiting_calls_are_bounded_in_total() {
        let lineage = Lineage::default();
        let keys: Vec<RuntimeKey> = (0..8)
            .map(|_| lineage.begin(None, Lasting::Yes, 32).unwrap())
            .collect();
        let mut places = Vec::new();
        for key in &keys[..4] {
            for _ in 0..MAX_WAITING_CALLS {
                places.push(lineage.wait_for(*key).unwrap().unwrap());
            }
        }
        assert_eq!(places.len(), MAX_WAITING_CALLS_TOTAL);
        let err = lineage.wait_for(keys[5]).err().unwrap();
        assert_eq!(err.code, ErrorCode::Capacity);
        assert!(err.message.contains("busy runtimes"), "{}", err.message);
        places.truncate(MAX_WAITING_CALLS_TOTAL - 1);
        let err = lineage.wait_for(keys[0]).err().unwrap();
        assert!(err.message.contains("this runtime"), "{}", err.message);
        assert!(lineage.wait_for(keys[5]).unwrap().is_some());
    }
}
