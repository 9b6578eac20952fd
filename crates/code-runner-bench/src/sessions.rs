//! `--sessions`: what a python session's snapshot and restore cost (issue
//! 47), beside a kept turn in the same worker: a small session (`x = 41`),
//! a pandas session holding a 100 000-row DataFrame and a 50 MiB numpy
//! array. For each: the snapshot's bytes and wall time, the restore's, and
//! the restored runtime's first turn (medians of up to ten, after one that
//! also hashes the image once per worker), each against the median kept
//! turn. Then node's: a twenty-turn session's ledger and its replay (`ledger.rs`).

use std::io::Write;
use std::path::Path;

use code_runner::{Worker, WorkerOptions};

use crate::timing::{median, timed};
use code_runner_core::Config;
use serde_json::{Value, json};

/// The sessions measured: a name and the code that makes its state.
const SESSIONS: [(&str, &str); 3] = [
    ("small (x = 41)", "x = 41"),
    (
        "pandas, 100 000 rows",
        "import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': np.arange(100000), 'b': np.random.random(100000), 'c': ['s%d' % i for i in range(100000)]})",
    ),
    (
        "numpy, 50 MiB",
        "import numpy as np\narr = np.random.random((50 << 20) // 8)",
    ),
];

/// Measures and prints the figures; answers them as JSON.
///
/// # Errors
/// The worker cannot start, or a call fails.
pub async fn measure(samples: usize, scratch: &Path) -> anyhow::Result<Value> {
    let worker = Worker::start(WorkerOptions {
        data_dir: scratch.join("sessions-worker"),
        config: Config {
            python_interpreter: code_runner_core::PythonInterpreter::Data,
            ..Config::default()
        },
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    let call = |id: &'static str, payload: Value| timed(&worker, id, payload);
    writeln!(
        std::io::stdout().lock(),
        "{:<22} {:>10} {:>12} {:>11} {:>13} {:>10} {:>8}",
        "session",
        "MiB",
        "snapshot ms",
        "restore ms",
        "first turn ms",
        "kept ms",
        "× kept"
    )?;
    let mut rows = Vec::new();
    for (name, code) in SESSIONS {
        let (kept, _) = call(
            "code-runner::run",
            json!({"lang": "python", "code": code, "keep": true}),
        )
        .await?;
        let id = kept["runtime_id"].as_str().unwrap_or_default().to_string();
        let mut turns = Vec::new();
        for _ in 0..samples {
            turns.push(
                call(
                    "code-runner::run",
                    json!({"runtime_id": id, "code": "y = 1"}),
                )
                .await?
                .1,
            );
        }
        turns.sort_by(f64::total_cmp);
        let kept_ms = turns[turns.len() / 2];
        // The worker's first snapshot also hashes the image's pages once.
        call("code-runner::snapshot", json!({"runtime_id": id})).await?;
        let (mut snapshots, mut restores, mut firsts) = (Vec::new(), Vec::new(), Vec::new());
        let mut taken = Value::Null;
        for _ in 0..samples.clamp(1, 10) {
            let (snapshot, snapshot_ms) =
                call("code-runner::snapshot", json!({"runtime_id": id})).await?;
            let (restored, restore_ms) = call(
                "code-runner::restore",
                json!({"snapshot_id": snapshot["snapshot_id"]}),
            )
            .await?;
            let (_, first_ms) = call(
                "code-runner::run",
                json!({"runtime_id": restored["runtime_id"], "code": "result = 1"}),
            )
            .await?;
            call(
                "code-runner::teardown",
                json!({"runtime_id": restored["runtime_id"]}),
            )
            .await?;
            snapshots.push(snapshot_ms);
            restores.push(restore_ms);
            firsts.push(first_ms);
            taken = snapshot;
        }
        let (snapshot_ms, restore_ms, first_ms) =
            (median(snapshots), median(restores), median(firsts));
        let mib = taken["bytes"].as_f64().unwrap_or(0.0) / f64::from(1 << 20);
        let ratio = (restore_ms + first_ms) / kept_ms;
        writeln!(
            std::io::stdout().lock(),
            "{name:<22} {mib:>10.2} {snapshot_ms:>12.1} {restore_ms:>11.1} {first_ms:>13.1} {kept_ms:>10.2} {ratio:>8.1}"
        )?;
        rows.push(json!({
            "session": name, "snapshot_bytes": taken["bytes"], "snapshot_ms": snapshot_ms,
            "restore_ms": restore_ms, "first_turn_ms": first_ms, "kept_turn_ms": kept_ms,
            "restore_and_first_over_kept": ratio,
        }));
    }
    let node = crate::ledger::measure(&worker, samples).await?;
    worker.shutdown().await;
    Ok(json!({"samples": samples, "sessions": rows, "node": node}))
}
