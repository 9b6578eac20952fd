//! Request limits checked before a runtime boots, and the output caps'
//! configuration (the caps' behaviour under floods is in `faults`).

use serde_json::json;

use crate::helpers::{INVALID_REQUEST, Server};

/// `memory_mb` must lie in 40..=512 (the interpreter's minimum to the
/// configured maximum); both edges work and both neighbours are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_mb_outside_40_to_512_is_invalid_request() {
    let server = Server::start().await;
    for mb in [0u64, 39, 513, 1 << 40] {
        server
            .run_with("result = 1", json!({"memory_mb": mb}))
            .await
            .assert_error(INVALID_REQUEST, "memory_mb");
    }
    for mb in [40, 512] {
        let answer = server
            .run_with("result = 2 + 2", json!({"memory_mb": mb}))
            .await;
        assert_eq!(answer.ok()["result"], 4, "memory_mb {mb}");
    }
    server.assert_still_serves().await;
}

/// A zero budget cannot run anything: refused up front, not a guaranteed timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_timeout_is_invalid_request() {
    let server = Server::start().await;
    server
        .run_with("result = 1", json!({"timeout_ms": 0}))
        .await
        .assert_error(INVALID_REQUEST, "timeout_ms");
    server.assert_still_serves().await;
}

/// `max_stream_bytes: 0` and `max_result_bytes: 0` disable the caps: output
/// far past the defaults comes back whole, with no marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_caps_disable_truncation_and_omission() {
    let server = Server::with_config("max_stream_bytes: 0\nmax_result_bytes: 0\n").await;
    let answer = server
        .run("import sys\nprint('o' * 100_000)\nsys.stderr.write('e' * 100_000)\nresult = list(range(100_000))")
        .await;
    let body = answer.ok();
    assert_eq!(body["stdout"].as_str().unwrap().len(), 100_001);
    assert_eq!(body["stderr"].as_str().unwrap().len(), 100_000);
    let result = body["result"]
        .as_array()
        .expect("the whole list, not a marker");
    assert_eq!(result.len(), 100_000);
    assert_eq!(result[99_999], 99_999);
    server.assert_still_serves().await;
}

/// With the default caps the same run is bounded: markers replace the excess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_caps_bound_streams_and_result() {
    let server = Server::start().await;
    let answer = server
        .run("import sys\nprint('o' * 100_000)\nsys.stderr.write('e' * 100_000)\nresult = list(range(100_000))")
        .await;
    let body = answer.ok();
    assert_eq!(body["success"], true);
    let stdout = body["stdout"].as_str().unwrap();
    assert!(
        stdout.contains("[…stdout truncated: was ~98 KB; middle omitted]"),
        "{stdout}"
    );
    assert!(stdout.len() <= 17 * 1024);
    let stderr = body["stderr"].as_str().unwrap();
    assert!(stderr.contains("[…stderr truncated: was ~"), "{stderr}");
    assert!(
        body["result"]
            .as_str()
            .unwrap()
            .contains("(100000 array elements)")
    );
    server.assert_still_serves().await;
}
