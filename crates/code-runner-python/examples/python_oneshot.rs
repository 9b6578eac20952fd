//! What a python one-shot costs the host, through the seam: wall time, the
//! process's user and kernel CPU and its minor page faults per run, one
//! client and several at once, and the resident memory the engine keeps
//! (per pooled slot, once load has touched them); then what each step of a
//! one-shot costs (booting its instance, its one turn, the close that resets
//! its slot) and a kept runtime's turn, the floor a one-shot is held to; then
//! issue 33's goals as ratios measured in this one run, each marked met or
//! missed.
//!
//! Run: `cargo run --release --workspace --example python_oneshot -- 2000`
//! (both flavours; `--data` or `--lean` measures one of them).

#![allow(clippy::print_stdout, reason = "an example reports to its user")]

use std::time::{Duration, Instant};

use code_runner_core::cpu::{ProcessCpu, process_cpu_ms};
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

/// The figures of one load line.
#[derive(Clone, Copy)]
struct Load {
    cpu_ms: f64,
    kernel_percent: f64,
    faults: f64,
}

/// `runs` one-shots from `clients` tasks at once: the figures of one line.
async fn load(engine: &PythonEngine, clients: usize, runs: usize) -> anyhow::Result<Load> {
    let before = ProcessCpu::now();
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
    let spent = ProcessCpu::now().since(&before);
    let done = walls.len() as f64;
    walls.sort();
    let at = |p: f64| walls[((walls.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    let (rss, dirty) = memory_kib();
    let (user, kernel, faults) = spent.per(walls.len());
    let figures = Load {
        cpu_ms: user + kernel,
        kernel_percent: spent.kernel_percent(),
        faults,
    };
    println!(
        "{clients:>2} clients: {:>5.0} runs/s, p50 {:.2} ms p99 {:.2} ms, user {user:.2} + kernel {kernel:.2} ms CPU per run ({:.0} % kernel), {:.0} minor faults per run; Rss {} MiB, Private_Dirty {} MiB",
        done / seconds,
        at(0.5),
        at(0.99),
        figures.kernel_percent,
        figures.faults,
        rss >> 10,
        dirty >> 10,
    );
    Ok(figures)
}

/// CPU ms per turn of one kept runtime running the same program `runs` times.
async fn kept_turns(engine: &PythonEngine, runs: usize) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let runtime = engine
        .spawn(RuntimeOptions {
            work_dir: dir.path().to_path_buf(),
            ..RuntimeOptions::default()
        })
        .await?;
    for _ in 0..20 {
        runtime.run(spec("result = 2 + 2")).await;
    }
    let before = ProcessCpu::now();
    for _ in 0..runs {
        runtime.run(spec("result = 2 + 2")).await;
    }
    let per_turn = ProcessCpu::now().since(&before).cpu_ms() / runs as f64;
    runtime.close().await;
    println!("kept turn: {per_turn:.2} ms CPU per turn (one runtime, {runs} turns)");
    Ok(per_turn)
}

/// CPU ms of each step of a one-shot, one client, averaged over `runs`:
/// the boot (instantiating the image), its one turn, and the close (the
/// slot's reset).
async fn steps(
    engine: &PythonEngine,
    work: &std::path::Path,
    runs: usize,
) -> anyhow::Result<[f64; 3]> {
    let mut spent = [0.0; 3];
    for _ in 0..runs {
        let start = process_cpu_ms();
        let runtime = engine
            .spawn(RuntimeOptions {
                work_dir: work.to_path_buf(),
                ..RuntimeOptions::default()
            })
            .await?;
        let booted = process_cpu_ms();
        let outcome = runtime.run(spec("result = 2 + 2")).await;
        let ran = process_cpu_ms();
        runtime.close().await;
        let closed = process_cpu_ms();
        anyhow::ensure!(
            matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, .. }),
            "a step's turn failed: {:?}",
            outcome.ending
        );
        spent[0] += booted - start;
        spent[1] += ran - booted;
        spent[2] += closed - ran;
    }
    Ok(spent.map(|ms| ms / runs.max(1) as f64))
}

/// What one flavour measured: the load lines at 1, 4 and 16 clients, a
/// one-shot's steps and a kept turn.
struct Flavour {
    at: [Load; 3],
    steps: [f64; 3],
    kept_ms: f64,
}

async fn measure(choice: Interpreter, runs: usize) -> anyhow::Result<Flavour> {
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
    let mut at = Vec::new();
    for clients in [1, 4, 16] {
        at.push(load(&engine, clients, runs.max(clients)).await?);
    }
    let steps = steps(&engine, dir.path(), runs.clamp(300, 2000)).await?;
    // At least 3 000: a turn is ~0.1 ms, and fewer swung by half between runs.
    let kept_ms = kept_turns(&engine, runs.clamp(3000, 5000)).await?;
    println!(
        "a one-shot's steps, 1 client: boot {:.2} + its turn {:.2} + close {:.2} ms CPU; a kept turn {kept_ms:.2} (the turn on a fresh instance is {:.1}× a kept one)",
        steps[0],
        steps[1],
        steps[2],
        steps[1] / kept_ms
    );
    Ok(Flavour {
        at: [at[0], at[1], at[2]],
        steps,
        kept_ms,
    })
}

/// Prints one goal: the figure, the bound, and whether it is met.
fn goal(what: &str, figure: f64, bound: f64, unit: &str) {
    let mark = if figure <= bound { "met" } else { "MISSED" };
    println!("  {what}: {figure:.2}{unit} (goal ≤ {bound}{unit}): {mark}");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(1000);
    let (data_only, lean_only) = (
        args.iter().any(|a| a == "--data"),
        args.iter().any(|a| a == "--lean"),
    );
    let lean = if data_only {
        None
    } else {
        Some(measure(Interpreter::Lean, runs).await?)
    };
    let data = if lean_only {
        None
    } else {
        Some(measure(Interpreter::Data, runs).await?)
    };
    println!("issue 33's goals, measured in this run (4 clients unless said):");
    if let Some(lean) = &lean {
        goal(
            "lean one-shot CPU / lean kept turn CPU",
            lean.at[1].cpu_ms / lean.kept_ms,
            3.0,
            "×",
        );
        let [boot, turn, close] = lean.steps.map(|ms| ms / lean.kept_ms);
        println!(
            "    (in kept turns, a one-shot's steps at 1 client: boot {boot:.1}× + its turn {turn:.1}× + close {close:.1}×)"
        );
    }
    if let Some(data) = &data {
        if let Some(lean) = &lean {
            goal(
                "data one-shot CPU / lean one-shot CPU",
                data.at[1].cpu_ms / lean.at[1].cpu_ms,
                1.5,
                "×",
            );
        }
        goal("data kernel share", data.at[1].kernel_percent, 25.0, " %");
        goal(
            "data kernel share at 16 clients",
            data.at[2].kernel_percent,
            25.0,
            " %",
        );
        goal("data minor faults per run", data.at[1].faults, 20.0, "");
    }
    Ok(())
}
