//! `code-runner-bench --soak N`: N one-shot runs and N kept-runtime turns, then
//! the process RSS against its baseline, to show nothing accumulates.

use std::time::Instant;

use code_runner_core::Lang;
use serde_json::{Value, json};

use super::Outcome;
use super::measure::{Driver, Via, settled_rss_kib};

/// One-shot runs in flight at once: one per core of the reference machine.
const CONCURRENCY: usize = 2;

/// The soak's figures.
pub struct Soak {
    /// Runs of each kind.
    pub runs: usize,
    /// RSS after warm-up, MiB.
    pub baseline_mib: f64,
    /// RSS after the one-shot runs, MiB.
    pub after_one_shot_mib: f64,
    /// RSS after the kept-runtime turns (runtime torn down), MiB.
    pub after_kept_mib: f64,
    /// Seconds the one-shot runs took.
    pub one_shot_secs: f64,
    /// Seconds the kept turns took.
    pub kept_secs: f64,
    /// Calls that did not answer success.
    pub failures: usize,
}

impl Soak {
    /// The report's JSON form.
    pub fn to_json(&self) -> Value {
        json!({
            "runs_each": self.runs,
            "rss_baseline_mib": self.baseline_mib,
            "rss_after_one_shot_mib": self.after_one_shot_mib,
            "rss_after_kept_mib": self.after_kept_mib,
            "rss_growth_mib": self.after_kept_mib - self.baseline_mib,
            "one_shot_secs": self.one_shot_secs,
            "kept_secs": self.kept_secs,
            "failures": self.failures,
        })
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs the soak for python.
pub async fn soak(driver: &Driver, runs: usize) -> Outcome<Soak> {
    let one_shot = json!({"lang": "python", "code": "data = [str(i) * 3 for i in range(2000)]\nresult = len(data)"});
    for _ in 0..20 {
        driver.run(Via::InProcess, one_shot.clone()).await?;
    }
    let baseline = settled_rss_kib().await?;

    let started = Instant::now();
    let mut failures = 0;
    let mut done = 0;
    while done < runs {
        let batch = CONCURRENCY.min(runs - done);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..batch {
            let (driver, payload) = (driver.clone(), one_shot.clone());
            set.spawn(async move { driver.run(Via::InProcess, payload).await });
        }
        while let Some(answer) = set.join_next().await {
            failures += usize::from(!matches!(answer, Ok(Ok(_))));
        }
        done += batch;
    }
    let one_shot_secs = started.elapsed().as_secs_f64();
    let after_one_shot = settled_rss_kib().await?;

    let started = Instant::now();
    let id = driver.keep(Lang::Python, "n = 0").await?;
    for _ in 0..runs {
        let turn = json!({"runtime_id": id, "code": "n += 1\nscratch = {i: str(i) for i in range(500)}\nresult = n"});
        if driver.run(Via::InProcess, turn).await.is_err() {
            failures += 1;
        }
    }
    driver.teardown(&id).await?;
    let kept_secs = started.elapsed().as_secs_f64();
    let after_kept = settled_rss_kib().await?;
    Ok(Soak {
        runs,
        baseline_mib: mib(baseline),
        after_one_shot_mib: mib(after_one_shot),
        after_kept_mib: mib(after_kept),
        one_shot_secs,
        kept_secs,
        failures,
    })
}
