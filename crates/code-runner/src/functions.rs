//! The worker's bus functions: `code-runner::run`, `code-runner::teardown`,
//! and the guest's `iii` binding namespace.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use code_runner_core::wire::{RunRequest, TeardownRequest, TeardownResponse};
use code_runner_core::{
    AbortSignal, BindingCall, BindingError, BindingNamespace, Bindings, ErrorCode, Lang,
    RunnerError, Task, TurnEnding, TurnSpec, settle_response,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bus::CallError;
use crate::ids::{new_runtime_id, redact};
use crate::worker::Inner;

/// The id of the run function.
pub const RUN: &str = "code-runner::run";
/// The id of the teardown function.
pub const TEARDOWN: &str = "code-runner::teardown";

/// Deserializes a payload; the error names the offending field.
///
/// # Errors
/// `code-runner::invalid_request` with the field path and serde's reason.
pub fn parse<T: DeserializeOwned>(payload: Value) -> Result<T, RunnerError> {
    serde_path_to_error::deserialize(payload).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            RunnerError::invalid(format!("invalid payload: {inner}"))
        } else {
            RunnerError::invalid(format!("invalid field `{path}`: {inner}"))
        }
    })
}

/// `code-runner::run`.
pub(crate) async fn run(inner: Arc<Inner>, payload: Value) -> Result<Value, CallError> {
    let request: RunRequest = parse(payload)?;
    let config = inner.config();
    let timeout = config.timeout(request.timeout_ms)?;
    let caps = config.output_caps();
    let started = Instant::now();
    let turn = TurnSpec {
        task: Task::Program(request.code),
        timeout,
        bindings: iii_bindings(Arc::downgrade(&inner)),
        max_stream_bytes: caps.max_stream_bytes,
        abort: AbortSignal::new(),
    };
    let elapsed =
        |started: Instant| u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

    if let Some(id) = request.runtime_id {
        if request.memory_mb.is_some() {
            return Err(RunnerError::invalid(
                "memory_mb is fixed when a runtime is created; omit it when passing runtime_id",
            )
            .into());
        }
        let kept = inner.registry.get(&id)?;
        if let Some(lang) = request.lang.filter(|lang| *lang != kept.lang) {
            return Err(RunnerError::invalid(format!(
                "lang {lang} contradicts runtime {}, which runs {}",
                redact(&id),
                kept.lang
            ))
            .into());
        }
        let _busy = kept.enter();
        let outcome = kept.runtime.run(turn).await;
        let response = settle_response(outcome, caps, elapsed(started), Some(id))?;
        return Ok(serde_json::to_value(response).unwrap_or(Value::Null));
    }

    let lang = request
        .lang
        .ok_or_else(|| RunnerError::invalid("lang is required when runtime_id is omitted"))?;
    let engine = inner.engine(lang)?;
    if lang == Lang::Node && request.memory_mb.is_some() {
        return Err(RunnerError::invalid(
            "memory_mb applies to python; a node runtime's heap is the configuration's heap_mb",
        )
        .into());
    }
    let memory_mb = config.memory_mb(request.memory_mb)?;
    let slot = inner.registry.acquire(config.max_runtimes)?;
    let warm = inner
        .pool(lang)
        .filter(|pool| pool.memory_mb() == memory_mb)
        .and_then(|pool| pool.take());
    let (runtime, dir) = match warm {
        Some(warm) => (warm.runtime, warm.dir),
        None => {
            let dir = inner.engines.work_dir(lang);
            let options = inner
                .engines
                .runtime_options(&config, lang, memory_mb, dir.0.clone());
            (engine.spawn(options).await?, dir)
        }
    };
    let outcome = runtime.run(turn).await;
    let succeeded = matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, .. });
    if request.keep && succeeded {
        let id = new_runtime_id();
        let response = settle_response(outcome, caps, elapsed(started), Some(id.clone()))?;
        inner.registry.keep(id, lang, runtime, dir, slot);
        refill_pool(&inner, lang);
        return Ok(serde_json::to_value(response).unwrap_or(Value::Null));
    }
    runtime.close().await;
    drop((dir, slot));
    refill_pool(&inner, lang);
    let response = settle_response(outcome, caps, elapsed(started), None)?;
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// Boots replacements for pooled runtimes once a run is over, so the boot
/// does not compete with the run it would slow down.
fn refill_pool(inner: &Inner, lang: code_runner_core::Lang) {
    if let Some(pool) = inner.pool(lang) {
        pool.refill();
    }
}

/// `code-runner::teardown`.
pub(crate) async fn teardown(inner: Arc<Inner>, payload: Value) -> Result<Value, CallError> {
    let request: TeardownRequest = parse(payload)?;
    let response = match (request.runtime_id, request.namespace) {
        (Some(id), None) => {
            inner.registry.remove(&id).await?;
            TeardownResponse {
                torn_down: true,
                unregistered: Vec::new(),
                runtime_id: Some(id),
                namespace: None,
            }
        }
        (None, Some(namespace)) => {
            let canonical = format!("{}::", namespace.trim_end_matches("::"));
            return Err(RunnerError::new(
                ErrorCode::RuntimeNotFound,
                format!("namespace {canonical} has no registered functions behind it"),
            )
            .into());
        }
        (Some(_), Some(_)) => {
            return Err(RunnerError::invalid(
                "pass exactly one of runtime_id or namespace, not both",
            )
            .into());
        }
        (None, None) => {
            return Err(RunnerError::invalid("pass exactly one of runtime_id or namespace").into());
        }
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// The payload of `iii.trigger`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerRequest {
    function_id: String,
    #[serde(default)]
    payload: Value,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// The guest's `iii` global: `trigger` and `namespace`.
pub(crate) fn iii_bindings(inner: Weak<Inner>) -> Bindings {
    let iii = BindingNamespace::new("iii")
        .function("trigger", move |args, call| {
            trigger(inner.clone(), args, call)
        })
        .value("namespace", Value::Null)
        .error_class("IIIError", "member");
    Bindings::new(vec![iii]).unwrap_or_default()
}

/// `iii.trigger`: a bus call whose budget is clamped to what is left of the run.
async fn trigger(
    inner: Weak<Inner>,
    args: Value,
    call: BindingCall,
) -> Result<Value, BindingError> {
    let inner = inner
        .upgrade()
        .ok_or_else(|| BindingError::message("the worker is shutting down"))?;
    let request: TriggerRequest = parse(args)
        .map_err(|err| BindingError::message(format!("iii.trigger: {}", err.message)))?;
    let left = call.deadline.saturating_duration_since(Instant::now());
    let budget = request
        .timeout_ms
        .map_or(left, |ms| Duration::from_millis(ms).min(left));
    let mut payload = request.payload;
    if let Some(map) = payload
        .as_object_mut()
        .filter(|_| request.function_id == RUN)
    {
        let asked = map
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .unwrap_or(inner.config().default_timeout_ms);
        let clamped = asked
            .min(u64::try_from(budget.as_millis()).unwrap_or(u64::MAX))
            .max(1);
        map.insert("timeout_ms".into(), Value::from(clamped));
    }
    match tokio::time::timeout(budget, inner.bus.call(&request.function_id, payload)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(BindingError {
            code: Some(err.code),
            message: err.message,
        }),
        Err(_) => Err(BindingError {
            code: Some(ErrorCode::Timeout.as_str().into()),
            message: format!(
                "iii.trigger({}) got no answer within {} ms",
                request.function_id,
                budget.as_millis()
            ),
        }),
    }
}
