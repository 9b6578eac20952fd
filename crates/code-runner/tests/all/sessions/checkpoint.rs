//! A failed turn costs only that turn (issue 47, item 6): a kept python
//! runtime made with `checkpoint: true` goes back to its state before a turn
//! that timed out, hit its memory cap or exited the interpreter (variables,
//! imports, `/work`), and the answer says so; without it the interpreter is
//! lost as before. `checkpoint` is refused where it cannot apply.

use serde_json::json;

use crate::helpers::{INVALID_REQUEST, RESOURCE_EXHAUSTED, Server, TIMEOUT};

const SETUP: &str = "import numpy as np\nx = 41\narr = np.arange(10)\nopen('/work/a.txt', 'w').write('before')\nresult = x";
const STATE: &str = "import os\nresult = [x, int(arr.sum()), open('/work/a.txt').read(), os.path.exists('/work/b.txt')]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_goes_back_to_the_checkpoint() {
    let server = Server::with_config("python_interpreter: data\n").await;
    let id = server
        .keep_with(SETUP, json!({"checkpoint": true, "memory_mb": 64}))
        .await;
    let intact = json!([41, 45, "before", false]);

    // A timeout after the turn changed things: none of it is kept.
    let answer = server
        .call(
            "code-runner::run",
            json!({"runtime_id": id, "timeout_ms": 1500, "code": "x = 0\nopen('/work/a.txt', 'w').write('during')\nopen('/work/b.txt', 'w').write('new')\nwhile True: pass"}),
        )
        .await;
    answer.assert_error(TIMEOUT, "went back to its state before this run");
    let state = server.run_on(&id, STATE).await;
    assert_eq!(state.ok()["result"], intact, "{}", state.body);
    assert!(state.ok().get("runtime_reset").is_none(), "{}", state.body);

    // The memory cap.
    let answer = server
        .run_on(&id, "x = 1\nbig = bytearray(200 << 20)")
        .await;
    answer.assert_error(RESOURCE_EXHAUSTED, "checkpoint: true");
    let state = server.run_on(&id, STATE).await;
    assert_eq!(state.ok()["result"], intact, "{}", state.body);

    // An exit of the interpreter: the same answer says where it went.
    let answer = server.run_on(&id, "import os\nx = 2\nos._exit(3)").await;
    assert_eq!(
        answer.ok()["runtime_reset"]["to"],
        "checkpoint",
        "{}",
        answer.body
    );
    let state = server.run_on(&id, STATE).await;
    assert_eq!(state.ok()["result"], intact, "{}", state.body);

    // A turn that succeeds moves the checkpoint on.
    server.run_on(&id, "x = 100").await.ok();
    server
        .call(
            "code-runner::run",
            json!({"runtime_id": id, "timeout_ms": 1500, "code": "while True: pass"}),
        )
        .await
        .assert_error(TIMEOUT, "checkpoint");
    let answer = server.run_on(&id, "result = x").await;
    assert_eq!(answer.ok()["result"], 100, "{}", answer.body);

    // Without a checkpoint the interpreter is lost, as before.
    let plain = server.keep("x = 41").await;
    server
        .call(
            "code-runner::run",
            json!({"runtime_id": plain, "timeout_ms": 1500, "code": "while True: pass"}),
        )
        .await
        .assert_error(TIMEOUT, "");
    let answer = server.run_on(&plain, "result = 'x' in globals()").await;
    assert_eq!(answer.ok()["result"], false, "{}", answer.body);
    assert_eq!(
        answer.ok()["runtime_reset"]["to"],
        "fresh",
        "{}",
        answer.body
    );

    // Refused where it cannot apply.
    server
        .call(
            "code-runner::run",
            json!({"lang": "python", "checkpoint": true, "code": "x = 1"}),
        )
        .await
        .assert_error(INVALID_REQUEST, "keep: true");
    server
        .call(
            "code-runner::run",
            json!({"lang": "node", "keep": true, "checkpoint": true, "code": "return 1"}),
        )
        .await
        .assert_error(INVALID_REQUEST, "kept python runtime");
    server
        .call(
            "code-runner::run",
            json!({"runtime_id": id, "checkpoint": true, "code": "x = 1"}),
        )
        .await
        .assert_error(INVALID_REQUEST, "fixed when a runtime is created");
}
