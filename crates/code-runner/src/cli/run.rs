//! `code-runner run`: `code-runner::run` with local files attached
//! (`--file LOCAL[=PATH]`) and the collected ones written into a directory
//! (`--collect GLOB --out DIR`), in-process, over HTTP or through an engine.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use base64::Engine;
use clap::Args;
use serde_json::{Map, Value, json};

use super::call::{call_local, call_remote, call_through_iii};
use super::out::write_files;
use crate::bus::names::RUN;
use crate::edge::http::MAX_BODY_BYTES;

/// Largest local file `--file` reads: no request body past the HTTP body
/// cap could carry it (the worker's scratch quota is usually smaller).
pub const MAX_FILE_BYTES: u64 = MAX_BODY_BYTES as u64;

/// `code-runner run`'s flags.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The code to run (or --code-file).
    #[arg(required_unless_present = "code_file")]
    code: Option<String>,
    /// python, node or typescript (default: from --code-file's extension).
    #[arg(long)]
    lang: Option<String>,
    /// Read the code from this file (`-`: standard input).
    #[arg(long, conflicts_with = "code", value_name = "PATH")]
    code_file: Option<PathBuf>,
    /// Attach a local file, written before the code runs under the runtime's root
    /// (python's /work, JavaScript's iii.files) at PATH, by default its file name;
    /// repeatable. Split at the first `=`.
    #[arg(long = "file", value_name = "LOCAL[=PATH]")]
    files: Vec<String>,
    /// Return the files matching this glob (relative to the same root); repeatable.
    #[arg(long = "collect", value_name = "GLOB")]
    collect: Vec<String>,
    /// Write the collected files under this directory (created if missing) and leave
    /// their base64 out of the printed answer. Paths are checked again, nothing is
    /// written through a symlink, and an existing file is refused unless --overwrite.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// With --out: replace files that exist.
    #[arg(long, requires = "out")]
    overwrite: bool,
    /// Keep the runtime: the answer carries its runtime_id.
    #[arg(long)]
    keep: bool,
    /// Run in this kept runtime.
    #[arg(long, value_name = "ID")]
    runtime_id: Option<String>,
    /// The run's timeout in milliseconds (default: the configuration's).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// Base URL of a running server, e.g. http://127.0.0.1:7979.
    #[arg(long, conflicts_with = "engine")]
    url: Option<String>,
    /// Run through the iii engine at this WebSocket address instead.
    #[arg(long)]
    engine: Option<String>,
    /// Data directory for an in-process run (default: a temporary one).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// YAML configuration for an in-process run.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where guest code runs: in-process, or process (confined sandbox
    /// processes); overrides the configuration's `isolation`.
    #[arg(long, value_name = "in-process|process")]
    pub isolation: Option<code_runner_core::Isolation>,
}

/// Runs once, prints the answer as JSON and writes the collected files.
///
/// # Errors
/// Unreadable code or files, an unknown language, an unreachable server,
/// or a collected file that cannot be written safely.
pub async fn run(args: RunArgs) -> anyhow::Result<std::process::ExitCode> {
    let payload = payload(&args)?;
    let answer = match (&args.url, &args.engine) {
        (Some(url), _) => call_remote(url, RUN, &payload).await?,
        (None, Some(engine)) => {
            let wait_ms = args.timeout_ms.unwrap_or(0).saturating_add(60_000);
            call_through_iii(engine, RUN, payload, wait_ms).await?
        }
        (None, None) => call_local(RUN, payload, args.data_dir, args.config.as_deref()).await?,
    };
    let mut answer = match answer {
        Ok(value) => value,
        Err(err) => {
            let text = serde_json::to_string_pretty(&json!({ "error": err }))?;
            writeln!(std::io::stdout().lock(), "{text}")?;
            return Ok(std::process::ExitCode::FAILURE);
        }
    };
    if let Some(out) = &args.out {
        let written = match write_files(&answer, out, args.overwrite) {
            Ok(written) => written,
            Err(err) => {
                // The answer whole (the files' base64 in it), then why writing failed.
                let text = serde_json::to_string_pretty(&answer)?;
                writeln!(std::io::stdout().lock(), "{text}")?;
                return Err(err);
            }
        };
        for file in written {
            let (path, size) = (file.path.display(), file.size);
            writeln!(std::io::stderr().lock(), "wrote {path} ({size} bytes)")?;
        }
        let files = answer.get_mut("files").and_then(Value::as_array_mut);
        for file in files.into_iter().flatten() {
            if file.get("path").and_then(Value::as_str) != Some("")
                && let Some(file) = file.as_object_mut()
            {
                file.remove("base64");
            }
        }
    }
    let text = serde_json::to_string_pretty(&answer)?;
    writeln!(std::io::stdout().lock(), "{text}")?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// The `code-runner::run` payload the flags describe.
fn payload(args: &RunArgs) -> anyhow::Result<Value> {
    let code = match (&args.code, &args.code_file) {
        (Some(code), _) => code.clone(),
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut code = String::new();
            std::io::stdin().read_to_string(&mut code)?;
            code
        }
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?,
        (None, None) => bail!("give the code, or --code-file"),
    };
    let lang = match (&args.lang, &args.code_file) {
        (Some(lang), _) => lang.clone(),
        (None, Some(path)) => lang_of(path)?.to_string(),
        (None, None) => bail!("--lang is required (python, node or typescript)"),
    };
    let mut map = Map::new();
    map.insert("lang".into(), json!(lang));
    map.insert("code".into(), json!(code));
    if args.keep {
        map.insert("keep".into(), json!(true));
    }
    if let Some(id) = &args.runtime_id {
        map.insert("runtime_id".into(), json!(id));
    }
    if let Some(ms) = args.timeout_ms {
        map.insert("timeout_ms".into(), json!(ms));
    }
    if !args.files.is_empty() {
        let files = args.files.iter().map(|spec| attach(spec));
        map.insert("files".into(), files.collect::<anyhow::Result<_>>()?);
    }
    if !args.collect.is_empty() {
        map.insert("collect".into(), json!(args.collect));
    }
    Ok(Value::Object(map))
}

/// The language a code file's extension names.
fn lang_of(path: &Path) -> anyhow::Result<&'static str> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("py") => Ok("python"),
        Some("js" | "mjs") => Ok("node"),
        Some("ts" | "mts") => Ok("typescript"),
        _ => bail!(
            "--lang is required: {} has no known extension",
            path.display()
        ),
    }
}

/// `LOCAL[=PATH]` as a request's file: text when it is UTF-8, else base64.
fn attach(spec: &str) -> anyhow::Result<Value> {
    let (local, remote) = match spec.split_once('=') {
        Some((local, remote)) => (local, remote.to_string()),
        None => {
            let name = Path::new(spec).file_name().and_then(|n| n.to_str());
            let name =
                name.with_context(|| format!("--file {spec}: no file name; use {spec}=PATH"))?;
            (spec, name.to_string())
        }
    };
    let file = std::fs::File::open(local).with_context(|| format!("cannot read {local}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {local}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        bail!(
            "{local}: larger than {} MiB, more than a request carries",
            MAX_FILE_BYTES >> 20
        );
    }
    Ok(match String::from_utf8(bytes) {
        Ok(text) => json!({"path": remote, "text": text}),
        Err(err) => json!({
            "path": remote,
            "base64": base64::engine::general_purpose::STANDARD.encode(err.into_bytes()),
        }),
    })
}
