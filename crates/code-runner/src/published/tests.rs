//! The catalog's claims: one language per id, exclusive namespaces,
//! bounded publications, foreign ids left alone.

use super::format::any_schema;
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
