//! A sandbox process that dies takes only its own runtimes with it.

use std::time::Duration;

use serde_json::json;

use super::{isolation, processes, sandboxed, sandboxed_in, segfault, wait_for_processes};
use crate::helpers::lang::{LANGS, pick};
use crate::helpers::{EXPIRED, RUN};

const ENGINE: &str = "code-runner::engine";

/// SIGSEGV to the process running a turn: the turn answers
/// `code-runner::engine` naming the signal, a kept runtime idling in the
/// same process answers `expired`, a kept runtime in the other process
/// keeps its state, a replacement starts, and new runs are served.
#[tokio::test(flavor = "multi_thread")]
async fn a_segfaulting_sandbox_process_fails_only_its_own_runtimes() {
    for lang in LANGS {
        let server = sandboxed("").await;
        let before = wait_for_processes(&server, 2).await;
        let keep = pick(lang, "x = 41", "globalThis.x = 41");
        let mut kept = Vec::new();
        for _ in 0..2 {
            let body = server
                .run_in_with(lang, keep, json!({"keep": true}))
                .await
                .ok()
                .clone();
            kept.push(body["runtime_id"].as_str().unwrap().to_string());
        }
        let placed = processes(&server).await;
        assert!(
            placed.iter().all(|(_, n)| *n == 1),
            "one kept runtime per process (least loaded): {placed:?}"
        );
        let spin = pick(lang, "while True: pass", "while (true) {}");
        let running = {
            let server_url = server.url.clone();
            let payload = json!({"lang": lang, "code": spin, "timeout_ms": 30_000});
            tokio::spawn(async move {
                crate::helpers::post_json(&crate::helpers::client(), &server_url, RUN, &payload)
                    .await
            })
        };
        let mut victim = None;
        for _ in 0..400 {
            if let Some((pid, _)) = processes(&server).await.into_iter().find(|(_, n)| *n == 2) {
                victim = Some(pid);
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let victim = victim.expect("the spinning run is placed");
        tokio::time::sleep(Duration::from_millis(200)).await;
        segfault(victim).await;
        let answer = running.await.unwrap();
        answer.assert_error(ENGINE, "sandbox process died: signal 11");

        let survivors: Vec<_> = before
            .iter()
            .map(|(pid, _)| *pid)
            .filter(|p| *p != victim)
            .collect();
        assert_eq!(survivors.len(), 1);
        let read = pick(lang, "result = x + 1", "return x + 1");
        let mut answers = Vec::new();
        for id in &kept {
            answers.push(server.run_on(id, read).await);
        }
        let expired = answers
            .iter()
            .filter(|a| a.error_code() == Some(EXPIRED))
            .count();
        let alive = answers
            .iter()
            .filter(|a| a.status.is_success() && a.body["result"] == json!(42))
            .count();
        assert_eq!((expired, alive), (1, 1), "{answers:?}");
        for answer in &answers {
            if answer.error_code() == Some(EXPIRED) {
                let again = server.run_on(&kept[0], read).await;
                assert!(again.status.is_success() || again.error_code() == Some(EXPIRED));
            }
        }

        let mut replaced = false;
        for _ in 0..600 {
            let health = isolation(&server).await;
            if health["replaced"].as_u64() >= Some(1) && processes(&server).await.len() == 2 {
                replaced = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(
            replaced,
            "a replacement started: {}",
            isolation(&server).await
        );
        let fresh = pick(lang, "result = 2 + 2", "return 2 + 2");
        let body = server.run_in(lang, fresh).await.ok().clone();
        assert_eq!(body["result"], json!(4), "{lang}: the server keeps serving");
    }
}

/// A kept runtime idling in a process that is killed answers `expired` on
/// its next call, and its slot is free again (the worker let go of it).
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_kept_runtime_of_a_killed_process_answers_expired() {
    let server = sandboxed_in(1, "max_runtimes: 2\n").await;
    let pids = wait_for_processes(&server, 1).await;
    let body = server
        .run_in_with("node", "globalThis.x = 1", json!({"keep": true}))
        .await
        .ok()
        .clone();
    let id = body["runtime_id"].as_str().unwrap().to_string();
    segfault(pids[0].0).await;
    let mut replaced = Vec::new();
    for _ in 0..600 {
        replaced = processes(&server).await;
        if replaced.len() == 1 && replaced[0].0 != pids[0].0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_ne!(replaced[0].0, pids[0].0, "a new process");
    server
        .run_on(&id, "return x")
        .await
        .assert_error(EXPIRED, "");
    server
        .run_on(&id, "return x")
        .await
        .assert_error(EXPIRED, "");
    for _ in 0..2 {
        let body = server
            .run_in_with("python", "x = 1", json!({"keep": true}))
            .await
            .ok()
            .clone();
        assert!(
            body["runtime_id"].is_string(),
            "the dead runtime's slot is free: {body}"
        );
    }
}

/// Issue 29, item 9: warm (pre-booted) node runtimes that lived in a
/// process killed with SIGKILL are never handed out: every one-shot run
/// after the crash is served, on a live warm runtime or a fresh one.
#[tokio::test(flavor = "multi_thread")]
async fn one_shots_after_a_killed_process_never_get_its_warm_runtimes() {
    let server = crate::helpers::Server::with_config(
        "isolation: process\nsandbox_processes: 2\nwarm_pool: 4\n",
    )
    .await;
    // The node pool fills at start, placed on the least loaded process: two in each.
    let mut placed = Vec::new();
    for _ in 0..1200 {
        placed = processes(&server).await;
        if placed.len() == 2 && placed.iter().map(|(_, n)| n).sum::<u64>() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (victim, warm) = placed
        .iter()
        .copied()
        .max_by_key(|(_, n)| *n)
        .expect("two sandbox processes");
    assert!(warm >= 1, "the pool is full: {placed:?}");
    super::signal(victim, 9);
    // The worker has seen the death once /healthz no longer lists the pid.
    for _ in 0..600 {
        if processes(&server)
            .await
            .iter()
            .all(|(pid, _)| *pid != victim)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        processes(&server)
            .await
            .iter()
            .all(|(pid, _)| *pid != victim),
        "the killed process is seen dead"
    );
    for round in 0..8 {
        let answer = server.run_in("node", "return 2 + 2").await;
        assert!(
            answer.status.is_success() && answer.body["result"] == json!(4),
            "one-shot {round} after the crash: {answer:?}"
        );
    }
}

/// Issue 29, item 9, the last window: a warm node runtime's process dies
/// after the pool handed it out but before the turn's code began (the
/// process is stopped, so the turn's frame waits unread in its socket,
/// then killed). The one-shot never ran, so it runs again on a fresh
/// runtime and answers, instead of `code-runner::expired`. Whether a round
/// hits that window (the pool's runtime must have finished its warm-up
/// before the process is stopped) shows in the answer's duration: a run
/// that waited for the kill took it; the rounds go on until one does.
#[tokio::test(flavor = "multi_thread")]
async fn a_one_shot_whose_process_dies_before_its_code_runs_runs_again() {
    let server = crate::helpers::Server::with_config(
        "isolation: process\nsandbox_processes: 2\nwarm_pool: 1\n",
    )
    .await;
    let mut hit = false;
    for round in 0..10 {
        let mut victim = None;
        for _ in 0..1200 {
            let placed = processes(&server).await;
            if placed.len() == 2 && placed.iter().map(|(_, n)| n).sum::<u64>() == 1 {
                victim = placed.iter().find(|(_, n)| *n == 1).map(|(pid, _)| *pid);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let victim = victim.expect("the warm runtime is placed");
        // Time for its warm-up turn (a round without it is only a miss).
        tokio::time::sleep(Duration::from_millis(1000 + 500 * round)).await;
        super::signal(victim, SIGSTOP);
        let (answer, ()) = tokio::join!(server.run_in("node", "return 2 + 2"), async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            super::signal(victim, 9);
        });
        assert!(
            answer.status.is_success() && answer.body["result"] == json!(4),
            "round {round}: the one-shot ran again elsewhere: {answer:?}"
        );
        if answer.body["duration_ms"].as_u64() >= Some(400) {
            hit = true;
            break;
        }
        wait_for_processes(&server, 2).await;
    }
    assert!(hit, "no round took the stopped process's warm runtime");
}

/// The other side of that retry: a one-shot whose code had begun (it made
/// a request the test's loopback server saw) is never run again when its
/// process dies; it answers `code-runner::engine`, and the server saw its
/// request once.
#[tokio::test(flavor = "multi_thread")]
async fn a_one_shot_whose_code_began_is_not_run_again() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().route(
        "/hit",
        axum::routing::get(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { "ok" }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let server = sandboxed(&format!("egress_allow: [\"{addr}\"]\n")).await;
    wait_for_processes(&server, 2).await;
    for lang in LANGS {
        hits.store(0, Ordering::SeqCst);
        let code = pick(
            lang,
            &format!(
                "import urllib.request\nurllib.request.urlopen('http://{addr}/hit').read()\nwhile True: pass"
            ),
            &format!("await fetch('http://{addr}/hit'); while (true) {{}}"),
        )
        .to_string();
        let (answer, ()) = tokio::join!(
            server.run_in_with(lang, &code, json!({"timeout_ms": 30_000})),
            async {
                crate::helpers::wait_until("the guest's request", Duration::from_secs(60), || {
                    hits.load(Ordering::SeqCst) == 1
                })
                .await;
                let placed = processes(&server).await;
                let (pid, _) = placed.iter().find(|(_, n)| *n == 1).copied().unwrap();
                super::signal(pid, 9);
            }
        );
        answer.assert_error(ENGINE, "sandbox process died: signal 9");
        assert_eq!(hits.load(Ordering::SeqCst), 1, "{lang}: run once");
        wait_for_processes(&server, 2).await;
    }
}

/// SIGSTOP's number on Linux.
const SIGSTOP: i32 = 19;

/// Issue 44, item 8: a runtime asked for just as its process dies is made
/// in another one. The victim is stopped, so the spawns placed on it wait
/// unanswered in its socket; then it is killed: every one of the one-shots
/// still answers (none fails `sandbox process died: signal 9`).
#[tokio::test(flavor = "multi_thread")]
async fn one_shots_spawned_as_their_process_dies_are_spawned_elsewhere() {
    let server = crate::helpers::Server::with_config(
        "isolation: process\nsandbox_processes: 2\nwarm_pool: 0\n",
    )
    .await;
    wait_for_processes(&server, 2).await;
    let placed = processes(&server).await;
    let victim = placed[0].0;
    super::signal(victim, SIGSTOP);
    let runs = (0..12).map(|i| {
        let server = &server;
        async move {
            let lang = if i % 2 == 0 { "python" } else { "node" };
            let code = if lang == "python" {
                "result = 2 + 2"
            } else {
                "return 2 + 2"
            };
            (lang, server.run_in(lang, code).await)
        }
    });
    let (answers, ()) = tokio::join!(futures::future::join_all(runs), async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        super::signal(victim, 9);
    });
    for (lang, answer) in answers {
        assert!(
            answer.status.is_success() && answer.body["result"] == json!(4),
            "{lang}: {answer:?}"
        );
    }
}
