//! Settling a turn: one mechanism, two policies.
//!
//! The worker's policy ([`ValuePolicy::Substitute`]) answers every finished
//! run with a response: a non-JSON result becomes `null`, an oversized one
//! the omission marker, an oversized stream head+tail. The seam's policy
//! ([`ValuePolicy::Lossless`]) never rewrites: the same facts become the
//! `invalid-output` and `output-limit` failures.

use serde_json::Value;

use crate::caps::{self, OutputCaps};
use crate::engine::{Completion, FailureKind, TurnEnding, TurnOutcome};
use crate::error::RunnerError;
use crate::wire::{RunResponse, Usage};

/// What to do with a completion JSON cannot carry, or one that is too large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValuePolicy {
    /// The worker's contract: `null` for non-JSON, the marker for oversize.
    Substitute(OutputCaps),
    /// The seam's contract: fail the run; `max_output_bytes` bounds logs plus value.
    Lossless {
        /// Cap on the serialized logs plus value or message; `None` disables it.
        max_output_bytes: Option<usize>,
    },
}

/// A settled completion: a value, or the failure the policy turned it into.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// The value to report (`Value::Null` for none under `Substitute`).
    Value(Option<Value>),
    /// The policy refused the completion.
    Failed(FailureKind, String),
}

/// Applies `policy` to a completion.
pub fn settle_completion(completion: Completion, policy: ValuePolicy) -> Settled {
    match (completion, policy) {
        (Completion::Absent, ValuePolicy::Substitute(_)) => Settled::Value(Some(Value::Null)),
        (Completion::Absent, ValuePolicy::Lossless { .. }) => Settled::Value(None),
        (Completion::Value(value), ValuePolicy::Substitute(caps)) => {
            Settled::Value(Some(caps::cap_result(value, caps.max_result_bytes)))
        }
        (Completion::Value(value), ValuePolicy::Lossless { .. }) => Settled::Value(Some(value)),
        (Completion::NotJson(_), ValuePolicy::Substitute(_)) => Settled::Value(Some(Value::Null)),
        (Completion::NotJson(why), ValuePolicy::Lossless { .. }) => Settled::Failed(
            FailureKind::InvalidOutput,
            crate::error::bound_message(format!(
                "the completion value is not lossless JSON: {why}"
            )),
        ),
        (Completion::Oversize { bytes, shape }, ValuePolicy::Substitute(caps)) => {
            match caps.max_result_bytes {
                Some(_) => Settled::Value(Some(Value::String(caps::omitted_marker(bytes, &shape)))),
                None => Settled::Value(Some(Value::Null)),
            }
        }
        (Completion::Oversize { bytes, .. }, ValuePolicy::Lossless { .. }) => Settled::Failed(
            FailureKind::OutputLimit,
            format!(
                "the completion value serialized to {bytes} bytes, over the engine's transfer limit"
            ),
        ),
    }
}

/// Settles a turn into the worker's `code-runner::run` response.
///
/// # Errors
/// The fault's contract error when the turn was stopped (timeout, memory…).
pub fn settle_response(
    outcome: TurnOutcome,
    caps: OutputCaps,
    duration_ms: u64,
    runtime_id: Option<String>,
) -> Result<RunResponse, RunnerError> {
    let usage = Usage {
        cpu_ms: (outcome.usage.cpu_ns / 1_000) as f64 / 1_000.0,
        peak_memory_bytes: outcome.usage.peak_memory_bytes,
        wall_ms: duration_ms,
    };
    let (exit_code, completion) = match outcome.ending {
        TurnEnding::Faulted(fault) => return Err(fault.to_runner_error()),
        TurnEnding::Exited {
            exit_code,
            completion,
            ..
        } => (exit_code, completion),
    };
    let result = match settle_completion(completion, ValuePolicy::Substitute(caps)) {
        Settled::Value(value) => value.unwrap_or(Value::Null),
        Settled::Failed(..) => Value::Null,
    };
    Ok(RunResponse {
        stdout: outcome.stdout.render(),
        stderr: outcome.stderr.render(),
        exit_code,
        success: exit_code == 0,
        duration_ms,
        result,
        runtime_id,
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::{ResultShape, Stream, StreamBuffer};
    use crate::engine::Fault;
    use crate::error::ErrorCode;
    use serde_json::json;
    use std::time::Duration;

    fn outcome(ending: TurnEnding) -> TurnOutcome {
        let mut stdout = StreamBuffer::new(Stream::Stdout, Some(10));
        stdout.push(b"0123456789abcdef");
        TurnOutcome {
            usage: Default::default(),
            stdout,
            stderr: StreamBuffer::new(Stream::Stderr, Some(10)),
            ending,
            denied: false,
        }
    }

    /// The two policies disagree exactly where the contracts do.
    #[test]
    fn policies_diverge_on_non_json_and_oversize() {
        let sub = ValuePolicy::Substitute(OutputCaps::default());
        let lossless = ValuePolicy::Lossless {
            max_output_bytes: None,
        };
        let not_json = Completion::NotJson("NaN".into());
        assert_eq!(
            settle_completion(not_json.clone(), sub),
            Settled::Value(Some(Value::Null))
        );
        assert!(matches!(
            settle_completion(not_json, lossless),
            Settled::Failed(FailureKind::InvalidOutput, _)
        ));
        let big = Completion::Oversize {
            bytes: 70_000_000,
            shape: ResultShape::Array(9),
        };
        match settle_completion(big.clone(), sub) {
            Settled::Value(Some(Value::String(s))) => assert!(s.contains("(9 array elements)")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            settle_completion(big, lossless),
            Settled::Failed(FailureKind::OutputLimit, _)
        ));
    }

    /// A finished run is a response; exit_code and success are never touched by caps.
    #[test]
    fn response_carries_capped_streams_and_exit() {
        let ending = TurnEnding::Exited {
            exit_code: 3,
            completion: Completion::Value(json!("x".repeat(50))),
            exception: None,
        };
        let caps = OutputCaps {
            max_result_bytes: Some(10),
            max_stream_bytes: Some(10),
        };
        let response = settle_response(outcome(ending), caps, 7, None).unwrap();
        assert_eq!(response.exit_code, 3);
        assert!(!response.success);
        assert_eq!(response.duration_ms, 7);
        assert!(response.stdout.contains("[…stdout truncated"));
        assert!(
            response
                .result
                .as_str()
                .unwrap()
                .starts_with("<omitted: result was ~0 KB (a 50-char string)")
        );
    }

    /// A fault is a contract error, never a response.
    #[test]
    fn fault_becomes_its_contract_error() {
        let ending = TurnEnding::Faulted(Fault::Timeout {
            budget: Duration::from_millis(250),
        });
        let err = settle_response(outcome(ending), OutputCaps::default(), 1, None).unwrap_err();
        assert_eq!(err.code, ErrorCode::Timeout);
        assert!(err.message.contains("250 ms"));
    }
}
