//! The turn ledger: a kept runtime's state made again by replay in a fresh
//! isolate (real V8 both times), with recorded answers, clocks, timers and
//! random numbers; divergence, spoiling and the CPU cap refused by name.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use code_runner_core::{
    BindingNamespace, Bindings, Engine, LedgerOptions, Runtime, RuntimeOptions, SnapshotSections,
};
use serde_json::{Value, json};

use super::{engine, turn, value};

fn options(reseed: bool) -> LedgerOptions {
    LedgerOptions {
        max_bytes: 64 << 20,
        max_replay_ms: 20_000,
        reseed,
    }
}

/// A namespace whose `next` answers a host counter: a replay that called
/// the host again would move it.
fn counter(calls: &Arc<AtomicU64>) -> Bindings {
    let calls = calls.clone();
    let ns = BindingNamespace::new("iii")
        .function("next", move |args, _| {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(json!({"n": n, "echo": args})) }
        })
        .error_class("IIIError", "member");
    Bindings::new(vec![ns]).unwrap()
}

async fn run(rt: &Arc<dyn Runtime>, bindings: &Bindings, program: &str) -> Value {
    let mut spec = turn(program);
    spec.bindings = bindings.clone();
    value(&rt.run(spec).await)
}

/// Twenty turns of state (closures, classes, Maps, typed arrays, a module
/// imported from iii.files, binding calls, timers, clocks and random draws).
const TURNS: [&str; 20] = [
    "globalThis.log = []; return 1",
    "class Point { constructor(x, y) { this.x = x; this.y = y } norm() { return Math.hypot(this.x, this.y) } }; globalThis.Point = Point; return 2",
    "globalThis.p = new Point(3, 4); return p.norm()",
    "let n = 0; globalThis.inc = () => ++n; inc(); inc(); return inc()",
    "globalThis.m = new Map([['a', 1]]); m.set('b', [1, 2, 3]); return m.size",
    "globalThis.bytes = new Float64Array(8).map((_, i) => i * 1.5); return bytes[7]",
    "const a = await iii.next({k: 1}); log.push(a.n); return a.n",
    "const [x, y] = await Promise.all([iii.next('x'), iii.next('y')]); log.push(x.n, y.n); return x.n + y.n",
    "iii.files.write('lib.mjs', 'export const K = 41; export function twice(v) { return v * 2 }'); return 'written'",
    "const lib = await import('./lib.mjs'); globalThis.twice = lib.twice; return lib.K + 1",
    "globalThis.r1 = Math.random(); return r1 < 1",
    "globalThis.t0 = Date.now(); globalThis.d0 = new Date().getTime(); return t0 > 0",
    "globalThis.pn = performance.now(); return pn >= 0",
    "await new Promise(r => setTimeout(r, 30)); log.push('slept'); return log.length",
    "const won = await Promise.race([iii.next('race').then(() => 'call'), new Promise(r => setTimeout(() => r('timer'), 2000))]); log.push(won); return won",
    "let seen = []; await new Promise(r => { setTimeout(() => seen.push('b'), 20); setTimeout(() => { seen.push('a'); r() }, 5); }); await new Promise(r => setTimeout(r, 30)); globalThis.order = seen.join(''); return order",
    "globalThis.big = new Uint8Array(4096).fill(7); return big.length",
    "globalThis.rs = [Math.random(), Math.random()]; return rs.length",
    "try { await iii.next(undefined, 1) } catch (e) { log.push('caught') } return twice(inc())",
    "globalThis.summary = () => JSON.stringify({log, p: p.norm(), m: [...m], b: Array.from(bytes), k: twice(21), n: inc(), r1, rs, t0, d0, pn, order, big: big.reduce((a, b) => a + b, 0)}); return 20",
];

