//! Per-tenant usage: what runs and published functions' calls cost, summed
//! per tenant, so a platform can bill or cap. This decides who a tenant is
//! and how long the sums are kept: a tenant is the namespace a call belongs
//! to (a published function's, or the namespace runtime whose guest code
//! made the run), else `host` (a host's own runs and what its kept
//! runtimes' code starts); at most [`MAX_TENANTS`] are told apart, the rest
//! are `other`. Sums are kept per minute for [`KEPT_MINUTES`] (a day), and
//! `code-runner::usage` answers them for a period.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Tenants told apart; past them, `other`.
pub const MAX_TENANTS: usize = 64;
/// Minutes of sums kept.
pub const KEPT_MINUTES: u64 = 24 * 60;
/// The tenant of what no namespace owns.
pub const HOST: &str = "host";
/// The tenant past [`MAX_TENANTS`].
pub const OTHER: &str = "other";

/// What one tenant used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Totals {
    /// Runs and published functions' calls answered.
    pub calls: u64,
    /// CPU on the runtimes' threads, in milliseconds.
    pub cpu_ms: f64,
    /// Wall time inside the worker, in milliseconds.
    pub wall_ms: f64,
    /// Bytes of responses guest code received through the host.
    pub egress_bytes: u64,
}

impl Totals {
    fn add(&mut self, other: Totals) {
        self.calls += other.calls;
        self.cpu_ms += other.cpu_ms;
        self.wall_ms += other.wall_ms;
        self.egress_bytes += other.egress_bytes;
    }
}

/// The per-minute sums.
#[derive(Debug, Default)]
pub struct Tally {
    minutes: Mutex<BTreeMap<u64, HashMap<&'static str, Totals>>>,
    tenants: Mutex<Vec<&'static str>>,
    /// Each tenant's sums since the worker started (the metrics' counters).
    since_start: Mutex<BTreeMap<&'static str, Totals>>,
}

/// The Unix minute now.
fn minute_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 60)
}

impl Tally {
    /// The label `tenant` is counted under: itself while fewer than
    /// [`MAX_TENANTS`] are known, else `other`. Known names are kept for
    /// the worker's life (a bounded set), so they can be `&'static`.
    pub fn label(&self, tenant: &str) -> &'static str {
        let mut known = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(name) = known.iter().find(|k| **k == tenant) {
            return name;
        }
        if tenant == HOST {
            return HOST;
        }
        if known.len() >= MAX_TENANTS {
            return OTHER;
        }
        let name: &'static str = Box::leak(tenant.to_string().into_boxed_str());
        known.push(name);
        name
    }

    /// `totals` used by `tenant` (a label from [`Tally::label`]) now.
    pub fn add(&self, tenant: &'static str, totals: Totals) {
        self.since_start
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(tenant)
            .or_default()
            .add(totals);
        let now = minute_now();
        let mut minutes = self.minutes.lock().unwrap_or_else(|p| p.into_inner());
        minutes
            .entry(now)
            .or_default()
            .entry(tenant)
            .or_default()
            .add(totals);
        let oldest = now.saturating_sub(KEPT_MINUTES);
        while minutes.first_key_value().is_some_and(|(m, _)| *m < oldest) {
            minutes.pop_first();
        }
    }

    /// What each tenant used from Unix second `from` to `to` (whole
    /// minutes; at most the last day is kept).
    pub fn period(&self, from: u64, to: u64) -> BTreeMap<String, Totals> {
        let minutes = self.minutes.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: BTreeMap<String, Totals> = BTreeMap::new();
        for (_, tenants) in minutes.range(from / 60..=to / 60) {
            for (tenant, totals) in tenants {
                out.entry((*tenant).to_string()).or_default().add(*totals);
            }
        }
        out
    }

    /// The counters of each tenant's sums since the worker started, in the
    /// Prometheus text format (float seconds, which the recorder's integer
    /// counters cannot hold).
    pub fn render(&self) -> String {
        let sums = self.since_start.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        let families: [Family; 4] = [
            (
                "code_runner_usage_calls_total",
                "Runs and published functions' calls answered, by tenant (a namespace, or host).",
                |t| t.calls.to_string(),
            ),
            (
                "code_runner_usage_cpu_seconds_total",
                "CPU the runtimes' threads spent, by tenant.",
                |t| (t.cpu_ms / 1000.0).to_string(),
            ),
            (
                "code_runner_usage_wall_seconds_total",
                "Wall time inside the worker, by tenant.",
                |t| (t.wall_ms / 1000.0).to_string(),
            ),
            (
                "code_runner_usage_egress_bytes_total",
                "Bytes guest code received through the host, by tenant.",
                |t| t.egress_bytes.to_string(),
            ),
        ];
        for (name, help, value) in families {
            if sums.is_empty() {
                break;
            }
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
            for (tenant, totals) in sums.iter() {
                out.push_str(&format!(
                    "{name}{{tenant=\"{}\"}} {}\n",
                    escape(tenant),
                    value(totals)
                ));
            }
        }
        out
    }
}

/// A usage counter family: its name, its help, its value of a tenant's sums.
type Family = (&'static str, &'static str, fn(&Totals) -> String);

/// A label value escaped for the text format.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
