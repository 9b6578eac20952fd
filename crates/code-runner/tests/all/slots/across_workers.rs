//! Quotas hold across workers (issue 16, item 13): a guest's call to
//! another code-runner worker through the iii engine carries its lineage,
//! so the callee charges what it starts to the calling tree (its share of
//! the callee's `max_runtimes`) and ends it by the calling turn's deadline.
//! Before, a guest on worker A called `code-runner@B::run` with
//! `keep: true` eight times: B accepted all eight (the share is 4), as host
//! calls, and they outlived the guest's run.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::engine::{EngineProc, WorkerProc};
use crate::helpers::{CAPACITY, EXPIRED, ServeProcess, client, post_json, tempdir};

/// The guest on A, in python: eight nested kept runs on B, the ids and refusals.
const HOARD_ON_B: &str = r#"
kept, refused = [], []
for _ in range(8):
    try:
        answer = iii.trigger({"function_id": "code-runner@cr-b::run",
                              "payload": {"lang": "python", "keep": True, "code": "x = 1"}})
        kept.append(answer["runtime_id"])
    except IIIError as e:
        refused.append([e.code, e.message])
result = {"kept": kept, "refused": refused}
"#;

/// The same guest in node.
const NODE_HOARD_ON_B: &str = r#"
const kept = [], refused = [];
for (let i = 0; i < 8; i++) {
  try {
    const answer = await iii.trigger({ function_id: "code-runner@cr-b::run",
                                       payload: { lang: "python", keep: true, code: "x = 1" } });
    kept.push(answer.runtime_id);
  } catch (e) {
    refused.push([e.code, e.message]);
  }
}
return { kept, refused };
"#;

/// The calling run's budget: what B's runtimes may outlive its answer by.
const RUN_BUDGET_MS: u64 = 8_000;

async fn live_on(url: &str) -> u64 {
    let health = client().get(format!("{url}/healthz")).send().await.unwrap();
    let body: Value = health.json().await.unwrap();
    body["runtimes"]["live"].as_u64().unwrap()
}

/// B charges A's guest: 4 kept of 8, `capacity` naming the share for the
/// rest; by the calling turn's deadline they are torn down (`expired`) and
/// B's slots are free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_on_one_worker_is_charged_and_ended_by_another() {
    let engine = EngineProc::start();
    let a = WorkerProc::start(&engine, "cr-a");
    let b_dir = tempdir();
    let b = ServeProcess::spawn_with(
        &b_dir.path().join("data"),
        None,
        &["--engine", &engine.url(), "--worker-name", "cr-b"],
    );
    for id in ["code-runner@cr-a::run", "code-runner@cr-b::run"] {
        engine
            .trigger_when_registered(id, &json!({"lang": "python", "code": "result = 1"}))
            .unwrap_or_else(|e| panic!("{e}\n{}\n{}", a.log(), b.log()));
    }
    let http = client();
    for (lang, code) in [("python", HOARD_ON_B), ("node", NODE_HOARD_ON_B)] {
        let started = Instant::now();
        let answer = engine
            .trigger(
                "code-runner@cr-a::run",
                &json!({"lang": lang, "code": code, "timeout_ms": RUN_BUDGET_MS}),
            )
            .unwrap_or_else(|e| panic!("{e}\n{}", a.log()));
        let kept = answer["result"]["kept"].as_array().unwrap().clone();
        let refused = answer["result"]["refused"].as_array().unwrap().clone();
        assert_eq!(
            (kept.len(), refused.len()),
            (4, 4),
            "{lang}: {answer}\n{}",
            b.log()
        );
        assert_eq!(refused[0][0], CAPACITY, "{answer}");
        assert!(
            refused[0][1].as_str().unwrap().contains("at most 4"),
            "{answer}"
        );
        // B cannot see A's run end; it ends what the run started by its deadline.
        let until = started + Duration::from_millis(RUN_BUDGET_MS) + Duration::from_secs(20);
        while live_on(&b.url).await > 0 {
            assert!(
                Instant::now() < until,
                "B still holds {} runtimes {:?} after the run began\n{}",
                live_on(&b.url).await,
                started.elapsed(),
                b.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for id in &kept {
            let answer = post_json(
                &http,
                &b.url,
                "code-runner::run",
                &json!({"runtime_id": id, "code": "result = x"}),
            )
            .await;
            answer.assert_error(EXPIRED, "");
        }
    }
    // A host call on B is not bounded by the guest's share.
    let host = post_json(
        &http,
        &b.url,
        "code-runner::run",
        &json!({"lang": "python", "keep": true, "code": "pass"}),
    )
    .await;
    assert!(host.ok()["runtime_id"].is_string());
}
