//! `python_packages`: pure-Python wheels from PyPI that the operator adds,
//! installed by pip at start and importable in every python runtime of both
//! interpreters. These tests ask the real PyPI (pip's downloads are cached
//! under the cache directory); without it they fail, they never skip.
//!
//! Every test that loads the data interpreter uses the same list
//! ([`PACKAGES`], three packages the data stack does not have), so the test
//! run makes one image with packages, once.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::helpers::Server;
use crate::helpers::lang::PYTHON_INTERPRETERS;
use crate::helpers::{ServeProcess, binary, output_within};

/// The list every data-interpreter test here configures (one image for all).
/// (`enum34` installs an `enum` module the interpreter's own library has:
/// shadowed in both.)
const PACKAGES: &str = "python_packages: [\"roman==4.2\", \"humanize==4.9.0\", \"text-unidecode==1.3\", \"enum34==1.1.10\"]\n";
/// What a start that installs nothing new may take.
const START_LIMIT: Duration = Duration::from_secs(300);

const USE_ROMAN: &str = "import roman\nresult = roman.toRoman(1987)";

/// A pure-Python package imports in a one-shot and in a kept runtime's
/// first and later turns, in both interpreters, and `/healthz` lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pure_python_package_imports_in_one_shot_and_kept_runtimes_of_both_interpreters() {
    for interpreter in PYTHON_INTERPRETERS {
        let server = Server::with_config(&format!("{interpreter}{PACKAGES}")).await;
        let health = server.get("/healthz").await;
        let engines = &health.ok()["engines"];
        assert_eq!(
            engines["python_packages"],
            json!([
                "enum34==1.1.10",
                "humanize==4.9.0",
                "roman==4.2",
                "text-unidecode==1.3"
            ]),
            "{interpreter}: {}",
            health.body
        );
        shadowing_is_said(&server, interpreter, engines).await;
        let answer = server.run(USE_ROMAN).await;
        assert_eq!(
            answer.ok()["result"],
            "MCMLXXXVII",
            "{interpreter}: {}",
            answer.body
        );
        let id = server
            .keep("import humanize\nresult = humanize.intcomma(1234567)")
            .await;
        let answer = server
            .run_on(
                &id,
                "from text_unidecode import unidecode\n\
                 result = [humanize.intcomma(7654321), unidecode('h\\u00e9llo'), humanize.__file__]",
            )
            .await;
        assert_eq!(
            answer.ok()["result"],
            json!(["7,654,321", "hello", "/packages/humanize/__init__.py"]),
            "{interpreter}: {}",
            answer.body
        );
        // A module the packages do not have is still a clean ModuleNotFoundError.
        let answer = server.run_on(&id, "import no_such_module_here").await;
        let stderr = answer.ok()["stderr"].as_str().unwrap_or_default();
        assert!(
            stderr.contains("ModuleNotFoundError"),
            "{interpreter}: {stderr}"
        );
        // Read-only: a guest cannot change what every runtime imports.
        let answer = server
            .run_on(&id, "open(humanize.__file__, 'a').write('x = 1')")
            .await;
        assert_eq!(
            answer.ok()["exit_code"],
            1,
            "{interpreter}: {}",
            answer.body
        );
        server.teardown(&id).await.ok();
    }
}

/// A listed package whose module the interpreter's own library has is
/// shadowed (the standard library wins over `/packages`), and that is said,
/// not silent: in `/healthz` and in the `run` tool's description a model
/// reads over MCP.
async fn shadowing_is_said(server: &Server, interpreter: &str, engines: &serde_json::Value) {
    let answer = server
        .run("import enum\nresult = enum.__file__.startswith('/packages')")
        .await;
    assert_eq!(
        answer.ok()["result"],
        false,
        "{interpreter}: {}",
        answer.body
    );
    let said = "/packages/enum: the interpreter's own `enum` is what `import enum` gives";
    let shadowed = engines["python_packages_shadowed"].to_string();
    assert!(shadowed.contains(said), "{interpreter}: {engines}");
    let mut session = crate::mcp_tools::client::Session::open(&server.url).await;
    let tools = serde_json::to_string(&session.tools().await).unwrap();
    assert!(tools.contains(said), "{interpreter}: {tools}");
    session.close().await;
}

