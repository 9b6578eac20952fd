//! Python's data stack through the worker: plain `lang: "python"` runs use
//! numpy, pandas and matplotlib with no new request field (the default
//! `python_interpreter: auto`, and `scripts/test` installs the stack), the
//! figures a program shows come back as `images` under their caps, and a
//! lean worker (`python_interpreter: lean`) says how to install the stack.

mod images;

use serde_json::json;

use crate::helpers::Server;

/// A one-shot importing pandas works as any python run does, and the
/// worker says which interpreter it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_imports_pandas_with_no_new_field() {
    let server = Server::start().await;
    let answer = server
        .run(
            "import io\nimport pandas as pd\n\
             df = pd.read_csv(io.StringIO('k,v\\na,1\\nb,2\\na,3\\n'))\n\
             result = df.groupby('k')['v'].sum().to_dict()",
        )
        .await;
    let body = answer.ok();
    assert_eq!(body["result"], json!({"a": 4, "b": 2}), "{body}");
    assert!(body.get("images").is_none(), "no figure, no images: {body}");
    let health = server.get("/healthz").await;
    assert_eq!(
        health.ok()["engines"]["python_interpreter"],
        "data",
        "{}",
        health.body
    );
}

/// A kept runtime that began without the stack imports numpy in its fifth
/// turn, with its globals intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_runtime_imports_numpy_in_its_fifth_turn() {
    let server = Server::start().await;
    let id = server.keep("x = 40").await;
    for turn in 2..=4 {
        let answer = server
            .run_on(&id, &format!("x += 0\nresult = {turn}"))
            .await;
        assert_eq!(answer.ok()["result"], turn);
    }
    let answer = server
        .run_on(
            &id,
            "import numpy as np\nresult = int(np.linalg.solve(np.array([[2.0]]), np.array([2.0 * (x + 2)]))[0])",
        )
        .await;
    assert_eq!(answer.ok()["result"], 42, "{}", answer.body);
    server.teardown(&id).await.ok();
}

/// `python_interpreter: lean` runs the standard-library interpreter even
/// where the stack is installed; importing numpy says how to get it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lean_worker_names_the_set_up_in_its_hint() {
    let server = Server::with_config("python_interpreter: lean\n").await;
    let answer = server.run("import numpy").await;
    let body = answer.ok();
    assert_eq!(body["exit_code"], 1, "{body}");
    let stderr = body["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains("ModuleNotFoundError"), "{stderr}");
    assert!(stderr.contains("scripts/fetch-python-data"), "{stderr}");
    let health = server.get("/healthz").await;
    assert_eq!(
        health.ok()["engines"]["python_interpreter"],
        "lean",
        "{}",
        health.body
    );
    assert_eq!(server.run("result = 2 + 2").await.ok()["result"], 4);
}

/// The configuration key takes only the three interpreters, by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_interpreter_takes_auto_lean_or_data() {
    let server = Server::start().await;
    let answer = server
        .call(
            "configuration::set",
            json!({"id": "code-runner", "value": {"python_interpreter": "conda"}}),
        )
        .await;
    assert!(
        answer.error_message().contains("python_interpreter"),
        "{}",
        answer.body
    );
    let answer = server
        .call(
            "configuration::set",
            json!({"id": "code-runner", "value": {"python_interpreter": "lean"}}),
        )
        .await;
    let body = answer.ok();
    assert_eq!(
        body["pending_restart"],
        json!(["python_interpreter"]),
        "{body}"
    );
}
