//! Live runtimes: slots, kept runtimes by id, idle reaping.
//!
//! One slot count covers every engine and every runtime, one-shot or kept:
//! a runtime holds its [`Slot`] from boot to close. A run that finds every
//! slot taken waits briefly for one ([`Registry::acquire_waiting`]): a
//! burst a little past `max_runtimes` is served as one-shots end, not
//! refused at once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_runner_core::{ErrorCode, RunnerError};

use crate::ids::RuntimeKey;
use crate::ids::redact;
pub use crate::runtimes::kept::{BusyGuard, Kept};

/// How many reaped or torn-down ids are remembered to answer `expired`.
const REMEMBERED_EXPIRED: usize = 65_536;

/// The longest a run waits for a slot when all are taken.
pub const SLOT_WAIT: Duration = Duration::from_secs(5);

pub use crate::runtimes::kept::Held;
pub use crate::runtimes::slot::Slot;
pub use crate::runtimes::transit::{Passage, Transit};
pub use crate::runtimes::workdir::WorkDir;

/// The capacity error: `used` of `max` slots taken, then `then`.
fn full(used: usize, max: usize, then: &str) -> RunnerError {
    RunnerError::new(
        ErrorCode::Capacity,
        format!("all {used} runtime slots are in use (max_runtimes {max}){then}"),
    )
}

/// The registry of live runtimes.
#[derive(Default)]
pub struct Registry {
    used: Arc<AtomicUsize>,
    /// Woken whenever a slot is freed.
    freed: Arc<tokio::sync::Notify>,
    kept: Mutex<HashMap<String, Arc<Kept>>>,
    expired: Mutex<(HashSet<String>, VecDeque<String>)>,
    /// Kept runtimes on their way to or from hibernation.
    pub transit: Transit,
}

impl Registry {
    /// Takes a slot if fewer than `max` are in use.
    ///
    /// # Errors
    /// `code-runner::capacity` when all `max` slots are taken.
    pub fn acquire(&self, max: usize) -> Result<Slot, RunnerError> {
        self.try_acquire(max)
            .map_err(|used| full(used, max, "; retry later"))
    }

