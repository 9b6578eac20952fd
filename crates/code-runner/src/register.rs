//! `code-runner::register_function`, teardown by namespace, and the calls
//! of published functions.
//!
//! Registering defines the handler on the namespace runtime of its language
//! (booting it on first use) and publishes the id only once the definition
//! succeeded, so a source without a handler never reaches the bus. Calling
//! a published id is one [`Task::Invoke`] turn on the runtime that owns it;
//! the handler's return value is the answer, an exception is
//! `code-runner::handler_error`, a fault keeps its own code.

use std::sync::Arc;

use code_runner_core::wire::{RegisterRequest, RegisterResponse, TeardownResponse};
use code_runner_core::{
    ErrorCode, Lang, OutputCaps, RunnerError, RuntimeOptions, Settled, Task, TurnEnding,
    TurnOutcome, ValuePolicy, settle_completion,
};
use serde_json::{Value, json};

use crate::bus::{CallError, Caller, Function, Handler, not_found};
use crate::functions::parse;
use crate::guest::{self, GuestContext};
use crate::ids::new_dir_name;
use crate::lifecycle::{retire, teardown_key};
use crate::namespaces::{FunctionId, canonical, parse_namespace_arg};
use crate::ns_runtimes::{NamespaceRuntime, TurnParams};
use crate::published::{Owner, check_format};
use crate::registry::WorkDir;
use crate::worker::Inner;

/// The id of the registration function.
pub const REGISTER_FUNCTION: &str = "code-runner::register_function";

/// Largest handler source accepted: room for a real module, not a data dump.
pub const MAX_SOURCE_BYTES: usize = 1024 * 1024;

/// Longest exception text an error carries (its tail: the message is last).
pub const MAX_ERROR_TEXT_BYTES: usize = 4096;

