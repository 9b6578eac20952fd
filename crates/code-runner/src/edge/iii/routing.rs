//! Several code-runner workers on one engine.
//!
//! The engine gives each function id one owner, so a deployment of N workers
//! is addressed two ways:
//!
//! - **Shared ids** (`code-runner::run`, `::register_function`, `::teardown`):
//!   every worker registers them; the engine keeps the first and refuses the
//!   rest. The owner is the *front*: it routes. When it goes away, the others
//!   notice the id is free and register it again ([`claim_shared`]).
//! - **Worker-scoped ids** (`code-runner@<worker>::run`, …): each worker
//!   registers its own; they always run locally, never route again.
//!
//! Routing, on whichever worker a shared call lands:
//! - a `runtime_id` names the worker that minted it (`rt_<worker>_<secret>`),
//!   so runs and teardowns on a kept runtime go to that worker; a linked
//!   file's uri names its worker the same way (`lk_<worker>_<secret>`), so
//!   `read_file` goes to the worker that holds the file;
//! - a namespace lives where its functions are registered: `register_function`
//!   and `teardown {namespace}` go to the worker that holds the namespace
//!   (found in `engine::functions::list`), a new namespace stays local;
//! - a one-shot run goes round-robin over the live workers (this one
//!   included), and a worker at capacity passes it on to the next;
//! - a guest's own call (its `iii.trigger` of `code-runner::run`) stays on
//!   its worker, charged to the calling runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bus::names::{READ_FILE, REGISTER_FUNCTION, RELEASE, RUN, TEARDOWN};
use crate::bus::{CallError, Caller, FUNCTION_NOT_FOUND, Function, Handler};
use crate::edge::iii::{Delivery, IiiLink};
use crate::ops::Ops;
use crate::ops::sessions::hibernate;

/// The shared ids a front routes.
pub(crate) const SHARED: [&str; 4] = [RUN, REGISTER_FUNCTION, TEARDOWN, READ_FILE];

/// How long a peer list read from the engine stays fresh.
const PEERS_FRESH: Duration = Duration::from_secs(2);

/// Extra time a forwarded call may take beyond the run's own budget.
const FORWARD_MARGIN: Duration = Duration::from_secs(15);

/// `code-runner@<worker>::<op>`, the scoped twin of shared id `shared`.
pub fn scoped_id(worker: &str, shared: &str) -> String {
    let op = shared.strip_prefix("code-runner::").unwrap_or(shared);
    format!("code-runner@{worker}::{op}")
}

/// The worker a scoped id belongs to, for `code-runner@<worker>::run`.
fn scoped_worker(id: &str) -> Option<&str> {
    id.strip_prefix("code-runner@")?.strip_suffix("::run")
}

pub use crate::ids::minted_by;

/// The routing state of one worker.
pub(crate) struct Router {
    next: AtomicUsize,
    peers: std::sync::Mutex<Option<(Instant, Vec<String>)>>,
}

impl Router {
    pub(crate) fn new() -> Router {
        Router {
            next: AtomicUsize::new(0),
            peers: std::sync::Mutex::new(None),
        }
    }

    /// The live workers, sorted (this one included once its scoped id is up).
    async fn peers(&self, link: &IiiLink) -> Vec<String> {
        if let Some((at, peers)) = &*self.peers.lock().unwrap_or_else(|p| p.into_inner())
            && at.elapsed() < PEERS_FRESH
        {
            return peers.clone();
        }
        let listed = list_functions(link).await.unwrap_or(Value::Null);
        let mut peers: Vec<String> = listed["functions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["function_id"].as_str())
            .filter_map(scoped_worker)
            .map(str::to_string)
            .collect();
        peers.sort();
        peers.dedup();
        if !peers.iter().any(|p| p == link.worker_name()) {
            peers.push(link.worker_name().to_string());
        }
        *self.peers.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), peers.clone()));
        peers
    }

    /// The worker whose functions hold `namespace`, if another one does.
    async fn namespace_holder(&self, link: &IiiLink, namespace: &str) -> Option<String> {
        let prefix = format!("{}::", namespace.trim_end_matches("::"));
        let listed = list_functions(link).await.ok()?;
        listed["functions"]
            .as_array()?
            .iter()
            .find(|f| {
                f["function_id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with(&prefix))
            })
            .and_then(|f| f["worker_name"].as_str())
            .filter(|owner| *owner != link.worker_name())
            .map(str::to_string)
    }
}

/// Every function the engine lists (`engine::functions::list`), from all its workers.
async fn list_functions(link: &IiiLink) -> Result<Value, CallError> {
    link.trigger(
        "engine::functions::list",
        json!({}),
        Duration::from_secs(5),
        Delivery::Call,
    )
    .await
}

