//! The python engine's data flavour through the seam: a pandas one-shot, a
//! numpy one-shot and a kept runtime that imports numpy in a later turn,
//! asserted; then, with `--measure N`, the figures of issue 19 (CPU and wall
//! time per one-shot in both flavours, private memory per kept runtime).
//!
//! Run: `scripts/fetch-python-data && cargo run --release -p code-runner-python --example python_data -- --measure 300`

#![allow(clippy::print_stdout, reason = "an example reports to its user")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runner_core::{
    AbortSignal, Bindings, Completion, Engine, Runtime, RuntimeOptions, Task, TurnEnding, TurnSpec,
};
use code_runner_python::{EngineLimits, Interpreter, PythonEngine};
use serde_json::{Value, json};

const NUMPY: &str = "import numpy as np\nresult = [round(float(v), 6) for v in np.linalg.solve(np.array([[3.0, 1.0], [1.0, 2.0]]), np.array([9.0, 8.0]))]";
const PANDAS: &str = "import pandas as pd\ndf = pd.DataFrame({'k': ['a', 'b', 'a', 'b'], 'v': [1, 2, 3, 4]})\nresult = {k: int(v) for k, v in df.groupby('k')['v'].sum().items()}";

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

fn value_of(ending: &TurnEnding) -> anyhow::Result<Value> {
    match ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::Value(v),
            ..
        } => Ok(v.clone()),
        other => anyhow::bail!("expected a value, got {other:?}"),
    }
}

/// One one-shot run through the seam: a runtime, one turn, closed.
async fn one_shot(
    engine: &PythonEngine,
    work: &std::path::Path,
    program: &str,
) -> anyhow::Result<Value> {
    let runtime = engine
        .spawn(RuntimeOptions {
            work_dir: work.to_path_buf(),
            memory_mb: 256,
            ..RuntimeOptions::default()
        })
        .await?;
    let outcome = runtime.run(spec(program)).await;
    runtime.close().await;
    value_of(&outcome.ending)
}

