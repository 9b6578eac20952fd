//! Namespace runtimes: one persistent runtime per namespace and language.
//!
//! `code-runner::register_function` defines each handler on the runtime of
//! its namespace and language ([`Task::Define`]); every call of the
//! published id is one [`Task::Invoke`] turn on it. A namespace runtime
//! holds a `max_runtimes` slot, is exempt from the idle sweep and lives
//! until its namespace is torn down.
//!
//! A turn that faults (a timeout, a memory kill) may cost the runtime its
//! interpreter and with it every handler. The runtime is then *suspect*:
//! before its next turn a probe handler, defined when the runtime booted,
//! is invoked; if the probe is gone, every registered source is defined
//! again, in registration order, so the namespace keeps serving (its module
//! state starts afresh, as a kept runtime's does after a timeout). Ids its
//! guest code published with node's `iii.registerFunction` have no source to
//! define again; the caller unpublishes them ([`NamespaceRuntime::take_redefined`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_runner_core::{Lang, Runtime, Task, TurnEnding, TurnOutcome, TurnSpec};
use serde_json::Value;

use crate::bus::naming::fold;
use crate::ids::RuntimeKey;
use crate::ops::guest::GuestBindings;
use crate::ops::tenancy::Writer;
use crate::runtimes::registry::{Slot, WorkDir};

/// The key of the probe handler every namespace runtime defines first.
pub const PROBE_KEY: &str = "code-runner::probe";

/// Most source bytes one namespace runtime keeps for redefinition, across
/// its handlers (one source is at most `register::MAX_SOURCE_BYTES`).
pub const MAX_KEPT_SOURCE_BYTES: usize = 4 * 1024 * 1024;

/// The probe handler's source in `lang`.
pub fn probe_source(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => "def handler(payload):\n    return True\n",
        // Valid TypeScript too: a probe has nothing to strip.
        Lang::Node | Lang::TypeScript => "export function handler(payload) {\n  return true;\n}\n",
    }
}

/// Per-turn settings a caller supplies.
#[derive(Clone)]
pub struct TurnParams {
    /// The turn's budget.
    pub timeout: Duration,
    /// The guest's `iii` for this runtime, and the signal that ends what
    /// its guest code starts ([`NamespaceRuntime::turn`] fires it).
    pub bindings: GuestBindings,
    /// The per-stream cap.
    pub max_stream_bytes: Option<usize>,
}

impl TurnParams {
    fn spec(&self, task: Task) -> TurnSpec {
        TurnSpec {
            live: None,
            task,
            timeout: self.timeout,
            bindings: self.bindings.bindings.clone(),
            max_stream_bytes: self.max_stream_bytes,
            // Its own signal (a bounded runtime fires it when the turn
            // answers), a child of the call's: the call may take several turns.
            abort: self.bindings.scope.child(),
        }
    }
}

/// One namespace's runtime in one language.
pub struct NamespaceRuntime {
    /// The namespace, without `::`.
    pub namespace: String,
    /// Its language.
    pub lang: Lang,
    /// Its lineage key.
    pub key: RuntimeKey,
    /// The engine runtime.
    pub runtime: Arc<dyn Runtime>,
    /// `(function id, source)` in registration order, for redefinition.
    sources: Mutex<Vec<(String, String)>>,
    suspect: AtomicBool,
    redefined: AtomicBool,
    recovering: tokio::sync::Mutex<()>,
    _dir: WorkDir,
    _slot: Slot,
}

impl NamespaceRuntime {
    /// Wraps a booted runtime; call [`NamespaceRuntime::define_probe`] next.
    pub fn new(
        namespace: &str,
        lang: Lang,
        key: RuntimeKey,
        runtime: Arc<dyn Runtime>,
        dir: WorkDir,
        slot: Slot,
    ) -> Arc<Self> {
        Arc::new(NamespaceRuntime {
            namespace: namespace.to_string(),
            lang,
            key,
            runtime,
            sources: Mutex::new(Vec::new()),
            suspect: AtomicBool::new(false),
            redefined: AtomicBool::new(false),
            recovering: tokio::sync::Mutex::new(()),
            _dir: dir,
            _slot: slot,
        })
    }

    /// Defines the probe handler; false when even that failed.
    pub async fn define_probe(&self, params: &TurnParams) -> bool {
        let outcome = self
            .runtime
            .run(params.spec(Task::Define {
                key: PROBE_KEY.into(),
                source: probe_source(self.lang).into(),
            }))
            .await;
        exited_ok(&outcome)
    }

