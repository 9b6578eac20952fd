//! `--isolation`: one-shot latency and throughput with guest code in
//! sandbox processes beside in-process, in one run, both languages; the
//! resident memory of each sandbox process; the time to replace a dead one.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use code_runner::{Worker, WorkerOptions};
use code_runner_core::{Config, Isolation};
use serde_json::{Value, json};

use super::measure::{Driver, Series, Via};
use super::profiles::profiles;

/// One worker of each isolation over `data`, served as the main bench serves one.
async fn worker(data: &Path, isolation: Isolation) -> anyhow::Result<(Worker, Driver)> {
    let config = Config {
        max_runtimes: 64,
        max_timeout_ms: 60_000,
        isolation,
        ..Config::default()
    };
    let worker = Worker::start(WorkerOptions {
        data_dir: data.join(isolation.as_str()),
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    let driver = Driver::new(worker.clone(), String::new()).map_err(anyhow::Error::msg)?;
    Ok((worker, driver))
}

/// Runs the comparison and prints it; returns the JSON figures.
///
/// # Errors
/// A worker cannot start or a run fails.
pub async fn compare(iterations: usize, data: &Path) -> anyhow::Result<Value> {
    let exe = std::env::current_exe()?;
    let sibling = exe.with_file_name("code-runner");
    code_runner::set_sandbox_program(sibling);
    let (local_worker, local) = worker(data, Isolation::InProcess).await?;
    let (sandboxed_worker, sandboxed) = worker(data, Isolation::Process).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let series = Series {
        warmup: (iterations / 20).clamp(1, 10),
        n: iterations,
        pause_ms: 0,
    };
    let mut out = std::io::stdout().lock();
    let mut figures = Vec::new();
    writeln!(
        out,
        "{:<8} {:>14} {:>14} {:>7}   (CPU counts this process and its sandbox processes)",
        "lang", "p50 in-proc", "p50 process", "ratio"
    )?;
    for profile in profiles() {
        let payload = json!({"lang": profile.lang, "code": profile.trivial});
        let (mut a, mut b) = (Vec::new(), Vec::new());
        // Interleaved, so a busy spell on the machine falls on both sides.
        for _ in 0..3 {
            a.push(
                local
                    .latency(Via::InProcess, &payload, series)
                    .await
                    .map_err(anyhow::Error::msg)?
                    .p50_ms,
            );
            b.push(
                sandboxed
                    .latency(Via::InProcess, &payload, series)
                    .await
                    .map_err(anyhow::Error::msg)?
                    .p50_ms,
            );
        }
        let (pa, pb) = (median(&mut a), median(&mut b));
        writeln!(
            out,
            "{:<8} {:>11.2} ms {:>11.2} ms {:>6.2}×",
            profile.lang.as_str(),
            pa,
            pb,
            pb / pa,
        )?;
        let mut loads = Vec::new();
        for concurrency in [4, 16] {
            let runs = (iterations * 2).max(4 * concurrency);
            let ta = cpu_of_throughput(&local, &local_worker, &payload, concurrency, runs).await?;
            let tb = cpu_of_throughput(&sandboxed, &sandboxed_worker, &payload, concurrency, runs)
                .await?;
            for (mode, t) in [("in-process", &ta), ("process", &tb)] {
                writeln!(
                    out,
                    "  {concurrency:>2} clients {mode:<10} {:>6.0} runs/s, user {:.2} + kernel {:.2} ms CPU per run ({:.0} % kernel), {:.0} minor faults per run",
                    t.runs_per_sec,
                    t.user_ms,
                    t.kernel_ms,
                    t.kernel_percent(),
                    t.minor_faults
                )?;
            }
            loads.push(json!({"concurrency": concurrency, "in_process": ta, "process": tb}));
        }
        figures.push(json!({
            "lang": profile.lang, "p50_ms_in_process": pa, "p50_ms_process": pb, "load": loads,
        }));
    }
    let health = sandboxed_worker.health();
    let pids: Vec<u32> = health["engines"]["isolation"]["processes"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|p| p["pid"].as_u64())
                .map(|p| p as u32)
                .collect()
        })
        .unwrap_or_default();
    let rss: Vec<u64> = pids.iter().filter_map(|pid| rss_kib(*pid)).collect();
    writeln!(
        out,
        "\nsandbox processes: {} (RSS {:?} KiB after the runs above)",
        pids.len(),
        rss
    )?;
    let mut replacements = Vec::new();
    for _ in 0..5 {
        let before = health_of(&sandboxed_worker)["replaced"]
            .as_u64()
            .unwrap_or(0);
        let Some(victim) = live_pids(&sandboxed_worker).first().copied() else {
            break;
        };
        // SAFETY: kill takes integers; the pid is this worker's sandbox process.
        unsafe { libc_kill(victim as i32, 9) };
        let killed = Instant::now();
        while health_of(&sandboxed_worker)["replaced"]
            .as_u64()
            .unwrap_or(0)
            <= before
        {
            if killed.elapsed() > Duration::from_secs(30) {
                anyhow::bail!("no replacement within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let start_ms = health_of(&sandboxed_worker)["last_replacement_ms"]
            .as_u64()
            .unwrap_or(0);
        replacements.push((killed.elapsed().as_secs_f64() * 1000.0, start_ms));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    writeln!(
        out,
        "replacing a SIGKILLed sandbox process, kill → ready (ms), of which starting the new one: {:?}",
        replacements
            .iter()
            .map(|(a, b)| format!("{a:.0}/{b}"))
            .collect::<Vec<_>>()
    )?;
    local_worker.shutdown().await;
    sandboxed_worker.shutdown().await;
    Ok(json!({ "oneshot": figures, "sandbox_rss_kib": rss, "replacement_ms": replacements }))
}

/// One-shot throughput at `concurrency` with the CPU and minor faults of
/// the whole process tree per run: this process (the worker, the driver)
/// and, with `isolation: process`, its sandbox processes, which run the
/// guest code there.
#[derive(serde::Serialize)]
struct TreeLoad {
    runs_per_sec: f64,
    user_ms: f64,
    kernel_ms: f64,
    minor_faults: f64,
}

impl TreeLoad {
    fn kernel_percent(&self) -> f64 {
        100.0 * self.kernel_ms / (self.user_ms + self.kernel_ms).max(f64::MIN_POSITIVE)
    }
}

async fn cpu_of_throughput(
    driver: &Driver,
    worker: &Worker,
    payload: &Value,
    concurrency: usize,
    runs: usize,
) -> anyhow::Result<TreeLoad> {
    let pids = live_pids(worker);
    let before = tree_stat(&pids);
    let load = driver
        .throughput(payload, concurrency, runs)
        .await
        .map_err(anyhow::Error::msg)?;
    let after = tree_stat(&pids);
    let per_run = |i: usize| (after[i] - before[i]) / runs as f64;
    Ok(TreeLoad {
        runs_per_sec: load.runs_per_sec,
        user_ms: per_run(0),
        kernel_ms: per_run(1),
        minor_faults: per_run(2),
    })
}

/// User ms, kernel ms and minor faults so far of this process and `pids`
/// (`stat(5)`: `minflt`, `utime` and `stime`, times in ticks of 10 ms).
fn tree_stat(pids: &[u32]) -> [f64; 3] {
    let mut sum = [0.0; 3];
    let paths = std::iter::once("/proc/self/stat".to_string())
        .chain(pids.iter().map(|pid| format!("/proc/{pid}/stat")));
    for path in paths {
        let stat = std::fs::read_to_string(path).unwrap_or_default();
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<f64> = after
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0.0))
            .collect();
        // After ")": state is field 3 of stat(5), so minflt (10), utime (14)
        // and stime (15) are 7, 11 and 12 here.
        if let (Some(minflt), Some(user), Some(system)) =
            (fields.get(7), fields.get(11), fields.get(12))
        {
            sum[0] += user * 10.0;
            sum[1] += system * 10.0;
            sum[2] += minflt;
        }
    }
    sum
}

/// `VmRSS` of `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn health_of(worker: &Worker) -> Value {
    worker.health()["engines"]["isolation"].clone()
}

fn live_pids(worker: &Worker) -> Vec<u32> {
    health_of(worker)["processes"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|p| p["pid"].as_u64())
                .map(|p| p as u32)
                .collect()
        })
        .unwrap_or_default()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}
