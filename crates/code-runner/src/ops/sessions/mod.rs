//! Sessions that outlive one runtime (issues 47 and 48).
//!
//! - [`explicit`]: `code-runner::snapshot` and `code-runner::restore`, a
//!   host's fork of a kept runtime (python's by memory, node's by ledger);
//! - [`hibernate`]: an idle kept runtime written to the store and closed,
//!   its slot freed, woken under the same id by its next call (on this
//!   worker after a restart, or on another that shares the store); at
//!   shutdown every kept runtime that can be is hibernated;
//! - [`seal`]: a kept runtime's state to sealed bytes and back.
//!
//! This module decides where snapshots live and with which keys: the
//! store is `snapshot_store` (the data directory by default, or an object
//! store several workers share) and the keys are `snapshot_keys_file`
//! (`<data-dir>/snapshot-keys` by default), both opened at first use. What
//! a snapshot holds and who may load it: docs/security.md#snapshots.

pub(crate) mod explicit;
pub(crate) mod hibernate;
mod seal;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use code_runner_core::{Config, ErrorCode, RunnerError};
use code_runner_snapshot::{Bounds, Keys, Store};

pub(crate) use explicit::functions;

/// The worker's snapshot keys and store, opened at their first use.
#[derive(Debug)]
pub(crate) struct Sessions {
    data_dir: PathBuf,
    keys: OnceLock<Result<Keys, String>>,
    store: OnceLock<Result<Store, String>>,
    /// The worker is shutting down: no new runs, no wakes.
    draining: AtomicBool,
    /// Runs being answered.
    in_flight: AtomicUsize,
    /// When hibernated sessions were last checked against `session_ttl_secs`.
    swept: Mutex<Option<Instant>>,
}

impl Sessions {
    /// The sessions of the data directory `data_dir`.
    pub(crate) fn new(data_dir: &std::path::Path) -> Sessions {
        Sessions {
            data_dir: data_dir.to_path_buf(),
            keys: OnceLock::new(),
            store: OnceLock::new(),
            draining: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            swept: Mutex::new(None),
        }
    }

    /// Counts a run in flight until the guard drops (shutdown waits for them).
    pub(crate) fn track_run(&self) -> RunInFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        RunInFlight(&self.in_flight)
    }

    /// Runs in flight (answered or suspended ones are not).
    pub(crate) fn runs_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// From now on new runs are refused: the worker is shutting down.
    pub(crate) fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Refuses a new run while the worker shuts down.
    ///
    /// # Errors
    /// `capacity`, saying so (another worker, or this one restarted, takes it).
    pub(crate) fn refuse_if_draining(&self) -> Result<(), RunnerError> {
        match self.draining.load(Ordering::SeqCst) {
            true => Err(RunnerError::new(
                ErrorCode::Capacity,
                "this worker is shutting down (its kept runtimes are being hibernated); retry shortly",
            )),
            false => Ok(()),
        }
    }

    fn keys(&self, config: &Config) -> Result<&Keys, RunnerError> {
        self.keys
            .get_or_init(|| match &config.snapshot_keys_file {
                Some(file) => Keys::load_or_create_at(std::path::Path::new(file)),
                None => Keys::load_or_create(&self.data_dir),
            })
            .as_ref()
            .map_err(|why| RunnerError::engine(format!("the snapshot keys: {why}")))
    }

    fn store(&self, config: &Config) -> Result<&Store, RunnerError> {
        self.store
            .get_or_init(|| {
                let store = Store::open(&config.snapshot_store, &self.data_dir);
                if let Ok(store) = &store {
                    tracing::info!(store = %store.describe(), "snapshot store opened");
                }
                store
            })
            .as_ref()
            .map_err(|why| RunnerError::engine(format!("the snapshot store: {why}")))
    }

    /// Whether the store is shared with other workers (configured), rather
    /// than this worker's own data directory.
    fn shared(config: &Config) -> bool {
        !config.snapshot_store.is_empty()
    }
}

/// A run in flight; dropping it ends the count.
pub(crate) struct RunInFlight<'a>(&'a AtomicUsize);

impl Drop for RunInFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a stored snapshot is held to when it is read and opened.
/// What a kept node runtime's turn ledger may hold, from the configuration:
/// `max_snapshot_mb`, and no more than its heap (`heap_mb`), since the
/// ledger is host memory beside the isolate's own; `reseed`: a restored
/// runtime draws fresh random numbers after its replay (a fork).
pub(crate) fn ledger_options(config: &Config, reseed: bool) -> code_runner_core::LedgerOptions {
    code_runner_core::LedgerOptions {
        max_bytes: config
            .max_snapshot_mb
            .min(config.heap_mb)
            .saturating_mul(1 << 20),
        max_replay_ms: config.max_replay_ms,
        reseed,
    }
}

fn bounds(config: &Config) -> Bounds {
    let max = config.max_snapshot_mb.saturating_mul(1 << 20);
    // Pages compress well; what they expand to is bounded by the memory a
    // runtime may have, with /work beside it.
    let raw = (config.max_memory_mb.saturating_mul(1 << 20)).saturating_add(1 << 30);
    Bounds {
        max_stored: max,
        max_raw: raw.max(max),
    }
}
