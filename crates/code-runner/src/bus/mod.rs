//! The embedded bus: functions by id, with their schemas.

pub(crate) mod bridge;
pub(crate) mod catalog;
pub(crate) mod detached;
pub mod names;
pub(crate) mod naming;
pub(crate) mod outbound;
pub(crate) mod payload;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use code_runner_core::wire::{FunctionInfo, FunctionsInfoResponse};
use code_runner_core::{AbortSignal, BoxFuture, LiveOutput, PartialOutput, RunnerError};
use serde::Serialize;
use serde_json::Value;

use crate::ids::RuntimeKey;
use crate::telemetry::{CallKind, TraceParent, Traces};

/// The error code of a call to an id nothing is registered under.
pub const FUNCTION_NOT_FOUND: &str = "function_not_found";

/// A bus error: a contract code or a bus-level one, with a message, and
/// for a run stopped mid-way (a timeout, a memory cap) its output so far
/// beside them (`stdout`, `stderr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct CallError {
    /// e.g. `code-runner::timeout` or `function_not_found`.
    pub code: String,
    /// Human-readable detail.
    pub message: String,
    /// A stopped run's output so far, capped as a response's is.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub output: Option<Box<PartialOutput>>,
}

impl CallError {
    /// `code: message`, then a stopped run's output so far, if it has any,
    /// for a caller that reads only text (an MCP tool error, an engine's).
    pub fn with_output_text(&self) -> String {
        let mut text = format!("{}: {}", self.code, self.message);
        if let Some(output) = &self.output {
            for (name, stream) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
                if !stream.is_empty() {
                    text.push_str(&format!("\n\n{name} before it stopped:\n{stream}"));
                }
            }
        }
        text
    }

    /// An error with `code` and `message`, and no output.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        CallError {
            code: code.into(),
            message: message.into(),
            output: None,
        }
    }
}

impl From<RunnerError> for CallError {
    fn from(err: RunnerError) -> Self {
        CallError {
            code: err.code.as_str().to_string(),
            message: code_runner_core::bound_message(err.message),
            output: err.output,
        }
    }
}

/// Who makes a bus call: the host (HTTP, the CLI, an engine connection), or
/// guest code through its `iii.trigger`.
///
/// A guest call carries the calling runtime, so what it starts (a nested
/// run, kept or not, a namespace) is charged to it and lives no longer than
/// it does, its deadline, so nothing it starts outlives its budget, and its
/// turn's scope, so a nested run ends when the turn that started it answers.
/// A guest of another code-runner worker arrives through the engine with
/// its lineage ([`crate::edge::iii`]) and is a guest here too.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub(crate) guest: Option<GuestCaller>,
    /// A host caller that can take its call back (an MCP client's
    /// `notifications/cancelled`): a run it starts is chained to this signal.
    pub(crate) cancel: Option<AbortSignal>,
    /// A host caller that streams: a run it starts hands its output here
    /// while the guest writes it.
    pub(crate) live: Option<LiveOutput>,
    /// The trace the call continues: the host caller's (a `traceparent`
    /// header, MCP's `_meta`, the engine's invocation) or the calling turn's.
    pub(crate) trace: TraceParent,
}

/// The guest side of a [`Caller`].
#[derive(Debug, Clone)]
pub(crate) struct GuestCaller {
    /// The runtime whose code made the call.
    pub runtime: RuntimeKey,
    /// The top of its lineage: the runtime a host call created.
    pub root: RuntimeKey,
    /// The namespace the calling runtime serves, if it is a namespace runtime.
    pub namespace: Option<String>,
    /// When the calling turn's budget ends.
    pub deadline: Instant,
    /// Fires when the calling turn answers: a run the call starts is
    /// chained to it, so it ends with the turn that started it.
    pub scope: AbortSignal,
}

impl Caller {
    /// A host call: no budget but the callee's own, nothing to charge.
    pub fn host() -> Caller {
        Caller::default()
    }

    /// A host call that `cancel` takes back (firing it aborts the run the
    /// call started) and that sees the run's output as it is written, if
    /// `live` is given.
    pub fn host_streaming(cancel: AbortSignal, live: Option<LiveOutput>) -> Caller {
        Caller {
            guest: None,
            cancel: Some(cancel),
            live,
            trace: TraceParent::default(),
        }
    }

    /// The same caller, continuing the trace `parent`.
    #[must_use]
    pub fn continuing(mut self, parent: TraceParent) -> Caller {
        self.trace = parent;
        self
    }

    /// The time left before the calling guest's deadline (`None` for the host).
    pub(crate) fn time_left(&self) -> Option<Duration> {
        self.guest
            .as_ref()
            .map(|g| g.deadline.saturating_duration_since(Instant::now()))
    }
}

