//! Property tests: whatever arrives over HTTP, the answer is a well-formed
//! refusal or (for a payload that happens to be valid) a normal answer —
//! never a 5xx, a hang, a non-JSON body or a dead server.
//!
//! A payload's validity is judged by deserializing it into the same wire
//! types the worker uses; only valid ones reach an engine, so a case costs
//! an interpreter boot at most.

use code_runner_core::wire::{RunRequest, TeardownRequest};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::helpers::{
    Answer, CAPACITY, EXPIRED, INVALID_REQUEST, RESOURCE_EXHAUSTED, RUN, RUNTIME_NOT_FOUND, Server,
    TEARDOWN, TIMEOUT,
};

/// Cases per property: each valid run boots an interpreter, so keep it modest.
const CASES: u32 = 64;

/// Any JSON value, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,16}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((".{0,8}", inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// A well-typed value for a known key (mostly, so that some payloads are
/// valid and reach the engine), or any JSON at all.
fn field(well_typed: impl Strategy<Value = Value> + 'static) -> impl Strategy<Value = Value> {
    prop_oneof![3 => well_typed.boxed(), 1 => json_value().boxed()]
}

/// Objects built from the run request's keys (each present or not, well- or
/// wrong-typed) plus random extra keys. Programs of either language may go
/// to either engine: a program in the wrong language is a failed run, not
/// an error.
fn run_like_object() -> impl Strategy<Value = Value> {
    let code = field(prop_oneof![
        Just(json!("result = 1")),
        Just(json!("raise ValueError('x')")),
        Just(json!("x = (")),
        Just(json!("return 1")),
        Just(json!("throw new Error('x')")),
        ".{0,24}".prop_map(Value::String),
    ]);
    let lang = field(prop_oneof![
        4 => Just(json!("python")),
        3 => Just(json!("node")),
        1 => Just(json!("ruby")),
        1 => Just(json!("Python")),
    ]);
    let keep = field(any::<bool>().prop_map(Value::Bool));
    let runtime_id = field("[A-Za-z0-9_]{0,36}".prop_map(Value::String));
    let timeout_ms = field((0u64..3000).prop_map(Value::from));
    let memory_mb = field(prop_oneof![
        Just(json!(39)),
        Just(json!(40)),
        Just(json!(128)),
        Just(json!(513))
    ]);
    let extra = prop::collection::vec(("[a-z_]{1,10}", json_value()), 0..2);
    (
        prop::option::weighted(0.9, code),
        prop::option::weighted(0.9, lang),
        prop::option::of(keep),
        prop::option::weighted(0.2, runtime_id),
        prop::option::of(timeout_ms),
        prop::option::weighted(0.3, memory_mb),
        prop::option::weighted(0.2, extra),
    )
        .prop_map(
            |(code, lang, keep, runtime_id, timeout_ms, memory_mb, extra)| {
                let mut object = Map::new();
                let known = [
                    ("code", code),
                    ("lang", lang),
                    ("keep", keep),
                    ("runtime_id", runtime_id),
                    ("timeout_ms", timeout_ms),
                    ("memory_mb", memory_mb),
                ];
                for (key, value) in known {
                    if let Some(value) = value {
                        object.insert(key.to_string(), value);
                    }
                }
                for (key, value) in extra.unwrap_or_default() {
                    object.insert(key, value);
                }
                Value::Object(object)
            },
        )
}

/// Objects built from the teardown request's keys plus random extra keys.
fn teardown_like_object() -> impl Strategy<Value = Value> {
    let id = || field("[A-Za-z0-9_:]{0,36}".prop_map(Value::String));
    let extra = prop::collection::vec(("[a-z_]{1,10}", json_value()), 0..2);
    (
        prop::option::of(id()),
        prop::option::of(id()),
        prop::option::weighted(0.3, extra),
    )
        .prop_map(|(runtime_id, namespace, extra)| {
            let mut object = Map::new();
            if let Some(value) = runtime_id {
                object.insert("runtime_id".into(), value);
            }
            if let Some(value) = namespace {
                object.insert("namespace".into(), value);
            }
            for (key, value) in extra.unwrap_or_default() {
                object.insert(key, value);
            }
            Value::Object(object)
        })
}

/// Arbitrary bytes, and JSON texts cut short at an arbitrary point.
fn body_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        (json_value(), any::<prop::sample::Index>()).prop_map(|(value, cut)| {
            let text = serde_json::to_vec(&value).unwrap();
            let at = cut.index(text.len() + 1);
            text[..at].to_vec()
        }),
    ]
}

