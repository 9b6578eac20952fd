//! The machine's own interpreters (`python3`, `node`) and facts about the machine.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::Outcome;
use super::stats::{Compute, Stats};

/// How to drive one of the machine's interpreters.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// The command a user would type, e.g. `python3`.
    pub program: &'static str,
    /// The flag that runs a program given inline (`-c`, `-e`).
    pub inline_flag: &'static str,
    /// An inline program printing the interpreter's resolved executable.
    pub print_exe: &'static str,
}

impl Tool {
    /// The start-up baseline as a user would type it, e.g. `python3 -c "0"`.
    pub fn start_command(&self) -> String {
        format!("{} {} \"0\"", self.program, self.inline_flag)
    }
}

/// A tool found on this machine.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    /// The command looked up.
    pub program: String,
    /// The real executable behind it (a version manager's shim is skipped).
    pub executable: PathBuf,
    /// Its `--version` line.
    pub version: String,
}

/// Finds `tool`, resolving shims to the real interpreter so that start-up
/// figures are the interpreter's, not the shim's.
pub fn find(tool: &Tool) -> Outcome<Found> {
    let output = Command::new(tool.program)
        .args([tool.inline_flag, tool.print_exe])
        .stdin(Stdio::null())
        .output()
        .map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => "not installed".to_string(),
            _ => format!("cannot run {}: {err}", tool.program),
        })?;
    if !output.status.success() {
        return Err(format!("{} does not run ({})", tool.program, output.status));
    }
    let executable = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let version = Command::new(&executable)
        .arg("--version")
        .output()
        .map(|out| {
            let text = if out.stdout.is_empty() {
                out.stderr
            } else {
                out.stdout
            };
            String::from_utf8_lossy(&text).trim().to_string()
        })
        .unwrap_or_default();
    Ok(Found {
        program: tool.program.to_string(),
        executable,
        version,
    })
}

/// Spawn + wait of `<exe> <flag> "0"`: what a user pays per call without code-runner.
pub fn process_start(tool: &Tool, found: &Found, warmup: usize, n: usize) -> Outcome<Stats> {
    let mut samples = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let started = Instant::now();
        let status = Command::new(&found.executable)
            .args([tool.inline_flag, "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|err| format!("cannot start {}: {err}", found.executable.display()))?;
        let took = started.elapsed();
        if !status.success() {
            return Err(format!("{} exited {status}", tool.start_command()));
        }
        if i >= warmup {
            samples.push(took);
        }
    }
    Stats::of(&samples).ok_or_else(|| "no samples".to_string())
}

/// Runs `program` (which prints `{"ms": .., "check": ..}` last) `reps` times in fresh processes.
pub fn compute(tool: &Tool, found: &Found, program: &str, reps: usize) -> Outcome<Compute> {
    let mut answers = Vec::with_capacity(reps);
    for _ in 0..reps {
        let output = Command::new(&found.executable)
            .args([tool.inline_flag, program])
            .stdin(Stdio::null())
            .output()
            .map_err(|err| format!("cannot start {}: {err}", found.executable.display()))?;
        if !output.status.success() {
            return Err(format!(
                "{} failed: {}",
                tool.program,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        let answer: Value = serde_json::from_str(last)
            .map_err(|err| format!("{} printed {last:?}: {err}", tool.program))?;
        answers.push(answer);
    }
    Compute::of(&answers)
}

/// Facts about this machine and build.
pub fn machine_facts() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let memory_total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| proc_kib(&text, "MemTotal:"))
        .map(|kib| kib as f64 / 1024.0);
    json!({
        "nproc": std::thread::available_parallelism().map(usize::from).unwrap_or(1),
        "cpu_model": cpu_model,
        "kernel": kernel,
        "memory_total_mib": memory_total,
        "code_runner_version": env!("CARGO_PKG_VERSION"),
        "arch": std::env::consts::ARCH,
        "os": std::env::consts::OS,
    })
}

/// Resident set size of this process in KiB (`VmRSS` in /proc/self/status).
pub fn rss_kib() -> Outcome<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|err| format!("cannot read /proc/self/status: {err}"))?;
    proc_kib(&status, "VmRSS:").ok_or_else(|| "no VmRSS in /proc/self/status".to_string())
}

/// A `Key:   1234 kB` line of a /proc file, in KiB.
fn proc_kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc lines parse to KiB.
    #[test]
    fn proc_lines_parse() {
        let text = "Name:\tx\nVmRSS:\t   12345 kB\nVmSwap: 0 kB\n";
        assert_eq!(proc_kib(text, "VmRSS:"), Some(12345));
        assert_eq!(proc_kib(text, "VmHWM:"), None);
    }
}
