//! What the node engine's live runtimes hold, for an operator's gauges
//! ([`code_runner_core::Engine::stats`]): how many are live (pooled ones
//! included), and the V8 heap each used at its last turn's peak, summed.
//! Counted on the runtimes' handles, not their threads: a turn's answer
//! already carries its peak, so nothing reads the isolate again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The engine's sums, shared by its clones.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    live: AtomicU64,
    heap: AtomicU64,
}

impl Gauge {
    /// Runtimes live now, and the heap bytes their last turns peaked at.
    pub(crate) fn read(&self) -> (u64, u64) {
        (
            self.live.load(Ordering::Relaxed),
            self.heap.load(Ordering::Relaxed),
        )
    }
}

/// One runtime's part of the [`Gauge`], taken off when it is dropped.
#[derive(Debug)]
pub(crate) struct Counted {
    gauge: Arc<Gauge>,
    heap: AtomicU64,
}

impl Counted {
    /// A live runtime counted in `gauge`.
    pub(crate) fn new(gauge: &Arc<Gauge>) -> Counted {
        gauge.live.fetch_add(1, Ordering::Relaxed);
        Counted {
            gauge: gauge.clone(),
            heap: AtomicU64::new(0),
        }
    }

    /// A turn of this runtime peaked at `peak` heap bytes.
    pub(crate) fn turned(&self, peak: u64) {
        let before = self.heap.swap(peak, Ordering::Relaxed);
        self.gauge.heap.fetch_add(peak, Ordering::Relaxed);
        self.gauge.heap.fetch_sub(before, Ordering::Relaxed);
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.gauge.live.fetch_sub(1, Ordering::Relaxed);
        self.gauge
            .heap
            .fetch_sub(self.heap.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_counts_while_it_lives_and_its_last_peak_only() {
        let gauge = Arc::new(Gauge::default());
        let a = Counted::new(&gauge);
        let b = Counted::new(&gauge);
        a.turned(100);
        a.turned(40);
        b.turned(7);
        assert_eq!(gauge.read(), (2, 47));
        drop(a);
        assert_eq!(gauge.read(), (1, 7));
        drop(b);
        assert_eq!(gauge.read(), (0, 0));
    }
}
