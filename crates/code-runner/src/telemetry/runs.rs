//! A run's answer as metrics: counted by language, flavour, kept or not and
//! outcome; its wall and CPU time observed; its egress and files summed. And
//! as its span's attributes.

use metrics::Label;
use opentelemetry::KeyValue;
use serde_json::Value;

use super::Metrics;

pub(super) const RUNS: &str = "code_runner_runs_total";
pub(super) const SECONDS_WALL: &str = "code_runner_run_seconds";
pub(super) const SECONDS_CPU: &str = "code_runner_run_cpu_seconds";
pub(super) const EGRESS_REQUESTS: &str = "code_runner_egress_requests_total";
pub(super) const EGRESS_BYTES: &str = "code_runner_egress_bytes_total";
pub(super) const FILES_OUT_BYTES: &str = "code_runner_files_out_bytes_total";
pub(super) const FILES_IN_BYTES: &str = "code_runner_files_in_bytes_total";

/// What the metrics need to know about a run besides its answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunFacts {
    /// Its language (`python`, `node`, `typescript`), or `unknown` before one was known.
    pub lang: &'static str,
    /// The python flavour (`data`, `lean`), or `-`.
    pub flavour: &'static str,
    /// Whether it ran on a kept runtime (or kept one).
    pub kept: bool,
    /// Who its usage is charged to ([`Metrics::tenant`]).
    pub tenant: &'static str,
    /// Its wall time as the worker measured it (for answers with no usage).
    pub wall_ms: f64,
    /// Bytes of the files the request gave it.
    pub files_in: u64,
}

impl RunFacts {
    /// Its language, if it was known.
    pub(crate) fn lang_known(&self) -> Option<&'static str> {
        (self.lang != "unknown").then_some(self.lang)
    }
}

/// The short name of an error code (`code-runner::timeout` → `timeout`):
/// the outcome label. Codes outside the contract's are `other`, so the
/// label set stays bounded.
fn outcome_of_error(code: &str) -> &'static str {
    code_runner_core::ErrorCode::parse(code)
        .and_then(|code| code.as_str().strip_prefix("code-runner::"))
        .unwrap_or("other")
}

/// A run's outcome: `success`, `suspended`, `script_error`, or its error
/// code's short name.
fn outcome(answer: Result<&Value, &str>) -> &'static str {
    match answer {
        Ok(body) if body["success"] == Value::Bool(true) => "success",
        Ok(body) if body.get("suspended").is_some_and(|s| !s.is_null()) => "suspended",
        Ok(_) => "script_error",
        Err(code) => outcome_of_error(code),
    }
}

/// A run's answer as its span's attributes: what the metrics count it by,
/// and its usage (CPU, wall time, peak memory, egress). No id, code or output.
pub(crate) fn run_attributes(facts: &RunFacts, answer: Result<&Value, &str>) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("code_runner.lang", facts.lang),
        KeyValue::new("code_runner.flavour", facts.flavour),
        KeyValue::new("code_runner.kept", facts.kept),
        KeyValue::new("code_runner.outcome", outcome(answer)),
        KeyValue::new("code_runner.tenant", facts.tenant),
    ];
    let usage = answer.ok().map(|body| &body["usage"]);
    let numbers = [
        ("cpu_ms", "code_runner.cpu_ms"),
        ("wall_ms", "code_runner.wall_ms"),
        ("peak_memory_bytes", "code_runner.peak_memory_bytes"),
    ];
    for (field, key) in numbers {
        if let Some(n) = usage.and_then(|u| u[field].as_f64()) {
            attributes.push(KeyValue::new(key, n));
        }
    }
    if let Some(n) = usage.and_then(|u| u["egress"]["requests"].as_i64()) {
        attributes.push(KeyValue::new("code_runner.egress.requests", n));
    }
    attributes
}

/// A published function's call as its span's attributes: the handler's
/// language, the namespace it is charged to, the CPU and wall time its turn took.
pub(crate) fn invocation_attributes(
    lang: &'static str,
    tenant: &'static str,
    cpu_ns: u64,
    wall_ms: f64,
) -> Vec<KeyValue> {
    vec![
        KeyValue::new("code_runner.lang", lang),
        KeyValue::new("code_runner.tenant", tenant),
        KeyValue::new("code_runner.cpu_ms", cpu_ns as f64 / 1e6),
        KeyValue::new("code_runner.wall_ms", wall_ms),
    ]
}

impl Metrics {
    /// A run answered `answer` (its response, or its error).
    pub(crate) fn run(&self, facts: RunFacts, answer: Result<&Value, &str>) {
        let lang = facts.lang;
        let outcome = outcome(answer);
        let labels = vec![
            Label::from_static_parts("lang", lang),
            Label::from_static_parts("flavour", facts.flavour),
            Label::from_static_parts("kept", if facts.kept { "true" } else { "false" }),
            Label::from_static_parts("outcome", outcome),
        ];
        self.counter(RUNS, labels, 1);
        if facts.files_in > 0 {
            self.counter(
                FILES_IN_BYTES,
                vec![Label::from_static_parts("lang", lang)],
                facts.files_in,
            );
        }
        let usage = answer.ok().map(|body| &body["usage"]);
        let read = |field: &str| usage.and_then(|u| u[field].as_f64());
        self.tally.add(
            facts.tenant,
            super::Totals {
                calls: 1,
                cpu_ms: read("cpu_ms").unwrap_or(0.0),
                wall_ms: read("wall_ms").unwrap_or(facts.wall_ms),
                egress_bytes: usage.map_or(0, |u| u["egress"]["bytes_in"].as_u64().unwrap_or(0)),
            },
        );
        let Ok(body) = answer else { return };
        let by_lang = || vec![Label::from_static_parts("lang", lang)];
        let usage = &body["usage"];
        if let Some(wall) = usage["wall_ms"].as_f64() {
            self.histogram(SECONDS_WALL, by_lang(), wall / 1000.0);
        }
        if let Some(cpu) = usage["cpu_ms"].as_f64() {
            self.histogram(SECONDS_CPU, by_lang(), cpu / 1000.0);
        }
        if let Some(egress) = usage.get("egress").filter(|e| !e.is_null()) {
            let requests = egress["requests"].as_u64().unwrap_or(0);
            let bytes = egress["bytes_in"].as_u64().unwrap_or(0);
            self.counter(EGRESS_REQUESTS, by_lang(), requests);
            self.counter(EGRESS_BYTES, by_lang(), bytes);
        }
        let out: u64 = body["files"].as_array().map_or(0, |files| {
            files.iter().filter_map(|f| f["size"].as_u64()).sum()
        });
        if out > 0 {
            self.counter(FILES_OUT_BYTES, by_lang(), out);
        }
    }
}
