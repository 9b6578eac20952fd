//! A hostile guest's resources over real HTTP: python's descriptors and
//! `/work` quota, and results at the nesting limit in both languages, each
//! leaving other tenants and the guest's own kept runtime serving.

use serde_json::json;

use crate::helpers::Server;
use crate::helpers::lang::{LANGS, pick, returning};

/// A kept runtime opening files in a loop stops at its descriptor budget
/// (the guest sees `ENOMEM` in the lean interpreter, `EMFILE` in the data
/// flavour's preview-1 layer), and the worker keeps serving everyone else.
/// (Python's: a node guest has no descriptors; `iii.files` is bounded by
/// the fault matrix's `files` rows.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_hoarding_files_stops_at_its_budget() {
    let server = Server::start().await;
    let id = server.keep("open('/work/f', 'w').close()\nheld = []").await;
    let answer = server
        .run_on(
            &id,
            "import errno\ntry:\n    for _ in range(20_000):\n        held.append(open('/work/f'))\n\
             except OSError as err:\n    result = [len(held), err.errno in (errno.ENOMEM, errno.EMFILE)]",
        )
        .await;
    let body = answer.ok();
    assert!(
        body["result"][0].as_u64().unwrap_or(u64::MAX) < 1000,
        "{body}"
    );
    assert_eq!(body["result"][1], json!(true), "{body}");
    assert_eq!(server.run("result = 2 + 2").await.ok()["result"], 4);
    assert!(server.get("/healthz").await.status.is_success());
    server.teardown(&id).await.ok();
    server.assert_still_serves().await;
}

/// A one-shot run writing through a descriptor after unlinking its file gets
/// `EDQUOT` at the quota, and uncaught it is `resource_exhausted`.
/// (Python's descriptors, as above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_after_unlink_meet_the_quota() {
    let server = Server::start().await;
    let answer = server
        .run_with(
            "import os\nfd = os.open('/work/big', os.O_WRONLY | os.O_CREAT)\nos.unlink('/work/big')\n\
             chunk = b'x' * (1 << 20)\nwritten = 0\nwhile written < 400 << 20:\n    written += os.write(fd, chunk)",
            json!({"timeout_ms": 30_000}),
        )
        .await;
    answer.assert_error("code-runner::resource_exhausted", "/work");
    server.assert_still_serves().await;
}

/// A result nested deeper than the limit is a normal response with a null
/// result, one within it comes back, and the kept runtime keeps its
/// interpreter (and globals); so does python's `SystemExit(2**63)`, an exit
/// status past any integer's range (python's: node has no exit status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_and_huge_exit_codes_are_responses_that_keep_the_interpreter() {
    let server = Server::start().await;
    for lang in LANGS {
        let id = server
            .keep_in(lang, pick(lang, "x = 41", "globalThis.x = 41"))
            .await;
        let nest = |depth: usize| {
            pick(
                lang,
                format!("v = []\nfor _ in range({depth}):\n    v = [v]\nresult = v"),
                format!("let v = []; for (let i = 0; i < {depth}; i++) v = [v]; return v"),
            )
        };
        let nested = server.run_on(&id, &nest(150)).await;
        let body = nested.ok();
        assert_eq!(body["exit_code"], 0, "{lang}: {body}");
        assert_eq!(body["result"], json!(null), "{lang}: {body}");
        if lang == "python" {
            let exit = server.run_on(&id, "raise SystemExit(2**63)").await;
            let body = exit.ok();
            assert_eq!(body["exit_code"], 1, "{body}");
            assert!(
                body["stderr"]
                    .as_str()
                    .unwrap_or("")
                    .contains("9223372036854775808"),
                "{body}"
            );
        }
        let within = server.run_on(&id, &nest(99)).await;
        assert_eq!(within.ok()["exit_code"], 0, "{lang}");
        assert!(within.ok()["result"].is_array(), "{lang}: {}", within.body);
        assert_eq!(
            server.run_on(&id, &returning(lang, "x + 1")).await.ok()["result"],
            42,
            "{lang}"
        );
        server.teardown(&id).await.ok();
    }
}
