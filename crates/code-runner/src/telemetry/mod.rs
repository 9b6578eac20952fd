//! What an operator sees of the worker beside its log: Prometheus metrics,
//! per-tenant usage (issue 49; `usage.rs` decides who a tenant is) and
//! traces (`traces.rs`: spans of calls, where they go). This module decides which facts are metrics and under which
//! names and labels. Labels stay low in cardinality: a language, a flavour,
//! an outcome (success, script_error, or an error code's short name), a
//! kept/one-shot flag, an HTTP status; never a runtime id, a function id
//! from a guest, code or output.
//!
//! Counters and histograms are kept by a `metrics-exporter-prometheus`
//! recorder owned by the worker (not the process-global one, so several
//! workers in one process count apart); gauges of the worker's state are
//! set from its registry at each scrape. [`Metrics::render`] is the text
//! `GET /metrics` serves.

mod engines;
mod runs;
mod traces;
mod usage;

use std::sync::Arc;

use metrics::{Key, Label, Level, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

pub(crate) use runs::{RunFacts, invocation_attributes, run_attributes};
pub use traces::{CallKind, Sinks, TraceParent, Traces};
pub use usage::{HOST, Tally, Totals};

/// Where our metrics say they come from (the exporter ignores it).
static META: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Histogram buckets for seconds: a millisecond to two minutes.
const SECONDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0, 120.0,
];

/// The worker's metrics.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Per-tenant usage (its counters are rendered beside the recorder's).
    pub tally: Tally,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// The worker's state at a scrape: gauges, and counters others keep.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Runtime slots in use (one-shots running and kept runtimes).
    pub slots_used: u64,
    /// `max_runtimes`.
    pub slots_max: u64,
    /// Kept runtimes, live.
    pub kept: u64,
    /// Runs suspended on a call that waits for a person.
    pub suspended: u64,
    /// MCP clients following the listing.
    pub mcp_followers: u64,
    /// Bytes of linked collected files held.
    pub linked_bytes: u64,
    /// Configuration changes applied since boot.
    pub reloads: u64,
    /// Guest HTTP requests refused or failed since boot, by reason.
    pub egress_refusals: Vec<(&'static str, u64)>,
    /// What each loaded engine's runtimes use, by language.
    pub engines: Vec<(&'static str, code_runner_core::EngineStats)>,
}

impl Metrics {
    /// Empty metrics, described.
    pub fn new() -> Arc<Metrics> {
        let recorder = PrometheusBuilder::new()
            .set_buckets(&SECONDS)
            .map(PrometheusBuilder::build_recorder)
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        let metrics = Metrics {
            recorder,
            handle,
            tally: Tally::default(),
        };
        metrics.describe();
        Arc::new(metrics)
    }

    fn describe(&self) {
        let counter = |name: &'static str, unit: Option<Unit>, help: &'static str| {
            self.recorder
                .describe_counter(name.into(), unit, SharedString::const_str(help));
        };
        counter(
            runs::RUNS,
            None,
            "Runs answered, by language, flavour, kept or one-shot, and outcome (success, script_error, or the error code).",
        );
        counter(
            runs::EGRESS_REQUESTS,
            None,
            "HTTP requests guest code made through the host, by language.",
        );
        counter(
            runs::EGRESS_BYTES,
            Some(Unit::Bytes),
            "Bytes of responses guest code received through the host, by language.",
        );
        counter(
            runs::FILES_OUT_BYTES,
            Some(Unit::Bytes),
            "Bytes of files runs handed back, by language.",
        );
        counter(HTTP, None, "HTTP requests answered, by status.");
        counter(RELOADS, None, "Configuration reloads applied.");
        counter(
            EGRESS_REFUSALS,
            None,
            "HTTP requests of guest code refused or failed, by reason (not_allowed, private_address, secret, too_large, timeout, too_many, network, …).",
        );
        counter(
            runs::FILES_IN_BYTES,
            Some(Unit::Bytes),
            "Bytes of files runs were given, by language.",
        );
        counter(
            HIBERNATED,
            None,
            "Kept runtimes hibernated (written to the snapshot store and closed).",
        );
        counter(WOKEN, None, "Hibernated sessions woken.");
        let histogram = |name: &'static str, help: &'static str| {
            self.recorder.describe_histogram(
                name.into(),
                Some(Unit::Seconds),
                SharedString::const_str(help),
            );
        };
        histogram(
            runs::SECONDS_WALL,
            "A run's wall time inside the worker, by language.",
        );
        histogram(
            runs::SECONDS_CPU,
            "A run's CPU time on its runtime's thread, by language.",
        );
        for (name, help) in GAUGES {
            self.recorder
                .describe_gauge(name.into(), None, SharedString::const_str(help));
        }
        self.describe_engines();
    }

    fn counter(&self, name: &'static str, labels: Vec<Label>, by: u64) {
        self.recorder
            .register_counter(&Key::from_parts(name, labels), &META)
            .increment(by);
    }

    fn histogram(&self, name: &'static str, labels: Vec<Label>, value: f64) {
        self.recorder
            .register_histogram(&Key::from_parts(name, labels), &META)
            .record(value);
    }

    fn gauge(&self, name: &'static str, value: u64) {
        self.recorder
            .register_gauge(&Key::from_name(name), &META)
            .set(value as f64);
    }

    /// An HTTP request answered with `status`.
    pub fn http(&self, status: u16) {
        self.counter(HTTP, vec![Label::new("status", status.to_string())], 1);
    }

    /// A kept runtime hibernated.
    pub fn hibernated(&self) {
        self.counter(HIBERNATED, Vec::new(), 1);
    }

    /// A hibernated session woken.
    pub fn woken(&self) {
        self.counter(WOKEN, Vec::new(), 1);
    }

    /// The Prometheus text exposition of everything, with `state`'s gauges
    /// and the process's resident memory as they are now.
    pub fn render(&self, state: State) -> String {
        self.gauge(GAUGES[0].0, state.slots_used);
        self.gauge(GAUGES[1].0, state.slots_max);
        self.gauge(GAUGES[2].0, state.kept);
        self.gauge(GAUGES[3].0, state.suspended);
        self.gauge(GAUGES[4].0, state.mcp_followers);
        self.gauge(GAUGES[5].0, state.linked_bytes);
        self.gauge(GAUGES[6].0, resident_bytes());
        self.recorder
            .register_counter(&Key::from_name(RELOADS), &META)
            .absolute(state.reloads);
        for (reason, count) in state.egress_refusals {
            let key = Key::from_parts(
                EGRESS_REFUSALS,
                vec![Label::from_static_parts("reason", reason)],
            );
            self.recorder.register_counter(&key, &META).absolute(count);
        }
        self.engines(&state.engines);
        let mut text = self.handle.render();
        text.push_str(&self.tally.render());
        text
    }

    /// The label `tenant` is counted under (itself, or `other` past the bound).
    pub fn tenant(&self, tenant: &str) -> &'static str {
        self.tally.label(tenant)
    }

    /// A published function's call in `tenant` took `cpu_ns` and `wall_ms`.
    pub fn invoked(&self, tenant: &'static str, cpu_ns: u64, wall_ms: f64) {
        self.tally.add(
            tenant,
            Totals {
                calls: 1,
                cpu_ms: cpu_ns as f64 / 1e6,
                wall_ms,
                egress_bytes: 0,
            },
        );
    }
}

