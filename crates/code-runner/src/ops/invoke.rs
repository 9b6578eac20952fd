//! Calls of published functions: each is one [`Task::Invoke`] turn on the
//! runtime that owns the id (a namespace runtime, or a runtime whose guest
//! code registered it). The handler's return value is the answer, capped
//! like a run's `result`; an exception is `code-runner::handler_error`
//! carrying its bounded text; a fault keeps its own code.

use std::sync::Arc;

use code_runner_core::{
    Completion, ErrorCode, Lang, OutputCaps, RunnerError, Settled, Task, TurnEnding, TurnOutcome,
    ValuePolicy, settle_completion,
};
use serde_json::{Value, json};

use crate::bus::catalog::Owner;
use crate::bus::naming::{FunctionId, canonical};
use crate::bus::{CallError, Caller, Function, Handler, not_found};
use crate::ops::Ops;
use crate::ops::guest::{self, GuestContext};
use crate::ops::namespaces::{NamespaceRuntime, TurnParams};
use crate::telemetry::invocation_attributes;

/// Longest exception text an error carries: the exception line, after as much of the traceback as fits.
pub const MAX_ERROR_TEXT_BYTES: usize = 4096;

/// The bus entry of a published id: its description, formats, metadata
/// and a handler that invokes it on its owner.
pub(crate) fn published_function(
    ops: &Arc<Ops>,
    id: &FunctionId,
    lang: Lang,
    description: Option<String>,
    request_schema: Value,
    response_schema: Value,
) -> Function {
    let description = description.unwrap_or_else(|| {
        format!(
            "A {lang} handler published in namespace {} (no description was given).",
            canonical(id.namespace())
        )
    });
    let weak = Arc::downgrade(ops);
    let function_id = id.as_str().to_string();
    let tenant = ops.metrics.tenant(&canonical(id.namespace()));
    let handler: Handler = Arc::new(move |payload, caller| {
        let (weak, function_id) = (weak.clone(), function_id.clone());
        Box::pin(async move {
            let ops = weak
                .upgrade()
                .ok_or_else(|| RunnerError::engine("the worker is shutting down"))?;
            let started = std::time::Instant::now();
            let trace = caller.trace.clone();
            let (answer, cpu_ns) = invoke(&ops, &function_id, payload, caller).await;
            let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
            trace.record(|| invocation_attributes(lang.as_str(), tenant, cpu_ns, wall_ms));
            ops.metrics.invoked(tenant, cpu_ns, wall_ms);
            answer
        })
    });
    Function::new(description, request_schema, response_schema, handler)
        .with_metadata("lang", json!(lang.as_str()))
        .with_metadata("namespace", json!(canonical(id.namespace())))
}

/// One call of a published id: a [`Task::Invoke`] turn on its owner; its
/// answer and the CPU its turn took (for the tenant's usage).
async fn invoke(
    ops: &Arc<Ops>,
    id: &str,
    payload: Value,
    caller: Caller,
) -> (Result<Value, CallError>, u64) {
    match invoke_turn(ops, id, payload, caller).await {
        Ok(outcome) => {
            let cpu_ns = outcome.usage.cpu_ns;
            let caps = ops.config().output_caps();
            (
                settle_invocation(id, outcome, caps).map_err(Into::into),
                cpu_ns,
            )
        }
        Err(err) => (Err(err), 0),
    }
}

