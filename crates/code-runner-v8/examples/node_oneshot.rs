//! What a node one-shot costs the host, through the seam: runs per second,
//! wall time, and the process's user and kernel CPU per run, from one
//! client and from several at once; and what booting and closing a bare
//! isolate costs on its own (the part of a one-shot a warm pool moves off
//! the request's path, but not off the CPU), beside the floor under it: a
//! plain V8 isolate and context, a bare deno_core runtime booted from a
//! snapshot of deno_core alone, and one booted from this engine's own
//! snapshot, each made and dropped on this thread.
//!
//! Then issue 33's goal as a ratio measured in this one run, marked met or
//! missed, and where a one-client one-shot's CPU goes between those floors.
//!
//! Run: `cargo run --release --workspace --example node_oneshot -- 2000`

#![allow(clippy::print_stdout, reason = "an example reports to its user")]

use std::time::{Duration, Instant};

use code_runner_core::cpu::ProcessCpu;
use code_runner_core::{
    AbortSignal, Bindings, Completion, Engine, RuntimeOptions, Task, TurnEnding, TurnSpec,
};
use code_runner_v8::V8Engine;

/// Boots a runtime, runs `program` in it (unless `None`) and closes it.
async fn one_shot(
    engine: &V8Engine,
    work: &std::path::Path,
    program: Option<&str>,
) -> anyhow::Result<()> {
    let runtime = engine
        .spawn(RuntimeOptions {
            work_dir: work.to_path_buf(),
            ..RuntimeOptions::default()
        })
        .await?;
    if let Some(program) = program {
        let outcome = runtime
            .run(TurnSpec {
                live: None,
                task: Task::program(program),
                timeout: Duration::from_secs(60),
                bindings: Bindings::none(),
                max_stream_bytes: Some(16_384),
                abort: AbortSignal::new(),
            })
            .await;
        if !matches!(
            outcome.ending,
            TurnEnding::Exited {
                exit_code: 0,
                completion: Completion::Value(_),
                ..
            }
        ) {
            anyhow::bail!("expected a value, got {:?}", outcome.ending);
        }
    }
    runtime.close().await;
    Ok(())
}

/// `runs` one-shots from `clients` tasks at once: one line of figures.
async fn load(
    engine: &V8Engine,
    clients: usize,
    runs: usize,
    program: Option<&str>,
) -> anyhow::Result<f64> {
    let before = ProcessCpu::now();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let engine = engine.clone();
        let program = program.map(str::to_owned);
        tasks.push(tokio::spawn(async move {
            let dir = tempfile::tempdir()?;
            let mut walls = Vec::new();
            for _ in 0..runs / clients {
                let t = Instant::now();
                one_shot(&engine, dir.path(), program.as_deref()).await?;
                walls.push(t.elapsed());
            }
            anyhow::Ok(walls)
        }));
    }
    let mut walls = Vec::new();
    for task in tasks {
        walls.extend(task.await??);
    }
    let seconds = started.elapsed().as_secs_f64();
    let (user, kernel, _) = ProcessCpu::now().since(&before).per(walls.len());
    let done = walls.len() as f64;
    walls.sort();
    let at = |p: f64| walls[((walls.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    println!(
        "{:<9} {clients:>2} clients: {:>5.0} runs/s, p50 {:.2} ms p99 {:.2} ms, user {:.2} + kernel {:.2} ms CPU per run",
        if program.is_some() {
            "one-shot"
        } else {
            "bare boot"
        },
        done / seconds,
        at(0.5),
        at(0.99),
        user,
        kernel,
    );
    Ok(user + kernel)
}

/// CPU ms each of the floors under a one-shot, made and dropped `runs`
/// times on this thread.
struct Floors {
    /// A plain V8 isolate with one context.
    isolate: f64,
    /// A bare deno_core runtime from deno_core's own snapshot.
    deno: f64,
    /// A bare deno_core runtime from the engine's snapshot (our bootstrap in it).
    ours: f64,
}

/// Measures the [`Floors`] and the prototype on the `v8` crate alone.
fn floor(engine: &V8Engine, runs: usize) -> Floors {
    let measure = |what: &str, make: &dyn Fn()| {
        let before = ProcessCpu::now();
        let started = Instant::now();
        for _ in 0..runs {
            make();
        }
        let (user, kernel, _) = ProcessCpu::now().since(&before).per(runs);
        println!(
            "{what:<34} {:.2} ms wall, user {user:.2} + kernel {kernel:.2} ms CPU each",
            started.elapsed().as_secs_f64() * 1e3 / runs as f64,
        );
        user + kernel
    };
    let isolate = measure("floor: a V8 isolate and context", &|| {
        let mut isolate = v8::Isolate::new(v8::CreateParams::default());
        v8::scope!(let scope, &mut isolate);
        v8::Context::new(scope, v8::ContextOptions::default());
    });
    let bare: &'static [u8] = Box::leak(
        deno_core::JsRuntimeForSnapshot::new(deno_core::RuntimeOptions::default()).snapshot(),
    );
    let deno = measure("floor: deno_core from its snapshot", &|| {
        drop(deno_core::JsRuntime::new(deno_core::RuntimeOptions {
            startup_snapshot: Some(bare),
            skip_op_registration: true,
            ..deno_core::RuntimeOptions::default()
        }));
    });
    engine
        .boot_snapshot_only()
        .expect("the engine's snapshot boots");
    let ours = measure("floor: deno_core from ours", &|| {
        engine
            .boot_snapshot_only()
            .expect("the engine's snapshot boots");
    });
    let blob = prototype_snapshot();
    let answer = prototype_run(blob, "console.log('hi'); return 2 + 2");
    assert_eq!(
        answer, r#"{"result":4,"stdout":"hi"}"#,
        "the prototype answers"
    );
    let prototype = measure("prototype: the v8 crate alone", &|| {
        prototype_run(blob, "return 2 + 2");
    });
    println!(
        "  (the prototype boots from its own snapshot with a console, runs the program in an async wrapper and answers JSON: {:.2}× the isolate floor)",
        prototype / isolate
    );
    Floors {
        isolate,
        deno,
        ours,
    }
}

/// The bootstrap a runtime on the `v8` crate alone would snapshot: output
/// captured per stream, a `console` over it, and the program's wrapper.
const PROTOTYPE_BOOTSTRAP: &str = r#"
globalThis.__out = { stdout: [], stderr: [] };
const fmt = (args) => args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ");
globalThis.console = Object.freeze({
  log: (...a) => { __out.stdout.push(fmt(a)); },
  error: (...a) => { __out.stderr.push(fmt(a)); },
});
globalThis.__finish = (value) => JSON.stringify({ result: value, stdout: __out.stdout.join("\n") });
"#;

/// A startup snapshot of one context that ran [`PROTOTYPE_BOOTSTRAP`].
fn prototype_snapshot() -> &'static [u8] {
    let mut creator = v8::Isolate::snapshot_creator(None, None);
    {
        v8::scope!(let scope, &mut creator);
        let context = v8::Context::new(scope, v8::ContextOptions::default());
        let scope = &mut v8::ContextScope::new(scope, context);
        let source = v8::String::new(scope, PROTOTYPE_BOOTSTRAP).expect("source");
        let script = v8::Script::compile(scope, source, None).expect("bootstrap compiles");
        script.run(scope).expect("bootstrap runs");
        scope.set_default_context(context);
    }
    let blob = creator
        .create_blob(v8::FunctionCodeHandling::Keep)
        .expect("a snapshot");
    Box::leak(blob.to_vec().into_boxed_slice())
}