/// Wraps the bus's shared functions with routing and adds the scoped twins,
/// and this worker's `code-runner@<worker>::release` ([`release_function`]).
pub(crate) fn install(ops: &Arc<Ops>, link: &Arc<IiiLink>) {
    ops.bus.register(
        &scoped_id(link.worker_name(), RELEASE),
        release_function(ops),
    );
    for shared in SHARED {
        let Some(local) = ops.bus.get(shared) else {
            continue;
        };
        ops.bus
            .register(&scoped_id(link.worker_name(), shared), local.clone());
        let routed = Function {
            handler: routed_handler(
                shared,
                local.handler.clone(),
                Arc::downgrade(ops),
                Arc::downgrade(link),
            ),
            ..local
        };
        ops.bus.register(shared, routed);
    }
}

fn routed_handler(
    shared: &'static str,
    local: Handler,
    ops: std::sync::Weak<Ops>,
    link: std::sync::Weak<IiiLink>,
) -> Handler {
    Arc::new(move |payload: Value, caller: Caller| {
        let (local, ops, link) = (local.clone(), ops.clone(), link.clone());
        Box::pin(async move {
            // Routed once the worker has joined the engine (its way out is set).
            let link = ops
                .upgrade()
                .filter(|ops| ops.outbound.get().is_some())
                .zip(link.upgrade());
            match link {
                // A guest's own call stays here, charged to its runtime.
                Some((ops, link)) if caller.guest.is_none() => {
                    route(shared, &ops, &link, local, payload, caller).await
                }
                _ => local(payload, caller).await,
            }
        })
    })
}

/// `code-runner@<worker>::release {worker, tree}`: the peer `worker`'s guest
/// tree `tree` has ended, so the calls its guest code made here end too,
/// with the runtimes they kept (see [`crate::ops::retire::release_remote`]).
/// Internal, and refused to guest code (of any worker: a guest's call
/// through the engine carries its lineage, so it is a guest caller here).
fn release_function(ops: &Arc<Ops>) -> Function {
    Function::new(
        "Internal: a peer code-runner's guest tree ended; ends what its calls started here.",
        json!({"type": "object", "required": ["worker", "tree"], "properties": {
            "worker": {"type": "string", "maxLength": 256},
            "tree": {"type": "string", "maxLength": 256}}}),
        json!({"type": "object", "properties": {"released": {"type": "integer"}}}),
        crate::ops::handler_as(ops, |ops: Arc<Ops>, payload, caller: Caller| async move {
            if caller.guest.is_some() {
                return Err(CallError {
                    code: crate::bus::bridge::FORBIDDEN.into(),
                    message: format!("guest code may not call {RELEASE}: it is the workers' own"),
                    output: None,
                });
            }
            let field = |name: &str| {
                payload[name]
                    .as_str()
                    .filter(|value| !value.is_empty() && value.len() <= 256)
                    .map(str::to_string)
                    .ok_or_else(|| {
                        CallError::from(code_runner_core::RunnerError::invalid(format!(
                            "{RELEASE} takes `{name}`, a string of 1 to 256 characters"
                        )))
                    })
            };
            let (worker, tree) = (field("worker")?, field("tree")?);
            let released = crate::ops::retire::release_remote(&ops, &worker, &tree).await;
            Ok(json!({ "released": released }))
        }),
    )
    .internal()
}

/// Tells every peer that this worker's guest tree `tree` ended (fire and
/// forget: a peer that misses it still ends those calls at their deadline).
pub(crate) async fn release(link: &IiiLink, tree: String) {
    let me = link.worker_name();
    let payload = json!({ "worker": me, "tree": tree });
    for peer in link.router.peers(link).await {
        if peer == me {
            continue;
        }
        let id = scoped_id(&peer, RELEASE);
        if let Err(err) = link
            .trigger(&id, payload.clone(), Duration::from_secs(5), Delivery::Void)
            .await
        {
            tracing::debug!(peer = %peer, "cannot tell a peer a guest tree ended: {}", err.message);
        }
    }
}

