//! Several workers on one engine: one-shot and new kept runs spread over
//! them, a `runtime_id` reaches the worker that minted it, scoped ids never
//! route, and a surviving worker takes the shared ids over. (Python runs
//! throughout: routing is by id and worker, the same for either language.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{REGISTERED, wait_ready};
use crate::helpers::engine::{EngineProc, WorkerProc};

/// Calls `function_id` until it answers something other than "not found",
/// or panics after [`REGISTERED`].
fn until_registered(engine: &EngineProc, function_id: &str, payload: &Value) -> Value {
    engine
        .trigger_when_registered(function_id, payload)
        .unwrap_or_else(|e| panic!("{function_id}: {e}"))
}

/// Two workers on one engine: one-shot and new kept runs spread over both,
/// a runtime_id reaches the worker that minted it whichever worker fronts
/// the shared id, scoped ids never route, and when the front goes away the
/// other worker takes the shared ids over.
#[test]
fn two_workers_share_the_engine() {
    let engine = EngineProc::start();
    let alpha = WorkerProc::start(&engine, "alpha");
    let beta = WorkerProc::start(&engine, "beta");
    let probe = json!({"lang": "python", "code": "result = 'ready'", "timeout_ms": 30000});
    until_registered(&engine, "code-runner@alpha::run", &probe);
    until_registered(&engine, "code-runner@beta::run", &probe);
    wait_ready(&engine, &alpha);

    // New kept runs go round-robin: both workers mint ids.
    let mut minted = std::collections::BTreeMap::new();
    for n in 0..6 {
        let kept = engine
            .trigger(
                "code-runner::run",
                &json!({"lang": "python", "keep": true, "code": format!("n = {n}"), "timeout_ms": 30000}),
            )
            .unwrap();
        let id = kept["runtime_id"].as_str().expect("runtime_id").to_string();
        let worker = code_runner::iii::minted_by(&id)
            .expect("a scoped id")
            .to_string();
        minted.insert(worker, id);
    }
    assert_eq!(
        minted.keys().cloned().collect::<Vec<_>>(),
        ["alpha", "beta"],
        "runs did not spread: {minted:?}"
    );

    // Each id reaches its worker through the shared id, state intact.
    for (worker, id) in &minted {
        let answer = engine
            .trigger(
                "code-runner::run",
                &json!({"runtime_id": id, "code": "result = n", "timeout_ms": 30000}),
            )
            .unwrap_or_else(|e| panic!("{worker}: {e}"));
        assert!(answer["result"].is_number(), "{worker}: {answer}");
        // A scoped id runs locally only: the other worker does not know the id.
        let other = if worker == "alpha" { "beta" } else { "alpha" };
        let err = engine
            .trigger(
                &format!("code-runner@{other}::run"),
                &json!({"runtime_id": id, "code": "result = n"}),
            )
            .unwrap_err();
        assert_eq!(err["code"], "code-runner::runtime_not_found", "{err}");
    }
    let beta_id = &minted["beta"];
    let torn = engine
        .trigger("code-runner::teardown", &json!({"runtime_id": beta_id}))
        .unwrap();
    assert_eq!(torn["torn_down"], true, "{torn}");

    // The front leaves; the other worker claims the shared ids.
    let front = engine
        .trigger(
            "engine::functions::info",
            &json!({"function_id": "code-runner::run"}),
        )
        .unwrap()["worker_name"]
        .as_str()
        .expect("an owner")
        .to_string();
    let mut workers = vec![("alpha", alpha), ("beta", beta)];
    workers.retain(|(name, _)| *name != front);
    let survivor = workers[0].0;
    let until = Instant::now() + REGISTERED;
    loop {
        let info = engine.trigger(
            "engine::functions::info",
            &json!({"function_id": "code-runner::run"}),
        );
        if let Ok(info) = &info
            && info["worker_name"] == survivor
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "{survivor} never took over: {info:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let answer = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "python", "code": "result = 7", "timeout_ms": 30000}),
        )
        .unwrap();
    assert_eq!(answer["result"], 7, "{answer}");
}

/// Issue 29 item 10: kept runtimes that guest code starts on another
/// worker through the engine end with the guest's lineage, not at the
/// calling turn's deadline or the far worker's idle TTL: repeated one-shots
/// leave no orphans there. Both languages.
#[test]
fn kept_runtimes_a_guest_starts_on_a_peer_end_with_its_tree() {
    let engine = EngineProc::start();
    let near = WorkerProc::start(&engine, "cr-near");
    let far = WorkerProc::start(&engine, "cr-far");
    let probe = json!({"lang": "python", "code": "result = 'ready'", "timeout_ms": 30000});
    until_registered(&engine, "code-runner@cr-near::run", &probe);
    until_registered(&engine, "code-runner@cr-far::run", &probe);
    let far_keep = json!({"lang": "python", "keep": true, "code": "n = 1"});
    let codes = [
        (
            "python",
            format!(
                "import json\nr = iii.trigger({{'function_id': 'code-runner@cr-far::run', 'payload': json.loads({:?})}})\nresult = r['runtime_id']",
                far_keep.to_string()
            ),
        ),
        (
            "node",
            format!(
                "const r = await iii.trigger({{function_id: 'code-runner@cr-far::run', payload: {far_keep}}});\nreturn r.runtime_id"
            ),
        ),
    ];
    for (lang, code) in codes {
        let mut kept = Vec::new();
        for _ in 0..3 {
            // A long turn budget: without the release, the far runtimes
            // would live until it runs out.
            let answer = engine
                .trigger(
                    "code-runner@cr-near::run",
                    &json!({"lang": lang, "code": code, "timeout_ms": 120_000}),
                )
                .unwrap_or_else(|e| panic!("{lang}: {e}\n{}\n{}", near.log(), far.log()));
            let id = answer["result"]
                .as_str()
                .unwrap_or_else(|| panic!("{lang}: {answer}\n{}", far.log()))
                .to_string();
            kept.push(id);
        }
        let until = Instant::now() + Duration::from_secs(60);
        for id in &kept {
            loop {
                let answer = engine.trigger(
                    "code-runner@cr-far::run",
                    &json!({"runtime_id": id, "code": "result = n", "timeout_ms": 30000}),
                );
                match answer {
                    Err(err) => {
                        assert!(
                            err["code"] == "code-runner::runtime_not_found"
                                || err["code"] == "code-runner::expired",
                            "{lang}: {err}"
                        );
                        break;
                    }
                    Ok(ok) => assert!(
                        Instant::now() < until,
                        "{lang}: a kept runtime the ended one-shot started on the peer still answers: {ok}\n{}",
                        far.log()
                    ),
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }
}
