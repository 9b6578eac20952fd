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
//! call never sees an id the catalog does not know.

use std::collections::BTreeMap;
use std::sync::Mutex;

use code_runner_core::{Lang, RunnerError};
use serde_json::{Value, json};

use crate::bus::{Bus, Function};
use crate::lineage::RuntimeKey;
use crate::namespaces::{FunctionId, canonical};

/// Most functions one runtime (a namespace runtime, or a runtime registering
/// from guest code) may publish.
pub const MAX_FUNCTIONS_PER_RUNTIME: usize = 64;

/// Most bytes a `request_format` or `response_format` may serialize to.
pub const MAX_FORMAT_BYTES: usize = 16 * 1024;

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
}

/// The published ids and their owners.
#[derive(Default)]
pub struct Published {
    by_id: Mutex<BTreeMap<String, Publication>>,
}

impl Published {
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
    /// As [`Published::check`], and `invalid_request` when the owner already
    /// publishes [`MAX_FUNCTIONS_PER_RUNTIME`] functions.
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
        bus.register(id.as_str(), function);
        by_id.insert(id.as_str().to_string(), Publication { owner, lang });
        Ok(())
    }

    /// The owner of `id`, if published.
    pub fn owner_of(&self, id: &str) -> Option<Owner> {
        self.lock().get(id).map(|p| p.owner.clone())
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

/// Checks a `request_format` / `response_format` and returns the schema
/// `engine::functions::info` shows: the format itself, or [`any_schema`].
///
/// # Errors
/// `code-runner::invalid_request` naming `field` when the format is not a
/// JSON object, is over [`MAX_FORMAT_BYTES`], or constrains nothing (has none
/// of `type`, `properties`, `$ref`).
pub fn check_format(field: &str, format: Option<Value>) -> Result<Value, RunnerError> {
    let Some(format) = format.filter(|f| !f.is_null()) else {
        return Ok(any_schema());
    };
    let Value::Object(map) = &format else {
        return Err(RunnerError::invalid(format!(
            "{field} must be a JSON Schema object, e.g. {{\"type\": \"object\"}}"
        )));
    };
    let bytes = serde_json::to_vec(&format).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_FORMAT_BYTES {
        return Err(RunnerError::invalid(format!(
            "{field} is {bytes} bytes; at most {MAX_FORMAT_BYTES} (16 KiB)"
        )));
    }
    if !["type", "properties", "$ref"]
        .iter()
        .any(|key| map.contains_key(*key))
    {
        return Err(RunnerError::invalid(format!(
            "{field} must constrain something: give it `type`, `properties` or `$ref`"
        )));
    }
    Ok(format)
}

/// The schema shown for a function registered without a format: one that
/// accepts any JSON value and says so in its title.
pub fn any_schema() -> Value {
    json!({
        "title": "any",
        "description": "No format was registered: any JSON value."
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use code_runner_core::ErrorCode;
    use std::sync::Arc;

    fn function() -> Function {
        Function::new(
            "f",
            any_schema(),
            any_schema(),
            Arc::new(|payload, _| Box::pin(async move { Ok(payload) })),
        )
    }

    fn ns(namespace: &str, lang: Lang) -> Owner {
        Owner::Namespace {
            namespace: namespace.into(),
            lang,
        }
    }

    fn id(text: &str) -> FunctionId {
        FunctionId::parse(text).unwrap()
    }

    /// One registry across languages: an id held in python cannot be
    /// published in node (the error names python), and the python owner
    /// may replace its own.
    #[test]
    fn an_id_exists_in_one_language_only() {
        let (catalog, bus) = (Published::default(), Bus::default());
        let greet = id("my-app::greet");
        catalog
            .publish(
                &greet,
                ns("my-app", Lang::Python),
                Lang::Python,
                function(),
                &bus,
            )
            .unwrap();
        let err = catalog
            .publish(
                &greet,
                ns("my-app", Lang::Node),
                Lang::Node,
                function(),
                &bus,
            )
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(
            err.message.contains("already registered in python"),
            "{}",
            err.message
        );
        assert!(
            catalog
                .check(&greet, &ns("my-app", Lang::Node), Lang::Node, &bus)
                .is_err()
        );
        // Both languages may share the namespace with different ids.
        catalog
            .publish(
                &id("my-app::shout"),
                ns("my-app", Lang::Node),
                Lang::Node,
                function(),
                &bus,
            )
            .unwrap();
        catalog
            .publish(
                &greet,
                ns("my-app", Lang::Python),
                Lang::Python,
                function(),
                &bus,
            )
            .unwrap();
        assert_eq!(
            catalog.owner_of("my-app::greet"),
            Some(ns("my-app", Lang::Python))
        );
        let gone = catalog.unpublish_owner(&ns("my-app", Lang::Python), &bus);
        assert_eq!(gone, vec!["my-app::greet".to_string()]);
        assert!(!bus.contains("my-app::greet"));
        assert!(bus.contains("my-app::shout"));
        // Once python let go, node may take the id.
        catalog
            .publish(
                &greet,
                ns("my-app", Lang::Node),
                Lang::Node,
                function(),
                &bus,
            )
            .unwrap();
    }

    /// A runtime registering from guest code holds the whole namespace: no
    /// namespace runtime and no other runtime may publish in it, and it may
    /// not publish in a namespace that register_function holds.
    #[test]
    fn namespace_claims_are_exclusive() {
        let (catalog, bus) = (Published::default(), Bus::default());
        let lineage = crate::lineage::Lineage::default();
        let host = crate::bus::Caller::host();
        let lasting = crate::lineage::Lasting::No;
        let (a, b) = (
            lineage.begin(&host, lasting, 32).unwrap(),
            lineage.begin(&host, lasting, 32).unwrap(),
        );
        catalog
            .publish(
                &id("tools::x"),
                Owner::Runtime(a),
                Lang::Node,
                function(),
                &bus,
            )
            .unwrap();
        catalog
            .publish(
                &id("tools::y"),
                Owner::Runtime(a),
                Lang::Node,
                function(),
                &bus,
            )
            .unwrap();
        assert_eq!(catalog.runtime_holder("tools"), Some(a));
        let err = catalog
            .publish(
                &id("tools::z"),
                Owner::Runtime(b),
                Lang::Node,
                function(),
                &bus,
            )
            .unwrap_err();
        assert!(err.message.contains("another runtime"), "{}", err.message);
        let err = catalog
            .publish(
                &id("tools::z"),
                ns("tools", Lang::Python),
                Lang::Python,
                function(),
                &bus,
            )
            .unwrap_err();
        assert!(err.message.contains("held by a runtime"), "{}", err.message);
        catalog
            .publish(
                &id("app::x"),
                ns("app", Lang::Python),
                Lang::Python,
                function(),
                &bus,
            )
            .unwrap();
        let err = catalog
            .publish(
                &id("app::y"),
                Owner::Runtime(b),
                Lang::Node,
                function(),
                &bus,
            )
            .unwrap_err();
        assert!(
            err.message
                .contains("belongs to code-runner::register_function"),
            "{}",
            err.message
        );
        assert_eq!(
            catalog.unpublish_owner(&Owner::Runtime(a), &bus),
            vec!["tools::x".to_string(), "tools::y".to_string()]
        );
        assert_eq!(catalog.runtime_holder("tools"), None);
        catalog
            .publish(
                &id("tools::z"),
                Owner::Runtime(b),
                Lang::Node,
                function(),
                &bus,
            )
            .unwrap();
    }

    /// A runtime publishes a bounded number of functions; replacing one it
    /// holds does not count again.
    #[test]
    fn a_runtime_publishes_a_bounded_number() {
        let (catalog, bus) = (Published::default(), Bus::default());
        let owner = ns("many", Lang::Python);
        for i in 0..MAX_FUNCTIONS_PER_RUNTIME {
            catalog
                .publish(
                    &id(&format!("many::f{i}")),
                    owner.clone(),
                    Lang::Python,
                    function(),
                    &bus,
                )
                .unwrap();
        }
        catalog
            .publish(
                &id("many::f0"),
                owner.clone(),
                Lang::Python,
                function(),
                &bus,
            )
            .unwrap();
        let err = catalog
            .publish(&id("many::extra"), owner, Lang::Python, function(), &bus)
            .unwrap_err();
        assert!(err.message.contains("at most 64"), "{}", err.message);
    }

    /// An id on the bus that code-runner did not publish is not taken over.
    #[test]
    fn foreign_ids_are_not_taken_over() {
        let (catalog, bus) = (Published::default(), Bus::default());
        bus.register("other::f", function());
        let err = catalog
            .publish(
                &id("other::f"),
                ns("other", Lang::Python),
                Lang::Python,
                function(),
                &bus,
            )
            .unwrap_err();
        assert!(err.message.contains("did not publish"), "{}", err.message);
    }

    /// Formats: absent is "any", an object must constrain something and
    /// stay under 16 KiB.
    #[test]
    fn formats_must_constrain_and_stay_small() {
        assert_eq!(
            check_format("request_format", None).unwrap()["title"],
            "any"
        );
        assert_eq!(
            check_format("request_format", Some(Value::Null)).unwrap()["title"],
            "any"
        );
        let ok = json!({"type": "object", "properties": {"lang": {"type": "string"}}});
        assert_eq!(
            check_format("request_format", Some(ok.clone())).unwrap(),
            ok
        );
        assert!(check_format("request_format", Some(json!({"$ref": "#/x"}))).is_ok());
        for (bad, why) in [
            (json!({"description": "anything"}), "must constrain"),
            (json!({}), "must constrain"),
            (json!("object"), "must be a JSON Schema object"),
            (json!(true), "must be a JSON Schema object"),
            (
                json!({"type": "string", "description": "x".repeat(17_000)}),
                "16 KiB",
            ),
        ] {
            let err = check_format("response_format", Some(bad)).unwrap_err();
            assert!(err.message.contains("response_format"), "{}", err.message);
            assert!(err.message.contains(why), "{}", err.message);
        }
    }
}
