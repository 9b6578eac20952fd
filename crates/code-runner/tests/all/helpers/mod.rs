//! Shared helpers: a worker served over real HTTP (in this process or as the
//! real binary), calls that keep status and body together, and the
//! assertions every area repeats.

pub mod engine;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use code_runner::http::HttpOptions;
use code_runner::{Worker, WorkerOptions};
use code_runner_core::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

pub const INVALID_REQUEST: &str = "code-runner::invalid_request";
pub const RUNTIME_NOT_FOUND: &str = "code-runner::runtime_not_found";
pub const EXPIRED: &str = "code-runner::expired";
pub const CAPACITY: &str = "code-runner::capacity";
pub const TIMEOUT: &str = "code-runner::timeout";
pub const RESOURCE_EXHAUSTED: &str = "code-runner::resource_exhausted";
pub const FUNCTION_NOT_FOUND: &str = "function_not_found";

pub const RUN: &str = "code-runner::run";
pub const TEARDOWN: &str = "code-runner::teardown";
pub const FUNCTIONS_INFO: &str = "engine::functions::info";

/// Longest any single HTTP call may take before the test calls it a hang.
const CALL_DEADLINE: Duration = Duration::from_secs(120);
/// Longest the real binary may take to start serving.
const BOOT_DEADLINE: Duration = Duration::from_secs(60);

/// One HTTP answer: the status and the JSON body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// The body of a 200, or a panic showing the error.
    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "expected 200, got {}: {}",
            self.status,
            self.body
        );
        &self.body
    }

    /// The error's code, if the answer is an error.
    pub fn error_code(&self) -> Option<&str> {
        self.body["error"]["code"].as_str()
    }

    /// The error's message, or "".
    pub fn error_message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }

    /// Asserts an error: its `code` first, then that its message contains `part`.
    #[track_caller]
    pub fn assert_error(&self, code: &str, part: &str) {
        assert_eq!(
            self.error_code(),
            Some(code),
            "expected error {code}, got HTTP {}: {}",
            self.status,
            self.body
        );
        assert!(
            !self.status.is_success(),
            "an error must not be a 2xx: {}",
            self.status
        );
        assert!(
            self.error_message().contains(part),
            "message of {code} should contain {part:?}: {:?}",
            self.error_message()
        );
    }
}

/// How a [`Server`] runs its worker.
enum Backend {
    /// A `Worker` in this process, served by `code_runner::http::serve`.
    InProcess {
        worker: Worker,
        /// Dropping it stops the listener.
        _stop: tokio::sync::oneshot::Sender<()>,
    },
    /// The real `code-runner serve` binary.
    Process(ServeProcess),
}

/// A worker on `127.0.0.1:0` behind real HTTP, with its own data directory.
pub struct Server {
    pub url: String,
    pub data_dir: PathBuf,
    client: reqwest::Client,
    backend: Backend,
    _temp: tempfile::TempDir,
}

impl Server {
    /// An in-process worker with the default configuration.
    pub async fn start() -> Server {
        Server::with_config("").await
    }

    /// An in-process worker configured by `yaml` (the configuration file's format).
    pub async fn with_config(yaml: &str) -> Server {
        Server::with_http(yaml, HttpOptions::default()).await
    }

    /// An in-process worker configured by `yaml`, served with `http`'s edge rules.
    pub async fn with_http(yaml: &str, http: HttpOptions) -> Server {
        let config = Config::from_yaml(yaml).expect("test configuration");
        let temp = tempdir();
        let data_dir = temp.path().join("data");
        let worker = Worker::start(WorkerOptions {
            data_dir: data_dir.clone(),
            config,
            python_wasm: None,
        })
        .await
        .expect("worker starts (python.wasm: run scripts/fetch-python-wasm)");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(code_runner::http::serve_with(
            listener,
            worker.clone(),
            http,
            async {
                let _ = stopped.await;
            },
        ));
        Server {
            url,
            data_dir,
            client: client(),
            backend: Backend::InProcess {
                worker,
                _stop: stop,
            },
            _temp: temp,
        }
    }

    /// The real binary serving a fresh data directory seeded with `yaml`: a
    /// guest that aborted the host would end that process, not the test run.
    pub async fn process(yaml: &str) -> Server {
        let temp = tempdir();
        let data_dir = temp.path().join("data");
        let config = temp.path().join("config.yaml");
        std::fs::write(&config, yaml).unwrap();
        let process = ServeProcess::spawn(&data_dir, Some(&config));
        Server {
            url: process.url.clone(),
            data_dir,
            client: client(),
            backend: Backend::Process(process),
            _temp: temp,
        }
    }

