//! The closed set of contract error codes and the error every layer returns.

use std::fmt;

/// Longest error message kept, in bytes (8 KiB).
///
/// Error text can quote what a guest or a client sent (a wrong-typed frame
/// field, an unknown `lang`), and it goes into responses and log lines. Past
/// this, [`bound_message`] keeps the head and tail around a marker, so one
/// hostile value cannot grow a response or the log by megabytes.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 8 * 1024;

/// Share of [`MAX_ERROR_MESSAGE_BYTES`] kept from the start of a message;
/// the rest comes from its end (where a traceback names the error).
const HEAD_PERCENT: usize = 75;

/// `message`, or its head and tail around
/// `[…message truncated: was ~N KB; middle omitted]` when it is longer than
/// [`MAX_ERROR_MESSAGE_BYTES`]. Cuts fall on character boundaries.
///
/// ```
/// use code_runner_core::{MAX_ERROR_MESSAGE_BYTES, bound_message};
/// let huge = format!("invalid type: string \"{}\"", "A".repeat(40_000_000));
/// let bounded = bound_message(huge);
/// assert!(bounded.len() <= MAX_ERROR_MESSAGE_BYTES);
/// assert_eq!(bound_message(bounded.clone()), bounded);
/// assert!(bounded.starts_with("invalid type: string \"AAA"));
/// assert!(bounded.contains("[…message truncated: was ~39063 KB; middle omitted]"));
/// assert_eq!(bound_message("short"), "short");
/// ```
pub fn bound_message(message: impl Into<String>) -> String {
    let message = message.into();
    if message.len() <= MAX_ERROR_MESSAGE_BYTES {
        return message;
    }
    let marker = format!(
        "\n[…message truncated: was ~{} KB; middle omitted]\n",
        crate::caps::approx_kb(message.len() as u64)
    );
    // The result fits the cap, marker included, so bounding it again is a no-op.
    let budget = MAX_ERROR_MESSAGE_BYTES - marker.len();
    let head_end = message.floor_char_boundary(budget * HEAD_PERCENT / 100);
    let tail_start = message.ceil_char_boundary(message.len() - (budget - head_end));
    format!("{}{marker}{}", &message[..head_end], &message[tail_start..])
}

/// One of the contract's error codes; `as_str` gives its wire spelling.
///
/// The set is exhaustive on purpose: a new code fails to compile at every
/// `match` that maps codes (HTTP statuses, seam failure kinds) until handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Malformed request, or a `lang` that contradicts the runtime.
    InvalidRequest,
    /// Unknown `runtime_id`, or a namespace with nothing behind it.
    RuntimeNotFound,
    /// The runtime was reaped or killed; get a fresh one.
    Expired,
    /// All runtime slots are in use; retry later.
    Capacity,
    /// The run blew its deadline.
    Timeout,
    /// A cap was hit mid-run (memory, `/work` quota); retrying will not help.
    ResourceExhausted,
    /// A registered handler threw.
    HandlerError,
    /// Infrastructure failure.
    Engine,
}

impl ErrorCode {
    /// Every code, in contract order.
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::InvalidRequest,
        ErrorCode::RuntimeNotFound,
        ErrorCode::Expired,
        ErrorCode::Capacity,
        ErrorCode::Timeout,
        ErrorCode::ResourceExhausted,
        ErrorCode::HandlerError,
        ErrorCode::Engine,
    ];

    /// The wire spelling, e.g. `"code-runner::timeout"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "code-runner::invalid_request",
            ErrorCode::RuntimeNotFound => "code-runner::runtime_not_found",
            ErrorCode::Expired => "code-runner::expired",
            ErrorCode::Capacity => "code-runner::capacity",
            ErrorCode::Timeout => "code-runner::timeout",
            ErrorCode::ResourceExhausted => "code-runner::resource_exhausted",
            ErrorCode::HandlerError => "code-runner::handler_error",
            ErrorCode::Engine => "code-runner::engine",
        }
    }

    /// Parses a wire spelling back into a code.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|code| code.as_str() == text)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An infrastructure fault or contract violation: the `Err` side of every call.
///
/// A failing *script* is never a `RunnerError`; it is a response with a
/// non-zero `exit_code`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct RunnerError {
    /// Which contract error this is.
    pub code: ErrorCode,
    /// Human-readable detail; never carries a full `runtime_id`. Bounded by
    /// [`MAX_ERROR_MESSAGE_BYTES`] when built with [`RunnerError::new`].
    pub message: String,
    /// What a run's program wrote before it was stopped (a timeout, a memory
    /// cap), capped as a response's output is; `None` for every other error.
    pub output: Option<Box<PartialOutput>>,
}

/// A stopped run's output so far, carried beside its error.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartialOutput {
    /// Standard output, capped by `max_stream_bytes`.
    pub stdout: String,
    /// Standard error, capped by `max_stream_bytes`.
    pub stderr: String,
}

impl RunnerError {
    /// Builds an error from a code and a message, bounded by [`bound_message`].
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        RunnerError {
            code,
            message: bound_message(message),
            output: None,
        }
    }

    /// The same error carrying a stopped run's `output`.
    #[must_use]
    pub fn with_output(mut self, output: PartialOutput) -> Self {
        self.output = Some(Box::new(output));
        self
    }

    /// `code-runner::invalid_request` with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        RunnerError::new(ErrorCode::InvalidRequest, message)
    }

    /// `code-runner::engine` with `message`.
    pub fn engine(message: impl Into<String>) -> Self {
        RunnerError::new(ErrorCode::Engine, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards the wire spelling: a typo here breaks every caller's error matching.
    #[test]
    fn every_code_round_trips_through_its_wire_spelling() {
        for code in ErrorCode::ALL {
            assert!(code.as_str().starts_with("code-runner::"));
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::parse("code-runner::nope"), None);
    }

    /// Issue 9 item 5: a 40 MB string quoted into an error (a wrong-typed
    /// guest frame field) must not come back or be logged whole.
    #[test]
    fn runner_error_bounds_its_message_on_char_boundaries() {
        let quoted = "é".repeat(20_000_000);
        let err = RunnerError::engine(format!("engine protocol error: {quoted} <end>"));
        assert!(
            err.message.len() <= MAX_ERROR_MESSAGE_BYTES,
            "{}",
            err.message.len()
        );
        let again = RunnerError::engine(err.message.clone());
        assert_eq!(again, err, "bounding twice changes nothing");
        assert!(err.message.starts_with("engine protocol error: éé"));
        assert!(err.message.ends_with("éé <end>"));
        assert!(
            err.message
                .contains("[…message truncated: was ~39063 KB; middle omitted]")
        );
        let exact = "x".repeat(MAX_ERROR_MESSAGE_BYTES);
        assert_eq!(RunnerError::invalid(exact.clone()).message, exact);
    }
}
