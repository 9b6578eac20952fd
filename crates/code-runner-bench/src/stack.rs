//! Python's data stack beside the lean interpreter, in the same run: a second
//! worker configured `python_interpreter: lean` serves the lean rows, the
//! bench's own worker (`auto`, the data stack when it is installed) the rest.

use std::path::Path;

use code_runner::{Worker, WorkerOptions};
use code_runner_core::{Config, Lang, PythonInterpreter};
use serde_json::{Value, json};

use super::measure::{Driver, Series, Via, settled_rss_kib};
use super::native::{self, Tool};
use super::profiles::py_compute;
use super::stats::Compute;
use super::table::{Row, Target};
use super::{Outcome, Plan};

/// A numpy one-shot: a 3×3 solve.
const NUMPY: &str = "import numpy as np\n\
a = np.array([[3.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 4.0]])\n\
result = np.linalg.solve(a, np.array([1.0, 2.0, 3.0])).round(6).tolist()";

/// A pandas one-shot: a frame from a CSV string, grouped and summed.
const PANDAS: &str = "import io\nimport pandas as pd\n\
df = pd.read_csv(io.StringIO('k,v\\n' + '\\n'.join(f'{i % 7},{i}' for i in range(200))))\n\
result = df.groupby('k')['v'].sum().to_dict()";

/// The rows of the data-stack section.
pub async fn rows(data: &Driver, plan: &Plan, scratch: &Path) -> Vec<Row> {
    let lean = lean_worker(scratch).await;
    let mut rows = Vec::new();
    let installed = data.python_interpreter().as_deref() == Some("data");
    let missing = "the data stack is not installed (scripts/fetch-python-data)".to_string();
    let series = Series {
        warmup: plan.warmup,
        n: plan.latency,
        pause_ms: 0,
    };
    let trivial = json!({"lang": "python", "code": "result = 2 + 2"});
    let flavours: [(&str, Outcome<&Driver>); 2] = [
        ("lean", lean.as_ref().map(|(d, _)| d).map_err(String::clone)),
        (
            "data",
            if installed {
                Ok(data)
            } else {
                Err(missing.clone())
            },
        ),
    ];
    for (name, driver) in &flavours {
        let stats = match driver {
            Ok(driver) => driver.latency(Via::Http, &trivial, series).await,
            Err(why) => Err(why.clone()),
        };
        rows.push(Row::latency(
            format!("python.{name}.one_shot.http"),
            format!("python ({name}) one-shot `result = 2 + 2`, HTTP"),
            &stats,
            Some(Target::at_most(1.0, "ms")),
        ));
    }
    let data = if installed { Ok(data) } else { Err(missing) };
    for (key, label, code, target) in [
        (
            "numpy",
            "numpy linalg.solve",
            NUMPY,
            Some(Target::at_most(2.0, "ms")),
        ),
        ("pandas", "pandas read_csv + groupby", PANDAS, None),
    ] {
        let payload = json!({"lang": "python", "code": code});
        let stats = match &data {
            Ok(driver) => driver.latency(Via::Http, &payload, series).await,
            Err(why) => Err(why.clone()),
        };
        rows.push(Row::latency(
            format!("python.data.{key}.http"),
            format!("python (data) one-shot, {label}, HTTP"),
            &stats,
            target,
        ));
    }
    let numpy = json!({"lang": "python", "code": NUMPY});
    for concurrency in plan.concurrency {
        let runs = plan.throughput_runs.max(2 * concurrency);
        let measured = match &data {
            Ok(driver) => driver.throughput(&numpy, concurrency, runs).await,
            Err(why) => Err(why.clone()),
        };
        rows.push(Row::figure(
            format!("python.data.numpy.throughput.c{concurrency}"),
            format!("python (data) numpy one-shots/s, {concurrency} at once (kernel share)"),
            measured
                .as_ref()
                .map(|t| t.runs_per_sec)
                .map_err(String::clone),
            "runs/s",
            Some(Target::at_least(500.0, "runs/s")),
        ));
        if let Ok(t) = &measured {
            rows.push(Row::figure(
                format!("python.data.numpy.cpu.c{concurrency}"),
                format!(
                    "  server CPU per run: {:.2} ms user + {:.2} ms kernel",
                    t.user_ms_per_run, t.system_ms_per_run
                ),
                Ok(t.kernel_percent),
                "% kernel",
                None,
            ));
        }
    }
    let kept = if plan.quick { 2 } else { 8 };
    for (name, driver) in [("lean", flavours[0].1.clone()), ("data", data.clone())] {
        let memory = match driver {
            Ok(driver) => private_per_kept(driver, kept).await,
            Err(why) => Err(why),
        };
        rows.push(Row::figure(
            format!("python.{name}.private_per_kept"),
            format!("python ({name}) private memory per kept runtime (after a numpy-free turn)"),
            memory.as_ref().map(|m| m.0).map_err(String::clone),
            "MiB",
            Some(Target::at_most(4.0, "MiB")),
        ));
        rows.push(Row::figure(
            format!("python.{name}.rss_per_kept"),
            format!("python ({name}) RSS per kept runtime"),
            memory.as_ref().map(|m| m.1).map_err(String::clone),
            "MiB",
            None,
        ));
    }
    rows.extend(compute_rows(&flavours[0].1, &data, plan).await);
    if let Ok((_, worker)) = lean {
        worker.shutdown().await;
    }
    rows
}