/// The [`Task::Invoke`] turn of one call on the id's owner.
async fn invoke_turn(
    ops: &Arc<Ops>,
    id: &str,
    payload: Value,
    caller: Caller,
) -> Result<TurnOutcome, CallError> {
    let gone = || not_found(id);
    let owner = ops.published.owner_of(id).ok_or_else(gone)?;
    let caps = ops.config().output_caps();
    let task = Task::Invoke {
        key: id.to_string(),
        payload,
    };
    let outcome = match owner {
        Owner::Namespace { namespace, lang } => {
            let runtime = ops.namespaces.get(&namespace, lang).ok_or_else(gone)?;
            let _place = ops.lineage.wait_for(runtime.key)?.ok_or_else(gone)?;
            let params = turn_params(ops, &runtime, &caller)?;
            let outcome = runtime.turn(task, &params).await;
            if crate::ops::retire::forget_unsourced(ops, &runtime)
                .iter()
                .any(|gone| gone == id)
            {
                // Its handler went with the interpreter the turn replaced.
                return Err(gone());
            }
            outcome
        }
        Owner::Runtime(key) => {
            let runtime = ops.lineage.runtime(key).ok_or_else(gone)?;
            let _place = ops.lineage.wait_for(key)?.ok_or_else(gone)?;
            let _busy = ops.registry.enter_by_key(key);
            let context =
                GuestContext::of(ops, key, runtime.lang(), None).traced(caller.trace.clone());
            // One turn: its signal (fired when it answers) is its scope.
            let bindings = guest::bindings(Arc::downgrade(ops), context);
            let spec = code_runner_core::TurnSpec {
                live: None,
                task,
                timeout: budget(&ops.config(), &caller)?,
                abort: bindings.scope.clone(),
                bindings: bindings.bindings,
                max_stream_bytes: caps.max_stream_bytes,
            };
            let outcome = runtime.run(spec).await;
            crate::ops::retire::forget_lost_registrations(ops, key, &outcome.ending);
            outcome
        }
    };
    Ok(outcome)
}

/// A published function's answer: the handler's value (capped like a
/// run's `result`), `handler_error` for an exception, a fault's own error.
fn settle_invocation(
    id: &str,
    outcome: TurnOutcome,
    caps: OutputCaps,
) -> Result<Value, RunnerError> {
    match outcome.ending {
        // A value with no JSON form is the handler's failure, named, never
        // a silent null: its caller has no other field to read.
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::NotJson(why),
            ..
        } => Err(RunnerError::new(
            ErrorCode::HandlerError,
            format!("the handler of `{id}` returned a value with no JSON form: {why}"),
        )),
        TurnEnding::Exited {
            exit_code: 0,
            completion,
            ..
        } => Ok(
            match settle_completion(completion, ValuePolicy::Substitute(caps)) {
                Settled::Value(value, _) => value.unwrap_or(Value::Null),
                Settled::Failed(..) => Value::Null,
            },
        ),
        TurnEnding::Exited {
            exit_code,
            exception,
            ..
        } => Err(RunnerError::new(
            ErrorCode::HandlerError,
            format!(
                "the handler of `{id}` failed: {}",
                failure_text(exit_code, exception, &outcome.stderr.render())
            ),
        )),
        TurnEnding::Faulted(fault) => Err(fault.to_runner_error()),
    }
}

/// What went wrong in a turn that exited non-zero, bounded: the last line
/// (python's `Type: message`) from its start, after as much of the
/// traceback before it as fits.
pub(crate) fn failure_text(exit_code: i64, exception: Option<String>, stderr: &str) -> String {
    let text = match exception {
        Some(text) if !text.trim().is_empty() => text,
        _ if !stderr.trim().is_empty() => format!("exit code {exit_code}: {stderr}"),
        _ => format!("exit code {exit_code}"),
    };
    let text = text.trim_end();
    if text.len() <= MAX_ERROR_TEXT_BYTES {
        return text.to_string();
    }
    let (before, last) = text.rsplit_once('\n').unwrap_or(("", text));
    let last = head(last, MAX_ERROR_TEXT_BYTES / 4);
    let room = MAX_ERROR_TEXT_BYTES.saturating_sub(last.len() + 1);
    if before.is_empty() || room < 16 {
        return last;
    }
    format!("{}\n{last}", tail(before, room))
}