const HTTP: &str = "code_runner_http_requests_total";
const RELOADS: &str = "code_runner_config_reloads_total";
const EGRESS_REFUSALS: &str = "code_runner_egress_refusals_total";
const HIBERNATED: &str = "code_runner_sessions_hibernated_total";
const WOKEN: &str = "code_runner_sessions_woken_total";

/// The gauges, in [`State`]'s order, then the process's resident memory.
const GAUGES: [(&str, &str); 7] = [
    (
        "code_runner_runtime_slots_used",
        "Runtime slots in use: one-shots running and kept runtimes.",
    ),
    (
        "code_runner_runtime_slots_max",
        "Runtime slots the worker has (max_runtimes).",
    ),
    (
        "code_runner_kept_runtimes",
        "Kept runtimes live in this worker.",
    ),
    (
        "code_runner_suspended_runs",
        "Runs suspended on a call that waits for a person.",
    ),
    (
        "code_runner_mcp_followers",
        "MCP sessions open (over HTTP and stdio), each following the tool list; stateless 2026-07-28 requests hold none.",
    ),
    (
        "code_runner_linked_file_bytes",
        "Bytes of collected files held for their links.",
    ),
    (
        "code_runner_resident_memory_bytes",
        "The worker process's resident memory (RSS).",
    ),
];

/// The process's resident set, from `/proc/self/statm` (0 if unreadable).
fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * 4096
}
