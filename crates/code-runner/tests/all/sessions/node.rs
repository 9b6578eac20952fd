//! JavaScript sessions that outlive their worker (issue 48), through the
//! real binary, HTTP and V8: a twenty-turn node session
//! (closures, classes, Maps, typed arrays, a module imported from
//! `iii.files`, calls to a published function, timers, clocks, random
//! numbers) forks with its state and fresh random numbers, and survives a
//! SIGTERM and a restart under its id; a ledger changed and sealed again
//! with the worker's own key is refused as diverged; a runtime whose ledger
//! cannot be replayed (a timeout, past `max_replay_ms`) says why and stays
//! live instead of hibernating; a TypeScript session hibernates too. The
//! MCP SDK's fork is in `clients-py/test_sessions.py`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{ServeProcess, Server, client, post_json};

/// The session's turns; `summary()` reads its whole state without changing it.
const TURNS: [&str; 20] = [
    "globalThis.log = []; return 1",
    "class Point { constructor(x, y) { this.x = x; this.y = y } norm() { return Math.hypot(this.x, this.y) } }; globalThis.Point = Point; return 2",
    "globalThis.p = new Point(3, 4); return p.norm()",
    "let n = 0; globalThis.inc = () => ++n; globalThis.peek = () => n; inc(); inc(); return inc()",
    "globalThis.m = new Map([['a', 1]]); m.set('b', [1, 2, 3]); return m.size",
    "globalThis.bytes = new Float64Array(8).map((_, i) => i * 1.5); return bytes[7]",
    "const a = await iii.trigger({ function_id: 't::next', payload: { k: 1 } }); log.push(a.n); return a.n",
    "const [x, y] = await Promise.all([iii.trigger({ function_id: 't::next', payload: 'x' }), iii.trigger({ function_id: 't::next', payload: 'y' })]); log.push(x.n + y.n); return x.n + y.n",
    "await iii.files.write('lib.mjs', 'export const K = 41; export function twice(v) { return v * 2 }'); return 'written'",
    "const lib = await import('./lib.mjs'); globalThis.twice = lib.twice; return lib.K + 1",
    "globalThis.r1 = Math.random(); return r1 < 1",
    "globalThis.t0 = Date.now(); globalThis.d0 = new Date().getTime(); return t0 > 0",
    "globalThis.pn = performance.now(); return pn >= 0",
    "await new Promise(r => setTimeout(r, 20)); log.push('slept'); return log.length",
    "const won = await Promise.race([iii.trigger({ function_id: 't::next', payload: 'race' }).then(() => 'call'), new Promise(r => setTimeout(() => r('timer'), 20000))]); log.push(won); return won",
    "globalThis.big = new Uint8Array(4096).fill(7); return big.length",
    "globalThis.rs = [Math.random(), Math.random()]; return rs.length",
    "globalThis.weak = new WeakMap([[p, 'point']]); globalThis.sym = Symbol('s'); return weak.get(p)",
    "return twice(inc())",
    "globalThis.summary = () => JSON.stringify({log, p: p.norm(), m: [...m], b: Array.from(bytes), k: twice(21), n: peek(), r1, rs, t0, d0, pn, big: big.reduce((a, b) => a + b, 0), weak: weak.get(p), sym: sym.toString()}); return 20",
];

/// The function the session calls: a counter in a runtime of its own.
const NEXT: &str = "let n = 0;\nexport function handler(payload) { n += 1; return { n, payload } }";

