//! The catalog of published functions: one registry for every language.
//!
//! A function id is published by exactly one owner: a namespace runtime
//! (`code-runner::register_function`, one per namespace and language) or
//! one runtime that registered it from guest code (node's
//! `iii.registerFunction`). Claims are exclusive:
//!
//! - an id exists in one language only (`my-app::greet` cannot be python
//!   and node at once);
//! - a namespace belongs either to its namespace runtimes or to the one
//!   runtime whose guest code first registered in it, never to both, never
//!   to two runtimes.
//!
//! The catalog and the bus change together, under the catalog's lock, so a
//! call never sees an id the catalog does not know. What a publication may
//! declare about its payloads is checked in [`format`].

pub(crate) mod cost;
mod format;
#[cfg(test)]
mod tests;
mod text;

pub use format::{MAX_FORMAT_BYTES, check_description, check_format};
pub use text::visible;

use std::collections::BTreeMap;
use std::sync::Mutex;

use code_runner_core::{Lang, RunnerError};

use crate::bus::naming::{FunctionId, canonical};
use crate::bus::{Bus, Function};
use crate::ids::RuntimeKey;

/// Most functions one runtime (a namespace runtime, or a runtime registering
/// from guest code) may publish.
pub const MAX_FUNCTIONS_PER_RUNTIME: usize = 64;

/// Most bytes of descriptions and formats one runtime's publications may
/// hold together (64 functions could otherwise hold 2.3 MiB): what listings
/// build is bounded by `max_runtimes` times this.
pub const MAX_PUBLISHED_BYTES_PER_RUNTIME: usize = 256 * 1024;

/// Who publishes a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The namespace runtime of `namespace` in `lang` (register_function).
    Namespace {
        /// The namespace, without `::`.
        namespace: String,
        /// Its language.
        lang: Lang,
    },
    /// A runtime whose guest code registered it (node's `iii.registerFunction`).
    Runtime(RuntimeKey),
}

struct Publication {
    owner: Owner,
    lang: Lang,
    /// Its description's and formats' bytes, charged to the owner.
    bytes: usize,
}

/// The published ids and their owners.
#[derive(Default)]
pub struct Catalog {
    by_id: Mutex<BTreeMap<String, Publication>>,
}

impl Catalog {
    /// Whether `owner` may publish `id` in `lang` now.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming who holds the id or its namespace.
    pub fn check(
        &self,
        id: &FunctionId,
        owner: &Owner,
        lang: Lang,
        bus: &Bus,
    ) -> Result<(), RunnerError> {
        check(&self.lock(), id, owner, lang, bus)
    }

    /// Publishes `id` for `owner` on `bus` (replacing the owner's own earlier
    /// registration of it in one step).
    ///
    /// # Errors
    /// As [`Catalog::check`], and `invalid_request` when the owner already
    /// publishes [`MAX_FUNCTIONS_PER_RUNTIME`] functions, or this one would
    /// take its descriptions and formats past [`MAX_PUBLISHED_BYTES_PER_RUNTIME`].
    pub fn publish(
        &self,
        id: &FunctionId,
        owner: Owner,
        lang: Lang,
        function: Function,
        bus: &Bus,
    ) -> Result<(), RunnerError> {
        let mut by_id = self.lock();
        check(&by_id, id, &owner, lang, bus)?;
        if !by_id.contains_key(id.as_str()) {
            let held = by_id.values().filter(|p| p.owner == owner).count();
            if held >= MAX_FUNCTIONS_PER_RUNTIME {
                return Err(RunnerError::invalid(format!(
                    "a runtime publishes at most {MAX_FUNCTIONS_PER_RUNTIME} functions, and this one already does; tear some down first"
                )));
            }
        }
        let bytes = declared_bytes(&function);
        let held: usize = by_id
            .iter()
            .filter(|(other, p)| p.owner == owner && other.as_str() != id.as_str())
            .map(|(_, p)| p.bytes)
            .sum();
        if held.saturating_add(bytes) > MAX_PUBLISHED_BYTES_PER_RUNTIME {
            return Err(RunnerError::invalid(format!(
                "`{}` declares {bytes} bytes of description and formats, and this runtime's other functions already declare {held}; a runtime's functions may declare at most {MAX_PUBLISHED_BYTES_PER_RUNTIME} (256 KiB) together: shorten them or tear some down",
                id.as_str()
            )));
        }
        bus.register(id.as_str(), function);
        by_id.insert(id.as_str().to_string(), Publication { owner, lang, bytes });
        Ok(())
    }