    /// Runs one turn, first restoring the handlers if a fault may have lost
    /// them; then ends what the call's guest code started.
    pub async fn turn(&self, task: Task, params: &TurnParams) -> TurnOutcome {
        self.recover(params).await;
        let outcome = self.runtime.run(params.spec(task)).await;
        params.bindings.scope.abort();
        if matches!(outcome.ending, TurnEnding::Faulted(_)) {
            self.suspect.store(true, Ordering::SeqCst);
        }
        outcome
    }

    /// Whether the source of registered handlers, plus `extra` bytes, still
    /// fits [`MAX_KEPT_SOURCE_BYTES`] (a replaced id's old source not counted).
    pub fn has_room_for(&self, id: &str, extra: usize) -> bool {
        let kept: usize = self
            .lock_sources()
            .iter()
            .filter(|(kept_id, _)| kept_id != id)
            .map(|(_, source)| source.len())
            .sum();
        kept.saturating_add(extra) <= MAX_KEPT_SOURCE_BYTES
    }

    /// Remembers `source` as the definition of `id` (replacing an earlier one).
    pub fn remember(&self, id: &str, source: String) {
        let mut sources = self.lock_sources();
        sources.retain(|(kept, _)| kept != id);
        sources.push((id.to_string(), source));
    }

    /// The ids whose source this runtime keeps, in registration order.
    pub fn defined_ids(&self) -> Vec<String> {
        self.lock_sources()
            .iter()
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Whether the handlers were defined again from their sources since the
    /// last call (the interpreter was lost); clears the flag.
    pub fn take_redefined(&self) -> bool {
        self.redefined.swap(false, Ordering::SeqCst)
    }

    async fn recover(&self, params: &TurnParams) {
        if !self.suspect.load(Ordering::SeqCst) {
            return;
        }
        let _one_at_a_time = self.recovering.lock().await;
        if !self.suspect.load(Ordering::SeqCst) {
            return;
        }
        let probe = self
            .runtime
            .run(params.spec(Task::Invoke {
                key: PROBE_KEY.into(),
                payload: Value::Null,
            }))
            .await;
        if exited_ok(&probe) {
            self.suspect.store(false, Ordering::SeqCst);
            return;
        }
        if matches!(probe.ending, TurnEnding::Faulted(_)) || !self.define_probe(params).await {
            return;
        }
        let sources = self.lock_sources().clone();
        tracing::info!(
            namespace = %self.namespace,
            lang = %self.lang,
            handlers = sources.len(),
            "namespace runtime lost its interpreter; defining its handlers again"
        );
        self.redefined.store(true, Ordering::SeqCst);
        for (id, source) in sources {
            let outcome = self
                .runtime
                .run(params.spec(Task::Define {
                    key: id.clone(),
                    source,
                }))
                .await;
            if matches!(outcome.ending, TurnEnding::Faulted(_)) {
                return;
            }
            if !exited_ok(&outcome) {
                tracing::warn!(namespace = %self.namespace, function = %id, "a handler failed to define again");
            }
        }
        self.suspect.store(false, Ordering::SeqCst);
    }

    fn lock_sources(&self) -> std::sync::MutexGuard<'_, Vec<(String, String)>> {
        self.sources.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether a turn ran to its end with exit code 0.
pub fn exited_ok(outcome: &TurnOutcome) -> bool {
    matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, .. })
}

/// One namespace: its runtimes, who created it, and the lock that
/// serializes registering into it and tearing it down.
#[derive(Default)]
pub struct Entry {
    ops: Arc<tokio::sync::Mutex<()>>,
    runtimes: Mutex<HashMap<Lang, Arc<NamespaceRuntime>>>,
    owner: Mutex<Option<Writer>>,
}