/// With `isolation: process` the sandbox processes mount the install the
/// worker made (they never run pip), in both interpreters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_processes_import_the_packages_too() {
    for interpreter in PYTHON_INTERPRETERS {
        let server =
            Server::with_config(&format!("isolation: process\n{interpreter}{PACKAGES}")).await;
        let answer = server.run(USE_ROMAN).await;
        assert_eq!(
            answer.ok()["result"],
            "MCMLXXXVII",
            "{interpreter}: {}",
            answer.body
        );
        let id = server.keep("import humanize\nresult = 1").await;
        let answer = server.run_on(&id, "result = humanize.intcomma(1000)").await;
        assert_eq!(
            answer.ok()["result"],
            "1,000",
            "{interpreter}: {}",
            answer.body
        );
        server.teardown(&id).await.ok();
    }
}

fn write_config(dir: &Path, yaml: &str) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// `code-runner serve` with `yaml`, expected to stop before serving: its stderr.
fn failed_start(yaml: &str) -> String {
    let dir = crate::helpers::tempdir();
    let config = write_config(dir.path(), yaml);
    let output = output_within(
        binary()
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(&config),
        START_LIMIT,
    );
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!output.status.success(), "the start went on: {stderr}");
    assert!(!stderr.contains("serving on"), "{stderr}");
    stderr
}

/// `code-runner prepare --config` with `yaml`, expected to fail: its stderr.
fn failed_prepare(yaml: &str) -> String {
    let dir = crate::helpers::tempdir();
    let config = write_config(dir.path(), yaml);
    let output = output_within(
        binary().arg("prepare").arg("--config").arg(&config),
        START_LIMIT,
    );
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!output.status.success(), "prepare succeeded: {stderr}");
    assert!(
        stderr.contains("not everything could be prepared"),
        "{stderr}"
    );
    stderr
}

