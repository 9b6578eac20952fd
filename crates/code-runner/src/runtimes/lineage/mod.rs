//! Who started which runtime, so guest code cannot hoard capacity.
//!
//! Every runtime the worker boots gets a [`RuntimeKey`] and a node here. A
//! runtime a host call started is a root. A runtime started by guest code
//! (a nested `code-runner::run` through `iii.trigger`) is a child of the
//! runtime whose code asked, in the same tree as it. What a tree keeps
//! beyond its own calls (nested `keep: true` runtimes, namespaces that guest
//! code registered) is charged to the tree's root and bounded by
//! [`nested_share`]; nested kept runtimes end with the runtime that started
//! them (see `lifecycle::retire`). Namespace runtimes that guest code made
//! outlive the run that made them, so a tree's share cannot bound them:
//! all of them together are held to one more [`nested_share`].
//!
//! Each live runtime also has a bounded line of calls waiting for it
//! ([`waiting`]), since it runs one turn at a time.
//!
//! A plain runtime (a run, one-shot or kept; not a namespace runtime) gets
//! a namespace of its own here when it begins ([`Lineage::own_namespace`],
//! its `iii.namespace`): fresh and random, never derived from its
//! `runtime_id`, reserved for it while its node lives
//! ([`Lineage::reservation`], enforced in [`crate::ops::tenancy`]) and free again
//! when it ends, whichever way it ends ([`Lineage::end`]).

mod waiting;

#[cfg(doc)]
use waiting::MAX_WAITING_CALLS_TOTAL;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use code_runner_core::{ErrorCode, RunnerError, Runtime};

pub use crate::ids::RuntimeKey;

/// A namespace reserved as a live plain runtime's own (its `iii.namespace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The runtime it is reserved for.
    pub holder: RuntimeKey,
    /// The root of that runtime's lineage.
    pub root: RuntimeKey,
}

/// The part of `max_runtimes` one tree of guest-started runtimes may hold
/// at once (nested runs in progress and the runtimes they kept): an
/// eighth, at least one (4 of the default 32).
pub fn nested_share(max_runtimes: usize) -> usize {
    (max_runtimes / 8).max(1)
}

/// What a runtime is for. Either way, a runtime guest code started is
/// charged to the caller's root while it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lasting {
    /// It ends with its call (a one-shot run).
    No,
    /// It may outlive its call (a `keep: true` run, a namespace runtime).
    Yes,
}

struct Node {
    parent: Option<RuntimeKey>,
    root: RuntimeKey,
    charged_to: Option<RuntimeKey>,
    orphaned: bool,
    runtime: Option<Arc<dyn Runtime>>,
    calls: Arc<AtomicUsize>,
    /// A namespace runtime that guest code made: it outlives its tree.
    guest_namespace: bool,
    /// A plain runtime's own namespace (`iii.namespace`), reserved for it
    /// while it lives.
    own_namespace: Option<String>,
}

/// The live runtimes and their ancestry.
#[derive(Default)]
pub struct Lineage {
    next: AtomicU64,
    nodes: Mutex<HashMap<RuntimeKey, Node>>,
    /// Calls waiting for any runtime, against [`MAX_WAITING_CALLS_TOTAL`].
    waiting: Arc<AtomicUsize>,
    /// Makes this worker's tree names ([`Lineage::tree_name`]) its own.
    salt: std::sync::OnceLock<String>,
    /// Roots whose guest code called another worker through the engine:
    /// when one ends, the peers are told ([`Lineage::take_called_out`]).
    called_out: Mutex<std::collections::HashSet<RuntimeKey>>,
}

/// The runtime whose guest code asks for a new one (its lineage key and the
/// root of its tree); `None` for a host call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    /// The calling runtime.
    pub runtime: RuntimeKey,
    /// The top of its lineage.
    pub root: RuntimeKey,
}

impl Lineage {
    /// A node for a runtime about to boot on behalf of `parent`'s guest
    /// code, or of a host call (`None`).
    ///
    /// A host call's runtime is a root. A guest call's is a child of the
    /// calling runtime, charged to the caller's root while it lives (a
    /// one-shot run too: without that, a run firing nested runs that fired
    /// more held every slot).
    ///
    /// # Errors
    /// `code-runner::expired` when the calling runtime has already ended;
    /// `code-runner::capacity` when the caller's tree already holds its
    /// [`nested_share`] of `max_runtimes`.
    pub fn begin(
        &self,
        parent: Option<Parent>,
        lasting: Lasting,
        max_runtimes: usize,
    ) -> Result<RuntimeKey, RunnerError> {
        self.begin_node(parent, lasting, max_runtimes, true)
    }

