//! `--sessions`, node's half (issue 48): a kept node session's snapshot is
//! its turn ledger and a restore replays it. For a twenty-turn session that
//! builds objects, classes and closures and calls a published function:
//! the ledger's bytes, and what a restore costs (its wall time and the
//! process's CPU during it, the replay included) against the sum of the
//! turns' own CPU, which is what the replay runs again.

use std::io::Write;

use code_runner::Worker;
use serde_json::{Value, json};

use crate::timing::{median, timed};

/// The published function the session calls: a counter.
const NEXT: &str = "let n = 0;\nexport function handler(payload) { n += 1; return { n, payload } }";

/// Turn `i` of the session: state of every kind, and a binding call in
/// every other turn.
fn turn(i: usize) -> String {
    let call = match i % 2 {
        0 => format!(
            "const a = await iii.trigger({{ function_id: 'bench::next', payload: {{ turn: {i} }} }}); log.push(a.n);"
        ),
        _ => String::new(),
    };
    format!(
        "globalThis.log ??= []; {call}\n\
         class C{i} {{ constructor() {{ this.v = {i}; this.items = Array.from({{ length: 200 }}, (_, k) => ({{ k, s: 's' + k }})) }} sum() {{ return this.items.reduce((a, b) => a + b.k, this.v) }} }}\n\
         let hidden{i} = 0; globalThis.f{i} = () => ++hidden{i};\n\
         globalThis.m{i} = new Map(Array.from({{ length: 100 }}, (_, k) => [k, new C{i}()]));\n\
         globalThis.t{i} = new Float64Array(1024).map((_, k) => k * Math.random());\n\
         return m{i}.get(1).sum() + f{i}()"
    )
}

/// Measures and prints the figures; answers them as JSON.
///
/// # Errors
/// A call fails.
pub async fn measure(worker: &Worker, samples: usize) -> anyhow::Result<Value> {
    let call = |id: &'static str, payload: Value| timed(worker, id, payload);
    call(
        "code-runner::register_function",
        json!({"function_id": "bench::next", "lang": "node", "source": NEXT}),
    )
    .await?;
    let (kept, _) = call(
        "code-runner::run",
        json!({"lang": "node", "keep": true, "code": turn(0)}),
    )
    .await?;
    let id = kept["runtime_id"].as_str().unwrap_or_default().to_string();
    let mut cpu_ms = kept["usage"]["cpu_ms"].as_f64().unwrap_or(0.0);
    for i in 1..20 {
        let (answer, _) = call(
            "code-runner::run",
            json!({"runtime_id": id, "code": turn(i)}),
        )
        .await?;
        cpu_ms += answer["usage"]["cpu_ms"].as_f64().unwrap_or(0.0);
    }
    let mut kept_turns = Vec::new();
    for _ in 0..samples {
        let (_, ms) = call(
            "code-runner::run",
            json!({"runtime_id": id, "code": "return 1"}),
        )
        .await?;
        kept_turns.push(ms);
    }
    let (mut restores, mut restore_cpu, mut snapshots) = (Vec::new(), Vec::new(), Vec::new());
    let mut taken = Value::Null;
    for _ in 0..samples.clamp(1, 10) {
        let (snapshot, snapshot_ms) =
            call("code-runner::snapshot", json!({"runtime_id": id})).await?;
        let cpu_before = code_runner_core::cpu::process_cpu_ms();
        let (restored, restore_ms) = call(
            "code-runner::restore",
            json!({"snapshot_id": snapshot["snapshot_id"]}),
        )
        .await?;
        restore_cpu.push(code_runner_core::cpu::process_cpu_ms() - cpu_before);
        call(
            "code-runner::teardown",
            json!({"runtime_id": restored["runtime_id"]}),
        )
        .await?;
        snapshots.push(snapshot_ms);
        restores.push(restore_ms);
        taken = snapshot;
    }
    let kept_ms = median(kept_turns);
    let (snapshot_ms, restore_ms, restore_cpu_ms) =
        (median(snapshots), median(restores), median(restore_cpu));
    let kib = taken["bytes"].as_f64().unwrap_or(0.0) / 1024.0;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\nnode, a 20-turn session (a turn ledger, replayed by a restore):"
    )?;
    writeln!(
        out,
        "ledger {kib:.1} KiB sealed, snapshot {snapshot_ms:.1} ms; the turns' CPU {cpu_ms:.1} ms; \
         a restore {restore_ms:.1} ms wall, {restore_cpu_ms:.1} ms CPU ({:.2}× the turns' CPU); a kept turn {kept_ms:.2} ms",
        restore_cpu_ms / cpu_ms.max(0.001)
    )?;
    Ok(json!({
        "turns": 20, "ledger_bytes": taken["bytes"], "snapshot_ms": snapshot_ms,
        "turns_cpu_ms": cpu_ms, "restore_ms": restore_ms, "restore_cpu_ms": restore_cpu_ms,
        "restore_cpu_over_turns_cpu": restore_cpu_ms / cpu_ms.max(0.001), "kept_turn_ms": kept_ms,
    }))
}
