//! The bounds on a run's files: each bad path refused by name, the
//! runtime's quotas before any code runs, and the caps on what comes back.

use serde_json::json;

use super::{read_text, unb64, write_text};
use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{INVALID_REQUEST, RESOURCE_EXHAUSTED, RUN, Server};

/// Each path rule refuses the run with `invalid_request` naming the path
/// and the rule, before a runtime is started.
#[tokio::test(flavor = "multi_thread")]
async fn bad_paths_are_refused_by_name() {
    let server = Server::start().await;
    let long = "n".repeat(256);
    let cases = [
        (
            json!([{"path": "/etc/passwd", "text": "x"}]),
            "\"/etc/passwd\": a path is relative",
        ),
        (json!([{"path": "a/../../b", "text": "x"}]), "`..`"),
        (json!([{"path": "a\u{0}b", "text": "x"}]), "NUL"),
        (json!([{"path": "a//b", "text": "x"}]), "empty component"),
        (json!([{"path": long, "text": "x"}]), "at most 255 bytes"),
        (
            json!([{"path": "a", "text": "x"}, {"path": "./a", "text": "y"}]),
            "two files",
        ),
        (
            json!([{"path": "a", "text": "x", "base64": "eA=="}]),
            "exactly one",
        ),
        (json!([{"path": "a", "base64": "%%%"}]), "base64"),
    ];
    for lang in LANGS {
        for (files, rule) in &cases {
            let answer = server.run_in_with(lang, "", json!({"files": files})).await;
            answer.assert_error(INVALID_REQUEST, rule);
            assert!(
                answer.error_message().contains("file path"),
                "{}",
                answer.body
            );
        }
        let many: Vec<_> = (0..257)
            .map(|i| json!({"path": format!("f{i}"), "text": ""}))
            .collect();
        server
            .run_in_with(lang, "", json!({"files": many}))
            .await
            .assert_error(INVALID_REQUEST, "at most 256 files");
        server
            .run_in_with(lang, "", json!({"collect": ["../x"]}))
            .await
            .assert_error(INVALID_REQUEST, "\"../x\"");
    }
}

/// Past node's `scratch_mb` or `scratch_files` the run is
/// `resource_exhausted` and its code never runs (it would leave a mark).
#[tokio::test(flavor = "multi_thread")]
async fn node_quota_refuses_files_before_code_runs() {
    let server = Server::with_config("scratch_mb: 1\nscratch_files: 4\n").await;
    let id = server.keep_in("node", "return 1").await;
    let ran = "await iii.files.write('ran', 'yes'); return 1";
    let big = "x".repeat(1_100_000);
    let too_many: Vec<_> = (0..5)
        .map(|i| json!({"path": format!("d/f{i}"), "text": "x"}))
        .collect();
    for files in [json!([{"path": "big.txt", "text": big}]), json!(too_many)] {
        let payload = json!({"runtime_id": id, "code": ran, "files": files});
        server.call(RUN, payload).await.assert_error(
            RESOURCE_EXHAUSTED,
            "iii.files quota exceeded: 1 MiB and 4 files",
        );
        let listed = server
            .run_on(&id, "return await iii.files.list()")
            .await
            .ok()
            .clone();
        assert_eq!(
            listed["result"],
            json!([]),
            "nothing written, code not run: {listed}"
        );
    }
    // One-shot too.
    let files: Vec<_> = (0..4)
        .map(|i| json!({"path": format!("a/f{i}"), "text": "x"}))
        .collect();
    server
        .run_in_with("node", "return 1", json!({"files": files}))
        .await
        .assert_error(RESOURCE_EXHAUSTED, "do not fit");
}

/// Past python's `/work` quota (256 MiB, 20 000 entries) the run is
/// `resource_exhausted` and its code never runs.
#[tokio::test(flavor = "multi_thread")]
async fn python_quota_refuses_files_before_code_runs() {
    let server = Server::start().await;
    // A sparse file charged at its size: 255 MiB of the quota, no disk.
    let fill = "f = open('/work/hole', 'wb')\nf.seek((255 << 20) - 1)\nf.write(b'x')\nf.close()";
    let id = server.keep(fill).await;
    let ran = "open('/work/ran', 'w').write('yes')";
    let upload = json!([{"path": "in.bin", "text": "y".repeat(2 << 20)}]);
    server
        .call(RUN, json!({"runtime_id": id, "code": ran, "files": upload}))
        .await
        .assert_error(RESOURCE_EXHAUSTED, "/work quota exceeded");
    let check = "import os\nresult = sorted(os.listdir('/work'))";
    let body = server.run_on(&id, check).await.ok().clone();
    assert_eq!(
        body["result"],
        json!(["hole"]),
        "code not run, nothing written: {body}"
    );

    // Entries: fill to 19 990, then 20 files (and their directory) do not fit.
    let fill = "import os\nos.remove('/work/hole')\nfor i in range(19990): open(f'/work/e{i}', 'w').close()";
    let body = server
        .call(
            RUN,
            json!({"runtime_id": id, "code": fill, "timeout_ms": 30000}),
        )
        .await
        .ok()
        .clone();
    assert_eq!(body["exit_code"], 0, "{body}");
    let files: Vec<_> = (0..20)
        .map(|i| json!({"path": format!("d/f{i}"), "text": ""}))
        .collect();
    server
        .call(RUN, json!({"runtime_id": id, "code": ran, "files": files}))
        .await
        .assert_error(RESOURCE_EXHAUSTED, "20000 files");
    let body = server
        .run_on(
            &id,
            "import os\nresult = [os.path.exists('/work/ran'), os.path.exists('/work/d')]",
        )
        .await
        .ok()
        .clone();
    assert_eq!(body["result"], json!([false, false]), "{body}");
}