    /// The owner of `id`, if published.
    pub fn owner_of(&self, id: &str) -> Option<Owner> {
        self.lock().get(id).map(|p| p.owner.clone())
    }

    /// Whether `owner` published anything.
    pub fn owns_any(&self, owner: &Owner) -> bool {
        self.lock().values().any(|p| p.owner == *owner)
    }

    /// The runtime (not a namespace runtime) holding `namespace`, if any.
    pub fn runtime_holder(&self, namespace: &str) -> Option<RuntimeKey> {
        in_namespace(&self.lock(), namespace).find_map(|(_, p)| match p.owner {
            Owner::Runtime(key) => Some(key),
            Owner::Namespace { .. } => None,
        })
    }

    /// Unpublishes everything `owner` published; returns the ids, sorted.
    pub fn unpublish_owner(&self, owner: &Owner, bus: &Bus) -> Vec<String> {
        self.unpublish_owner_except(owner, &[], bus)
    }

    /// Unpublishes what `owner` published, except the ids in `keep`;
    /// returns the ids unpublished, sorted.
    pub fn unpublish_owner_except(&self, owner: &Owner, keep: &[String], bus: &Bus) -> Vec<String> {
        let mut by_id = self.lock();
        let ids: Vec<String> = by_id
            .iter()
            .filter(|(id, p)| p.owner == *owner && !keep.contains(id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            by_id.remove(id);
            bus.unregister(id);
        }
        ids
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Publication>> {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a function's description and formats take, as a listing shows them.
fn declared_bytes(function: &Function) -> usize {
    let size = |v: &serde_json::Value| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
    function
        .description
        .len()
        .saturating_add(size(&function.request_schema))
        .saturating_add(size(&function.response_schema))
}

fn in_namespace<'a>(
    by_id: &'a BTreeMap<String, Publication>,
    namespace: &str,
) -> impl Iterator<Item = (&'a String, &'a Publication)> {
    let prefix = canonical(namespace);
    by_id
        .range(prefix.clone()..)
        .take_while(move |(id, _)| id.starts_with(&prefix))
}

fn check(
    by_id: &BTreeMap<String, Publication>,
    id: &FunctionId,
    owner: &Owner,
    lang: Lang,
    bus: &Bus,
) -> Result<(), RunnerError> {
    let namespace = id.namespace();
    let ns = canonical(namespace);
    if let Some(existing) = by_id.get(id.as_str()) {
        if existing.lang != lang {
            return Err(RunnerError::invalid(format!(
                "`{}` is already registered in {}; one registry serves both languages, so it cannot be {lang} too: tear down namespace {ns} or pick another id",
                id.as_str(),
                existing.lang
            )));
        }
    } else if bus.contains(id.as_str()) {
        return Err(RunnerError::invalid(format!(
            "`{}` is taken on this bus by a function code-runner did not publish",
            id.as_str()
        )));
    }
    for (_, other) in in_namespace(by_id, namespace) {
        match (&other.owner, owner) {
            (a, b) if a == b => {}
            (Owner::Namespace { .. }, Owner::Namespace { .. }) => {}
            (Owner::Namespace { lang, .. }, Owner::Runtime(_)) => {
                return Err(RunnerError::invalid(format!(
                    "namespace {ns} belongs to code-runner::register_function (its {lang} runtime); register under a namespace of your own"
                )));
            }
            (Owner::Runtime(_), Owner::Namespace { .. }) => {
                return Err(RunnerError::invalid(format!(
                    "namespace {ns} is held by a runtime that registered in it with iii.registerFunction, until that runtime ends; pick another namespace"
                )));
            }
            (Owner::Runtime(_), Owner::Runtime(_)) => {
                return Err(RunnerError::invalid(format!(
                    "namespace {ns} is held by another runtime's iii.registerFunction; pick another namespace"
                )));
            }
        }
    }
    Ok(())
}
