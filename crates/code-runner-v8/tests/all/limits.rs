//! Limits: deadlines (busy or idle), abort, close, and the memory caps.
//!
//! The cases whose regression would abort the whole process (a heap or
//! ArrayBuffer bomb, unbounded recursion) run in a child process: the parent
//! test re-runs this test binary on the one ignored child test, so a
//! regression is one red test, not a dead test run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runner_core::{
    BindingNamespace, Bindings, Fault, Runtime, RuntimeOptions, TurnEnding, TurnOutcome,
};
use serde_json::json;

use crate::{exception, in_child, runtime, runtime_with, turn, value};

/// "Stopped on time" for a sub-second budget, generous for a busy machine.
const ON_TIME: Duration = Duration::from_secs(5);

async fn run_with_budget(
    rt: &Arc<dyn Runtime>,
    program: &str,
    budget_ms: u64,
    bindings: Bindings,
) -> (TurnOutcome, Duration) {
    let mut spec = turn(program);
    spec.timeout = Duration::from_millis(budget_ms);
    spec.bindings = bindings;
    let started = Instant::now();
    let out = rt.run(spec).await;
    (out, started.elapsed())
}

#[track_caller]
fn assert_timeout(out: &TurnOutcome, took: Duration, budget_ms: u64) {
    match &out.ending {
        TurnEnding::Faulted(Fault::Timeout { budget }) => {
            assert_eq!(budget.as_millis(), u128::from(budget_ms))
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(took < ON_TIME, "stopped after {took:?}");
}

/// A busy loop never yields: the watchdog must terminate it; the kept
/// runtime then answers its next turn with its globals intact.
#[tokio::test(flavor = "multi_thread")]
async fn busy_loop_times_out_and_the_runtime_goes_on() {
    let (rt, _dir) = runtime().await;
    value(
        &rt.run(turn("globalThis.kept = 'still here'; return 1"))
            .await,
    );
    let (out, took) = run_with_budget(&rt, "while (true) {}", 200, Bindings::none()).await;
    assert_timeout(&out, took, 200);
    assert_eq!(
        value(&rt.run(turn("return kept")).await),
        json!("still here")
    );
    let (out, took) = run_with_budget(
        &rt,
        "for (;;) { try { while (true) {} } catch {} }",
        200,
        Bindings::none(),
    )
    .await;
    assert_timeout(&out, took, 200);
    assert_eq!(value(&rt.run(turn("return 2 + 2")).await), json!(4));
    rt.close().await;
}

/// A turn awaiting a promise that never settles is idle, not busy: it ends
/// at its deadline all the same.
#[tokio::test(flavor = "multi_thread")]
async fn idle_turn_times_out() {
    let (rt, _dir) = runtime().await;
    let (out, took) =
        run_with_budget(&rt, "await new Promise(() => {})", 200, Bindings::none()).await;
    assert_timeout(&out, took, 200);
    let (out, took) = run_with_budget(
        &rt,
        "await new Promise((r) => setTimeout(r, 60000))",
        200,
        Bindings::none(),
    )
    .await;
    assert_timeout(&out, took, 200);
    assert_eq!(value(&rt.run(turn("return 'next'")).await), json!("next"));
    rt.close().await;
}

/// A binding call that never answers holds the turn only until its deadline.
#[tokio::test(flavor = "multi_thread")]
async fn binding_that_never_answers_times_out() {
    let (rt, _dir) = runtime().await;
    let tools = BindingNamespace::new("tools").function("hang", |_, _| std::future::pending());
    let bindings = Bindings::new(vec![tools]).unwrap();
    let (out, took) = run_with_budget(&rt, "await tools.hang({})", 300, bindings).await;
    assert_timeout(&out, took, 300);
    rt.close().await;
}

/// The abort signal stops a busy turn and an idle one, reported as aborted.
#[tokio::test(flavor = "multi_thread")]
async fn abort_stops_busy_and_idle_turns() {
    let (rt, _dir) = runtime().await;
    for program in ["while (true) {}", "await new Promise(() => {})"] {
        let spec = turn(program);
        let abort = spec.abort.clone();
        let fire = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            abort.abort();
        });
        let started = Instant::now();
        let out = rt.run(spec).await;
        fire.await.unwrap();
        assert!(
            matches!(out.ending, TurnEnding::Faulted(Fault::Aborted)),
            "{program}: {:?}",
            out.ending
        );
        assert!(started.elapsed() < ON_TIME);
    }
    assert_eq!(
        value(&rt.run(turn("return 'after abort'")).await),
        json!("after abort")
    );
    rt.close().await;
}

