//! The HTTP face and the bus catalog: routes, statuses, and the
//! `{"error": {code, message}}` body every refusal carries.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{FUNCTION_NOT_FOUND, FUNCTIONS_INFO, INVALID_REQUEST, RUN, Server, TEARDOWN};

/// Liveness for load balancers and for the tests that check a worker survived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_200() {
    let server = Server::start().await;
    let answer = server.get("/healthz").await;
    assert_eq!(answer.ok()["status"], "ok");
    server.assert_still_serves().await;
}

/// Callers discover the functions and their schemas from the catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_lists_run_teardown_and_info_with_schemas() {
    let server = Server::start().await;
    let answer = server.get("/v1/functions").await;
    let functions = answer.ok()["functions"].as_array().expect("functions");
    for id in [RUN, TEARDOWN, FUNCTIONS_INFO] {
        let entry = functions
            .iter()
            .find(|f| f["function_id"] == id)
            .unwrap_or_else(|| panic!("{id} is not listed: {}", answer.body));
        assert!(entry["description"].is_string(), "{entry}");
        assert!(entry["request_schema"].is_object(), "{entry}");
        assert!(entry["response_schema"].is_object(), "{entry}");
    }
    let run = functions.iter().find(|f| f["function_id"] == RUN).unwrap();
    let properties = &run["request_schema"]["properties"];
    for field in [
        "code",
        "keep",
        "lang",
        "runtime_id",
        "timeout_ms",
        "memory_mb",
    ] {
        assert!(properties[field].is_object(), "run's schema lacks {field}");
    }
    let required = &run["request_schema"]["required"];
    assert!(required.as_array().unwrap().contains(&json!("code")));
    server.assert_still_serves().await;
}

/// `engine::functions::info` describes each asked id in order; an unknown one
/// gets an entry with `error` instead of failing the whole call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_info_describes_known_ids_and_flags_unknown_ones() {
    let server = Server::start().await;
    let answer = server
        .call(FUNCTIONS_INFO, json!({"function_ids": [RUN, "nope"]}))
        .await;
    let functions = answer.ok()["functions"].as_array().expect("functions");
    assert_eq!(functions.len(), 2);
    assert_eq!(functions[0]["function_id"], RUN);
    assert!(functions[0]["request_schema"].is_object());
    assert!(functions[0]["response_schema"].is_object());
    assert!(functions[0].get("error").is_none());
    assert_eq!(functions[1]["function_id"], "nope");
    assert!(functions[1]["error"].is_string(), "{}", functions[1]);
    assert!(functions[1].get("request_schema").is_none());
    server.assert_still_serves().await;
}

/// An id with nothing behind it is a 404 with the bus code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_function_is_404_function_not_found() {
    let server = Server::start().await;
    let answer = server.call("nope::nothing", json!({})).await;
    answer.assert_error(FUNCTION_NOT_FOUND, "nope::nothing");
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    server.assert_still_serves().await;
}

fn assert_invalid(answer: &crate::helpers::Answer, part: &str) {
    answer.assert_error(INVALID_REQUEST, part);
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
}

/// A body that is not JSON is a 400 `invalid_request` in our JSON shape,
/// not the framework's plain-text rejection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_body_is_400_invalid_request() {
    let server = Server::start().await;
    let bodies: [&[u8]; 4] = [b"{\"code\": ", b"not json", b"{'code': 1}", b"\xff\xfe"];
    for body in bodies {
        let answer = server.post_raw(RUN, body.to_vec()).await;
        assert_invalid(&answer, "malformed JSON");
    }
    server.assert_still_serves().await;
}

/// A mistyped field is refused, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_field_type_is_400_naming_the_field() {
    let server = Server::start().await;
    let cases: [(Value, &str); 4] = [
        (json!({"code": 5, "lang": "python"}), "code"),
        (
            json!({"code": "1", "lang": "python", "keep": "yes"}),
            "keep",
        ),
        (
            json!({"code": "1", "lang": "python", "timeout_ms": -1}),
            "timeout_ms",
        ),
        (
            json!({"code": "1", "lang": "python", "memory_mb": 1.5}),
            "memory_mb",
        ),
    ];
    for (payload, field) in cases {
        assert_invalid(&server.call(RUN, payload).await, field);
    }
    assert_invalid(
        &server.call(TEARDOWN, json!({"runtime_id": 7})).await,
        "runtime_id",
    );
    server.assert_still_serves().await;
}

/// An unknown field (a typo such as `timeout` for `timeout_ms`) is an error
/// naming it, not a silently ignored option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_field_is_400_naming_the_field() {
    let server = Server::start().await;
    let answer = server
        .call(RUN, json!({"code": "1", "lang": "python", "bogus": 1}))
        .await;
    assert_invalid(&answer, "bogus");
    let answer = server
        .call(TEARDOWN, json!({"runtime_id": "x", "bogus": 1}))
        .await;
    assert_invalid(&answer, "bogus");
    server.assert_still_serves().await;
}

/// Only python and node exist; any other lang is a malformed request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_lang_is_invalid_request() {
    let server = Server::start().await;
    let answer = server
        .call(RUN, json!({"code": "puts 1", "lang": "ruby"}))
        .await;
    assert_invalid(&answer, "lang");
    server.assert_still_serves().await;
}

/// Without a runtime_id there is nothing to infer a language from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_lang_or_code_is_invalid_request() {
    let server = Server::start().await;
    assert_invalid(
        &server.call(RUN, json!({"code": "result = 1"})).await,
        "lang",
    );
    assert_invalid(&server.call(RUN, json!({"lang": "python"})).await, "code");
    assert_invalid(&server.call(RUN, json!([1, 2])).await, "");
    server.assert_still_serves().await;
}

/// The same worker is reachable in-process and over HTTP: a call through
/// `Worker::call` and one through the server see the same runtimes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_calls_and_http_share_one_worker() {
    let server = Server::start().await;
    let id = server.keep("shared = 'over http'").await;
    let answer = server
        .worker()
        .call(RUN, json!({"runtime_id": id, "code": "result = shared"}))
        .await
        .expect("in-process call");
    assert_eq!(answer["result"], "over http");
    let err = server
        .worker()
        .call(RUN, json!({"code": 5}))
        .await
        .unwrap_err();
    assert_eq!(err.code, INVALID_REQUEST);
    server.assert_still_serves().await;
}

/// Issue 9, item 11: serde also reads a struct from an array of its fields
/// in order, so `["result = 2 + 2", false, "python"]` used to run. A payload
/// is a JSON object, over HTTP and in-process alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_payload_is_refused_not_read_as_fields_in_order() {
    let server = Server::start().await;
    let fields = json!(["result = 2 + 2", false, "python"]);
    let answer = server.call(RUN, fields.clone()).await;
    assert_invalid(&answer, "must be a JSON object");
    assert_invalid(
        &server.call(TEARDOWN, json!([null, "rt_x"])).await,
        "must be a JSON object",
    );
    let err = server.worker().call(RUN, fields).await.unwrap_err();
    assert_eq!(err.code, INVALID_REQUEST);
    assert!(
        err.message.contains("must be a JSON object"),
        "{}",
        err.message
    );
    server.assert_still_serves().await;
}