/// Past `max_collect_files` the list ends with the omission marker, naming
/// the cap and what was left out; a file past `max_collect_bytes` is
/// skipped, named in the marker, and the smaller files after it still come.
#[tokio::test(flavor = "multi_thread")]
async fn collect_caps_skip_or_end_and_the_marker_says_what() {
    for (config, kept, said) in [
        (
            "max_collect_files: 2\n",
            2,
            &["max_collect_files", "2 more files (60 bytes)"][..],
        ),
        (
            "max_collect_bytes: 100\n",
            2,
            &[
                "max_collect_bytes",
                "o/2.txt (30 bytes), o/3.txt (30 bytes) skipped",
            ][..],
        ),
    ] {
        let server = Server::with_config(config).await;
        for lang in LANGS {
            let code: String = (0..4)
                .map(|i| write_text(lang, &format!("o/{i}.txt"), &"z".repeat(30)))
                .collect();
            let body = server
                .run_in_with(lang, &code, json!({"collect": ["o/*.txt"]}))
                .await
                .ok()
                .clone();
            let files = body["files"].as_array().expect("files");
            assert_eq!(files.len(), kept + 1, "{lang} {config}: {body}");
            assert_eq!(unb64(&files[0]["base64"]), "z".repeat(30).as_bytes());
            let marker = &files[kept];
            assert_eq!(marker["path"], "", "{marker}");
            assert_eq!(marker["mime_type"], "text/plain");
            assert_eq!(marker["size"], 0);
            let text = marker["base64"].as_str().unwrap();
            for part in said {
                assert!(text.contains(part), "{text}");
            }
        }
    }
    // One large file first does not hide the small ones after it.
    let server = Server::with_config("max_collect_bytes: 200\n").await;
    for lang in LANGS {
        let code = format!(
            "{}{}{}",
            write_text(lang, "o/a-big.txt", &"b".repeat(400)),
            write_text(lang, "o/b.txt", "small"),
            write_text(lang, "o/c.txt", "small"),
        );
        let body = server
            .run_in_with(lang, &code, json!({"collect": ["o/*.txt"]}))
            .await
            .ok()
            .clone();
        let paths: Vec<&str> = body["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|file| file["path"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(paths, ["o/b.txt", "o/c.txt", ""], "{lang}: {body}");
        let marker = body["files"][2]["base64"].as_str().unwrap_or_default();
        assert!(
            marker.contains("o/a-big.txt (400 bytes) skipped"),
            "{marker}"
        );
    }
}

/// Measures a run that uploads a 1 MiB CSV and collects a 1 MiB file
/// against the same run without files, in both languages (figures in
/// docs/benchmark.md). Ignored: a measurement, not a check.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement: cargo test --release files_round_trip_cost -- --ignored --nocapture"]
#[allow(clippy::print_stdout, reason = "a measurement prints its figures")]
async fn files_round_trip_cost() {
    let server = Server::start().await;
    let csv: String = (0..32768)
        .map(|i| format!("{i:08},{:022}\n", i * 7))
        .collect();
    assert_eq!(csv.len(), 1 << 20);
    for lang in LANGS {
        let make = pick(
            lang,
            "data = 'x' * (1 << 20)\nopen('/work/out.csv', 'w').write(data)",
            "await iii.files.write('out.csv', 'x'.repeat(1 << 20));",
        );
        let with_files = format!(
            "{make}\n{}",
            read_text(lang, "in.csv")
                .replace("result = ", "_ = ")
                .replace("return ", "await ")
        );
        let rounds = 20;
        let mut timings = [0f64; 2];
        for (slot, files) in [(0, false), (1, true)] {
            let started = std::time::Instant::now();
            for _ in 0..rounds {
                let extra = if files {
                    json!({"files": [{"path": "in.csv", "text": csv}], "collect": ["out.csv"]})
                } else {
                    json!({})
                };
                let code = if files {
                    with_files.clone()
                } else {
                    make.to_string()
                };
                let body = server.run_in_with(lang, &code, extra).await.ok().clone();
                assert_eq!(body["exit_code"], 0, "{body}");
            }
            timings[slot] = started.elapsed().as_secs_f64() * 1000.0 / rounds as f64;
        }
        println!(
            "{lang}: without files {:.1} ms, with a 1 MiB CSV in and a 1 MiB file out {:.1} ms: {:.2}x",
            timings[0],
            timings[1],
            timings[1] / timings[0]
        );
    }
}
