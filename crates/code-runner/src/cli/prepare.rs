//! `code-runner prepare`: builds, ahead of time, everything a configuration
//! needs before its first run: the operator's python packages (pip, at the
//! first start of a list), python's image (the data stack pre-initialised
//! and compiled for this machine, minutes once; the lean snapshot
//! compiled), and V8's startup snapshot. What it made is cached where
//! `serve`, `mcp` and `call` find it, so their first python run does not
//! wait. The set-up scripts fetch the artifacts themselves
//! (`scripts/fetch-python-wasm`, `scripts/fetch-python-data`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use code_runner_core::{Bindings, Config, Lang};

use crate::runtimes::engines::Engines;

/// Longest `prepare` waits for one engine (a cold 2-core machine made the
/// data image in under five minutes).
const PREPARE_WAIT: Duration = Duration::from_secs(3600);

/// Prepares what the configuration (`--config`, or the data directory's)
/// needs, printing each step; exits non-zero naming what could not be made.
///
/// # Errors
/// An unreadable configuration, or packages that cannot be installed.
pub async fn prepare(data_dir: Option<PathBuf>, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let temp = tempfile::Builder::new()
        .prefix("code-runner-prepare-")
        .tempdir()?;
    let config = read_config(data_dir.as_deref(), config)?;
    let started = Instant::now();
    let say = |text: &str| {
        let _ = writeln!(std::io::stderr().lock(), "prepare: {text}");
    };
    say("installing the configuration's python and node packages (when it names any)");
    let engines = Engines::start(&config, None, temp.path().join("runtimes"), false, |_| {
        Bindings::default()
    })
    .await
    .map_err(|err| anyhow::anyhow!(err.message))?;
    let mut failed = false;
    for lang in [Lang::Node, Lang::Python] {
        say(&format!("loading the {lang} engine"));
        let mut tell = |text: String| say(text.trim_start_matches("[code-runner] ").trim_end());
        match engines.ready(lang, PREPARE_WAIT, &mut tell).await {
            Ok(_) => say(&format!("{lang}: ready")),
            Err(err) => {
                failed = true;
                say(&format!("{lang}: {}", err.message));
            }
        }
    }
    let python = if engines.python_has_data_stack() {
        "python (the data stack)"
    } else {
        "python (the standard library)"
    };
    say(&format!(
        "{} in {} s",
        if failed {
            "not everything could be prepared".to_string()
        } else {
            format!("node and {python} are ready for this configuration")
        },
        started.elapsed().as_secs()
    ));
    engines.drain().await;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The configuration to prepare for: `--config`'s file when given (read,
/// never written into the data directory), else the data directory's
/// persisted one, else the defaults.
fn read_config(data_dir: Option<&Path>, seed: Option<&Path>) -> anyhow::Result<Config> {
    let config = match (seed, data_dir) {
        (Some(seed), _) => {
            let text = std::fs::read_to_string(seed)
                .with_context(|| format!("cannot read {}", seed.display()))?;
            crate::settings::parse_yaml(&text)
                .map_err(|err| anyhow::anyhow!("{}: {}", seed.display(), err.message))?
        }
        (None, Some(dir)) => {
            let file = crate::settings::ConfigFile::in_data_dir(dir);
            if file.path().exists() {
                file.read().map_err(|err| anyhow::anyhow!(err.message))?
            } else {
                Config::default()
            }
        }
        (None, None) => Config::default(),
    };
    config
        .validate()
        .map_err(|err| anyhow::anyhow!(err.message))?;
    Ok(config)
}