/// The first `max` bytes of `text` (on a character boundary), marked when cut.
fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The last `max` bytes of `text` (on a character boundary), marked when cut.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// The turn settings for a turn on a namespace runtime, for `caller`.
pub(crate) fn turn_params(
    ops: &Arc<Ops>,
    runtime: &NamespaceRuntime,
    caller: &Caller,
) -> Result<TurnParams, RunnerError> {
    let context = GuestContext::of(
        ops,
        runtime.key,
        runtime.lang,
        Some(runtime.namespace.clone()),
    )
    .traced(caller.trace.clone());
    let config = ops.config();
    Ok(TurnParams {
        timeout: budget(&config, caller)?,
        bindings: guest::bindings(Arc::downgrade(ops), context),
        max_stream_bytes: config.output_caps().max_stream_bytes,
    })
}

/// A published function's turn budget: the default timeout, clamped to
/// what is left of a calling guest's own budget.
pub(crate) fn budget(
    config: &code_runner_core::Config,
    caller: &Caller,
) -> Result<std::time::Duration, RunnerError> {
    let timeout = config.timeout(None)?;
    Ok(match caller.time_left() {
        Some(left) => timeout.min(left).max(std::time::Duration::from_millis(1)),
        None => timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use code_runner_core::Completion;

    /// Error text is bounded and keeps what matters: the exception's type
    /// and the start of its message, after the end of the traceback.
    #[test]
    fn failure_text_is_bounded_and_keeps_the_exception_line() {
        let long = format!("{}\nValueError: bad lang", "frame\n".repeat(5000));
        let text = failure_text(1, Some(long), "");
        assert!(text.len() <= MAX_ERROR_TEXT_BYTES + 6, "{}", text.len());
        assert!(text.starts_with('…'));
        assert!(text.ends_with("\nValueError: bad lang"));
        let loud = format!(
            "Traceback\n  File x\nRuntimeError: {}\n",
            "x".repeat(1_000_000)
        );
        let text = failure_text(1, Some(loud), "");
        assert!(text.len() <= MAX_ERROR_TEXT_BYTES + 6, "{}", text.len());
        assert!(
            text.contains("File x\nRuntimeError: xxx"),
            "{}",
            &text[..60]
        );
        assert!(text.ends_with('…'));
        assert_eq!(failure_text(3, None, ""), "exit code 3");
        assert_eq!(failure_text(2, None, "boom\n"), "exit code 2: boom");
        assert_eq!(tail("ééé", 3), "…é");
        assert_eq!(head("ééé", 3), "é…");
    }

    /// A handler's value is capped like a run's result; a raise is
    /// handler_error naming the id; a fault keeps its code.
    #[test]
    fn invocations_settle_like_the_contract_says() {
        use code_runner_core::caps::{Stream, StreamBuffer};
        let outcome = |ending| TurnOutcome {
            usage: Default::default(),
            stdout: StreamBuffer::new(Stream::Stdout, None),
            stderr: StreamBuffer::new(Stream::Stderr, None),
            ending,
            denied: false,
            interpreter_reset: false,
            went_back: false,
        };
        let caps = OutputCaps {
            max_result_bytes: Some(10),
            max_stream_bytes: None,
        };
        let ok = settle_invocation(
            "a::b",
            outcome(TurnEnding::Exited {
                exit_code: 0,
                completion: Completion::Value(json!("x".repeat(50))),
                exception: None,
            }),
            caps,
        )
        .unwrap();
        assert!(ok.as_str().unwrap().starts_with("<omitted: result was"));
        let err = settle_invocation(
            "a::b",
            outcome(TurnEnding::Exited {
                exit_code: 1,
                completion: Completion::Absent,
                exception: Some("Traceback…\nKeyError: 'lang'\n".into()),
            }),
            caps,
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::HandlerError);
        assert!(err.message.contains("`a::b`"), "{}", err.message);
        assert!(err.message.ends_with("KeyError: 'lang'"), "{}", err.message);
        let err = settle_invocation(
            "a::b",
            outcome(TurnEnding::Faulted(code_runner_core::Fault::Timeout {
                budget: std::time::Duration::from_millis(5),
            })),
            caps,
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::Timeout);
    }
}