/// The compute mix in both flavours and the machine's `python3`.
async fn compute_rows(lean: &Outcome<&Driver>, data: &Outcome<&Driver>, plan: &Plan) -> Vec<Row> {
    let (guest, native_program) = py_compute();
    let reps = plan.compute_reps;
    let tool = Tool {
        program: "python3",
        inline_flag: "-c",
        print_exe: "import sys; print(sys.executable)",
    };
    let native: Outcome<Compute> = tokio::task::spawn_blocking(move || {
        let found = native::find(&tool)?;
        native::compute(&tool, &found, &native_program, reps)
    })
    .await
    .unwrap_or_else(|err| Err(format!("panicked: {err}")));
    let mut rows = Vec::new();
    for (name, driver) in [("lean", lean), ("data", data)] {
        let compute = match driver {
            Ok(driver) => driver.compute(Lang::Python, "x = 1", &guest, reps).await,
            Err(why) => Err(why.clone()),
        };
        let ratio = match (&compute, &native) {
            (Ok(ours), Ok(theirs)) => Ok(ours.median_ms / theirs.median_ms),
            (Err(why), _) | (_, Err(why)) => Err(why.clone()),
        };
        let shown = compute.as_ref().map(|c| c.median_ms).unwrap_or(f64::NAN);
        rows.push(Row::figure(
            format!("python.{name}.compute_ratio"),
            format!("python ({name}) compute mix over python3 ({shown:.0} ms)"),
            ratio,
            "×",
            Some(Target::at_most(2.0, "×")),
        ));
    }
    rows
}

/// Private and resident MiB each of `count` kept runtimes adds.
async fn private_per_kept(driver: &Driver, count: usize) -> Outcome<(f64, f64)> {
    let (private_before, rss_before) = (private_kib()?, settled_rss_kib().await?);
    let mut ids = Vec::new();
    for _ in 0..count {
        ids.push(driver.keep(Lang::Python, "x = 40").await?);
    }
    let (private_after, rss_after) = (private_kib(), settled_rss_kib().await);
    for id in &ids {
        driver.teardown(id).await.ok();
    }
    let per = |after: u64, before: u64| (after as f64 - before as f64) / 1024.0 / count as f64;
    let (private, rss) = (
        per(private_after?, private_before),
        per(rss_after?, rss_before),
    );
    // Memory the process gave back meanwhile (an earlier phase's pages) can
    // outweigh what the kept runtimes took: no figure, rather than a
    // negative one that would pass its target.
    if private < 0.0 || rss < 0.0 {
        return Err(format!(
            "not measurable in this run: the process's memory fell while {count} runtimes were kept \
             (private {private:+.2}, RSS {rss:+.2} MiB per runtime)"
        ));
    }
    Ok((private, rss))
}

/// This process's private memory (clean and dirty), in KiB.
fn private_kib() -> Outcome<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup")
        .map_err(|err| format!("cannot read /proc/self/smaps_rollup: {err}"))?;
    let field = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(field("Private_Clean:") + field("Private_Dirty:"))
}

/// A worker running the lean interpreter, with its own HTTP server.
async fn lean_worker(scratch: &Path) -> Outcome<(Driver, Worker)> {
    let config = Config {
        max_runtimes: 64,
        max_timeout_ms: 60_000,
        python_interpreter: PythonInterpreter::Lean,
        ..Config::default()
    };
    let worker = Worker::start(WorkerOptions {
        data_dir: scratch.join("lean-worker"),
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| err.message)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|err| err.to_string())?;
    let base_url = format!(
        "http://{}",
        listener.local_addr().map_err(|err| err.to_string())?
    );
    tokio::spawn(code_runner::http::serve(
        listener,
        worker.clone(),
        std::future::pending::<()>(),
    ));
    let driver = Driver::new(worker.clone(), base_url)?;
    if driver.python_interpreter().as_deref() != Some("lean") {
        return Err("the lean worker did not load the lean interpreter".into());
    }
    Ok((driver, worker))
}

/// The JSON of these rows for the report.
pub fn json(rows: &[Row]) -> Value {
    serde_json::to_value(rows).unwrap_or(Value::Null)
}
