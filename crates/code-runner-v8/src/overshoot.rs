//! The process-wide bound on room granted past a heap cap.
//!
//! V8 cannot refuse an allocation once a heap is full (that is its fatal
//! out-of-memory abort of the whole process), so the near-heap-limit
//! callback grants room for one largest object past what the heap holds and
//! condemns the isolate ([`crate::heap::near_heap_limit`]): up to ~1 GiB past
//! a runtime's cap, until the condemned isolate is dropped. That room is one
//! process-wide permit: a runtime whose heap fills while another holds it
//! waits in its callback until the other's isolate is gone, so the runtimes
//! of one process hold at most one such grant at a time, however many fill
//! their heaps at once.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The longest a full heap waits for the permit. A holder gives it back as
/// soon as its turn unwinds and its isolate is dropped (well under a second
/// even for a 1 GiB string); past this the grant is made anyway, because
/// waiting forever would hang a runtime thread if that ever went wrong.
const MAX_WAIT: Duration = Duration::from_secs(30);

struct Gate {
    taken: Mutex<bool>,
    freed: Condvar,
}

static GATE: Gate = Gate {
    taken: Mutex::new(false),
    freed: Condvar::new(),
};

/// Held by a condemned isolate's heap guard until the isolate is dropped.
pub struct Permit {
    /// False when the wait timed out: nothing to give back.
    held: bool,
}

/// Waits (at most [`MAX_WAIT`]) until no other runtime holds the permit, then takes it.
pub fn acquire() -> Permit {
    let deadline = Instant::now() + MAX_WAIT;
    let mut taken = GATE.taken.lock().unwrap_or_else(|p| p.into_inner());
    while *taken {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::error!(
                "a runtime's heap filled while another's grant past its cap was not given back for {} s; granting it anyway",
                MAX_WAIT.as_secs()
            );
            return Permit { held: false };
        }
        taken = GATE
            .freed
            .wait_timeout(taken, left)
            .map(|(guard, _)| guard)
            .unwrap_or_else(|p| p.into_inner().0);
    }
    *taken = true;
    Permit { held: true }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.held {
            *GATE.taken.lock().unwrap_or_else(|p| p.into_inner()) = false;
            GATE.freed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second holder waits until the first gives the permit back.
    #[test]
    fn one_holder_at_a_time() {
        let first = acquire();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let second = acquire();
            tx.send(()).unwrap();
            drop(second);
        });
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        drop(first);
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the waiter takes the permit once it is free");
        waiter.join().unwrap();
    }
}
