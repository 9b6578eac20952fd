//! Keeps the engine's registrations in step with the embedded bus.
//!
//! The bus is the source of truth: whatever it holds (except the ids the
//! engine owns itself) is registered on the engine with the same description,
//! schemas and metadata, and whatever leaves it is unregistered there. The SDK
//! replays registrations after a reconnect by itself; the mirror only follows
//! changes.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

use iii_sdk::runtime::FunctionRef;
use iii_sdk::{IIIClient, RegisterFunction};
use serde_json::Value;

use crate::bus::{CallError, Function};
use crate::ops::Ops;

/// Ids the engine serves itself: registering them would shadow or collide.
fn engine_owned(id: &str) -> bool {
    id.starts_with("engine::") || id.starts_with("configuration::")
}

/// What the engine holds for one id, and what it was registered from.
struct Mirrored {
    function: FunctionRef,
    fingerprint: u64,
}

/// The set of functions registered on the engine on the bus's behalf.
#[derive(Default)]
pub(crate) struct Mirror {
    held: Mutex<HashMap<String, Mirrored>>,
}

impl Mirror {
    /// Registers new and changed bus functions on the engine and unregisters
    /// the ones the bus no longer holds. Serialized by the lock: the SDK
    /// panics on a duplicate registration in one process.
    pub(crate) fn sync(&self, client: &IIIClient, ops: &Arc<Ops>) {
        let wanted: HashMap<String, Function> = ops
            .bus
            .snapshot()
            .into_iter()
            .filter(|(id, _)| !engine_owned(id) && !id.trim().is_empty())
            .collect();
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|id, entry| {
            let keep = wanted
                .get(id)
                .is_some_and(|f| fingerprint(f) == entry.fingerprint);
            if !keep {
                entry.function.unregister();
                tracing::debug!(function = %id, "unregistered on the engine");
            }
            keep
        });
        for (id, function) in wanted {
            if held.contains_key(&id) {
                continue;
            }
            let fingerprint = fingerprint(&function);
            let registration = registration(&id, &function, Arc::downgrade(ops));
            let function_ref = client.register_function(id.clone(), registration);
            tracing::debug!(function = %id, "registered on the engine");
            held.insert(
                id,
                Mirrored {
                    function: function_ref,
                    fingerprint,
                },
            );
        }
    }

    /// Drops `id` from the engine-side set and registers it again: the engine
    /// refused it while another worker owned it and does not retry by itself.
    /// Only called once the engine reports no owner, so nothing is taken away.
    pub(crate) fn reclaim(&self, client: &IIIClient, ops: &Arc<Ops>, id: &str) {
        if let Some(entry) = self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            entry.function.unregister();
        }
        self.sync(client, ops);
    }

    /// Unregisters everything (shutdown).
    pub(crate) fn clear(&self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        for (_, entry) in held.drain() {
            entry.function.unregister();
        }
    }
}

/// A hash of what the engine shows for a function: a change re-registers it.
fn fingerprint(function: &Function) -> u64 {
    let mut hasher = DefaultHasher::new();
    function.description.hash(&mut hasher);
    function.request_schema.to_string().hash(&mut hasher);
    function.response_schema.to_string().hash(&mut hasher);
    function.metadata.to_string().hash(&mut hasher);
    hasher.finish()
}

/// The engine-side registration of bus function `id`: the engine's calls go
/// to the bus, its errors back in the engine's shape with our codes intact.
fn registration(id: &str, function: &Function, ops: Weak<Ops>) -> RegisterFunction {
    let id = id.to_string();
    RegisterFunction::new_async(move |payload: Value, metadata: Option<Value>| {
        let (ops, id) = (ops.clone(), id.clone());
        async move {
            let ops = ops.upgrade().ok_or_else(|| {
                remote(CallError {
                    code: code_runner_core::ErrorCode::Engine.as_str().into(),
                    message: "the worker is shutting down".into(),
                    output: None,
                })
            })?;
            // A guest of another worker stays a guest here (see `remote`).
            let caller = super::remote::caller(&ops, metadata.as_ref());
            ops.bus
                .call_as(&id, strip_injected(payload), caller)
                .await
                .map_err(remote)
        }
    })
    .description(function.description.clone())
    .request_format(Value::clone(&function.request_schema))
    .response_format(Value::clone(&function.response_schema))
    .metadata(Value::clone(&function.metadata))
}

/// The engine adds `_caller_worker_id` to every object payload a worker
/// sends; our requests refuse unknown fields, so it goes before parsing.
/// Only this path strips it: an HTTP caller's stray field is still refused.
pub(crate) fn strip_injected(mut payload: Value) -> Value {
    if let Value::Object(map) = &mut payload {
        map.remove("_caller_worker_id");
    }
    payload
}

/// A bus error in the engine's wire shape.
pub(crate) fn remote(err: CallError) -> iii_sdk::Error {
    // The engine's error has no field for a stopped run's output: it goes
    // in the message, after the error's own text.
    let message = match &err.output {
        Some(_) => code_runner_core::bound_message(
            err.with_output_text()
                .trim_start_matches(&format!("{}: ", err.code))
                .to_string(),
        ),
        None => err.message,
    };
    iii_sdk::Error::Remote {
        code: err.code,
        message,
        stacktrace: None,
    }
}
