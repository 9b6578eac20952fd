//! The closed set of contract error codes and the error every layer returns.

use std::fmt;

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
    /// Human-readable detail; never carries a full `runtime_id`.
    pub message: String,
}

impl RunnerError {
    /// Builds an error from a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        RunnerError {
            code,
            message: message.into(),
        }
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
}