impl Entry {
    /// Who created the namespace (`None` until its first registration).
    pub fn owner(&self) -> Option<Writer> {
        *self.owner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `writer` as the namespace's creator, unless it has one.
    pub fn claim(&self, writer: Writer) {
        self.owner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(writer);
    }

    /// The runtime of `lang`, if booted.
    pub fn get(&self, lang: Lang) -> Option<Arc<NamespaceRuntime>> {
        self.lock().get(&lang).cloned()
    }

    /// Adds the runtime of its language.
    pub fn insert(&self, runtime: Arc<NamespaceRuntime>) {
        self.lock().insert(runtime.lang, runtime);
    }

    /// Removes the runtime of `lang`.
    pub fn remove(&self, lang: Lang) -> Option<Arc<NamespaceRuntime>> {
        self.lock().remove(&lang)
    }

    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Lang, Arc<NamespaceRuntime>>> {
        self.runtimes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Exclusive use of one namespace's entry, for registering or tearing down.
pub struct NamespaceLock {
    /// The entry.
    pub entry: Arc<Entry>,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

/// Every namespace with runtimes behind it.
#[derive(Default)]
pub struct NamespaceRuntimes {
    entries: Mutex<HashMap<String, Arc<Entry>>>,
}

impl NamespaceRuntimes {
    /// The runtime of `namespace` in `lang`, if any.
    pub fn get(&self, namespace: &str, lang: Lang) -> Option<Arc<NamespaceRuntime>> {
        self.lock().get(namespace)?.get(lang)
    }

    /// The namespace runtime whose lineage key is `key`, if any.
    pub fn find(&self, key: RuntimeKey) -> Option<Arc<NamespaceRuntime>> {
        let entries: Vec<Arc<Entry>> = self.lock().values().cloned().collect();
        entries
            .iter()
            .flat_map(|entry| entry.lock().values().cloned().collect::<Vec<_>>())
            .find(|runtime| runtime.key == key)
    }

    /// A namespace other than `namespace` that reads the same ignoring
    /// case, `_` and `-` ([`fold`]), and that `writer` did not create, with
    /// its creator: what guest code may not make a look-alike of.
    pub fn look_alike(&self, namespace: &str, writer: Writer) -> Option<(String, Option<Writer>)> {
        let folded = fold(namespace);
        self.lock()
            .iter()
            .filter(|(name, _)| name.as_str() != namespace && fold(name) == folded)
            .map(|(name, entry)| (name.clone(), entry.owner()))
            .find(|(_, owner)| *owner != Some(writer))
    }

    /// Takes the namespace's lock (creating its entry if needed).
    pub async fn hold(&self, namespace: &str) -> NamespaceLock {
        loop {
            let entry = self
                .lock()
                .entry(namespace.to_string())
                .or_default()
                .clone();
            let guard = entry.ops.clone().lock_owned().await;
            // The entry may have been dropped by a teardown while we waited.
            let current = self.lock().get(namespace).cloned();
            if current.is_some_and(|current| Arc::ptr_eq(&current, &entry)) {
                return NamespaceLock {
                    entry,
                    _guard: guard,
                };
            }
        }
    }

    /// Drops the namespace's entry if no runtime is left in it (call while holding it).
    pub fn release_if_empty(&self, namespace: &str, held: &NamespaceLock) {
        let mut entries = self.lock();
        if held.entry.is_empty()
            && entries
                .get(namespace)
                .is_some_and(|e| Arc::ptr_eq(e, &held.entry))
        {
            entries.remove(namespace);
        }
    }

    /// Removes the namespace and returns its runtimes (call while holding it).
    pub fn take(&self, namespace: &str, held: &NamespaceLock) -> Vec<Arc<NamespaceRuntime>> {
        let mut entries = self.lock();
        if entries
            .get(namespace)
            .is_some_and(|e| Arc::ptr_eq(e, &held.entry))
        {
            entries.remove(namespace);
        }
        held.entry.lock().drain().map(|(_, rt)| rt).collect()
    }

    /// Removes every namespace and returns its runtimes (shutdown).
    pub fn take_all(&self) -> Vec<Arc<NamespaceRuntime>> {
        let entries: Vec<Arc<Entry>> = self.lock().drain().map(|(_, e)| e).collect();
        entries
            .iter()
            .flat_map(|e| e.lock().drain().map(|(_, rt)| rt).collect::<Vec<_>>())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Takes the namespace runtime behind `key` out of its namespace (it was
/// given up) and unregisters the functions it served; `None` when no
/// namespace holds it. The next registration boots a fresh runtime.
pub(crate) async fn discard(ops: &crate::ops::Ops, key: RuntimeKey) -> Option<Vec<String>> {
    let found = ops.namespaces.find(key)?;
    let held = ops.namespaces.hold(&found.namespace).await;
    let ours = held
        .entry
        .get(found.lang)
        .is_some_and(|runtime| runtime.key == key);
    if ours {
        held.entry.remove(found.lang);
    }
    let owner = crate::bus::catalog::Owner::Namespace {
        namespace: found.namespace.clone(),
        lang: found.lang,
    };
    let ids = ops.published.unpublish_owner(&owner, &ops.bus);
    ops.namespaces.release_if_empty(&found.namespace, &held);
    ours.then_some(ids)
}
