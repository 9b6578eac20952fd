//! The confinement of a sandbox process, seen from outside and from inside.

use std::time::Duration;

use code_runner_sandbox::{Init, Pool, PythonInit, SandboxOptions};

use super::{isolation, sandboxed, status_field, wait_for_processes};
use crate::helpers::ServeProcess;
use crate::helpers::lang::{LANGS, pick};
use crate::helpers::tempdir;

/// From outside: every sandbox process runs under a seccomp filter
/// (`Seccomp: 2`) with `no_new_privs` and no capabilities, and `/healthz`
/// reports what applied.
#[tokio::test(flavor = "multi_thread")]
async fn sandbox_processes_are_confined_as_proc_shows() {
    let server = sandboxed("").await;
    for (pid, _) in wait_for_processes(&server, 2).await {
        assert_eq!(status_field(pid, "Seccomp"), "2", "pid {pid}");
        assert_eq!(status_field(pid, "NoNewPrivs"), "1", "pid {pid}");
        assert_eq!(status_field(pid, "CapEff"), "0000000000000000", "pid {pid}");
        assert_eq!(status_field(pid, "CapBnd"), "0000000000000000", "pid {pid}");
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let names: Vec<String> = environ
            .split(|b| *b == 0)
            .filter(|v| !v.is_empty())
            .map(|v| {
                String::from_utf8_lossy(v)
                    .split('=')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert_eq!(names, ["CODE_RUNNER_CACHE_DIR"], "pid {pid}");
    }
    let report = &isolation(&server).await["confinement"];
    for layer in [
        "seccomp",
        "no_new_privs",
        "descriptors",
        "rlimit_nofile",
        "capabilities",
    ] {
        assert!(report["applied"][layer].is_string(), "{layer}: {report}");
    }
    for layer in ["landlock", "rlimit_nproc"] {
        assert!(
            report["applied"][layer].is_string() || report["not_applied"][layer].is_string(),
            "{layer}: {report}"
        );
    }
}

/// `CODE_RUNNER_WRITE_TRACKING=off` on the worker reaches its sandbox
/// processes (the one variable passed besides the cache's path): they open
/// the page map only, no userfaultfd, say so in `/healthz`, and still run.
#[tokio::test(flavor = "multi_thread")]
async fn write_tracking_off_reaches_the_sandbox_processes() {
    let data = tempdir();
    let serve = ServeProcess::spawn_with_env(
        data.path(),
        None,
        &["--isolation", "process"],
        &[("CODE_RUNNER_WRITE_TRACKING", "off")],
    );
    let client = reqwest::Client::new();
    let mut health = serde_json::Value::Null;
    for _ in 0..600 {
        health = client
            .get(format!("{}/healthz", serve.url))
            .send()
            .await
            .expect("healthz")
            .json()
            .await
            .expect("healthz is JSON");
        let processes = health["engines"]["isolation"]["processes"].as_array();
        if processes.is_some_and(|p| p.len() == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let isolation = &health["engines"]["isolation"];
    let confinement = &isolation["confinement"];
    let tracking = confinement["applied"]["page_tracking"]
        .as_str()
        .or(confinement["not_applied"]["page_tracking"].as_str())
        .unwrap_or("missing");
    assert!(
        tracking.contains("write tracking off") || tracking.starts_with("no PAGEMAP_SCAN"),
        "{tracking}: {health}"
    );
    let pids: Vec<u64> = isolation["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|p| p["pid"].as_u64())
        .collect();
    assert_eq!(pids.len(), 2, "{health}");
    for pid in pids {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let off = environ
            .split(|b| *b == 0)
            .any(|v| v == b"CODE_RUNNER_WRITE_TRACKING=off");
        assert!(off, "pid {pid}: {}", String::from_utf8_lossy(&environ));
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("its descriptors") {
            let target = std::fs::read_link(fd.expect("an entry").path()).unwrap_or_default();
            assert_ne!(
                target.to_string_lossy(),
                "anon_inode:[userfaultfd]",
                "pid {pid} opened a userfaultfd"
            );
        }
    }
    let answer: serde_json::Value = client
        .post(format!("{}/v1/call/code-runner::run", serve.url))
        .json(&serde_json::json!({"lang": "python", "code": "result = 2 + 2"}))
        .send()
        .await
        .expect("run")
        .json()
        .await
        .expect("a JSON answer");
    assert_eq!(answer["result"], serde_json::json!(4), "{answer}");
}

/// From inside: guest code cannot reach the host's files, and a python
/// program cannot reach past `/work` (the engines' own sandboxes still hold).
#[tokio::test(flavor = "multi_thread")]
async fn guests_still_see_only_their_sandbox() {
    let server = sandboxed("").await;
    for lang in LANGS {
        let code = pick(
            lang,
            "import os\ntry:\n    open('/etc/passwd').read()\n    result = 'read'\nexcept OSError:\n    result = 'refused'",
            "try { await iii.files.read('../../../etc/passwd'); return 'read' } catch (e) { return 'refused' }",
        );
        let body = server.run_in(lang, code).await.ok().clone();
        assert_eq!(body["result"], "refused", "{lang}: {body}");
    }
}

/// The test role: a sandbox process told to probe attempts what
/// confinement forbids after confining itself, and every attempt is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_confined_process_is_refused_socket_execve_and_host_files() {
    let temp = tempdir();
    let options = SandboxOptions {
        program: env!("CARGO_BIN_EXE_code-runner").into(),
        args: vec![code_runner::SANDBOX_ROLE.to_string()],
        env: Vec::new(),
        processes: 1,
        init: Init {
            python: PythonInit {
                dir: None,
                interpreter: "lean".to_string(),
                max_runtimes: 1,
                max_memory_mb: 128,
                packages: Vec::new(),
            },
            node_packages: Vec::new(),
            npm_registry: None,
            writable: vec![temp.path().to_path_buf()],
            readable: Vec::new(),
            data_limit_mb: None,
            max_files: 256,
            probe: true,
        },
    };
    let before = nofile();
    let pool = Pool::start(options).await;
    let mut results = None;
    for _ in 0..600 {
        results = pool.probe_results();
        if results.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let results = results.expect("the probe answered (an execve that succeeded never does)");
    for attempt in [
        "socket",
        "execve",
        "open_host_file",
        "write_host_file",
        "ptrace",
        "unshare",
        "kill_init",
        "prlimit_parent_get",
        "prlimit_parent_set",
        "tgkill_parent",
        "fork",
        "fork_raw",
        "clone3",
    ] {
        let answer = results
            .get(attempt)
            .map(String::as_str)
            .unwrap_or("missing");
        assert!(
            answer.starts_with("refused"),
            "{attempt}: {answer} ({results:?})"
        );
    }
    // clone3 fails as if the kernel had none, so the C library uses clone.
    assert!(results["clone3"].contains("os error 38"), "{results:?}");
    // What names only the process itself still works: its own limits, its
    // own threads, a signal to itself.
    for attempt in ["prlimit_self", "prlimit_own_pid", "tgkill_self", "thread"] {
        assert_eq!(
            results.get(attempt).map(String::as_str),
            Some("allowed"),
            "{attempt} ({results:?})"
        );
    }
    assert_page_tracking_is_narrow(&results);
    // The worker (here, this test process) kept its limits.
    assert_eq!(nofile(), before);
    assert!(!std::path::Path::new("/tmp/code-runner-sandbox-probe").exists());
}

/// The page tracking a sandbox process opened before confinement (its page
/// map and userfaultfd) passes the filter with one request on each
/// descriptor: that request there reaches the kernel (which refuses the
/// probe's null argument, `EFAULT`), and anything else is refused by the
/// filter (`EPERM`): a new userfaultfd, another request on it, the request
/// on another descriptor. Where this process can open the page tracking
/// (kernel 6.7+, a userfaultfd allowed), the sandbox process must have too.
fn assert_page_tracking_is_narrow(results: &std::collections::BTreeMap<String, String>) {
    let answer = |key: &str| results.get(key).map(String::as_str).unwrap_or("missing");
    assert!(
        answer("userfaultfd_open").contains("os error 1)"),
        "userfaultfd_open: {results:?}"
    );
    let here = code_runner_python::open_page_tracking();
    let tracked = here
        .as_deref()
        .is_ok_and(|what| what.contains("userfaultfd open"));
    if !tracked {
        tracing::warn!(
            "no write tracking in this process ({here:?}): only the refusals are checked"
        );
    }
    let mut checked = 0;
    for (key, through) in [
        ("uffd_register_own", true),
        ("uffd_copy", false),
        ("uffd_register_elsewhere", false),
        ("pagemap_scan_own", true),
        ("pagemap_scan_elsewhere", false),
    ] {
        let Some(got) = results.get(key) else {
            assert!(
                !tracked,
                "{key} missing though tracking opens here: {results:?}"
            );
            continue;
        };
        let errno = if through {
            "os error 14)"
        } else {
            "os error 1)"
        };
        assert!(got.contains(errno), "{key}: {got} ({results:?})");
        checked += 1;
    }
    assert!(!tracked || checked == 5, "{results:?}");
}

/// This process's `RLIMIT_NOFILE`: (soft, hard).
fn nofile() -> (u64, u64) {
    #[repr(C)]
    struct Rlimit {
        cur: u64,
        max: u64,
    }
    unsafe extern "C" {
        fn getrlimit(resource: i32, limit: *mut Rlimit) -> i32;
    }
    const RLIMIT_NOFILE: i32 = 7;
    let mut limit = Rlimit { cur: 0, max: 0 };
    // SAFETY: getrlimit writes the struct we pass.
    assert_eq!(unsafe { getrlimit(RLIMIT_NOFILE, &mut limit) }, 0);
    (limit.cur, limit.max)
}