    /// Takes a slot, waiting up to `wait` for one to be freed when all
    /// `max` are taken.
    ///
    /// # Errors
    /// `code-runner::capacity` when none was freed in time.
    pub async fn acquire_waiting(&self, max: usize, wait: Duration) -> Result<Slot, RunnerError> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the count is read, so a slot freed in
            // between wakes this waiter.
            freed.as_mut().enable();
            let used = match self.try_acquire(max) {
                Ok(slot) => return Ok(slot),
                Err(used) => used,
            };
            let waited = format!(
                "; none was freed within {} ms; retry later",
                wait.as_millis()
            );
            tokio::select! {
                () = &mut freed => {}
                () = tokio::time::sleep_until(until) => return Err(full(used, max, &waited)),
            }
        }
    }

    /// A slot, or how many are in use.
    fn try_acquire(&self, max: usize) -> Result<Slot, usize> {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                (used < max).then_some(used + 1)
            })?;
        Ok(Slot::new(self.used.clone(), self.freed.clone()))
    }

    /// Slots in use.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// Kept runtimes.
    pub fn kept_count(&self) -> usize {
        self.lock_kept().len()
    }

    /// Keeps `runtime` (lineage key `key`, its memory ceiling `memory_mb`) under `id`.
    pub fn keep(&self, id: String, held: Held, dir: WorkDir, slot: Slot) -> Arc<Kept> {
        let kept = Arc::new(Kept::new(held, dir, slot));
        tracing::debug!(runtime = %redact(&id), "runtime kept");
        self.lock_kept().insert(id, kept.clone());
        kept
    }

    /// Whether `kept` is still the runtime kept under `id` (hibernation
    /// may have taken it between a lookup and its call's start).
    pub fn is_current(&self, id: &str, kept: &Arc<Kept>) -> bool {
        self.lock_kept()
            .get(id)
            .is_some_and(|now| Arc::ptr_eq(now, kept))
    }

    /// Takes out every kept runtime idle for at least `after`, not busy,
    /// that `eligible` accepts, each marked in transit
    /// within the same lock (so a call for it waits for it, never finds it
    /// missing); the caller hibernates each or puts it back.
    pub fn take_sleepy(
        &self,
        after: Duration,
        eligible: impl Fn(&str, &Kept) -> bool,
    ) -> Vec<(String, Arc<Kept>, Passage)> {
        let mut kept = self.lock_kept();
        let ids: Vec<String> = kept
            .iter()
            .filter(|(id, k)| k.idle_for(after) && eligible(id, k))
            .map(|(id, _)| id.clone())
            .collect();
        ids.into_iter()
            .filter_map(|id| {
                let passage = self.transit.begin(&id)?;
                kept.remove(&id).map(|k| (id, k, passage))
            })
            .collect()
    }

    /// Whether a call is in progress on any kept runtime.
    pub fn any_busy(&self) -> bool {
        self.lock_kept().values().any(|k| k.is_busy())
    }

    /// Files `kept` under `id` again (its hibernation failed).
    pub fn put_back(&self, id: String, kept: Arc<Kept>) {
        self.lock_kept().insert(id, kept);
    }

    /// The kept runtime `id`.
    ///
    /// # Errors
    /// `code-runner::expired` for a reaped or torn-down id,
    /// `code-runner::runtime_not_found` for one never issued.
    pub fn get(&self, id: &str) -> Result<Arc<Kept>, RunnerError> {
        if let Some(kept) = self.lock_kept().get(id) {
            return Ok(kept.clone());
        }
        Err(self.missing(id))
    }

    fn missing(&self, id: &str) -> RunnerError {
        if self.lock_expired().0.contains(id) {
            RunnerError::new(
                ErrorCode::Expired,
                format!(
                    "runtime {} was reaped or torn down; start a new one",
                    redact(id)
                ),
            )
        } else {
            RunnerError::new(
                ErrorCode::RuntimeNotFound,
                format!("no runtime {}", redact(id)),
            )
        }
    }

    /// Removes `id`, closes its runtime (stopping a turn in flight) and frees
    /// its slot; returns it, for the caller to retire what it published.
    ///
    /// # Errors
    /// As [`Registry::get`].
    pub async fn remove(&self, id: &str) -> Result<Arc<Kept>, RunnerError> {
        let kept = self
            .lock_kept()
            .remove(id)
            .ok_or_else(|| self.missing(id))?;
        self.remember_expired(id);
        kept.close().await;
        tracing::debug!(runtime = %redact(id), "runtime torn down");
        Ok(kept)
    }

    /// Removes the kept runtime whose lineage key is `key`, without closing it.
    pub fn take_by_key(&self, key: RuntimeKey) -> Option<Arc<Kept>> {
        let mut kept = self.lock_kept();
        let id = kept.iter().find(|(_, k)| k.key == key)?.0.clone();
        let found = kept.remove(&id);
        drop(kept);
        self.remember_expired(&id);
        found
    }

    /// Marks a call in progress on the kept runtime `key`, if it is kept.
    pub fn enter_by_key(&self, key: RuntimeKey) -> Option<BusyGuard> {
        let kept = self.lock_kept().values().find(|k| k.key == key).cloned()?;
        Some(kept.enter())
    }

    /// Takes every kept runtime idle for at least `ttl` out of the registry
    /// (their ids answer `expired` from now on); the caller retires and closes them.
    pub fn take_idle(&self, ttl: Duration) -> Vec<(String, Arc<Kept>)> {
        let mut kept = self.lock_kept();
        let ids: Vec<String> = kept
            .iter()
            .filter(|(_, k)| k.idle_for(ttl))
            .map(|(id, _)| id.clone())
            .collect();
        // Every reaped id answers `expired` from now on, not only once
        // the runtimes before it in this sweep have closed.
        ids.into_iter()
            .filter_map(|id| kept.remove(&id).map(|k| (id, k)))
            .inspect(|(id, _)| self.remember_expired(id))
            .collect()
    }

    /// Closes every kept runtime (shutdown); returns them.
    pub async fn close_all(&self) -> Vec<Arc<Kept>> {
        let all: Vec<Arc<Kept>> = self.lock_kept().drain().map(|(_, k)| k).collect();
        for kept in &all {
            kept.close().await;
        }
        all
    }

    /// Remembers `id` as ended, so it answers `code-runner::expired`.
    pub fn remember_expired(&self, id: &str) {
        let mut expired = self.lock_expired();
        if expired.0.insert(id.to_string()) {
            expired.1.push_back(id.to_string());
        }
        while expired.1.len() > REMEMBERED_EXPIRED {
            if let Some(old) = expired.1.pop_front() {
                expired.0.remove(&old);
            }
        }
    }

    fn lock_kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Kept>>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_expired(&self) -> std::sync::MutexGuard<'_, (HashSet<String>, VecDeque<String>)> {
        self.expired.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One count for every runtime: the slot past `max` is refused, a freed one reused.
    #[test]
    fn slots_are_counted_and_freed() {
        let registry = Registry::default();
        let a = registry.acquire(2).unwrap();
        let _b = registry.acquire(2).unwrap();
        let err = registry.acquire(2).unwrap_err();
        assert_eq!(err.code, ErrorCode::Capacity);
        drop(a);
        assert!(registry.acquire(2).is_ok());
    }

    /// Unknown ids and forgotten ids answer differently.
    #[test]
    fn missing_ids_are_not_found_or_expired() {
        let registry = Registry::default();
        assert_eq!(
            registry.get("rt_nope").err().unwrap().code,
            ErrorCode::RuntimeNotFound
        );
        registry.remember_expired("rt_oldoldoldold");
        let err = registry.get("rt_oldoldoldold").err().unwrap();
        assert_eq!(err.code, ErrorCode::Expired);
        assert!(!err.message.contains("rt_oldoldoldold"), "{}", err.message);
    }
}
