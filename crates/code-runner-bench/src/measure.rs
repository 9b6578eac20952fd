//! Measurements through the worker (in-process and over HTTP) and of bare engines.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use code_runner_core::cpu::ProcessCpu;
use code_runner_core::{
    AbortSignal, Bindings, DEFAULT_MEMORY_MB, Engine, Lang, RuntimeOptions, Task, TurnEnding,
    TurnSpec,
};
use serde::Serialize;
use serde_json::{Value, json};

use super::Outcome;
use super::native::rss_kib;
use super::stats::{Compute, Stats};
use code_runner::Worker;
use code_runner::names::{RUN, TEARDOWN};

/// How a call reaches the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `Worker::call`.
    InProcess,
    /// `POST /v1/call/{id}` on a server in this process, over a kept-alive connection.
    Http,
}

/// How a latency series is taken.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Series {
    /// Discarded calls first.
    pub warmup: usize,
    /// Calls timed.
    pub n: usize,
    /// Idle time before each call (not timed): zero is back-to-back; a pause
    /// lets background work (a warm pool refilling) finish, as for a sporadic caller.
    pub pause_ms: u64,
}

/// Throughput of one-shot runs at one concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// Calls in flight at once.
    pub concurrency: usize,
    /// Runs completed.
    pub runs: usize,
    /// Wall-clock seconds for all of them.
    pub seconds: f64,
    /// `runs / seconds`.
    pub runs_per_sec: f64,
    /// CPU the process spent in user mode per run (the worker, its engines
    /// and this driver, all in this process): the exact total
    /// (`code_runner_core::cpu`) times the user share of `/proc/self/stat`'s ticks.
    pub user_ms_per_run: f64,
    /// CPU the process spent in the kernel per run.
    pub system_ms_per_run: f64,
    /// The kernel's share of the process's CPU over the runs, in percent.
    pub kernel_percent: f64,
}

/// Resident memory added by kept runtimes.
#[derive(Debug, Clone, Serialize)]
pub struct Rss {
    /// Kept runtimes created.
    pub runtimes: usize,
    /// VmRSS before, MiB.
    pub before_mib: f64,
    /// VmRSS with all of them alive, MiB.
    pub after_mib: f64,
    /// `(after - before) / runtimes`, MiB.
    pub per_runtime_mib: f64,
}

/// Drives the worker both ways.
#[derive(Clone)]
pub struct Driver {
    worker: Worker,
    client: reqwest::Client,
    base_url: String,
}

impl Driver {
    /// A driver over `worker`, with a server of it listening at `base_url`.
    pub fn new(worker: Worker, base_url: String) -> Outcome<Driver> {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        Ok(Driver {
            worker,
            client,
            base_url,
        })
    }

    /// The worker's health word for `lang`'s engine (`ready`, `not in this build`, `unavailable: …`).
    pub fn engine_health(&self, lang: Lang) -> Option<String> {
        self.worker.health()["engines"][lang.as_str()]
            .as_str()
            .map(str::to_string)
    }

    /// Which interpreter the worker's python runs (`lean`, `data`), if it loaded.
    pub fn python_interpreter(&self) -> Option<String> {
        self.worker.health()["engines"]["python_interpreter"]
            .as_str()
            .map(str::to_string)
    }

    /// Calls `function_id`; an error is the bus's or HTTP's, as text.
    pub async fn call(&self, via: Via, function_id: &str, payload: Value) -> Outcome<Value> {
        match via {
            Via::InProcess => self
                .worker
                .call(function_id, payload)
                .await
                .map_err(|err| err.to_string()),
            Via::Http => {
                let url = format!("{}/v1/call/{function_id}", self.base_url);
                let response = self
                    .client
                    .post(&url)
                    .json(&payload)
                    .send()
                    .await
                    .map_err(|err| format!("POST {url}: {err}"))?;
                let status = response.status();
                let body: Value = response
                    .json()
                    .await
                    .map_err(|err| format!("POST {url}: {err}"))?;
                if status.is_success() {
                    Ok(body)
                } else {
                    Err(format!("HTTP {status}: {body}"))
                }
            }
        }
    }

