//! Files in and out of a run (issue 31): `files` written before the code
//! runs (python's `/work`, node's `iii.files` directory), `collect` globs
//! answered as `files`, over real HTTP on real engines, in both languages.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{RUN, Server};

mod limits;
mod links;
mod posix;

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(crate) fn unb64(text: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text.as_str().expect("base64 text"))
        .expect("base64")
}

/// A program reading text file `path` (relative to the root) as its result.
pub(crate) fn read_text(lang: &str, path: &str) -> String {
    pick(
        lang,
        format!("result = open('/work/{path}').read()"),
        format!("return await iii.files.readText('{path}')"),
    )
}

/// A statement writing `text` to `path` (relative to the root).
pub(crate) fn write_text(lang: &str, path: &str, text: &str) -> String {
    let makedirs = match path.rsplit_once('/') {
        Some((dir, _)) => format!("import os\nos.makedirs('/work/{dir}', exist_ok=True)\n"),
        None => String::new(),
    };
    pick(
        lang,
        format!("{makedirs}open('/work/{path}', 'w').write({text:?})\n"),
        format!("await iii.files.write('{path}', {text:?});\n"),
    )
}

/// Uploaded files, nested and binary, are there when the code runs, and
/// what the code wrote comes back by glob, sorted, byte-identical.
#[tokio::test(flavor = "multi_thread")]
async fn files_in_are_read_and_files_out_are_collected() {
    let server = Server::start().await;
    let binary: Vec<u8> = (0..=255u8).rev().collect();
    for lang in LANGS {
        let copy = pick(
            lang,
            "import os, shutil\nos.makedirs('/work/out/deep', exist_ok=True)\nshutil.copy('/work/bin/data.bin', '/work/out/deep/copy.bin')\nrows = open('/work/data/in.csv').read().splitlines()\nopen('/work/out/count.csv', 'w').write(f'rows,{len(rows)}\\n')\nopen('/work/out/note.txt', 'w').write('skip')\nresult = rows[1]",
            "const bytes = await iii.files.read('bin/data.bin');\nawait iii.files.write('out/deep/copy.bin', bytes);\nconst rows = (await iii.files.readText('data/in.csv')).split('\\n').filter(Boolean);\nawait iii.files.write('out/count.csv', `rows,${rows.length}\\n`);\nawait iii.files.write('out/note.txt', 'skip');\nreturn rows[1]",
        );
        let body = server
            .run_in_with(
                lang,
                copy,
                json!({
                    "files": [
                        {"path": "./data/in.csv", "text": "a,b\n1,2\n3,4\n"},
                        {"path": "bin/data.bin", "base64": b64(&binary)},
                    ],
                    "collect": ["out/*.csv", "**/*.bin"],
                }),
            )
            .await
            .ok()
            .clone();
        assert_eq!(body["result"], json!("1,2"), "{lang}: {body}");
        let files = body["files"].as_array().expect("files");
        let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
        assert_eq!(
            paths,
            ["bin/data.bin", "out/count.csv", "out/deep/copy.bin"],
            "{lang}: `*` stays in out/, `**` crosses directories, sorted: {body}"
        );
        assert_eq!(unb64(&files[1]["base64"]), b"rows,3\n");
        assert_eq!(files[1]["mime_type"], "text/csv");
        assert_eq!(files[1]["size"], 7);
        assert_eq!(unb64(&files[2]["base64"]), binary, "{lang}: byte-identical");
        assert_eq!(files[2]["mime_type"], "application/octet-stream");
        assert_eq!(files[2]["size"], 256);
    }
}

/// A kept runtime's second turn sees the files its first turn uploaded,
/// and node lists nested paths as files.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_runtime_keeps_its_uploaded_files() {
    let server = Server::start().await;
    for lang in LANGS {
        let files = json!({"files": [{"path": "data/in.txt", "text": "kept"}]});
        let id = server
            .keep_in_with(lang, pick(lang, "result = 1", "return 1"), files)
            .await;
        let body = server
            .run_on(&id, &read_text(lang, "data/in.txt"))
            .await
            .ok()
            .clone();
        assert_eq!(body["result"], json!("kept"), "{lang}: {body}");
        if lang == "node" {
            let listed = server
                .run_on(&id, "return await iii.files.list()")
                .await
                .ok()
                .clone();
            assert_eq!(listed["result"], json!(["data/in.txt"]), "{listed}");
        }
        // A later turn's upload overwrites, and is collected with what the turn wrote.
        let payload = json!({
            "runtime_id": id,
            "code": write_text(lang, "out/r.md", "# r"),
            "files": [{"path": "data/in.txt", "text": "second"}],
            "collect": ["data/*", "out/r.md"],
        });
        let body = server.call(RUN, payload).await.ok().clone();
        let files = body["files"].as_array().expect("files");
        assert_eq!(unb64(&files[0]["base64"]), b"second", "{lang}: {body}");
        assert_eq!(files[1]["path"], "out/r.md");
        assert_eq!(files[1]["mime_type"], "text/markdown");
    }
}