/// Closing a runtime stops its turn in flight, which answers aborted.
#[tokio::test(flavor = "multi_thread")]
async fn close_stops_a_turn_in_flight() {
    let (rt, _dir) = runtime().await;
    let running = {
        let rt = rt.clone();
        tokio::spawn(async move { rt.run(turn("while (true) {}")).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    rt.close().await;
    let out = running.await.unwrap();
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Aborted)),
        "{:?}",
        out.ending
    );
    assert!(started.elapsed() < ON_TIME);
    let out = rt.run(turn("return 1")).await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Aborted)),
        "{:?}",
        out.ending
    );
}

/// A stack overflow is the program's own RangeError, an ordinary response.
#[tokio::test(flavor = "multi_thread")]
async fn stack_overflow_is_a_range_error() {
    let (rt, _dir) = runtime().await;
    let out = rt.run(turn("const f = (n) => f(n + 1) + 1; f(0)")).await;
    assert!(exception(&out).starts_with("RangeError: Maximum call stack size exceeded"));
    assert_eq!(
        value(&rt.run(turn("return 'recovered'")).await),
        json!("recovered")
    );
    rt.close().await;
}

/// A turn that starts while the watchdog sleeps (nothing ran for longer than
/// it lingers) still has its deadline kept: the turn's start wakes it. In a
/// child process, so no other test keeps the watchdog awake.
#[test]
fn a_busy_loop_after_a_quiet_spell_times_out() {
    in_child("limits::child_busy_loop_after_a_quiet_spell");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by a_busy_loop_after_a_quiet_spell_times_out in a child process"]
async fn child_busy_loop_after_a_quiet_spell() {
    let (rt, _dir) = runtime().await;
    assert_eq!(value(&rt.run(turn("return 1")).await), json!(1));
    // Three times as long as the watchdog lingers after the last turn.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let busy = run_with_budget(&rt, "while (true) {}", 200, Bindings::none());
    let (out, took) = tokio::time::timeout(Duration::from_secs(30), busy)
        .await
        .expect("the watchdog never stopped a busy loop that started while it slept");
    assert_timeout(&out, took, 200);
    assert_eq!(value(&rt.run(turn("return 2 + 2")).await), json!(4));
    rt.close().await;
}

/// A heap bomb is `resource_exhausted` naming the limit, not a process abort;
/// the runtime answers its next turn from a fresh isolate.
#[test]
fn heap_bomb_is_resource_exhausted_not_an_abort() {
    in_child("limits::child_heap_bomb");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by heap_bomb_is_resource_exhausted_not_an_abort in a child process"]
async fn child_heap_bomb() {
    let (rt, _dir) = runtime_with(RuntimeOptions {
        heap_mb: 64,
        ..RuntimeOptions::default()
    })
    .await;
    value(&rt.run(turn("globalThis.before = 1; return 1")).await);
    let out = rt
        .run(turn(
            "const a = []; for (;;) a.push(new Array(1e6).fill(1))",
        ))
        .await;
    match &out.ending {
        TurnEnding::Faulted(Fault::ResourceExhausted(message)) => {
            assert_eq!(message, "heap limit 64 MiB exceeded")
        }
        other => panic!("{other:?}"),
    }
    let out = rt
        .run(turn(
            "const s = []; for (;;) s.push('x'.repeat(1e5) + Math.random())",
        ))
        .await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::ResourceExhausted(_))),
        "{:?}",
        out.ending
    );
    assert_eq!(
        value(&rt.run(turn("return typeof before")).await),
        json!("undefined")
    );
    rt.close().await;
}

