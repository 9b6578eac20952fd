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

/// A result JSON cannot represent is null in a successful response, never
/// an error: python's sets, NaN, infinities, cycles and nesting past the
/// limit; node's functions, BigInts, symbols, cycles, `undefined` and nesting
/// past the same limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_json_cannot_carry_become_null() {
    let server = Server::start().await;
    let python = vec![
        "result = {1, 2, 3}",
        "result = float('nan')",
        "result = [1.0, float('inf')]",
        "a = []\na.append(a)\nresult = a",
        include_str!("../../fixtures/deeply_nested_result.py"),
    ];
    let node = vec![
        "return () => 1",
        "return 10n",
        "return Symbol()",
        "const a = []; a.push(a); return a",
        "return undefined",
        "let v = []; for (let i = 0; i < 10000; i++) v = [v]; return v",
    ];
    for (lang, codes) in [("python", python), ("node", node)] {
        for code in codes {
            let answer = server.run_in(lang, code).await;
            let body = answer.ok();
            assert_eq!(body["exit_code"], 0, "{lang} {code}: {body}");
            assert_eq!(body["success"], true, "{lang} {code}: {body}");
            assert_eq!(body["result"], Value::Null, "{lang} {code}: {body}");
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
