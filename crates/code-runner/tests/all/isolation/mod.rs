//! `isolation: process` (issue 23): both engines in confined sandbox
//! processes, the seam over a socket. Everything goes through real
//! processes: the real `code-runner` binary in its hidden sandbox role,
//! real V8 and wasmtime inside it, real signals from outside.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::Server;

mod confinement;
mod faults;
mod runs;

/// A worker whose guest code runs in two sandbox processes, with no warm
/// pool (so placement is only what the test starts), configured by `yaml` too.
pub async fn sandboxed(yaml: &str) -> Server {
    sandboxed_in(2, yaml).await
}

/// As [`sandboxed`], with `processes` sandbox processes.
pub async fn sandboxed_in(processes: usize, yaml: &str) -> Server {
    Server::with_config(&format!(
        "isolation: process\nsandbox_processes: {processes}\nwarm_pool: 0\n{yaml}"
    ))
    .await
}

/// `/healthz`'s isolation section.
pub async fn isolation(server: &Server) -> Value {
    server.get("/healthz").await.ok()["engines"]["isolation"].clone()
}

/// The sandbox processes `/healthz` lists: `(pid, runtimes)`.
pub async fn processes(server: &Server) -> Vec<(u32, u64)> {
    isolation(server).await["processes"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|p| {
                    let pid = p["pid"].as_u64().unwrap_or(0) as u32;
                    (pid, p["runtimes"].as_u64().unwrap_or(0))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until `/healthz` lists `count` sandbox processes.
pub async fn wait_for_processes(server: &Server, count: usize) -> Vec<(u32, u64)> {
    for _ in 0..600 {
        let list = processes(server).await;
        if list.len() == count {
            return list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "never {count} sandbox processes: {}",
        isolation(server).await
    );
}

/// A field of `/proc/<pid>/status`, e.g. `Seccomp`.
pub fn status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(|value| value.trim().to_string())
        .unwrap_or_default()
}

/// Sends SIGSEGV to `pid` until it is gone. A real fault kills at once,
/// but a SIGSEGV sent with kill(2) is first taken by the fault handlers
/// the process installs (Rust's stack-overflow handler puts the default
/// action back and returns, as a re-executed faulting instruction would
/// fault again): the second one kills.
pub async fn segfault(pid: u32) {
    for _ in 0..100 {
        let state = status_field(pid, "State");
        if state.is_empty() || state.starts_with('Z') {
            return;
        }
        signal(pid, 11);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("pid {pid} survived SIGSEGV");
}

/// Sends `signal` to `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill takes integers; the pid is a sandbox process of this test's worker.
    let sent = unsafe { libc_kill(pid as i32, signal) };
    let _ = sent;
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}