/// A package with only compiled wheels: `prepare` fails naming it and why;
/// a server with the list serves node at once, and python's runs (and
/// `/healthz`) say which package it could not install and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compiled_wheel_is_refused_naming_the_package_and_why() {
    // (The lean interpreter: the data one has markupsafe in its stack.)
    const LIST: &str = "python_interpreter: lean\npython_packages: [\"markupsafe==2.1.5\"]\n";
    let named = |text: &str| {
        assert!(text.contains("markupsafe==2.1.5 is refused"), "{text}");
        assert!(text.contains("compiled code"), "{text}");
        assert!(text.contains("pure-Python"), "{text}");
    };
    named(&failed_prepare(LIST));
    let dir = crate::helpers::tempdir();
    let config = write_config(dir.path(), LIST);
    let serve = ServeProcess::spawn(&dir.path().join("data"), Some(&config));
    let http = crate::helpers::client();
    let call = async |lang: &str, code: &str| {
        let payload = json!({"lang": lang, "code": code});
        crate::helpers::post_json(&http, &serve.url, "code-runner::run", &payload).await
    };
    let answer = call("node", "return 2 + 2").await;
    assert_eq!(answer.ok()["result"], 4, "{}", answer.body);
    let answer = call("python", "result = 1").await;
    assert_eq!(
        answer.error_code(),
        Some("code-runner::engine"),
        "{}",
        answer.body
    );
    named(answer.error_message());
    let health: serde_json::Value = http
        .get(format!("{}/healthz", serve.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    named(&health["engines"]["python"].to_string());
    named(&serve.log());
}

/// Issue 46: on the data interpreter pip resolves against the stack as it
/// is: a pure package depending on numpy, pandas and matplotlib (folium)
/// installs, with its own pure dependencies, and one the stack has
/// (seaborn) is provided by it, reported, not installed; `/healthz` and the
/// `run` tool's description say which is which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pure_packages_that_depend_on_the_data_stack_install() {
    let server = Server::with_config(
        "python_interpreter: data\npython_packages: [\"seaborn==0.13.2\", \"folium==0.20.0\"]\n",
    )
    .await;
    let health = server.get("/healthz").await;
    let engines = &health.ok()["engines"];
    let listed = |key: &str| {
        engines[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_else(Vec::<String>::new)
    };
    let (installed, provided) = (
        listed("python_packages"),
        listed("python_packages_provided"),
    );
    assert!(
        installed.contains(&"folium==0.20.0".to_string()),
        "{engines}"
    );
    assert!(
        installed.iter().any(|p| p.starts_with("branca==")),
        "{engines}"
    );
    for stack in ["numpy", "pandas", "seaborn", "jinja2", "matplotlib"] {
        assert!(
            !installed
                .iter()
                .any(|p| p.to_lowercase().starts_with(&format!("{stack}=="))),
            "{stack} installed: {engines}"
        );
    }
    assert!(
        provided.contains(&"seaborn==0.13.2".to_string()),
        "{engines}"
    );
    assert!(
        provided.iter().any(|p| p.starts_with("numpy==")),
        "{engines}"
    );
    let answer = server
        .run(
            "import folium, seaborn, numpy\n\
             m = folium.Map(location=[48.85, 2.35], zoom_start=12)\n\
             folium.Marker([48.85, 2.35]).add_to(m)\n\
             html = m.get_root().render()\n\
             result = [folium.__version__, seaborn.__version__, folium.__file__.startswith('/packages'),\n\
                       seaborn.__file__.startswith('/packages'), 'leaflet' in html]",
        )
        .await;
    assert_eq!(
        answer.ok()["result"],
        json!(["0.20.0", "0.13.2", true, false, true]),
        "{}",
        answer.body
    );
    let mut session = crate::mcp_tools::client::Session::open(&server.url).await;
    let tools = serde_json::to_string(&session.tools().await).unwrap();
    assert!(tools.contains("(from the data stack: "), "{tools}");
    assert!(
        tools.contains("seaborn==0.13.2)") || tools.contains("seaborn==0.13.2,"),
        "{tools}"
    );
    session.close().await;
}

/// Issue 46: a list the data stack cannot meet (a pin of another pandas)
/// is refused naming the conflict and the stack's version; on the lean
/// interpreter a pure package that needs pandas is refused naming what it
/// needs and where that is.
#[test]
fn a_conflict_with_the_data_stack_is_refused_naming_it() {
    let stderr = failed_prepare("python_interpreter: data\npython_packages: [\"pandas==2.0.0\"]\n");
    assert!(
        stderr.contains("pandas==2.0.0 cannot be installed on the data interpreter")
            && stderr.contains("conflicts with the data stack")
            && stderr.contains("pandas 3.0.6"),
        "{stderr}"
    );
    let stderr =
        failed_prepare("python_interpreter: lean\npython_packages: [\"pandas-flavor==0.8.1\"]\n");
    assert!(
        stderr.contains("(which pandas-flavor==0.8.1 needs) is refused")
            && stderr.contains("python_interpreter: data"),
        "{stderr}"
    );
}

/// A name PyPI does not have: `prepare` fails naming it, and nothing
/// half-built is left where a later start would take it as done.
#[test]
fn an_unknown_package_is_refused_naming_it() {
    let stderr = failed_prepare("python_packages: [\"code-runner-no-such-package-zq==1.0\"]\n");
    assert!(
        stderr.contains("code-runner-no-such-package-zq==1.0 cannot be installed"),
        "{stderr}"
    );
    for on_stack in [true, false] {
        let key = code_runner_python::packages_dir(
            &["code-runner-no-such-package-zq==1.0".into()],
            on_stack,
        );
        assert!(!key.exists(), "{} was left behind", key.display());
    }
}

/// An option smuggled in as a requirement is refused by validation, before
/// pip: the configuration is wrong, so the server does not start.
#[test]
fn a_requirement_that_is_not_a_name_is_refused_before_pip() {
    let stderr = failed_start("python_packages: [\"--index-url=http://127.0.0.1:9/simple\"]\n");
    assert!(stderr.contains("python_packages"), "{stderr}");
    assert!(!stderr.contains("pip said"), "{stderr}");
}

/// The same list is reused at the next start (its install and the data
/// image made with it: no pip, no pre-initialising); another list is
/// installed afresh under another key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_list_is_reused_and_another_is_installed_afresh() {
    // Made (or already cached) by a start in this process: the image is
    // built at most once here, and the child below finds it.
    let server = Server::with_config(&format!("python_interpreter: data\n{PACKAGES}")).await;
    drop(server);
    let dir = crate::helpers::tempdir();
    let config = write_config(dir.path(), &format!("python_interpreter: data\n{PACKAGES}"));
    let serve = ServeProcess::spawn(&dir.path().join("data"), Some(&config));
    let log = serve.log();
    assert!(log.contains("python_packages: reusing"), "{log}");
    assert!(log.contains("using the cached python data image"), "{log}");
    assert!(!log.contains("pre-initialising"), "{log}");
    assert!(!log.contains("resolving"), "{log}");
    let answer = crate::helpers::post_json(
        &crate::helpers::client(),
        &serve.url,
        "code-runner::run",
        &json!({"lang": "python", "code": USE_ROMAN}),
    )
    .await;
    assert_eq!(answer.ok()["result"], "MCMLXXXVII", "{}", answer.body);
    drop(serve);

    // Another list: another key, installed (here into a fresh cache, so
    // this test always sees the install happen; the lean interpreter keeps
    // it from making a second data image).
    let cache = crate::helpers::tempdir();
    let other = ["roman==4.1".to_string()];
    let config = write_config(
        dir.path(),
        "python_interpreter: lean\npython_packages: [\"roman==4.1\"]\n",
    );
    let output = output_within(
        binary()
            .env("CODE_RUNNER_CACHE_DIR", cache.path())
            .arg("call")
            .arg("--config")
            .arg(&config)
            .arg("code-runner::run")
            .arg("lang=python")
            .arg("code=result = 1"),
        START_LIMIT,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("python_packages: resolving"), "{stderr}");
    let installed = cache.path().join(format!(
        "python-packages-{}",
        code_runner_python::packages_key(&other, false)
    ));
    let lock = std::fs::read_to_string(installed.join("lock.txt")).unwrap_or_default();
    assert!(lock.starts_with("roman==4.1 --hash=sha256:"), "{lock}");
    assert_ne!(
        code_runner_python::packages_key(&other, false),
        code_runner_python::packages_key(&["roman==4.2".to_string()], false)
    );
}