/// ArrayBuffers past `external_mb` fail in the guest (catchable), and a turn
/// that dies of it is `resource_exhausted`.
#[test]
fn array_buffer_bomb_is_resource_exhausted_not_an_abort() {
    in_child("limits::child_array_buffer_bomb");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by array_buffer_bomb_is_resource_exhausted_not_an_abort in a child process"]
async fn child_array_buffer_bomb() {
    let (rt, _dir) = runtime_with(RuntimeOptions {
        external_mb: 32,
        ..RuntimeOptions::default()
    })
    .await;
    let out = rt
        .run(turn(
            "const a = []; for (;;) a.push(new ArrayBuffer(4 << 20))",
        ))
        .await;
    match &out.ending {
        TurnEnding::Faulted(Fault::ResourceExhausted(message)) => assert!(
            message.starts_with("external memory limit 32 MiB exceeded"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    let caught = "try { new Uint8Array(100 << 20) } catch (e) { return e.name }";
    assert_eq!(value(&rt.run(turn(caught)).await), json!("RangeError"));
    let freed = "const a = []; for (let i = 0; i < 6; i++) a.push(new ArrayBuffer(4 << 20)); return a.length";
    assert_eq!(value(&rt.run(turn(freed)).await), json!(6));
    // Buffers the host fills for the guest (file reads, TextEncoder) are
    // charged too: 64 × 4 MiB would be 256 MiB of host memory otherwise.
    let ns = code_runner_core::BindingNamespace::new("iii");
    let bindings = Bindings::new(vec![ns]).unwrap();
    for program in [
        "await iii.files.write('big', 'x'.repeat(4 << 20)); const kept = []; \
         for (let i = 0; i < 64; i++) kept.push(await iii.files.read('big')); return 'unbounded'",
        "const text = 'y'.repeat(4 << 20); const kept = []; \
         for (let i = 0; i < 64; i++) kept.push(new TextEncoder().encode(text)); return 'unbounded'",
    ] {
        let (out, _) = run_with_budget(&rt, program, 20_000, bindings.clone()).await;
        assert!(
            matches!(&out.ending, TurnEnding::Faulted(Fault::ResourceExhausted(m)) if m.starts_with("external memory limit 32 MiB")),
            "{program}: {:?}",
            out.ending
        );
    }
    rt.close().await;
}

/// Unbounded recursion, in guest code and in what the host walks (a deeply
/// nested result, a deeply nested console argument), never overflows the
/// host's stack.
#[test]
fn deep_recursion_never_overflows_the_host() {
    in_child("limits::child_deep_recursion");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by deep_recursion_never_overflows_the_host in a child process"]
async fn child_deep_recursion() {
    let (rt, _dir) = runtime().await;
    let out = rt.run(turn("function f() { return f() } f()")).await;
    assert!(exception(&out).starts_with("RangeError"));
    let nested = "let v = []; for (let i = 0; i < 1e6; i++) v = [v]; globalThis.deep = v; return v";
    let out = rt.run(turn(nested)).await;
    assert!(
        matches!(
            out.ending,
            TurnEnding::Exited {
                exit_code: 0,
                completion: code_runner_core::Completion::NotJson(_),
                ..
            }
        ),
        "{:?}",
        out.ending
    );
    let out = rt
        .run(turn(
            "console.log(deep); return JSON.stringify(deep).length",
        ))
        .await;
    assert!(
        matches!(
            out.ending,
            TurnEnding::Exited {
                exit_code: 0 | 1,
                ..
            }
        ),
        "{:?}",
        out.ending
    );
    let out = rt
        .run(turn("const o = {}; o.toJSON = () => o; return o"))
        .await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
        "{:?}",
        out.ending
    );
    assert_eq!(value(&rt.run(turn("return 'alive'")).await), json!("alive"));
    rt.close().await;
}
