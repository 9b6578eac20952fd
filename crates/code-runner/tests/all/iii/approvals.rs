//! Issue 44, item 1, over a real engine: guest code on one worker that
//! starts a run on another (`code-runner@<peer>::run`, through the engine)
//! cannot get a suspension it could resume, and `code-runner::resume` is
//! refused to it; the gated handler on the peer never runs.

use serde_json::json;

use super::wait_ready_in;
use crate::helpers::engine::{EngineProc, WorkerProc};

const GATED: &str = "approval_required: [\"billing::charge\"]\n";

/// A node guest on `cr-near` starts a run on `cr-far` whose code calls the
/// gated `billing::charge` there, then tries to resume whatever came back.
#[test]
fn a_guest_cannot_approve_through_a_peer() {
    let engine = EngineProc::start();
    let near = WorkerProc::with_config(&engine, "cr-near", GATED);
    let far = WorkerProc::with_config(&engine, "cr-far", GATED);
    let probe = json!({"lang": "node", "code": "return 'ready'", "timeout_ms": 30000});
    engine
        .trigger_when_registered("code-runner@cr-near::run", &probe)
        .unwrap_or_else(|e| panic!("{e}\n{}", near.log()));
    engine
        .trigger_when_registered("code-runner@cr-far::run", &probe)
        .unwrap_or_else(|e| panic!("{e}\n{}", far.log()));
    wait_ready_in(&engine, &far, "python");
    for (id, source) in [
        (
            "billing::charge",
            "charged = 0\ndef handler(payload):\n    global charged\n    charged += 1\n    return 'charged'\n",
        ),
        (
            "billing::charged",
            "def handler(payload):\n    return charged\n",
        ),
    ] {
        engine
            .trigger(
                "code-runner@cr-far::register_function",
                &json!({"function_id": id, "lang": "python", "source": source}),
            )
            .unwrap_or_else(|e| panic!("{id}: {e}\n{}", far.log()));
    }
    let code = r#"
const inner = await iii.trigger({ function_id: 'code-runner@cr-far::run', payload: {
  lang: 'node', code: "return await iii.trigger({ function_id: 'billing::charge', payload: {} })" } });
const attempts = [];
for (const id of ['code-runner::resume', 'code-runner@cr-far::resume']) {
  try {
    await iii.trigger({ function_id: id, payload: {
      runtime_id: inner.runtime_id ?? 'rt_cr-far_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
      call_id: inner.suspended?.call_id ?? 'call_x', approve: true } });
    attempts.push('went through');
  } catch (e) { attempts.push(e.code); }
}
return { inner, attempts };
"#;
    let answer = engine
        .trigger(
            "code-runner@cr-near::run",
            &json!({"lang": "node", "code": code, "timeout_ms": 30000}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", near.log(), far.log()));
    let result = &answer["result"];
    assert!(result["inner"].get("suspended").is_none(), "{answer}");
    assert!(
        result["inner"]["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("forbidden"),
        "{answer}"
    );
    assert_eq!(
        result["attempts"],
        json!(["forbidden", "forbidden"]),
        "{answer}"
    );
    let charged = engine
        .trigger("billing::charged", &json!({}))
        .unwrap_or_else(|e| panic!("{e}\n{}", far.log()));
    assert_eq!(charged, json!(0), "the gated handler ran");
}
