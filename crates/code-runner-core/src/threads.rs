//! Engine threads, reused from one runtime to the next.
//!
//! A runtime still has a thread to itself for its whole life (its store or
//! isolate is made, used and dropped there), but the thread comes from an
//! engine's [`EngineThreads`] and goes back once the runtime is over.
//! Starting one per runtime cost every one-shot an `mmap` of its stack and a
//! guard page, `clone`, the faults of a fresh stack, the engine's per-thread
//! set-up (wasmtime's signal stack, V8's per-thread data) and, at exit,
//! `munmap`s that shoot down the TLB of every core the process runs on.
//!
//! What a thread carries from one runtime to the next is nothing a guest can
//! see: a job owns all of its runtime's state (store or isolate, channels)
//! and drops it before the thread is handed back, and guest code never reads
//! the host stack. A job that panics ends its thread instead of returning
//! it, so a broken runtime cannot leave anything behind for the next. Idle
//! threads wait for [`IDLE_TIMEOUT`], then exit; at most [`MAX_IDLE`] wait
//! at once, per engine, and each holds at most [`KEPT_STACK`] of touched
//! stack while it waits: a runtime that went deep (a long recursion, a
//! deeply nested TypeScript source) leaves the rest zeroed and unbacked.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::Duration;

/// What a thread runs: one runtime's life.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle thread waits for its next runtime before it exits: long
/// enough to span a lull between bursts, short enough that a burst's
/// threads (their stacks' touched pages) do not stay resident for good.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Idle threads kept at once per engine; a thread finishing beyond this
/// exits. Twice the default `max_runtimes`: every live runtime holds a
/// thread, so more idle ones than runtimes could never all be used.
pub const MAX_IDLE: usize = 2 * crate::DEFAULT_MAX_RUNTIMES;

/// The touched stack an idle thread keeps resident: what a typical runtime
/// reaches (V8 stops JavaScript at about 1 MiB), so that giving back the rest
/// usually finds nothing there to give back. Deeper pages are dropped after
/// each job.
pub const KEPT_STACK: usize = 2 << 20;

/// An idle thread: where to hand it a job.
struct Idle {
    id: u64,
    jobs: SyncSender<Job>,
}

/// One engine's threads, all with the same name and stack size; a `static`.
pub struct EngineThreads {
    name: &'static str,
    stack_bytes: usize,
    idle: Mutex<Vec<Idle>>,
    next_id: AtomicU64,
}

impl EngineThreads {
    /// No threads yet; they start as runtimes need them, named `name`, with
    /// `stack_bytes` of stack.
    pub const fn new(name: &'static str, stack_bytes: usize) -> Self {
        EngineThreads {
            name,
            stack_bytes,
            idle: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        }
    }

