//! What a guest's values cost the host, against the real binary: a binding
//! argument or a result of millions of tiny JSON values is measured and
//! refused (or nulled), never built into a host-side tree. Each test failed
//! before its fix (a review's attacks).

use serde_json::json;

use crate::helpers::lang::{LANGS, PYTHON_INTERPRETERS, RAW_BINDING_CALL};
use crate::helpers::{Server, peak_rss_mib};

/// A guest handing the host 16 MiB of tiny JSON values in one binding call
/// (here `iii.trigger`'s payload) is refused before the host builds a tree
/// of it, in both languages; python's raw binding frame is refused the same
/// way. Before, each such call cost the host ~1.5 GB at peak (a tree of
/// 8 million values), per runtime, and a few runtimes at once took the
/// machine's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_argument_of_millions_of_values_is_refused_unparsed() {
    for config in PYTHON_INTERPRETERS {
        let mut server = Server::process(config).await;
        let code = format!(
            "{RAW_BINDING_CALL}\
             frame = '{{\"ns\":\"iii\",\"fn\":\"trigger\",\"args\":{{\"function_id\":\"nope::x\",\"payload\":[' + '0,' * 8_000_000 + '0]}}}}'\n\
             result = [raw(frame) for _ in range(2)][-1]\n\
             try:\n    iii.trigger({{'function_id': 'nope::x', 'payload': [0] * 300_000}})\n\
             except IIIError as err:\n    result = [result, str(err)]"
        );
        let answer = server
            .run_with(&code, json!({"timeout_ms": 60_000, "memory_mb": 256}))
            .await;
        let body = answer.ok();
        let raw = body["result"][0].as_str().unwrap_or_default();
        assert!(
            raw.contains("limited to 262144 JSON values"),
            "{config}: {body}"
        );
        let caught = body["result"][1].as_str().unwrap_or_default();
        assert!(
            caught.contains("limited to 262144 JSON values"),
            "{config}: {body}"
        );
        let peak = peak_rss_mib(server.pid());
        assert!(peak < 600, "{config}: the host peaked at {peak} MiB");
        server.assert_alive();
    }
    let mut server = Server::process("").await;
    let node = "const out = [];\n\
                for (const n of [8_000_000, 300_000]) {\n\
                  try { await iii.trigger({ function_id: 'nope::x', payload: new Array(n).fill(0) }); out.push(null); }\n\
                  catch (e) { out.push(String(e.message)); }\n\
                }\n\
                return out;";
    let answer = server
        .run_in_with("node", node, json!({"timeout_ms": 60_000}))
        .await;
    let body = answer.ok();
    for refusal in body["result"].as_array().expect("two refusals") {
        let text = refusal.as_str().unwrap_or_default();
        assert!(text.contains("limited to 262144 JSON values"), "{body}");
    }
    let peak = peak_rss_mib(server.pid());
    assert!(peak < 600, "the host peaked at {peak} MiB");
    server.assert_alive();
    server.assert_still_serves().await;
}

/// With `max_result_bytes: 0` (the cap disabled), a result of millions of
/// small values comes back as `null` rather than as a host-side tree of
/// ~1.6 GB; one under the value limit still comes back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncapped_result_of_millions_of_values_is_not_parsed() {
    let mut server = Server::process("max_result_bytes: 0\n").await;
    for lang in LANGS {
        let (wide, whole, extra) = match lang {
            "python" => (
                "result = [0] * 8_000_000",
                "result = [1] * 200_000",
                json!({"timeout_ms": 60_000, "memory_mb": 256}),
            ),
            _ => (
                "return new Array(8_000_000).fill(0)",
                "return new Array(200_000).fill(1)",
                json!({"timeout_ms": 60_000}),
            ),
        };
        let answer = server.run_in_with(lang, wide, extra).await;
        let body = answer.ok();
        assert_eq!(body["exit_code"], 0, "{lang}: {body}");
        assert_eq!(body["result"], json!(null), "{lang}: {body}");
        let peak = peak_rss_mib(server.pid());
        assert!(peak < 600, "{lang}: the host peaked at {peak} MiB");
        let whole = server.run_in(lang, whole).await;
        assert_eq!(
            whole.ok()["result"].as_array().map(Vec::len),
            Some(200_000),
            "{lang}"
        );
    }
    server.assert_alive();
}
