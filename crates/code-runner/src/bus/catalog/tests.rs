//! The catalog's claims: one language per id, exclusive namespaces,
//! bounded publications, foreign ids left alone.

use super::format::{MAX_DESCRIPTION_BYTES, any_schema};
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

/// Publishes `id` for `owner`, with a function that echoes, in the owner's
/// language (a namespace runtime's own; node for a runtime's registrar).
fn publish(catalog: &Catalog, bus: &Bus, id: &FunctionId, owner: Owner) -> Result<(), RunnerError> {
    let lang = match &owner {
        Owner::Namespace { lang, .. } => *lang,
        Owner::Runtime(_) => Lang::Node,
    };
    catalog.publish(id, owner, lang, function(), bus)
}

/// One registry across languages: an id held in python cannot be
/// published in node (the error names python), and the python owner
/// may replace its own.
#[test]
fn an_id_exists_in_one_language_only() {
    let (catalog, bus) = (Catalog::default(), Bus::default());
    let greet = id("my-app::greet");
    publish(&catalog, &bus, &greet, ns("my-app", Lang::Python)).unwrap();
    let err = publish(&catalog, &bus, &greet, ns("my-app", Lang::Node)).unwrap_err();
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
    publish(
        &catalog,
        &bus,
        &id("my-app::shout"),
        ns("my-app", Lang::Node),
    )
    .unwrap();
    publish(&catalog, &bus, &greet, ns("my-app", Lang::Python)).unwrap();
    assert_eq!(
        catalog.owner_of("my-app::greet"),
        Some(ns("my-app", Lang::Python))
    );
    let gone = catalog.unpublish_owner(&ns("my-app", Lang::Python), &bus);
    assert_eq!(gone, vec!["my-app::greet".to_string()]);
    assert!(!bus.contains("my-app::greet"));
    assert!(bus.contains("my-app::shout"));
    // Once python let go, node may take the id.
    publish(&catalog, &bus, &greet, ns("my-app", Lang::Node)).unwrap();
}

/// A runtime registering from guest code holds the whole namespace: no
/// namespace runtime and no other runtime may publish in it, and it may
/// not publish in a namespace that register_function holds.
#[test]
fn namespace_claims_are_exclusive() {
    let (catalog, bus) = (Catalog::default(), Bus::default());
    let lineage = crate::runtimes::lineage::Lineage::default();
    let lasting = crate::runtimes::lineage::Lasting::No;
    let (a, b) = (
        lineage.begin(None, lasting, 32).unwrap(),
        lineage.begin(None, lasting, 32).unwrap(),
    );
    publish(&catalog, &bus, &id("tools::x"), Owner::Runtime(a)).unwrap();
    publish(&catalog, &bus, &id("tools::y"), Owner::Runtime(a)).unwrap();
    assert_eq!(catalog.runtime_holder("tools"), Some(a));
    let err = publish(&catalog, &bus, &id("tools::z"), Owner::Runtime(b)).unwrap_err();
    assert!(err.message.contains("another runtime"), "{}", err.message);
    let err = publish(&catalog, &bus, &id("tools::z"), ns("tools", Lang::Python)).unwrap_err();
    assert!(err.message.contains("held by a runtime"), "{}", err.message);
    publish(&catalog, &bus, &id("app::x"), ns("app", Lang::Python)).unwrap();
    let err = publish(&catalog, &bus, &id("app::y"), Owner::Runtime(b)).unwrap_err();
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
    publish(&catalog, &bus, &id("tools::z"), Owner::Runtime(b)).unwrap();
}

/// A runtime publishes a bounded number of functions; replacing one it
/// holds does not count again.
#[test]
fn a_runtime_publishes_a_bounded_number() {
    let (catalog, bus) = (Catalog::default(), Bus::default());
    let owner = ns("many", Lang::Python);
    for i in 0..MAX_FUNCTIONS_PER_RUNTIME {
        publish(&catalog, &bus, &id(&format!("many::f{i}")), owner.clone()).unwrap();
    }
    publish(&catalog, &bus, &id("many::f0"), owner.clone()).unwrap();
    let err = publish(&catalog, &bus, &id("many::extra"), owner).unwrap_err();
    assert!(err.message.contains("at most 64"), "{}", err.message);
}

/// An id on the bus that code-runner did not publish is not taken over.
#[test]
fn foreign_ids_are_not_taken_over() {
    let (catalog, bus) = (Catalog::default(), Bus::default());
    bus.register("other::f", function());
    let err = publish(&catalog, &bus, &id("other::f"), ns("other", Lang::Python)).unwrap_err();
    assert!(err.message.contains("did not publish"), "{}", err.message);
}

/// What a runtime's publications declare (descriptions and formats) is
/// charged to it: past 256 KiB together the next one is refused, a
/// replaced id's old bytes do not count, and another runtime has its own.
#[test]
fn a_runtime_declares_at_most_its_byte_budget() {
    let (catalog, bus) = (Catalog::default(), Bus::default());
    let described = |n: usize| {
        Function::new(
            "d".repeat(n),
            any_schema(),
            any_schema(),
            Arc::new(|payload, _| Box::pin(async move { Ok(payload) })),
        )
    };
    let owner = ns("big", Lang::Python);
    let per = MAX_DESCRIPTION_BYTES;
    let fits = MAX_PUBLISHED_BYTES_PER_RUNTIME / (per + 200);
    for i in 0..fits {
        let f = id(&format!("big::f{i}"));
        catalog
            .publish(&f, owner.clone(), Lang::Python, described(per), &bus)
            .unwrap();
    }
    let more = id("big::more");
    let err = catalog
        .publish(&more, owner.clone(), Lang::Python, described(per), &bus)
        .unwrap_err();
    assert!(err.message.contains("256 KiB"), "{}", err.message);
    assert!(!bus.contains("big::more"));
    // Replacing an id recharges it, it does not add to it.
    catalog
        .publish(&id("big::f0"), owner, Lang::Python, described(per), &bus)
        .unwrap();
    catalog
        .publish(
            &id("other::x"),
            ns("other", Lang::Python),
            Lang::Python,
            described(per),
            &bus,
        )
        .unwrap();
}
