//! What a stopped run's error says beyond the fault: the knob that stopped
//! it and how far it goes (issue 45: a timeout or a memory cap named its
//! number but not what to change), and, for a kept runtime whose
//! interpreter went with the turn, that its variables are gone and its
//! files are not.

use code_runner_core::{Config, ErrorCode, Lang, RunnerError};

/// `err`, the error of a stopped turn of a `lang` runtime under `config`,
/// with the knob named; `lost` says the kept runtime's interpreter went
/// with the turn.
pub(crate) fn explain(err: RunnerError, lang: Lang, config: &Config, lost: bool) -> RunnerError {
    let mut message = err.message.clone();
    match err.code {
        ErrorCode::Timeout => message.push_str(&format!(
            "; a run's budget is timeout_ms (default {} ms), at most max_timeout_ms ({} ms): ask for more up to that, or do less in one run",
            config.default_timeout_ms, config.max_timeout_ms
        )),
        ErrorCode::ResourceExhausted if message.contains("external memory limit") => {
            message.push_str(&format!(
                "; a {lang} runtime's ArrayBuffers and typed arrays are bounded by external_mb ({} MiB), the operator's setting: hold fewer or smaller buffers",
                config.external_mb
            ));
        }
        ErrorCode::ResourceExhausted if message.contains("heap limit") => {
            message.push_str(&format!(
                "; a {lang} runtime's heap is heap_mb ({} MiB), the operator's setting: hold less at once (stream, aggregate, or write to iii.files)",
                config.heap_mb
            ));
        }
        ErrorCode::ResourceExhausted if message.contains("memory limit") => {
            message.push_str(&format!(
                "; a python runtime's memory is memory_mb (default {} MiB), at most max_memory_mb ({} MiB), set when the runtime is created: run again on a new runtime with a larger memory_mb, or use less",
                code_runner_core::DEFAULT_MEMORY_MB.min(config.max_memory_mb),
                config.max_memory_mb
            ));
        }
        _ => {}
    }
    if lost {
        message.push_str(
            "; this runtime's interpreter was lost with the turn: its variables and imports are gone, its files in /work are kept, and its next run starts a fresh interpreter (that answer carries runtime_reset)",
        );
    }
    let explained = RunnerError::new(err.code, message);
    match err.output {
        Some(output) => explained.with_output(*output),
        None => explained,
    }
}

/// Why a kept runtime's interpreter was lost, for the next answer's
/// `runtime_reset.because`.
pub(crate) fn lost_because(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Timeout => "the previous turn timed out",
        ErrorCode::ResourceExhausted => "the previous turn hit a memory limit",
        ErrorCode::Expired => "the previous turn was stopped",
        _ => "the previous turn's interpreter failed",
    }
}
