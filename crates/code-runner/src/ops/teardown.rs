//! `code-runner::teardown`, in one place: a kept runtime by its
//! `runtime_id`, or every runtime behind a namespace.

use std::sync::Arc;

use code_runner_core::wire::{TeardownRequest, TeardownResponse, schema_of};
use code_runner_core::{ErrorCode, Lang, RunnerError};
use serde_json::Value;

use crate::bus::catalog::Owner;
use crate::bus::names::TEARDOWN;
use crate::bus::naming::{canonical, parse_namespace_arg};
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ops::retire::{retire, teardown_key};
use crate::ops::tenancy::{Writer, may_tear_down_held, may_write};
use crate::ops::{Ops, handler_as};

/// `code-runner::teardown`, for the composition root.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        TEARDOWN,
        Function::new(
            "Destroy a runtime: unregister its bus functions, kill it and free its slot. Pass exactly one of runtime_id (from a keep: true run) or namespace (a register_function namespace, e.g. \"app\" for app::greet).",
            schema_of::<TeardownRequest>(),
            schema_of::<TeardownResponse>(),
            handler_as(ops, teardown),
        ),
    )
}

/// `code-runner::teardown`: a kept runtime by id, or a namespace.
pub(crate) async fn teardown(
    ops: Arc<Ops>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    let request: TeardownRequest = parse(payload)?;
    let response = match (request.runtime_id, request.namespace) {
        (Some(id), None) => {
            // A run suspended under the id (a one-shot holding its slot, or
            // a kept runtime's turn) ends with it: its waiting call fails,
            // and no later resume can let it through.
            let unregistered = match crate::ops::approvals::suspended::end(&ops, &id).await {
                Some(unregistered) => unregistered,
                None => teardown_kept(&ops, &id).await?,
            };
            TeardownResponse {
                torn_down: true,
                unregistered,
                runtime_id: Some(id),
                namespace: None,
            }
        }
        (None, Some(namespace)) => teardown_namespace(&ops, &namespace, &caller).await?,
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

/// Tears down the kept runtime `id`, live or hibernated (its stored
/// session is deleted); returns what that unregistered.
async fn teardown_kept(ops: &Arc<Ops>, id: &str) -> Result<Vec<String>, RunnerError> {
    // Not halfway to or from the store.
    ops.registry.transit.wait(id).await;
    match crate::ops::retire::remove_kept(ops, id).await {
        Err(err) if err.code == code_runner_core::ErrorCode::RuntimeNotFound => {
            match crate::ops::sessions::hibernate::end(ops, id).await? {
                true => Ok(Vec::new()),
                false => Err(err),
            }
        }
        done => done,
    }
}

/// `code-runner::teardown {namespace}`: destroys every runtime behind the
/// namespace, in every language, and lists every id that stopped resolving.
/// Only a writer of the namespace may ([`crate::ops::tenancy`]); a namespace a
/// runtime holds through `iii.registerFunction` goes by name only from that
/// runtime's lineage (everyone else uses its `runtime_id`).
pub(crate) async fn teardown_namespace(
    ops: &Arc<Ops>,
    argument: &str,
    caller: &Caller,
) -> Result<TeardownResponse, RunnerError> {
    let namespace = parse_namespace_arg(argument)?;
    let writer = Writer::of(caller);
    let held = ops.namespaces.hold(&namespace).await;
    let holder = ops.published.runtime_holder(&namespace);
    let allowed = match (held.entry.owner(), holder) {
        (Some(creator), _) => may_write(
            &namespace,
            creator,
            writer,
            &ops.config().guest_writable_namespaces,
            "tear down",
        ),
        (None, Some(key)) => may_tear_down_held(&namespace, ops.lineage.root(key), writer),
        (None, None) => Ok(()),
    };
    if let Err(err) = allowed {
        ops.namespaces.release_if_empty(&namespace, &held);
        return Err(err);
    }
    let runtimes = ops.namespaces.take(&namespace, &held);
    let mut destroyed = !runtimes.is_empty();
    let mut unregistered = Vec::new();
    for lang in Lang::ALL {
        let owner = Owner::Namespace {
            namespace: namespace.clone(),
            lang,
        };
        unregistered.extend(ops.published.unpublish_owner(&owner, &ops.bus));
    }
    for runtime in runtimes {
        runtime.runtime.close().await;
        unregistered.extend(retire(ops, runtime.key).await);
    }
    if let Some(key) = holder
        && let Some(ids) = teardown_key(ops, key).await
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
    // For good: not published again at the next start.
    ops.registrations.forget_namespace(&namespace);
    tracing::info!(namespace = %canonical(&namespace), functions = unregistered.len(), "namespace torn down");
    Ok(TeardownResponse {
        torn_down: true,
        unregistered,
        runtime_id: None,
        namespace: Some(canonical(&namespace)),
    })
}
