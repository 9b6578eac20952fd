//! A real iii engine per test: the binary from `III_BIN` or `../shared/iii/iii`,
//! started in its own temporary directory on a free loopback port, plus the
//! `iii trigger` CLI and code-runner workers joined to it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Longest an engine may take to log that it listens (a busy 2-core machine).
const ENGINE_READY: Duration = Duration::from_secs(60);

/// The engine binary, or a panic that says how to get one.
pub fn iii_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("III_BIN") {
        return PathBuf::from(path);
    }
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/iii/iii");
    assert!(
        shared.exists(),
        "no iii engine binary: set III_BIN to one, or put iii 0.23.0-rc.4 at {} \
         (the project's CI provides it beside the clone)",
        shared.display()
    );
    shared
}

/// A free port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running engine; killed on drop.
pub struct EngineProc {
    pub port: u16,
    pub dir: tempfile::TempDir,
    child: Option<Child>,
}

impl EngineProc {
    /// Starts an engine in a fresh directory and waits until it listens.
    pub fn start() -> EngineProc {
        let dir = tempfile::Builder::new()
            .prefix("iii-engine-")
            .tempdir()
            .unwrap();
        let mut engine = EngineProc {
            port: free_port(),
            dir,
            child: None,
        };
        engine.spawn();
        engine
    }

    /// `ws://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let config = format!(
            "workers:\n  - name: iii-worker-manager\n    config:\n      host: 127.0.0.1\n      port: {}\n",
            self.port
        );
        std::fs::write(self.dir.path().join("config.yaml"), config).unwrap();
        let log_path = self.dir.path().join("engine.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(iii_bin())
            .args(["-c", "config.yaml", "--no-update-check"])
            .current_dir(self.dir.path())
            .env("III_TELEMETRY_ENABLED", "false")
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("start the iii engine");
        self.child = Some(child);
        let ready = format!("Engine listening on address: 127.0.0.1:{}", self.port);
        let until = Instant::now() + ENGINE_READY;
        loop {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            assert!(
                !text.contains("is already in use"),
                "port {} is busy: {text}",
                self.port
            );
            if text.contains(&ready) {
                return;
            }
            assert!(Instant::now() < until, "the engine did not listen: {text}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the engine (SIGKILL: an outage, not a goodbye).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills and starts the engine again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill();
        // Keep the old log for post-mortems; the new one starts empty.
        let log = self.dir.path().join("engine.log");
        let _ = std::fs::rename(&log, self.dir.path().join("engine.log.old"));
        self.spawn();
    }

    /// `iii trigger ID --json PAYLOAD` against this engine: the answer, or
    /// the error body the CLI printed.
    pub fn trigger(&self, function_id: &str, payload: &Value) -> Result<Value, Value> {
        trigger_cli(self.port, function_id, &["--json", &payload.to_string()])
    }

    /// `iii trigger ID key=value…` against this engine.
    pub fn trigger_kv(&self, function_id: &str, args: &[&str]) -> Result<Value, Value> {
        trigger_cli(self.port, function_id, args)
    }

    /// Calls `function_id` until it stops answering `function_not_found`
    /// (registrations land shortly after a worker connects), then returns
    /// the first real answer.
    pub fn trigger_when_registered(
        &self,
        function_id: &str,
        payload: &Value,
    ) -> Result<Value, Value> {
        let until = Instant::now() + ENGINE_READY;
        loop {
            let answer = self.trigger(function_id, payload);
            let missing = matches!(&answer, Err(e) if is_not_found(e));
            if !missing || Instant::now() >= until {
                return answer;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for EngineProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether an engine error says the function is not (yet) registered.
pub fn is_not_found(error: &Value) -> bool {
    let code = error["code"].as_str().unwrap_or("");
    let message = error["message"].as_str().unwrap_or("");
    code.eq_ignore_ascii_case("function_not_found")
        || message.contains("not found")
        || message.contains("is not registered")
}

fn trigger_cli(port: u16, function_id: &str, args: &[&str]) -> Result<Value, Value> {
    let output = Command::new(iii_bin())
        .arg("trigger")
        .arg(function_id)
        .args(args)
        .args(["--address", "127.0.0.1", "--port", &port.to_string()])
        .args(["--timeout-ms", "60000"])
        .env("III_TELEMETRY_ENABLED", "false")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run iii trigger");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        if stdout.trim().is_empty() {
            return Ok(Value::Null);
        }
        return Ok(serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("iii trigger printed non-JSON ({e}): {stdout}")));
    }
    let body = stderr.trim().trim_start_matches("Error: ");
    Err(serde_json::from_str(body)
        .unwrap_or_else(|_| serde_json::json!({ "code": "cli", "message": stderr.trim() })))
}

/// A `code-runner serve --engine` process; killed on drop.
pub struct WorkerProc {
    child: Child,
    _data_dir: tempfile::TempDir,
    pub log: PathBuf,
}

impl WorkerProc {
    /// Starts the real binary joined to `engine` as `name`, without HTTP.
    pub fn start(engine: &EngineProc, name: &str) -> WorkerProc {
        WorkerProc::with_config(engine, name, "")
    }

    /// As [`WorkerProc::start`], with `yaml` seeding the configuration.
    pub fn with_config(engine: &EngineProc, name: &str, yaml: &str) -> WorkerProc {
        WorkerProc::with_log_filter(engine, name, yaml, "info,code_runner=debug")
    }

    /// As [`WorkerProc::with_config`], logging with `CODE_RUNNER_LOG=filter`.
    pub fn with_log_filter(
        engine: &EngineProc,
        name: &str,
        yaml: &str,
        filter: &str,
    ) -> WorkerProc {
        WorkerProc::with_args(engine, name, yaml, filter, &[])
    }

    /// As [`WorkerProc::with_log_filter`], with `extra` arguments to `serve`.
    pub fn with_args(
        engine: &EngineProc,
        name: &str,
        yaml: &str,
        filter: &str,
        extra: &[&str],
    ) -> WorkerProc {
        let data_dir = tempfile::Builder::new()
            .prefix("code-runner-worker-")
            .tempdir()
            .unwrap();
        let log = data_dir.path().join("worker.log");
        let config = data_dir.path().join("config.yaml");
        std::fs::write(&config, yaml).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_code-runner"))
            .args(["serve", "--no-http", "--data-dir"])
            .arg(data_dir.path().join("data"))
            .arg("--config")
            .arg(&config)
            .args(["--engine", &engine.url(), "--worker-name", name])
            .args(extra)
            .env("CODE_RUNNER_LOG", filter)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start code-runner serve --engine");
        WorkerProc {
            child,
            _data_dir: data_dir,
            log,
        }
    }

    /// What the worker logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERMs the worker and waits up to `limit` for it to exit.
    pub fn terminate(&mut self, limit: std::time::Duration) -> std::process::ExitStatus {
        let log = self.log();
        crate::helpers::process::terminate(&mut self.child, limit, &log)
    }

    /// Panics with the log if the process has exited.
    #[track_caller]
    pub fn assert_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("code-runner exited ({status}): {}", self.log());
        }
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
