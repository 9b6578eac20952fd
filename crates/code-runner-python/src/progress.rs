//! What a python engine being loaded is doing now: the long, once-per-machine
//! steps (pre-initialising the data image, compiling it or the lean
//! snapshot, installing the operator's packages), for whoever waits on it
//! (a worker that answers before its python is ready says what it waits for).

use std::sync::Mutex;
use std::time::{Duration, Instant};

static STEP: Mutex<Option<(String, Instant)>> = Mutex::new(None);

/// The step in progress and how long it has taken so far, if one is.
pub fn step() -> Option<(String, Duration)> {
    let step = STEP.lock().unwrap_or_else(|p| p.into_inner());
    step.as_ref()
        .map(|(what, since)| (what.clone(), since.elapsed()))
}

/// A step in progress until dropped.
pub(crate) struct Step;

impl Step {
    /// `what` is in progress (e.g. "pre-initialising the data image").
    pub(crate) fn begin(what: &str) -> Step {
        *STEP.lock().unwrap_or_else(|p| p.into_inner()) = Some((what.to_string(), Instant::now()));
        Step
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        *STEP.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}
