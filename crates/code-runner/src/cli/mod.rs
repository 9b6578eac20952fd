//! The command line: `serve`, `mcp`, `call`, `run` and `prepare`, in the iii style.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use code_runner_core::Config;

use crate::edge::http::HttpOptions;
use crate::edge::iii::IiiOptions;
use crate::worker::{Worker, WorkerOptions};

mod call;
mod out;
mod prepare;
mod run;
pub mod sandbox;
pub use call::payload;
use call::{call_local, call_remote, call_through_iii};

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
        /// Join the iii engine at this WebSocket address (e.g. ws://127.0.0.1:49134):
        /// every function becomes an engine function. Standalone when absent.
        #[arg(long, env = "III_URL")]
        engine: Option<String>,
        /// This worker's name on the engine; unique per engine (default code-runner-<host>-<pid>).
        #[arg(long, env = "III_WORKER_NAME")]
        worker_name: Option<String>,
        /// With --engine: serve no HTTP API, only the engine.
        #[arg(long, requires = "engine")]
        no_http: bool,
        /// Also serve `GET /metrics` (Prometheus) alone on this address: for a
        /// worker with --no-http, whose metrics are otherwise not served.
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<SocketAddr>,
        /// Let pages of this origin (scheme://host[:port]) call from a browser, with CORS; repeatable.
        /// The server's own origin is always allowed.
        #[arg(long = "allow-origin", value_name = "URL")]
        allow_origins: Vec<String>,
        /// Answer requests whose Host is this name; repeatable. IP addresses and localhost
        /// are always accepted; other names are refused (DNS rebinding).
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_hosts: Vec<String>,
        /// Open connections at most; past it the longest-open idle one is closed.
        #[arg(long, default_value_t = crate::edge::http::DEFAULT_MAX_CONNECTIONS)]
        max_connections: usize,
        /// Where guest code runs: in-process, or process (confined sandbox
        /// processes); overrides the configuration's `isolation`.
        #[arg(long, value_name = "in-process|process")]
        isolation: Option<code_runner_core::Isolation>,
    },
    /// Serve MCP on stdin and stdout (for an agent host that starts this
    /// program); logs go to stderr.
    Mcp {
        /// Where runtimes keep their files and the configuration persists.
        #[arg(long, default_value = "./data")]
        data_dir: PathBuf,
        /// YAML configuration; seeds `<data-dir>/configuration/code-runner.yaml` on first boot only.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Join the iii engine at this WebSocket address too.
        #[arg(long, env = "III_URL")]
        engine: Option<String>,
        /// This worker's name on the engine; unique per engine (default code-runner-<host>-<pid>).
        #[arg(long, env = "III_WORKER_NAME")]
        worker_name: Option<String>,
        /// Where guest code runs: in-process, or process (confined sandbox
        /// processes); overrides the configuration's `isolation`.
        #[arg(long, value_name = "in-process|process")]
        isolation: Option<code_runner_core::Isolation>,
    },
    /// Run code once and print the answer as JSON, with local files attached and the
    /// collected ones written into a directory: in-process, or on a server with --url.
    Run(run::RunArgs),
    /// Build ahead of time what a configuration needs before its first run
    /// (python's packages and image, V8's snapshot), so a server answers its
    /// first python run at once.
    Prepare {
        /// The data directory whose configuration to prepare for (default: only --config).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// YAML configuration to prepare for (its python_packages, python_interpreter).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Where guest code will run: in-process, or process (confined sandbox processes).
        #[arg(long, value_name = "in-process|process")]
        isolation: Option<code_runner_core::Isolation>,
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
        #[arg(long, conflicts_with = "engine")]
        url: Option<String>,
        /// Call through the iii engine at this WebSocket address instead.
        #[arg(long)]
        engine: Option<String>,
        /// With --engine: how long to wait for the answer, in milliseconds.
        #[arg(long, default_value_t = 60_000)]
        timeout_ms: u64,
        /// Data directory for an in-process call (default: a temporary one).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// YAML configuration for an in-process call.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Where guest code runs: in-process, or process (confined sandbox
        /// processes); overrides the configuration's `isolation`.
        #[arg(long, value_name = "in-process|process")]
        isolation: Option<code_runner_core::Isolation>,
    },
}