    /// [`Lineage::begin`], with a namespace of its own for the runtime when
    /// `own_namespace` (a plain runtime's; a namespace runtime has its namespace).
    fn begin_node(
        &self,
        parent: Option<Parent>,
        lasting: Lasting,
        max_runtimes: usize,
        own_namespace: bool,
    ) -> Result<RuntimeKey, RunnerError> {
        let key = RuntimeKey::new(self.next.fetch_add(1, Ordering::SeqCst));
        let mut nodes = self.lock();
        let node = match parent {
            None => Node {
                parent: None,
                root: key,
                charged_to: None,
                orphaned: false,
                runtime: None,
                calls: Arc::default(),
                guest_namespace: false,
                own_namespace: None,
            },
            Some(guest) => {
                if !nodes.contains_key(&guest.runtime) {
                    return Err(RunnerError::new(
                        ErrorCode::Expired,
                        "the runtime whose code made this call has ended",
                    ));
                }
                let root = guest.root;
                let share = nested_share(max_runtimes);
                let held = nodes
                    .values()
                    .filter(|n| n.charged_to == Some(root))
                    .count();
                if held >= share {
                    let what = match lasting {
                        Lasting::Yes => "keep",
                        Lasting::No => "run",
                    };
                    return Err(RunnerError::new(
                        ErrorCode::Capacity,
                        format!(
                            "guest code of one run may keep or run at most {share} runtimes at once \
                             (an eighth of max_runtimes {max_runtimes}, nested runs in progress and \
                             kept runtimes together), and this run's already do, so it cannot {what} \
                             another; wait for a nested run to end, tear a kept one down or let the run end"
                        ),
                    ));
                }
                let charged_to = Some(root);
                Node {
                    parent: Some(guest.runtime),
                    root: guest.root,
                    charged_to,
                    orphaned: false,
                    runtime: None,
                    calls: Arc::default(),
                    guest_namespace: false,
                    own_namespace: None,
                }
            }
        };
        let own_namespace = own_namespace.then(|| {
            loop {
                let namespace = crate::ids::new_namespace();
                if !nodes
                    .values()
                    .any(|n| n.own_namespace.as_deref() == Some(namespace.as_str()))
                {
                    break namespace;
                }
            }
        });
        nodes.insert(
            key,
            Node {
                own_namespace,
                ..node
            },
        );
        Ok(key)
    }

    /// Like [`Lineage::begin`] for a namespace runtime: its own root (it
    /// outlives whoever registered first), charged to the caller's root
    /// when guest code made it. Namespace runtimes made by guest code
    /// outlive their trees (and the idle sweep), so together they may hold
    /// one [`nested_share`] of `max_runtimes`; without that, a run
    /// registering its share of namespaces, repeated, took every slot.
    ///
    /// # Errors
    /// As [`Lineage::begin`]; `code-runner::capacity` when guest code's
    /// namespace runtimes already hold their share.
    pub fn begin_namespace(
        &self,
        parent: Option<Parent>,
        max_runtimes: usize,
    ) -> Result<RuntimeKey, RunnerError> {
        let key = self.begin_node(parent, Lasting::Yes, max_runtimes, false)?;
        let mut nodes = self.lock();
        if parent.is_some() {
            let share = nested_share(max_runtimes);
            let held = nodes.values().filter(|n| n.guest_namespace).count();
            if held >= share {
                nodes.remove(&key);
                return Err(RunnerError::new(
                    ErrorCode::Capacity,
                    format!(
                        "namespaces registered by guest code may hold at most {share} runtimes in all \
                         (an eighth of max_runtimes {max_runtimes}), and they already do; they outlive \
                         the runs that registered them: tear one down (code-runner::teardown {{namespace}}) \
                         or register from a host call"
                    ),
                ));
            }
        }
        if let Some(node) = nodes.get_mut(&key) {
            node.parent = None;
            node.root = key;
            node.guest_namespace = parent.is_some();
        }
        Ok(key)
    }

    /// A node standing for one call from guest code of another worker
    /// (tree `tree` there): it lives until that call's deadline, what the
    /// call starts is its child, charged to `tree`.
    pub(crate) fn begin_remote(&self, tree: RuntimeKey) -> RuntimeKey {
        let key = RuntimeKey::new(self.next.fetch_add(1, Ordering::SeqCst));
        self.lock().insert(
            key,
            Node {
                parent: None,
                root: tree,
                charged_to: None,
                orphaned: false,
                runtime: None,
                calls: Arc::default(),
                guest_namespace: false,
                own_namespace: None,
            },
        );
        key
    }

