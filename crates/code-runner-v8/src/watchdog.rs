//! Stopping JavaScript that does not yield: one process-wide watchdog thread.
//!
//! A runtime thread running guest JavaScript cannot look at the clock, so
//! every runtime has a [`Watch`]: the deadline and abort signals of its turns
//! in flight, and whether its thread is inside JavaScript right now. The
//! watchdog thread wakes every [`TICK`] while some runtime has turns in
//! flight, and for [`LINGER`] after the last one ended, then sleeps on a
//! condition variable until a turn starts: a steady stream of turns never
//! pays a thread wake-up, and a turn that starts while it sleeps always
//! wakes it (the flag that says it sleeps is read under the lock it sleeps
//! on, so the wake-up cannot fall between its check and its wait). When a thread has
//! been in JavaScript past a deadline, or an abort fired, or the runtime is
//! closing, it records the reason, then terminates the isolate. The reason is
//! recorded first because V8 reports every termination the same way.
//!
//! A turn that is idle (awaiting a promise, a timer or a binding call) is not
//! in JavaScript: its own thread notices the deadline, so idle turns end
//! without terminating the isolate.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use code_runner_core::AbortSignal;

/// The watchdog's resolution: how late past its deadline a busy loop may run.
pub const TICK: Duration = Duration::from_millis(5);
/// How long the watchdog keeps ticking after the last turn ended, before it
/// sleeps until the next one starts.
const LINGER: Duration = Duration::from_secs(1);

/// Why the host stopped an isolate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A turn's deadline passed while JavaScript ran.
    Timeout,
    /// A turn's abort signal fired.
    Abort,
    /// The runtime is closing.
    Close,
    /// The heap reached its limit; the isolate is condemned.
    Heap,
}

impl Stop {
    fn code(self) -> u64 {
        match self {
            Stop::Timeout => 1,
            Stop::Abort => 2,
            Stop::Close => 3,
            Stop::Heap => 4,
        }
    }