async fn run(http: &reqwest::Client, url: &str, id: &str, code: &str) -> Value {
    let answer = post_json(
        http,
        url,
        "code-runner::run",
        &json!({"runtime_id": id, "code": code, "timeout_ms": 30000}),
    )
    .await;
    let body = answer.ok().clone();
    assert_eq!(body["exit_code"], 0, "{code}: {body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_session_forks_and_survives_a_restart() {
    let temp = crate::helpers::tempdir();
    let data = temp.path().join("data");
    let config = temp.path().join("config.yaml");
    std::fs::write(&config, "idle_ttl_secs: 900\n").unwrap();
    let mut first = ServeProcess::spawn(&data, Some(&config));
    let http = client();
    let registered = post_json(
        &http,
        &first.url,
        "code-runner::register_function",
        &json!({"function_id": "t::next", "lang": "node", "source": NEXT}),
    )
    .await;
    assert_eq!(registered.ok()["registered"], true, "{}", registered.body);
    let kept = post_json(
        &http,
        &first.url,
        "code-runner::run",
        &json!({"lang": "node", "keep": true, "code": TURNS[0]}),
    )
    .await;
    let id = kept.ok()["runtime_id"].as_str().unwrap().to_string();
    for code in &TURNS[1..] {
        run(&http, &first.url, &id, code).await;
    }
    let before = run(&http, &first.url, &id, "return summary()").await["result"].clone();
    assert!(
        before.as_str().unwrap().contains("\"slept\",\"call\"]"),
        "{before}"
    );

    // A fork: its state is the session's, its random numbers its own.
    let taken = post_json(
        &http,
        &first.url,
        "code-runner::snapshot",
        &json!({"runtime_id": id}),
    )
    .await;
    let snapshot_id = taken.ok()["snapshot_id"].as_str().unwrap().to_string();
    let restored = post_json(
        &http,
        &first.url,
        "code-runner::restore",
        &json!({"snapshot_id": snapshot_id}),
    )
    .await;
    let fork = restored.ok()["runtime_id"].as_str().unwrap().to_string();
    assert_eq!(
        run(&http, &first.url, &fork, "return summary()").await["result"],
        before
    );
    let draws = "return [Math.random(), Math.random()]";
    let (a, b) = (
        run(&http, &first.url, &id, draws).await["result"].clone(),
        run(&http, &first.url, &fork, draws).await["result"].clone(),
    );
    assert_ne!(a, b);
    // The fork goes its own way; the session does not see it.
    run(
        &http,
        &first.url,
        &fork,
        "inc(); m.set('fork', true); return 1",
    )
    .await;

    // A ledger changed and sealed again with this worker's own key: its
    // replay goes another way, and the restore says so.
    diverged(&http, &first.url, &data, &snapshot_id).await;

    // SIGTERM: the session is hibernated for shutdown; a new worker on the
    // same data directory serves it under its id, with its state.
    let status = tokio::task::spawn_blocking(move || {
        let status = first.terminate(Duration::from_secs(120));
        (status, first.log())
    })
    .await
    .unwrap();
    assert!(status.0.success(), "exit {:?}:\n{}", status.0, status.1);
    assert!(status.1.contains("hibernated for shutdown"), "{}", status.1);
    assert!(!status.1.contains(&id), "the id is never logged in full");
    let second = ServeProcess::spawn(&data, Some(&config));
    let woken = run(&http, &second.url, &id, "return summary()").await;
    assert_eq!(woken["result"], before, "{woken}");
    assert_eq!(woken["restored"], true, "{woken}");
    let live = run(&http, &second.url, &id, "const a = await iii.trigger({ function_id: 't::next', payload: 'after' }); return [typeof a.n, inc(), performance.now() >= pn]").await;
    assert_eq!(live["result"], json!(["number", 5, true]), "{live}");
}

/// Restores a copy of `snapshot_id` whose ledger runs another program in its
/// fourth turn: refused as `restore_diverged`; the worker serves on.
async fn diverged(http: &reqwest::Client, url: &str, data: &std::path::Path, snapshot_id: &str) {
    let path = data.join("snapshots").join(snapshot_id);
    let whole = std::fs::read(&path).unwrap();
    let keys = code_runner_snapshot::Keys::load_or_create(data).unwrap();
    let bounds = code_runner_snapshot::Bounds {
        max_stored: 1 << 30,
        max_raw: 1 << 30,
    };
    let header = code_runner_snapshot::header_of(&whole, &keys, bounds).unwrap();
    assert_eq!(header.engine, "node-ledger");
    let mut contents =
        code_runner_snapshot::open(&whole, &keys, &header.engine, &header.image, bounds).unwrap();
    let ledger = contents
        .sections
        .iter_mut()
        .find(|(name, _)| name == "ledger")
        .unwrap();
    let mut book: Value = serde_json::from_slice(&ledger.1).unwrap();
    let turn = book["entries"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| {
            e["turn"]["task"]["program"]
                .as_str()
                .is_some_and(|p| p.contains("k: 1"))
        })
        .unwrap();
    book["entries"][turn]["turn"]["task"]["program"] = json!(
        "const a = await iii.trigger({ function_id: 't::next', payload: { k: 2 } }); log.push(a.n); return a.n"
    );
    ledger.1 = serde_json::to_vec(&book).unwrap();
    let changed = code_runner_snapshot::seal(&contents, keys.signing()).unwrap();
    // Filed as a snapshot of its own, then restored.
    let restore_copy = |bytes: Vec<u8>| async move {
        let copy = "sn_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
        std::fs::write(data.join("snapshots").join(copy), &bytes).unwrap();
        post_json(
            http,
            url,
            "code-runner::restore",
            &json!({"snapshot_id": copy}),
        )
        .await
    };
    let answer = restore_copy(changed).await;
    answer.assert_error("code-runner::invalid_request", "restore_diverged");
    assert!(
        answer.error_message().contains("another argument"),
        "{}",
        answer.body
    );
    // A byte of the ledger changed without the key: refused before anything is parsed.
    let mut tampered = whole.clone();
    let at = tampered.len() - 40;
    tampered[at] ^= 0x01;
    restore_copy(tampered)
        .await
        .assert_error("code-runner::invalid_request", "forged");
}

/// A node session hibernates when idle and wakes by id; one whose ledger
/// cannot be replayed (a turn stopped by its timeout) stays live and says
/// why when asked for a snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_node_sessions_hibernate_unless_their_ledger_is_spoiled() {
    let server = Server::with_config("hibernate_after_secs: 1\n").await;
    let id = server
        .keep_in(
            "node",
            "globalThis.k = new Map([['a', Math.random()]]); return 1",
        )
        .await;
    let typed = server
        .keep_in(
            "typescript",
            "const n: number = 40; (globalThis as any).t = { n }; return n",
        )
        .await;
    let spoiled = server.keep_in("node", "globalThis.k = 5; return 1").await;
    let timed_out = server
        .call(
            "code-runner::run",
            json!({"runtime_id": spoiled, "code": "while (true) {}", "timeout_ms": 300}),
        )
        .await;
    timed_out.assert_error("code-runner::timeout", "");
    let body = woken(&server, &id, "return [k.size, k.get('a') < 1]").await;
    assert_eq!(body["result"], json!([1, true]), "{body}");
    let body = woken(
        &server,
        &typed,
        "const m: number = (globalThis as any).t.n; return m + 2",
    )
    .await;
    assert_eq!(body["result"], 42, "{body}");

    assert!(!super::hibernate::stored(&server.data_dir, &spoiled).exists());
    let answer = server
        .call("code-runner::snapshot", json!({"runtime_id": spoiled}))
        .await;
    answer.assert_error("code-runner::invalid_request", "stopped mid-way");
    let answer = server.run_on(&spoiled, "return k").await;
    assert_eq!(answer.ok()["result"], 5, "{}", answer.body);
    assert!(answer.ok().get("restored").is_none(), "{}", answer.body);

    // The metrics count both wakes, and the woken sessions' runs by their language.
    let text = crate::helpers::client()
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("code_runner_sessions_woken_total 2\n"),
        "{text}"
    );
    assert!(!text.contains("lang=\"unknown\""), "{text}");
}

/// Waits until `id` hibernates, then runs `code` on it: the answer, which says it was woken.
async fn woken(server: &Server, id: &str, code: &str) -> Value {
    super::hibernate::asleep(&server.data_dir, id).await;
    let body = server.run_on(id, code).await.ok().clone();
    assert_eq!(body["restored"], true, "{body}");
    body
}

/// Past `max_replay_ms` (here 1 ms) a node runtime cannot be snapshotted,
/// and says so; it runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_session_past_max_replay_ms_is_not_snapshotted() {
    let server = Server::with_config("max_replay_ms: 1\n").await;
    let id = server
        .keep_in(
            "node",
            "let x = 0; for (let i = 0; i < 5e7; i++) x += i; globalThis.x = x; return 1",
        )
        .await;
    let answer = server
        .call("code-runner::snapshot", json!({"runtime_id": id}))
        .await;
    answer.assert_error("code-runner::invalid_request", "max_replay_ms");
    let answer = server.run_on(&id, "return x > 0").await;
    assert_eq!(answer.ok()["result"], true, "{}", answer.body);
}
