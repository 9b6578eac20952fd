//! `code-runner::register_function`.
//!
//! Registering defines the handler on the namespace runtime of its language
//! (booting it on first use) and publishes the id only once the definition
//! succeeded, so a source without a handler never reaches the bus. Calls of
//! the published id are served by [`crate::ops::invoke`].

use std::sync::Arc;

use code_runner_core::wire::{RegisterRequest, RegisterResponse, schema_of};
use code_runner_core::{Lang, RunnerError, Task, TurnEnding};
use serde_json::Value;

use crate::bus::catalog::{Owner, check_description, check_format};
use crate::bus::names::REGISTER_FUNCTION;
use crate::bus::naming::{FunctionId, canonical};
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ops::Ops;
use crate::ops::handler_as;
use crate::ops::invoke::{failure_text, published_function, turn_params};
use crate::ops::namespaces::NamespaceRuntime;
use crate::ops::retire::retire;
use crate::ops::tenancy::{Claimant, Writer, may_look_like, may_register_reserved, may_write};

/// Largest handler source accepted: room for a real module, not a data dump.
pub const MAX_SOURCE_BYTES: usize = 1024 * 1024;

/// `code-runner::register_function`.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        REGISTER_FUNCTION,
        Function::new(
            "Publish a bus function whose handler runs in a sandbox; no runtime_id needed. source must define handler(payload) in lang; each call runs it and returns its JSON result. The namespace (function_id before `::`) shares one runtime per lang; its functions stop resolving once torn down or idle-reaped.",
            schema_of::<RegisterRequest>(),
            schema_of::<RegisterResponse>(),
            handler_as(ops, register_function),
        ),
    )
}

/// `code-runner::register_function`.
pub(crate) async fn register_function(
    ops: Arc<Ops>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    let request: RegisterRequest = parse(payload)?;
    // A host's registration outlives the worker; a guest's ends with its lineage.
    let kept = caller.guest.is_none().then(|| request.clone());
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
    let held = ops.namespaces.hold(&namespace).await;
    let existing = held.entry.get(lang);
    let outcome = async {
        may_register_reserved(
            &namespace,
            ops.lineage.reservation(&namespace),
            Claimant::Register(writer),
        )?;
        if let Some(creator) = held.entry.owner() {
            let open = ops.config().guest_writable_namespaces;
            may_write(&namespace, creator, writer, &open, "register into")?;
        }
        if let Writer::Guest(_) = writer {
            may_look_like(&namespace, ops.namespaces.look_alike(&namespace, writer))?;
        }
        ops.published.check(&id, &owner, lang, &ops.bus)?;
        let runtime = match &existing {
            Some(runtime) => runtime.clone(),
            None => boot(&ops, &namespace, lang, &caller).await?,
        };
        let defined = define(&ops, &runtime, &id, &request.source, &caller).await;
        let published = defined.and_then(|()| {
            let function = published_function(
                &ops,
                &id,
                lang,
                description,
                request_schema,
                response_schema,
            );
            let function = match &caller.guest {
                Some(guest) => function.published_by_guest(guest.root),
                None => function,
            };
            // A guest's redeploy never lifts an approval someone else asked
            // for: the id keeps waiting for a person.
            let keeps_approval =
                caller.guest.is_some() && ops.bus.has_flag(id.as_str(), "requires_approval");
            let function = if request.requires_approval || keeps_approval {
                ops.suspensions.flag();
                function.with_metadata("requires_approval", Value::Bool(true))
            } else {
                function
            };
            ops.published
                .publish(&id, owner.clone(), lang, function, &ops.bus)
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
                retire(&ops, runtime.key).await;
            }
            Err(err)
        }
        Err(err) => Err(err),
    };
    ops.namespaces.release_if_empty(&namespace, &held);
    drop(held);
    result?;
    if let Some(kept) = kept {
        ops.registrations.keep(&kept);
    }
    tracing::info!(function = %id.as_str(), %lang, "function registered");
    let response = RegisterResponse {
        function_id: id.as_str().to_string(),
        registered: true,
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// Boots the namespace runtime of `namespace` in `lang`, with its probe.
async fn boot(
    ops: &Arc<Ops>,
    namespace: &str,
    lang: Lang,
    caller: &Caller,
) -> Result<Arc<NamespaceRuntime>, RunnerError> {
    let engine = ops.engine(lang, caller).await?;
    let config = ops.config();
    let memory_mb = config.memory_mb(None)?;
    let key = ops
        .lineage
        .begin_namespace(crate::ops::parent_of(caller), config.max_runtimes)?;
    let slot = match ops.registry.acquire(config.max_runtimes) {
        Ok(slot) => slot,
        Err(err) => {
            ops.lineage.end(key);
            return Err(err);
        }
    };
    let dir = match ops.engines.work_dir(lang) {
        Ok(dir) => dir,
        Err(err) => {
            ops.lineage.end(key);
            return Err(err);
        }
    };
    let options = ops
        .engines
        .runtime_options(&config, lang, memory_mb, dir.0.clone());
    let runtime = match engine.spawn(options).await {
        Ok(runtime) => runtime,
        Err(err) => {
            ops.lineage.end(key);
            return Err(err);
        }
    };
    let runtime = crate::ops::retire::attach(ops, key, runtime);
    let runtime = NamespaceRuntime::new(namespace, lang, key, runtime, dir, slot);
    let params = turn_params(ops, &runtime, caller)?;
    if !runtime.define_probe(&params).await {
        runtime.runtime.close().await;
        retire(ops, key).await;
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
    ops: &Arc<Ops>,
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
    let params = turn_params(ops, runtime, caller)?;
    let task = Task::Define {
        key: id.as_str().to_string(),
        source: source.to_string(),
    };
    let outcome = runtime.turn(task, &params).await;
    let _ = crate::ops::retire::forget_unsourced(ops, runtime);
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
