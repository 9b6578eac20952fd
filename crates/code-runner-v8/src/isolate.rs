//! V8 once per process, the startup snapshot, and one isolate booted from it
//! with its limits.
//!
//! The snapshot holds the bootstrap (console, timers, the binding machinery),
//! so booting an isolate is deserializing a heap, not running JavaScript. A
//! booted isolate then loses every name guest code must not reach: `Deno`
//! (deno_core's namespace, with all its ops), `__bootstrap`, and the
//! bootstrap's own `__code_runner__`, whose functions the runtime thread keeps.

use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use deno_core::{JsRuntime, JsRuntimeForSnapshot, RuntimeOptions};

use crate::codegen;
use crate::heap::{self, ExternalBudget};
use crate::loader::{BOOTSTRAP_NAME, ScratchLoader};
use crate::ops;
use crate::reserve;
use crate::state::{ObjectPrototype, SharedIo};
use crate::watchdog::Watch;

/// The bootstrap: `prelude.js`, `inspect.js`, `format.js`, `clone.js`, `limits.js`,
/// `url.js`, `fetch.js`, `node.js` and `bootstrap.js` inside one function, so nothing they
/// declare lands in the global scope.
const BOOTSTRAP: &str = concat!(
    "((globalThis) => {\n\"use strict\";\n",
    include_str!("js/prelude.js"),
    include_str!("js/inspect.js"),
    include_str!("js/format.js"),
    include_str!("js/clone.js"),
    include_str!("js/limits.js"),
    include_str!("js/url.js"),
    include_str!("js/fetch.js"),
    include_str!("js/node.js"),
    include_str!("js/bootstrap.js"),
    "\n})(globalThis);\n"
);

/// The sha-256 of the bootstrap, in hex: a ledger replays only into the
/// bootstrap it was recorded with.
pub fn bootstrap_hash() -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(BOOTSTRAP.as_bytes());
    digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// Names deleted from the global object before any guest code runs:
/// deno_core's namespaces, the bootstrap's handle, and WebAssembly (V8
/// installs it into every context it deserializes; its memories are outside
/// both `heap_mb` and `external_mb`). Resizable and shared buffers stay:
/// their reservations are charged to `external_mb` ([`crate::reserve`]).
const HIDDEN_GLOBALS: [&str; 4] = ["Deno", "__bootstrap", "__code_runner__", "WebAssembly"];

/// Initialises V8 once per process, in normal (not snapshotting) mode.
pub fn init_v8() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| JsRuntime::init_platform(None));
}

/// The startup snapshot, made once per process.
///
/// # Errors
/// The bootstrap failed to run (a bug in this crate, reported as text).
pub fn snapshot() -> Result<&'static [u8], String> {
    static SNAPSHOT: OnceLock<Result<&'static [u8], String>> = OnceLock::new();
    SNAPSHOT
        .get_or_init(|| {
            init_v8();
            let mut runtime = JsRuntimeForSnapshot::try_new(RuntimeOptions {
                extensions: vec![ops::extension()],
                ..RuntimeOptions::default()
            })
            .map_err(|err| format!("cannot create the snapshot runtime: {err}"))?;
            runtime
                .execute_script(BOOTSTRAP_NAME, BOOTSTRAP)
                .map_err(|err| format!("the bootstrap failed: {err}"))?;
            Ok(&*Box::leak(runtime.snapshot()))
        })
        .clone()
}

/// Boots a bare runtime from `snapshot` on the calling thread and drops
/// it: what deserializing the snapshot costs, without a thread, limits or
/// a turn (the benchmark's attribution of a one-shot).
///
/// # Errors
/// The snapshot is unusable.
pub fn boot_bare(snapshot: &'static [u8]) -> Result<(), String> {
    let runtime = JsRuntime::try_new(from_snapshot(snapshot))
        .map_err(|err| format!("cannot boot an isolate: {err}"))?;
    drop(runtime);
    Ok(())
}

/// What every runtime booted from `snapshot` is given, bare or not.
fn from_snapshot(snapshot: &'static [u8]) -> RuntimeOptions {
    RuntimeOptions {
        startup_snapshot: Some(snapshot),
        // The snapshot was made with this same extension, so its op functions
        // are already bound (their contexts are external references, remapped
        // to this runtime's): binding them again costs ~7 % of a one-shot.
        skip_op_registration: true,
        extensions: vec![ops::extension()],
        ..RuntimeOptions::default()
    }
}

/// Limits fixed when an isolate is booted.
#[derive(Debug, Clone, Copy)]
pub struct IsolateLimits {
    /// V8 heap ceiling in MiB.
    pub heap_mb: u64,
    /// ArrayBuffer (off-heap) ceiling in MiB.
    pub external_mb: u64,
}

/// The bootstrap functions the runtime thread calls.
pub struct Internals {
    /// `install(specJson)`: replaces the binding globals.
    pub install: v8::Global<v8::Function>,
    /// `define(key, specifier)`: imports a handler module.
    pub define: v8::Global<v8::Function>,
    /// `invoke(key, payloadJson)`: calls a kept handler.
    pub invoke: v8::Global<v8::Function>,
    /// `describeThrown(value)`: Node's text for an uncaught exception.
    pub describe_thrown: v8::Global<v8::Function>,
    /// `endTurn(marker)`: cancels a finished turn's timers.
    pub end_turn: v8::Global<v8::Function>,
    /// `ledger(specJson)`: a kept runtime's recorded `Date`, `Math.random` and timers.
    pub ledger: v8::Global<v8::Function>,
    /// A function that does nothing: the rejection handler that marks a turn's promise handled.
    pub noop: v8::Global<v8::Function>,
}