    fn from_code(code: u64) -> Option<Stop> {
        match code {
            1 => Some(Stop::Timeout),
            2 => Some(Stop::Abort),
            3 => Some(Stop::Close),
            4 => Some(Stop::Heap),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Armed {
    deadline: Option<Instant>,
    aborts: Vec<AbortSignal>,
    generation: u64,
    /// Each turn's marker and deadline, when more than one turn is in flight.
    turns: Vec<(u32, Instant)>,
}

/// One runtime's side of the watchdog.
#[derive(Default)]
pub struct Watch {
    isolate: Mutex<Option<v8::IsolateHandle>>,
    armed: Mutex<Armed>,
    in_js: AtomicBool,
    closing: AtomicBool,
    /// The heap reached its limit: set once, never cleared (the isolate is condemned).
    heap: AtomicBool,
    /// `generation << 8 | stop code`, 0 for none.
    stop: AtomicU64,
    /// An interrupt asking whose JavaScript runs is on its way.
    asking: AtomicBool,
}

impl Watch {
    /// A watch registered with the watchdog (started on first use).
    ///
    /// # Errors
    /// The watchdog thread could not be started: without it a busy loop
    /// could not be stopped, so no runtime may start either.
    pub fn new() -> Result<Arc<Watch>, String> {
        let watch = Arc::new(Watch::default());
        watchdog()?.register(&watch);
        Ok(watch)
    }

    /// The isolate to terminate; `None` while there is none.
    pub fn set_isolate(&self, handle: Option<v8::IsolateHandle>) {
        *lock(&self.isolate) = handle;
        // An interrupt asked of a disposed isolate never runs: ask the new one afresh.
        self.asking.store(false, Ordering::SeqCst);
    }

    /// The turns in flight changed: the earliest deadline and every abort signal.
    /// Returns the new generation; stops recorded under an older one are stale.
    pub fn set_turns(&self, deadline: Option<Instant>, aborts: Vec<AbortSignal>) -> u64 {
        let busy = deadline.is_some();
        let generation = {
            let mut armed = lock(&self.armed);
            armed.deadline = deadline;
            armed.aborts = aborts;
            armed.generation += 1;
            armed.generation
        };
        if busy && let Ok(watchdog) = watchdog() {
            watchdog.wake_if_asleep();
        }
        generation
    }

    /// The turns in flight by marker and deadline, so a deadline stops only
    /// its own turn's JavaScript when several turns share the isolate (call
    /// right before [`Watch::set_turns`]).
    pub fn set_turn_deadlines(&self, turns: Vec<(u32, Instant)>) {
        lock(&self.armed).turns = turns;
    }

    /// Marks the runtime thread as running JavaScript until the guard drops.
    pub fn enter(&self) -> InJs<'_> {
        self.in_js.store(true, Ordering::SeqCst);
        InJs(self)
    }

    /// Records `stop` for `generation` unless a stop is already recorded, and
    /// terminates the isolate's JavaScript. Returns whether this call recorded it.
    pub fn request(&self, stop: Stop, generation: u64) -> bool {
        let recorded = self
            .stop
            .compare_exchange(
                0,
                generation << 8 | stop.code(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok();
        if recorded && let Some(isolate) = lock(&self.isolate).as_ref() {
            isolate.terminate_execution();
        }
        recorded
    }

    /// Called from the near-heap-limit callback, on the runtime thread inside
    /// V8: marks the isolate condemned and terminates its JavaScript. Only
    /// atomics and a lock nobody holds across V8 calls: it must not block or panic.
    pub fn heap_exhausted(&self) {
        if !self.heap.swap(true, Ordering::SeqCst)
            && let Some(isolate) = lock(&self.isolate).as_ref()
        {
            isolate.terminate_execution();
        }
    }

    /// A new isolate replaces a condemned one.
    pub fn reset_heap(&self) {
        self.heap.store(false, Ordering::SeqCst);
    }

    /// The stop recorded since the last take, if it belongs to `generation`.
    /// A stale stop (recorded for turns that had already ended) is dropped.
    /// A heap stop wins over any other and stays until [`Watch::reset_heap`].
    pub fn take(&self, generation: u64) -> Option<Stop> {
        if self.heap.load(Ordering::SeqCst) {
            self.stop.store(0, Ordering::SeqCst);
            return Some(Stop::Heap);
        }
        let raw = self.stop.swap(0, Ordering::SeqCst);
        if raw == 0 {
            return None;
        }
        let stop = Stop::from_code(raw & 0xff)?;
        (raw >> 8 == generation || stop == Stop::Close).then_some(stop)
    }

    /// Whether a stop is waiting to be handled (a deadline, an abort, a
    /// close, the heap): host code walking a guest value without running
    /// JavaScript, which V8 cannot interrupt, asks this to give up in time.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst) != 0 || self.heap.load(Ordering::SeqCst)
    }

    /// Closing: stops JavaScript now (if any runs) and refuses to run more.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let generation = lock(&self.armed).generation;
        if self.in_js.load(Ordering::SeqCst) {
            self.request(Stop::Close, generation);
        }
    }

    /// Whether [`Watch::close`] was called.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// The watchdog's check of this runtime; answers whether it has turns in flight.
    fn check(self: &Arc<Self>, now: Instant) -> bool {
        let (deadline, aborted, generation, shared) = {
            let armed = lock(&self.armed);
            (
                armed.deadline,
                armed.aborts.iter().any(AbortSignal::is_aborted),
                armed.generation,
                armed.turns.len() > 1,
            )
        };
        let Some(deadline) = deadline else {
            return false;
        };
        if self.in_js.load(Ordering::SeqCst) {
            if self.closing.load(Ordering::SeqCst) {
                self.request(Stop::Close, generation);
            } else if aborted {
                self.request(Stop::Abort, generation);
            } else if now >= deadline && !shared {
                self.request(Stop::Timeout, generation);
            } else if now >= deadline {
                self.ask_whose_js();
            }
        }
        true
    }

    /// Several turns share the isolate and one's deadline passed: the
    /// JavaScript running now is stopped only if it belongs to a turn past
    /// its deadline (or to none: a callback an ended turn left behind). V8
    /// runs the interrupt on the runtime thread, inside that JavaScript,
    /// where the turn's marker can be read. A turn past its deadline that is
    /// not running is ended by its own thread as soon as the JavaScript
    /// running yields.
    fn ask_whose_js(self: &Arc<Self>) {
        if self.asking.swap(true, Ordering::SeqCst) {
            return;
        }
        let data = Arc::into_raw(self.clone())
            .cast_mut()
            .cast::<std::ffi::c_void>();
        let asked = lock(&self.isolate)
            .as_ref()
            .is_some_and(|isolate| isolate.request_interrupt(whose_js, data));
        if !asked {
            self.asking.store(false, Ordering::SeqCst);
            // SAFETY: `data` came from `Arc::into_raw` above and V8 will not use it.
            drop(unsafe { Arc::from_raw(data.cast::<Watch>()) });
        }
    }
}

unsafe extern "C" {
    /// The `v8` crate's own binding (crate-private there): a handle to the
    /// isolate's current context, in the innermost handle scope.
    fn v8__Isolate__GetCurrentContext(isolate: v8::UnsafeRawIsolatePtr) -> *const v8::Context;
}

/// The interrupt [`Watch::ask_whose_js`] requests.
///
/// # Safety
/// `data` is an `Arc<Watch>` turned into a raw pointer for this one call;
/// V8 calls this on the isolate's thread, inside its JavaScript.
unsafe extern "C" fn whose_js(ptr: v8::UnsafeRawIsolatePtr, data: *mut std::ffi::c_void) {
    // SAFETY: see above; this call owns the count `ask_whose_js` leaked.
    let watch = unsafe { Arc::from_raw(data.cast::<Watch>()) };
    watch.asking.store(false, Ordering::SeqCst);
    // SAFETY: V8 is running this isolate's JavaScript on this thread now.
    let mut isolate = unsafe { v8::Isolate::from_raw_isolate_ptr(ptr) };
    let marker = {
        v8::scope!(let handles, &mut isolate);
        // SAFETY: the isolate is live and on this thread; the context handle
        // is made in `handles`, which outlives its use below.
        let raw = unsafe { v8__Isolate__GetCurrentContext(ptr) };
        if raw.is_null() {
            None
        } else {
            // SAFETY: `Local` is a `repr(C)` non-null pointer to a handle.
            let context: v8::Local<'_, v8::Context> = unsafe { std::mem::transmute(raw) };
            let scope = &mut v8::ContextScope::new(handles, context);
            let data = scope.get_continuation_preserved_embedder_data();
            data.is_uint32().then(|| data.uint32_value(scope)).flatten()
        }
    };
    let now = Instant::now();
    let (overdue, generation) = {
        let armed = lock(&watch.armed);
        let own = marker.and_then(|m| armed.turns.iter().find(|(t, _)| *t == m));
        (
            own.is_none_or(|(_, deadline)| now >= *deadline),
            armed.generation,
        )
    };
    if overdue {
        watch.request(Stop::Timeout, generation);
    }
}

/// The runtime thread is in JavaScript while this lives.
pub struct InJs<'a>(&'a Watch);

impl Drop for InJs<'_> {
    fn drop(&mut self) {
        self.0.in_js.store(false, Ordering::SeqCst);
    }
}