async fn session(calls: &Arc<AtomicU64>) -> (Arc<dyn Runtime>, tempfile::TempDir, Bindings) {
    let dir = tempfile::tempdir().unwrap();
    let rt = engine()
        .spawn(RuntimeOptions {
            work_dir: dir.path().join("files"),
            ..RuntimeOptions::default()
        })
        .await
        .unwrap();
    rt.record(options(false)).await;
    let bindings = counter(calls);
    for (i, program) in TURNS.iter().enumerate() {
        let mut spec = turn(program);
        spec.bindings = bindings.clone();
        let outcome = rt.run(spec).await;
        assert!(
            matches!(
                outcome.ending,
                code_runner_core::TurnEnding::Exited { exit_code: 0, .. }
            ),
            "turn {i} failed: {:?} {}",
            outcome.ending,
            outcome.stderr.render()
        );
    }
    (rt, dir, bindings)
}

async fn restore(
    sections: SnapshotSections,
    reseed: bool,
) -> Result<(Arc<dyn Runtime>, tempfile::TempDir), code_runner_core::RunnerError> {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        work_dir: dir.path().join("files"),
        ledger: Some(options(reseed)),
        ..RuntimeOptions::default()
    };
    engine()
        .restore(options, sections)
        .await
        .map(|rt| (rt, dir))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twenty_turn_session_is_replayed_into_a_fresh_isolate() {
    let calls = Arc::new(AtomicU64::new(0));
    let (rt, _dir, bindings) = session(&calls).await;
    let sections = rt.snapshot().await.unwrap();
    let before = run(&rt, &bindings, "return summary()").await;
    let host_calls = calls.load(Ordering::SeqCst);

    // The same session, moved: the same state, the same random stream, the
    // host not called again, the module and the files there.
    let (moved, _moved_dir) = restore(sections.clone(), false).await.unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        host_calls,
        "the replay called the host"
    );
    let after = run(&moved, &bindings, "return summary()").await;
    assert_eq!(before, after);
    let draws = "return [Math.random(), Math.random()]";
    assert_eq!(
        run(&rt, &bindings, draws).await,
        run(&moved, &bindings, draws).await
    );
    let more = "const a = await iii.next('after'); return [a.n, twice(2), (await iii.files.readText('lib.mjs')).length]";
    let live = run(&moved, &bindings, more).await;
    assert_eq!(live[0], json!(host_calls + 1), "{live}");
    assert_eq!(live[1], json!(4));
    // Time goes on after a replay: performance.now() does not go back.
    let pn = run(
        &moved,
        &bindings,
        "return performance.now() >= pn && Date.now() >= t0",
    )
    .await;
    assert_eq!(pn, json!(true));

    // A fork: the state before is identical, its random numbers differ
    // after; a copy restored without reseeding, at the same point of the
    // stream, draws the session's.
    let (fork, _fork_dir) = restore(sections.clone(), true).await.unwrap();
    let (twin, _twin_dir) = restore(sections, false).await.unwrap();
    assert_eq!(run(&fork, &bindings, "return summary()").await, before);
    assert_eq!(run(&twin, &bindings, "return summary()").await, before);
    let twin_draws = run(&twin, &bindings, draws).await;
    assert_ne!(run(&fork, &bindings, draws).await, twin_draws);
    twin.close().await;

    // The moved runtime records on: its own snapshot replays too.
    let again = moved.snapshot().await.unwrap();
    let now = run(&moved, &bindings, "return summary()").await;
    let (third, _third_dir) = restore(again, false).await.unwrap();
    assert_eq!(run(&third, &bindings, "return summary()").await, now);
    for runtime in [rt, moved, fork, third] {
        runtime.close().await;
    }
}

/// The ledger as JSON, to change.
fn book(sections: &SnapshotSections) -> Value {
    serde_json::from_slice(&sections[0].1).unwrap()
}

