//! Look-alike namespaces (issue 29, item 13), through real HTTP, real V8
//! and real wasmtime: beside the operator's `host-ns`, guest code may not
//! create `HOSTNS`, `host_ns` or `Host-NS` (one name to whoever reads a
//! listing), neither with `register_function` nor with node's
//! `iii.registerFunction`; the operator's own namespace and unrelated names
//! stay as they were.

use serde_json::{Value, json};

use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{INVALID_REQUEST, REGISTER, Server};

/// A guest run's budget: room for a loaded machine.
const LONG_MS: u64 = 60_000;

/// `lang` guest code that calls `register_function` for each id of `ids`
/// through `iii.trigger`; per id, `"ok"` or `[code, message]`.
fn registering(lang: &str, ids: &[&str]) -> String {
    let calls: Vec<Value> = ids
        .iter()
        .map(|id| json!([REGISTER, {"function_id": id, "lang": "python", "source": "def handler(p):\n    return 'guest'\n"}]))
        .collect();
    let calls = Value::from(calls).to_string();
    pick(
        lang,
        format!(
            "import json\nout = []\nfor fid, payload in json.loads({calls:?}):\n    try:\n        iii.trigger({{'function_id': fid, 'payload': payload}})\n        out.append('ok')\n    except IIIError as e:\n        out.append([e.code, e.message])\nresult = out"
        ),
        format!(
            "const out = [];\nfor (const [fid, payload] of {calls}) {{\n  try {{ await iii.trigger({{ function_id: fid, payload }}); out.push('ok'); }}\n  catch (e) {{ out.push([e.code, e.message]); }}\n}}\nreturn out;"
        ),
    )
}

#[track_caller]
fn assert_look_alike(outcome: &Value, namespace: &str) {
    assert_eq!(outcome[0], INVALID_REQUEST, "{outcome}");
    let message = outcome[1].as_str().unwrap_or("");
    for part in [
        format!("namespace {namespace}:: looks like namespace host-ns::"),
        "the operator's".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message:?}");
    }
}

/// The operator's `host-ns` has no guest look-alikes: `HOSTNS`, `host_ns`
/// and `Host-NS` are refused by name to guest code of either language, in
/// a one-shot run and through node's registrar; a name of its own is fine,
/// and the operator's function still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_cannot_make_look_alikes_of_the_operators_namespaces() {
    let server = Server::start().await;
    server
        .registered(
            "python",
            "host-ns::status",
            "def handler(p):\n    return 'green'\n",
        )
        .await;
    let look_alikes = ["HOSTNS", "host_ns", "Host-NS"];
    for lang in LANGS {
        let ids: Vec<String> = look_alikes
            .iter()
            .map(|ns| format!("{ns}::status"))
            .chain([format!("mine-{lang}::status")])
            .collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let body = server
            .run_in_with(
                lang,
                &registering(lang, &ids),
                json!({"timeout_ms": LONG_MS}),
            )
            .await;
        let outcomes = body.ok()["result"].as_array().cloned().unwrap_or_default();
        assert_eq!(outcomes.len(), 4, "{lang}: {}", body.body);
        for (outcome, ns) in outcomes.iter().zip(look_alikes) {
            assert_look_alike(outcome, ns);
        }
        assert_eq!(outcomes[3], "ok", "{lang}: a name of its own is free");
    }

    let code = "const out = [];\nfor (const id of ['HOST_NS::x', 'own-ns::x']) {\n  try { await iii.registerFunction(id, () => 1); out.push('ok'); }\n  catch (e) { out.push([e.code, e.message]); }\n}\nreturn out;";
    let body = server
        .run_in_with("node", code, json!({"timeout_ms": LONG_MS}))
        .await;
    let outcomes = body.ok()["result"].clone();
    assert_look_alike(&outcomes[0], "HOST_NS");
    assert_eq!(outcomes[1], "ok", "{}", body.body);

    assert_eq!(
        server.call("host-ns::status", json!({})).await.ok(),
        "green"
    );
    for ns in look_alikes {
        crate::helpers::Answer::assert_error(
            &server.call(&format!("{ns}::status"), json!({})).await,
            "function_not_found",
            "status",
        );
    }
}
