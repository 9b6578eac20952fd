//! Builds the console UI (`ui/` → `ui/dist/`) that `src/ui.rs` embeds.
//!
//! `ui/dist/` is not committed: when it is missing or older than any source
//! under `ui/`, this runs `npm ci` (when `node_modules` is missing or behind the
//! lock file) and `npm run build` there. `SKIP_UI_BUILD=1` uses `ui/dist/` as it
//! is (built elsewhere, or by a `npm run watch` loop). Watched: the sources, the
//! lock file and the outputs, never `node_modules`.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a build script talks to cargo on stdout and to people on stderr"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::SystemTime;

/// What `npm run build` writes, relative to `ui/dist/`; `src/ui.rs` embeds each.
const OUTPUTS: [&str; 5] = [
    "code-runner/page.js",
    "code-runner/styles.css",
    "playground/playground.js",
    "playground/playground.css",
    "playground/index.html",
];

/// What the outputs are built from, relative to `ui/`.
const INPUTS: [&str; 5] = [
    "src",
    "package.json",
    "package-lock.json",
    "build.mjs",
    "tsconfig.json",
];

fn main() -> ExitCode {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let ui = manifest.join("../../ui");
    let dist = ui.join("dist");
    println!("cargo:rerun-if-env-changed=SKIP_UI_BUILD");
    for input in INPUTS {
        println!("cargo:rerun-if-changed={}", ui.join(input).display());
    }
    for output in OUTPUTS {
        println!("cargo:rerun-if-changed={}", dist.join(output).display());
    }

    let built = oldest_output(&dist);
    if std::env::var_os("SKIP_UI_BUILD").is_some_and(|v| v == "1") {
        if built.is_none() {
            return fail(&format!(
                "SKIP_UI_BUILD=1, but {} is incomplete: build it with `cd ui && npm ci && npm run build`, or unset SKIP_UI_BUILD",
                dist.display()
            ));
        }
        return ExitCode::SUCCESS;
    }
    let sources = newest_input(&ui);
    if let (Some(built), Some(sources)) = (built, sources)
        && built >= sources
    {
        return ExitCode::SUCCESS;
    }

    let installed = modified(&ui.join("node_modules/.package-lock.json"));
    let locked = modified(&ui.join("package-lock.json"));
    if (installed.is_none() || installed < locked)
        && let Err(message) = npm(&ui, &["ci", "--no-audit", "--no-fund"])
    {
        return fail(&message);
    }
    if let Err(message) = npm(&ui, &["run", "build"]) {
        return fail(&message);
    }
    // The outputs take the sources' time, so cargo does not take this build's
    // own writes for an edit and run the script (and recompile) once more.
    if let Some(sources) = newest_input(&ui) {
        for output in OUTPUTS {
            if let Ok(file) = std::fs::File::options().write(true).open(dist.join(output)) {
                let _ = file.set_modified(sources);
            }
        }
    }
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("error: building the console UI: {message}");
    ExitCode::FAILURE
}

fn npm(dir: &Path, args: &[&str]) -> Result<(), String> {
    let status = Command::new("npm")
        .args(args)
        .current_dir(dir)
        .status()
        .map_err(|err| {
            if err.kind() == std::io::ErrorKind::NotFound {
                "npm was not found on PATH: install Node.js 20+ with npm (the UI is built from the npm registry), \
                 or build ui/dist/ elsewhere and set SKIP_UI_BUILD=1"
                    .to_string()
            } else {
                format!("cannot run npm: {err}")
            }
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`npm {}` in {} failed ({status}); its output is above",
            args.join(" "),
            dir.display()
        ))
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The oldest output's time, or `None` when one is missing.
fn oldest_output(dist: &Path) -> Option<SystemTime> {
    OUTPUTS
        .iter()
        .map(|output| modified(&dist.join(output)))
        .try_fold(None::<SystemTime>, |oldest, time| {
            let time = time?;
            Some(Some(oldest.map_or(time, |oldest| oldest.min(time))))
        })
        .flatten()
}

/// The newest time among the inputs (directories walked).
fn newest_input(ui: &Path) -> Option<SystemTime> {
    let mut newest = None;
    let mut stack: Vec<PathBuf> = INPUTS.iter().map(|input| ui.join(input)).collect();
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.filter_map(|entry| entry.ok().map(|e| e.path())));
            }
        } else if let Ok(time) = meta.modified() {
            newest = newest.max(Some(time));
        }
    }
    newest
}
