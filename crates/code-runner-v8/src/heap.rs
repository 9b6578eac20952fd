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

    fn reserve(&self, len: usize) -> bool {
        let reserved = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(len).filter(|total| *total <= self.limit)
            })
            .is_ok();
        self.refused.store(!reserved, Ordering::SeqCst);
        if !reserved {
            self.hit.store(true, Ordering::SeqCst);
        }
        reserved
    }

    fn release(&self, len: usize) {
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