struct Watchdog {
    watched: Mutex<Watched>,
    wake: Condvar,
}

/// What the watchdog's lock guards.
#[derive(Default)]
struct Watched {
    watches: Vec<Weak<Watch>>,
    /// The watchdog waits for a turn to start, with no timeout.
    asleep: bool,
}

impl Watchdog {
    fn register(&self, watch: &Arc<Watch>) {
        let mut watched = lock(&self.watched);
        watched.watches.retain(|w| w.strong_count() > 0);
        watched.watches.push(Arc::downgrade(watch));
    }

    /// A turn started: wake the watchdog if it sleeps without a timeout
    /// (while it ticks it sees the turn within a [`TICK`]).
    fn wake_if_asleep(&self) {
        if lock(&self.watched).asleep {
            self.wake.notify_one();
        }
    }

    fn run(&self) {
        let mut watched = lock(&self.watched);
        let mut last_busy = Instant::now();
        loop {
            let now = Instant::now();
            let mut busy = false;
            watched.watches.retain(|weak| match weak.upgrade() {
                Some(watch) => {
                    busy |= watch.check(now);
                    true
                }
                None => false,
            });
            if busy {
                last_busy = now;
            }
            watched = if now.duration_since(last_busy) < LINGER {
                self.wake
                    .wait_timeout(watched, TICK)
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|p| p.into_inner().0)
            } else {
                watched.asleep = true;
                let mut guard = self.wake.wait(watched).unwrap_or_else(|p| p.into_inner());
                guard.asleep = false;
                last_busy = Instant::now();
                guard
            };
        }
    }
}

fn watchdog() -> Result<&'static Watchdog, String> {
    static WATCHDOG: OnceLock<Result<&'static Watchdog, String>> = OnceLock::new();
    WATCHDOG
        .get_or_init(|| {
            let watchdog: &'static Watchdog = Box::leak(Box::new(Watchdog {
                watched: Mutex::new(Watched::default()),
                wake: Condvar::new(),
            }));
            std::thread::Builder::new()
                .name("code-runner-v8-watchdog".into())
                .spawn(move || watchdog.run())
                .map(|_| watchdog)
                .map_err(|err| format!("cannot start the V8 watchdog thread: {err}"))
        })
        .clone()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
