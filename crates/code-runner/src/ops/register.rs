//! `code-runner::register_function` and teardown by namespace.
//!
//! Registering defines the handler on the namespace runtime of its language
//! (booting it on first use) and publishes the id only once the definition
//! succeeded, so a source without a handler never reaches the bus. Calls of
//! the published id are served by [`crate::ops::invoke`].

use std::sync::Arc;

use code_runner_core::wire::{RegisterRequest, RegisterResponse, TeardownResponse};
use code_runner_core::{ErrorCode, Lang, RunnerError, Task, TurnEnding};
use serde_json::Value;

use crate::bus::catalog::{Owner, check_description, check_format};
use crate::bus::naming::{FunctionId, canonical, parse_namespace_arg};
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller};
use crate::ops::guest::{self, GuestContext};
use crate::ops::invoke::{failure_text, published_function};
use crate::ops::namespaces::{NamespaceRuntime, TurnParams};
use crate::ops::retire::{retire, teardown_key};
use crate::ops::tenancy::{Claimant, Writer, may_register_reserved, may_tear_down_held, may_write};
use crate::worker::Inner;

/// Largest handler source accepted: room for a real module, not a data dump.
pub const MAX_SOURCE_BYTES: usize = 1024 * 1024;

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
    let description = check_description(request.description)?;
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
    let writer = Writer::of(&caller);
    let held = inner.namespaces.hold(&namespace).await;
    let existing = held.entry.get(lang);
    let outcome = async {
        may_register_reserved(
            &namespace,
            inner.lineage.reservation(&namespace),
            Claimant::Register(writer),
        )?;
        if let Some(creator) = held.entry.owner() {
            let open = inner.config().guest_writable_namespaces;
            may_write(&namespace, creator, writer, &open, "register into")?;
        }
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
                description,
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
            held.entry.claim(writer);
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
    let dir = match inner.engines.work_dir(lang) {
        Ok(dir) => dir,
        Err(err) => {
            inner.lineage.end(key);
            return Err(err);
        }
    };
    let options = inner
        .engines
        .runtime_options(&config, lang, memory_mb, dir.0.clone());
    let runtime = match engine.spawn(options).await {
        Ok(runtime) => runtime,
        Err(err) => {
            inner.lineage.end(key);
            return Err(err);
        }
    };
    let runtime = crate::runtimes::bounded::attach(inner, key, runtime);
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
            crate::ops::namespaces::MAX_KEPT_SOURCE_BYTES / (1024 * 1024),
            runtime.lang
        )));
    }
    let params = turn_params(inner, runtime, caller)?;
    let task = Task::Define {
        key: id.as_str().to_string(),
        source: source.to_string(),
    };
    let outcome = runtime.turn(task, &params).await;
    let _ = crate::ops::retire::forget_unsourced(inner, runtime);
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
pub(crate) fn turn_params(
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
pub(crate) fn budget(inner: &Inner, caller: &Caller) -> Result<std::time::Duration, RunnerError> {
    let timeout = inner.config().timeout(None)?;
    Ok(match caller.time_left() {
        Some(left) => timeout.min(left).max(std::time::Duration::from_millis(1)),
        None => timeout,
    })
}

/// `code-runner::teardown {namespace}`: destroys every runtime behind the
/// namespace, in every language, and lists every id that stopped resolving.
/// Only a writer of the namespace may ([`crate::ops::tenancy`]); a namespace a
/// runtime holds through `iii.registerFunction` goes by name only from that
/// runtime's lineage (everyone else uses its `runtime_id`).
pub(crate) async fn teardown_namespace(
    inner: &Arc<Inner>,
    argument: &str,
    caller: &Caller,
) -> Result<TeardownResponse, RunnerError> {
    let namespace = parse_namespace_arg(argument)?;
    let writer = Writer::of(caller);
    let held = inner.namespaces.hold(&namespace).await;
    let holder = inner.published.runtime_holder(&namespace);
    let allowed = match (held.entry.owner(), holder) {
        (Some(creator), _) => may_write(
            &namespace,
            creator,
            writer,
            &inner.config().guest_writable_namespaces,
            "tear down",
        ),
        (None, Some(key)) => may_tear_down_held(&namespace, inner.lineage.root(key), writer),
        (None, None) => Ok(()),
    };
    if let Err(err) = allowed {
        inner.namespaces.release_if_empty(&namespace, &held);
        return Err(err);
    }
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
    if let Some(key) = holder
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