/// Parses the command line and runs it.
///
/// # Errors
/// Start-up failures (bad configuration, locked data directory, bind errors).
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let isolation = match &cli.command {
        Command::Serve { isolation, .. }
        | Command::Mcp { isolation, .. }
        | Command::Prepare { isolation, .. }
        | Command::Call { isolation, .. } => *isolation,
        Command::Run(args) => args.isolation,
    };
    if let Some(isolation) = isolation {
        crate::runtimes::isolation::set_isolation(isolation);
    }
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Prepare {
            data_dir,
            config,
            isolation: _,
        } => prepare::prepare(data_dir, config.as_deref()).await,
        Command::Serve {
            listen,
            data_dir,
            config,
            engine,
            worker_name,
            no_http,
            metrics_listen,
            allow_origins,
            allow_hosts,
            max_connections,
            isolation: _,
        } => {
            let iii = engine.map(|url| IiiOptions {
                url,
                worker_name: worker_name.unwrap_or_else(IiiOptions::default_worker_name),
            });
            let listen = (!no_http).then_some(listen);
            let http = HttpOptions {
                allow_origins,
                allow_hosts,
                max_connections,
                ..HttpOptions::default()
            };
            let listen = Listen {
                api: listen,
                metrics: metrics_listen,
            };
            serve(listen, data_dir, config.as_deref(), iii, http).await
        }
        Command::Mcp {
            data_dir,
            config,
            engine,
            worker_name,
            isolation: _,
        } => {
            let iii = engine.map(|url| IiiOptions {
                url,
                worker_name: worker_name.unwrap_or_else(IiiOptions::default_worker_name),
            });
            mcp(data_dir, config.as_deref(), iii).await
        }
        Command::Call {
            function_id,
            args,
            json,
            url,
            engine,
            timeout_ms,
            data_dir,
            config,
            isolation: _,
        } => {
            let payload = payload(json.as_deref(), &args)?;
            let answer = match (url, engine) {
                (Some(url), _) => call_remote(&url, &function_id, &payload).await?,
                (None, Some(engine)) => {
                    call_through_iii(&engine, &function_id, payload, timeout_ms).await?
                }
                (None, None) => {
                    call_local(&function_id, payload, data_dir, config.as_deref()).await?
                }
            };
            let (text, code) = match answer {
                Ok(value) => (value, ExitCode::SUCCESS),
                Err(err) => (serde_json::json!({ "error": err }), ExitCode::FAILURE),
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", serde_json::to_string_pretty(&text)?)?;
            Ok(code)
        }
    }
}

/// The seed for a data directory's first boot: `--config` (validated, and
/// persisted as written, comments and all), else the defaults. A data
/// directory that already holds a configuration keeps it, so `--config` is
/// then not read at all.
///
/// # Errors
/// An unreadable or invalid `--config`, naming it and the offending key, or
/// a configuration directory that cannot be written.
pub fn seed_config(data_dir: &Path, seed: Option<&Path>) -> anyhow::Result<Config> {
    let file = crate::settings::ConfigFile::in_data_dir(data_dir);
    match seed {
        Some(seed) if file.path().exists() => {
            tracing::info!(
                "using the persisted configuration {} (--config {} seeds the first boot only)",
                file.path().display(),
                seed.display()
            );
            Ok(Config::default())
        }
        Some(seed) => {
            let text = std::fs::read_to_string(seed)
                .with_context(|| format!("cannot read {}", seed.display()))?;
            let config = crate::settings::parse_yaml(&text)
                .map_err(|err| anyhow::anyhow!("{}: {}", seed.display(), err.message))?;
            file.write_text(&text)
                .map_err(|err| anyhow::anyhow!(err.message))?;
            Ok(config)
        }
        None => Ok(Config::default()),
    }
}

