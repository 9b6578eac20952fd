//! The real `code-runner` binary: `call` in-process and against a server,
//! `serve`, and what a SIGKILL leaves behind for the next start. The
//! quickstart and its errors run in both languages; the other tests probe
//! with python, the language being incidental to the command line.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{
    CAPACITY, RUN, RUNTIME_NOT_FOUND, ServeProcess, binary, client, dirs_holding, output_within,
    post_json, raw_http, runtime_dirs, tempdir, wait_until,
};

/// Longest a one-shot `call` may take (it boots a worker and an interpreter).
const CALL_LIMIT: Duration = Duration::from_secs(120);

fn stdout_json(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is not JSON ({err}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The README's first command: an in-process call prints the answer as JSON and exits 0.
#[test]
fn call_prints_the_json_answer_and_exits_0() {
    let output = output_within(
        binary().args(["call", RUN, "lang=python", "code=result = 2 + 2"]),
        CALL_LIMIT,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer = stdout_json(&output);
    assert_eq!(answer["result"], 4);
    assert_eq!(answer["exit_code"], 0);
}

/// The issue's "done when", as a new user types it, in each language: the
/// quickstart in-process, then a busy loop and a memory bomb answered by
/// their errors.
#[test]
fn quickstart_timeout_and_memory_bomb_from_the_command_line() {
    for (lang, quickstart, spin, bomb) in [
        (
            "node",
            r#"console.log("hi"); return 2 + 2"#,
            "while(true){}",
            "const a=[]; for(;;) a.push(new Array(1e6).fill(1))",
        ),
        (
            "python",
            "print(\"hi\")\nresult = 2 + 2",
            "while True: pass",
            "blob = bytearray(300 << 20)",
        ),
    ] {
        let output = output_within(
            binary()
                .args(["call", RUN, &format!("lang={lang}")])
                .arg(format!("code={quickstart}")),
            CALL_LIMIT,
        );
        assert!(
            output.status.success(),
            "{lang}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let answer = stdout_json(&output);
        // `duration_ms` and `usage` are measured: present, not predicted.
        assert!(answer["usage"].is_object(), "{lang}: {answer}");
        assert_eq!(
            answer,
            json!({"stdout": "hi\n", "stderr": "", "exit_code": 0, "success": true,
                   "duration_ms": answer["duration_ms"], "usage": answer["usage"], "result": 4}),
            "{lang}"
        );
        for (code, timeout, error) in [
            (spin, "timeout_ms=200", "code-runner::timeout"),
            (bomb, "timeout_ms=30000", "code-runner::resource_exhausted"),
        ] {
            let output = output_within(
                binary()
                    .args(["call", RUN, &format!("lang={lang}"), timeout])
                    .arg(format!("code={code}")),
                CALL_LIMIT,
            );
            assert!(!output.status.success(), "{lang}: {code}");
            assert_eq!(
                stdout_json(&output)["error"]["code"],
                error,
                "{lang}: {code}"
            );
        }
    }
}

/// An error answer is printed as `{"error": …}` and the exit status says so,
/// so scripts can branch on it.
#[test]
fn call_of_an_error_prints_it_and_exits_nonzero() {
    let output = output_within(
        binary().args([
            "call",
            RUN,
            "lang=python",
            "runtime_id=nope",
            "code=result = 1",
        ]),
        CALL_LIMIT,
    );
    assert!(!output.status.success());
    assert_eq!(stdout_json(&output)["error"]["code"], RUNTIME_NOT_FOUND);
}

/// `serve` on a free port answers `call --url`, for results and errors alike.
#[test]
fn serve_answers_call_with_url() {
    let temp = tempdir();
    let server = ServeProcess::spawn(&temp.path().join("data"), None);
    let output = output_within(
        binary().args([
            "call",
            RUN,
            "--url",
            &server.url,
            "lang=python",
            "code=result = 2 + 2",
        ]),
        CALL_LIMIT,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout_json(&output)["result"], 4);
    let output = output_within(
        binary().args([
            "call",
            RUN,
            "--url",
            &server.url,
            "--json",
            r#"{"lang": "python", "code": "result = 1", "runtime_id": "nope"}"#,
        ]),
        CALL_LIMIT,
    );
    assert!(!output.status.success());
    assert_eq!(stdout_json(&output)["error"]["code"], RUNTIME_NOT_FOUND);
}

/// A SIGKILL mid-run must not cost the configuration nor leak runtime
/// directories: a restart without `--config` runs on the persisted copy and
/// clears what the dead process left in `<data>/runtimes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_run_keeps_the_config_and_leaves_no_stale_runtimes() {
    let temp = tempdir();
    let data = temp.path().join("data");
    let seed = temp.path().join("seed.yaml");
    let seeded = "# seeded once by the sigkill test\nmax_runtimes: 2\n";
    std::fs::write(&seed, seeded).unwrap();
    let persisted = data.join("configuration").join("code-runner.yaml");

    let mut first = ServeProcess::spawn(&data, Some(&seed));
    assert_eq!(std::fs::read_to_string(&persisted).unwrap(), seeded);
    let http = client();
    let kept = post_json(
        &http,
        &first.url,
        RUN,
        &json!({"lang": "python", "code": "open('/work/f', 'w').write('x')", "keep": true}),
    )
    .await;
    let old_id = kept.ok()["runtime_id"].as_str().unwrap().to_string();
    let running = {
        let url = first.url.clone();
        tokio::spawn(async move {
            client()
                .post(format!("{url}/v1/call/{RUN}"))
                .json(&json!({
                    "lang": "python",
                    "code": include_str!("../fixtures/sleep_after_marking_started.py"),
                    "timeout_ms": 30_000,
                }))
                .send()
                .await
        })
    };
    wait_until("the long run to start", Duration::from_secs(60), || {
        !dirs_holding(&data, "started").is_empty()
    })
    .await;

    let status = first.kill();
    assert_eq!(status.signal(), Some(9), "{status}");
    assert!(
        running.await.unwrap().is_err(),
        "the killed server cannot have answered the long run"
    );
    assert_eq!(
        dirs_holding(&data, "started").len(),
        1,
        "the kill left the running runtime's files"
    );
    assert_eq!(
        dirs_holding(&data, "f").len(),
        1,
        "the kill left the kept runtime's files"
    );
    let stale = runtime_dirs(&data);

    let second = ServeProcess::spawn(&data, None);
    let survivors: Vec<_> = stale.iter().filter(|dir| dir.exists()).collect();
    assert!(
        survivors.is_empty(),
        "stale runtime directories survived the restart: {survivors:?}"
    );
    assert_eq!(std::fs::read_to_string(&persisted).unwrap(), seeded);
    let forgotten = post_json(
        &http,
        &second.url,
        RUN,
        &json!({"runtime_id": old_id, "code": "result = 1"}),
    )
    .await;
    forgotten.assert_error(RUNTIME_NOT_FOUND, "");
    // max_runtimes: 2 from the persisted file is in force.
    let keep = json!({"lang": "python", "code": "pass", "keep": true});
    post_json(&http, &second.url, RUN, &keep).await.ok();
    post_json(&http, &second.url, RUN, &keep).await.ok();
    post_json(
        &http,
        &second.url,
        RUN,
        &json!({"lang": "python", "code": "result = 1"}),
    )
    .await
    .assert_error(CAPACITY, "max_runtimes 2");
}

/// Two processes on one data directory would delete each other's runtimes:
/// the second refuses to start while the first holds the lock.
#[test]
fn second_server_on_a_locked_data_dir_fails_to_start() {
    let temp = tempdir();
    let data = temp.path().join("data");
    let mut first = ServeProcess::spawn(&data, None);
    let output = output_within(
        binary()
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data),
        Duration::from_secs(60),
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("in use by another code-runner"), "{stderr}");
    first.assert_alive();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answer = runtime.block_on(post_json(
        &client(),
        &first.url,
        RUN,
        &json!({"lang": "python", "code": "result = 2 + 2"}),
    ));
    assert_eq!(answer.ok()["result"], 4);
}

/// Logs written to a file or a pipe carried ANSI colour codes; colour is for
/// terminals only. (`NO_COLOR` is unset here: the pipe alone must decide.)
#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let output = output_within(
        binary()
            .env_remove("NO_COLOR")
            .args(["call", RUN, "--json", "[1]"]),
        CALL_LIMIT,
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ERROR"), "{stderr}");
    assert!(stderr.contains("--json must be a JSON object"), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "colour codes in a piped log: {stderr:?}"
    );
}

/// `serve`'s edge flags reach the server: `--allow-host` admits a name,
/// `--allow-origin` an origin (with CORS), and a malformed origin stops the
/// start with a message naming the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_edge_flags_reach_the_server() {
    let temp = tempdir();
    let data = temp.path().join("data");
    let bad = output_within(
        binary()
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--allow-origin",
                "localhost:5173",
            ])
            .arg("--data-dir")
            .arg(&data),
        CALL_LIMIT,
    );
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("--allow-origin localhost:5173"), "{stderr}");

    let server = ServeProcess::spawn_with(
        &data,
        None,
        &[
            "--allow-host",
            "runner.internal",
            "--allow-origin",
            "http://localhost:5173",
            "--max-connections",
            "8",
        ],
    );
    let addr = server.url.trim_start_matches("http://");
    let healthz = |host: &str, origin: &str| {
        format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}")
    };
    let (status, _) = raw_http(
        addr,
        &healthz("runner.internal:1", "http://localhost:5173"),
        b"",
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = raw_http(
        addr,
        &healthz("evil.example:1", "http://localhost:5173"),
        b"",
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = raw_http(
        addr,
        &healthz("runner.internal:1", "http://localhost:5174"),
        b"",
    )
    .await;
    assert_eq!(status, 403, "{body}");
}

/// Issue 29, item 6: under a host `RLIMIT_FSIZE` (systemd's `LimitFSIZE=`,
/// `ulimit -f`), a guest write past it fails in the guest with `EFBIG`
/// instead of killing the worker (and every tenant's runtimes) with SIGXFSZ.
/// The write fits the `/work` quota (220 MiB of 256), not the host's 200 MiB.
#[test]
fn a_write_past_the_hosts_file_size_limit_fails_in_the_guest_not_the_worker() {
    use std::os::unix::process::CommandExt;
    #[repr(C)]
    struct Rlimit {
        cur: u64,
        max: u64,
    }
    unsafe extern "C" {
        fn setrlimit(resource: i32, limit: *const Rlimit) -> i32;
    }
    const RLIMIT_FSIZE: i32 = 1;
    let code = "code=import errno, os\n\
        fd = os.open('/work/f', os.O_WRONLY | os.O_CREAT)\n\
        try:\n    os.pwrite(fd, b'x', 220 << 20)\n    result = 'written'\n\
        except OSError as err:\n    result = errno.errorcode[err.errno]";
    let mut command = binary();
    command.args(["call", RUN, "lang=python", code]);
    // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            let limit = Rlimit {
                cur: 200 << 20,
                max: 200 << 20,
            };
            match setrlimit(RLIMIT_FSIZE, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let output = output_within(&mut command, CALL_LIMIT);
    assert_eq!(
        output.status.signal(),
        None,
        "the worker survives: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout_json(&output)["result"], "EFBIG");
}

/// `run --file … --collect … --out DIR`: local files in (text and binary,
/// one renamed), the code's new files written under DIR byte for byte with
/// their base64 left out of the printed answer; a second run into the same
/// DIR refuses to replace files (writing none) unless `--overwrite`.
#[test]
fn run_attaches_local_files_and_writes_collected_ones_into_out() {
    let dir = tempdir();
    let binary_bytes: Vec<u8> = (0..=255u8).rev().collect();
    std::fs::write(dir.path().join("data.csv"), "a,1\nb,2\n").unwrap();
    std::fs::write(dir.path().join("raw.bin"), &binary_bytes).unwrap();
    let results = dir.path().join("results");
    let code = "import os\n\
        rows = [line.split(',') for line in open('data.csv').read().split()]\n\
        os.makedirs('out/deep', exist_ok=True)\n\
        open('out/doubled.csv', 'w').write(''.join(f'{k},{int(v) * 2}\\n' for k, v in rows))\n\
        open('out/deep/copy.bin', 'wb').write(open('in/raw.bin', 'rb').read())\n\
        result = len(rows)";
    let run = |extra: &[&str]| {
        let mut command = binary();
        command.current_dir(dir.path()).args([
            "run",
            "--lang",
            "python",
            "--file",
            "data.csv",
            "--file",
            "raw.bin=in/raw.bin",
            "--collect",
            "out/**",
            "--out",
            "results",
        ]);
        output_within(command.args(extra).arg(code), CALL_LIMIT)
    };
    let output = run(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let answer = stdout_json(&output);
    assert_eq!(answer["result"], 2, "{answer}");
    let listed: Vec<(String, u64, bool)> = answer["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no files: {answer}"))
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap_or_default().to_string();
            (
                path,
                f["size"].as_u64().unwrap_or(0),
                f.get("base64").is_some(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("out/deep/copy.bin".to_string(), 256, false),
            ("out/doubled.csv".to_string(), 8, false),
        ]
    );
    assert_eq!(
        std::fs::read(results.join("out/deep/copy.bin")).unwrap(),
        binary_bytes
    );
    assert_eq!(
        std::fs::read_to_string(results.join("out/doubled.csv")).unwrap(),
        "a,2\nb,4\n"
    );
    assert!(stderr.contains("wrote "), "{stderr}");

    std::fs::write(results.join("out/doubled.csv"), "mine").unwrap();
    let refused = run(&[]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("exists") && said.contains("--overwrite"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(results.join("out/doubled.csv")).unwrap(),
        "mine"
    );
    let replaced = run(&["--overwrite"]);
    assert!(
        replaced.status.success(),
        "{}",
        String::from_utf8_lossy(&replaced.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(results.join("out/doubled.csv")).unwrap(),
        "a,2\nb,4\n"
    );
}

/// A hostile `--url` server (issue 44, item 7): an endless answer is
/// refused at the CLI's bound without the CLI holding it (its peak memory
/// stays far below what it was sent), and an answer that lists one path
/// twice writes nothing, `--overwrite` or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_url_bounds_what_a_hostile_server_answers() {
    use axum::routing::post;
    let app = axum::Router::new()
        .route(
            "/huge/v1/call/{id}",
            post(|| async {
                // 1 GiB of one JSON string, in 1 MiB pieces, never ending early.
                let head = futures::stream::once(async {
                    Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"{\"result\":\""))
                });
                let piece = axum::body::Bytes::from(vec![b'x'; 1 << 20]);
                let body = futures::stream::iter((0..1024).map(move |_| Ok(piece.clone())));
                axum::body::Body::from_stream(futures::StreamExt::chain(head, body))
            }),
        )
        .route(
            "/twice/v1/call/{id}",
            post(|| async {
                axum::Json(json!({"stdout": "", "stderr": "", "exit_code": 0, "success": true,
                    "duration_ms": 1, "result": null, "files": [
                        {"path": "a.txt", "mime_type": "text/plain", "size": 2, "base64": "aGk="},
                        {"path": "a.txt", "mime_type": "text/plain", "size": 3, "base64": "YnllCg=="}]}))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempdir();
    let huge = format!("http://{addr}/huge");
    let mut child = binary()
        .args(["run", "--lang", "python", "--url", &huge, "result = 1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let peak = tokio::task::spawn_blocking(move || {
        let mut peak_kib = 0u64;
        while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let hwm = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            match hwm {
                Some(kib) => peak_kib = peak_kib.max(kib),
                None => break, // a zombie: the process has exited
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak_kib
    })
    .await
    .unwrap();
    let output = tokio::task::spawn_blocking(move || {
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        (status, stderr)
    })
    .await
    .unwrap();
    assert!(!output.0.success());
    assert!(output.1.contains("more than 256 MiB"), "{}", output.1);
    assert!(
        peak < 600 << 10,
        "the CLI held {} MiB of a hostile answer",
        peak >> 10
    );

    let twice = format!("http://{addr}/twice");
    for extra in [&[][..], &["--overwrite"][..]] {
        let mut command = binary();
        command.current_dir(dir.path()).args([
            "run",
            "--lang",
            "python",
            "--url",
            &twice,
            "--collect",
            "*",
            "--out",
            "results",
        ]);
        let output = output_within(command.args(extra).arg("result = 1"), CALL_LIMIT);
        assert!(!output.status.success());
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("lists `a.txt` twice"), "{said}");
        assert!(!dir.path().join("results/a.txt").exists());
    }
}

/// A one-call process loads only the engine its call uses: a node call
/// never loads python (on a cold machine that is minutes of image making
/// it does not wait for), a python call does.
#[test]
fn a_call_loads_only_the_engine_it_uses() {
    for (lang, code, loads_python) in [
        ("node", "code=return 6 * 7", false),
        ("python", "code=result = 6 * 7", true),
    ] {
        let output = output_within(
            binary()
                .arg("call")
                .arg(RUN)
                .arg(format!("lang={lang}"))
                .arg(code),
            CALL_LIMIT,
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{lang}: {stderr}");
        assert_eq!(stdout_json(&output)["result"], 42, "{lang}: {stderr}");
        assert_eq!(
            stderr.contains("python runs the"),
            loads_python,
            "{lang}: {stderr}"
        );
    }
}

/// `code-runner prepare` readies what a configuration needs, says so and
/// exits 0; it reads a data directory's persisted configuration and leaves
/// it unchanged; a configuration it cannot read is an error naming it.
#[test]
fn prepare_readies_a_configuration() {
    let dir = tempdir();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "python_interpreter: lean\n").unwrap();
    let output = output_within(
        binary().arg("prepare").arg("--config").arg(&config),
        CALL_LIMIT,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("prepare: node: ready"), "{stderr}");
    assert!(stderr.contains("prepare: python: ready"), "{stderr}");
    assert!(
        stderr.contains("python (the standard library) are ready"),
        "{stderr}"
    );

    let data = dir.path().join("data");
    let first = output_within(
        binary()
            .arg("call")
            .arg("--data-dir")
            .arg(&data)
            .arg("--config")
            .arg(&config)
            .arg(RUN)
            .arg("lang=node")
            .arg("code=return 1"),
        CALL_LIMIT,
    );
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let persisted = data.join("configuration/code-runner.yaml");
    let before = std::fs::read_to_string(&persisted).unwrap();
    let output = output_within(
        binary().arg("prepare").arg("--data-dir").arg(&data),
        CALL_LIMIT,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("python (the standard library) are ready"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&persisted).unwrap(), before);

    let output = output_within(
        binary()
            .arg("prepare")
            .arg("--config")
            .arg(dir.path().join("missing.yaml")),
        CALL_LIMIT,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("missing.yaml"), "{stderr}");
}