    /// A `code-runner::run` that must succeed.
    pub async fn run(&self, via: Via, payload: Value) -> Outcome<Value> {
        let answer = self.call(via, RUN, payload).await?;
        if answer["success"] != Value::Bool(true) {
            return Err(format!(
                "run failed (exit {}): {}",
                answer["exit_code"],
                answer["stderr"].as_str().unwrap_or_default().trim()
            ));
        }
        Ok(answer)
    }

    /// Latency of `payload`, one call at a time.
    pub async fn latency(&self, via: Via, payload: &Value, series: Series) -> Outcome<Stats> {
        let mut samples = Vec::with_capacity(series.n);
        for i in 0..series.warmup + series.n {
            if series.pause_ms > 0 {
                tokio::time::sleep(Duration::from_millis(series.pause_ms)).await;
            }
            let payload = payload.clone();
            let started = Instant::now();
            self.run(via, payload).await?;
            let took = started.elapsed();
            if i >= series.warmup {
                samples.push(took);
            }
        }
        Stats::of(&samples).ok_or_else(|| "no samples".to_string())
    }

    /// Creates a kept runtime with `setup` as its first turn; answers its id.
    pub async fn keep(&self, lang: Lang, setup: &str) -> Outcome<String> {
        let answer = self
            .run(
                Via::InProcess,
                json!({"lang": lang, "code": setup, "keep": true}),
            )
            .await?;
        answer["runtime_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| "a keep: true run returned no runtime_id".to_string())
    }

    /// Tears a kept runtime down.
    pub async fn teardown(&self, runtime_id: &str) -> Outcome<()> {
        self.call(Via::InProcess, TEARDOWN, json!({"runtime_id": runtime_id}))
            .await
            .map(drop)
    }

    /// Latency of turns on one kept runtime.
    pub async fn kept_turn(
        &self,
        via: Via,
        lang: Lang,
        setup: &str,
        code: &str,
        series: Series,
    ) -> Outcome<Stats> {
        let id = self.keep(lang, setup).await?;
        let stats = self
            .latency(via, &json!({"runtime_id": id, "code": code}), series)
            .await;
        self.teardown(&id).await?;
        stats
    }

    /// One-shot runs per second with `concurrency` calls in flight, in-process.
    pub async fn throughput(
        &self,
        payload: &Value,
        concurrency: usize,
        runs: usize,
    ) -> Outcome<Throughput> {
        let next = Arc::new(AtomicUsize::new(0));
        let before = ProcessCpu::now();
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let (driver, next, payload) = (self.clone(), next.clone(), payload.clone());
            tasks.spawn(async move {
                while next.fetch_add(1, Ordering::SeqCst) < runs {
                    driver.run(Via::InProcess, payload.clone()).await?;
                }
                Ok::<_, String>(())
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(|err| format!("a throughput task panicked: {err}"))??;
        }
        let seconds = started.elapsed().as_secs_f64();
        // Exact in total; split between user and kernel by the ticks.
        let spent = ProcessCpu::now().since(&before);
        let (user, system, _) = spent.per(runs);
        Ok(Throughput {
            concurrency,
            runs,
            seconds,
            runs_per_sec: runs as f64 / seconds,
            user_ms_per_run: user,
            system_ms_per_run: system,
            kernel_percent: spent.kernel_percent(),
        })
    }

    /// RSS growth per kept runtime, over `count` of them each having run `setup`.
    pub async fn rss(&self, lang: Lang, setup: &str, count: usize) -> Outcome<Rss> {
        let before = settled_rss_kib().await?;
        let mut ids = Vec::with_capacity(count);
        let mut failure = None;
        for _ in 0..count {
            match self.keep(lang, setup).await {
                Ok(id) => ids.push(id),
                Err(err) => {
                    failure = Some(err);
                    break;
                }
            }
        }
        let after = settled_rss_kib().await;
        for id in &ids {
            if let Err(err) = self.teardown(id).await {
                tracing::warn!("bench: cannot tear down a kept runtime: {err}");
            }
        }
        if let Some(err) = failure {
            return Err(err);
        }
        let (before, after) = (before as f64 / 1024.0, after? as f64 / 1024.0);
        Ok(Rss {
            runtimes: count,
            before_mib: before,
            after_mib: after,
            per_runtime_mib: (after - before) / count.max(1) as f64,
        })
    }

    /// The compute script, timed inside the guest: `reps` turns on one kept
    /// runtime, once background boots (a warm pool refilling) have had time to
    /// finish, so that they do not share the CPU with the script.
    pub async fn compute(
        &self,
        lang: Lang,
        setup: &str,
        code: &str,
        reps: usize,
    ) -> Outcome<Compute> {
        let id = self.keep(lang, setup).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut answers = Vec::with_capacity(reps);
        let mut failure = None;
        for _ in 0..reps {
            let payload = json!({"runtime_id": id, "code": code, "timeout_ms": 60_000});
            match self.run(Via::InProcess, payload).await {
                Ok(answer) => answers.push(answer["result"].clone()),
                Err(err) => {
                    failure = Some(err);
                    break;
                }
            }
        }
        self.teardown(&id).await?;
        if let Some(err) = failure {
            return Err(err);
        }
        Compute::of(&answers)
    }
}

/// VmRSS once background work (a warm pool refilling) has stopped moving it:
/// two readings 200 ms apart within 256 KiB, or the last of 15.
pub async fn settled_rss_kib() -> Outcome<u64> {
    let mut last = rss_kib()?;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = rss_kib()?;
        if now.abs_diff(last) <= 256 {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}

/// A bare engine's runtime life, phase by phase: what a one-shot run costs
/// without a pool.
#[derive(Debug, Clone, Serialize)]
pub struct Lifecycle {
    /// `spawn` until the interpreter is ready.
    pub boot: Stats,
    /// The first turn on the fresh interpreter.
    pub first_turn: Stats,
    /// `close` until the runtime is gone.
    pub close: Stats,
}

/// Times `spawn`, one `trivial` turn and `close` on a bare engine.
pub async fn lifecycle(
    engine: &Arc<dyn Engine>,
    trivial: &str,
    root: &Path,
    warmup: usize,
    n: usize,
) -> Outcome<Lifecycle> {
    let (mut boot, mut first_turn, mut close) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..warmup + n {
        let work_dir = root.join(format!("boot-{i}"));
        let options = RuntimeOptions {
            memory_mb: DEFAULT_MEMORY_MB,
            work_dir: work_dir.clone(),
            ..RuntimeOptions::default()
        };
        let started = Instant::now();
        let runtime = engine.spawn(options).await.map_err(|err| err.message)?;
        let booted = Instant::now();
        let outcome = runtime
            .run(TurnSpec {
                live: None,
                task: Task::Program(trivial.to_string()),
                timeout: Duration::from_secs(5),
                bindings: Bindings::none(),
                max_stream_bytes: Some(16_384),
                abort: AbortSignal::new(),
            })
            .await;
        let turned = Instant::now();
        runtime.close().await;
        let closed = Instant::now();
        if let Err(err) = std::fs::remove_dir_all(&work_dir) {
            tracing::debug!("bench: cannot remove {}: {err}", work_dir.display());
        }
        if !matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, .. }) {
            return Err(format!(
                "`{trivial}` on a bare runtime ended {:?}",
                outcome.ending
            ));
        }
        if i >= warmup {
            boot.push(booted - started);
            first_turn.push(turned - booted);
            close.push(closed - turned);
        }
    }
    let stats = |samples: &[Duration]| Stats::of(samples).ok_or_else(|| "no samples".to_string());
    Ok(Lifecycle {
        boot: stats(&boot)?,
        first_turn: stats(&first_turn)?,
        close: stats(&close)?,
    })
}
