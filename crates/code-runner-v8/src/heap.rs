//! Memory limits of one isolate: the V8 heap cap and the counting
//! ArrayBuffer allocator that caps off-heap memory.
//!
//! V8's `heap_limits` covers the object heap only; ArrayBuffer backing stores
//! are allocated through the embedder's allocator and count against nothing.
//! [`ExternalBudget`] is that allocator's state: it refuses an allocation
//! that would cross `external_mb` (V8 then throws a `RangeError` in the
//! guest) and remembers that it did.

use std::alloc::{Layout, alloc, alloc_zeroed, dealloc};
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::overshoot;
use crate::watchdog::Watch;

/// Alignment of every backing store handed to V8 (what malloc guarantees).
const ALIGN: usize = 16;

/// Off-heap bytes one isolate may hold, and whether it asked for more.
#[derive(Debug)]
pub struct ExternalBudget {
    limit: usize,
    used: AtomicUsize,
    hit: AtomicBool,
    /// An allocation was refused and none has succeeded since.
    refused: AtomicBool,
}

impl ExternalBudget {
    /// A budget of `limit_mb` MiB.
    pub fn new(limit_mb: u64) -> Arc<Self> {
        Arc::new(ExternalBudget {
            limit: usize::try_from(limit_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
            used: AtomicUsize::new(0),
            hit: AtomicBool::new(false),
            refused: AtomicBool::new(false),
        })
    }

    /// Whether an allocation was refused since the last call; resets the flag.
    pub fn take_hit(&self) -> bool {
        self.hit.swap(false, Ordering::SeqCst)
    }

    /// Whether the latest allocation was refused (none succeeded since); resets it.
    pub fn take_refused(&self) -> bool {
        self.refused.swap(false, Ordering::SeqCst)
    }

    /// The message a refused allocation turns into when the turn fails.
    pub fn describe(&self) -> String {
        format!(
            "external memory limit {} MiB exceeded (ArrayBuffers and typed arrays)",
            self.limit >> 20
        )
    }

    /// Takes `len` bytes of the budget if they fit (and nothing else).
    pub(crate) fn charge(&self, len: usize) -> bool {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(len).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    /// A charge outside the allocator was refused: the turn's failure is
    /// this budget's (see [`ExternalBudget::take_hit`]).
    pub(crate) fn note_refused(&self) {
        self.hit.store(true, Ordering::SeqCst);
    }

    fn reserve(&self, len: usize) -> bool {
        let reserved = self.charge(len);
        self.refused.store(!reserved, Ordering::SeqCst);
        if !reserved {
            self.hit.store(true, Ordering::SeqCst);
        }
        reserved
    }

    /// Gives back `len` bytes taken by [`ExternalBudget::charge`] or the allocator.
    pub(crate) fn release(&self, len: usize) {
        self.used.fetch_sub(len, Ordering::SeqCst);
    }
}

fn layout(len: usize) -> Option<Layout> {
    Layout::from_size_align(len.max(1), ALIGN).ok()
}

unsafe extern "C" fn allocate(budget: &ExternalBudget, len: usize) -> *mut c_void {
    allocate_with(budget, len, true)
}

unsafe extern "C" fn allocate_uninitialized(budget: &ExternalBudget, len: usize) -> *mut c_void {
    allocate_with(budget, len, false)
}

fn allocate_with(budget: &ExternalBudget, len: usize, zeroed: bool) -> *mut c_void {
    let Some(layout) = layout(len) else {
        return std::ptr::null_mut();
    };
    if !budget.reserve(len) {
        return std::ptr::null_mut();
    }
    // SAFETY: `layout` has a non-zero size.
    let data = unsafe {
        if zeroed {
            alloc_zeroed(layout)
        } else {
            alloc(layout)
        }
    };
    if data.is_null() {
        budget.release(len);
    }
    data.cast()
}

unsafe extern "C" fn free(budget: &ExternalBudget, data: *mut c_void, len: usize) {
    if data.is_null() {
        return;
    }
    if let Some(layout) = layout(len) {
        // SAFETY: V8 frees what `allocate_with` returned for the same `len`,
        // so `layout` is the one it was allocated with.
        unsafe { dealloc(data.cast(), layout) };
        budget.release(len);
    }
}

unsafe extern "C" fn drop_budget(budget: *const ExternalBudget) {
    // SAFETY: `budget` is the pointer `Arc::into_raw` gave `allocator`, and
    // V8 calls this exactly once, when it destroys the allocator.
    drop(unsafe { Arc::from_raw(budget) });
}

static VTABLE: v8::RustAllocatorVtable<ExternalBudget> = v8::RustAllocatorVtable {
    allocate,
    allocate_uninitialized,
    free,
    drop: drop_budget,
};

/// An ArrayBuffer allocator that charges every backing store to `budget`.
pub fn allocator(budget: &Arc<ExternalBudget>) -> v8::UniqueRef<v8::Allocator> {
    let handle = Arc::into_raw(budget.clone());
    // SAFETY: `handle` is a live `Arc` whose count the allocator now owns;
    // `VTABLE`'s functions take it as `&ExternalBudget` and release it in `drop`.
    unsafe { v8::new_rust_allocator(handle, &VTABLE) }
}

/// How many times a refused ArrayBuffer may grow the heap limit by 1 MiB
/// (see [`near_heap_limit`]): the heap cap drifts by at most this.
const MAX_EXTERNAL_GRANTS: u32 = 32;

/// How many times a full heap may be granted room to unwind. The first
/// grant terminates the guest's JavaScript and condemns the isolate; the
/// rest only cover allocations already under way when V8 stops it.
const MAX_HEAP_GRANTS: u32 = 8;

/// The largest single object V8 makes on its heap: a two-byte string of
/// `String::kMaxLength` (2^29 - 24) units, or a FixedArray of 2^27 slots;
/// 1 GiB either way. V8 admits the first object of its young large-object
/// space whatever its size (a 1 GiB string in a 128 MiB heap), so a grant
/// must leave room for one such object past what the heap holds now.
const LARGEST_OBJECT: usize = 1 << 30;

/// What the near-heap-limit callback needs: the isolate (for its real heap
/// size), its watch (to stop it) and the external budget (to tell an
/// ArrayBuffer refusal from a full heap).
pub struct HeapGuard {
    watch: Arc<Watch>,
    external: Arc<ExternalBudget>,
    isolate: v8::UnsafeRawIsolatePtr,
    external_grants: u32,
    heap_grants: u32,
    /// The process-wide permit for room past the cap, from the first grant
    /// until the isolate (and this guard with it) is dropped.
    permit: Option<overshoot::Permit>,
}

impl HeapGuard {
    /// The guard of the isolate behind `isolate`.
    pub fn new(
        watch: Arc<Watch>,
        external: Arc<ExternalBudget>,
        isolate: v8::UnsafeRawIsolatePtr,
    ) -> Self {
        HeapGuard {
            watch,
            external,
            isolate,
            external_grants: 0,
            heap_grants: 0,
            permit: None,
        }
    }
}

/// V8's near-heap-limit callback: answers the new limit.
///
/// A refused ArrayBuffer (external memory, not a full heap) makes V8 run a
/// last-resort collection that lands here: that gets a little room (never
/// the same limit) and condemns nothing; the guest gets its RangeError.
///
/// Otherwise the heap is full: the isolate is condemned and its JavaScript
/// terminated, and the new limit leaves room for what the heap really holds
/// now plus one largest object, because a limit below what the heap holds
/// (or below an allocation in progress) is V8's fatal out-of-memory abort of
/// the whole process. V8 stops the guest at its next interrupt check, so
/// only allocations already under way use the room; [`MAX_HEAP_GRANTS`]
/// bounds how often it is given.
///
/// # Safety
/// `data` is the `HeapGuard` registered with this callback, alive as long
/// as its isolate; V8 calls this on the isolate's own thread.
pub unsafe extern "C" fn near_heap_limit(
    data: *mut c_void,
    current: usize,
    initial: usize,
) -> usize {
    // SAFETY: see above; nothing else holds the guard while V8 runs.
    let guard = unsafe { &mut *data.cast::<HeapGuard>() };
    if guard.external.take_refused() && guard.external_grants < MAX_EXTERNAL_GRANTS {
        guard.external_grants += 1;
        return current.saturating_add(1 << 20);
    }
    guard.watch.heap_exhausted();
    if guard.heap_grants >= MAX_HEAP_GRANTS {
        return current;
    }
    guard.heap_grants += 1;
    if guard.permit.is_none() {
        guard.permit = Some(overshoot::acquire());
    }
    // SAFETY: the isolate is alive (V8 is calling into it from its thread).
    let mut isolate = unsafe { v8::Isolate::from_raw_isolate_ptr(guard.isolate) };
    let held = isolate.get_heap_statistics().total_heap_size();
    current
        .max(held)
        .saturating_add(initial.max(32 << 20))
        .saturating_add(LARGEST_OBJECT)
}

/// The most the heap held since the last [`HeapPeak::reset`]: used heap plus
/// external memory (ArrayBuffers), read just before every collection (where
/// the heap peaks: it only shrinks in a collection) and when a turn ends.
/// Turns that share a runtime at once share the figure.
///
/// A collection that finds the heap past its limit condemns the isolate:
/// V8 admits the first object of its young large-object space whatever its
/// size (a 1 GiB string in a 128 MiB heap) without asking the near-heap-limit
/// callback, and would admit another after each scavenge.
pub struct HeapPeak {
    peak: std::cell::Cell<u64>,
    watch: Arc<Watch>,
}

impl HeapPeak {
    /// The peak of the isolate `watch` stops.
    pub fn new(watch: Arc<Watch>) -> Self {
        HeapPeak {
            peak: std::cell::Cell::new(0),
            watch,
        }
    }

    /// Starts a new measurement at what the heap holds now.
    pub fn reset(&self, isolate: &mut v8::Isolate) {
        self.peak.set(held(isolate));
    }

    /// The peak so far, counting what the heap holds now.
    pub fn read(&self, isolate: &mut v8::Isolate) -> u64 {
        self.note(held(isolate));
        self.peak.get()
    }

    fn note(&self, bytes: u64) {
        self.peak.set(self.peak.get().max(bytes));
    }
}

/// Used heap plus external memory, now.
fn held(isolate: &mut v8::Isolate) -> u64 {
    let stats = isolate.get_heap_statistics();
    (stats.used_heap_size() as u64).saturating_add(stats.external_memory() as u64)
}

/// V8's GC prologue callback: notes what the heap holds before it shrinks.
///
/// # Safety
/// `data` is the isolate's `HeapPeak`, alive as long as the isolate; V8
/// calls this on the isolate's own thread.
pub unsafe extern "C" fn before_gc(
    isolate: v8::UnsafeRawIsolatePtr,
    _type: v8::GCType,
    _flags: v8::GCCallbackFlags,
    data: *mut c_void,
) {
    // SAFETY: see above.
    let peak = unsafe { &*data.cast::<HeapPeak>() };
    // SAFETY: V8 is calling from the live isolate's thread.
    let mut isolate = unsafe { v8::Isolate::from_raw_isolate_ptr(isolate) };
    let stats = isolate.get_heap_statistics();
    if stats.used_heap_size() > stats.heap_size_limit() {
        peak.watch.heap_exhausted();
    }
    peak.note(held(&mut isolate));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget refuses past its limit, remembers it, and frees what it gave.
    #[test]
    fn budget_refuses_past_its_limit() {
        let budget = ExternalBudget::new(1);
        let a = allocate_with(&budget, 700 << 10, true);
        assert!(!a.is_null());
        assert!(allocate_with(&budget, 400 << 10, false).is_null());
        assert!(budget.take_hit());
        assert!(!budget.take_hit());
        // SAFETY: `a` came from `allocate_with` with this length.
        unsafe { free(&budget, a, 700 << 10) };
        assert_eq!(budget.used.load(Ordering::SeqCst), 0);
        let b = allocate_with(&budget, 1 << 20, false);
        assert!(!b.is_null());
        // SAFETY: as above.
        unsafe { free(&budget, b, 1 << 20) };
    }
}