/// `code-runner::register_function`.
pub(crate) async fn register_function(
    inner: Arc<Inner>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    let request: RegisterRequest = parse(payload)?;
    let id = FunctionId::parse(&request.function_id)?;
    if request.source.len() > MAX_SOURCE_BYTES {
        return Err(RunnerError::invalid(format!(
            "source is {} bytes; at most {MAX_SOURCE_BYTES} (1 MiB)",
            request.source.len()
        ))
        .into());
    }
    let request_schema = check_format("request_format", request.request_format)?;
    let response_schema = check_format("response_format", request.response_format)?;
    let lang = request.lang;
    let namespace = id.namespace().to_string();
    if caller.guest.as_ref().and_then(|g| g.namespace.as_deref()) == Some(namespace.as_str()) {
        return Err(RunnerError::invalid(format!(
            "cannot register into {} from code running in that namespace's own runtime; register from outside it",
            canonical(&namespace)
        ))
        .into());
    }
    let owner = Owner::Namespace {
        namespace: namespace.clone(),
        lang,
    };
    let held = inner.namespaces.hold(&namespace).await;
    let existing = held.entry.get(lang);
    let outcome = async {
        inner.published.check(&id, &owner, lang, &inner.bus)?;
        let runtime = match &existing {
            Some(runtime) => runtime.clone(),
            None => boot(&inner, &namespace, lang, &caller).await?,
        };
        let defined = define(&inner, &runtime, &id, &request.source, &caller).await;
        let published = defined.and_then(|()| {
            let function = published_function(
                &inner,
                &id,
                lang,
                request.description,
                request_schema,
                response_schema,
            );
            inner
                .published
                .publish(&id, owner.clone(), lang, function, &inner.bus)
        });
        Ok::<_, RunnerError>((runtime, published))
    }
    .await;
    let result = match outcome {
        Ok((runtime, Ok(()))) => {
            runtime.remember(id.as_str(), request.source);
            if existing.is_none() {
                held.entry.insert(runtime);
            }
            Ok(())
        }
        Ok((runtime, Err(err))) => {
            if existing.is_none() {
                runtime.runtime.close().await;
                retire(&inner, runtime.key).await;
            }
            Err(err)
        }
        Err(err) => Err(err),
    };
    inner.namespaces.release_if_empty(&namespace, &held);
    drop(held);
    result?;
    tracing::info!(function = %id.as_str(), %lang, "function registered");
    let response = RegisterResponse {
        function_id: id.as_str().to_string(),
        registered: true,
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// Boots the namespace runtime of `namespace` in `lang`, with its probe.
async fn boot(
    inner: &Arc<Inner>,
    namespace: &str,
    lang: Lang,
    caller: &Caller,
) -> Result<Arc<NamespaceRuntime>, RunnerError> {
    let engine = inner.engine(lang)?;
    let config = inner.config();
    let memory_mb = config.memory_mb(None)?;
    let key = inner.lineage.begin_namespace(caller, config.max_runtimes)?;
    let slot = match inner.registry.acquire(config.max_runtimes) {
        Ok(slot) => slot,
        Err(err) => {
            inner.lineage.end(key);
            return Err(err);
        }
    };
    let dir = WorkDir(inner.runtimes_dir.join(new_dir_name()));
    let options = RuntimeOptions {
        memory_mb,
        work_dir: dir.0.clone(),
        ..RuntimeOptions::default()
    };
    let runtime = match engine.spawn(options).await {
        Ok(runtime) => runtime,
        Err(err) => {
            inner.lineage.end(key);
            return Err(err);
        }
    };
    inner.lineage.attach(key, runtime.clone());
    let runtime = NamespaceRuntime::new(namespace, lang, key, runtime, dir, slot);
    let params = turn_params(inner, &runtime, caller)?;
    if !runtime.define_probe(&params).await {
        runtime.runtime.close().await;
        retire(inner, key).await;
        return Err(RunnerError::engine(format!(
            "the {lang} runtime of namespace {} could not start serving handlers",
            canonical(namespace)
        )));
    }
    tracing::info!(namespace = %canonical(namespace), %lang, "namespace runtime booted");
    Ok(runtime)
}

/// Defines `source` under `id` on `runtime`.
async fn define(
    inner: &Arc<Inner>,
    runtime: &NamespaceRuntime,
    id: &FunctionId,
    source: &str,
    caller: &Caller,
) -> Result<(), RunnerError> {
    if !runtime.has_room_for(id.as_str(), source.len()) {
        return Err(RunnerError::invalid(format!(
            "namespace {} keeps at most {} MiB of handler source in {}; tear it down or register less",
            canonical(&runtime.namespace),
            crate::ns_runtimes::MAX_KEPT_SOURCE_BYTES / (1024 * 1024),
            runtime.lang
        )));
    }
    let params = turn_params(inner, runtime, caller)?;
    let task = Task::Define {
        key: id.as_str().to_string(),
        source: source.to_string(),
    };
    let outcome = runtime.turn(task, &params).await;
    match outcome.ending {
        TurnEnding::Exited { exit_code: 0, .. } => Ok(()),
        TurnEnding::Exited {
            exit_code,
            exception,
            ..
        } => {
            let reason = failure_text(exit_code, exception, &outcome.stderr.render());
            Err(RunnerError::invalid(format!(
                "`{}` was not registered: {reason}",
                id.as_str()
            )))
        }
        TurnEnding::Faulted(fault) => Err(fault.to_runner_error()),
    }
}

/// The turn settings for a turn on a namespace runtime, for `caller`.
fn turn_params(
    inner: &Arc<Inner>,
    runtime: &NamespaceRuntime,
    caller: &Caller,
) -> Result<TurnParams, RunnerError> {
    let context = GuestContext::of(
        inner,
        runtime.key,
        runtime.lang,
        Some(runtime.namespace.clone()),
    );
    let config = inner.config();
    Ok(TurnParams {
        timeout: budget(inner, caller)?,
        bindings: guest::bindings(Arc::downgrade(inner), context),
        max_stream_bytes: config.output_caps().max_stream_bytes,
    })
}

/// A published function's turn budget: the default timeout, clamped to
/// what is left of a calling guest's own budget.
fn budget(inner: &Inner, caller: &Caller) -> Result<std::time::Duration, RunnerError> {
    let timeout = inner.config().timeout(None)?;
    Ok(match caller.time_left() {
        Some(left) => timeout.min(left).max(std::time::Duration::from_millis(1)),
        None => timeout,
    })
}

/// The bus entry of a published id: its description, formats, metadata
/// and a handler that invokes it on its owner.
pub(crate) fn published_function(
    inner: &Arc<Inner>,
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
    let weak = Arc::downgrade(inner);
    let function_id = id.as_str().to_string();
    let handler: Handler = Arc::new(move |payload, caller| {
        let (weak, function_id) = (weak.clone(), function_id.clone());
        Box::pin(async move {
            let inner = weak
                .upgrade()
                .ok_or_else(|| RunnerError::engine("the worker is shutting down"))?;
            invoke(&inner, &function_id, payload, caller).await
        })
    });
    Function::new(description, request_schema, response_schema, handler)
        .with_metadata("lang", json!(lang.as_str()))
        .with_metadata("namespace", json!(canonical(id.namespace())))
}

/// One call of a published id: a [`Task::Invoke`] turn on its owner.
async fn invoke(
    inner: &Arc<Inner>,
    id: &str,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    let gone = || not_found(id);
    let owner = inner.published.owner_of(id).ok_or_else(gone)?;
    let caps = inner.config().output_caps();
    let task = Task::Invoke {
        key: id.to_string(),
        payload,
    };
    let outcome = match owner {
        Owner::Namespace { namespace, lang } => {
            let runtime = inner.namespaces.get(&namespace, lang).ok_or_else(gone)?;
            let _place = inner.lineage.wait_for(runtime.key)?.ok_or_else(gone)?;
            let params = turn_params(inner, &runtime, &caller)?;
            runtime.turn(task, &params).await
        }
        Owner::Runtime(key) => {
            let runtime = inner.lineage.runtime(key).ok_or_else(gone)?;
            let _place = inner.lineage.wait_for(key)?.ok_or_else(gone)?;
            let _busy = inner.registry.enter_by_key(key);
            let context = GuestContext::of(inner, key, runtime.lang(), None);
            let spec = code_runner_core::TurnSpec {
                task,
                timeout: budget(inner, &caller)?,
                bindings: guest::bindings(Arc::downgrade(inner), context),
                max_stream_bytes: caps.max_stream_bytes,
                abort: code_runner_core::AbortSignal::new(),
            };
            runtime.run(spec).await
        }
    };
    Ok(settle_invocation(id, outcome, caps)?)
}

/// A published function's answer: the handler's value (capped like a
/// run's `result`), `handler_error` for an exception, a fault's own error.
fn settle_invocation(
    id: &str,
    outcome: TurnOutcome,
    caps: OutputCaps,
) -> Result<Value, RunnerError> {
    match outcome.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion,
            ..
        } => Ok(
            match settle_completion(completion, ValuePolicy::Substitute(caps)) {
                Settled::Value(value) => value.unwrap_or(Value::Null),
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
fn failure_text(exit_code: i64, exception: Option<String>, stderr: &str) -> String {
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

/// `code-runner::teardown {namespace}`: destroys every runtime behind the
/// namespace, in every language, and lists every id that stopped resolving.
pub(crate) async fn teardown_namespace(
    inner: &Arc<Inner>,
    argument: &str,
) -> Result<TeardownResponse, RunnerError> {
    let namespace = parse_namespace_arg(argument)?;
    let held = inner.namespaces.hold(&namespace).await;
    let runtimes = inner.namespaces.take(&namespace, &held);
    let mut destroyed = !runtimes.is_empty();
    let mut unregistered = Vec::new();
    for lang in [Lang::Python, Lang::Node] {
        let owner = Owner::Namespace {
            namespace: namespace.clone(),
            lang,
        };
        unregistered.extend(inner.published.unpublish_owner(&owner, &inner.bus));
    }
    for runtime in runtimes {
        runtime.runtime.close().await;
        unregistered.extend(retire(inner, runtime.key).await);
    }
    if let Some(key) = inner.published.runtime_holder(&namespace)
        && let Some(ids) = teardown_key(inner, key).await
    {
        destroyed = true;
        unregistered.extend(ids);
    }
    drop(held);
    if !destroyed && unregistered.is_empty() {
        return Err(RunnerError::new(
            ErrorCode::RuntimeNotFound,
            format!("namespace {} has nothing behind it", canonical(&namespace)),
        ));
    }
    unregistered.sort();
    unregistered.dedup();
    tracing::info!(namespace = %canonical(&namespace), functions = unregistered.len(), "namespace torn down");
    Ok(TeardownResponse {
        torn_down: true,
        unregistered,
        runtime_id: None,
        namespace: Some(canonical(&namespace)),
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
            stdout: StreamBuffer::new(Stream::Stdout, None),
            stderr: StreamBuffer::new(Stream::Stderr, None),
            ending,
            denied: false,
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
