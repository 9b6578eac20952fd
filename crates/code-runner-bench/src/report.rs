//! The results as rows of the table and as the JSON report.

use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::collect::LangResults;
use super::measure::{Lifecycle, Throughput};
use super::profiles::Profile;
use super::stats::{Compute, Stats};
use super::table::{Row, Target, num};
use super::{Outcome, Plan};

/// `a / b` of two figures, or the first reason one is missing.
fn ratio(a: Outcome<f64>, b: Outcome<f64>) -> Outcome<f64> {
    Ok(a? / b?)
}

/// Picks one phase of a bare runtime's life.
type Phase = fn(&Lifecycle) -> Stats;

/// Ratios of code-runner against the machine's interpreters.
struct Ratios {
    compute: Outcome<f64>,
    one_shot_in_process: Outcome<f64>,
    one_shot_http: Outcome<f64>,
    paced_in_process: Outcome<f64>,
}

impl Ratios {
    fn of(results: &LangResults) -> Ratios {
        let p50 = |s: &Outcome<Stats>| s.as_ref().map(|s| s.p50_ms).map_err(String::clone);
        let median = |c: &Outcome<Compute>| c.as_ref().map(|c| c.median_ms).map_err(String::clone);
        Ratios {
            compute: ratio(median(&results.compute), median(&results.native_compute)),
            one_shot_in_process: ratio(
                p50(&results.one_shot_in_process),
                p50(&results.process_start),
            ),
            one_shot_http: ratio(p50(&results.one_shot_http), p50(&results.process_start)),
            paced_in_process: ratio(p50(&results.paced_in_process), p50(&results.process_start)),
        }
    }
}

/// The table's rows, language by language, then the process-start comparison.
pub fn rows(profiles: &[Profile], results: &[LangResults], plan: &Plan) -> Vec<Row> {
    let mut rows = Vec::new();
    for (profile, r) in profiles.iter().zip(results) {
        let lang = profile.lang;
        let t = profile.targets;
        let key = |what: &str| format!("{lang}.{what}");
        let pause = plan.pause_ms;
        let one_shot = [
            (
                "one_shot.in_process",
                format!("{lang} one-shot, in-process, back-to-back"),
                &r.one_shot_in_process,
            ),
            (
                "one_shot.http",
                format!("{lang} one-shot, HTTP, back-to-back"),
                &r.one_shot_http,
            ),
            (
                "one_shot.paced.in_process",
                format!("{lang} one-shot, in-process, {pause} ms apart"),
                &r.paced_in_process,
            ),
            (
                "one_shot.paced.http",
                format!("{lang} one-shot, HTTP, {pause} ms apart"),
                &r.paced_http,
            ),
        ];
        for (what, measure, stats) in one_shot {
            rows.push(Row::latency(key(what), measure, stats, Some(t.one_shot)));
        }
        rows.push(Row::latency(
            key("kept_turn.in_process"),
            format!("{lang} kept-runtime turn, in-process"),
            &r.kept_in_process,
            Some(t.kept_turn),
        ));
        rows.push(Row::latency(
            key("kept_turn.http"),
            format!("{lang} kept-runtime turn, HTTP"),
            &r.kept_http,
            Some(t.kept_turn),
        ));
        let phases: [(&str, &str, Phase); 3] = [
            ("boot", "interpreter boot (spawn → ready)", |l| l.boot),
            ("first_turn", "first turn on a fresh interpreter", |l| {
                l.first_turn
            }),
            ("close", "runtime close", |l| l.close),
        ];
        for (what, label, phase) in phases {
            let stats = r.lifecycle.as_ref().map(phase).map_err(String::clone);
            rows.push(Row::latency(
                key(&format!("bare.{what}")),
                format!("{lang} bare {label}"),
                &stats,
                None,
            ));
        }
        for (concurrency, figure) in &r.throughput {
            let value = figure
                .as_ref()
                .map(|f| f.runs_per_sec)
                .map_err(String::clone);
            rows.push(Row::figure(
                key(&format!("throughput.c{concurrency}")),
                format!("{lang} one-shot throughput, concurrency {concurrency}"),
                value,
                "runs/s",
                Some(t.throughput),
            ));
            let cpu =
                |pick: fn(&Throughput) -> f64| figure.as_ref().map(pick).map_err(String::clone);
            rows.push(Row::figure(
                key(&format!("cpu.c{concurrency}.user")),
                format!("{lang} process user CPU per one-shot, concurrency {concurrency}"),
                cpu(|f| f.user_ms_per_run),
                "ms",
                None,
            ));
            rows.push(Row::figure(
                key(&format!("cpu.c{concurrency}.system")),
                format!("{lang} process kernel CPU per one-shot, concurrency {concurrency}"),
                cpu(|f| f.system_ms_per_run),
                "ms",
                None,
            ));
            rows.push(Row::figure(
                key(&format!("cpu.c{concurrency}.kernel_share")),
                format!("{lang} kernel share of the process CPU, concurrency {concurrency}"),
                cpu(|f| f.kernel_percent),
                "%",
                Some(Target::at_most(20.0, "%")),
            ));
        }
        let rss = r
            .rss
            .as_ref()
            .map(|f| f.per_runtime_mib)
            .map_err(String::clone);
        rows.push(Row::figure(
            key("rss_per_kept_runtime"),
            format!(
                "{lang} RSS per kept runtime ({} kept)",
                plan.kept_runtimes(profile)
            ),
            rss,
            "MiB",
            Some(t.rss_per_kept),
        ));
        let median = |c: &Outcome<Compute>| c.as_ref().map(|c| c.median_ms).map_err(String::clone);
        let native_name = r
            .native
            .as_ref()
            .map_or(profile.tool.program.to_string(), |f| f.version.clone());
        rows.push(Row::figure(
            key("compute.code_runner"),
            format!("{lang} compute {}, code-runner", profile.compute_label),
            median(&r.compute),
            "ms",
            None,
        ));
        rows.push(Row::figure(
            key("compute.native"),
            format!("{lang} compute {}, {native_name}", profile.compute_label),
            median(&r.native_compute),
            "ms",
            None,
        ));
        rows.push(Row::figure(
            key("compute.ratio"),
            format!("{lang} compute, code-runner ÷ {}", profile.tool.program),
            Ratios::of(r).compute,
            "×",
            Some(t.compute_ratio),
        ));
        rows.extend(compute_parts(&key("compute.part"), r));
    }
    for (profile, r) in profiles.iter().zip(results) {
        let lang = profile.lang;
        let start = profile.tool.start_command();
        let ratios = Ratios::of(r);
        rows.push(Row::latency(
            format!("{lang}.process_start"),
            format!("`{start}` process (spawn + wait)"),
            &r.process_start,
            None,
        ));
        let versus = [
            ("in_process", "in-process", ratios.one_shot_in_process),
            ("http", "HTTP", ratios.one_shot_http),
            (
                "paced.in_process",
                &*format!("in-process, {} ms apart,", plan.pause_ms),
                ratios.paced_in_process,
            ),
        ];
        for (what, how, ratio) in versus {
            rows.push(Row::figure(
                format!("{lang}.one_shot_vs_process.{what}"),
                format!("{lang} one-shot {how} ÷ `{start}`"),
                ratio,
                "×",
                None,
            ));
        }
    }
    rows
}