/// A function handler: JSON payload and caller in, JSON answer or error out.
pub type Handler =
    Arc<dyn Fn(Value, Caller) -> BoxFuture<'static, Result<Value, CallError>> + Send + Sync>;

/// A bus function: its description, schemas, metadata and handler.
///
/// Schemas and metadata are shared (`Arc`): describing a function copies
/// pointers under the bus lock, never the schemas themselves.
#[derive(Clone)]
pub struct Function {
    /// What `engine::functions::info` shows a caller.
    pub description: String,
    /// JSON Schema of the payload.
    pub request_schema: Arc<Value>,
    /// JSON Schema of the answer.
    pub response_schema: Arc<Value>,
    /// Free-form metadata; `{"internal": true}` marks a function callers
    /// do not call directly (hooks, content functions).
    pub metadata: Arc<Value>,
    /// The handler.
    pub handler: Handler,
    /// The lineage root of the guest code that published it (node's
    /// `iii.registerFunction`, or `register_function` called from a run);
    /// `None` for the host's and the worker's own.
    pub publisher: Option<RuntimeKey>,
}

impl Function {
    /// A function with schemas and empty metadata.
    pub fn new(
        description: impl Into<String>,
        request_schema: Value,
        response_schema: Value,
        handler: Handler,
    ) -> Self {
        Function {
            description: description.into(),
            request_schema: Arc::new(request_schema),
            response_schema: Arc::new(response_schema),
            metadata: Arc::new(Value::Object(Default::default())),
            handler,
            publisher: None,
        }
    }

    /// Marks the function published by guest code of the lineage rooted at
    /// `root` (`metadata.guest_published: true`).
    #[must_use]
    pub fn published_by_guest(mut self, root: RuntimeKey) -> Self {
        self.publisher = Some(root);
        self.with_metadata(GUEST_PUBLISHED, Value::Bool(true))
    }

    /// Whether a listing shows `self` and `other` alike: the same
    /// description, schemas, metadata and publisher (handlers may differ).
    fn lists_as(&self, other: &Function) -> bool {
        let same = |a: &Arc<Value>, b: &Arc<Value>| Arc::ptr_eq(a, b) || a == b;
        self.description == other.description
            && self.publisher == other.publisher
            && same(&self.request_schema, &other.request_schema)
            && same(&self.response_schema, &other.response_schema)
            && same(&self.metadata, &other.metadata)
    }

    /// Marks the function internal (`metadata.internal: true`).
    #[must_use]
    pub fn internal(self) -> Self {
        self.with_metadata("internal", Value::Bool(true))
    }

    /// Sets one metadata key.
    #[must_use]
    pub fn with_metadata(mut self, key: &str, value: Value) -> Self {
        if let Value::Object(map) = Arc::make_mut(&mut self.metadata) {
            map.insert(key.into(), value);
        }
        self
    }
}

/// The metadata key that marks a function guest code published.
pub const GUEST_PUBLISHED: &str = "guest_published";

/// Every function as a listing shows it, built once per change of the bus
/// and shared by everyone who lists ([`Bus::listing`]).
#[derive(Debug)]
pub struct Listing {
    /// The change counter it was built at (it may show later changes too).
    pub generation: u64,
    /// The functions, by id.
    pub functions: Vec<FunctionInfo>,
    /// For each function, in the same order: its [`Function::publisher`].
    pub publishers: Vec<Option<RuntimeKey>>,
}

/// The registry of bus functions.
pub struct Bus {
    functions: RwLock<BTreeMap<String, Function>>,
    /// Bumped when the listing changes (an id added or removed, or what it
    /// shows of one), so a mirror (the iii engine link) and MCP sessions can
    /// follow; re-registering a function as it was leaves it alone.
    changes: tokio::sync::watch::Sender<u64>,
    /// The last listing built, reused until the next change.
    listing: Mutex<Option<Arc<Listing>>>,
    /// Each call's span.
    traces: Traces,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            functions: RwLock::default(),
            changes: tokio::sync::watch::Sender::new(0),
            listing: Mutex::default(),
            traces: Traces::default(),
        }
    }
}

