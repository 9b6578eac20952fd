//! The end of a kept runtime, in both languages: teardown and its answer,
//! the errors of an id that is gone (or never was), idle reaping, and the
//! runtime directories runs leave (none) and kept runtimes hold (one each).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::lang::{LANGS, mark, pick, returning};
use crate::helpers::{
    EXPIRED, INVALID_REQUEST, RUNTIME_NOT_FOUND, Server, TEARDOWN, TIMEOUT, wait_until,
};

/// An id never issued is `runtime_not_found`, and the error does not echo the
/// full id (it is a capability). (No runtime, so no language.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_runtime_id_is_runtime_not_found() {
    let server = Server::start().await;
    let id = "rt_thisIdWasNeverIssuedByTheWorker00";
    let answer = server.run_on(id, "result = 1").await;
    answer.assert_error(RUNTIME_NOT_FOUND, "");
    assert!(!answer.error_message().contains(id), "{}", answer.body);
    server
        .teardown(id)
        .await
        .assert_error(RUNTIME_NOT_FOUND, "");
    server.assert_still_serves().await;
}

/// Teardown answers its documented shape; the id is then `expired`, for runs
/// and for a second teardown alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_down_runtime_answers_expired() {
    let server = Server::start().await;
    for lang in LANGS {
        let id = server
            .keep_in(lang, pick(lang, "x = 1", "globalThis.x = 1"))
            .await;
        let answer = server.teardown(&id).await;
        assert_eq!(
            answer.ok(),
            &json!({"torn_down": true, "unregistered": [], "runtime_id": id})
        );
        let answer = server.run_on(&id, &returning(lang, "x")).await;
        answer.assert_error(EXPIRED, "");
        assert!(!answer.error_message().contains(&id), "{}", answer.body);
        server.teardown(&id).await.assert_error(EXPIRED, "");
    }
    server.assert_still_serves().await;
}

/// Teardown takes exactly one address: both or neither is a malformed request;
/// a namespace with nothing behind it is `runtime_not_found`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_needs_exactly_one_of_runtime_id_or_namespace() {
    let server = Server::start().await;
    for lang in LANGS {
        let id = server
            .keep_in(lang, pick(lang, "x = 1", "globalThis.x = 1"))
            .await;
        let both = server
            .call(TEARDOWN, json!({"runtime_id": id, "namespace": "app"}))
            .await;
        both.assert_error(INVALID_REQUEST, "exactly one");
        let neither = server.call(TEARDOWN, json!({})).await;
        neither.assert_error(INVALID_REQUEST, "exactly one");
        let nothing_behind = server.call(TEARDOWN, json!({"namespace": "app"})).await;
        nothing_behind.assert_error(RUNTIME_NOT_FOUND, "");
        // The refused teardowns destroyed nothing.
        assert_eq!(
            server.run_on(&id, &returning(lang, "x")).await.ok()["result"],
            1,
            "{lang}"
        );
    }
    server.assert_still_serves().await;
}

/// Idle runtimes are reaped after `idle_ttl_secs`, their files removed, and
/// their id then answers `expired`. (One runtime per server: the sweep
/// records a reaped id as expired only once it has closed the runtimes
/// reaped before it, so a second id reaped in the same sweep answers
/// `runtime_not_found` meanwhile.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_runtime_is_reaped_and_answers_expired() {
    for lang in LANGS {
        let server = Server::with_config("idle_ttl_secs: 1").await;
        let code = format!(
            "{}{}",
            pick(lang, "x = 1\n", "globalThis.x = 1;\n"),
            mark(lang, "kept")
        );
        let id = server.keep_in(lang, &code).await;
        assert_eq!(server.dirs_holding("kept").len(), 1, "{lang}");
        let started = Instant::now();
        loop {
            let health = server.get("/healthz").await;
            if health.ok()["runtimes"]["kept"] == 0 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "{lang}: not reaped: {}",
                health.body
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "{lang}: reaped before its ttl"
        );
        server
            .run_on(&id, &returning(lang, "x"))
            .await
            .assert_error(EXPIRED, "");
        wait_until(
            "the reaped runtime's files to go",
            Duration::from_secs(10),
            || server.dirs_holding("kept").is_empty(),
        )
        .await;
        server.assert_still_serves().await;
    }
}

/// Two kept runtimes share neither files nor globals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_runtimes_cannot_see_each_others_files_or_globals() {
    let server = Server::start().await;
    let node_secret =
        "globalThis.secret = 'only mine'; await iii.files.write('secret.txt', secret)";
    let node_probe =
        "return { files: (await iii.files.list()).sort(), sees_secret: 'secret' in globalThis }";
    for lang in LANGS {
        let a = server
            .keep_in(
                lang,
                pick(
                    lang,
                    include_str!("../../fixtures/isolation_secret.py"),
                    node_secret,
                ),
            )
            .await;
        let b = server.keep_in(lang, pick(lang, "pass", "")).await;
        let probe = pick(
            lang,
            include_str!("../../fixtures/isolation_probe.py"),
            node_probe,
        );
        let seen_by_b = server.run_on(&b, probe).await;
        assert_eq!(
            seen_by_b.ok()["result"],
            json!({"files": [], "sees_secret": false}),
            "{lang}"
        );
        let seen_by_a = server.run_on(&a, probe).await;
        assert_eq!(
            seen_by_a.ok()["result"],
            json!({"files": ["secret.txt"], "sees_secret": true}),
            "{lang}"
        );
    }
    server.assert_still_serves().await;
}

/// One-shot runs, whatever their ending, leave no directory behind; a kept
/// runtime holds exactly one until teardown. (Each run marks its directory
/// so it can be told from pre-booted interpreters' empty ones.) A
/// `keep: true` run that fails is not kept and returns no id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_runs_leave_nothing_in_the_runtimes_dir() {
    let server = Server::start().await;
    for lang in LANGS {
        let write = pick(
            lang,
            "open('/work/f', 'w').write('x')\n",
            "await iii.files.write('f', 'x');\n",
        );
        let [succeeds, fails, spins] = pick(
            lang,
            ["result = 1", "raise ValueError", "while True: pass"],
            ["return 1", "throw new Error()", "while (true) {}"],
        );
        server
            .run_in(lang, &format!("{write}{succeeds}"))
            .await
            .ok();
        server.run_in(lang, &format!("{write}{fails}")).await.ok();
        server
            .run_in_with(lang, &format!("{write}{spins}"), json!({"timeout_ms": 200}))
            .await
            .assert_error(TIMEOUT, "");
        let failed_keep = server
            .run_in_with(lang, &format!("{write}{fails}"), json!({"keep": true}))
            .await;
        let body = failed_keep.ok();
        assert_eq!(body["exit_code"], 1, "{lang}");
        assert!(
            body.as_object().unwrap().get("runtime_id").is_none(),
            "{lang}: a failed keep run is not kept: {body}"
        );
        assert_eq!(server.dirs_holding("f"), Vec::<PathBuf>::new(), "{lang}");
        let id = server.keep_in(lang, &mark(lang, "kept")).await;
        assert_eq!(server.dirs_holding("kept").len(), 1, "{lang}");
        server.teardown(&id).await.ok();
        assert_eq!(server.dirs_holding("kept"), Vec::<PathBuf>::new(), "{lang}");
        let health = server.get("/healthz").await;
        assert_eq!(health.ok()["runtimes"]["live"], 0, "{}", health.body);
    }
    server.assert_still_serves().await;
}
