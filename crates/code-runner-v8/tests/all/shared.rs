//! Calls that share one runtime (a published function's handler runs every
//! call on its namespace runtime): one caller's deadline or payload may not
//! decide another's fate. And answers and payloads are measured before they
//! enter the isolate.

use std::time::{Duration, Instant};

use code_runner_core::{
    BindingNamespace, Bindings, Fault, RuntimeOptions, Task, TurnEnding, TurnOutcome, TurnSpec,
};
use serde_json::{Value, json};

use crate::{exception, runtime, runtime_with, task, turn, value};

const HANDLER: &str = r#"
export async function handler(p) {
  if (p.work) {
    // Legitimate compute in slices, yielding between them.
    const end = Date.now() + p.work;
    let n = 0;
    while (Date.now() < end) {
      const slice = Date.now() + 20;
      while (Date.now() < slice) n++;
      await new Promise((r) => setTimeout(r, 0));
    }
    return "done";
  }
  if (p.spin) { for (;;) {} }
  await new Promise(() => {});
}
"#;

fn invoke(payload: Value, budget: Duration) -> TurnSpec {
    let mut spec = task(Task::Invoke {
        key: "app::h".into(),
        payload,
    });
    spec.timeout = budget;
    spec
}

async fn defined(
    options: RuntimeOptions,
) -> (
    std::sync::Arc<dyn code_runner_core::Runtime>,
    tempfile::TempDir,
) {
    let (rt, dir) = runtime_with(options).await;
    let out = rt
        .run(task(Task::Define {
            key: "app::h".into(),
            source: HANDLER.into(),
        }))
        .await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
        "{:?}",
        out.ending
    );
    (rt, dir)
}

#[track_caller]
fn assert_timeout(out: &TurnOutcome) {
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Timeout { .. })),
        "{:?}",
        out.ending
    );
}

/// A caller with a 10 ms budget killed another caller's 3 s call: the
/// watchdog terminated whatever JavaScript ran at the earliest deadline.
/// Now a deadline stops only its own turn's JavaScript (an idle turn past
/// its deadline is answered as soon as the running JavaScript yields), and
/// a busy turn past its own deadline is still stopped.
#[tokio::test(flavor = "multi_thread")]
async fn one_callers_deadline_stops_only_its_own_call() {
    let (rt, _dir) = defined(RuntimeOptions::default()).await;
    let innocent = rt.run(invoke(json!({"work": 800}), Duration::from_secs(8)));
    let attacker = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut outs = Vec::new();
        for _ in 0..5 {
            outs.push(
                rt.run(invoke(json!({"idle": true}), Duration::from_millis(10)))
                    .await,
            );
        }
        outs
    };
    let started = Instant::now();
    let (innocent, attacks) = tokio::join!(innocent, attacker);
    assert_eq!(value(&innocent), json!("done"));
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
    for out in &attacks {
        assert_timeout(out);
    }
    // A call that spins past its own deadline is stopped, beside a working one.
    let innocent = rt.run(invoke(json!({"work": 600}), Duration::from_secs(8)));
    let spinner = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        rt.run(invoke(json!({"spin": true}), Duration::from_millis(100)))
            .await
    };
    let (_innocent, spun) = tokio::join!(innocent, spinner);
    assert_timeout(&spun);
    assert_eq!(
        value(
            &rt.run(invoke(json!({"work": 1}), Duration::from_secs(5)))
                .await
        ),
        json!("done")
    );
    rt.close().await;
}

/// Twelve calls carrying 15 MB payloads condemned the isolate and failed an
/// innocent call with resource_exhausted. A payload is measured before it
/// enters the isolate: one too large, or one more than the calls in flight
/// may carry together, is refused on its own.
#[tokio::test(flavor = "multi_thread")]
async fn payloads_are_measured_before_they_enter_the_isolate() {
    let (rt, _dir) = defined(RuntimeOptions {
        heap_mb: 128,
        ..RuntimeOptions::default()
    })
    .await;
    let innocent = rt.run(invoke(json!({"work": 1500}), Duration::from_secs(20)));
    let floods = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let big = "x".repeat(15 << 20);
        let calls: Vec<_> = (0..12)
            .map(|_| {
                rt.run(invoke(
                    json!({"idle": true, "pad": big}),
                    Duration::from_secs(2),
                ))
            })
            .collect();
        futures_join(calls).await
    };
    let (innocent, floods) = tokio::join!(innocent, floods);
    assert_eq!(value(&innocent), json!("done"));
    for out in &floods {
        match &out.ending {
            TurnEnding::Faulted(Fault::ResourceExhausted(message)) => {
                assert!(message.contains("payload"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }
    // Within the limits, several calls carry their payloads together.
    let mid = "y".repeat(3 << 20);
    let calls: Vec<_> = (0..2)
        .map(|_| {
            rt.run(invoke(
                json!({"work": 50, "pad": mid}),
                Duration::from_secs(10),
            ))
        })
        .collect();
    for out in futures_join(calls).await {
        assert_eq!(value(&out), json!("done"));
    }
    rt.close().await;
}

async fn futures_join<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut handles = Vec::new();
    for f in futures {
        handles.push(f);
    }
    let mut out = Vec::new();
    // Polled together: each is a turn on the same runtime.
    let pinned: Vec<_> = handles.into_iter().map(Box::pin).collect();
    let mut pending: Vec<_> = pinned.into_iter().map(Some).collect();
    let mut results: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (i, slot) in pending.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        results[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    for r in results {
        out.push(r.expect("every call answered"));
    }
    out
}

/// A binding's answer became one V8 string unchecked (three concurrent
/// `engine::functions::info` answers aborted the server). An answer larger
/// than the runtime may take in is the guest's catchable error.
#[tokio::test(flavor = "multi_thread")]
async fn binding_answers_are_measured_before_they_enter_the_isolate() {
    let (rt, _dir) = runtime_with(RuntimeOptions {
        heap_mb: 128,
        ..RuntimeOptions::default()
    })
    .await;
    let ns = BindingNamespace::new("big")
        .function("get", |args, _| async move {
            let n = args.as_u64().unwrap_or(0) as usize;
            Ok(json!("z".repeat(n)))
        })
        .error_class("BigError", "member");
    let mut spec = turn(
        r#"
        const answers = await Promise.allSettled([big.get(12e6), big.get(12e6), big.get(12e6), big.get(1000)]);
        return answers.map((a) => a.status === "fulfilled" ? a.value.length : a.reason.code);
        "#,
    );
    spec.bindings = Bindings::new(vec![ns]).unwrap();
    let out = rt.run(spec).await;
    assert_eq!(
        value(&out),
        json!([
            "code-runner::resource_exhausted",
            "code-runner::resource_exhausted",
            "code-runner::resource_exhausted",
            1000
        ])
    );
    assert_eq!(value(&rt.run(turn("return 1")).await), json!(1));
    let thrown = exception(&rt.run(turn("throw new Error('still here')")).await);
    assert!(thrown.contains("still here"));
    let (plain, _d) = runtime().await;
    assert_eq!(value(&plain.run(turn("return 2")).await), json!(2));
    rt.close().await;
    plain.close().await;
}
