//! A guest's `fetch` of a small body from a loopback server, against `curl`
//! of the same URL (a process per request, as a user would type it), in one
//! run: what going through the worker's egress costs (issue 30).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use code_runner::{Worker, WorkerOptions};
use code_runner_core::{Config, Lang};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::measure::{Driver, Series, Via};
use super::stats::Stats;
use super::table::Row;
use super::{Outcome, Plan};

/// The body the loopback server answers: 64 bytes.
const BODY: &[u8; 64] = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The rows of the egress section.
pub async fn rows(plan: &Plan, scratch: &Path) -> Vec<Row> {
    let series = Series {
        warmup: plan.warmup,
        n: plan.latency,
        pause_ms: 0,
    };
    let addr = serve()
        .await
        .map_err(|err| format!("no loopback server: {err}"));
    let url: Outcome<String> = addr.clone().map(|addr| format!("http://{addr}/small"));
    let curl = match &url {
        Ok(url) => curl(url, series).await,
        Err(why) => Err(why.clone()),
    };
    let mut rows = vec![Row::latency(
        "egress.curl".into(),
        "curl -s of a 64-byte loopback body (a process per request)".into(),
        &curl,
        None,
    )];
    let driver = match &addr {
        Ok(addr) => worker(scratch, *addr).await,
        Err(why) => Err(why.clone()),
    };
    let url = url.unwrap_or_default();
    for (lang, setup, code) in [
        (
            Lang::Node,
            "0",
            format!("await (await fetch('{url}')).text()"),
        ),
        (
            Lang::Python,
            "import urllib.request",
            format!("urllib.request.urlopen('{url}').read()"),
        ),
    ] {
        let stats = match &driver {
            Ok((driver, _)) => {
                driver
                    .kept_turn(Via::InProcess, lang, setup, &code, series)
                    .await
            }
            Err(why) => Err(why.clone()),
        };
        let ratio = match (&stats, &curl) {
            (Ok(fetch), Ok(curl)) if curl.p50_ms > 0.0 => Ok(fetch.p50_ms / curl.p50_ms),
            (Err(why), _) | (_, Err(why)) => Err(why.clone()),
            _ => Err("curl took no time".to_string()),
        };
        rows.push(Row::latency(
            format!("egress.{lang}.fetch"),
            format!("{lang} kept turn fetching the same body through the worker"),
            &stats,
            None,
        ));
        rows.push(Row::figure(
            format!("egress.{lang}.vs_curl"),
            format!("  {lang} fetch turn p50 against curl's"),
            ratio,
            "×",
            None,
        ));
    }
    if let Ok((_, worker)) = driver {
        worker.shutdown().await;
    }
    rows
}

/// `curl -s -o /dev/null url`, one process at a time.
async fn curl(url: &str, series: Series) -> Outcome<Stats> {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let mut samples = Vec::with_capacity(series.n);
        for i in 0..series.warmup + series.n {
            let started = Instant::now();
            let status = Command::new("curl")
                .args(["-s", "-o", "/dev/null", &url])
                .stdin(Stdio::null())
                .status()
                .map_err(|err| match err.kind() {
                    std::io::ErrorKind::NotFound => "curl is not installed".to_string(),
                    _ => format!("cannot run curl: {err}"),
                })?;
            if !status.success() {
                return Err(format!("curl failed ({status})"));
            }
            if i >= series.warmup {
                samples.push(started.elapsed());
            }
        }
        Stats::of(&samples).ok_or_else(|| "no samples".to_string())
    })
    .await
    .map_err(|err| err.to_string())?
}

/// A worker allowed to reach `addr` only.
async fn worker(scratch: &Path, addr: SocketAddr) -> Outcome<(Driver, Worker)> {
    let config = Config {
        max_runtimes: 8,
        max_timeout_ms: 60_000,
        egress_allow: vec![addr.to_string()],
        ..Config::default()
    };
    let worker = Worker::start(WorkerOptions {
        data_dir: scratch.join("egress-worker"),
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| err.message)?;
    // Only in-process calls are measured: the HTTP address is never used.
    let driver = Driver::new(worker.clone(), "http://127.0.0.1:9".to_string())?;
    Ok((driver, worker))
}

/// A loopback HTTP/1.1 server answering [`BODY`] to any request, one
/// connection per request (`connection: close`), as the egress client and
/// curl both open one.
async fn serve() -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65_536 {
                    match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await
                    {
                        Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let mut answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    BODY.len()
                )
                .into_bytes();
                answer.extend_from_slice(BODY);
                let _ = stream.write_all(&answer).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(addr)
}

/// The JSON of these rows for the report.
pub fn json(rows: &[Row]) -> Value {
    serde_json::to_value(rows).unwrap_or(Value::Null)
}
