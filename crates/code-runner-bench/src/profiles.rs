//! The languages measured: their programs, their targets, their engines.
//!
//! A language is one [`Profile`]; its engine is one arm of [`engine_for`].

use std::sync::Arc;

use code_runner_core::{Engine, Lang};
use serde::Serialize;

use super::Outcome;
use super::native::Tool;
use super::table::Target;

/// The goals for one language.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Targets {
    /// One-shot latency (p50).
    pub one_shot: Target,
    /// Kept-runtime turn latency (p50).
    pub kept_turn: Target,
    /// One-shot runs per second.
    pub throughput: Target,
    /// Resident MiB per kept runtime.
    pub rss_per_kept: Target,
    /// Compute time over the machine's own interpreter.
    pub compute_ratio: Target,
}

/// Everything the bench needs to know about one language.
pub struct Profile {
    /// The language.
    pub lang: Lang,
    /// The one-shot and kept-turn program; its result is 4.
    pub trivial: &'static str,
    /// The first turn of a kept runtime.
    pub setup: &'static str,
    /// Kept runtimes created for the RSS figure.
    pub rss_runtimes: usize,
    /// The machine's own interpreter for this language.
    pub tool: Tool,
    /// What the compute script does.
    pub compute_label: &'static str,
    /// The compute script as code-runner runs it (result `{"ms", "check"}`).
    pub compute_guest: String,
    /// The same script for the machine's interpreter (prints `{"ms", "check"}`).
    pub compute_native: String,
    /// Its goals.
    pub targets: Targets,
}

/// The mixed python workload, timed inside the interpreter; leaves `elapsed_ms` and `check`.
const PY_COMPUTE: &str = r#"
import json, time

parts = {}

def timed(name, work):
    t = time.perf_counter()
    value = work()
    parts[name] = (time.perf_counter() - t) * 1000.0
    return value

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def dicts():
    table = {f"k{i}": i * 3 for i in range(100_000)}
    return sum(table[f"k{i}"] for i in range(0, 100_000, 2))

def sorting():
    numbers = [(i * 7_919) % 100_003 for i in range(100_000)]
    numbers.sort()
    return numbers[-1]

def json_round_trip():
    doc = {"rows": [{"id": i, "name": f"row{i}", "tags": ["a", "b", "c"], "score": i / 7} for i in range(20_000)]}
    text = json.dumps(doc)
    back = json.loads(text)
    return len(text) + len(back["rows"])

t0 = time.perf_counter()
check = timed("fib(22)", lambda: fib(22))
check += timed("dict build + 50k lookups (100k keys)", dicts)
check += timed("sort 100k ints", sorting)
check += timed("json dumps + loads (20k rows)", json_round_trip)
elapsed_ms = (time.perf_counter() - t0) * 1000.0
"#;

/// The python compute mix as code-runner runs it and as `python3` does.
pub fn py_compute() -> (String, String) {
    (
        format!(
            "{PY_COMPUTE}\nresult = {{\"ms\": elapsed_ms, \"check\": check, \"parts\": parts}}\n"
        ),
        format!(
            "{PY_COMPUTE}\nprint(json.dumps({{\"ms\": elapsed_ms, \"check\": check, \"parts\": parts}}))\n"
        ),
    )
}

/// `fib(30)` as an async function body, timed inside the engine.
const JS_COMPUTE: &str = "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());\n\
const t0 = now();\n\
const check = fib(30);\n\
return { ms: now() - t0, check };";

/// The languages measured, in table order.
pub fn profiles() -> Vec<Profile> {
    vec![
        Profile {
            lang: Lang::Python,
            trivial: "result = 2 + 2",
            setup: "x = 1",
            rss_runtimes: 8,
            tool: Tool {
                program: "python3",
                inline_flag: "-c",
                print_exe: "import sys; print(sys.executable)",
            },
            compute_label: "mixed script",
            compute_guest: py_compute().0,
            compute_native: py_compute().1,
            targets: Targets {
                // The speed issue's goals (one-shot p50 over HTTP, a kept turn
                // over HTTP, runs/s at 4 and 16 clients), the snapshot issue's
                // RSS per kept runtime, and the compute mix.
                one_shot: Target::at_most(1.0, "ms"),
                kept_turn: Target::at_most(0.3, "ms"),
                throughput: Target::at_least(1000.0, "runs/s"),
                rss_per_kept: Target::at_most(4.0, "MiB"),
                compute_ratio: Target::at_most(2.0, "×"),
            },
        },
        Profile {
            lang: Lang::Node,
            trivial: "return 2 + 2",
            setup: "globalThis.x = 1",
            rss_runtimes: 32,
            tool: Tool {
                program: "node",
                inline_flag: "-e",
                print_exe: "console.log(process.execPath)",
            },
            compute_label: "fib(30)",
            compute_guest: JS_COMPUTE.to_string(),
            compute_native: format!(
                "(async () => {{ {JS_COMPUTE} }})().then(v => console.log(JSON.stringify(v)));"
            ),
            targets: Targets {
                one_shot: Target::at_most(1.0, "ms"),
                kept_turn: Target::at_most(0.3, "ms"),
                throughput: Target::at_least(2000.0, "runs/s"),
                rss_per_kept: Target::at_most(4.0, "MiB"),
                compute_ratio: Target::at_most(1.1, "×"),
            },
        },
    ]
}

/// A bare engine for the boot figure; the one place a new engine is wired in.
pub fn engine_for(lang: Lang) -> Outcome<Arc<dyn Engine>> {
    match lang {
        Lang::Python => code_runner_python::PythonEngine::from_default_location()
            .map(|engine| Arc::new(engine) as Arc<dyn Engine>)
            .map_err(|err| err.message),
        Lang::Node => code_runner_v8::V8Engine::new()
            .map(|engine| Arc::new(engine) as Arc<dyn Engine>)
            .map_err(|err| err.to_string()),
        Lang::TypeScript => code_runner_v8::V8Engine::new()
            .map(|engine| Arc::new(engine.typescript()) as Arc<dyn Engine>)
            .map_err(|err| err.to_string()),
    }
}