    /// Runs `job` on an idle thread of this engine, or on a new one when
    /// none is idle.
    ///
    /// # Errors
    /// The OS refused a new thread.
    pub fn spawn(&'static self, job: Job) -> std::io::Result<()> {
        let mut job = job;
        loop {
            // The most recently idle thread first: its stack is still warm.
            let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let Some(idle) = idle else { break };
            match idle.jobs.send(job) {
                Ok(()) => return Ok(()),
                // It exited meanwhile (it cannot: it holds its own receiver), try another.
                Err(std::sync::mpsc::SendError(back)) => job = back,
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (jobs, inbox) = sync_channel(1);
        std::thread::Builder::new()
            .name(self.name.into())
            .stack_size(self.stack_bytes)
            .spawn(move || self.serve(id, &jobs, &inbox, job))
            .map(drop)
    }

    /// How many threads wait for a job now.
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// A thread's life: run a job, offer itself, wait for the next.
    fn serve(&self, id: u64, jobs: &SyncSender<Job>, inbox: &Receiver<Job>, first: Job) {
        let deep = DeepStack::below_here(self.stack_bytes);
        let mut job = first;
        loop {
            if catch_unwind(AssertUnwindSafe(job)).is_err() {
                // The panic has been reported; whatever it interrupted ends with this thread.
                return;
            }
            deep.give_back();
            {
                let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
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
                    let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
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
}

/// The part of a thread's stack deeper than [`KEPT_STACK`] below the
/// thread's outermost loop: no frame lives there between jobs.
struct DeepStack {
    start: usize,
    len: usize,
}

impl DeepStack {
    /// The range of the calling thread's stack from [`KEPT_STACK`] below the
    /// caller's frame down to near the bottom of a `stack_bytes` stack.
    /// Rust's threads have at least `stack_bytes` below their first frame
    /// (it adds the TLS and the minimum to the size it asks for); a 64 KiB
    /// margin covers the frames above this one. Both ends are aligned to
    /// 64 KiB, a multiple of every page size Linux uses (no need to ask the
    /// kernel, which a confined sandbox process may not let us).
    fn below_here(stack_bytes: usize) -> DeepStack {
        const MARGIN: usize = 64 << 10;
        const ALIGN: usize = 64 << 10;
        let marker = 0u8;
        let here = std::ptr::addr_of!(marker) as usize;
        let high = here.saturating_sub(KEPT_STACK) & !(ALIGN - 1);
        let low = here
            .saturating_sub(stack_bytes)
            .saturating_add(MARGIN)
            .next_multiple_of(ALIGN);
        DeepStack {
            start: low,
            len: high.saturating_sub(low),
        }
    }

    /// Drops whatever of the range a job touched (`MADV_DONTNEED`: the pages
    /// read as zeros when touched again). Untouched, the range costs one
    /// system call that finds nothing; a failure only leaves pages resident.
    fn give_back(&self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: the range lies within this thread's own stack, more than
        // KEPT_STACK below the frame of its outermost loop, which is where
        // this runs: every frame that was ever deeper has returned, so
        // nothing there is live, and private anonymous pages given back read
        // as zeros when the next job's frames reach them.
        let _ = unsafe {
            rustix::mm::madvise(
                self.start as *mut std::ffi::c_void,
                self.len,
                rustix::mm::Advice::LinuxDontNeed,
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static THREADS: EngineThreads = EngineThreads::new("engine-threads-test", 1 << 20);

    /// Waits (a bounded while) until `n` threads are idle.
    fn until_idle(n: usize) {
        for _ in 0..2000 {
            if THREADS.idle_count() >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("no thread came back idle");
    }

    /// Runs a job on `THREADS` that answers where it ran: its thread's id and name.
    fn ran_on() -> (std::thread::ThreadId, Option<String>) {
        let (tx, rx) = std::sync::mpsc::channel();
        THREADS
            .spawn(Box::new(move || {
                let me = std::thread::current();
                drop(tx.send((me.id(), me.name().map(str::to_owned))));
            }))
            .unwrap();
        rx.recv().unwrap()
    }

    /// A finished thread serves the next job, and a panicking job does not
    /// take the pool down with it: its thread ends, the next job gets a new one.
    #[test]
    fn threads_are_reused_and_survive_a_panicking_job() {
        let (a, name) = ran_on();
        assert_eq!(name.as_deref(), Some("engine-threads-test"));
        until_idle(1);
        let (b, _) = ran_on();
        assert_eq!(a, b, "an idle thread serves the next job");
        until_idle(1);
        // The panicking job takes the one idle thread and ends it.
        THREADS
            .spawn(Box::new(|| panic!("a job that panics")))
            .unwrap();
        let (c, name) = ran_on();
        assert_ne!(c, a, "the next job runs on a new thread");
        assert_eq!(name.as_deref(), Some("engine-threads-test"));
    }

    static DEEP: EngineThreads = EngineThreads::new("engine-threads-deep", 16 << 20);

    /// Resident KiB of the mapping that holds `address`, from `/proc/self/smaps`.
    fn resident_kib_around(address: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((start, end)) = range.split_once('-')
                && let (Ok(start), Ok(end)) = (
                    usize::from_str_radix(start, 16),
                    usize::from_str_radix(end, 16),
                )
            {
                inside = (start..end).contains(&address);
                continue;
            }
            if inside && let Some(kib) = line.strip_prefix("Rss:") {
                return kib.trim().trim_end_matches(" kB").trim().parse().unwrap();
            }
        }
        panic!("no mapping holds {address:#x}");
    }

    /// A job that went 12 MiB deep leaves its thread holding at most
    /// KEPT_STACK of stack (and a little) once it waits for the next job.
    #[test]
    fn an_idle_thread_gives_back_the_deep_stack_a_job_touched() {
        let (tx, rx) = std::sync::mpsc::channel();
        DEEP.spawn(Box::new(move || {
            let mut deep = [0u8; 12 << 20];
            for page in deep.chunks_mut(4096) {
                page[0] = 1;
            }
            std::hint::black_box(&mut deep);
            let address = deep.as_ptr() as usize;
            let touched = resident_kib_around(address);
            tx.send((address, touched)).ok();
        }))
        .unwrap();
        let (address, touched) = rx.recv().unwrap();
        assert!(touched >= 12 << 10, "the job touched {touched} KiB");
        for _ in 0..2000 {
            if DEEP.idle_count() == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(DEEP.idle_count(), 1);
        let kept = resident_kib_around(address);
        // KEPT_STACK and the frames above it, with room for a transparent
        // huge page at each end where THP is `always`; 12 MiB if nothing
        // was given back.
        assert!(
            kept <= (KEPT_STACK as u64 >> 10) + (3 << 10),
            "an idle thread still holds {kept} KiB of stack"
        );
    }
}