/// The payload the worker sees for `body`, if it is JSON (an empty body is `{}`).
fn payload_of(body: &[u8]) -> Option<Value> {
    if body.is_empty() {
        return Some(json!({}));
    }
    serde_json::from_slice(body).ok()
}

/// Whether `payload` deserializes into `function_id`'s request type (a
/// payload is a JSON object: serde's sequence form of a struct is refused).
fn parses(function_id: &str, payload: &Value) -> bool {
    if !payload.is_object() {
        return false;
    }
    match function_id {
        RUN => serde_json::from_value::<RunRequest>(payload.clone()).is_ok(),
        TEARDOWN => serde_json::from_value::<TeardownRequest>(payload.clone()).is_ok(),
        other => panic!("no request type for {other}"),
    }
}

/// The rule every answer obeys.
fn judge(function_id: &str, body: &[u8], answer: &Answer) -> Result<(), String> {
    let shown = || {
        format!(
            "{function_id} with {:?} answered HTTP {}: {}",
            String::from_utf8_lossy(body),
            answer.status,
            answer.body
        )
    };
    let valid = payload_of(body).is_some_and(|payload| parses(function_id, &payload));
    if !valid {
        if answer.status.as_u16() != 400 || answer.error_code() != Some(INVALID_REQUEST) {
            return Err(format!("expected 400 {INVALID_REQUEST}: {}", shown()));
        }
        return Ok(());
    }
    if answer.status.is_success() {
        return Ok(());
    }
    // A valid payload may still be refused, but only with a contract code
    // that says why; a timeout (504) is the one 5xx a valid run may earn.
    let allowed = [
        INVALID_REQUEST,
        RUNTIME_NOT_FOUND,
        EXPIRED,
        CAPACITY,
        TIMEOUT,
        RESOURCE_EXHAUSTED,
    ];
    match answer.error_code() {
        Some(code) if allowed.contains(&code) => {
            if answer.status.is_server_error() && code != TIMEOUT {
                return Err(format!("a 5xx for {code}: {}", shown()));
            }
            Ok(())
        }
        _ => Err(format!("an undocumented refusal: {}", shown())),
    }
}

/// Posts every generated body to `function_id` on one fresh server, judges
/// each answer, tears down any runtime a valid payload kept, and finally
/// checks the server still answers `/healthz` and a normal run.
fn property<S: Strategy>(function_id: &'static str, strategy: S, to_body: fn(S::Value) -> Vec<u8>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(Server::start());
    let mut runner = TestRunner::new(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let outcome = runner.run(&strategy, |value| {
        let body = to_body(value);
        let answer = runtime.block_on(server.post_raw(function_id, body.clone()));
        judge(function_id, &body, &answer).map_err(TestCaseError::fail)?;
        if let Some(id) = answer.body["runtime_id"].as_str() {
            runtime.block_on(server.teardown(id)).ok();
        }
        Ok(())
    });
    if let Err(err) = outcome {
        panic!("{err}");
    }
    runtime.block_on(async {
        assert_eq!(server.get("/healthz").await.ok()["status"], "ok");
        server.assert_still_serves().await;
    });
}

fn to_json_bytes(value: Value) -> Vec<u8> {
    serde_json::to_vec(&value).unwrap()
}

/// Any JSON value at all sent to `code-runner::run`.
#[test]
fn run_answers_arbitrary_json_with_a_refusal_or_a_response() {
    property(RUN, json_value(), to_json_bytes);
}

/// Any JSON value at all sent to `code-runner::teardown`.
#[test]
fn teardown_answers_arbitrary_json_with_a_refusal_or_a_response() {
    property(TEARDOWN, json_value(), to_json_bytes);
}

/// Arbitrary bytes (mostly not JSON, sometimes truncated JSON) as the body of `run`.
#[test]
fn run_answers_arbitrary_bytes_with_invalid_request() {
    property(RUN, body_bytes(), |bytes| bytes);
}

/// Arbitrary bytes as the body of `teardown`.
#[test]
fn teardown_answers_arbitrary_bytes_with_invalid_request() {
    property(TEARDOWN, body_bytes(), |bytes| bytes);
}

/// Run-shaped objects with wrong-typed known keys and random extra keys:
/// the field-level validation, with some payloads valid enough to boot.
#[test]
fn run_answers_mistyped_run_objects_with_a_refusal_or_a_response() {
    property(RUN, run_like_object(), to_json_bytes);
}

/// Teardown-shaped objects with wrong-typed known keys and random extra keys.
#[test]
fn teardown_answers_mistyped_teardown_objects_with_a_refusal_or_a_response() {
    property(TEARDOWN, teardown_like_object(), to_json_bytes);
}
