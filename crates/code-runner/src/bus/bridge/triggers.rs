//! Trigger bindings made by guest code: which types it may bind, and which
//! bindings are its own to remove.
//!
//! A trigger's type decides who fires it and what the bound function's
//! answer becomes: a `console:script` binding's answer is loaded as a script
//! in the operator's browser, a `harness::hook::*` binding rewrites agents'
//! prompts, a `log` binding receives the engine's logs. So guest code may
//! bind only the types the operator lists in `guest_trigger_types` (empty
//! by default, and [`code_runner_core::guest_policy`] keeps those few out of
//! it for good). The engine answers a registration with the trigger's id;
//! the ids a lineage (the tree of runtimes under one host call's root)
//! registered are remembered while that root lives, and only those may it
//! unregister: never code-runner's own bindings or another tenant's.

use std::collections::HashMap;
use std::sync::Mutex;

use code_runner_core::guest_policy::{never_guest_trigger_type, normalise_trigger_type};

use crate::ids::RuntimeKey;

/// Trigger bindings one lineage may hold registered at once.
pub const MAX_TRIGGERS_PER_LINEAGE: usize = 64;

/// Whether guest code may bind a trigger of `trigger_type`, given the
/// operator's `open` list.
///
/// # Errors
/// The reason, naming the type and the configuration key.
pub(super) fn admit_type(trigger_type: Option<&str>, open: &[String]) -> Result<(), String> {
    let Some(trigger_type) = trigger_type else {
        return Err("a trigger registration must name its `trigger_type` (a string)".into());
    };
    let shown: String = trigger_type.chars().take(100).collect();
    if let Some(rule) = never_guest_trigger_type(trigger_type) {
        return Err(format!(
            "guest code may not bind a trigger of type `{shown}`: {rule} is never open to guest code (code-runner's rule)"
        ));
    }
    let wanted = normalise_trigger_type(trigger_type);
    if open.iter().any(|t| normalise_trigger_type(t) == wanted) {
        return Ok(());
    }
    let listed = if open.is_empty() {
        "none are (the default)".to_string()
    } else {
        format!("open: {}", open.join(", "))
    };
    Err(format!(
        "guest code may bind triggers only of the types the operator lists in the configuration key guest_trigger_types, and `{shown}` is not one ({listed}) (code-runner's rule)"
    ))
}

/// The triggers each live lineage registered, by root.
#[derive(Default)]
pub struct GuestTriggers {
    by_root: Mutex<HashMap<RuntimeKey, Vec<String>>>,
}

impl GuestTriggers {
    /// Whether `root` may register one more.
    ///
    /// # Errors
    /// The reason, when it holds [`MAX_TRIGGERS_PER_LINEAGE`].
    pub(super) fn has_room(&self, root: RuntimeKey) -> Result<(), String> {
        let held = self.lock().get(&root).map_or(0, Vec::len);
        if held >= MAX_TRIGGERS_PER_LINEAGE {
            return Err(format!(
                "this run's code holds {held} trigger bindings, the most it may (at most {MAX_TRIGGERS_PER_LINEAGE}); unregister one first"
            ));
        }
        Ok(())
    }

    /// Remembers trigger `id` as registered by `root`.
    pub(super) fn record(&self, root: RuntimeKey, id: &str) {
        let mut by_root = self.lock();
        let ids = by_root.entry(root).or_default();
        // Concurrent registrations may pass `has_room` together; past twice
        // the bound the id is not remembered (the guest cannot remove it).
        if ids.len() < 2 * MAX_TRIGGERS_PER_LINEAGE {
            ids.push(id.to_string());
        }
    }

    /// Takes trigger `id` off `root`'s list, so it may be unregistered.
    ///
    /// # Errors
    /// The reason, when `root` did not register `id`.
    pub(super) fn take(&self, root: RuntimeKey, id: Option<&str>) -> Result<(), String> {
        let Some(id) = id else {
            return Err(
                "name the trigger's `id` (the one engine::register_trigger answered)".into(),
            );
        };
        let mut by_root = self.lock();
        let ids = by_root.get_mut(&root);
        match ids.and_then(|ids| ids.iter().position(|held| held == id).map(|at| (ids, at))) {
            Some((ids, at)) => {
                ids.swap_remove(at);
                Ok(())
            }
            None => Err(format!(
                "trigger `{}` was not registered by this run's code; guest code may unregister only the triggers its own run registered (code-runner's rule)",
                id.chars().take(100).collect::<String>()
            )),
        }
    }

    /// Forgets what `key` registered, if it is a root that registered any
    /// (its lineage ended; the bindings stay on the engine, the operator's).
    pub fn forget(&self, key: RuntimeKey) {
        self.lock().remove(&key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RuntimeKey, Vec<String>>> {
        self.by_root.lock().unwrap_or_else(|p| p.into_inner())
    }
}