/// One row per named part of a compute script that both sides timed:
/// where the ratio comes from.
fn compute_parts(key: &str, r: &LangResults) -> Vec<Row> {
    let (Ok(guest), Ok(native)) = (&r.compute, &r.native_compute) else {
        return Vec::new();
    };
    guest
        .parts_median_ms
        .iter()
        .filter_map(|(name, ms)| {
            let (ms, base) = (ms.as_f64()?, native.parts_median_ms.get(name)?.as_f64()?);
            let mut row = Row::figure(
                format!("{key}.{name}"),
                format!("  · {name}"),
                Ok(ms / base),
                "×",
                None,
            );
            row.shown = format!("{} ÷ {} ms = {}", num(ms), num(base), row.shown);
            Some(row)
        })
        .collect()
}

/// A figure as JSON, or `{"unavailable": why}`.
fn fig<T: Serialize>(outcome: &Outcome<T>) -> Value {
    match outcome {
        Ok(value) => serde_json::to_value(value).unwrap_or(Value::Null),
        Err(why) => json!({ "unavailable": why }),
    }
}

/// The JSON report: every figure, the targets, the ratios and the machine.
pub fn json_report(
    profiles: &[Profile],
    results: &[LangResults],
    plan: &Plan,
    rows: &[Row],
    started: Instant,
) -> Value {
    let mut langs = Map::new();
    let mut baselines = Map::new();
    let mut ratios = Map::new();
    let mut targets = Map::new();
    for (profile, r) in profiles.iter().zip(results) {
        let lang = profile.lang.to_string();
        let throughput: Vec<Value> = r
            .throughput
            .iter()
            .map(|(c, f)| match f {
                Ok(f) => fig(&Ok::<_, String>(f.clone())),
                Err(why) => json!({"concurrency": c, "unavailable": why}),
            })
            .collect();
        langs.insert(lang.clone(), json!({
            "one_shot": {
                "code": profile.trivial,
                "in_process": fig(&r.one_shot_in_process),
                "http": fig(&r.one_shot_http),
                "paced": {"pause_ms": plan.pause_ms, "in_process": fig(&r.paced_in_process), "http": fig(&r.paced_http)},
            },
            "kept_turn": {"setup": profile.setup, "code": profile.trivial, "in_process": fig(&r.kept_in_process), "http": fig(&r.kept_http)},
            "bare_runtime": fig(&r.lifecycle),
            "throughput": throughput,
            "rss": fig(&r.rss),
            "compute": {"label": profile.compute_label, "code": profile.compute_guest, "code_runner": fig(&r.compute)},
        }));
        let checks_agree = match (&r.compute, &r.native_compute) {
            (Ok(a), Ok(b)) => Value::Bool(a.check == b.check),
            _ => Value::Null,
        };
        baselines.insert(profile.tool.program.to_string(), json!({
            "lang": lang,
            "found": fig(&r.native),
            "process_start": {"command": profile.tool.start_command(), "stats": fig(&r.process_start)},
            "compute": {"label": profile.compute_label, "code": profile.compute_native, "stats": fig(&r.native_compute), "checks_agree": checks_agree},
        }));
        let q = Ratios::of(r);
        ratios.insert(
            lang.clone(),
            json!({
                "compute_code_runner_over_native": fig(&q.compute),
                "one_shot_in_process_p50_over_process_start_p50": fig(&q.one_shot_in_process),
                "one_shot_http_p50_over_process_start_p50": fig(&q.one_shot_http),
                "one_shot_paced_in_process_p50_over_process_start_p50": fig(&q.paced_in_process),
            }),
        );
        targets.insert(
            lang,
            serde_json::to_value(profile.targets).unwrap_or(Value::Null),
        );
    }
    json!({
        "code_runner_version": env!("CARGO_PKG_VERSION"),
        "machine": super::native::machine_facts(),
        "plan": plan,
        "duration_secs": started.elapsed().as_secs_f64(),
        "results": langs,
        "baselines": baselines,
        "ratios": ratios,
        "targets": targets,
        "rows": rows,
    })
}