/// A booted isolate and everything that must outlive it.
pub struct Isolate {
    /// The bootstrap's functions (handles into the isolate, dropped first).
    pub internals: Internals,
    /// The runtime; it keeps its own callback state alive past the isolate.
    pub runtime: JsRuntime,
    /// The module loader (handler sources are registered on it).
    pub loader: Rc<ScratchLoader>,
    /// The off-heap budget (shared with the allocator V8 owns).
    pub external: Arc<ExternalBudget>,
    /// The near-heap-limit callback's state: V8 holds a pointer to it, so it
    /// is dropped after `runtime` (fields drop in order).
    _heap_guard: Box<heap::HeapGuard>,
    /// The heap's peak, noted before every collection (V8 holds a pointer
    /// to it too, so it is dropped after `runtime`).
    pub heap_peak: Box<heap::HeapPeak>,
}

/// Boots an isolate from the snapshot with `limits`, wired to `io` and `watch`.
///
/// # Errors
/// The snapshot is unusable or the bootstrap's functions are missing.
pub fn boot(
    snapshot: &'static [u8],
    limits: IsolateLimits,
    io: &SharedIo,
    watch: &Arc<Watch>,
    packages: Vec<Arc<crate::packages::PackageSet>>,
) -> Result<Isolate, String> {
    let external = ExternalBudget::new(limits.external_mb);
    let heap_bytes = usize::try_from(limits.heap_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    let params = v8::CreateParams::default()
        .heap_limits(0, heap_bytes)
        .array_buffer_allocator(heap::allocator(&external));
    let max_source = codegen::max_source_units(limits.heap_mb);
    let loader = Rc::new(ScratchLoader::new(io.clone(), max_source, packages));
    let mut runtime = JsRuntime::try_new(RuntimeOptions {
        create_params: Some(params),
        module_loader: Some(loader.clone()),
        ..from_snapshot(snapshot)
    })
    .map_err(|err| format!("cannot boot an isolate: {err}"))?;
    runtime.op_state().borrow_mut().put(io.clone());
    let handle = runtime.v8_isolate().thread_safe_handle();
    watch.set_isolate(Some(handle));
    let mut heap_guard = Box::new(heap::HeapGuard::new(
        watch.clone(),
        external.clone(),
        // SAFETY: the pointer is only used by the callback, while the isolate lives.
        unsafe { runtime.v8_isolate().as_raw_isolate_ptr() },
    ));
    let data: *mut heap::HeapGuard = &mut *heap_guard;
    runtime
        .v8_isolate()
        .add_near_heap_limit_callback(heap::near_heap_limit, data.cast());
    let heap_peak = Box::new(heap::HeapPeak::new(watch.clone()));
    let peak: *const heap::HeapPeak = &*heap_peak;
    runtime.v8_isolate().add_gc_prologue_callback(
        heap::before_gc,
        peak.cast_mut().cast(),
        v8::GCType::kGCTypeAll,
    );
    runtime.v8_isolate().set_allow_atomics_wait(false);
    reserve::install(runtime.v8_isolate(), external.clone());
    let internals = take_internals(&mut runtime, max_source)?;
    Ok(Isolate {
        internals,
        runtime,
        loader,
        external,
        _heap_guard: heap_guard,
        heap_peak,
    })
}

impl Drop for Isolate {
    /// The reservations' weak handles go while the isolate can take them back.
    fn drop(&mut self) {
        reserve::uninstall(self.runtime.v8_isolate());
    }
}

fn take_internals(runtime: &mut JsRuntime, max_source: usize) -> Result<Internals, String> {
    let prototype;
    let internals = {
        deno_core::scope!(scope, runtime);
        codegen::bound(scope, max_source);
        let global = scope.get_current_context().global(scope);
        let key = v8::String::new(scope, "__code_runner__").ok_or("no key")?;
        let object: v8::Local<v8::Object> = global
            .get(scope, key.into())
            .and_then(|value| value.try_into().ok())
            .ok_or("the bootstrap left no __code_runner__")?;
        let function = |name: &str| -> Result<v8::Global<v8::Function>, String> {
            let key = v8::String::new(scope, name).ok_or("no key")?;
            let value: v8::Local<v8::Function> = object
                .get(scope, key.into())
                .and_then(|value| value.try_into().ok())
                .ok_or_else(|| format!("the bootstrap has no {name}()"))?;
            Ok(v8::Global::new(scope, value))
        };
        let internals = Internals {
            install: function("install")?,
            define: function("define")?,
            invoke: function("invoke")?,
            describe_thrown: function("describeThrown")?,
            end_turn: function("endTurn")?,
            ledger: function("ledger")?,
            noop: function("noop")?,
        };
        let undefined = v8::undefined(scope).into();
        let guard_shared = function("guardShared")?;
        v8::Local::new(scope, guard_shared)
            .call(scope, undefined, &[])
            .ok_or("the SharedArrayBuffer guard failed")?;
        for name in HIDDEN_GLOBALS {
            let key = v8::String::new(scope, name).ok_or("no key")?;
            global.delete(scope, key.into());
        }
        let plain = v8::Object::new(scope);
        let proto: v8::Local<v8::Object> = plain
            .get_prototype(scope)
            .and_then(|value| value.try_into().ok())
            .ok_or("no Object.prototype")?;
        prototype = v8::Global::new(scope, proto);
        internals
    };
    runtime
        .op_state()
        .borrow_mut()
        .put(ObjectPrototype(prototype));
    Ok(internals)
}
