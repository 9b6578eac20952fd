//! What a python one-shot costs the host, through the seam: wall time, the
//! process's user and kernel CPU and its minor page faults per run, one
//! client and several at once, and the resident memory the engine keeps
//! (per pooled slot, once load has touched them).
//!
//! Run: `cargo run --release -p code-runner-python --example python_oneshot -- 2000`
//! (`--data` measures the data flavour instead of the lean one).

#![allow(clippy::print_stdout, reason = "an example reports to its user")]

use std::time::{Duration, Instant};

use code_runner_core::{
    AbortSignal, Bindings, Completion, Engine, RuntimeOptions, Task, TurnEnding, TurnSpec,
};
use code_runner_python::{EngineLimits, Interpreter, PythonEngine};

fn spec(program: &str) -> TurnSpec {
    TurnSpec {
        live: None,
        task: Task::program(program),
        timeout: Duration::from_secs(60),
        bindings: Bindings::none(),
        max_stream_bytes: Some(16_384),
        abort: AbortSignal::new(),
    }
}

/// One one-shot run through the seam: a runtime, one turn, closed.
async fn one_shot(
    engine: &PythonEngine,
    work: &std::path::Path,
    program: &str,
) -> anyhow::Result<()> {
    let runtime = engine
        .spawn(RuntimeOptions {
            work_dir: work.to_path_buf(),
            ..RuntimeOptions::default()
        })
        .await?;
    let outcome = runtime.run(spec(program)).await;
    runtime.close().await;
    match outcome.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::Value(_),
            ..
        } => Ok(()),
        other => anyhow::bail!("expected a value, got {other:?}"),
    }
}

/// (user ms, kernel ms, minor faults) of this process so far, from `/proc/self/stat`.
fn usage() -> (f64, f64, u64) {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = text.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let num = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After ") ": state is stat(5)'s field 3, so minflt (10) is 7, utime (14) 11, stime (15) 12.
    (num(11) as f64 * 10.0, num(12) as f64 * 10.0, num(7))
}

/// (Rss, Private_Dirty) of this process in KiB.
fn memory_kib() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("Rss:"), field("Private_Dirty:"))
}

/// `runs` one-shots from `clients` tasks at once: the figures of one line.
async fn load(engine: &PythonEngine, clients: usize, runs: usize) -> anyhow::Result<()> {
    let (user, kernel, faults) = usage();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            let dir = tempfile::tempdir()?;
            let mut walls = Vec::new();
            for _ in 0..runs / clients {
                let t = Instant::now();
                one_shot(&engine, dir.path(), "result = 2 + 2").await?;
                walls.push(t.elapsed());
            }
            anyhow::Ok(walls)
        }));
    }
    let mut walls = Vec::new();
    for task in tasks {
        walls.extend(task.await??);
    }
    let seconds = started.elapsed().as_secs_f64();
    let (user2, kernel2, faults2) = usage();
    let done = walls.len() as f64;
    walls.sort();
    let at = |p: f64| walls[((walls.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    let (rss, dirty) = memory_kib();
    println!(
        "{clients:>2} clients: {:>5.0} runs/s, p50 {:.2} ms p99 {:.2} ms, user {:.2} + kernel {:.2} ms CPU per run ({:.0} % kernel), {:.0} minor faults per run; Rss {} MiB, Private_Dirty {} MiB",
        done / seconds,
        at(0.5),
        at(0.99),
        (user2 - user) / done,
        (kernel2 - kernel) / done,
        100.0 * (kernel2 - kernel) / ((user2 - user) + (kernel2 - kernel)).max(1e-9),
        (faults2 - faults) as f64 / done,
        rss >> 10,
        dirty >> 10,
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(1000);
    let choice = if args.iter().any(|a| a == "--data") {
        Interpreter::Data
    } else {
        Interpreter::Lean
    };
    let engine = PythonEngine::with_interpreter(choice, EngineLimits::default())?;
    let (rss, dirty) = memory_kib();
    println!(
        "{choice:?} flavour loaded: Rss {} MiB, Private_Dirty {} MiB",
        rss >> 10,
        dirty >> 10
    );
    let dir = tempfile::tempdir()?;
    for _ in 0..20 {
        one_shot(&engine, dir.path(), "result = 2 + 2").await?;
    }
    for clients in [1, 4, 16, 1] {
        load(&engine, clients, runs.max(clients)).await?;
    }
    Ok(())
}