fn with_book(book: &Value) -> SnapshotSections {
    vec![("ledger".into(), serde_json::to_vec(book).unwrap())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_that_goes_otherwise_is_refused_as_diverged() {
    let calls = Arc::new(AtomicU64::new(0));
    let (rt, _dir, _bindings) = session(&calls).await;
    let sections = rt.snapshot().await.unwrap();
    rt.close().await;
    let original = book(&sections);
    let entries = original["entries"].as_array().unwrap();
    let call_turn = entries
        .iter()
        .position(|e| {
            e["turn"]["task"]["program"]
                .as_str()
                .is_some_and(|p| p.contains("{k: 1}"))
        })
        .unwrap();

    // The code now passes another argument.
    let mut changed = original.clone();
    changed["entries"][call_turn]["turn"]["task"]["program"] =
        json!("const a = await iii.next({k: 2}); log.push(a.n); return a.n");
    let err = restore(with_book(&changed), false).await.err().unwrap();
    assert!(
        err.message.contains("restore_diverged") && err.message.contains("another argument"),
        "{}",
        err.message
    );

    // The code now makes no call at all.
    let mut changed = original.clone();
    changed["entries"][call_turn]["turn"]["task"]["program"] = json!("log.push(1); return 1");
    let err = restore(with_book(&changed), false).await.err().unwrap();
    assert!(err.message.contains("restore_diverged"), "{}", err.message);

    // A recorded ending that the replay does not reach.
    let mut changed = original.clone();
    changed["entries"][1]["turn"]["ending"] = json!("exit 1");
    let err = restore(with_book(&changed), false).await.err().unwrap();
    assert!(
        err.message.contains("restore_diverged") && err.message.contains("exit 0"),
        "{}",
        err.message
    );

    // Not a ledger at all.
    let err = restore(vec![("ledger".into(), b"{\"version\": 9".to_vec())], false)
        .await
        .err()
        .unwrap();
    assert!(
        err.message.contains("cannot be restored"),
        "{}",
        err.message
    );
    assert_eq!(calls.load(Ordering::SeqCst), 5, "no replay called the host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_ledger_cannot_hold_is_refused_by_name() {
    // A turn stopped by its timeout.
    let (rt, _dir) = super::runtime().await;
    rt.record(options(false)).await;
    value(&rt.run(turn("globalThis.a = 1; return 1")).await);
    let mut spec = turn("while (true) {}");
    spec.timeout = Duration::from_millis(200);
    rt.run(spec).await;
    let err = rt.snapshot().await.err().unwrap();
    assert!(
        err.message.contains("snapshot_unsupported") && err.message.contains("timeout"),
        "{}",
        err.message
    );
    rt.close().await;

    // Turns past max_replay_ms of CPU.
    let (rt, _dir) = super::runtime().await;
    rt.record(LedgerOptions {
        max_replay_ms: 1,
        ..options(false)
    })
    .await;
    value(
        &rt.run(turn(
            "let x = 0; for (let i = 0; i < 3e7; i++) x += i; return x > 0",
        ))
        .await,
    );
    let err = rt.snapshot().await.err().unwrap();
    assert!(err.message.contains("max_replay_ms"), "{}", err.message);
    rt.close().await;

    // A ledger past its bytes.
    let (rt, _dir) = super::runtime().await;
    rt.record(LedgerOptions {
        max_bytes: 4096,
        ..options(false)
    })
    .await;
    value(
        &rt.run(turn(&format!("return '{}'.length", "x".repeat(8192))))
            .await,
    );
    let err = rt.snapshot().await.err().unwrap();
    assert!(err.message.contains("max_snapshot_mb"), "{}", err.message);
    rt.close().await;

    // A runtime that keeps no ledger.
    let (rt, _dir) = super::runtime().await;
    value(&rt.run(turn("return 1")).await);
    let err = rt.snapshot().await.err().unwrap();
    assert!(err.message.contains("no turn ledger"), "{}", err.message);
    // A one-shot keeps V8's own Date and Math.random.
    assert_eq!(
        value(&rt.run(turn("return [Date.toString().includes('native code'), Math.random.toString().includes('native code')]")).await),
        json!([true, true])
    );
    rt.close().await;
}
