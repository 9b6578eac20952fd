//! The guest's `iii` global: `trigger`, `namespace` and, for node,
//! `registerFunction`.
//!
//! One implementation serves every engine: an engine only sees a
//! [`BindingNamespace`]. Every guest bus call passes the bus bridge
//! ([`crate::bridge`]) before dispatch and carries its runtime as the
//! [`Caller`], so what it starts is charged to it and ends with it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use code_runner_core::{
    BindingCall, BindingError, BindingNamespace, Bindings, ErrorCode, Lang, RunnerError,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::bridge;
use crate::bus::{Caller, GuestCaller};
use crate::functions::{RUN, parse};
use crate::iii::Delivery;
use crate::lineage::RuntimeKey;
use crate::namespaces::FunctionId;
use crate::published::{Owner, check_format};
use crate::worker::Inner;

/// Fire-and-forget calls one turn may have in flight; one more is refused.
pub const MAX_FIRE_AND_FORGET: usize = 16;

/// What the guest's `iii` knows about the runtime it runs in.
#[derive(Debug, Clone)]
pub(crate) struct GuestContext {
    /// The runtime's lineage key.
    pub key: RuntimeKey,
    /// The root of its lineage.
    pub root: RuntimeKey,
    /// Its language.
    pub lang: Lang,
    /// The namespace it serves (a namespace runtime), else `None`.
    pub namespace: Option<String>,
}

impl GuestContext {
    /// The context of the live runtime `key`.
    pub fn of(inner: &Inner, key: RuntimeKey, lang: Lang, namespace: Option<String>) -> Self {
        GuestContext {
            key,
            root: inner.lineage.root(key).unwrap_or(key),
            lang,
            namespace,
        }
    }

    /// Who owns what this runtime publishes.
    pub fn owner(&self) -> Owner {
        match &self.namespace {
            Some(namespace) => Owner::Namespace {
                namespace: namespace.clone(),
                lang: self.lang,
            },
            None => Owner::Runtime(self.key),
        }
    }
}

/// The payload of `iii.trigger`, shaped like the iii SDK's `TriggerRequest`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerRequest {
    function_id: String,
    #[serde(default)]
    payload: Value,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    action: Option<TriggerAction>,
}

/// How a call is routed, as the iii SDK spells it.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum TriggerAction {
    /// Through a named queue.
    Enqueue { queue: String },
    /// Fire-and-forget: answered at once with null.
    Void,
}

/// The `iii` shape a pooled runtime's warm-up turn installs, so an engine
/// that sets bindings up once per shape (node) has done it before a run
/// takes the runtime. The warm-up program is empty: nothing here is called.
pub(crate) fn warm_up_bindings(lang: Lang) -> Bindings {
    let key = RuntimeKey::PLACEHOLDER;
    bindings(
        Weak::new(),
        GuestContext {
            key,
            root: key,
            lang,
            namespace: None,
        },
    )
}

/// The guest's `iii` for a turn on the runtime described by `ctx`.
pub(crate) fn bindings(inner: Weak<Inner>, ctx: GuestContext) -> Bindings {
    let ctx = Arc::new(ctx);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let namespace = ctx.namespace.clone().map_or(Value::Null, Value::String);
    let mut iii = BindingNamespace::new("iii")
        .function("trigger", {
            let (inner, ctx) = (inner.clone(), ctx.clone());
            move |args, call| trigger(inner.clone(), ctx.clone(), in_flight.clone(), args, call)
        })
        .value("namespace", namespace)
        .error_class("IIIError", "member");
    if ctx.lang == Lang::Node {
        iii = iii.registrar("registerFunction", move |args, _call| {
            register_from_guest(inner.clone(), ctx.clone(), args)
        });
    }
    Bindings::new(vec![iii]).unwrap_or_default()
}

fn binding_error(err: RunnerError) -> BindingError {
    BindingError::from(err)
}

