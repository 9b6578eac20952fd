//! Faults aimed at the host's channel and wrapper: stdin and raw
//! descriptors, rebound modules, builtins and intrinsics, and the endings
//! of a failed program (an unhandled rejection, a thrown non-error).

use serde_json::json;

use super::{Case, Code, Expect, ensure};

fault_matrix! {
    /// stdin is empty (reads see end-of-file), fd 0 carries nothing to the
    /// host (a frame-like write is refused), and fd 1 written by hand is stdout.
    /// (Python's descriptors: a node guest has no file descriptors.)
    stdin_reads_and_raw_fd_writes_do_not_break_the_channel => Case {
        python: Code::Src(include_str!("../../fixtures/stdin_and_raw_fds.py")),
        expect: Expect::Response(|body| {
            ensure(body["exit_code"] == 0, "exit_code 0")?;
            ensure(body["result"] == json!({"stdin": "", "fd0": ""}), "empty stdin reads")?;
            ensure(body["stdout"] == "raw\n", "the raw fd 1 write on stdout")
        }),
        ..Case::DEFAULT
    };

    /// Rebinding module attributes the wrapper also uses (os.read/os.write,
    /// json, math) cannot break the channel.
    rebinding_wrapper_modules_does_not_break_the_channel => Case {
        python: Code::Src(include_str!("../../fixtures/rebind_wrapper_modules.py")),
        node: Some(Code::Src(include_str!("../../fixtures/rebind_intrinsics.js"))),
        expect: Expect::Response(|body| ensure(body["result"] == "rebound", "result 'rebound'")),
        ..Case::DEFAULT
    };

    /// The wrapper binds the builtins it needs before any program runs, so a
    /// program that rebinds them breaks only itself: its turn completes.
    /// (Python's builtins: node's intrinsics are the row above's node column.)
    rebinding_builtins_does_not_break_the_wrapper => Case {
        python: Code::Src(include_str!("../../fixtures/rebind_builtins.py")),
        expect: Expect::Response(|body| ensure(body["result"] == "rebound" && body["exit_code"] == 0, "result 'rebound', exit 0")),
        ..Case::DEFAULT
    };

    /// A rejected promise nobody handles fails the run as Node would exit: exit 1.
    unhandled_rejection_is_a_failed_run => Case {
        python: Code::Src("raise RuntimeError('unhandled')"),
        node: Some(Code::Src("Promise.reject(new Error('unhandled')); await new Promise((r) => setTimeout(r, 20)); return 1")),
        expect: Expect::Raises(&["RuntimeError"]),
        node_expect: Some(Expect::Throws(&["Error: unhandled"])),
        ..Case::DEFAULT
    };

    /// A thrown non-Error value is shown as Node shows it, and the run fails.
    throwing_a_non_error_is_a_failed_run => Case {
        python: Code::Src("raise SystemExit('not an error')"),
        node: Some(Code::Src("throw { reason: 'not an error' }")),
        expect: Expect::Response(|body| ensure(body["exit_code"] == 1 && body["stderr"] == "not an error\n", "exit 1, the message on stderr")),
        node_expect: Some(Expect::Response(|body| {
            ensure(body["exit_code"] == 1, "exit_code 1")?;
            ensure(body["stderr"] == "{ reason: 'not an error' }\n", "the value inspected on stderr")
        })),
        ..Case::DEFAULT
    };
}
