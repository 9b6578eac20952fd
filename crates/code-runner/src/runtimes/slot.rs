//! A runtime slot: one of `max_runtimes`, held from a runtime's boot to
//! its close; dropping it frees the slot and wakes a run waiting for one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A held runtime slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    used: Arc<AtomicUsize>,
    freed: Arc<tokio::sync::Notify>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.used.fetch_sub(1, Ordering::SeqCst);
        self.freed.notify_waiters();
    }
}

impl Slot {
    /// A slot counted in `used`; `freed` is woken when it is dropped.
    pub(crate) fn new(used: Arc<AtomicUsize>, freed: Arc<tokio::sync::Notify>) -> Slot {
        Slot { used, freed }
    }
}