    /// The name of tree `root` that another worker is told when this
    /// worker's guest code calls it through the engine: unique to this
    /// process, and no capability (it only lets the callee charge the tree).
    pub(crate) fn tree_name(&self, root: RuntimeKey) -> String {
        let salt = self.salt.get_or_init(crate::ids::new_dir_name);
        format!("{salt}.{}", root.0)
    }

    /// Remembers that guest code of tree `root` called another worker, so
    /// its end is announced to the peers (what they started for it ends too).
    pub(crate) fn mark_called_out(&self, root: RuntimeKey) {
        if self.lock().contains_key(&root) {
            self.called_out
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(root);
        }
    }

    /// Whether `key` is a root whose guest code called another worker;
    /// forgets it (asked once, when it ends).
    pub(crate) fn take_called_out(&self, key: RuntimeKey) -> bool {
        self.called_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key)
    }

    /// The live nodes standing for calls from guest code of the remote tree
    /// `tree` ([`Lineage::begin_remote`]), so they can end with it.
    pub(crate) fn remote_calls(&self, tree: RuntimeKey) -> Vec<RuntimeKey> {
        self.lock()
            .iter()
            .filter(|(key, node)| node.root == tree && node.parent.is_none() && **key != tree)
            .map(|(key, _)| *key)
            .collect()
    }

    /// Records the booted runtime behind `key`, so functions it publishes can be invoked.
    pub fn attach(&self, key: RuntimeKey, runtime: Arc<dyn Runtime>) {
        if let Some(node) = self.lock().get_mut(&key) {
            node.runtime = Some(runtime);
        }
    }

    /// The runtime behind `key`, while it lives.
    pub fn runtime(&self, key: RuntimeKey) -> Option<Arc<dyn Runtime>> {
        self.lock().get(&key).and_then(|node| node.runtime.clone())
    }

    /// The namespace of a plain runtime's own (its `iii.namespace`), while it
    /// lives; `None` for a namespace runtime or a gone key.
    pub fn own_namespace(&self, key: RuntimeKey) -> Option<String> {
        self.lock()
            .get(&key)
            .and_then(|node| node.own_namespace.clone())
    }

    /// The live plain runtime whose own namespace `namespace` is, if any:
    /// it is reserved for that runtime (see [`crate::ops::tenancy`]).
    pub fn reservation(&self, namespace: &str) -> Option<Reservation> {
        self.lock().iter().find_map(|(key, node)| {
            (node.own_namespace.as_deref() == Some(namespace)).then_some(Reservation {
                holder: *key,
                root: node.root,
            })
        })
    }

    /// The root of `key`'s tree, while it lives.
    pub fn root(&self, key: RuntimeKey) -> Option<RuntimeKey> {
        self.lock().get(&key).map(|node| node.root)
    }

    /// Whether a runtime `key` started still lives.
    pub fn has_children(&self, key: RuntimeKey) -> bool {
        self.lock().values().any(|node| node.parent == Some(key))
    }

    /// Whether the runtime that started `key` ended while `key` was still
    /// in its first call (so keeping `key` now would outlive its parent).
    pub fn is_orphaned(&self, key: RuntimeKey) -> bool {
        self.lock().get(&key).is_some_and(|node| node.orphaned)
    }

    /// Ends `key`: forgets it (freeing its charge) and returns its children
    /// still alive, now orphaned, for the caller to tear down.
    pub fn end(&self, key: RuntimeKey) -> Vec<RuntimeKey> {
        // A root that ends without [`Lineage::take_called_out`] (its first
        // call failed) is forgotten here, so the set never outgrows the tree.
        self.take_called_out(key);
        let mut nodes = self.lock();
        nodes.remove(&key);
        let mut children = Vec::new();
        for (child, node) in nodes.iter_mut() {
            if node.parent == Some(key) {
                node.orphaned = true;
                children.push(*child);
            }
        }
        children
    }

    /// Live runtimes charged to `root`.
    #[cfg(test)]
    pub fn charged(&self, root: RuntimeKey) -> usize {
        self.lock()
            .values()
            .filter(|n| n.charged_to == Some(root))
            .count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RuntimeKey, Node>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests;
