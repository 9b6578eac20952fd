//! The real `code-runner` binary: a `serve` process, one-shot commands with a
//! deadline, raw HTTP for what `reqwest` will not send, and what a process
//! leaves on disk and in memory.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::CALL_DEADLINE;

/// Longest the real binary may take to start serving.
const BOOT_DEADLINE: Duration = Duration::from_secs(60);

/// The entries of `<data_dir>/runtimes` (empty when it does not exist).
pub fn runtime_dirs(data_dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(data_dir.join("runtimes")) {
        Ok(entries) => entries.map(|entry| entry.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The entries of `<data_dir>/runtimes` that contain a file `name`.
pub fn dirs_holding(data_dir: &Path, name: &str) -> Vec<PathBuf> {
    runtime_dirs(data_dir)
        .into_iter()
        .filter(|dir| dir.join(name).exists())
        .collect()
}

/// The real `code-runner` binary.
pub fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_code-runner"));
    command.env("NO_COLOR", "1").env("CODE_RUNNER_LOG", "info");
    command
}

/// A `code-runner serve` process on `127.0.0.1:0`; killed when dropped.
pub struct ServeProcess {
    pub url: String,
    child: Child,
    log: Arc<Mutex<String>>,
}

impl ServeProcess {
    /// Starts `serve --data-dir data_dir [--config config]` and waits until it listens.
    pub fn spawn(data_dir: &Path, config: Option<&Path>) -> ServeProcess {
        ServeProcess::spawn_with(data_dir, config, &[])
    }

    /// As [`ServeProcess::spawn`], with more `serve` flags.
    pub fn spawn_with(data_dir: &Path, config: Option<&Path>, flags: &[&str]) -> ServeProcess {
        ServeProcess::spawn_with_env(data_dir, config, flags, &[])
    }

    /// As [`ServeProcess::spawn_with`], with more environment variables.
    pub fn spawn_with_env(
        data_dir: &Path,
        config: Option<&Path>,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> ServeProcess {
        ServeProcess::launch(data_dir, config, flags, env, true)
    }

    /// As [`ServeProcess::spawn_with_env`], back as soon as it listens
    /// (its engines may still be loading).
    pub fn listening(data_dir: &Path, config: Option<&Path>, env: &[(&str, &str)]) -> ServeProcess {
        ServeProcess::launch(data_dir, config, &[], env, false)
    }

    fn launch(
        data_dir: &Path,
        config: Option<&Path>,
        flags: &[&str],
        env: &[(&str, &str)],
        until_settled: bool,
    ) -> ServeProcess {
        let mut command = binary();
        command.envs(env.iter().copied());
        command
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(data_dir)
            .args(flags);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn code-runner serve");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (found, address) = mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut found = Some(found);
            let mut addr = None;
            let mut settled = !until_settled;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("serving on http://").nth(1) {
                    addr = Some(rest.split_whitespace().next().unwrap_or("").to_string());
                }
                // It listens at once and loads its engines meanwhile (the
                // two lines come in either order); its tests expect both.
                settled |= line.contains("engines settled");
                if settled
                    && addr.is_some()
                    && let Some(found) = found.take()
                {
                    let _ = found.send(addr.clone().unwrap_or_default());
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let started = Instant::now();
        loop {
            match address.recv_timeout(Duration::from_millis(50)) {
                Ok(addr) => {
                    return ServeProcess {
                        url: format!("http://{addr}"),
                        child,
                        log,
                    };
                }
                Err(_) => {
                    if let Some(status) = child.try_wait().unwrap() {
                        panic!(
                            "code-runner serve exited with {status} before listening:\n{}",
                            log.lock().unwrap()
                        );
                    }
                    if started.elapsed() > BOOT_DEADLINE {
                        let _ = child.kill();
                        panic!(
                            "code-runner serve did not listen within {BOOT_DEADLINE:?}:\n{}",
                            log.lock().unwrap()
                        );
                    }
                }
            }
        }
    }

    /// The process's pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// What the process logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Panics if the process has exited.
    #[track_caller]
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the server process died ({status}):\n{}", self.log());
        }
    }

    /// SIGTERMs the process and waits up to `limit` for it to exit.
    pub fn terminate(&mut self, limit: Duration) -> ExitStatus {
        let log = self.log();
        terminate(&mut self.child, limit, &log)
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.child.wait().unwrap()
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bin/<program>` of the virtual environment `venv` that scripts/test
/// installs into the target directory; panics saying what installs it
/// (`installs`) when it is missing.
pub fn venv_program(venv: &str, program: &str, installs: &str) -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_code-runner"));
    let path = binary
        .parent()
        .and_then(|release| release.parent())
        .map(|target| target.join(venv).join("bin").join(program))
        .unwrap();
    assert!(
        path.exists(),
        "no {} at {}: scripts/test installs {installs} from PyPI there",
        program,
        path.display()
    );
    path
}

/// A helper server's process (an S3 server, an OTLP receiver): killed and
/// reaped when dropped.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// SIGTERMs `child` and waits up to `limit` for it to exit; panics (with
/// `log`) past that.
pub fn terminate(child: &mut Child, limit: Duration, log: &str) -> ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -TERM failed");
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the process did not exit within {limit:?} of SIGTERM:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `command` to completion within `limit`; kills it and panics past that.
pub fn output_within(command: &mut Command, limit: Duration) -> std::process::Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn code-runner");
    let id = child.id();
    let (done, waited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match waited.recv_timeout(limit) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            // The child is ours: end it by its own pid.
            let _ = Command::new("kill").arg("-9").arg(id.to_string()).status();
            panic!("code-runner did not exit within {limit:?}");
        }
    }
}

/// One request written by hand on a fresh connection (`Connection: close` is
/// added), and the answer read to its end: the status and the body's text.
/// For what `reqwest` will not send: a forged `Host`, a missing header.
pub async fn raw_http(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!("{}\r\nConnection: close\r\n", head.trim_end()).into_bytes();
    if !body.is_empty() {
        request.extend(format!("Content-Length: {}\r\n", body.len()).into_bytes());
    }
    request.extend(b"\r\n");
    request.extend(body);
    stream.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(CALL_DEADLINE, stream.read_to_end(&mut answer))
        .await
        .expect("the server answered in time")
        .expect("the answer reads");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    (status, body.to_string())
}

/// A process's peak resident memory (`VmHWM`), in MiB.
pub fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kib / 1024
}