/// A failing script still answers what it wrote before it failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_script_returns_what_it_wrote() {
    let server = Server::start().await;
    for lang in LANGS {
        let code = format!(
            "{}{}",
            write_text(lang, "partial.json", "{\"done\": 1}"),
            pick(lang, "raise ValueError('late')", "throw new Error('late')")
        );
        let body = server
            .run_in_with(lang, &code, json!({"collect": ["*.json"]}))
            .await
            .ok()
            .clone();
        assert_eq!(body["exit_code"], 1, "{lang}: {body}");
        assert_eq!(body["files"][0]["path"], "partial.json", "{lang}: {body}");
        assert_eq!(body["files"][0]["mime_type"], "application/json");
        assert_eq!(unb64(&body["files"][0]["base64"]), b"{\"done\": 1}");
        let none = server
            .run_in_with(
                lang,
                pick(lang, "pass", "return"),
                json!({"collect": ["*.json"]}),
            )
            .await
            .ok()
            .clone();
        assert!(
            none.get("files").is_none(),
            "nothing matched, no key: {none}"
        );
    }
}

/// A symlink planted in the runtime's directory, to a file or a directory
/// outside it, is neither followed nor collected.
#[tokio::test(flavor = "multi_thread")]
async fn symlinks_out_of_the_root_are_not_followed() {
    let server = Server::start().await;
    let outside = crate::helpers::tempdir();
    std::fs::write(outside.path().join("secret.txt"), b"secret").unwrap();
    for lang in LANGS {
        let anchor = format!("anchor-{lang}.txt");
        let id = server.keep_in(lang, &write_text(lang, &anchor, "a")).await;
        let dirs = server.dirs_holding(&anchor);
        assert_eq!(dirs.len(), 1, "{lang}: {dirs:?}");
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dirs[0].join("leak.txt"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), dirs[0].join("dir")).unwrap();
        let payload =
            json!({"runtime_id": id, "code": pick(lang, "pass", "return"), "collect": ["**"]});
        let body = server.call(RUN, payload).await.ok().clone();
        let files = body["files"].as_array().expect("files");
        let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
        assert_eq!(paths, [anchor.as_str()], "{lang}: {body}");
        assert!(!body.to_string().contains(&b64(b"secret")), "{body}");
        // Nor does an upload go through one.
        let payload =
            json!({"runtime_id": id, "code": "", "files": [{"path": "dir/planted", "text": "x"}]});
        server
            .call(RUN, payload)
            .await
            .assert_error(crate::helpers::INVALID_REQUEST, "in the way");
        assert!(!outside.path().join("planted").exists());
    }
}

/// One run per language through a sandbox process: the files go in over
/// the sandbox protocol and come back from the host directory.
#[tokio::test(flavor = "multi_thread")]
async fn files_round_trip_through_a_sandbox_process() {
    let server = crate::isolation::sandboxed("").await;
    for lang in LANGS {
        let code = format!(
            "{}{}",
            write_text(lang, "out/copy.txt", "copied"),
            read_text(lang, "in/data.txt")
        );
        let body = server
            .run_in_with(
                lang,
                &code,
                json!({"files": [{"path": "in/data.txt", "text": "uploaded"}], "collect": ["out/**"]}),
            )
            .await
            .ok()
            .clone();
        assert_eq!(body["result"], json!("uploaded"), "{lang}: {body}");
        assert_eq!(body["files"][0]["path"], "out/copy.txt", "{lang}: {body}");
        assert_eq!(unb64(&body["files"][0]["base64"]), b"copied");
    }
    // Past the node quota, before any code runs, through the process too.
    let big = "x".repeat(9 << 20);
    server
        .run_in_with(
            "node",
            "return 1",
            json!({"files": [{"path": "big", "text": big}]}),
        )
        .await
        .assert_error(crate::helpers::RESOURCE_EXHAUSTED, "iii.files quota");
}

/// Both python interpreters take files and answer collected ones, and
/// each charges them to its own `/work` quota (a kept runtime whose turn
/// timed out takes its files in a fresh instance on the same directory).
#[tokio::test(flavor = "multi_thread")]
async fn both_python_interpreters_take_and_collect_files() {
    for config in crate::helpers::lang::PYTHON_INTERPRETERS {
        let server = Server::with_config(config).await;
        let code = format!(
            "{}{}",
            write_text("python", "o/x.txt", "out"),
            read_text("python", "i.txt")
        );
        let body = server
            .run_with(
                &code,
                json!({"files": [{"path": "i.txt", "text": "in"}], "collect": ["o/*"]}),
            )
            .await
            .ok()
            .clone();
        assert_eq!(body["result"], json!("in"), "{config}: {body}");
        assert_eq!(
            unb64(&body["files"][0]["base64"]),
            b"out",
            "{config}: {body}"
        );
        let id = server.keep("x = 1").await;
        server
            .call(
                RUN,
                json!({"runtime_id": id, "code": "while True: pass", "timeout_ms": 300}),
            )
            .await
            .assert_error(crate::helpers::TIMEOUT, "budget");
        let payload = json!({"runtime_id": id, "code": read_text("python", "after.txt"), "files": [{"path": "after.txt", "text": "fresh"}]});
        let body = server.call(RUN, payload).await.ok().clone();
        assert_eq!(body["result"], json!("fresh"), "{config}: {body}");
    }
}
