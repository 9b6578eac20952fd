//! Latency samples and their summary.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Outcome;

/// The summary of a set of latency samples, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    /// How many samples.
    pub n: usize,
    /// Median (nearest rank).
    pub p50_ms: f64,
    /// 99th percentile (nearest rank).
    pub p99_ms: f64,
    /// Arithmetic mean.
    pub mean_ms: f64,
    /// Fastest sample.
    pub min_ms: f64,
    /// Slowest sample.
    pub max_ms: f64,
}

impl Stats {
    /// Summarizes `samples`; `None` when there are none.
    pub fn of(samples: &[Duration]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        Some(Stats {
            n,
            p50_ms: percentile(&ms, 50.0),
            p99_ms: percentile(&ms, 99.0),
            mean_ms: ms.iter().sum::<f64>() / n as f64,
            min_ms: ms[0],
            max_ms: ms[n - 1],
        })
    }
}

/// Nearest-rank percentile of sorted, non-empty `sorted`.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// The median of `values` (unsorted); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (!sorted.is_empty()).then(|| percentile(&sorted, 50.0))
}

/// A compute figure: the script's own timing of itself, over several runs.
#[derive(Debug, Clone, Serialize)]
pub struct Compute {
    /// Median of `samples_ms`.
    pub median_ms: f64,
    /// Each run's self-timed milliseconds.
    pub samples_ms: Vec<f64>,
    /// Median milliseconds of each named part of the script, where it reports parts.
    pub parts_median_ms: Map<String, Value>,
    /// The script's checksum, to tell both sides did the same work.
    pub check: Value,
}

impl Compute {
    /// Summarizes the script's answers (`{"ms", "check", "parts"?}`), one per run.
    pub fn of(answers: &[Value]) -> Outcome<Compute> {
        let samples_ms = answers
            .iter()
            .map(|answer| {
                answer["ms"]
                    .as_f64()
                    .ok_or_else(|| format!("the compute script answered {answer}, without ms"))
            })
            .collect::<Outcome<Vec<f64>>>()?;
        let median_ms = median(&samples_ms).ok_or("no compute samples")?;
        let mut parts_median_ms = Map::new();
        if let Some(Value::Object(first)) = answers.first().map(|answer| &answer["parts"]) {
            for name in first.keys() {
                let values: Vec<f64> = answers
                    .iter()
                    .filter_map(|answer| answer["parts"][name].as_f64())
                    .collect();
                if let Some(median) = median(&values) {
                    parts_median_ms.insert(name.clone(), json!(median));
                }
            }
        }
        Ok(Compute {
            median_ms,
            samples_ms,
            parts_median_ms,
            check: answers
                .last()
                .map_or(Value::Null, |answer| answer["check"].clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest rank: p50 of 1..=100 is 50, p99 is 99, and tiny sets do not panic.
    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let stats = Stats::of(&samples).unwrap();
        assert_eq!(stats.n, 100);
        assert!((stats.p50_ms - 50.0).abs() < 1e-9);
        assert!((stats.p99_ms - 99.0).abs() < 1e-9);
        assert!((stats.mean_ms - 50.5).abs() < 1e-9);
        let one = Stats::of(&[Duration::from_millis(7)]).unwrap();
        assert!((one.p50_ms - 7.0).abs() < 1e-9 && (one.p99_ms - 7.0).abs() < 1e-9);
        assert!(Stats::of(&[]).is_none());
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    }
}
