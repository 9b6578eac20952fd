//! Resizable buffers' reservations, charged to `external_mb`.
//!
//! V8 reserves a resizable `ArrayBuffer`'s (or a growable
//! `SharedArrayBuffer`'s) `maxByteLength` itself and commits its pages as
//! it grows, outside the allocator that counts `external_mb`. The
//! bootstrap's guards (`limits.js`) therefore charge the whole reservation
//! here before V8 is asked to make the buffer: the charge comes back as a
//! token object the guards keep alive beside every buffer sharing the
//! reservation (a private `WeakMap`), and when the token is collected its
//! weak callback gives the bytes back. A charge past the budget first
//! collects garbage (reservations of buffers nobody holds come back), then
//! is refused: the guard throws a `RangeError` and V8 reserves nothing.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::heap::ExternalBudget;

/// The unit V8 reserves and commits in; every reservation is charged at
/// least one, so the tokens alive are at most `external_mb / PAGE`.
const PAGE: u64 = 4096;

/// The largest array index (`2^53 - 1`), the most `ToIndex` answers.
const MAX_INDEX: f64 = 9_007_199_254_740_991.0;

/// One isolate's charged reservations (kept in an isolate slot).
pub struct Reservations {
    budget: Arc<ExternalBudget>,
    /// One weak handle per token; collected ones are pruned as more come.
    tokens: Vec<v8::Weak<v8::Object>>,
    prune_at: usize,
}

type Slot = Rc<RefCell<Reservations>>;

/// Gives `isolate` its reservations, charged to `budget`.
pub fn install(isolate: &mut v8::Isolate, budget: Arc<ExternalBudget>) {
    isolate.set_slot::<Slot>(Rc::new(RefCell::new(Reservations {
        budget,
        tokens: Vec::new(),
        prune_at: 64,
    })));
}

/// Forgets the tokens while the isolate can still take their weak handles
/// back (call before it is disposed: the charges die with its budget).
pub fn uninstall(isolate: &mut v8::Isolate) {
    drop(isolate.remove_slot::<Slot>());
}

/// What a reservation of `bytes` is charged: whole pages, at least one;
/// `None` for anything but an array index.
fn charge_of(bytes: f64) -> Option<usize> {
    if !(0.0..=MAX_INDEX).contains(&bytes) || bytes.fract() != 0.0 {
        return None;
    }
    // An integer in [0, 2^53 - 1]: exact as u64.
    let bytes = bytes as u64;
    usize::try_from(bytes.div_ceil(PAGE).max(1).checked_mul(PAGE)?).ok()
}

/// Charges a reservation of `bytes`: the token to keep beside the buffer,
/// or `None` when the budget refuses it (even after collecting garbage).
pub fn reserve<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    bytes: f64,
) -> Option<v8::Local<'s, v8::Object>> {
    let reservations = scope.get_slot::<Slot>()?.clone();
    let budget = reservations.borrow().budget.clone();
    let Some(charge) = charge_of(bytes).filter(|charge| {
        budget.charge(*charge) || {
            // Buffers nobody holds give their reservations back when collected
            // (a forced collection runs the weak callbacks before it returns).
            scope.low_memory_notification();
            budget.charge(*charge)
        }
    }) else {
        budget.note_refused();
        return None;
    };
    let signed = i64::try_from(charge).unwrap_or(i64::MAX);
    // V8 collects sooner when it knows what the reservations hold.
    scope.adjust_amount_of_external_allocated_memory(signed);
    let token = v8::Object::new(scope);
    let weak = v8::Weak::with_finalizer(
        scope,
        token,
        Box::new(move |isolate: &mut v8::Isolate| {
            budget.release(charge);
            isolate.adjust_amount_of_external_allocated_memory(-signed);
        }),
    );
    let mut held = reservations.borrow_mut();
    if held.tokens.len() >= held.prune_at {
        held.tokens.retain(|token| !token.is_empty());
        held.prune_at = held.tokens.len().saturating_mul(2).max(64);
    }
    held.tokens.push(weak);
    Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_whole_pages_of_array_indices_only() {
        assert_eq!(charge_of(0.0), Some(4096));
        assert_eq!(charge_of(1.0), Some(4096));
        assert_eq!(charge_of(4097.0), Some(8192));
        assert_eq!(charge_of(64.0 * 1024.0 * 1024.0), Some(64 << 20));
        assert_eq!(charge_of(MAX_INDEX).map(|c| c % 4096), Some(0));
        for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY, MAX_INDEX + 2.0] {
            assert_eq!(charge_of(bad), None, "{bad}");
        }
    }
}
