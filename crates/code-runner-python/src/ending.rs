//! How a turn ended, from what the runner reported and what the host saw:
//! shared by both flavours' sessions.

use std::time::Duration;

use code_runner_core::caps::{ResultShape, Stream, StreamBuffer};
use code_runner_core::{Completion, Fault, TurnEnding, TurnOutcome};
use wasmtime::Trap;
use wasmtime_wasi::I32Exit;

use crate::control::Stop;
use crate::protocol;

/// What the host saw of a turn besides the runner's report.
pub(crate) struct Facts {
    /// A grow past the memory limit was refused.
    pub(crate) memory_hit: bool,
    /// The memory limit's message.
    pub(crate) memory_message: String,
    /// A `/work` reservation was refused.
    pub(crate) quota_hit: bool,
    /// The quota's message.
    pub(crate) quota_message: String,
}

/// How a turn whose runner reported its end ended, and whether its instance
/// may serve another turn. `result` is the result's JSON text, or the length
/// of one the host did not copy (past the cap).
pub(crate) fn finish(
    head: &str,
    result: Option<Result<String, u64>>,
    max_result: usize,
    facts: Facts,
) -> (TurnEnding, bool) {
    let head = match protocol::parse_head(head) {
        Ok(head) => head,
        Err(message) => return (TurnEnding::Faulted(Fault::Protocol(message)), false),
    };
    let failed = head.exit_code != 0;
    if failed && facts.memory_hit {
        // The interpreter met a refused grow and may be left inconsistent: discard it.
        let ending = TurnEnding::Faulted(Fault::ResourceExhausted(facts.memory_message));
        return (ending, false);
    }
    if failed && facts.quota_hit {
        let ending = TurnEnding::Faulted(Fault::ResourceExhausted(facts.quota_message));
        return (ending, true);
    }
    let completion = match (result, head.not_json, head.oversize) {
        (Some(Err(bytes)), _, _) => Completion::Oversize {
            bytes,
            shape: ResultShape::Scalar,
        },
        // Measured before it is parsed: a runner that ignored the cap costs
        // the host a length check, nothing more.
        (Some(Ok(text)), _, _) if text.len() > max_result => Completion::Oversize {
            bytes: text.len() as u64,
            shape: ResultShape::Scalar,
        },
        // Within the byte cap (up to 16 MiB when it is off) but too many
        // values to build a tree of: its size only, never parsed.
        (Some(Ok(text)), _, _) if protocol::result_too_wide(&text) => Completion::Oversize {
            bytes: text.len() as u64,
            shape: ResultShape::Scalar,
        },
        (Some(Ok(text)), _, _) => match (protocol::parse_result(&text), head.converted) {
            (Ok(value), None) => Completion::Value(value),
            (Ok(value), Some(substituted)) => Completion::Converted {
                value,
                substituted,
                note: head.note,
            },
            (Err(why), _) => Completion::NotJson(why),
        },
        (None, Some(why), _) => Completion::NotJson(why),
        (None, None, Some(big)) => Completion::Oversize {
            bytes: big.bytes,
            shape: shape_of(&big.shape),
        },
        (None, None, None) => match head.note {
            Some(note) => Completion::AbsentWithNote(note),
            None => Completion::Absent,
        },
    };
    let ending = TurnEnding::Exited {
        exit_code: head.exit_code,
        completion,
        exception: head.exception,
    };
    (ending, true)
}

/// How a turn that trapped ended.
pub(crate) fn death(
    stop: Option<Stop>,
    memory_hit: bool,
    memory_message: String,
    budget: Duration,
    err: &wasmtime::Error,
) -> TurnEnding {
    let fault = match stop {
        Some(Stop::Timeout) => Fault::Timeout { budget },
        Some(Stop::Aborted | Stop::Closing) => Fault::Aborted,
        Some(Stop::Protocol(message)) => Fault::Protocol(message),
        None if memory_hit => Fault::ResourceExhausted(memory_message),
        None => {
            if let Some(exit) = err.downcast_ref::<I32Exit>() {
                return TurnEnding::Exited {
                    exit_code: i64::from(exit.0),
                    completion: Completion::Absent,
                    exception: None,
                };
            }
            if err.downcast_ref::<Trap>() == Some(&Trap::StackOverflow) {
                Fault::ResourceExhausted("wasm stack exhausted (recursion too deep)".into())
            } else {
                Fault::Crashed(format!("{err:#}"))
            }
        }
    };
    TurnEnding::Faulted(fault)
}

fn shape_of((kind, n): &(String, u64)) -> ResultShape {
    match kind.as_str() {
        "array" => ResultShape::Array(*n),
        "object" => ResultShape::Object(*n),
        "string" => ResultShape::String(*n),
        _ => ResultShape::Scalar,
    }
}

pub(crate) fn crashed(cap: Option<usize>, message: String) -> TurnOutcome {
    TurnOutcome {
        usage: Default::default(),
        stdout: StreamBuffer::new(Stream::Stdout, cap),
        stderr: StreamBuffer::new(Stream::Stderr, cap),
        ending: TurnEnding::Faulted(Fault::Crashed(message)),
        denied: false,
        interpreter_reset: false,
        went_back: false,
    }
}
