//! Taking the figures, language by language.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::measure::{self, Driver, Lifecycle, Rss, Series, Throughput, Via};
use super::native::{self, Found};
use super::profiles::{Profile, engine_for};
use super::stats::{Compute, Stats};
use super::{Outcome, Plan};

/// Everything measured for one language.
pub struct LangResults {
    pub one_shot_in_process: Outcome<Stats>,
    pub one_shot_http: Outcome<Stats>,
    pub paced_in_process: Outcome<Stats>,
    pub paced_http: Outcome<Stats>,
    pub kept_in_process: Outcome<Stats>,
    pub kept_http: Outcome<Stats>,
    pub lifecycle: Outcome<Lifecycle>,
    pub throughput: Vec<(usize, Outcome<Throughput>)>,
    pub rss: Outcome<Rss>,
    pub compute: Outcome<Compute>,
    pub native: Outcome<Found>,
    pub native_compute: Outcome<Compute>,
    pub process_start: Outcome<Stats>,
}

impl LangResults {
    fn unavailable(why: &str, plan: &Plan) -> LangResults {
        fn na<T>(why: &str) -> Outcome<T> {
            Err(why.to_string())
        }
        LangResults {
            one_shot_in_process: na(why),
            one_shot_http: na(why),
            paced_in_process: na(why),
            paced_http: na(why),
            kept_in_process: na(why),
            kept_http: na(why),
            lifecycle: na(why),
            throughput: plan.concurrency.iter().map(|&c| (c, na(why))).collect(),
            rss: na(why),
            compute: na(why),
            native: na(why),
            native_compute: na(why),
            process_start: na(why),
        }
    }
}

/// Logs a step, times it, and reports a failure without stopping the bench.
async fn step<T>(what: String, work: impl Future<Output = Outcome<T>>) -> Outcome<T> {
    tracing::info!("bench: {what}");
    let started = Instant::now();
    let outcome = work.await;
    match &outcome {
        Ok(_) => tracing::debug!("bench: {what}: {:.1}s", started.elapsed().as_secs_f64()),
        Err(err) => tracing::warn!("bench: {what}: {err}"),
    }
    outcome
}

/// Runs blocking work (process spawns) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Outcome<T> + Send + 'static,
) -> Outcome<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|err| Err(format!("panicked: {err}")))
}

/// Takes every figure for one language; n/a rows when its engine is missing.
pub async fn measure_lang(
    driver: &Driver,
    profile: &Profile,
    plan: &Plan,
    scratch: &Path,
) -> LangResults {
    let lang = profile.lang;
    let tool = profile.tool;
    let one_shot = json!({"lang": lang, "code": profile.trivial});
    let native = step(
        format!("finding {}", tool.program),
        blocking(move || native::find(&tool)),
    )
    .await;

    let mut results = match availability(driver, profile, &one_shot).await {
        Ok(()) => measure_engine(driver, profile, plan, scratch, &one_shot).await,
        Err(why) => {
            tracing::warn!("bench: {why}");
            LangResults::unavailable(&why, plan)
        }
    };
    (results.native_compute, results.process_start) = match &native {
        Ok(found) => {
            let (reps, program) = (plan.compute_reps, profile.compute_native.clone());
            let (warmup, n) = (plan.warmup, plan.process_starts);
            let (a, b) = (found.clone(), found.clone());
            let compute = step(
                format!(
                    "{} compute ({}) ×{reps}",
                    tool.program, profile.compute_label
                ),
                blocking(move || native::compute(&tool, &a, &program, reps)),
            )
            .await;
            let start = step(
                format!("{} start ×{n}", tool.start_command()),
                blocking(move || native::process_start(&tool, &b, warmup, n)),
            )
            .await;
            (compute, start)
        }
        Err(why) => (Err(why.clone()), Err(why.clone())),
    };
    results.native = native;
    results
}