/// One one-shot on the prototype: an isolate and its context from the
/// snapshot, the program compiled in an async wrapper and run, its promise
/// settled by a microtask checkpoint, the answer read as JSON.
fn prototype_run(blob: &'static [u8], program: &str) -> String {
    let params = v8::CreateParams::default().snapshot_blob(v8::StartupData::from(blob));
    let mut isolate = v8::Isolate::new(params);
    v8::scope!(let scope, &mut isolate);
    let context = v8::Context::new(scope, v8::ContextOptions::default());
    let scope = &mut v8::ContextScope::new(scope, context);
    let wrapped = format!("(async () => {{\n{program}\n}})().then(__finish)");
    let source = v8::String::new(scope, &wrapped).expect("source");
    let script = v8::Script::compile(scope, source, None).expect("program compiles");
    let promise = script.run(scope).expect("program runs");
    scope.perform_microtask_checkpoint();
    let promise = v8::Local::<v8::Promise>::try_from(promise).expect("a promise");
    promise.result(scope).to_rust_string_lossy(scope)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let engine = V8Engine::new()?;
    println!("startup snapshot: {} KiB", engine.snapshot_bytes() >> 10);
    let floors = floor(&engine, runs.min(500));
    let dir = tempfile::tempdir()?;
    for _ in 0..20 {
        one_shot(&engine, dir.path(), Some("return 2 + 2")).await?;
    }
    load(&engine, 1, runs, None).await?;
    let mut one_shot_ms = Vec::new();
    for clients in [1, 4, 16] {
        one_shot_ms.push(load(&engine, clients, runs.max(clients), Some("return 2 + 2")).await?);
    }
    // The floors are made on one thread, so the one-client line is their match.
    let ratio = one_shot_ms[0] / floors.isolate;
    let mark = if ratio <= 1.5 { "met" } else { "MISSED" };
    println!(
        "issue 33's goal, measured in this run: one-shot CPU / the V8 isolate and context floor: {ratio:.2}× (goal ≤ 1.5×): {mark}; / the deno_core floor: {:.2}×",
        one_shot_ms[0] / floors.deno
    );
    let share = |ms: f64| 100.0 * ms / one_shot_ms[0];
    println!(
        "  where a one-shot's {:.2} ms go: V8's isolate and context {:.0} %, deno_core's own snapshot and setup {:.0} %, our bootstrap in the snapshot {:.0} %, the engine thread, limits, scratch directory and turn {:.0} %",
        one_shot_ms[0],
        share(floors.isolate),
        share(floors.deno - floors.isolate),
        share(floors.ours - floors.deno),
        share(one_shot_ms[0] - floors.ours),
    );
    Ok(())
}
