//! What a run's `result` becomes, in both languages: a value JSON cannot
//! carry is null, and one over `max_result_bytes` is replaced whole by the
//! omission marker, while one under the cap comes back whole.

use serde_json::Value;

use crate::helpers::Server;
use crate::helpers::lang::{LANGS, pick, returning};

/// `0, 1, …, n - 1`, as each language writes it.
fn range(lang: &str, n: usize) -> String {
    pick(
        lang,
        format!("list(range({n}))"),
        format!("Array.from({{ length: {n} }}, (_, i) => i)"),
    )
}

/// Issue 45: a result with a JSON form comes back as it (python's sets as
/// lists, NaN and infinities as null where they stand; node as
/// `JSON.stringify` writes it), and one with none is null in a successful
/// response with a `result_note` naming its path and what it is, never an
/// error and never a silent null: cycles, nesting past the limit, node's
/// functions, BigInts and symbols.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_json_cannot_carry_become_null() {
    let server = Server::start().await;
    let converted = [
        ("python", "result = {3, 1, 2}", serde_json::json!([1, 2, 3])),
        ("python", "result = float('nan')", Value::Null),
        (
            "python",
            "result = [1.0, float('inf')]",
            serde_json::json!([1.0, null]),
        ),
        (
            "node",
            "return [NaN, undefined, () => 1]",
            serde_json::json!([null, null, null]),
        ),
        (
            "node",
            "return {a: 1, b: undefined}",
            serde_json::json!({"a": 1}),
        ),
        ("node", "return undefined", Value::Null),
    ];
    for (lang, code, expected) in converted {
        let answer = server.run_in(lang, code).await;
        let body = answer.ok();
        assert_eq!(body["result"], expected, "{lang} {code}: {body}");
        assert!(body.get("result_note").is_none(), "{lang} {code}: {body}");
    }
    let python = vec![
        ("a = []\na.append(a)\nresult = a", "cycle"),
        (
            include_str!("../../fixtures/deeply_nested_result.py"),
            "nested more than",
        ),
        ("result = {'x': object()}", "result['x'] is an object"),
    ];
    let node = vec![
        ("return () => 1", "is a function"),
        ("return 10n", "BigInt (10n)"),
        ("return Symbol()", "is a symbol"),
        ("const a = []; a.push(a); return a", "cycle"),
        (
            "let v = []; for (let i = 0; i < 10000; i++) v = [v]; return v",
            "nested more than",
        ),
    ];
    for (lang, codes) in [("python", python), ("node", node)] {
        for (code, said) in codes {
            let answer = server.run_in(lang, code).await;
            let body = answer.ok();
            assert_eq!(body["exit_code"], 0, "{lang} {code}: {body}");
            assert_eq!(body["success"], true, "{lang} {code}: {body}");
            assert_eq!(body["result"], Value::Null, "{lang} {code}: {body}");
            let note = body["result_note"].as_str().unwrap_or_default();
            assert!(note.contains(said), "{lang} {code}: {body}");
        }
    }
    server.assert_still_serves().await;
}

/// A 10 MB string result is replaced whole by the omission marker naming its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_mb_string_result_becomes_the_omission_marker() {
    let server = Server::start().await;
    for lang in LANGS {
        let code = returning(
            lang,
            pick(
                lang,
                "'x' * (10 * 1024 * 1024)",
                "'x'.repeat(10 * 1024 * 1024)",
            ),
        );
        let answer = server.run_in(lang, &code).await;
        let body = answer.ok();
        assert_eq!(
            body["success"], true,
            "{lang}: exit_code and success are never touched"
        );
        let marker = body["result"].as_str().expect("the marker is a string");
        assert!(marker.starts_with("<omitted: result was ~"), "{marker}");
        assert!(
            marker.contains(" KB (a 10485760-char string); "),
            "{lang}: {marker}"
        );
        assert!(marker.ends_with('>'), "{marker}");
    }
    server.assert_still_serves().await;
}

/// A 100000-element list becomes the marker naming its element count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_element_list_result_names_its_elements() {
    let server = Server::start().await;
    for lang in LANGS {
        let answer = server
            .run_in(lang, &returning(lang, &range(lang, 100_000)))
            .await;
        let body = answer.ok();
        assert_eq!(body["success"], true, "{lang}: {body}");
        let marker = body["result"].as_str().expect("the marker is a string");
        assert!(marker.starts_with("<omitted: result was ~"), "{marker}");
        assert!(marker.contains("(100000 array elements)"), "{marker}");
    }
    server.assert_still_serves().await;
}

/// A result just under the cap comes back whole: the cap replaces only what exceeds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_under_the_cap_comes_back_whole() {
    let server = Server::start().await;
    for lang in LANGS {
        let answer = server
            .run_in(lang, &returning(lang, &range(lang, 1000)))
            .await;
        let body = answer.ok();
        let list = body["result"].as_array().expect("an array, not a marker");
        assert_eq!(list.len(), 1000, "{lang}");
        assert_eq!(list[999], 999, "{lang}");
    }
    server.assert_still_serves().await;
}

/// A configured `max_result_bytes` is the cap that bites: at 100 bytes the
/// same 1000 elements are the marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_result_cap_replaces_what_exceeds_it() {
    let server = Server::with_config("max_result_bytes: 100").await;
    for lang in LANGS {
        let answer = server
            .run_in(lang, &returning(lang, &range(lang, 1000)))
            .await;
        let body = answer.ok();
        assert!(
            body["result"]
                .as_str()
                .unwrap()
                .starts_with("<omitted: result was ~"),
            "{lang}: {body}"
        );
    }
}