/// Where a shared call goes: this worker's own function, or a peer's scoped twin.
async fn route(
    shared: &str,
    ops: &Arc<Ops>,
    link: &Arc<IiiLink>,
    local: Handler,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    let me = link.worker_name();
    let budget = Duration::from_millis(ops.config().max_timeout_ms) + FORWARD_MARGIN;
    // A forwarded call is a child of this call's span on the engine.
    let trace = caller.trace.clone();
    let forward = |worker: String, payload: Value| {
        let trace = trace.clone();
        async move {
            let id = scoped_id(&worker, shared);
            let call = link.trigger(&id, payload, budget, Delivery::Call);
            trace.around(call).await
        }
    };
    let link_token = payload["uri"]
        .as_str()
        .and_then(|uri| crate::runtimes::links::parse(uri).ok())
        .map(|(token, _)| token);
    let owner = payload["runtime_id"]
        .as_str()
        .or(link_token)
        .and_then(minted_by)
        .map(str::to_string);
    if let Some(owner) = owner {
        let runtime_id = payload["runtime_id"].as_str().map(str::to_string);
        let held_here = runtime_id
            .as_deref()
            .is_none_or(|id| ops.registry.get(id).is_ok());
        if (owner == me && held_here) || !link.connected() {
            return local(payload, caller.clone()).await;
        }
        // A session another worker woke (its minter had left) lives there
        // now, even once its minter is back.
        if let Some(id) = &runtime_id
            && let Some(holder) = hibernate::holder(ops, id).await
        {
            if holder == me {
                return local(payload, caller.clone()).await;
            }
            match forward(holder, payload.clone()).await {
                Err(err)
                    if passes_on(&err)
                        && err.code != code_runner_core::ErrorCode::Capacity.as_str() => {}
                answer => return answer,
            }
        }
        if owner == me {
            return local(payload, caller.clone()).await;
        }
        let answer = forward(owner.clone(), payload.clone()).await;
        // Its minter is gone, but the store several workers share holds the
        // session it hibernated as it left: woken here.
        if let (Err(err), Some(id)) = (&answer, &runtime_id)
            && passes_on(err)
            && err.code != code_runner_core::ErrorCode::Capacity.as_str()
            && hibernate::is_stored(ops, id).await
        {
            return local(payload, caller.clone()).await;
        }
        return answer
            .map_err(|err| match passes_on(&err) && err.code != code_runner_core::ErrorCode::Capacity.as_str() {
                // The worker that held it is gone, and its runtimes with it.
                true => code_runner_core::RunnerError::new(
                    code_runner_core::ErrorCode::Expired,
                    match shared {
                        READ_FILE => format!("worker {owner}, which held this linked file, has left the engine; run the code again to make a new link"),
                        _ => format!("worker {owner}, which held this runtime, has left the engine; start a new runtime"),
                    },
                )
                .into(),
                false => err,
            });
    }
    let namespace = match shared {
        REGISTER_FUNCTION => payload["function_id"]
            .as_str()
            .and_then(|id| id.split_once("::"))
            .map(|(ns, _)| ns.to_string()),
        TEARDOWN => payload["namespace"].as_str().map(str::to_string),
        _ => None,
    };
    if let Some(namespace) = namespace {
        if link.connected()
            && let Some(holder) = link.router.namespace_holder(link, &namespace).await
        {
            return forward(holder, payload).await;
        }
        return local(payload, caller.clone()).await;
    }
    if shared != RUN || !link.connected() {
        return local(payload, caller.clone()).await;
    }
    // A one-shot or new kept run: round-robin, passing on at capacity.
    let peers = link.router.peers(link).await;
    let start = link.router.next.fetch_add(1, Ordering::Relaxed);
    let mut last = None;
    for i in 0..peers.len() {
        let peer = &peers[(start + i) % peers.len()];
        let answer = if peer == me {
            local.clone()(payload.clone(), caller.clone()).await
        } else {
            forward(peer.clone(), payload.clone()).await
        };
        match answer {
            Err(err) if passes_on(&err) => last = Some(err),
            other => return other,
        }
    }
    match last {
        Some(err) => Err(err),
        None => local(payload, caller.clone()).await,
    }
}

/// Errors after which a one-shot run may try the next worker: that one was
/// full, or gone between the peer list and the call.
fn passes_on(err: &CallError) -> bool {
    err.code == code_runner_core::ErrorCode::Capacity.as_str()
        || err.code.eq_ignore_ascii_case(FUNCTION_NOT_FOUND)
        || err.code.eq_ignore_ascii_case("not_found")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids name their worker and scoped ids their op, and both parse back.
    #[test]
    fn ids_route_to_their_worker() {
        assert_eq!(scoped_id("box1", RUN), "code-runner@box1::run");
        assert_eq!(scoped_worker("code-runner@box1::run"), Some("box1"));
        assert_eq!(scoped_worker("code-runner@box1::teardown"), None);
        let secret = "A".repeat(32);
        assert_eq!(minted_by(&format!("rt_box_1_{secret}")), Some("box_1"));
        assert_eq!(minted_by(&format!("rt_{secret}")), None);
        assert_eq!(minted_by(&format!("rt__{secret}")), None);
        assert_eq!(minted_by("rt_short"), None);
        assert_eq!(minted_by("rt_ü_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), None);
    }
}
