//! The lineage's charging rules, by unit.

use super::*;

fn guest(lineage: &Lineage, runtime: RuntimeKey) -> Option<Parent> {
    Some(Parent {
        runtime,
        root: lineage.root(runtime).unwrap(),
    })
}

/// A tree may hold its share and no more, nested runs in progress and
/// kept runtimes together; ending a charged runtime frees its share.
#[test]
fn nested_keeps_are_bounded_by_the_share() {
    let lineage = Lineage::default();
    let root = lineage.begin(None, Lasting::No, 16).unwrap();
    assert_eq!(nested_share(16), 2);
    let a = lineage
        .begin(guest(&lineage, root), Lasting::Yes, 16)
        .unwrap();
    // A grandchild counts against the same root.
    let b = lineage.begin(guest(&lineage, a), Lasting::Yes, 16).unwrap();
    let err = lineage
        .begin(guest(&lineage, root), Lasting::Yes, 16)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Capacity);
    assert!(err.message.contains("at most 2"), "{}", err.message);
    let err = lineage
        .begin(guest(&lineage, b), Lasting::No, 16)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Capacity);
    assert!(
        err.message.contains("cannot run another"),
        "{}",
        err.message
    );
    lineage.end(b);
    assert_eq!(lineage.charged(root), 1);
    let one_shot = lineage.begin(guest(&lineage, a), Lasting::No, 16).unwrap();
    assert_eq!(lineage.charged(root), 2);
    lineage.end(one_shot);
    assert!(
        lineage
            .begin(guest(&lineage, root), Lasting::Yes, 16)
            .is_ok()
    );
    // Another host call's tree has a share of its own.
    let other = lineage.begin(None, Lasting::Yes, 16).unwrap();
    assert!(
        lineage
            .begin(guest(&lineage, other), Lasting::Yes, 16)
            .is_ok()
    );
    assert_eq!(nested_share(1), 1);
}

/// Calls from another worker's guest code are charged to that tree,
/// whichever call they came in: a tree's share holds across calls.
#[test]
fn remote_calls_of_one_tree_share_its_share() {
    let lineage = Lineage::default();
    let tree = RuntimeKey::remote_tree("worker-a", "abc.7");
    assert_ne!(tree, RuntimeKey::remote_tree("worker-a", "abc.8"));
    assert_ne!(tree, RuntimeKey::PLACEHOLDER);
    let remote = |call: RuntimeKey| {
        Some(Parent {
            runtime: call,
            root: tree,
        })
    };
    for _ in 0..4 {
        let call = lineage.begin_remote(tree);
        lineage.begin(remote(call), Lasting::Yes, 32).unwrap();
    }
    let call = lineage.begin_remote(tree);
    let err = lineage.begin(remote(call), Lasting::Yes, 32).unwrap_err();
    assert_eq!(err.code, ErrorCode::Capacity);
    assert_eq!(lineage.charged(tree), 4);
    assert!(lineage.tree_name(call).ends_with(&format!(".{}", call.0)));
}

/// Ending a runtime orphans its live children and names them; a call
/// from a runtime that has ended starts nothing.
#[test]
fn ending_a_parent_orphans_its_children() {
    let lineage = Lineage::default();
    let root = lineage.begin(None, Lasting::Yes, 32).unwrap();
    let caller = guest(&lineage, root);
    let child = lineage.begin(caller, Lasting::Yes, 32).unwrap();
    assert!(!lineage.is_orphaned(child));
    assert_eq!(lineage.end(root), vec![child]);
    assert!(lineage.is_orphaned(child));
    let err = lineage.begin(caller, Lasting::No, 32).unwrap_err();
    assert_eq!(err.code, ErrorCode::Expired);
}

/// A namespace runtime started by guest code is charged to the guest's
/// tree but is a root of its own, so it outlives the guest's run.
#[test]
fn namespace_runtimes_are_roots_charged_to_the_guest() {
    let lineage = Lineage::default();
    let root = lineage.begin(None, Lasting::No, 32).unwrap();
    let ns = lineage.begin_namespace(guest(&lineage, root), 32).unwrap();
    assert_eq!(lineage.root(ns), Some(ns));
    assert_eq!(lineage.charged(root), 1);
    assert!(lineage.end(root).is_empty(), "not a child of the guest");
    assert_eq!(lineage.root(ns), Some(ns));
}

/// Namespace runtimes made by guest code are bounded all together, not
/// only per tree: a new tree cannot add more once they hold the share;
/// one torn down makes room; a host call is not bounded by it.
#[test]
fn guest_namespace_runtimes_are_bounded_across_trees() {
    let lineage = Lineage::default();
    let mut made = Vec::new();
    for _ in 0..4 {
        let root = lineage.begin(None, Lasting::No, 32).unwrap();
        made.push(lineage.begin_namespace(guest(&lineage, root), 32).unwrap());
        lineage.end(root);
    }
    let root = lineage.begin(None, Lasting::No, 32).unwrap();
    let err = lineage
        .begin_namespace(guest(&lineage, root), 32)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Capacity);
    assert!(err.message.contains("at most 4"), "{}", err.message);
    assert!(lineage.begin_namespace(None, 32).is_ok());
    lineage.end(made[0]);
    assert!(lineage.begin_namespace(guest(&lineage, root), 32).is_ok());
}

/// Every plain runtime, a nested one too, has a namespace of its own,
/// reserved for it while it lives and free when it ends; a namespace
/// runtime (which has its namespace) and a remote call's node have none.
#[test]
fn plain_runtimes_have_a_namespace_of_their_own() {
    let lineage = Lineage::default();
    let root = lineage.begin(None, Lasting::No, 32).unwrap();
    let child = lineage
        .begin(guest(&lineage, root), Lasting::Yes, 32)
        .unwrap();
    let (a, b) = (
        lineage.own_namespace(root).unwrap(),
        lineage.own_namespace(child).unwrap(),
    );
    assert_ne!(a, b);
    assert_eq!(
        lineage.reservation(&b),
        Some(Reservation {
            holder: child,
            root
        })
    );
    let ns = lineage.begin_namespace(None, 32).unwrap();
    assert_eq!(lineage.own_namespace(ns), None);
    assert_eq!(lineage.own_namespace(lineage.begin_remote(root)), None);
    lineage.end(child);
    assert_eq!(lineage.reservation(&b), None);
    assert_eq!(lineage.reservation(&a).map(|r| r.holder), Some(root));
}
