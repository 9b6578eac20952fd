//! The measures by themselves; through a real guest's `iii.fn` in
//! `tests/all/codemode/calls.rs`.

use super::*;
use serde_json::json;

/// The review's schema: 40 `$defs`, each an `allOf` of two `$ref`s to the
/// next (about 2⁴⁰ validation steps).
fn doubling_chain(levels: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert(format!("d{levels}"), json!({"type": "object"}));
    json!({"type": "object", "$defs": defs, "allOf": [{"$ref": "#/$defs/d0"}]})
}

fn never() -> bool {
    false
}

/// The doubling chain is refused by its expansion, though it is small in
/// bytes; a short chain is measured exactly.
#[test]
fn a_doubling_chain_is_refused_by_its_expansion() {
    let schema = doubling_chain(40);
    assert!(serde_json::to_string(&schema).unwrap().len() < 3000);
    let err = expansion(&schema).unwrap_err();
    assert!(err.contains("more than 2000 subschemas"), "{err}");
    // The root and its allOf's item, then d_i reached 2^i times with its
    // two items each, and the last one 2^3 times.
    let small = expansion(&doubling_chain(3)).unwrap();
    assert_eq!(small.nodes, 2 + (1 + 2 + 4) * 3 + 8);
    assert!(
        check_steps(&doubling_chain(40), &json!({}), MAX_CHECK_STEPS, &never)
            == Err(Refused::Over(MAX_CHECK_STEPS))
    );
}

/// A recursive schema (a tree) passes registration, its cycle cut; the
/// check's cost grows with the payload, and a payload nested past what the
/// budget allows is refused before any check.
#[test]
fn a_recursive_schema_costs_by_its_payload() {
    let tree = json!({
        "$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "$ref": "#/$defs/node"
    });
    let measured = expansion(&tree).unwrap();
    assert!(measured.nodes < 10, "{measured:?}");
    let mut leaf = json!({});
    for _ in 0..50 {
        leaf = json!({"children": [leaf]});
    }
    let steps = check_steps(&tree, &leaf, MAX_CHECK_STEPS, &never).unwrap();
    assert!((50..1000).contains(&steps), "{steps}");
    // The same tree, each level an anyOf of two refs to the node: doubling
    // per level of the payload, refused at the budget.
    let doubling = json!({
        "$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"anyOf": [
                {"$ref": "#/$defs/node"}, {"$ref": "#/$defs/node"}]}}}}},
        "$ref": "#/$defs/node"
    });
    assert!(expansion(&doubling).is_ok());
    assert_eq!(
        check_steps(&doubling, &leaf, MAX_CHECK_STEPS, &never),
        Err(Refused::Over(MAX_CHECK_STEPS))
    );
}

/// A reference to the node itself at the same value makes no progress:
/// cut, not counted forever.
#[test]
fn a_cycle_at_one_value_is_cut() {
    let schema = json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]},
        "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}}, "$ref": "#/$defs/a"});
    assert!(expansion(&schema).is_ok());
    let steps = check_steps(&schema, &json!("x"), MAX_CHECK_STEPS, &never).unwrap();
    assert!(steps < 20, "{steps}");
}

/// An array of many values costs by its values, and a big enum by its data.
#[test]
fn arrays_and_enums_cost_what_they_hold() {
    let schema = json!({"type": "array", "items": {"enum": [1, 2, 3, 4, 5, 6, 7, 8]}});
    let payload = Value::Array((0..10_000).map(Value::from).collect());
    let steps = check_steps(&schema, &payload, MAX_CHECK_STEPS, &never).unwrap();
    assert!((90_000..=110_000).contains(&steps), "{steps}");
    assert_eq!(
        check_steps(&schema, &payload, 50_000, &never),
        Err(Refused::Over(50_000))
    );
}

/// A check asks whether to stop, and stops.
#[test]
fn a_long_count_stops_when_asked() {
    let schema = json!({"type": "array", "items": {"type": "integer"}});
    let payload = Value::Array((0..100_000).map(Value::from).collect());
    assert_eq!(
        check_steps(&schema, &payload, MAX_CHECK_STEPS, &|| true),
        Err(Refused::Stopped)
    );
}

/// References are resolved within the schema: pointers (escaped), anchors,
/// the root's own `$id`; a remote one or a nested `$id` cannot be measured.
#[test]
fn references_resolve_within_the_schema_only() {
    let ok = json!({
        "$id": "https://example.com/s.json",
        "$defs": {"a/b": {"$anchor": "ab", "type": "string"}, "c": {"$id": "#old", "type": "integer"}},
        "anyOf": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#ab"}, {"$ref": "#old"},
            {"$ref": "https://example.com/s.json#/$defs/c"}, {"$ref": "#"}]
    });
    assert!(expansion(&ok).is_ok(), "{:?}", expansion(&ok));
    let remote = json!({"$ref": "https://elsewhere.example/x.json"});
    assert!(expansion(&remote).unwrap_err().contains("points outside"));
    let missing = json!({"$ref": "#/$defs/nope"});
    assert!(expansion(&missing).unwrap_err().contains("names nothing"));
    let nested = json!({"properties": {"a": {"$id": "https://x.example/a", "type": "string"}}});
    assert!(expansion(&nested).unwrap_err().contains("nested `$id`"));
    assert!(matches!(
        check_steps(&remote, &json!(1), MAX_CHECK_STEPS, &never),
        Err(Refused::Unmeasurable(_))
    ));
}

/// A long chain of references is refused by its depth before its count.
#[test]
fn a_deep_chain_is_refused_by_its_depth() {
    let mut defs = Map::new();
    for i in 0..200 {
        defs.insert(
            format!("d{i}"),
            json!({"$ref": format!("#/$defs/d{}", i + 1)}),
        );
    }
    defs.insert("d200".into(), json!({"type": "string"}));
    let schema = json!({"$defs": defs, "$ref": "#/$defs/d0"});
    let err = expansion(&schema).unwrap_err();
    assert!(err.contains("nest more than 128"), "{err}");
}