impl Bus {
    /// Registers (or replaces) `id`; the change counter moves only when the
    /// listing shows something new.
    pub fn register(&self, id: &str, function: Function) {
        let changed = {
            let mut functions = self.write();
            let same = functions.get(id).is_some_and(|old| old.lists_as(&function));
            functions.insert(id.to_string(), function);
            !same
        };
        if changed {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// The listing of every function, built at most once per change: the
    /// first caller after a change builds it (the others wait for it), the
    /// rest share it. Building copies every schema, so call it off the async
    /// workers unless [`Bus::cached_listing`] has it.
    pub fn listing(&self) -> Arc<Listing> {
        let mut cached = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        // Read before the functions: the listing is never older than its generation.
        let generation = *self.changes.borrow();
        if let Some(listing) = cached.as_ref().filter(|l| l.generation == generation) {
            return listing.clone();
        }
        let entries: Vec<(String, Function)> = self.snapshot();
        let publishers = entries.iter().map(|(_, f)| f.publisher).collect();
        let functions = entries
            .into_iter()
            .map(|(id, entry)| describe(id, entry))
            .collect();
        let listing = Arc::new(Listing {
            generation,
            functions,
            publishers,
        });
        *cached = Some(listing.clone());
        listing
    }

    /// The listing [`Bus::listing`] would return, if it is built already.
    pub fn cached_listing(&self) -> Option<Arc<Listing>> {
        let cached = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        let generation = *self.changes.borrow();
        cached
            .as_ref()
            .filter(|l| l.generation == generation)
            .cloned()
    }

    /// Every function, by id: what a mirror registers elsewhere.
    pub fn snapshot(&self) -> Vec<(String, Function)> {
        self.read()
            .iter()
            .map(|(id, f)| (id.clone(), f.clone()))
            .collect()
    }

    /// The function registered under `id`.
    pub fn get(&self, id: &str) -> Option<Function> {
        self.read().get(id).cloned()
    }

    /// Whether function `id`'s metadata has `key: true`, read in place.
    pub fn has_flag(&self, id: &str, key: &str) -> bool {
        self.read()
            .get(id)
            .is_some_and(|function| function.metadata.get(key) == Some(&Value::Bool(true)))
    }

    /// A receiver that wakes on every change of the listing.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Removes `id`; whether it was there.
    pub fn unregister(&self, id: &str) -> bool {
        let removed = self.write().remove(id).is_some();
        if removed {
            self.changes.send_modify(|n| *n += 1);
        }
        removed
    }

    /// Calls `id` with `payload`, as the host.
    ///
    /// # Errors
    /// `function_not_found` for an unknown id, else the handler's error.
    pub async fn call(&self, id: &str, payload: Value) -> Result<Value, CallError> {
        self.call_as(id, payload, Caller::host()).await
    }

    /// Calls `id` with `payload` on behalf of `caller`, in a span of its
    /// own within the caller's trace.
    ///
    /// # Errors
    /// `function_not_found` for an unknown id, else the handler's error.
    pub async fn call_as(
        &self,
        id: &str,
        payload: Value,
        mut caller: Caller,
    ) -> Result<Value, CallError> {
        let handler = self
            .read()
            .get(id)
            .map(|entry| entry.handler.clone())
            .ok_or_else(|| not_found(id))?;
        let kind = match caller.guest {
            Some(_) => CallKind::Guest,
            None => CallKind::Host,
        };
        let span = self.traces.start(id, kind, &caller.trace);
        caller.trace = span.parent();
        let answer = handler(payload, caller).await;
        span.end(answer.as_ref().err().map(|err| err.code.as_str()));
        answer
    }

    /// The calls' tracer (what the composition root gives its sinks).
    pub fn traces(&self) -> &Traces {
        &self.traces
    }

    /// Whether `id` is registered.
    pub fn contains(&self, id: &str) -> bool {
        self.read().contains_key(id)
    }

    /// Describes `ids`, each distinct id once, in the order first asked; an
    /// unknown id gets an entry with `error`.
    ///
    /// The bus lock is held only to copy pointers; the schemas are copied
    /// into the answer after it is released. Callers bound `ids` (the info
    /// function takes at most [`code_runner_core::wire::MAX_INFO_IDS`]).
    pub fn info(&self, ids: &[String]) -> FunctionsInfoResponse {
        let mut seen = HashSet::with_capacity(ids.len());
        let distinct: Vec<&String> = ids.iter().filter(|id| seen.insert(id.as_str())).collect();
        let found: Vec<Option<Function>> = {
            let functions = self.read();
            distinct
                .iter()
                .map(|id| functions.get(id.as_str()).cloned())
                .collect()
        };
        let describe = |(id, entry): (&String, Option<Function>)| match entry {
            Some(entry) => describe(id.clone(), entry),
            None => FunctionInfo {
                function_id: id.clone(),
                description: None,
                request_schema: None,
                response_schema: None,
                metadata: None,
                error: Some(code_runner_core::bound_message(format!(
                    "{FUNCTION_NOT_FOUND}: no function `{id}` on this bus"
                ))),
            },
        };
        FunctionsInfoResponse {
            functions: distinct.into_iter().zip(found).map(describe).collect(),
        }
    }

    /// Every registered id, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Function>> {
        self.functions.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Function>> {
        self.functions.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a listing shows of `entry`: its schemas copied out of their `Arc`s.
fn describe(id: String, entry: Function) -> FunctionInfo {
    FunctionInfo {
        function_id: id,
        description: Some(entry.description),
        request_schema: Some(Value::clone(&entry.request_schema)),
        response_schema: Some(Value::clone(&entry.response_schema)),
        metadata: Some(Value::clone(&entry.metadata)),
        error: None,
    }
}

/// The error of a call to an id nothing is registered under.
pub fn not_found(id: &str) -> CallError {
    CallError {
        code: FUNCTION_NOT_FOUND.into(),
        message: code_runner_core::bound_message(format!("no function `{id}` on this bus")),
        output: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(schema: Value) -> Function {
        let handler: Handler = Arc::new(|payload, _caller| Box::pin(async move { Ok(payload) }));
        Function::new("echo", schema.clone(), schema, handler)
    }

    /// A repeated id is described once, in the order first asked, and an
    /// unknown one gets an error entry: a long list of one id cannot
    /// multiply the schemas in the answer.
    #[test]
    fn info_describes_each_distinct_id_once() {
        let bus = Bus::default();
        bus.register("a::x", function(serde_json::json!({"type": "object"})));
        let ids: Vec<String> = ["a::x", "b::y", "a::x", "a::x", "b::y"]
            .map(String::from)
            .to_vec();
        let info = bus.info(&ids);
        let listed: Vec<&str> = info
            .functions
            .iter()
            .map(|f| f.function_id.as_str())
            .collect();
        assert_eq!(listed, ["a::x", "b::y"]);
        assert_eq!(
            info.functions[0].request_schema,
            Some(serde_json::json!({"type": "object"}))
        );
        assert!(
            info.functions[1]
                .error
                .as_deref()
                .unwrap_or("")
                .starts_with(FUNCTION_NOT_FOUND)
        );
    }

    /// Registered functions share their schemas: a clone of the entry is a
    /// pointer copy, not a copy of the schema.
    #[test]
    fn function_entries_share_their_schemas() {
        let f = function(serde_json::json!({"type": "string"}));
        let g = f.clone();
        assert!(Arc::ptr_eq(&f.request_schema, &g.request_schema));
        let internal = g.internal();
        assert_eq!(internal.metadata["internal"], true);
        assert_eq!(*f.metadata, serde_json::json!({}));
    }

    /// Registering a function as it was (another handler, the same
    /// listing) wakes nobody; a changed description or a new id does. The
    /// listing is built once per change and shared until the next.
    #[test]
    fn the_listing_changes_only_when_what_it_shows_does() {
        let bus = Bus::default();
        let changes = bus.subscribe();
        bus.register("a::x", function(serde_json::json!({"type": "object"})));
        assert!(changes.has_changed().unwrap());
        let first = bus.listing();
        assert!(Arc::ptr_eq(&first, &bus.listing()));
        assert!(Arc::ptr_eq(&first, &bus.cached_listing().unwrap()));
        let mut changes = bus.subscribe();
        for _ in 0..100 {
            bus.register("a::x", function(serde_json::json!({"type": "object"})));
        }
        assert!(!changes.has_changed().unwrap());
        assert!(Arc::ptr_eq(&first, &bus.listing()));
        let mut described = function(serde_json::json!({"type": "object"}));
        described.description = "another".into();
        bus.register("a::x", described);
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        assert!(bus.cached_listing().is_none());
        let second = bus.listing();
        assert_eq!(second.functions[0].description.as_deref(), Some("another"));
        bus.register(
            "a::x",
            function(Value::Null).published_by_guest(RuntimeKey::new(7)),
        );
        let third = bus.listing();
        assert_eq!(third.publishers, [Some(RuntimeKey::new(7))]);
        assert_eq!(
            third.functions[0].metadata.as_ref().unwrap()[GUEST_PUBLISHED],
            true
        );
    }

    /// Unregistering makes an id unknown again.
    #[tokio::test]
    async fn unregister_makes_an_id_unknown() {
        let bus = Bus::default();
        bus.register("a::x", function(Value::Null));
        assert_eq!(bus.call("a::x", Value::from(1)).await, Ok(Value::from(1)));
        assert!(bus.unregister("a::x"));
        assert!(!bus.unregister("a::x"));
        assert_eq!(
            bus.call("a::x", Value::Null).await.unwrap_err().code,
            FUNCTION_NOT_FOUND
        );
    }
}
