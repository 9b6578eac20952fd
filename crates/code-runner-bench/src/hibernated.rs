//! `--hibernated N`: N small python sessions hibernated in one worker's
//! store (issue 47's goal: 10 000 on this machine), and what that costs the
//! active ones: the median kept turn of a live runtime before and after,
//! the median wake (a call on a hibernated id: restore plus its turn), and
//! the store's bytes.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::timing::{median, timed};

use code_runner::{Worker, WorkerOptions};
use code_runner_core::Config;
use serde_json::{Value, json};

/// Bytes of the files under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter_map(|entry| entry.metadata().ok())
            .map(|meta| meta.len())
            .sum()
    })
}

/// Measures and prints the figures; answers them as JSON.
///
/// # Errors
/// The worker cannot start, or a call fails.
pub async fn measure(sessions: usize, samples: usize, scratch: &Path) -> anyhow::Result<Value> {
    let data_dir = scratch.join("hibernated-worker");
    let worker = Worker::start(WorkerOptions {
        data_dir: data_dir.clone(),
        config: Config {
            python_interpreter: code_runner_core::PythonInterpreter::Data,
            hibernate_after_secs: 1,
            max_sessions: sessions.max(1) + 16,
            ..Config::default()
        },
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    worker.ready().await;
    let call = |id: &'static str, payload: Value| timed(&worker, id, payload);
    let kept_turns = |id: String| {
        let call = &call;
        async move {
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
            Ok::<_, anyhow::Error>(median(turns))
        }
    };
    let keep = |n: usize| {
        let call = &call;
        async move {
            let (kept, _) = call(
                "code-runner::run",
                json!({"lang": "python", "keep": true, "code": format!("x = {n}")}),
            )
            .await?;
            Ok::<_, anyhow::Error>(kept["runtime_id"].as_str().unwrap_or_default().to_string())
        }
    };
    let active = keep(usize::MAX).await?;
    let before = kept_turns(active.clone()).await?;

    let started = Instant::now();
    let mut ids = Vec::with_capacity(sessions);
    for n in 0..sessions {
        ids.push(keep(n).await?);
        // The live one stays live: it is used more often than it idles.
        if n % 64 == 0 {
            call(
                "code-runner::run",
                json!({"runtime_id": active, "code": "y = 1"}),
            )
            .await?;
        }
    }
    let stored = data_dir.join("sessions");
    let count = || std::fs::read_dir(&stored).map_or(0, |e| e.count());
    while count() < sessions {
        if started.elapsed() > Duration::from_secs(3600) {
            anyhow::bail!(
                "only {} of {sessions} sessions hibernated within an hour",
                count()
            );
        }
        call(
            "code-runner::run",
            json!({"runtime_id": active, "code": "y = 1"}),
        )
        .await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let made_s = started.elapsed().as_secs_f64();
    let after = kept_turns(active.clone()).await?;
    let mut wakes = Vec::new();
    for id in ids
        .iter()
        .step_by((sessions / samples.max(1)).max(1))
        .take(samples)
    {
        let (answer, ms) = call(
            "code-runner::run",
            json!({"runtime_id": id, "code": "result = x"}),
        )
        .await?;
        anyhow::ensure!(
            answer["restored"] == true,
            "a hibernated session answered without waking: {answer}"
        );
        wakes.push(ms);
    }
    let wake = median(wakes);
    let store_mib = bytes_under(&stored) as f64 / f64::from(1 << 20);
    let rss_mib = crate::native::rss_kib().map_or(0, |kib| kib / 1024);
    writeln!(
        std::io::stdout().lock(),
        "{sessions} sessions hibernated in {made_s:.0} s, store {store_mib:.0} MiB ({:.2} MiB each), worker RSS {rss_mib} MiB\nkept turn of a live runtime: {before:.2} ms before, {after:.2} ms with them ({:.2}×)\nwake (a call on a hibernated id: restore + turn): {wake:.1} ms ({:.0}× a kept turn)",
        store_mib / sessions.max(1) as f64,
        after / before,
        wake / after,
    )?;
    worker.shutdown().await;
    Ok(json!({
        "sessions": sessions, "made_s": made_s, "store_mib": store_mib, "rss_mib": rss_mib,
        "kept_turn_ms_before": before, "kept_turn_ms_after": after, "wake_ms": wake,
    }))
}
