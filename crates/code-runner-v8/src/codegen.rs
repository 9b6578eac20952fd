//! Code compiled from strings (`eval`, `new Function`, their async and
//! generator forms) is bounded by length, because V8's parser allocates its
//! zone memory outside every cap: `eval('[' + '0,'.repeat(2e7) + '0]')` took
//! 800 MiB of host memory in a 128 MiB heap.
//!
//! V8 asks an embedder's "modify code generation from strings" callback
//! before it parses such a string, once the context disallows code generation
//! from strings. The callback here lets every source within the runtime's
//! limit through unchanged, and turns a longer one into a short program that
//! throws a `RangeError` saying why, so the guest gets a catchable error,
//! never a parse that takes the host's memory.
//!
//! The `v8` crate binds the context's switch but not the callback's setter,
//! so the setter is declared here by its C++ name (`v8::Isolate::
//! SetModifyCodeGenerationFromStringsCallback`, a non-virtual member
//! function: the isolate is its first argument). Its types are plain: two
//! handles and a bool in, a bool and a handle out, all passed in registers.

use std::cell::Cell;

/// The longest source one compile from a string (or of an `iii.files`
/// module) may take in a runtime whose heap is `heap_mb` MiB, in UTF-16
/// units (bytes, for a module file): a 32nd of the heap, at least 1 Mi.
/// V8's parser takes about 20 bytes of zone memory per source byte of a
/// dense literal, so one compile stays within the heap's own size (4 Mi
/// units, some 80 MiB of zone at most, at the default 128 MiB). A program
/// is bounded by the request that carries it (16 MiB), not by this: guest
/// code can build strings of any length, a client cannot send them.
pub fn max_source_units(heap_mb: u64) -> usize {
    usize::try_from((heap_mb << 20) / 32)
        .unwrap_or(usize::MAX)
        .max(1 << 20)
}

thread_local! {
    /// The limit of the isolate this thread runs (one isolate per runtime
    /// thread), in UTF-16 units.
    static MAX_SOURCE_UNITS: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// `v8::ModifyCodeGenerationFromStringsResult`.
#[repr(C)]
struct Verdict {
    /// Whether to compile at all.
    allowed: bool,
    /// The source to compile instead (a `MaybeLocal<String>`; null: the original).
    replacement: *const v8::String,
}

type Callback = unsafe extern "C" fn(
    context: v8::Local<'_, v8::Context>,
    source: v8::Local<'_, v8::Value>,
    is_code_like: bool,
) -> Verdict;

unsafe extern "C" {
    #[link_name = "_ZN2v87Isolate42SetModifyCodeGenerationFromStringsCallbackEPFNS_37ModifyCodeGenerationFromStringsResultENS_5LocalINS_7ContextEEENS2_INS_5ValueEEEbE"]
    fn set_modify_code_generation_callback(isolate: v8::UnsafeRawIsolatePtr, callback: Callback);
}

unsafe extern "C" fn check_source(
    context: v8::Local<'_, v8::Context>,
    source: v8::Local<'_, v8::Value>,
    _is_code_like: bool,
) -> Verdict {
    let limit = MAX_SOURCE_UNITS.with(Cell::get);
    let length = v8::Local::<v8::String>::try_from(source).map_or(0, |s| s.length());
    if length <= limit {
        return Verdict {
            allowed: true,
            replacement: std::ptr::null(),
        };
    }
    // The constructors (`Function`, `AsyncFunction`, …) hand over their
    // whole function literal, and V8 compiles only a single function literal
    // for them: refused outright, they throw V8's EvalError ("Code
    // generation from strings disallowed").
    let refused = Verdict {
        allowed: false,
        replacement: std::ptr::null(),
    };
    // V8 holds a handle scope around this call: a handle made here lives
    // until V8 has read the verdict.
    v8::callback_scope!(unsafe scope, context);
    let Ok(text) = v8::Local::<v8::String>::try_from(source) else {
        return refused;
    };
    let mut start = [0u16; 16];
    text.write_v2(scope, 0, &mut start, v8::WriteFlags::empty());
    let head = String::from_utf16_lossy(&start);
    if head.starts_with("(function") || head.starts_with("(async function") {
        return refused;
    }
    let text = format!(
        "throw new RangeError(\"code compiled from a string (eval, Function) is limited to {limit} characters in this runtime; this one has {length}\")"
    );
    match v8::String::new(scope, &text) {
        Some(replacement) => Verdict {
            allowed: true,
            replacement: &*replacement,
        },
        None => refused,
    }
}

/// Bounds code compiled from strings in `context`'s isolate to `max_units`
/// UTF-16 units. Call on the isolate's own thread, before guest code runs.
pub fn bound(scope: &mut v8::PinScope<'_, '_>, max_units: usize) {
    MAX_SOURCE_UNITS.with(|limit| limit.set(max_units));
    let context = scope.get_current_context();
    context.set_allow_generation_from_strings(false);
    // SAFETY: the isolate is live (we hold a scope in it), and the callback
    // has the C++ signature `ModifyCodeGenerationFromStringsCallback2`.
    unsafe { set_modify_code_generation_callback(scope.as_raw_isolate_ptr(), check_source) };
}