/// Whether the worker runs `profile`'s language: its health report first
/// (an engine not in this build says so), then a probe run that must answer 4.
async fn availability(driver: &Driver, profile: &Profile, one_shot: &Value) -> Outcome<()> {
    let lang = profile.lang;
    match driver.engine_health(lang).as_deref() {
        Some("ready") | None => {}
        Some("not in this build") => return Err(format!("n/a ({lang} engine not in this build)")),
        Some(other) => return Err(format!("n/a ({lang} engine {other})")),
    }
    let answer = driver
        .run(Via::InProcess, one_shot.clone())
        .await
        .map_err(|err| format!("n/a ({lang} engine fails: {err})"))?;
    if answer["result"] != json!(4) {
        return Err(format!(
            "n/a ({} answered {})",
            profile.trivial, answer["result"]
        ));
    }
    Ok(())
}

/// The code-runner side of one language whose engine answered.
async fn measure_engine(
    driver: &Driver,
    profile: &Profile,
    plan: &Plan,
    scratch: &Path,
    one_shot: &Value,
) -> LangResults {
    let lang = profile.lang;
    let (n, warmup) = (plan.latency, plan.warmup);
    // Memory first, before load has grown the allocator's arenas.
    let kept = plan.kept_runtimes(profile);
    let rss = step(
        format!("{lang} RSS over {kept} kept runtimes"),
        driver.rss(lang, profile.setup, kept),
    )
    .await;
    let back_to_back = Series {
        warmup,
        n,
        pause_ms: 0,
    };
    let paced = Series {
        warmup: 1,
        n: plan.paced,
        pause_ms: plan.pause_ms,
    };
    let one_shot_in_process = step(
        format!("{lang} one-shot in-process ×{n}"),
        driver.latency(Via::InProcess, one_shot, back_to_back),
    )
    .await;
    let one_shot_http = step(
        format!("{lang} one-shot over HTTP ×{n}"),
        driver.latency(Via::Http, one_shot, back_to_back),
    )
    .await;
    let paced_in_process = step(
        format!(
            "{lang} one-shot in-process, {} ms apart ×{}",
            paced.pause_ms, paced.n
        ),
        driver.latency(Via::InProcess, one_shot, paced),
    )
    .await;
    let paced_http = step(
        format!(
            "{lang} one-shot over HTTP, {} ms apart ×{}",
            paced.pause_ms, paced.n
        ),
        driver.latency(Via::Http, one_shot, paced),
    )
    .await;
    let kept_in_process = step(
        format!("{lang} kept turn in-process ×{n}"),
        driver.kept_turn(
            Via::InProcess,
            lang,
            profile.setup,
            profile.trivial,
            back_to_back,
        ),
    )
    .await;
    let kept_http = step(
        format!("{lang} kept turn over HTTP ×{n}"),
        driver.kept_turn(
            Via::Http,
            lang,
            profile.setup,
            profile.trivial,
            back_to_back,
        ),
    )
    .await;
    let boots = plan.boots;
    let lifecycle = step(
        format!("{lang} bare runtime boot, turn, close ×{boots}"),
        async {
            let engine = blocking(move || engine_for(lang)).await?;
            measure::lifecycle(
                &engine,
                profile.trivial,
                &scratch.join("boot"),
                warmup,
                boots,
            )
            .await
        },
    )
    .await;
    let mut throughput = Vec::new();
    for concurrency in plan.concurrency {
        let runs = plan.throughput_runs.max(2 * concurrency);
        let figure = step(
            format!("{lang} throughput, {runs} one-shot runs at concurrency {concurrency}"),
            driver.throughput(one_shot, concurrency, runs),
        )
        .await;
        throughput.push((concurrency, figure));
    }
    let reps = plan.compute_reps;
    let compute = step(
        format!("{lang} compute ({}) ×{reps}", profile.compute_label),
        driver.compute(lang, profile.setup, &profile.compute_guest, reps),
    )
    .await;
    LangResults {
        one_shot_in_process,
        one_shot_http,
        paced_in_process,
        paced_http,
        kept_in_process,
        kept_http,
        lifecycle,
        throughput,
        rss,
        compute,
        native: Err(String::new()),
        native_compute: Err(String::new()),
        process_start: Err(String::new()),
    }
}
