//! A turn's clock: the time a turn has used of its budget, which stands
//! still while one of its binding calls waits for a person (an approval).
//!
//! Engines measure a turn's deadline as `base` moved by the time the clock
//! stood still ([`TurnClock::due`]); a binding that suspends the turn calls
//! [`TurnClock::pause`] and [`TurnClock::resume`] around its wait. While the
//! clock stands still an idle turn is not ended for its time; code that
//! runs meanwhile (a JavaScript timer) still runs against the deadline as
//! it was when the clock stopped, so a suspension never buys CPU.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Called with `true` when the clock stops and `false` when it runs again.
type Listener = Arc<dyn Fn(bool) + Send + Sync>;

/// A pausable clock shared by a turn's engine and its bindings.
#[derive(Clone, Default)]
pub struct TurnClock(Arc<Inner>);

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    listener: Mutex<Option<Listener>>,
}

#[derive(Default, Clone, Copy)]
struct State {
    /// Since when the clock stands still, while it does.
    paused_since: Option<Instant>,
    /// How long it stood still before, in total.
    stood: Duration,
}

impl fmt::Debug for TurnClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("TurnClock")
            .field("paused", &state.paused_since.is_some())
            .field("stood", &state.stood)
            .finish()
    }
}

impl TurnClock {
    /// A running clock that has never stood still.
    pub fn new() -> Self {
        TurnClock::default()
    }

    fn state(&self) -> State {
        *self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self, paused: bool) {
        let listener = self
            .0
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(listener) = listener {
            listener(paused);
        }
    }

    /// Stops the clock; `false` when it already stood still.
    pub fn pause(&self) -> bool {
        let stopped = {
            let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
            let was = state.paused_since.is_none();
            state.paused_since.get_or_insert_with(Instant::now);
            was
        };
        if stopped {
            self.notify(true);
        }
        stopped
    }

    /// Runs the clock again, adding the time it stood still; how long that was.
    pub fn resume(&self) -> Duration {
        let stood = {
            let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
            let Some(since) = state.paused_since.take() else {
                return Duration::ZERO;
            };
            let stood = since.elapsed();
            state.stood += stood;
            stood
        };
        self.notify(false);
        stood
    }

    /// Whether the clock stands still now.
    pub fn is_paused(&self) -> bool {
        self.state().paused_since.is_some()
    }

    /// How long the clock stood still in total, pauses that ended only.
    pub fn stood(&self) -> Duration {
        self.state().stood
    }

    /// The deadline `base` (set when the clock started) moved by the time
    /// the clock stood still: the deadline for code that runs, which a
    /// pause in progress does not move.
    pub fn deadline(&self, base: Instant) -> Instant {
        base + self.stood()
    }

    /// Whether a turn whose deadline was `base` is out of time at `now`
    /// while it waits: never while the clock stands still.
    pub fn past(&self, base: Instant, now: Instant) -> bool {
        let state = self.state();
        state.paused_since.is_none() && now >= base + state.stood
    }

    /// Calls `listener` whenever the clock stops (`true`) or runs again
    /// (`false`); one listener, the last one set.
    pub fn on_change(&self, listener: impl Fn(bool) + Send + Sync + 'static) {
        *self.0.listener.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(listener));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pause moves the deadline by its length once it ends; while it
    /// lasts, the turn is never past its deadline, but running code's
    /// deadline stays where it was.
    #[test]
    fn a_pause_moves_the_deadline_by_its_length() {
        let clock = TurnClock::new();
        let base = Instant::now();
        assert!(clock.past(base, base));
        assert!(clock.pause());
        assert!(!clock.pause());
        assert!(!clock.past(base, base + Duration::from_secs(3600)));
        assert_eq!(clock.deadline(base), base);
        std::thread::sleep(Duration::from_millis(20));
        let stood = clock.resume();
        assert!(stood >= Duration::from_millis(20));
        assert_eq!(clock.deadline(base), base + stood);
        assert!(!clock.past(base, base + stood / 2));
        assert!(clock.past(base, base + stood));
        assert_eq!(clock.resume(), Duration::ZERO);
    }

    /// The listener hears each stop and start once.
    #[test]
    fn the_listener_hears_each_change() {
        let clock = TurnClock::new();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        clock.on_change(move |paused| log.lock().unwrap().push(paused));
        clock.pause();
        clock.pause();
        clock.resume();
        clock.resume();
        assert_eq!(*heard.lock().unwrap(), vec![true, false]);
    }
}
