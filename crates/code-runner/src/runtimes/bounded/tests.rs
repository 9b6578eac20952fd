//! The bound on a turn, with runtimes that never answer: alone, and in a
//! real worker (a kept id expires, a namespace loses its functions, the
//! slot is free).

use super::*;
use code_runner_core::{AbortSignal, Bindings};
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

/// What "at once" means on a loaded machine.
const AT_ONCE: Duration = Duration::from_millis(500);

/// A runtime whose turns never answer, as an engine stuck in a loop.
struct Stuck {
    closed: Arc<AtomicUsize>,
}

impl Runtime for Stuck {
    fn lang(&self) -> Lang {
        Lang::Node
    }
    fn run(&self, _turn: TurnSpec) -> BoxFuture<'_, TurnOutcome> {
        Box::pin(std::future::pending())
    }
    fn close(&self) -> BoxFuture<'_, ()> {
        self.closed.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::pending())
    }
}

fn turn(timeout: Duration, abort: &AbortSignal) -> TurnSpec {
    TurnSpec {
        live: None,
        task: Task::program("for (;;) {}"),
        timeout,
        bindings: Bindings::default(),
        max_stream_bytes: None,
        abort: abort.clone(),
    }
}

/// A turn that never answers is a timeout at its deadline plus the
/// grace; its signal fired, the runtime is given up once (closed in
/// the background, the hook told), and every later turn and close
/// answer at once.
#[tokio::test]
async fn a_turn_that_never_answers_is_a_timeout_and_loses_its_runtime() {
    let closed = Arc::new(AtomicUsize::new(0));
    let lost = Arc::new(AtomicUsize::new(0));
    let told = lost.clone();
    let runtime = Bounded::new(
        Arc::new(Stuck {
            closed: closed.clone(),
        }),
        move || {
            told.fetch_add(1, Ordering::SeqCst);
        },
    );
    let abort = AbortSignal::new();
    let started = Instant::now();
    let answer = runtime.run(turn(Duration::from_millis(100), &abort)).await;
    assert_eq!(
        answer.ending,
        TurnEnding::Faulted(Fault::Timeout {
            budget: Duration::from_millis(100)
        })
    );
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(100) + TURN_GRACE, "{took:?}");
    assert!(
        took < Duration::from_millis(100) + TURN_GRACE + AT_ONCE,
        "{took:?}"
    );
    assert!(abort.is_aborted(), "the stuck turn's signal fired");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(lost.load(Ordering::SeqCst), 1);
    assert_eq!(closed.load(Ordering::SeqCst), 1, "closed in the background");
    let again = Instant::now();
    let later = runtime
        .run(turn(Duration::from_secs(5), &AbortSignal::new()))
        .await;
    assert_eq!(later.ending, TurnEnding::Faulted(Fault::Aborted));
    runtime.close().await;
    assert!(again.elapsed() < AT_ONCE, "nothing waited");
    assert_eq!(lost.load(Ordering::SeqCst), 1);
}

/// A close that never finishes is waited for at most the grace.
#[tokio::test]
async fn a_close_that_never_finishes_is_left_behind() {
    let closed = Arc::new(AtomicUsize::new(0));
    let runtime = Bounded::new(Arc::new(Stuck { closed }), || {});
    let started = Instant::now();
    runtime.close().await;
    let took = started.elapsed();
    assert!(
        took >= TURN_GRACE && took < TURN_GRACE + AT_ONCE,
        "{took:?}"
    );
    let again = Instant::now();
    runtime.close().await;
    assert!(again.elapsed() < AT_ONCE);
}

/// Helpers bound any turn the same way.
#[tokio::test]
async fn run_within_gives_up_and_fires_the_signal() {
    let runtime = Stuck {
        closed: Arc::default(),
    };
    let abort = AbortSignal::new();
    assert!(
        run_within(&runtime, turn(Duration::from_millis(10), &abort))
            .await
            .is_none()
    );
    assert!(abort.is_aborted());
}

