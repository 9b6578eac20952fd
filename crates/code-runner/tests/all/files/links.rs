//! `collect_mode: "link"` (issue 45): collected files by reference, read
//! back whole with `code-runner::read_file`, over real HTTP on real engines,
//! in both languages; a kept runtime's links end with it.

use serde_json::{Value, json};

use super::{unb64, write_text};
use crate::helpers::lang::LANGS;
use crate::helpers::{INVALID_REQUEST, RUNTIME_NOT_FOUND, Server};

const READ_FILE: &str = "code-runner::read_file";

/// Linked files carry uri, size, type and a preview, no bytes; the bytes
/// come back whole from `read_file`; the marker still ends a capped list.
#[tokio::test(flavor = "multi_thread")]
async fn linked_files_are_read_back_whole() {
    let server = Server::with_config("max_collect_bytes: 4096\n").await;
    let csv: String = (0..200).map(|i| format!("{i},{}\n", i * i)).collect();
    for lang in LANGS {
        let code = format!(
            "{}{}{}",
            write_text(lang, "out/a.csv", &csv),
            write_text(lang, "out/b.txt", "short"),
            write_text(lang, "out/c-huge.txt", &"h".repeat(5000)),
        );
        let body = server
            .run_in_with(
                lang,
                &code,
                json!({"collect": ["out/*"], "collect_mode": "link"}),
            )
            .await
            .ok()
            .clone();
        let files = body["files"].as_array().expect("files");
        assert_eq!(files.len(), 3, "{lang}: {body}");
        let a = &files[0];
        assert_eq!(
            (a["path"].as_str(), a["size"].as_u64()),
            (Some("out/a.csv"), Some(csv.len() as u64))
        );
        assert!(a.get("base64").is_none(), "{a}");
        let preview = a["preview"].as_str().unwrap();
        assert_eq!(
            preview,
            format!(
                "{}…",
                csv.lines()
                    .take(10)
                    .map(|l| format!("{l}\n"))
                    .collect::<String>()
            )
        );
        assert_eq!(
            files[1]["preview"], "short",
            "a whole short file, no ellipsis"
        );
        let marker = files[2]["base64"].as_str().unwrap_or_default();
        assert!(
            marker.contains("out/c-huge.txt (5000 bytes) skipped"),
            "{marker}"
        );
        let uri = a["uri"].as_str().unwrap();
        assert!(
            uri.starts_with("code-runner://files/lk_") && uri.ends_with("/out/a.csv"),
            "{uri}"
        );
        let read = server
            .call(READ_FILE, json!({"uri": uri}))
            .await
            .ok()
            .clone();
        assert_eq!(unb64(&read["base64"]), csv.as_bytes(), "{lang}");
        assert_eq!(
            (read["path"].as_str(), read["mime_type"].as_str()),
            (Some("out/a.csv"), Some("text/csv"))
        );
        assert_eq!(read["uri"], uri);
    }
    let health = server.get("/healthz").await;
    assert!(
        health.ok()["linked_files"]["sets"].as_u64() >= Some(2),
        "{}",
        health.body
    );
    // A uri that is not a link, and a link no one made.
    server
        .call(READ_FILE, json!({"uri": "file:///etc/passwd"}))
        .await
        .assert_error(INVALID_REQUEST, "code-runner://files/");
    server
        .call(
            READ_FILE,
            json!({"uri": "code-runner://files/lk_NoSuchLinkNoSuchLinkNoSuchLink/x"}),
        )
        .await
        .assert_error(RUNTIME_NOT_FOUND, "no such linked file");
    // The default stays inline over HTTP.
    let body = server
        .run_in_with(
            "node",
            &write_text("node", "x.txt", "hi"),
            json!({"collect": ["x.txt"]}),
        )
        .await
        .ok()
        .clone();
    assert_eq!(body["files"][0]["base64"], "aGk=", "{body}");
    assert!(body["files"][0].get("uri").is_none());
}

/// A kept runtime's links live with it: readable after later turns, gone
/// (and said so) once it is torn down.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_runtimes_links_end_with_it() {
    let server = Server::start().await;
    let id = server
        .keep_with(
            &write_text("python", "r.txt", "kept"),
            json!({"collect": ["r.txt"], "collect_mode": "link"}),
        )
        .await;
    let answer = server.run_on(&id, "result = 1").await;
    assert_eq!(answer.ok()["result"], 1);
    // The first turn's answer is not at hand: collect again on the same runtime.
    let body = server
        .call(
            crate::helpers::RUN,
            json!({"runtime_id": id, "code": "pass", "collect": ["r.txt"], "collect_mode": "link"}),
        )
        .await
        .ok()
        .clone();
    let uri = body["files"][0]["uri"].as_str().unwrap().to_string();
    let read: Value = server
        .call(READ_FILE, json!({"uri": uri}))
        .await
        .ok()
        .clone();
    assert_eq!(unb64(&read["base64"]), b"kept");
    server.teardown(&id).await.ok();
    server
        .call(READ_FILE, json!({"uri": uri}))
        .await
        .assert_error(RUNTIME_NOT_FOUND, "its runtime has ended");
}
