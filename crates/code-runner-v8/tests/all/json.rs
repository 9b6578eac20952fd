//! Values across the boundary: results are lossless JSON, or the engine says why not.

use code_runner_core::caps::ResultShape;
use code_runner_core::{Completion, RuntimeOptions, TurnEnding};
use serde_json::json;

use crate::{runtime, runtime_with, turn, value};

/// JSON values come back exactly: unicode, nesting, key order, `__proto__`
/// as a key, numbers written as `JSON.stringify` writes them.
#[tokio::test(flavor = "multi_thread")]
async fn json_values_round_trip_exactly() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(turn(r#"return { z: 1, a: [1.5, -2, 0, null, true, 'é€😀'], nested: { deep: [[[]]] }, ['__proto__']: 'own', big: 2 ** 60, sum: 0.1 + 0.2, date: new Date(0) }"#))
        .await;
    let got = value(&out);
    assert_eq!(
        got,
        json!({"z": 1, "a": [1.5, -2, 0, null, true, "é€😀"], "nested": {"deep": [[[]]]}, "__proto__": "own", "big": got["big"], "sum": got["sum"], "date": "1970-01-01T00:00:00.000Z"})
    );
    assert_eq!(got["big"].to_string(), "1152921504606847000");
    assert_eq!(got["sum"].to_string(), "0.30000000000000004");
    let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["z", "a", "nested", "__proto__", "big", "sum", "date"]
    );
    rt.close().await;
}

/// Issue 45: a result is what `JSON.stringify` makes of it, each rewrite
/// named (what the seam's lossless policy refuses), and what it refuses is
/// reported with its path and a fix, never silently dropped.
#[tokio::test(flavor = "multi_thread")]
async fn values_json_cannot_carry_are_not_json() {
    let (rt, _dir) = runtime().await;
    for (program, why) in [
        ("return () => 1", "is a function"),
        ("return 10n", "is a BigInt (10n)"),
        ("return Symbol('s')", "is a symbol"),
        ("const a = []; a.push(a); return a", "is a cycle"),
        ("return new Proxy({}, {})", "is a Proxy"),
        (
            "let v = []; for (let i = 0; i < 300; i++) v = [v]; return v",
            "nested more than 100",
        ),
    ] {
        let out = rt.run(turn(program)).await;
        match &out.ending {
            TurnEnding::Exited {
                exit_code: 0,
                completion: Completion::NotJson(text),
                ..
            } => {
                assert!(text.contains(why), "{program}: {text}")
            }
            other => panic!("{program}: {other:?}"),
        }
    }
    for (program, expected, rewrite, note) in [
        (
            "return { a: undefined, b: 1 }",
            json!({"b": 1}),
            "result[\"a\"]: a member with no JSON text was dropped",
            None,
        ),
        (
            "return [1, NaN]",
            json!([1, null]),
            "result[1]: NaN became null",
            None,
        ),
        (
            "return [Infinity]",
            json!([null]),
            "result[0]: inf became null",
            None,
        ),
        (
            "return { m: new Map([[1, 2]]) }",
            json!({"m": {}}),
            "result[\"m\"]: a Map became",
            Some("Object.fromEntries"),
        ),
        (
            "return [1, , 3]",
            json!([1, null, 3]),
            "result[1]: an element with no JSON text became null",
            None,
        ),
        (
            "return '\\ud800'",
            json!("\u{fffd}"),
            "result: a lone surrogate became U+FFFD",
            Some("lone surrogate"),
        ),
    ] {
        let out = rt.run(turn(program)).await;
        match &out.ending {
            TurnEnding::Exited {
                exit_code: 0,
                completion:
                    Completion::Converted {
                        value,
                        substituted,
                        note: told,
                    },
                ..
            } => {
                assert_eq!(value, &expected, "{program}");
                assert!(substituted.contains(rewrite), "{program}: {substituted}");
                match note {
                    Some(part) => assert!(
                        told.as_deref().unwrap_or_default().contains(part),
                        "{program}: {told:?}"
                    ),
                    None => assert_eq!(told, &None, "{program}"),
                }
            }
            other => panic!("{program}: {other:?}"),
        }
    }
    rt.close().await;
}

/// Rebinding JSON or the prototypes does not change what the host receives.
#[tokio::test(flavor = "multi_thread")]
async fn rebound_intrinsics_do_not_change_the_result() {
    let (rt, _dir) = runtime().await;
    let program = "JSON.stringify = () => '\"forged\"'; Array.isArray = () => false; \
                   Object.prototype.toJSON = undefined; return { list: [1, 2] }";
    assert_eq!(value(&rt.run(turn(program)).await), json!({"list": [1, 2]}));
    rt.close().await;
}

/// A value past the transfer limit comes back as facts: its size and shape.
#[tokio::test(flavor = "multi_thread")]
async fn oversize_result_is_reported_by_size_and_shape() {
    let options = RuntimeOptions {
        heap_mb: 512,
        ..RuntimeOptions::default()
    };
    let (rt, _dir) = runtime_with(options).await;
    let out = rt.run(turn("return 'x'.repeat(70 * 1024 * 1024)")).await;
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::Oversize { bytes, shape },
            ..
        } => {
            assert!(*bytes > 70 << 20, "{bytes}");
            assert_eq!(*shape, ResultShape::String(70 << 20));
        }
        other => panic!("{other:?}"),
    }
    rt.close().await;
}
