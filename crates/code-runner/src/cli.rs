//! The command line: `serve` and `call`, in the iii style.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use code_runner_core::Config;
use serde_json::{Map, Value};

use crate::bus::CallError;
use crate::worker::{Worker, WorkerOptions};

/// Run untrusted JavaScript and Python in-process, with hard limits.
#[derive(Debug, Parser)]
#[command(name = "code-runner", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:7979")]
        listen: SocketAddr,
        /// Where runtimes keep their files and the configuration persists.
        #[arg(long, default_value = "./data")]
        data_dir: PathBuf,
        /// YAML configuration; seeds `<data-dir>/configuration/code-runner.yaml` on first boot only.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Call a function and print its answer as JSON: in-process, or on a server with --url.
    Call {
        /// The function id, e.g. code-runner::run.
        function_id: String,
        /// Payload fields as key=value; values are parsed as JSON where they parse, else taken as strings.
        args: Vec<String>,
        /// The whole payload as JSON (fields given as key=value are merged over it).
        #[arg(long)]
        json: Option<String>,
        /// Base URL of a running server, e.g. http://127.0.0.1:7979.
        #[arg(long)]
        url: Option<String>,
        /// Data directory for an in-process call (default: a temporary one).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// YAML configuration for an in-process call.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Measure latency, throughput, boot cost, memory and compute speed on this machine.
    Bench(crate::bench::BenchArgs),
}

/// Parses the command line and runs it.
///
/// # Errors
/// Start-up failures (bad configuration, locked data directory, bind errors).
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve {
            listen,
            data_dir,
            config,
        } => serve(listen, data_dir, config.as_deref()).await,
        Command::Call {
            function_id,
            args,
            json,
            url,
            data_dir,
            config,
        } => {
            let payload = payload(json.as_deref(), &args)?;
            let answer = match url {
                Some(url) => call_remote(&url, &function_id, &payload).await?,
                None => call_local(&function_id, payload, data_dir, config.as_deref()).await?,
            };
            let (text, code) = match answer {
                Ok(value) => (value, ExitCode::SUCCESS),
                Err(err) => (serde_json::json!({ "error": err }), ExitCode::FAILURE),
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", serde_json::to_string_pretty(&text)?)?;
            Ok(code)
        }
        Command::Bench(args) => crate::bench::run(args).await,
    }
}

/// Builds a payload from `--json` and `key=value` arguments.
///
/// # Errors
/// A malformed `--json`, a non-object `--json`, or an argument without `=`.
pub fn payload(json: Option<&str>, args: &[String]) -> anyhow::Result<Value> {
    let mut map = match json {
        Some(text) => match serde_json::from_str(text).context("--json is not valid JSON")? {
            Value::Object(map) => map,
            other => anyhow::bail!("--json must be a JSON object, got {other}"),
        },
        None => Map::new(),
    };
    for arg in args {
        let (key, raw) = arg
            .split_once('=')
            .with_context(|| format!("argument `{arg}` is not key=value"))?;
        let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
        map.insert(key.to_string(), value);
    }
    Ok(Value::Object(map))
}

/// Reads the configuration in force for a data directory: the persisted copy
/// if there is one, else `--config` (which is then persisted), else defaults.
///
/// # Errors
/// An unreadable or invalid file, naming it and the offending key.
pub fn load_config(data_dir: &Path, seed: Option<&Path>) -> anyhow::Result<Config> {
    let persisted = data_dir.join("configuration").join("code-runner.yaml");
    if persisted.exists() {
        if let Some(seed) = seed {
            tracing::info!(
                "using the persisted configuration {} (--config {} seeds the first boot only)",
                persisted.display(),
                seed.display()
            );
        }
        return read_config(&persisted);
    }
    let Some(seed) = seed else {
        return Ok(Config::default());
    };
    let config = read_config(seed)?;
    std::fs::create_dir_all(persisted.parent().unwrap_or(data_dir))?;
    let tmp = persisted.with_extension("yaml.tmp");
    std::fs::write(&tmp, std::fs::read(seed)?)?;
    std::fs::rename(&tmp, &persisted)?;
    Ok(config)
}

