//! Two workers on a real iii engine sharing a snapshot store (issue 47,
//! item 5): a kept python runtime minted by one worker survives that
//! worker's SIGTERM (it hibernates into the shared store as the worker
//! drains) and is woken by the other worker on the next call for its id,
//! which keeps reaching it there, also once the first worker is back.

use std::time::Duration;

use serde_json::json;

use crate::helpers::engine::{EngineProc, WorkerProc};

#[test]
fn a_session_moves_to_the_worker_that_stays() {
    let shared = crate::helpers::tempdir();
    let yaml = format!(
        "python_interpreter: data\nsnapshot_store: {}\nsnapshot_keys_file: {}\n",
        shared.path().join("store").display(),
        shared.path().join("keys").display()
    );
    let engine = EngineProc::start();
    let mut alpha = WorkerProc::with_config(&engine, "alpha", &yaml);
    let beta = WorkerProc::with_config(&engine, "beta", &yaml);
    let probe = json!({"lang": "python", "code": "result = 'ready'", "timeout_ms": 60000});
    for scoped in ["code-runner@alpha::run", "code-runner@beta::run"] {
        engine
            .trigger_when_registered(scoped, &probe)
            .unwrap_or_else(|e| panic!("{scoped}: {e}"));
    }
    let kept = engine
        .trigger(
            "code-runner@alpha::run",
            &json!({"lang": "python", "keep": true, "timeout_ms": 60000,
                    "code": "x = 41\nopen('/work/f.txt', 'w').write('moved')"}),
        )
        .unwrap();
    let id = kept["runtime_id"].as_str().unwrap().to_string();
    assert_eq!(code_runner::iii::minted_by(&id), Some("alpha"));

    let status = alpha.terminate(Duration::from_secs(120));
    assert!(status.success(), "{status:?}:\n{}", alpha.log());
    assert!(
        alpha.log().contains("hibernated for shutdown"),
        "{}",
        alpha.log()
    );
    drop(alpha);

    let state = json!({"runtime_id": id, "timeout_ms": 60000,
                       "code": "x += 1\nresult = [x, open('/work/f.txt').read()]"});
    let answer = engine
        .trigger_when_registered("code-runner::run", &state)
        .unwrap_or_else(|e| panic!("{e}\n{}", beta.log()));
    assert_eq!(answer["result"], json!([42, "moved"]), "{answer}");
    assert_eq!(answer["restored"], true, "{answer}");
    // It lives on the worker that woke it: the next call finds it there.
    let answer = engine.trigger("code-runner::run", &state).unwrap();
    assert_eq!(answer["result"], json!([43, "moved"]), "{answer}");
    assert!(answer.get("restored").is_none(), "{answer}");

    // The worker that minted it comes back (a new process, the same name):
    // calls for the id still reach the worker that holds it.
    let alpha = WorkerProc::with_config(&engine, "alpha", &yaml);
    engine
        .trigger_when_registered("code-runner@alpha::run", &probe)
        .unwrap_or_else(|e| panic!("{e}\n{}", alpha.log()));
    let answer = engine.trigger("code-runner::run", &state).unwrap();
    assert_eq!(answer["result"], json!([44, "moved"]), "{answer}");
    let answer = engine.trigger("code-runner@alpha::run", &state);
    assert!(answer.is_err(), "alpha itself does not hold it: {answer:?}");
}
