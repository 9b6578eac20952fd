//! A runtime's share of egress: requests per turn and requests in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::model::{EgressError, Kind, Policy};

/// One runtime's counters. The turn count starts again at each turn
/// ([`Gate::start_turn`]); the in-flight cap holds across turns (a kept
/// runtime's requests that outlive a turn still count).
#[derive(Debug)]
pub struct Gate {
    turn_requests: AtomicU32,
    in_flight: Arc<Semaphore>,
    in_flight_cap: u32,
}

/// A request's place in flight; dropping it frees the place.
#[derive(Debug)]
pub struct Permit {
    _permit: OwnedSemaphorePermit,
}

/// The most requests in flight one runtime may ever have, whatever the
/// configuration says.
const HARD_IN_FLIGHT: u32 = 64;

impl Default for Gate {
    fn default() -> Self {
        Gate::new()
    }
}

impl Gate {
    /// A gate with no request made.
    pub fn new() -> Gate {
        Gate {
            turn_requests: AtomicU32::new(0),
            in_flight: Arc::new(Semaphore::new(HARD_IN_FLIGHT as usize)),
            in_flight_cap: HARD_IN_FLIGHT,
        }
    }

    /// A new turn: its requests are counted from zero.
    pub fn start_turn(&self) {
        self.turn_requests.store(0, Ordering::SeqCst);
    }

    /// Lets one more request go, or says which cap it is past.
    pub fn admit(&self, policy: &Policy) -> Result<Permit, EgressError> {
        let cap = policy.max_in_flight.clamp(1, self.in_flight_cap);
        let open = self.in_flight_cap as usize - self.in_flight.available_permits();
        let permit = (open < cap as usize)
            .then(|| self.in_flight.clone().try_acquire_owned().ok())
            .flatten()
            .ok_or_else(|| {
                EgressError::new(
                    None,
                    Kind::TooMany,
                    format!(
                        "{cap} requests are already in flight, the most egress_max_in_flight allows a runtime; await one first"
                    ),
                )
            })?;
        let made = self.turn_requests.fetch_add(1, Ordering::SeqCst);
        if made >= policy.max_requests {
            return Err(EgressError::new(
                None,
                Kind::TooMany,
                format!(
                    "this run already made {} requests, the most egress_max_requests allows per run",
                    policy.max_requests
                ),
            ));
        }
        Ok(Permit { _permit: permit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the per-turn count and the in-flight cap a request is refused;
    /// a new turn and a finished request make room again.
    #[test]
    fn counts_per_turn_and_in_flight() {
        let policy = Policy {
            max_requests: 3,
            max_in_flight: 2,
            ..Policy::default()
        };
        let gate = Gate::new();
        let a = gate.admit(&policy).unwrap();
        let _b = gate.admit(&policy).unwrap();
        let err = gate.admit(&policy).unwrap_err();
        assert!(err.reason.contains("in flight"), "{err}");
        drop(a);
        drop(gate.admit(&policy).unwrap());
        let err = gate.admit(&policy).unwrap_err();
        assert!(err.reason.contains("egress_max_requests"), "{err}");
        gate.start_turn();
        gate.admit(&policy).unwrap();
    }
}
