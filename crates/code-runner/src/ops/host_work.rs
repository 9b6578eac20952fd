//! Host-thread work a caller's input decides (`describe`'s declarations,
//! `engine::functions::info`'s answer): a few jobs at a time in the whole
//! process, each waiting for its place only as long as its caller does.
//!
//! Guest code can ask for such work in a loop (`Promise.all` of a thousand
//! `describe` calls), and every job is a thread of tokio's blocking pool
//! while it runs. Each is bounded by its own rules (describe: 256 KiB of
//! answer and 2000 subschemas per function; info: 1000 ids); this bounds how
//! many run at once, so one tenant's burst queues behind itself. A guest's
//! wait ends with its turn (its deadline, or its scope firing); a host's
//! when its request is dropped. `iii.fn`'s schema checks have their own
//! threads and places ([`crate::ops::guest`]'s `check`).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use code_runner_core::{ErrorCode, RunnerError};
use tokio::sync::Semaphore;

use crate::bus::Caller;

/// Jobs of this kind running at once in the process.
pub const MAX_HOST_JOBS: usize = 4;

static PLACES: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(MAX_HOST_JOBS)));

/// Runs `job` on the blocking pool once a place is free, for `caller`.
///
/// # Errors
/// `code-runner::timeout` when a guest's turn ended first; `engine` when the
/// job panicked (`what` names it).
pub(crate) async fn run<T: Send + 'static>(
    caller: &Caller,
    what: &str,
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RunnerError> {
    let ended = || match &caller.guest {
        Some(guest) => guest.scope.is_aborted() || caller.time_left() == Some(Duration::ZERO),
        None => false,
    };
    let place = tokio::select! {
        place = PLACES.clone().acquire_owned() => place.ok(),
        () = async {
            while !ended() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        } => None,
    };
    let Some(place) = place else {
        return Err(RunnerError::new(
            ErrorCode::Timeout,
            format!("the calling turn ended while {what} waited for a place"),
        ));
    };
    tokio::task::spawn_blocking(move || {
        let _place = place;
        job()
    })
    .await
    .map_err(|err| RunnerError::engine(format!("{what} failed: {err}")))
}
