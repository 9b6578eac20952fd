//! What one node runtime can make the host hold past its caps, at its
//! worst: each case runs in a fresh child process (so its peak resident
//! set, `VmHWM`, is that case's alone) in runtimes with the default caps
//! (`heap_mb` 128, `external_mb` 64), and reports the peak above a trivial
//! run's, with how the turn ended.
//!
//! Run: `cargo run --release --example node_worst_memory` (all cases), or
//! with a case's name to run it in this process.

#![allow(clippy::print_stdout, reason = "an example reports to its user")]

use std::time::Duration;

use code_runner_core::{AbortSignal, Bindings, Engine, RuntimeOptions, Task, TurnSpec};
use code_runner_v8::V8Engine;

/// Each case: its name, how many runtimes run it at once, and the program.
const CASES: &[(&str, usize, &str)] = &[
    ("trivial", 1, "return 1"),
    (
        "string: repeat to V8's longest",
        1,
        r#"return "\u1234".repeat(2**29 - 24).indexOf("y")"#,
    ),
    (
        "string: doubled then flattened",
        1,
        r#"let s = "\u1234"; for (let i = 0; i < 28; i++) s += s; return s.indexOf("y")"#,
    ),
    (
        "string: join",
        1,
        r#"return new Array(1 << 22).fill("\u1234".repeat(127)).join("").length"#,
    ),
    (
        "string: JSON.stringify",
        1,
        r#"return JSON.stringify(new Array(1 << 22).fill("\u1234".repeat(127))).length"#,
    ),
    (
        "buffer: fixed, to the cap",
        1,
        "const b = new Uint8Array(63 * 2**20).fill(1); return b.length",
    ),
    (
        "buffer: resizable, to the cap",
        1,
        "const b = new ArrayBuffer(0, { maxByteLength: 63 * 2**20 }); b.resize(63 * 2**20); new Uint8Array(b).fill(1); return b.byteLength",
    ),
    (
        "parser: eval at its bound",
        1,
        "const s = '[' + '0,'.repeat(2.097e6) + '0]'; return eval(s).length",
    ),
    (
        "string: a new one each round",
        1,
        r#"let n = 0; for (let i = 0; i < 8; i++) n += "\u1234".repeat(2**29 - 24).indexOf("y"); return n"#,
    ),
    (
        "string: repeat, 8 runtimes at once",
        8,
        r#"return "\u1234".repeat(2**29 - 24).indexOf("y")"#,
    ),
];

/// The process's peak resident set so far, in MiB.
fn peak_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

/// Resident memory now, in MiB.
fn resident_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

/// Runs `program` in `runtimes` kept runtimes at once; answers how each
/// turn ended and the resident memory once all have answered (the runtimes
/// still open, as kept runtimes would be).
async fn run_case(engine: &V8Engine, runtimes: usize, program: &str) -> (Vec<String>, u64) {
    let mut tasks = Vec::new();
    for _ in 0..runtimes {
        let engine = engine.clone();
        let program = program.to_string();
        tasks.push(tokio::spawn(async move {
            let dir = tempfile::tempdir().expect("a scratch directory");
            let runtime = engine
                .spawn(RuntimeOptions {
                    work_dir: dir.path().join("files"),
                    ..RuntimeOptions::default()
                })
                .await
                .expect("a runtime");
            let outcome = runtime
                .run(TurnSpec {
                    live: None,
                    task: Task::program(&program),
                    timeout: Duration::from_secs(300),
                    bindings: Bindings::none(),
                    max_stream_bytes: Some(16_384),
                    abort: AbortSignal::new(),
                })
                .await;
            let ending = format!("{:?}", outcome.ending);
            (runtime, dir, ending.chars().take(90).collect::<String>())
        }));
    }
    let mut open = Vec::new();
    let mut endings = Vec::new();
    for task in tasks {
        match task.await {
            Ok((runtime, dir, ending)) => {
                endings.push(ending);
                open.push((runtime, dir));
            }
            Err(err) => endings.push(format!("panicked: {err}")),
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = resident_mib();
    for (runtime, _dir) in open {
        runtime.close().await;
    }
    (endings, held)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(name) = args.first() {
        let (_, runtimes, program) = CASES
            .iter()
            .find(|(case, _, _)| case == name)
            .ok_or_else(|| anyhow::anyhow!("no case {name}"))?;
        let engine = V8Engine::new()?;
        // The engine and a runtime's first boot, before the measured run.
        let (_, base) = run_case(&engine, 1, "return 1").await;
        let base_peak = peak_mib();
        let (endings, held) = run_case(&engine, *runtimes, program).await;
        println!(
            "{}\t{}\t{}",
            peak_mib().saturating_sub(base_peak),
            held.saturating_sub(base),
            endings.join(" | ")
        );
        return Ok(());
    }
    let exe = std::env::current_exe()?;
    println!(
        "heap_mb 128, external_mb 64; a fresh process per case: its peak (VmHWM) and what it holds once the turns answered (VmRSS, runtimes still open), above a trivial run's"
    );
    for (name, runtimes, _) in CASES {
        let output = std::process::Command::new(&exe).arg(name).output()?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let fields: Vec<&str> = stdout.trim().splitn(3, '\t').collect();
        let [peak, held, ending] = fields[..] else {
            println!(
                "{name:<40} x{runtimes}  failed: {} {}",
                output.status,
                stdout.trim()
            );
            continue;
        };
        println!("{name:<40} x{runtimes}  peak +{peak:>5} MiB  held +{held:>5} MiB  {ending}");
    }
    Ok(())
}
