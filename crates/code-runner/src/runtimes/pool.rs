//! A small pool of pre-booted runtimes for one-shot runs, one per engine.
//!
//! Booting CPython takes tens of milliseconds and a V8 isolate about a
//! millisecond, most of a one-shot run either way. The pool keeps a few
//! runtimes booted (and warmed by one empty turn) with the options a one-shot
//! run would get; a one-shot run takes one and, once it has answered, a
//! background task boots its replacement. A pooled runtime has never run user
//! code, so isolation is unchanged: after its one run it is closed like any
//! other. Pooled runtimes hold no `max_runtimes` slot until a run takes them
//! (the run's slot is taken before the pool is asked).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_runner_core::{AbortSignal, Bindings, Engine, Runtime, RuntimeOptions, Task, TurnSpec};

use crate::ids::new_dir_name;
use crate::runtimes::registry::WorkDir;

/// A booted, warmed runtime and its directory.
pub struct Warm {
    /// The runtime.
    pub runtime: Arc<dyn Runtime>,
    /// Its `/work`.
    pub dir: WorkDir,
}

/// Pre-booted runtimes of one engine with one set of options.
pub struct WarmPool {
    engine: Arc<dyn Engine>,
    template: RuntimeOptions,
    /// The bindings of the warm-up turn: the shape runs will bring, so an
    /// engine that installs bindings once per shape (node) has done it.
    warm_bindings: Bindings,
    size: usize,
    runtimes_dir: PathBuf,
    ready: Mutex<VecDeque<Warm>>,
    booting: AtomicUsize,
}

impl WarmPool {
    /// An empty pool of runtimes booted with `template` (its `work_dir` is
    /// replaced by a fresh directory under `runtimes_dir` for each);
    /// call [`WarmPool::refill`] to fill it.
    pub fn new(
        engine: Arc<dyn Engine>,
        template: RuntimeOptions,
        warm_bindings: Bindings,
        size: usize,
        runtimes_dir: PathBuf,
    ) -> Arc<Self> {
        Arc::new(WarmPool {
            engine,
            template,
            warm_bindings,
            size,
            runtimes_dir,
            ready: Mutex::new(VecDeque::new()),
            booting: AtomicUsize::new(0),
        })
    }

    /// The memory size this pool's runtimes were booted with.
    pub fn memory_mb(&self) -> u64 {
        self.template.memory_mb
    }

    /// Takes a live warm runtime, if one is ready. The caller refills the
    /// pool after its run, so the replacement's boot does not compete with
    /// the run. A runtime that is gone (its sandbox process died while it
    /// waited here) is never handed out: it is let go of, and the next one
    /// is tried; with none left the caller boots a fresh runtime.
    pub fn take(&self) -> Option<Warm> {
        loop {
            let warm = self.lock().pop_front()?;
            if !warm.runtime.is_gone() {
                return Some(warm);
            }
            discard(warm);
        }
    }

    /// Lets go of every pooled runtime that is gone, so that
    /// [`WarmPool::refill`] boots their replacements.
    fn prune(&self) {
        let gone: Vec<Warm> = {
            let mut ready = self.lock();
            let (gone, live): (Vec<Warm>, Vec<Warm>) =
                ready.drain(..).partition(|w| w.runtime.is_gone());
            ready.extend(live);
            gone
        };
        gone.into_iter().for_each(discard);
    }

    /// Boots runtimes in the background until the pool holds its size.
    pub fn refill(self: &Arc<Self>) {
        self.prune();
        loop {
            let booting = self.booting.load(Ordering::SeqCst);
            if self.lock().len() + booting >= self.size {
                return;
            }
            if self
                .booting
                .compare_exchange(booting, booting + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let pool = self.clone();
                tokio::spawn(async move {
                    let warm = pool.boot().await;
                    pool.booting.fetch_sub(1, Ordering::SeqCst);
                    match warm {
                        Some(warm) => pool.lock().push_back(warm),
                        None => tokio::time::sleep(Duration::from_secs(1)).await,
                    }
                });
            }
        }
    }

    async fn boot(&self) -> Option<Warm> {
        let dir = match WorkDir::create(self.runtimes_dir.join(new_dir_name())) {
            Ok(dir) => dir,
            Err(err) => {
                tracing::warn!("warm pool: {}", err.message);
                return None;
            }
        };
        let options = RuntimeOptions {
            work_dir: dir.0.clone(),
            ..self.template.clone()
        };
        let runtime = match self.engine.spawn(options).await {
            Ok(runtime) => runtime,
            Err(err) => {
                tracing::warn!(
                    "warm pool cannot boot a {} runtime: {}",
                    self.engine.lang(),
                    err.message
                );
                return None;
            }
        };
        let warm_up = TurnSpec {
            live: None,
            task: Task::Program(String::new()),
            timeout: Duration::from_secs(5),
            bindings: self.warm_bindings.clone(),
            max_stream_bytes: Some(0),
            abort: AbortSignal::new(),
        };
        if crate::runtimes::bounded::run_within(runtime.as_ref(), warm_up)
            .await
            .is_none()
        {
            tracing::warn!("warm pool: a warm-up turn was not answered; the runtime is discarded");
            crate::runtimes::bounded::close_within(runtime).await;
            dir.remove().await;
            return None;
        }
        Some(Warm { runtime, dir })
    }

    /// Closes every pooled runtime.
    pub async fn drain(&self) {
        let all: Vec<Warm> = self.lock().drain(..).collect();
        for warm in all {
            warm.runtime.close().await;
            warm.dir.remove().await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Warm>> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Closes a gone runtime and removes its directory, in the background.
fn discard(warm: Warm) {
    tokio::spawn(async move {
        warm.runtime.close().await;
        warm.dir.remove().await;
    });
}