    /// `host:port` of the listener, for raw TCP clients.
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("http://").to_string()
    }

    /// The pid of the subprocess behind this server; panics for an in-process one.
    pub fn pid(&self) -> u32 {
        match &self.backend {
            Backend::Process(process) => process.child.id(),
            Backend::InProcess { .. } => panic!("an in-process server has no pid of its own"),
        }
    }

    /// What the subprocess behind this server logged so far; panics for an in-process one.
    pub fn log(&self) -> String {
        match &self.backend {
            Backend::Process(process) => process.log(),
            Backend::InProcess { .. } => panic!("an in-process server logs into the test's own"),
        }
    }

    /// The in-process worker; panics for a subprocess server.
    pub fn worker(&self) -> &Worker {
        match &self.backend {
            Backend::InProcess { worker, .. } => worker,
            Backend::Process(_) => panic!("a subprocess server has no in-process worker"),
        }
    }

    /// Panics if the subprocess behind this server has exited.
    #[track_caller]
    pub fn assert_alive(&mut self) {
        if let Backend::Process(process) = &mut self.backend {
            process.assert_alive();
        }
    }

    /// The runtime directories under `<data_dir>/runtimes` whose `/work` holds `name`.
    ///
    /// Runs mark their `/work` with a file and tests look for that: the
    /// directory also holds pre-booted (pooled) interpreters' empty `/work`s,
    /// which are no run's leftovers.
    pub fn dirs_holding(&self, name: &str) -> Vec<PathBuf> {
        dirs_holding(&self.data_dir, name)
    }

    /// `POST /v1/call/{function_id}` with a JSON payload.
    pub async fn call(&self, function_id: &str, payload: Value) -> Answer {
        post_json(&self.client, &self.url, function_id, &payload).await
    }

    /// `POST /v1/call/{function_id}` with raw body bytes.
    pub async fn post_raw(&self, function_id: &str, body: Vec<u8>) -> Answer {
        post_raw(&self.client, &self.url, function_id, body).await
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Answer {
        let response = self
            .client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap_or_else(|err| panic!("GET {path}: {err}"));
        answer(response).await
    }

    /// A one-shot python run of `code`.
    pub async fn run(&self, code: &str) -> Answer {
        self.call(RUN, json!({"lang": "python", "code": code}))
            .await
    }

    /// A python run of `code` with extra payload fields merged in.
    pub async fn run_with(&self, code: &str, extra: Value) -> Answer {
        let mut payload = json!({"lang": "python", "code": code});
        merge(&mut payload, extra);
        self.call(RUN, payload).await
    }

    /// A run of `code` on the kept runtime `id`.
    pub async fn run_on(&self, id: &str, code: &str) -> Answer {
        self.call(RUN, json!({"runtime_id": id, "code": code}))
            .await
    }

    /// Starts a kept python runtime with `code` and returns its id.
    pub async fn keep(&self, code: &str) -> String {
        self.keep_with(code, json!({})).await
    }

    /// Starts a kept python runtime with `code` and extra payload fields.
    pub async fn keep_with(&self, code: &str, extra: Value) -> String {
        let mut payload = json!({"keep": true});
        merge(&mut payload, extra);
        let answer = self.run_with(code, payload).await;
        let body = answer.ok();
        assert_eq!(body["exit_code"], 0, "the keep run failed: {body}");
        body["runtime_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a kept run returns a runtime_id: {body}"))
            .to_string()
    }

    /// Tears down the kept runtime `id`.
    pub async fn teardown(&self, id: &str) -> Answer {
        self.call(TEARDOWN, json!({"runtime_id": id})).await
    }

    /// The worker's normal service, after whatever the test did to it:
    /// a one-shot `result = 2 + 2` answers 4.
    pub async fn assert_still_serves(&self) {
        let answer = self.run("result = 2 + 2").await;
        let body = answer.ok();
        assert_eq!(body["result"], 4, "{body}");
        assert_eq!(body["exit_code"], 0, "{body}");
    }
}

/// Merges the fields of `extra` (an object) into `target` (an object).
pub fn merge(target: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (target.as_object_mut(), extra) {
        target.extend(extra);
    }
}

/// An HTTP client whose every call has a deadline, so a hang fails the test.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(CALL_DEADLINE)
        .build()
        .unwrap()
}

pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    function_id: &str,
    payload: &Value,
) -> Answer {
    post_raw(
        client,
        url,
        function_id,
        serde_json::to_vec(payload).unwrap(),
    )
    .await
}

pub async fn post_raw(
    client: &reqwest::Client,
    url: &str,
    function_id: &str,
    body: Vec<u8>,
) -> Answer {
    let response = client
        .post(format!("{url}/v1/call/{function_id}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|err| panic!("POST {function_id}: {err}"));
    answer(response).await
}

async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status();
    let bytes = response.bytes().await.expect("response body");
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|err| {
        panic!(
            "HTTP {status} answered non-JSON ({err}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    Answer { status, body }
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("code-runner-test-")
        .tempdir()
        .unwrap()
}

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

/// Polls `condition` every 20 ms until it holds; panics with `what` after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
        let mut command = binary();
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
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("serving on http://").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("").to_string();
                    if let Some(found) = found.take() {
                        let _ = found.send(addr);
                    }
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
