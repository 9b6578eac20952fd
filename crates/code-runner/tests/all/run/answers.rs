//! Issue 45: what the model sees loses nothing silently. Python's prints
//! stream line by line as node's do; a run stopped by its timeout or a
//! memory cap answers with its output so far and names the knob and its
//! ceiling; a kept python runtime whose interpreter went with a turn says
//! so, and its next answer carries `runtime_reset`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::{RESOURCE_EXHAUSTED, RUN, Server, TIMEOUT, stream_run};

/// The server-sent events of a run: `(event, data, when it arrived)`.
async fn events(server: &Server, payload: Value) -> Vec<(String, Value, Instant)> {
    let (sender, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let url = server.url.clone();
    tokio::spawn(async move { stream_run(&url, &payload, sender).await });
    let mut seen = Vec::new();
    while let Some((event, data)) = arrived.recv().await {
        seen.push((event, data, Instant::now()));
    }
    seen
}

/// A python print loop streams one event per line, each as it is printed
/// (not all with the answer), in both interpreters' flavour the worker runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_prints_stream_line_by_line() {
    let server = Server::start().await;
    let code = "import time\nfor i in range(3):\n    print(f'line {i}')\n    time.sleep(0.4)\nresult = 'done'";
    let seen = events(&server, json!({"lang": "python", "code": code})).await;
    let lines: Vec<&(String, Value, Instant)> = seen
        .iter()
        .filter(|(event, _, _)| event == "stdout")
        .collect();
    assert_eq!(lines.len(), 3, "{seen:?}");
    for (i, (_, data, _)) in lines.iter().enumerate() {
        assert_eq!(data["text"], format!("line {i}\n"), "{seen:?}");
    }
    let (last, answer, at) = seen.last().unwrap();
    assert_eq!(last, "result", "{seen:?}");
    assert_eq!(answer["result"], "done");
    // The first line arrived well before the answer: it was not held back.
    assert!(
        at.duration_since(lines[0].2) >= Duration::from_millis(600),
        "{seen:?}"
    );
}

/// A timeout answers with the output printed before it, beside the error,
/// and names the knob and its ceiling; so does a python memory cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_keeps_its_output_and_names_its_knob() {
    let server = Server::start().await;
    for (lang, code) in [
        ("python", "print('started')\nwhile True:\n    pass"),
        ("node", "console.log('started'); while (true) {}"),
    ] {
        let answer = server
            .run_in_with(lang, code, json!({"timeout_ms": 500}))
            .await;
        answer.assert_error(TIMEOUT, "timeout_ms");
        let error = &answer.body["error"];
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("max_timeout_ms (30000 ms)"),
            "{lang}: {error}"
        );
        assert_eq!(error["stdout"], "started\n", "{lang}: {error}");
    }
    let answer = server
        .run_in_with(
            "python",
            "print('allocating')\nx = bytearray(400 * 1024 * 1024)",
            json!({"memory_mb": 64}),
        )
        .await;
    answer.assert_error(RESOURCE_EXHAUSTED, "memory_mb");
    let error = &answer.body["error"];
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("max_memory_mb (512 MiB)"),
        "{error}"
    );
    assert_eq!(error["stdout"], "allocating\n", "{error}");
}

/// A kept python runtime whose turn timed out says its variables went and
/// its files stayed, and the next run on it carries `runtime_reset` (once);
/// a node runtime keeps its state through a timeout and says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_interpreter_is_said_and_the_next_answer_says_so() {
    let server = Server::start().await;
    let id = server
        .keep_in("python", "x = 41\nopen('kept.txt', 'w').write('here')")
        .await;
    let answer = server
        .call(
            RUN,
            json!({"runtime_id": id, "code": "while True:\n    pass", "timeout_ms": 400}),
        )
        .await;
    answer.assert_error(TIMEOUT, "variables and imports are gone");
    assert!(
        answer.error_message().contains("files in /work are kept"),
        "{}",
        answer.body
    );
    let next = server
        .run_on(&id, "result = [open('kept.txt').read(), 'x' in globals()]")
        .await;
    let body = next.ok();
    assert_eq!(body["result"], json!(["here", false]), "{body}");
    assert_eq!(
        body["runtime_reset"],
        json!({"to": "fresh", "because": "the previous turn timed out"}),
        "{body}"
    );
    let after = server.run_on(&id, "result = 1").await;
    assert!(after.ok().get("runtime_reset").is_none(), "said once");

    let node = server.keep_in("node", "globalThis.x = 41").await;
    let answer = server
        .call(
            RUN,
            json!({"runtime_id": node, "code": "while (true) {}", "timeout_ms": 400}),
        )
        .await;
    answer.assert_error(TIMEOUT, "");
    assert!(
        !answer.error_message().contains("variables"),
        "{}",
        answer.body
    );
    let next = server.run_on(&node, "return x + 1").await;
    assert_eq!(next.ok()["result"], 42);
    assert!(next.ok().get("runtime_reset").is_none());
}

/// A language is accepted as models spell it (`javascript`, `Python`, `TS`,
/// `js`, `py`), runs on its engine, and the answer of a kept runtime's turn
/// carries no other name; an unknown one is refused naming what is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_language_is_accepted_as_models_spell_it() {
    let server = Server::start().await;
    let cases = [
        (
            "javascript",
            "return typeof process === 'undefined' ? 'v8' : 'node'",
        ),
        (
            "JS",
            "return typeof process === 'undefined' ? 'v8' : 'node'",
        ),
        ("Python", "import sys\nresult = sys.implementation.name"),
        (" py ", "import sys\nresult = sys.implementation.name"),
        ("TS", "const name: string = 'ts'\nreturn name"),
    ];
    for (lang, code) in cases {
        let answer = server.call(RUN, json!({"lang": lang, "code": code})).await;
        let result = &answer.ok()["result"];
        assert!(
            ["v8", "node", "cpython", "ts"].contains(&result.as_str().unwrap_or_default()),
            "{lang}: {}",
            answer.body
        );
    }
    // A kept runtime made with an alias takes its own language by any name.
    let kept = server
        .call(
            RUN,
            json!({"lang": "Python", "code": "x = 41", "keep": true}),
        )
        .await;
    let id = kept.ok()["runtime_id"].as_str().unwrap().to_string();
    let answer = server
        .call(
            RUN,
            json!({"runtime_id": id, "lang": "python3", "code": "result = x + 1"}),
        )
        .await;
    assert_eq!(answer.ok()["result"], 42, "{}", answer.body);
    let answer = server
        .call(RUN, json!({"lang": "cobol", "code": "1"}))
        .await;
    answer.assert_error(crate::helpers::INVALID_REQUEST, "unknown lang `cobol`");
    assert!(
        answer
            .error_message()
            .contains("node, python or typescript"),
        "{}",
        answer.body
    );
    server.teardown(&id).await.ok();
}