mod in_a_worker {
    use super::Stuck;
    use crate::bus::catalog::Owner;
    use crate::bus::names::RUN;
    use crate::bus::naming::FunctionId;
    use crate::ops::invoke::published_function;
    use crate::ops::namespaces::NamespaceRuntime;
    use crate::ops::retire::attach;
    use crate::runtimes::lineage::Lasting;
    use crate::runtimes::registry::WorkDir;
    use crate::{Worker, WorkerOptions};
    use code_runner_core::{Lang, Runtime};
    use serde_json::json;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    async fn worker() -> (Worker, tempfile::TempDir) {
        let temp = tempfile::tempdir().unwrap();
        let worker = Worker::start(WorkerOptions {
            data_dir: temp.path().join("data"),
            config: code_runner_core::Config {
                warm_pool: 0,
                default_timeout_ms: 200,
                ..Default::default()
            },
            python_wasm: None,
        })
        .await
        .expect("worker starts (python.wasm: run scripts/fetch-python-wasm)");
        (worker, temp)
    }

    fn stuck() -> Arc<dyn Runtime> {
        Arc::new(Stuck {
            closed: Arc::default(),
        })
    }

    async fn slots_free(worker: &Worker) {
        let started = Instant::now();
        while worker.ops().registry.used() > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "a slot stayed held"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A kept runtime whose turn never answers: the caller gets its
    /// timeout, the id then answers `expired`, the slot is free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_kept_runtime_given_up_expires_and_frees_its_slot() {
        let (worker, temp) = worker().await;
        let inner = worker.ops();
        let key = inner.lineage.begin(None, Lasting::Yes, 32).unwrap();
        let own = inner.lineage.own_namespace(key).expect("its own namespace");
        let slot = inner.registry.acquire(32).unwrap();
        let runtime = attach(inner, key, stuck());
        let dir = WorkDir::create(temp.path().join("stuck")).unwrap();
        let id = "rt_stuckstuckstuckstuckstuckstuck00";
        let held = crate::runtimes::kept::Held {
            lang: Lang::Node,
            key,
            runtime,
            memory_mb: 0,
            checkpoint: false,
        };
        inner.registry.keep(id.into(), held, dir, slot);
        let run = json!({"runtime_id": id, "code": "return 1", "timeout_ms": 100});
        let err = worker.call(RUN, run.clone()).await.unwrap_err();
        assert_eq!(err.code, "code-runner::timeout", "{err}");
        slots_free(&worker).await;
        let err = worker.call(RUN, run).await.unwrap_err();
        assert_eq!(err.code, "code-runner::expired", "{err}");
        // Its own namespace (iii.namespace) is released with it.
        let started = Instant::now();
        while inner.lineage.reservation(&own).is_some() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "its namespace stayed reserved"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A namespace runtime whose turn never answers: the call is a
    /// timeout, the namespace's functions are unregistered, the slot free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_namespace_runtime_given_up_loses_its_functions() {
        let (worker, temp) = worker().await;
        let inner = worker.ops();
        let key = inner.lineage.begin_namespace(None, 32).unwrap();
        let slot = inner.registry.acquire(32).unwrap();
        let runtime = attach(inner, key, stuck());
        let dir = WorkDir::create(temp.path().join("stuck")).unwrap();
        let namespace = NamespaceRuntime::new("stuckns", Lang::Node, key, runtime, dir, slot);
        inner
            .namespaces
            .hold("stuckns")
            .await
            .entry
            .insert(namespace);
        let id = FunctionId::parse("stuckns::f").unwrap();
        let function = published_function(inner, &id, Lang::Node, None, json!({}), json!({}));
        let owner = Owner::Namespace {
            namespace: "stuckns".into(),
            lang: Lang::Node,
        };
        inner
            .published
            .publish(&id, owner, Lang::Node, function, &inner.bus)
            .unwrap();
        let err = worker.call("stuckns::f", json!({})).await.unwrap_err();
        assert_eq!(err.code, "code-runner::timeout", "{err}");
        slots_free(&worker).await;
        let err = worker.call("stuckns::f", json!({})).await.unwrap_err();
        assert_eq!(err.code, crate::bus::FUNCTION_NOT_FOUND, "{err}");
        assert!(inner.namespaces.get("stuckns", Lang::Node).is_none());
    }
}
