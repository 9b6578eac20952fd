//! `--traces`: what spans cost. Two workers side by side in one run, one
//! with `otlp_endpoint` set (a loopback sink that takes every export and
//! answers as a collector does, so the figure is the worker's own work:
//! recording, batching, encoding, sending), one without: a trivial one-shot
//! in each language, and a node run whose guest code makes 50 bus calls
//! (51 spans), interleaved so a busy spell falls on both.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use code_runner::{Worker, WorkerOptions};
use code_runner_core::Config;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::measure::{Driver, Series, Via};
use super::profiles::profiles;
use super::timing::median;

/// Guest code making 50 calls through the bus, each a span of its own.
const CALLS: &str = "let n = 0; for (let i = 0; i < 50; i++) { const info = await iii.trigger({ function_id: 'engine::functions::info', payload: { function_ids: ['code-runner::run'] } }); n += info.functions.length } return n";

async fn worker(data: &Path, name: &str, otlp: Option<String>) -> anyhow::Result<Driver> {
    let config = Config {
        max_runtimes: 64,
        max_timeout_ms: 60_000,
        otlp_endpoint: otlp,
        ..Config::default()
    };
    let worker = Worker::start(WorkerOptions {
        data_dir: data.join(name),
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    Driver::new(worker, String::new()).map_err(anyhow::Error::msg)
}

/// A loopback sink for OTLP/HTTP exports: reads each request whole and
/// answers 200 with an empty protobuf body; counts the bytes it took.
async fn sink() -> anyhow::Result<(String, Arc<AtomicU64>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let bytes = Arc::new(AtomicU64::new(0));
    let counted = bytes.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 16 * 1024];
                loop {
                    let Ok(n) = socket.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    while let Some(length) = whole_request(&buffer) {
                        counted.fetch_add(length as u64, Ordering::Relaxed);
                        buffer.drain(..length);
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                        if socket.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    Ok((url, bytes))
}

/// The length of the first whole HTTP request in `buffer` (headers and a
/// `content-length` body), if it has arrived.
fn whole_request(buffer: &[u8]) -> Option<usize> {
    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
    let body = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    (buffer.len() >= end + body).then_some(end + body)
}

/// Runs the comparison and prints it; returns the JSON figures.
///
/// # Errors
/// A worker cannot start or a run fails.
pub async fn compare(iterations: usize, data: &Path) -> anyhow::Result<Value> {
    let (url, exported) = sink().await?;
    let plain = worker(data, "plain", None).await?;
    let traced = worker(data, "traced", Some(url)).await?;
    let series = Series {
        warmup: (iterations / 20).clamp(1, 10),
        n: iterations,
        pause_ms: 0,
    };
    let mut cases: Vec<(String, Value)> = profiles()
        .into_iter()
        .map(|p| {
            let payload = json!({"lang": p.lang, "code": p.trivial});
            (format!("{} one-shot", p.lang.as_str()), payload)
        })
        .collect();
    cases.push((
        "node, 50 bus calls".into(),
        json!({"lang": "node", "code": CALLS}),
    ));
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<22} {:>12} {:>12} {:>7}",
        "case", "p50 plain", "p50 traced", "ratio"
    )?;
    let mut figures = Vec::new();
    for (label, payload) in cases {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            for (driver, samples) in [(&plain, &mut a), (&traced, &mut b)] {
                let stats = driver
                    .latency(Via::InProcess, &payload, series)
                    .await
                    .map_err(anyhow::Error::msg)?;
                samples.push(stats.p50_ms);
            }
        }
        let (pa, pb) = (median(a), median(b));
        writeln!(
            out,
            "{label:<22} {pa:>9.3} ms {pb:>9.3} ms {:>6.2}×",
            pb / pa
        )?;
        figures.push(json!({"case": label, "p50_ms_plain": pa, "p50_ms_traced": pb}));
    }
    // The last batch leaves within half a second.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let bytes = exported.load(Ordering::Relaxed);
    writeln!(out, "exported: {bytes} bytes of OTLP requests")?;
    Ok(json!({"traces": figures, "exported_bytes": bytes}))
}