fn read_config(path: &Path) -> anyhow::Result<Config> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Config::from_yaml(&text).map_err(|err| anyhow::anyhow!("{}: {}", path.display(), err.message))
}

async fn serve(
    listen: SocketAddr,
    data_dir: PathBuf,
    seed: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let config = load_config(&data_dir, seed)?;
    let worker = Worker::start(WorkerOptions {
        data_dir: data_dir.clone(),
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(
        "code-runner serving on http://{} (data dir {})",
        listener.local_addr()?,
        data_dir.display()
    );
    crate::http::serve(listener, worker.clone(), shutdown_signal()).await?;
    worker.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}

async fn call_local(
    function_id: &str,
    payload: Value,
    data_dir: Option<PathBuf>,
    config: Option<&Path>,
) -> anyhow::Result<Result<Value, CallError>> {
    let (data_dir, _temp) = match data_dir {
        Some(dir) => (dir, None),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("code-runner-call-")
                .tempdir()?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let mut config = match config {
        Some(path) => read_config(path)?,
        None => Config::default(),
    };
    // One call: interpreters booted ahead of time would only be thrown away.
    config.warm_pool = 0;
    let worker = Worker::start(WorkerOptions {
        data_dir,
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    let answer = worker.call(function_id, payload).await;
    worker.shutdown().await;
    Ok(answer)
}

async fn call_remote(
    url: &str,
    function_id: &str,
    payload: &Value,
) -> anyhow::Result<Result<Value, CallError>> {
    let endpoint = format!("{}/v1/call/{function_id}", url.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&endpoint)
        .json(payload)
        .send()
        .await
        .with_context(|| format!("cannot reach {endpoint}"))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .with_context(|| format!("{endpoint} did not answer JSON"))?;
    if status.is_success() {
        return Ok(Ok(body));
    }
    let error = body.get("error").cloned().unwrap_or(body);
    Ok(Err(CallError {
        code: error
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("http_error")
            .to_string(),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| format!("HTTP {status}"), str::to_string),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `k=v` values parse as JSON where they can and stay strings otherwise.
    #[test]
    fn key_value_arguments_parse_as_json_where_they_can() {
        let args = [
            "lang=python",
            "code=result = 2 + 2",
            "keep=true",
            "timeout_ms=100",
            "x={\"a\":1}",
        ];
        let payload = payload(Some(r#"{"keep": false, "y": 1}"#), &args.map(String::from)).unwrap();
        assert_eq!(
            payload,
            serde_json::json!({"keep": true, "y": 1, "lang": "python", "code": "result = 2 + 2", "timeout_ms": 100, "x": {"a": 1}})
        );
        assert!(super::payload(None, &["novalue".to_string()]).is_err());
        assert!(super::payload(Some("[1]"), &[]).is_err());
    }

    /// `--config` seeds the persisted copy once; later boots read the persisted copy.
    #[test]
    fn config_seeds_first_boot_only() {
        let dir = tempfile::tempdir().unwrap();
        let seed = dir.path().join("seed.yaml");
        std::fs::write(&seed, "max_runtimes: 3\n").unwrap();
        let data = dir.path().join("data");
        assert_eq!(load_config(&data, Some(&seed)).unwrap().max_runtimes, 3);
        std::fs::write(&seed, "max_runtimes: 9\n").unwrap();
        assert_eq!(load_config(&data, Some(&seed)).unwrap().max_runtimes, 3);
        assert_eq!(load_config(&data, None).unwrap().max_runtimes, 3);
        std::fs::write(&seed, "max_runtime: 9\n").unwrap();
        let fresh = dir.path().join("fresh");
        assert!(
            load_config(&fresh, Some(&seed))
                .unwrap_err()
                .to_string()
                .contains("max_runtime")
        );
    }
}