fn cpu_now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Minor page faults of this process so far (copy-on-write and zero-fill faults).
fn minor_faults() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|text| {
            let after = text.rsplit_once(") ")?.1.to_string();
            after.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
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

async fn measure(
    label: &str,
    engine: &PythonEngine,
    program: &str,
    runs: usize,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for _ in 0..5 {
        one_shot(engine, dir.path(), program).await?;
    }
    let mut walls = Vec::with_capacity(runs);
    let faults = minor_faults();
    let cpu = cpu_now();
    for _ in 0..runs {
        let started = Instant::now();
        one_shot(engine, dir.path(), program).await?;
        walls.push(started.elapsed());
    }
    let cpu = cpu_now() - cpu;
    let faults = (minor_faults() - faults) / runs as u64;
    walls.sort();
    let at = |p: f64| walls[((walls.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    println!(
        "{label}: {runs} one-shots, wall p50 {:.2} ms p99 {:.2} ms, process CPU {:.2} ms per run, {faults} minor faults per run",
        at(0.5),
        at(0.99),
        cpu.as_secs_f64() * 1e3 / runs as f64
    );
    Ok(())
}

/// One-shots of `program` per second with `clients` running at once.
async fn throughput(
    label: &str,
    engine: &PythonEngine,
    program: &'static str,
    clients: usize,
    runs: usize,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let cpu = cpu_now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            let dir = tempfile::tempdir()?;
            for _ in 0..runs / clients {
                one_shot(&engine, dir.path(), program).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let done = (runs / clients * clients) as f64;
    println!(
        "{label}, {clients:>2} at once: {:.0} runs/s, process CPU {:.2} ms per run",
        done / started.elapsed().as_secs_f64(),
        (cpu_now() - cpu).as_secs_f64() * 1e3 / done
    );
    Ok(())
}

/// CPU per turn of `program` on one kept runtime (after its first turn).
async fn kept_turns(
    label: &str,
    engine: &PythonEngine,
    program: &str,
    runs: usize,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let runtime = engine
        .spawn(RuntimeOptions {
            work_dir: dir.path().to_path_buf(),
            memory_mb: 256,
            ..RuntimeOptions::default()
        })
        .await?;
    let cpu = cpu_now();
    value_of(&runtime.run(spec(program)).await.ending)?;
    let first = cpu_now() - cpu;
    let cpu = cpu_now();
    for _ in 0..runs {
        value_of(&runtime.run(spec(program)).await.ending)?;
    }
    let later = (cpu_now() - cpu) / runs as u32;
    runtime.close().await;
    println!(
        "{label}: kept runtime, first turn {:.2} ms CPU, later turns {:.2} ms CPU each",
        first.as_secs_f64() * 1e3,
        later.as_secs_f64() * 1e3
    );
    Ok(())
}

async fn kept_memory(
    label: &str,
    engine: &PythonEngine,
    program: &str,
    count: usize,
) -> anyhow::Result<()> {
    let dirs: Vec<_> = (0..count)
        .map(|_| tempfile::tempdir())
        .collect::<Result<_, _>>()?;
    let before = memory_kib();
    let mut kept: Vec<Arc<dyn Runtime>> = Vec::new();
    for dir in &dirs {
        let runtime = engine
            .spawn(RuntimeOptions {
                work_dir: dir.path().to_path_buf(),
                memory_mb: 256,
                ..RuntimeOptions::default()
            })
            .await?;
        value_of(&runtime.run(spec(program)).await.ending)?;
        kept.push(runtime);
    }
    let after = memory_kib();
    println!(
        "{label}: {count} kept runtimes after `{}`: Rss +{} KiB, Private_Dirty +{} KiB per runtime",
        program.replace('\n', "; "),
        after.0.saturating_sub(before.0) / count as u64,
        after.1.saturating_sub(before.1) / count as u64
    );
    for runtime in kept {
        runtime.close().await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: Option<usize> = std::env::args()
        .skip_while(|a| a != "--measure")
        .nth(1)
        .and_then(|n| n.parse().ok());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "code_runner_python=info",
        ))
        .with_writer(std::io::stderr)
        .init();
    let started = Instant::now();
    let cpu = cpu_now();
    let data = PythonEngine::load_data(
        &code_runner_python::default_data_dir(),
        EngineLimits::default(),
    )?;
    println!(
        "data flavour loaded in {} ms ({} ms of CPU)",
        started.elapsed().as_millis(),
        (cpu_now() - cpu).as_millis()
    );
    assert_eq!(data.interpreter(), Interpreter::Data);
    let dir = tempfile::tempdir()?;
    assert_eq!(
        one_shot(&data, dir.path(), PANDAS).await?,
        json!({"a": 4, "b": 6})
    );
    assert_eq!(one_shot(&data, dir.path(), NUMPY).await?, json!([2.0, 3.0]));

    let kept = data
        .spawn(RuntimeOptions {
            work_dir: dir.path().to_path_buf(),
            ..RuntimeOptions::default()
        })
        .await?;
    value_of(&kept.run(spec("x = 40\nresult = x")).await.ending)?;
    let answer = value_of(
        &kept
            .run(spec("import numpy as np\nresult = int(np.int64(x) + 2)"))
            .await
            .ending,
    )?;
    assert_eq!(answer, json!(42));
    kept.close().await;
    println!("data flavour: pandas, numpy and a kept runtime answered");

    let Some(runs) = runs else { return Ok(()) };
    let lean = PythonEngine::with_interpreter(Interpreter::Lean, EngineLimits::default())?;
    measure("lean  result = 2 + 2", &lean, "result = 2 + 2", runs).await?;
    measure("data  result = 2 + 2", &data, "result = 2 + 2", runs).await?;
    measure("data  numpy solve   ", &data, NUMPY, runs).await?;
    measure("data  pandas groupby", &data, PANDAS, runs).await?;
    kept_turns("data  numpy solve   ", &data, NUMPY, runs).await?;
    for clients in [1, 4, 16] {
        throughput(
            "lean  2 + 2 one-shots",
            &lean,
            "result = 2 + 2",
            clients,
            runs.max(clients),
        )
        .await?;
        throughput(
            "data  numpy one-shots",
            &data,
            NUMPY,
            clients,
            runs.max(clients),
        )
        .await?;
    }
    kept_turns("data  pandas groupby", &data, PANDAS, runs).await?;
    if let Ok(mix) = std::env::var("COMPUTE_MIX") {
        let program = std::fs::read_to_string(mix)?;
        println!(
            "lean  compute mix (ms, in the guest): {}",
            one_shot(&lean, dir.path(), &program).await?
        );
        println!(
            "data  compute mix (ms, in the guest): {}",
            one_shot(&data, dir.path(), &program).await?
        );
    }
    let imports = "import time\nout = {}\nfor name in ('scipy.stats', 'sklearn.linear_model', 'statsmodels.api', 'matplotlib.pyplot'):\n    t = time.perf_counter(); __import__(name); out[name] = round((time.perf_counter() - t) * 1e3, 1)\nresult = out";
    println!(
        "data  imports not in the image (ms, in the guest): {}",
        one_shot(&data, dir.path(), imports).await?
    );
    kept_memory("lean", &lean, "x = 40\nresult = x", 16).await?;
    kept_memory("data", &data, "x = 40\nresult = x", 16).await?;
    kept_memory(
        "data",
        &data,
        "import numpy as np\na = np.ones(1000)\nresult = float(a.sum())",
        16,
    )
    .await?;
    Ok(())
}
