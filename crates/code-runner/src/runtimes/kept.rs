//! One kept runtime: what it is (language, lineage key, memory ceiling),
//! its directory, its idle clock and busy count (the reaper and hibernation
//! skip busy runtimes), and what its next answer owes its caller (that its
//! interpreter was lost, or that it was woken from hibernation).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_runner_core::{Lang, Runtime};

use crate::ids::RuntimeKey;
use crate::runtimes::slot::Slot;
use crate::runtimes::workdir::WorkDir;

/// What a kept runtime is, as its keeper files it.
pub struct Held {
    /// Its language.
    pub lang: Lang,
    /// Its lineage key.
    pub key: RuntimeKey,
    /// The engine runtime.
    pub runtime: Arc<dyn Runtime>,
    /// Its memory ceiling in MiB (python; what a hibernated one wakes with).
    pub memory_mb: u64,
    /// Whether its turns keep a checkpoint (python; kept across hibernation).
    pub checkpoint: bool,
}

/// A kept runtime.
pub struct Kept {
    /// Its language.
    pub lang: Lang,
    /// Its lineage key (what it published and started is filed under it).
    pub key: RuntimeKey,
    /// The engine runtime.
    pub runtime: Arc<dyn Runtime>,
    /// Its memory ceiling in MiB.
    pub memory_mb: u64,
    /// Whether its turns keep a checkpoint.
    pub checkpoint: bool,
    last_used: Mutex<Instant>,
    busy: AtomicUsize,
    dir: Mutex<Option<WorkDir>>,
    /// Why its interpreter was lost with a turn, until its next run says so.
    reset: Mutex<Option<String>>,
    /// It was woken from hibernation, until its next run says so.
    woken: AtomicBool,
    /// Hibernation failed for it: not tried again until its next call.
    sleepless: AtomicBool,
    _slot: Slot,
}

impl Kept {
    /// A kept runtime of `held`, its directory `dir`, holding `slot`.
    pub fn new(held: Held, dir: WorkDir, slot: Slot) -> Kept {
        Kept {
            lang: held.lang,
            key: held.key,
            runtime: held.runtime,
            memory_mb: held.memory_mb,
            checkpoint: held.checkpoint,
            last_used: Mutex::new(Instant::now()),
            busy: AtomicUsize::new(0),
            dir: Mutex::new(Some(dir)),
            reset: Mutex::new(None),
            woken: AtomicBool::new(false),
            sleepless: AtomicBool::new(false),
            _slot: slot,
        }
    }

    /// Its host directory (python's `/work`, node's `iii.files`), while it has one.
    pub fn dir_path(&self) -> Option<std::path::PathBuf> {
        let dir = self.dir.lock().unwrap_or_else(|p| p.into_inner());
        dir.as_ref().map(|dir| dir.0.clone())
    }

    /// Closes the runtime (its thread has exited when this returns), then
    /// removes its directory off the async workers.
    pub async fn close(&self) {
        self.runtime.close().await;
        let dir = self.dir.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(dir) = dir {
            dir.remove().await;
        }
    }

    /// Its interpreter was lost with a turn, `because`: the next run says so.
    pub fn mark_reset(&self, because: &str) {
        *self.reset.lock().unwrap_or_else(|p| p.into_inner()) = Some(because.to_string());
    }

    /// Why its interpreter was lost since its last run, if it was (once).
    pub fn take_reset(&self) -> Option<String> {
        self.reset.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// It was woken from hibernation: the next run says so.
    pub fn mark_woken(&self) {
        self.woken.store(true, Ordering::SeqCst);
    }

    /// Whether it was woken since its last run (once).
    pub fn take_woken(&self) -> bool {
        self.woken.swap(false, Ordering::SeqCst)
    }

    /// Hibernation failed for it; not tried again until its next call.
    pub fn mark_sleepless(&self) {
        self.sleepless.store(true, Ordering::SeqCst);
    }

    /// Whether hibernation failed for it since its last call.
    pub fn is_sleepless(&self) -> bool {
        self.sleepless.load(Ordering::SeqCst)
    }

    /// Not busy, and unused for at least `idle`.
    pub fn idle_for(&self, idle: Duration) -> bool {
        self.busy.load(Ordering::SeqCst) == 0
            && self
                .last_used
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed()
                >= idle
    }

    /// Whether a call is in progress.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst) > 0
    }

    /// Marks a call in progress; the reaper and hibernation skip busy runtimes.
    pub fn enter(self: &Arc<Self>) -> BusyGuard {
        self.busy.fetch_add(1, Ordering::SeqCst);
        self.sleepless.store(false, Ordering::SeqCst);
        BusyGuard(self.clone())
    }
}

/// Ends a call on a kept runtime and refreshes its idle clock.
pub struct BusyGuard(Arc<Kept>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        *self.0.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}
