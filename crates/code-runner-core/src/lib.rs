//! The code-runner contract: everything both engines and the worker agree on.
//!
//! - [`wire`]: the JSON request and response bodies, with their JSON Schemas.
//! - [`files`]: the paths, globs, walk and caps of a run's files in and out.
//! - [`ErrorCode`] and [`RunnerError`]: the eight contract error codes.
//! - [`caps`]: output caps, one implementation for every engine.
//! - [`Config`]: every configuration key with its default.
//! - [`Engine`] and [`Runtime`]: the seam engines implement; [`Bindings`]:
//!   host functions a program sees as globals; [`Fault`] and [`FailureKind`]:
//!   the failure taxonomy.
//! - [`CodeRuntime`]: the public embedding API (resolve, run, dispose).
//!
//! No engine code lives here.
//!
//! # Example
//!
//! The output caps bite the same way for every engine:
//!
//! ```
//! use code_runner_core::caps::{cap_result, Stream, StreamBuffer};
//! use serde_json::json;
//!
//! let big = json!((0..100_000).collect::<Vec<u32>>());
//! let capped = cap_result(big, Some(32_768));
//! assert!(capped.as_str().unwrap().starts_with("<omitted: result was ~575 KB (100000 array elements)"));
//!
//! let mut stdout = StreamBuffer::new(Stream::Stdout, Some(1000));
//! for _ in 0..100_000 { stdout.push(b"spam\n"); }
//! assert!(stdout.render().contains("[…stdout truncated: was ~488 KB; middle omitted]"));
//! ```

#![deny(missing_docs)]

mod bindings;
pub mod caps;
pub mod child;
mod code_runtime;
mod config;
pub mod cpu;
mod engine;
mod error;
pub mod files;
mod fs;
pub mod guest_policy;
pub mod json;
mod settle;
pub mod threads;
pub mod wire;

pub use bindings::{
    BindingCall, BindingError, BindingFn, BindingNamespace, Bindings, BoxFuture, ErrorClass,
    RESERVED_BINDING_GLOBALS, RESERVED_ERROR_MEMBERS, RESERVED_WORDS, TurnClock,
};
pub use caps::{ImageCaps, LiveOutput, OutputCaps};
pub use code_runtime::{
    CodeRunFailure, CodeRunRequest, CodeRunResult, CodeRunSandbox, CodeRunSpec, CodeRuntime,
    CodeRuntimeOptions, SandboxEnforcement, SandboxMode, WORK_DIR,
};
pub use config::*;
pub use engine::{
    AbortSignal, Completion, Engine, EngineStats, FailureKind, Fault, Image, LedgerOptions,
    Runtime, RuntimeOptions, SnapshotSections, Task, TurnEnding, TurnImages, TurnOutcome, TurnSpec,
    TurnUsage, thread_cpu_ns,
};
pub use error::{ErrorCode, MAX_ERROR_MESSAGE_BYTES, PartialOutput, RunnerError, bound_message};
pub use fs::{cache_dir, create_private_dir};
pub use settle::{
    MAX_RESULT_NOTE_BYTES, Settled, ValuePolicy, cap_images, settle_completion, settle_response,
};
pub use wire::{
    CollectMode, CollectedFile, FileInput, Lang, ReadFileRequest, ReadFileResponse,
    RegisterRequest, RegisterResponse, RunRequest, RunResponse, TeardownRequest, TeardownResponse,
};