/// Start at once: while python's packages are still being installed (here
/// another process holds their install's lock, as a `prepare` beside the
/// server would), the server answers MCP's `initialize`, `/healthz` says
/// what is being prepared, and node runs. A python run waits for its
/// engine, told on its stream what it waits for, and past the bound is
/// answered `capacity` saying what is left; once the install is done, a
/// waiting run answers and python serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_at_once_while_python_is_prepared() {
    let list = ["roman==4.2".to_string(), "humanize==4.9.0".to_string()];
    // Installed first, so that releasing the lock below readies python at
    // once (the wait under test is the lock's, not PyPI's).
    let installing = list.clone();
    tokio::task::spawn_blocking(move || code_runner_python::install_packages(&installing, false))
        .await
        .unwrap()
        .unwrap();
    let lock_path = code_runner_python::maker_lock_path(
        &code_runner_python::cache_dir(),
        &code_runner_python::packages_lock_entry(&list, false),
    );
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap();
    lock.lock().unwrap();

    let dir = crate::helpers::tempdir();
    let config = write_config(
        dir.path(),
        "python_interpreter: lean\npython_packages: [\"roman==4.2\", \"humanize==4.9.0\"]\n",
    );
    let serve = ServeProcess::listening(&dir.path().join("data"), Some(&config), &[]);
    let http = crate::helpers::client();
    let initialize = http
        .post(format!("{}/mcp", serve.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(initialize.status(), 200);
    let body = initialize.text().await.unwrap();
    assert!(body.contains("serverInfo"), "{body}");

    let health = || async {
        let health: serde_json::Value = crate::helpers::client()
            .get(format!("{}/healthz", serve.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        health["engines"]["python"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let waited = std::time::Instant::now();
    loop {
        let python = health().await;
        if python
            .contains("waiting for another process that is making this python_packages install")
        {
            assert!(python.starts_with("preparing: "), "{python}");
            break;
        }
        assert!(python.starts_with("preparing: "), "{python}");
        assert!(waited.elapsed() < Duration::from_secs(60), "{python}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = crate::helpers::post_json(
        &http,
        &serve.url,
        "code-runner::run",
        &json!({"lang": "node", "code": "return 2 + 2"}),
    )
    .await;
    assert_eq!(answer.ok()["result"], 4, "{}", answer.body);

    // Past the bound: progress on the stream meanwhile, then `capacity`.
    let python = json!({"lang": "python", "code": USE_ROMAN});
    let (sender, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    crate::helpers::stream_run(&serve.url, &python, sender).await;
    let mut seen = Vec::new();
    while let Ok(event) = arrived.try_recv() {
        seen.push(event);
    }
    let told = seen
        .iter()
        .filter(|(event, data)| {
            event == "stderr"
                && data["text"].as_str().is_some_and(|text| {
                    text.contains("python is not ready yet: waiting for another process")
                })
        })
        .count();
    assert!(told >= 2, "{seen:?}");
    let (last, answer) = seen.last().unwrap();
    assert_eq!(last, "error", "{seen:?}");
    assert_eq!(answer["error"]["code"], "code-runner::capacity", "{seen:?}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("python is not ready yet"), "{message}");
    assert!(message.contains("retry"), "{message}");

    // A run waiting when the install ends is answered.
    let (sender, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let url = serve.url.clone();
    let waiting =
        tokio::spawn(async move { crate::helpers::stream_run(&url, &python, sender).await });
    let (event, data) = arrived.recv().await.unwrap();
    assert_eq!(event, "stderr", "{data}");
    lock.unlock().unwrap();
    waiting.await.unwrap();
    let mut last = None;
    while let Ok(event) = arrived.try_recv() {
        last = Some(event);
    }
    let (event, answer) = last.unwrap();
    assert_eq!(event, "result", "{answer}");
    assert_eq!(answer["result"], "MCMLXXXVII", "{answer}");
    assert_eq!(health().await, "ready");
}
