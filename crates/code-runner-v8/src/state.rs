//! What a runtime's ops and its thread share: each turn's output and
//! bindings, binding calls in flight, the scratch directory.
//!
//! Turns are told apart by a marker in V8's continuation-preserved embedder
//! data (the "async context"): a turn's code runs with its marker set, and
//! V8 carries the marker into every promise reaction the code creates, so
//! output printed after an `await` still lands in the turn that awaited.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use code_runner_core::caps::StreamBuffer;
use code_runner_core::{BindingError, Bindings};
use serde_json::Value;

use crate::files::Scratch;
use crate::watchdog::Watch;

/// Binding calls one runtime may have in flight; one more is refused in the guest.
pub const MAX_CALLS_IN_FLIGHT: usize = 1024;
/// JSON bytes of the arguments of one runtime's binding calls in flight
/// (each holds its argument as a host tree until answered); a call that
/// would pass it is refused in the guest. Four arguments of the largest size.
pub const MAX_ARGUMENT_BYTES_IN_FLIGHT: u64 =
    4 * code_runner_core::json::MAX_GUEST_JSON_BYTES as u64;
/// JSON values of the arguments of one runtime's binding calls in flight
/// (about 110 host bytes each as a tree): four arguments of the largest count.
pub const MAX_ARGUMENT_VALUES_IN_FLIGHT: u64 = 4 * code_runner_core::json::MAX_JSON_VALUES as u64;

/// A binding call started and not yet awaited: its answer and what its argument holds.
pub struct PendingCall {
    /// The host function's answer.
    pub answer: tokio::sync::oneshot::Receiver<Result<Value, BindingError>>,
    /// Its argument's JSON size and value count, released when it is answered.
    pub weight: (u64, u64),
}

/// One turn's side of the shared state.
pub struct TurnIo {
    /// Bounded standard output.
    pub stdout: StreamBuffer,
    /// Bounded standard error.
    pub stderr: StreamBuffer,
    /// The turn's host functions.
    pub bindings: Bindings,
    /// When the turn's budget ends.
    pub deadline: Instant,
    /// An uncaught exception or unhandled rejection that ended the turn.
    pub uncaught: Option<String>,
}

/// The state shared by one runtime's ops and its thread.
pub struct Io {
    /// Turns in flight, by marker.
    pub turns: BTreeMap<u32, TurnIo>,
    /// Binding calls started and not yet awaited, by call id.
    pub calls: HashMap<u32, PendingCall>,
    /// The host tasks of binding calls not yet answered, by call id:
    /// aborting one drops the host function's future (`op_cr_cancel`).
    pub cancels: HashMap<u32, tokio::task::AbortHandle>,
    /// Binding calls started and not yet answered.
    pub in_flight: usize,
    /// JSON bytes and values of the arguments of calls not yet answered.
    pub in_flight_weight: (u64, u64),
    /// This runtime's side of the watchdog: host walks ask it whether to stop.
    pub watch: Arc<Watch>,
    next_call: u32,
    /// Where binding futures run: the caller's tokio runtime.
    pub host: tokio::runtime::Handle,
    /// `iii.files`.
    pub scratch: Scratch,
    /// Origin of `performance.now()`.
    pub epoch: Instant,
    /// Largest JSON text that enters the isolate at once (a binding's
    /// answer, a handler's payload): [`max_transfer_in`].
    pub max_transfer_in: usize,
    /// The turn ledger of a kept runtime ([`crate::ledger`]), recording or replaying.
    pub ledger: Option<crate::ledger::Ledger>,
}

/// The largest JSON text handed into an isolate whose heap is `heap_mb`
/// MiB: a sixteenth of the heap (it becomes a string, then the values it
/// parses to, several times its size), at most the 16 MiB every engine keeps.
pub fn max_transfer_in(heap_mb: u64) -> usize {
    usize::try_from((heap_mb << 20) / 16)
        .unwrap_or(usize::MAX)
        .min(code_runner_core::json::MAX_GUEST_JSON_BYTES)
}

/// How ops find the shared state in deno_core's `OpState`.
pub type SharedIo = Rc<RefCell<Io>>;

impl Io {
    /// Fresh state for a runtime.
    pub fn new(
        host: tokio::runtime::Handle,
        scratch: Scratch,
        watch: Arc<Watch>,
        max_transfer_in: usize,
    ) -> SharedIo {
        Rc::new(RefCell::new(Io {
            turns: BTreeMap::new(),
            calls: HashMap::new(),
            cancels: HashMap::new(),
            in_flight: 0,
            in_flight_weight: (0, 0),
            watch,
            next_call: 0,
            host,
            scratch,
            epoch: Instant::now(),
            max_transfer_in,
            ledger: None,
        }))
    }

    /// The turn `marker` names, or (for code whose turn has ended, such as a
    /// callback a previous turn left behind) the oldest turn in flight.
    pub fn turn(&mut self, marker: Option<u32>) -> Option<&mut TurnIo> {
        let key = match marker {
            Some(marker) if self.turns.contains_key(&marker) => marker,
            _ => *self.turns.keys().next()?,
        };
        self.turns.get_mut(&key)
    }

    /// Whether a restore is replaying the runtime's ledger now.
    pub fn replaying(&self) -> bool {
        self.ledger
            .as_ref()
            .is_some_and(crate::ledger::Ledger::is_replaying)
    }

    /// Keeps a started call's answer under a fresh id.
    pub fn add_call(&mut self, call: PendingCall) -> u32 {
        let id = self.next_call;
        self.next_call = self.next_call.wrapping_add(1);
        self.in_flight += 1;
        self.in_flight_weight.0 += call.weight.0;
        self.in_flight_weight.1 += call.weight.1;
        self.calls.insert(id, call);
        id
    }

    /// A call was answered: it no longer counts as in flight.
    pub fn answered(&mut self, weight: (u64, u64)) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.in_flight_weight.0 = self.in_flight_weight.0.saturating_sub(weight.0);
        self.in_flight_weight.1 = self.in_flight_weight.1.saturating_sub(weight.1);
    }

    /// No turn is left: calls nobody will await are forgotten.
    pub fn forget_calls(&mut self) {
        self.calls.clear();
        self.cancels.clear();
        self.in_flight = 0;
        self.in_flight_weight = (0, 0);
    }
}

/// The realm's own `Object.prototype`, captured at boot: the converter's test of a plain object.
pub struct ObjectPrototype(pub v8::Global<v8::Object>);
