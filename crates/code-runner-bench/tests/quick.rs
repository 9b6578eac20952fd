//! The real `code-runner-bench` binary, as docs/benchmark.md runs it.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// Longest a run here may take on a busy two-core machine (it boots a worker,
/// both engines and the machine's own interpreters).
const LIMIT: Duration = Duration::from_secs(300);

/// Runs the bench with `args` and `--out` in a fresh directory; fails unless it
/// exits 0 within [`LIMIT`] (past it the child is killed by its own pid).
/// Returns its stdout and the JSON report it wrote.
fn bench(args: &[&str]) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let child = Command::new(env!("CARGO_BIN_EXE_code-runner-bench"))
        .args(args)
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn code-runner-bench");
    let id = child.id();
    let (done, waited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let Ok(output) = waited.recv_timeout(LIMIT) else {
        let _ = Command::new("kill").arg("-9").arg(id.to_string()).status();
        panic!("code-runner-bench {args:?} did not exit within {LIMIT:?}");
    };
    let output = output.expect("wait for code-runner-bench");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    (String::from_utf8_lossy(&output.stdout).into_owned(), report)
}

/// The benchmark command of docs/benchmark.md runs end to end: rows for each language and
/// the JSON report written where `--out` says.
#[test]
fn quick_run_prints_rows_for_both_languages_and_writes_json() {
    let (table, report) = bench(&["--quick"]);
    assert!(table.contains("python one-shot"), "{table}");
    assert!(table.contains("node one-shot"), "{table}");
    assert!(report.is_object() && !report.as_object().unwrap().is_empty());
}

/// `--soak N` is the other mode of the same binary: it answers every call and
/// reports the process RSS against its baseline.
#[test]
fn soak_answers_every_call_and_reports_rss() {
    let (_, report) = bench(&["--soak", "20"]);
    assert_eq!(report["runs_each"], 20, "{report}");
    assert_eq!(report["failures"], 0, "{report}");
    assert!(report["rss_baseline_mib"].as_f64().is_some(), "{report}");
}
