//! Engine threads, reused from one runtime to the next.
//!
//! A runtime still has a thread to itself for its whole life (its store is
//! made, used and dropped there), but the thread comes from here and comes
//! back once the runtime is over. Starting one per runtime cost every
//! one-shot an `mmap` of its 16 MiB stack and a guard page, `clone`, the
//! faults of a fresh stack, wasmtime's per-thread signal stack and, at exit,
//! `munmap`s that shoot down the TLB of every core the process runs on.
//!
//! What a thread carries from one runtime to the next is nothing a guest can
//! see: a job owns all of its runtime's state (store, WASI context,
//! channels) and drops it before the thread is handed back, and wasm never
//! reads the host stack. A job that panics ends its thread instead of
//! returning it, so a broken turn cannot leave anything behind for the next.
//! Idle threads wait for [`IDLE_TIMEOUT`], then exit; at most [`MAX_IDLE`]
//! wait at once.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::THREAD_STACK_BYTES;

/// What a thread runs: one runtime's life.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle thread waits for its next runtime before it exits: long
/// enough to span a lull between bursts, short enough that a burst's
/// threads (their stacks' touched pages) do not stay resident for good.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Idle threads kept at once; a thread finishing beyond this exits. Twice the
/// default `max_runtimes`: every live runtime holds a thread, so more idle
/// ones than runtimes could never all be used.
const MAX_IDLE: usize = 2 * code_runner_core::DEFAULT_MAX_RUNTIMES;

/// An idle thread: where to hand it a job.
struct Idle {
    id: u64,
    jobs: SyncSender<Job>,
}

/// The process's engine threads.
struct Threads {
    idle: Mutex<Vec<Idle>>,
    next_id: AtomicU64,
}

fn threads() -> &'static Threads {
    static THREADS: OnceLock<Threads> = OnceLock::new();
    THREADS.get_or_init(|| Threads {
        idle: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(0),
    })
}

/// Runs `job` on an idle engine thread, or on a new one (named
/// `code-runner-python`, with a [`THREAD_STACK_BYTES`] stack) when none is idle.
///
/// # Errors
/// The OS refused a new thread.
pub(crate) fn spawn(job: Job) -> std::io::Result<()> {
    let pool = threads();
    let mut job = job;
    loop {
        // The most recently idle thread first: its stack is still warm.
        let idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let Some(idle) = idle else { break };
        match idle.jobs.send(job) {
            Ok(()) => return Ok(()),
            // It exited meanwhile (it cannot: it holds its own sender), try another.
            Err(std::sync::mpsc::SendError(back)) => job = back,
        }
    }
    let id = pool.next_id.fetch_add(1, Ordering::Relaxed);
    let (jobs, inbox) = sync_channel(1);
    std::thread::Builder::new()
        .name("code-runner-python".into())
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || serve(pool, id, &jobs, &inbox, job))
        .map(drop)
}

/// A thread's life: run a job, offer itself, wait for the next.
fn serve(pool: &Threads, id: u64, jobs: &SyncSender<Job>, inbox: &Receiver<Job>, first: Job) {
    let mut job = first;
    loop {
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            // The panic has been reported; whatever it interrupted ends with this thread.
            return;
        }
        {
            let mut idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() >= MAX_IDLE {
                return;
            }
            idle.push(Idle {
                id,
                jobs: jobs.clone(),
            });
        }
        job = match inbox.recv_timeout(IDLE_TIMEOUT) {
            Ok(next) => next,
            Err(RecvTimeoutError::Timeout) => {
                let mut idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(at) = idle.iter().position(|t| t.id == id) {
                    idle.swap_remove(at);
                    return;
                }
                drop(idle);
                // A caller took this thread just now: its job is on the way.
                match inbox.recv() {
                    Ok(next) => next,
                    Err(_) => return,
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished thread serves the next job, and a panicking job does not
    /// take the pool down with it.
    #[test]
    fn threads_are_reused_and_survive_a_panicking_job() {
        let (tx, rx) = std::sync::mpsc::channel();
        let first = tx.clone();
        spawn(Box::new(move || {
            first.send(std::thread::current().id()).ok();
        }))
        .unwrap();
        let a = rx.recv().unwrap();
        // Wait until it is idle again, then hand it another job.
        std::thread::sleep(Duration::from_millis(50));
        let second = tx.clone();
        spawn(Box::new(move || {
            second.send(std::thread::current().id()).ok();
        }))
        .unwrap();
        let b = rx.recv().unwrap();
        assert_eq!(a, b, "an idle thread serves the next job");
        spawn(Box::new(|| panic!("a job that panics"))).unwrap();
        let third = tx.clone();
        spawn(Box::new(move || {
            third.send(std::thread::current().id()).ok();
        }))
        .unwrap();
        rx.recv().unwrap();
    }
}
