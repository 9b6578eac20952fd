//! The timed call and the median the session benchmarks share.

use std::time::Instant;

use code_runner::Worker;
use serde_json::Value;

/// The median of `values` (0 for none).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Calls `id` on `worker`: its answer and the call's wall milliseconds.
pub(crate) async fn timed(
    worker: &Worker,
    id: &str,
    payload: Value,
) -> anyhow::Result<(Value, f64)> {
    let started = Instant::now();
    let answer = worker
        .call(id, payload)
        .await
        .map_err(|err| anyhow::anyhow!("{id}: {}", err.message))?;
    Ok((answer, started.elapsed().as_secs_f64() * 1000.0))
}