/// Starts a worker over `data_dir` (seeded from `seed` on a first boot),
/// joined to the iii engine of `iii` if given.
async fn start(
    data_dir: &Path,
    seed: Option<&Path>,
    iii: Option<&IiiOptions>,
) -> anyhow::Result<Worker> {
    let config = seed_config(data_dir, seed)?;
    let worker = Worker::start(WorkerOptions {
        data_dir: data_dir.to_path_buf(),
        config,
        python_wasm: None,
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    if let Some(iii) = iii {
        worker
            .join_iii(iii)
            .map_err(|err| anyhow::anyhow!(err.message))?;
        tracing::info!(
            "code-runner joining the iii engine at {} as {}",
            iii.url,
            iii.worker_name
        );
    }
    Ok(worker)
}

/// `code-runner mcp`: one MCP client on stdio, until it closes stdin or a
/// signal comes.
async fn mcp(
    data_dir: PathBuf,
    seed: Option<&Path>,
    iii: Option<IiiOptions>,
) -> anyhow::Result<ExitCode> {
    let worker = start(&data_dir, seed, iii.as_ref()).await?;
    tracing::info!(
        "code-runner serving MCP on stdio (data dir {})",
        data_dir.display()
    );
    let served = tokio::select! {
        served = crate::edge::mcp::McpServer::new(worker.clone()).serve_stdio() => served,
        () = shutdown_signal() => Ok(()),
    };
    worker.shutdown().await;
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Where `serve` listens: the API (none with --no-http) and, beside it, `/metrics` alone.
struct Listen {
    api: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
}

async fn serve(
    listen: Listen,
    data_dir: PathBuf,
    seed: Option<&Path>,
    iii: Option<IiiOptions>,
    http: HttpOptions,
) -> anyhow::Result<ExitCode> {
    http.validate()
        .map_err(|message| anyhow::anyhow!(message))?;
    let worker = start(&data_dir, seed, iii.as_ref()).await?;
    if let Some(addr) = listen.metrics {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} for the metrics"))?;
        tracing::info!("metrics on http://{}/metrics", listener.local_addr()?);
        let (worker, http) = (worker.clone(), http.clone());
        tokio::spawn(async move {
            if let Err(err) =
                crate::edge::http::serve_metrics(listener, worker, http, shutdown_signal()).await
            {
                tracing::error!("the metrics listener stopped: {err}");
            }
        });
    }
    match listen.api {
        Some(listen) => {
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("cannot listen on {listen}"))?;
            tracing::info!(
                "code-runner serving on http://{} (open it for the playground; data dir {})",
                listener.local_addr()?,
                data_dir.display()
            );
            crate::edge::http::serve_with(listener, worker.clone(), http, shutdown_signal())
                .await?;
        }
        None => shutdown_signal().await,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `--config` is read (and refused by key) only while nothing is persisted.
    #[test]
    fn config_is_read_only_for_a_first_boot() {
        let dir = tempfile::tempdir().unwrap();
        let seed = dir.path().join("seed.yaml");
        let data = dir.path().join("data");
        let persisted = crate::settings::ConfigFile::in_data_dir(&data)
            .path()
            .to_path_buf();
        std::fs::write(&seed, "max_runtime: 9\n").unwrap();
        let refused = seed_config(&data, Some(&seed)).unwrap_err().to_string();
        assert!(refused.contains("max_runtime"), "{refused}");
        assert!(!persisted.exists(), "an invalid seed is not persisted");

        std::fs::write(&seed, "# mine\nmax_runtimes: 4\n").unwrap();
        assert_eq!(seed_config(&data, Some(&seed)).unwrap().max_runtimes, 4);
        let kept = std::fs::read_to_string(&persisted).unwrap();
        assert_eq!(kept, "# mine\nmax_runtimes: 4\n", "persisted as written");

        std::fs::write(&seed, "max_runtime: 9\n").unwrap();
        assert!(
            seed_config(&data, Some(&seed)).is_ok(),
            "not read once persisted"
        );
        assert_eq!(std::fs::read_to_string(&persisted).unwrap(), kept);
    }
}
