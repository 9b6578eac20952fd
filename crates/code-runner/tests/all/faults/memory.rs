//! Faults of memory: allocation bombs and unbounded recursion are
//! `resource_exhausted` or the language's own error, never a host OOM or a
//! host stack overflow.

use super::{Case, Code, Expect};
use crate::helpers::RESOURCE_EXHAUSTED;

fault_matrix! {
    /// Growing lists past linear memory is `resource_exhausted`, not a host OOM.
    list_memory_bomb_is_resource_exhausted => Case {
        python: Code::Src(include_str!("../../fixtures/memory_bomb_list.py")),
        node: Some(Code::Src("const a = []; for (;;) a.push(new Array(1e6).fill(1))")),
        node_expect: Some(Expect::Error(RESOURCE_EXHAUSTED, "heap limit 128 MiB exceeded")),
        timeout_ms: Some(30_000),
        expect: Expect::Error(RESOURCE_EXHAUSTED, "memory limit 128 MiB"),
        ..Case::DEFAULT
    };

    /// One huge allocation past the ceiling is refused the same way.
    bytes_memory_bomb_is_resource_exhausted => Case {
        python: Code::Src("blob = bytearray(300 << 20)"),
        node: Some(Code::Src("const a = []; for (;;) a.push(new ArrayBuffer(16 << 20))")),
        node_expect: Some(Expect::Error(RESOURCE_EXHAUSTED, "external memory limit 64 MiB exceeded")),
        expect: Expect::Error(RESOURCE_EXHAUSTED, "memory limit"),
        ..Case::DEFAULT
    };

    /// A smaller `memory_mb` is the ceiling that bites, and the message says which.
    /// (Python's `memory_mb`: node's ceiling is `heap_mb`, the list bomb's node column.)
    memory_bomb_under_a_small_memory_mb_names_it => Case {
        python: Code::Src(include_str!("../../fixtures/memory_bomb_list.py")),
        timeout_ms: Some(30_000),
        memory_mb: Some(64),
        expect: Expect::Error(RESOURCE_EXHAUSTED, "memory limit 64 MiB"),
        ..Case::DEFAULT
    };

    /// Unbounded recursion at the default limit is python's own RecursionError
    /// (or, if the wasm stack goes first, resource_exhausted), never a host crash.
    deep_recursion_is_a_recursion_error_or_resource_exhausted => Case {
        python: Code::Src("def f(n): return f(n + 1)\nf(0)"),
        node: Some(Code::Src("const f = (n) => f(n + 1) + 1;\nf(0)")),
        node_expect: Some(Expect::Throws(&["RangeError: Maximum call stack size exceeded"])),
        expect: Expect::OneOf(&[
            Expect::Raises(&["RecursionError"]),
            Expect::Error(RESOURCE_EXHAUSTED, ""),
        ]),
        ..Case::DEFAULT
    };

    /// With the recursion limit lifted, the wasm stack is what stops it: that
    /// must trap inside wasmtime, not overflow the host thread's stack.
    /// (Python's `sys.setrecursionlimit`: V8's stack limit is not the guest's to lift.)
    recursion_past_a_lifted_limit_is_contained => Case {
        python: Code::Src(include_str!("../../fixtures/recursion_past_raised_limit.py")),
        timeout_ms: Some(30_000),
        expect: Expect::OneOf(&[
            Expect::Raises(&["RecursionError", "MemoryError"]),
            Expect::Error(RESOURCE_EXHAUSTED, ""),
        ]),
        ..Case::DEFAULT
    };
}
