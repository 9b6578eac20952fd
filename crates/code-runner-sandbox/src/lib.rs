//! Process isolation for code-runner: guest code in confined sandbox processes.
//!
//! With `isolation: process` the worker runs no engine itself. A [`Pool`]
//! keeps sandbox processes (fresh executions of the worker's own binary in a
//! hidden role), each hosting many runtimes of both engines; the worker
//! talks to them over a socketpair in length-prefixed frames
//! ([`protocol`]). [`SandboxEngine`] implements the engine seam over that
//! socket, so nothing above the seam changes: binding calls come back to the
//! worker as frames and run the real host functions there.
//!
//! - [`child::main`]: the sandbox process's side, given the real engines.
//! - [`confine`]: what a sandbox process does to itself before guest code
//!   runs (descriptors, a network namespace, rlimits, capabilities,
//!   Landlock, `no_new_privs`, a seccomp allowlist), and its [`Report`].
//!
//! A sandbox process that dies answers its running turns with
//! `code-runner::engine` ("sandbox process died: signal 11"); its runtimes
//! report [`code_runner_core::Runtime::is_gone`], and a replacement starts.

#![deny(missing_docs)]

pub mod child;
pub mod confine;
mod pool;
mod probe;
pub mod protocol;
mod proxy;

pub use pool::{BOOT_TIMEOUT, MAX_CALL_BYTES_IN_FLIGHT, Pool, SandboxOptions};
pub use protocol::Report;
pub use protocol::{Init, PythonInit};
pub use proxy::{KILL_GRACE, SandboxEngine, SandboxRuntime};