/// `iii.trigger`: a bus call that passes the bridge first, whose budget is
/// clamped to what is left of the calling turn.
async fn trigger(
    inner: Weak<Inner>,
    ctx: Arc<GuestContext>,
    in_flight: Arc<AtomicUsize>,
    args: Value,
    call: BindingCall,
) -> Result<Value, BindingError> {
    let inner = inner
        .upgrade()
        .ok_or_else(|| BindingError::message("the worker is shutting down"))?;
    let request: TriggerRequest = parse(args)
        .map_err(|err| BindingError::message(format!("iii.trigger: {}", err.message)))?;
    bridge::check(&request.function_id, &request.payload).map_err(|refusal| BindingError {
        code: Some(bridge::FORBIDDEN.into()),
        message: refusal.to_string(),
    })?;
    if inner.published.owner_of(&request.function_id) == Some(ctx.owner()) {
        return Err(binding_error(RunnerError::invalid(format!(
            "iii.trigger({}): that function is served by this same runtime, which runs one turn at a time; call its handler directly",
            request.function_id
        ))));
    }
    let left = call.deadline.saturating_duration_since(Instant::now());
    let budget = request
        .timeout_ms
        .map_or(left, |ms| Duration::from_millis(ms).min(left));
    let caller = Caller {
        guest: Some(GuestCaller {
            runtime: ctx.key,
            root: ctx.root,
            namespace: ctx.namespace.clone(),
            deadline: Instant::now() + budget,
        }),
    };
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
    let function_id = request.function_id;
    match request.action {
        None => {
            let call = async {
                match inner.engine_for(&function_id) {
                    Some(link) => {
                        link.trigger(&function_id, payload, budget, Delivery::Call)
                            .await
                    }
                    None => inner.bus.call_as(&function_id, payload, caller).await,
                }
            };
            match tokio::time::timeout(budget, call).await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(err)) => Err(BindingError {
                    code: Some(err.code),
                    message: err.message,
                }),
                Err(_) => Err(BindingError {
                    code: Some(ErrorCode::Timeout.as_str().into()),
                    message: format!(
                        "iii.trigger({function_id}) got no answer within {} ms",
                        budget.as_millis()
                    ),
                }),
            }
        }
        Some(TriggerAction::Void) => {
            // Answered at once; the call runs on within the turn's budget,
            // and at most MAX_FIRE_AND_FORGET of a turn's at a time, whether
            // this worker or another worker behind the engine serves it. (The
            // engine's own void would be answered at once with nothing to
            // wait for, so a loop sent 34 000 of them in 3 s.) Through the
            // engine it is a plain call whose answer is dropped.
            let reserved = in_flight.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_FIRE_AND_FORGET).then_some(n + 1)
            });
            if reserved.is_err() {
                return Err(binding_error(RunnerError::new(
                    ErrorCode::Capacity,
                    format!(
                        "iii.trigger: {MAX_FIRE_AND_FORGET} fire-and-forget calls of this turn are still running; wait for one or call without an action"
                    ),
                )));
            }
            tokio::spawn(async move {
                let call = async {
                    match inner.engine_for(&function_id) {
                        Some(link) => {
                            link.trigger(&function_id, payload, budget, Delivery::Call)
                                .await
                        }
                        None => inner.bus.call_as(&function_id, payload, caller).await,
                    }
                };
                if let Ok(Err(err)) = tokio::time::timeout(budget, call).await {
                    tracing::debug!(function = %function_id, code = %err.code, "a fire-and-forget call failed");
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
            });
            Ok(Value::Null)
        }
        Some(TriggerAction::Enqueue { queue }) => {
            Err(binding_error(RunnerError::invalid(format!(
                "iii.trigger: action enqueue (queue `{}`) needs a queue provider, and this worker has none; call without an action, or with {{\"type\": \"void\"}}",
                queue.chars().take(100).collect::<String>()
            ))))
        }
    }
}

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
/// A namespace runtime registers under its own namespace only. A runtime
/// with no namespace (`iii.namespace` is null) may register under any free
/// namespace, and its first registration there claims the whole namespace
/// for it until it ends.
async fn register_from_guest(
    inner: Weak<Inner>,
    ctx: Arc<GuestContext>,
    args: Value,
) -> Result<Value, BindingError> {
    let inner = inner
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
    let options = call.options.unwrap_or_default();
    let request_schema =
        check_format("request_format", options.request_format).map_err(binding_error)?;
    let response_schema =
        check_format("response_format", options.response_format).map_err(binding_error)?;
    let function = crate::invoke::published_function(
        &inner,
        &id,
        Lang::Node,
        options.description,
        request_schema,
        response_schema,
    );
    inner
        .published
        .publish(&id, ctx.owner(), Lang::Node, function, &inner.bus)
        .map_err(binding_error)?;
    Ok(json!({ "function_id": id.as_str(), "registered": true }))
}

#[cfg(test)]
mod tests {
    //! The registrar's host side, through a real worker on real wasmtime: a
    //! kept python runtime stands in as the owner, and the registrar is
    //! called as node's engine would call it, with `{id, options}`. Node's
    //! own path, through real V8, is in `tests/all/node_guest.rs`.

    use super::*;
    use crate::{Worker, WorkerOptions};
    use code_runner_core::BindingCall;

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
        let key = worker.inner().registry.get(&id).unwrap().key;
        (id, key)
    }

    async fn register(
        worker: &Worker,
        context: GuestContext,
        args: Value,
    ) -> Result<Value, BindingError> {
        let bindings = bindings(Arc::downgrade(worker.inner()), context);
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
        GuestContext::of(worker.inner(), key, Lang::Node, namespace.map(String::from))
    }

    /// Python's `iii` has no registrar; node's does, beside trigger and namespace.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_node_runtimes_get_a_registrar() {
        let (worker, _temp) = worker().await;
        let (_, key) = kept(&worker).await;
        let python = bindings(
            Arc::downgrade(worker.inner()),
            GuestContext::of(worker.inner(), key, Lang::Python, None),
        );
        assert!(python.lookup("iii", "registerFunction").is_none());
        assert!(python.lookup("iii", "trigger").is_some());
        let node = bindings(Arc::downgrade(worker.inner()), node(&worker, key, None));
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
        let (_, a) = kept(&worker).await;
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
        ] {
            let err = register(&worker, node(&worker, b, None), args)
                .await
                .unwrap_err();
            assert_eq!(err.code.as_deref(), Some("code-runner::invalid_request"));
            assert!(err.message.contains(why), "{why}: {}", err.message);
        }
        // Tearing the namespace down destroys the runtime that held it.
        let torn = worker
            .call("code-runner::teardown", json!({"namespace": "tools"}))
            .await
            .unwrap();
        assert_eq!(torn["unregistered"], json!(["tools::x"]));
        assert_eq!(torn["namespace"], "tools::");
        assert!(worker.inner().lineage.runtime(a).is_none());
        register(&worker, node(&worker, b, None), json!({"id": "tools::y"}))
            .await
            .unwrap();
    }
}
