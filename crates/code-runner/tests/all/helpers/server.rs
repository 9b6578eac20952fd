//! [`Server`]: a worker on `127.0.0.1:0` behind real HTTP, in this process or
//! as the real binary, with the calls tests make of it in either language.

use std::path::PathBuf;

use code_runner::http::HttpOptions;
use code_runner::{Worker, WorkerOptions};
use code_runner_core::Config;
use serde_json::{Value, json};

use super::{
    Answer, REGISTER, RUN, ServeProcess, TEARDOWN, answer, client, dirs_holding, merge, post_json,
    post_raw, tempdir,
};

/// `yaml` with `isolation: process` added when the test run asks for it
/// (`CODE_RUNNER_TEST_ISOLATION=process`, to pass a suite such as the
/// fault matrix through sandbox processes), and the sandbox program set to
/// the real binary (this test binary is not `code-runner`).
pub fn with_test_isolation(yaml: &str) -> String {
    code_runner::set_sandbox_program(env!("CARGO_BIN_EXE_code-runner").into());
    let asked = std::env::var("CODE_RUNNER_TEST_ISOLATION").is_ok_and(|mode| mode == "process");
    match asked && !yaml.contains("isolation:") {
        true => format!("isolation: process\n{yaml}"),
        false => yaml.to_string(),
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
        let yaml = with_test_isolation(yaml);
        let config = Config::from_yaml(&yaml).expect("test configuration");
        let temp = tempdir();
        let data_dir = temp.path().join("data");
        let worker = Worker::start(WorkerOptions {
            data_dir: data_dir.clone(),
            config,
            python_wasm: None,
        })
        .await
        .expect("worker starts (python.wasm: run scripts/fetch-python-wasm)");
        // The worker answers at once; its tests expect both engines loaded.
        worker.ready().await;
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
            Backend::Process(process) => process.id(),
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

    /// Live runtimes on this in-process worker, as a closure for polling.
    pub fn live(&self) -> impl Fn() -> u64 + use<> {
        let worker = self.worker().clone();
        move || {
            worker.health()["runtimes"]["live"]
                .as_u64()
                .unwrap_or(u64::MAX)
        }
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

    /// `GET path` on a connection of its own: at a connection cap the
    /// server may close an idle keep-alive connection, which a pooled
    /// client would only learn of by failing its next request on it.
    pub async fn get_fresh(&self, path: &str) -> Answer {
        let client = reqwest::Client::builder()
            .timeout(super::CALL_DEADLINE)
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let response = client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap_or_else(|err| panic!("GET {path}: {err}"));
        answer(response).await
    }

    /// A one-shot python run of `code`.
    pub async fn run(&self, code: &str) -> Answer {
        self.run_in("python", code).await
    }

    /// A python run of `code` with extra payload fields merged in.
    pub async fn run_with(&self, code: &str, extra: Value) -> Answer {
        self.run_in_with("python", code, extra).await
    }

    /// A one-shot run of `code` in `lang`.
    pub async fn run_in(&self, lang: &str, code: &str) -> Answer {
        self.run_in_with(lang, code, json!({})).await
    }

    /// A run of `code` in `lang` with extra payload fields merged in.
    pub async fn run_in_with(&self, lang: &str, code: &str, extra: Value) -> Answer {
        let mut payload = json!({"lang": lang, "code": code});
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
        self.keep_in("python", code).await
    }

    /// Starts a kept python runtime with `code` and extra payload fields.
    pub async fn keep_with(&self, code: &str, extra: Value) -> String {
        self.keep_in_with("python", code, extra).await
    }

    /// Starts a kept `lang` runtime with `code` and returns its id.
    pub async fn keep_in(&self, lang: &str, code: &str) -> String {
        self.keep_in_with(lang, code, json!({})).await
    }

    /// Starts a kept `lang` runtime with `code` and extra payload fields.
    pub async fn keep_in_with(&self, lang: &str, code: &str, extra: Value) -> String {
        let mut payload = json!({"keep": true});
        merge(&mut payload, extra);
        let answer = self.run_in_with(lang, code, payload).await;
        let body = answer.ok();
        assert_eq!(body["exit_code"], 0, "the keep run failed: {body}");
        body["runtime_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a kept run returns a runtime_id: {body}"))
            .to_string()
    }

    /// Registers `lang` `source` as `id` with `register_function`; the answer.
    pub async fn register(&self, lang: &str, id: &str, source: &str) -> Answer {
        self.call(
            REGISTER,
            json!({"function_id": id, "lang": lang, "source": source}),
        )
        .await
    }

    /// Registers `lang` `source` as `id` and asserts it was.
    pub async fn registered(&self, lang: &str, id: &str, source: &str) {
        let answer = self.register(lang, id, source).await;
        assert_eq!(answer.ok(), &json!({"function_id": id, "registered": true}));
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
