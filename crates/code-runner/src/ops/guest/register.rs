//! Node's `iii.registerFunction`, host side: publishes a function the
//! runtime's guest code defined, for as long as that runtime lives.

use std::sync::{Arc, Weak};

use code_runner_core::{BindingError, RunnerError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{GuestContext, binding_error};
use crate::bus::catalog::{check_description, check_format};
use crate::bus::naming::FunctionId;
use crate::bus::payload::parse;
use crate::ops::Ops;
use crate::ops::tenancy::{Claimant, Writer, may_look_like, may_register_reserved};

/// The registrar's arguments: `iii.registerFunction(id, handler, options?)`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistrarCall {
    id: String,
    #[serde(default)]
    options: Option<RegistrarOptions>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RegistrarOptions {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    request_format: Option<Value>,
    #[serde(default)]
    response_format: Option<Value>,
}

/// Node's `iii.registerFunction`, host side: the engine already keeps the
/// handler under `id`; publish `id` on the bus for this runtime's life.
///
/// A namespace runtime registers under its own namespace only. A plain
/// runtime may register under its own namespace (`iii.namespace`, reserved
/// for it) or any other free one, and its first registration there claims
/// the whole namespace for it until it ends; another runtime's own
/// namespace is refused while that runtime lives.
pub(super) async fn register_from_guest(
    ops: Weak<Ops>,
    ctx: Arc<GuestContext>,
    args: Value,
) -> Result<Value, BindingError> {
    let ops = ops
        .upgrade()
        .ok_or_else(|| BindingError::message("the worker is shutting down"))?;
    let call: RegistrarCall = parse(args).map_err(|err| {
        BindingError::from(RunnerError::invalid(format!(
            "iii.registerFunction: {}",
            err.message
        )))
    })?;
    let id = FunctionId::parse(&call.id).map_err(binding_error)?;
    if let Some(namespace) = ctx.namespace.as_deref().filter(|ns| *ns != id.namespace()) {
        return Err(binding_error(RunnerError::invalid(format!(
            "iii.registerFunction({}): this runtime serves namespace {namespace}:: and registers under it only",
            id.as_str()
        ))));
    }
    if ctx.namespace.is_none() {
        may_register_reserved(
            id.namespace(),
            ops.lineage.reservation(id.namespace()),
            Claimant::Runtime(ctx.key),
        )
        .map_err(binding_error)?;
        let writer = Writer::Guest(ctx.root);
        may_look_like(
            id.namespace(),
            ops.namespaces.look_alike(id.namespace(), writer),
        )
        .map_err(binding_error)?;
    }
    let options = call.options.unwrap_or_default();
    let description = check_description(options.description).map_err(|err| {
        binding_error(RunnerError::invalid(format!(
            "iii.registerFunction({}): {}",
            id.as_str(),
            err.message
        )))
    })?;
    let request_schema =
        check_format("request_format", options.request_format).map_err(binding_error)?;
    let response_schema =
        check_format("response_format", options.response_format).map_err(binding_error)?;
    let function = crate::ops::invoke::published_function(
        &ops,
        &id,
        ctx.lang,
        description,
        request_schema,
        response_schema,
    )
    .published_by_guest(ctx.root);
    ops.published
        .publish(&id, ctx.owner(), ctx.lang, function, &ops.bus)
        .map_err(binding_error)?;
    Ok(json!({ "function_id": id.as_str(), "registered": true }))
}

#[cfg(test)]
mod tests {
    //! The registrar's host side, through a real worker on real wasmtime: a
    //! kept python runtime stands in as the owner, and the registrar is
    //! called as node's engine would call it, with `{id, options}`. Node's
    //! own path, through real V8, is in `tests/all/node_guest.rs`.

    use std::time::{Duration, Instant};

    use code_runner_core::{BindingCall, Lang};

    use super::*;
    use crate::bus::names::RUN;
    use crate::ids::RuntimeKey;
    use crate::ops::guest::bindings;
    use crate::{Worker, WorkerOptions};

    async fn worker() -> (Worker, tempfile::TempDir) {
        let temp = tempfile::tempdir().unwrap();
        let worker = Worker::start(WorkerOptions {
            data_dir: temp.path().join("data"),
            config: code_runner_core::Config {
                warm_pool: 0,
                ..Default::default()
            },
            python_wasm: None,
        })
        .await
        .expect("worker starts (python.wasm: run scripts/fetch-python-wasm)");
        (worker, temp)
    }

    /// A kept runtime's id and lineage key.
    async fn kept(worker: &Worker) -> (String, RuntimeKey) {
        let answer = worker
            .call(RUN, json!({"lang": "python", "keep": true, "code": "pass"}))
            .await
            .unwrap();
        let id = answer["runtime_id"].as_str().unwrap().to_string();
        let key = worker.ops().registry.get(&id).unwrap().key;
        (id, key)
    }

    async fn register(
        worker: &Worker,
        context: GuestContext,
        args: Value,
    ) -> Result<Value, BindingError> {
        let bindings = bindings(Arc::downgrade(worker.ops()), context);
        let registrar = bindings
            .lookup("iii", "registerFunction")
            .expect("node runtimes get a registrar");
        registrar(
            args,
            BindingCall {
                deadline: Instant::now() + Duration::from_secs(5),
            },
        )
        .await
    }

    fn node(worker: &Worker, key: RuntimeKey, namespace: Option<&str>) -> GuestContext {
        GuestContext::of(worker.ops(), key, Lang::Node, namespace.map(String::from))
    }

    /// Python's `iii` has no registrar; node's does, beside trigger and namespace.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_node_runtimes_get_a_registrar() {
        let (worker, _temp) = worker().await;
        let (_, key) = kept(&worker).await;
        let python = bindings(
            Arc::downgrade(worker.ops()),
            GuestContext::of(worker.ops(), key, Lang::Python, None),
        );
        assert!(python.lookup("iii", "registerFunction").is_none());
        assert!(python.lookup("iii", "trigger").is_some());
        let node = bindings(Arc::downgrade(worker.ops()), node(&worker, key, None));
        assert!(node.namespaces()[0].registrars.contains("registerFunction"));
    }

    /// A runtime's registration is published with its description and
    /// formats, routes calls to that runtime, and goes when the runtime is
    /// torn down (listed in `unregistered`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn registrations_live_as_long_as_their_runtime() {
        let (worker, _temp) = worker().await;
        let (id, key) = kept(&worker).await;
        let answer = register(
            &worker,
            node(&worker, key, None),
            json!({"id": "tools::echo", "options": {"description": "Echo it.", "request_format": {"type": "object"}}}),
        )
        .await
        .unwrap();
        assert_eq!(
            answer,
            json!({"function_id": "tools::echo", "registered": true})
        );
        let info = worker
            .call(
                "engine::functions::info",
                json!({"function_ids": ["tools::echo"]}),
            )
            .await
            .unwrap();
        let entry = &info["functions"][0];
        assert_eq!(entry["description"], "Echo it.");
        assert_eq!(entry["request_schema"], json!({"type": "object"}));
        assert_eq!(entry["response_schema"]["title"], "any");
        assert_eq!(entry["metadata"]["lang"], "node");
        // A call is an Invoke turn on the owner: the stand-in python
        // runtime keeps no handler under the id, so its handler "fails".
        let err = worker.call("tools::echo", json!({})).await.unwrap_err();
        assert_eq!(err.code, "code-runner::handler_error", "{err:?}");
        assert!(err.message.contains("tools::echo"), "{}", err.message);

        let torn = worker
            .call("code-runner::teardown", json!({"runtime_id": id}))
            .await
            .unwrap();
        assert_eq!(torn["unregistered"], json!(["tools::echo"]));
        let err = worker.call("tools::echo", json!({})).await.unwrap_err();
        assert_eq!(err.code, crate::bus::FUNCTION_NOT_FOUND);
    }

    /// Claims are exclusive: a namespace a runtime registered in is its
    /// own; a namespace runtime registers under its namespace only; the
    /// naming rule and the formats rule hold here as for register_function.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn registrar_claims_are_exclusive_and_checked() {
        let (worker, _temp) = worker().await;
        let (a_id, a) = kept(&worker).await;
        let (_, b) = kept(&worker).await;
        register(&worker, node(&worker, a, None), json!({"id": "tools::x"}))
            .await
            .unwrap();
        let err = register(&worker, node(&worker, b, None), json!({"id": "tools::y"}))
            .await
            .unwrap_err();
        assert!(err.message.contains("another runtime"), "{}", err.message);
        let err = register(
            &worker,
            node(&worker, b, Some("app")),
            json!({"id": "other::x"}),
        )
        .await
        .unwrap_err();
        assert!(
            err.message.contains("registers under it only"),
            "{}",
            err.message
        );
        for (args, why) in [
            (json!({"id": "state::claim-namespace"}), "reserved"),
            (json!({"id": "no-namespace"}), "has no namespace"),
            (
                json!({"id": "b::x", "options": {"request_format": {"title": "t"}}}),
                "must constrain",
            ),
            (
                json!({"id": "b::x", "options": {"colour": 1}}),
                "unknown field",
            ),
            (
                json!({"id": "b::x", "options": {"description": "d".repeat(5000)}}),
                "4 KiB",
            ),
        ] {
            let err = register(&worker, node(&worker, b, None), args)
                .await
                .unwrap_err();
            assert_eq!(err.code.as_deref(), Some("code-runner::invalid_request"));
            assert!(err.message.contains(why), "{why}: {}", err.message);
        }
        // The namespace is the runtime's: its name tears nothing down (not
        // even for a host caller); the runtime's id does.
        let err = worker
            .call("code-runner::teardown", json!({"namespace": "tools"}))
            .await
            .unwrap_err();
        assert_eq!(err.code, "code-runner::invalid_request");
        assert!(err.message.contains("runtime_id"), "{}", err.message);
        assert!(worker.ops().lineage.runtime(a).is_some());
        let torn = worker
            .call("code-runner::teardown", json!({"runtime_id": a_id}))
            .await
            .unwrap();
        assert_eq!(torn["unregistered"], json!(["tools::x"]));
        assert!(worker.ops().lineage.runtime(a).is_none());
        register(&worker, node(&worker, b, None), json!({"id": "tools::y"}))
            .await
            .unwrap();
    }

    /// A plain runtime's own namespace is its `iii.namespace` and its own
    /// to register in; another runtime is refused there while it lives.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runtimes_own_namespace_is_reserved_for_it() {
        let (worker, _temp) = worker().await;
        let (_, a) = kept(&worker).await;
        let (b_id, b) = kept(&worker).await;
        let b_ns = node(&worker, b, None).iii_namespace;
        assert_eq!(Some(&b_ns), worker.ops().lineage.own_namespace(b).as_ref());
        let err = register(
            &worker,
            node(&worker, a, None),
            json!({"id": format!("{b_ns}::x")}),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code.as_deref(), Some("code-runner::invalid_request"));
        assert!(
            err.message.contains(&format!("{b_ns}::")),
            "{}",
            err.message
        );
        register(
            &worker,
            node(&worker, b, None),
            json!({"id": format!("{b_ns}::x")}),
        )
        .await
        .unwrap();
        let torn = worker
            .call("code-runner::teardown", json!({"runtime_id": b_id}))
            .await
            .unwrap();
        assert_eq!(torn["unregistered"], json!([format!("{b_ns}::x")]));
        register(
            &worker,
            node(&worker, a, None),
            json!({"id": format!("{b_ns}::x")}),
        )
        .await
        .unwrap();
    }
}
