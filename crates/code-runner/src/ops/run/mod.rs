//! `code-runner::run`: one-shot runs (a fresh runtime each, closed after) and
//! kept runtimes (the first run keeps it and returns its `runtime_id`; later
//! runs reuse it by that id).
//!
//! A run's stages, each a function: [`admit`] (the request checked, its
//! budget, files and caps; [`plan::Plan`] makes its turn), then either
//! [`on_kept`] (a turn on the kept runtime its id names) or `fresh::boot`
//! (a pooled or new runtime, the files in) and `fresh::first_turn` (once
//! more if the runtime died before the code began), then `fresh::keep` or
//! `fresh::close`; [`settle::Settle::answer`] settles each answer.

mod fresh;
mod plan;
mod settle;

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runner_core::wire::{RunRequest, RunResponse, schema_of};
use code_runner_core::{Lang, RunnerError};
use serde_json::Value;

use crate::bus::names::RUN;
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ids::{new_runtime_id, redact};
use crate::ops::Ops;
use crate::ops::approvals::suspended::{Job, Progress};
use crate::ops::approvals::{self, Gate};
use crate::ops::egress::TurnEgress;
use crate::ops::files::RunFiles;
use crate::ops::guest::GuestContext;
use crate::ops::handler_as;
use crate::ops::retire;
use settle::{Context, Settle};

/// `code-runner::run`, for the composition root.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    let sandbox = crate::ops::guidance::sandbox_sentence(&ops.config(), &ops.engines.offer());
    (
        RUN,
        Function::new(
            format!(
                "Run code in a sandbox ({sandbox}). One-shot by default: nothing persists and no runtime_id is returned. keep: true keeps the runtime and returns its runtime_id to reuse until code-runner::teardown or the idle TTL reaps it. A failing script is a response, not an error."
            ),
            schema_of::<RunRequest>(),
            schema_of::<RunResponse>(),
            handler_as(ops, run),
        ),
    )
}

/// `code-runner::run`. A run that guest code started (`caller` is a guest)
/// belongs to the calling runtime: kept, it is charged to the caller's
/// lineage and ends with the caller ([`crate::runtimes::lineage`]).
pub(crate) async fn run(ops: Arc<Ops>, payload: Value, caller: Caller) -> Result<Value, CallError> {
    let request: RunRequest = match parse(payload) {
        Ok(request) => request,
        Err(err) => {
            let facts = crate::telemetry::RunFacts {
                lang: "unknown",
                flavour: "-",
                kept: false,
                tenant: tenant_of(&ops, &caller),
                wall_ms: 0.0,
                files_in: 0,
            };
            caller
                .trace
                .record(|| crate::telemetry::run_attributes(&facts, Err(err.code.as_str())));
            ops.metrics.run(facts, Err(err.code.as_str()));
            return Err(err.into());
        }
    };
    let mut facts = run_facts(&ops, &request, &caller);
    let id = request.runtime_id.clone();
    let started = Instant::now();
    let trace = caller.trace.clone();
    let answer = run_parsed(&ops, request, caller).await;
    facts.wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    if let (None, Some(id)) = (facts.lang_known(), id) {
        // A hibernated session is only in the registry once the run woke it.
        let lang = ops.registry.get(&id).ok().map(|kept| kept.lang);
        (facts.lang, facts.flavour) = lang_labels(&ops, lang);
    }
    let settled = answer.as_ref().map_err(|err| err.code.as_str());
    trace.record(|| crate::telemetry::run_attributes(&facts, settled));
    ops.metrics.run(facts, settled);
    answer
}

/// Who a run's usage is charged to: the namespace whose runtime's code
/// started it, else the host.
fn tenant_of(ops: &Ops, caller: &Caller) -> &'static str {
    match caller.guest.as_ref().and_then(|g| g.namespace.as_deref()) {
        Some(namespace) => ops.metrics.tenant(namespace),
        None => crate::telemetry::HOST,
    }
}

/// The language and flavour labels of `lang` (`unknown` when not known).
fn lang_labels(ops: &Ops, lang: Option<Lang>) -> (&'static str, &'static str) {
    match lang {
        Some(Lang::Python) => ("python", ops.engines.python_flavour().unwrap_or("unknown")),
        Some(lang) => (lang.as_str(), "-"),
        None => ("unknown", "-"),
    }
}

/// What the metrics count a run by: its language (the kept runtime's for a
/// `runtime_id`), python's flavour, and whether it is kept.
fn run_facts(ops: &Ops, request: &RunRequest, caller: &Caller) -> crate::telemetry::RunFacts {
    let lang = request.lang.or_else(|| {
        let id = request.runtime_id.as_deref()?;
        ops.registry.get(id).ok().map(|kept| kept.lang)
    });
    let (lang, flavour) = lang_labels(ops, lang);
    crate::telemetry::RunFacts {
        lang,
        flavour,
        kept: request.keep || request.runtime_id.is_some(),
        tenant: tenant_of(ops, caller),
        wall_ms: 0.0,
        files_in: request
            .files
            .iter()
            .map(|f| match (&f.text, &f.base64) {
                (Some(text), _) => text.len() as u64,
                (None, Some(b64)) => b64.len() as u64 / 4 * 3,
                (None, None) => 0,
            })
            .sum(),
    }
}

async fn run_parsed(
    ops: &Arc<Ops>,
    request: RunRequest,
    caller: Caller,
) -> Result<Value, CallError> {
    let ops = ops.clone();
    ops.sessions.refuse_if_draining()?;
    let _in_flight = ops.sessions.track_run();
    if let Some(id) = &request.runtime_id {
        crate::ops::standing::present(&ops, id).await?;
    }
    // The id the run is filed under if its code suspends on a call that
    // waits for a person: the kept runtime's, or a new one (which a `keep`
    // run keeps).
    let (id, existing) = match &request.runtime_id {
        Some(id) => (id.clone(), true),
        None => (new_runtime_id(ops.worker_name()), false),
    };
    let (gate, calls) = approvals::gate();
    let config = ops.config();
    let progress = ops
        .suspensions
        .possible(&config)
        .then(|| Progress::new(config.output_caps().max_stream_bytes));
    let task = tokio::spawn(execute(
        ops.clone(),
        request,
        caller,
        Suspendable {
            gate,
            id: id.clone(),
            progress: progress.clone(),
        },
    ));
    let job = Job {
        id,
        existing,
        task,
        calls,
        progress,
        started: Instant::now(),
    };
    approvals::suspended::answer(&ops, job).await
}

/// What lets a run's guest code wait for a person: the run's gate, the id
/// the run is filed under meanwhile, and its output so far.
struct Suspendable {
    gate: Arc<Gate>,
    id: String,
    progress: Option<Arc<Progress>>,
}

/// The run itself, as its own task ([`run`] waits for it, or for its
/// suspension).
async fn execute(
    ops: Arc<Ops>,
    request: RunRequest,
    caller: Caller,
    suspendable: Suspendable,
) -> Result<Value, CallError> {
    let admitted = admit(&ops, request, &caller, suspendable)?;
    match admitted.request.runtime_id.clone() {
        Some(id) => on_kept(&ops, admitted, &id).await,
        None => fresh::run(&ops, admitted, &caller).await,
    }
}

/// A run admitted: its request (code and files taken out), its plan, its
/// files, how its answer is settled, and when it started.
pub(super) struct Admitted {
    request: RunRequest,
    plan: plan::Plan,
    files: RunFiles,
    settle: Settle,
    config: code_runner_core::Config,
    timeout: Duration,
    started: Instant,
    /// The id a kept run is filed under.
    id: String,
    /// The run's span: what its guest code calls are spans within.
    trace: crate::telemetry::TraceParent,
}

impl Admitted {
    fn elapsed(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// Checks the request and fixes what the run is held to: its budget (a
/// guest's run lives within its calling turn's), its files, its caps, who
/// approves its gated calls.
fn admit(
    ops: &Arc<Ops>,
    mut request: RunRequest,
    caller: &Caller,
    suspendable: Suspendable,
) -> Result<Admitted, RunnerError> {
    let files = RunFiles::parse(
        std::mem::take(&mut request.files),
        &request.collect,
        request.collect_mode,
    )?;
    let config = ops.config();
    let timeout = match caller.time_left() {
        Some(left) => config
            .timeout(request.timeout_ms)?
            .min(left.max(Duration::from_millis(1))),
        None => config.timeout(request.timeout_ms)?,
    };
    let egress = Arc::new(TurnEgress::default());
    let settle = Settle {
        caps: config.output_caps(),
        image_caps: config.image_caps(),
        egress: egress.clone(),
        files: Vec::new(),
    };
    let plan = plan::Plan::new(
        ops,
        caller,
        std::mem::take(&mut request.code),
        &config,
        egress,
        suspendable.gate,
        suspendable.progress.as_ref(),
    );
    Ok(Admitted {
        request,
        plan,
        files,
        settle,
        config,
        timeout,
        started: Instant::now(),
        id: suspendable.id,
        trace: caller.trace.clone(),
    })
}

/// A turn on the kept runtime `id`: one at a time per runtime, its files
/// in first, what it collected delivered under its lineage.
async fn on_kept(ops: &Arc<Ops>, admitted: Admitted, id: &str) -> Result<Value, CallError> {
    if admitted.request.memory_mb.is_some() || admitted.request.checkpoint {
        return Err(RunnerError::invalid(
            "memory_mb and checkpoint are fixed when a runtime is created; omit them when passing runtime_id",
        )
        .into());
    }
    let (kept, _busy) = crate::ops::standing::enter(ops, id).await?;
    if let Some(lang) = admitted.request.lang.filter(|lang| *lang != kept.lang) {
        return Err(RunnerError::invalid(format!(
            "lang {lang} contradicts runtime {}, which runs {}",
            redact(id),
            kept.lang
        ))
        .into());
    }
    // One turn at a time: the calls waiting for this runtime (its runs and
    // its published functions alike) are bounded, so a client cannot queue
    // turns, and the code they carry, without end.
    let _place = ops.lineage.wait_for(kept.key)?;
    admitted.files.put(kept.runtime.as_ref()).await?;
    let context = GuestContext::of(ops, kept.key, kept.lang, None).traced(admitted.trace.clone());
    // Said once, by the first run after the interpreter was lost.
    let reset = kept.take_reset();
    let restored = kept.take_woken();
    let spec = admitted.plan.turn(context, admitted.timeout);
    let (outcome, images) = kept.runtime.run_with_images(spec).await;
    retire::forget_lost_registrations(ops, kept.key, &outcome.ending);
    let collected = admitted
        .files
        .collect(kept.dir_path(), admitted.config.collect_caps())
        .await;
    let files = admitted.files.deliver(ops, collected, Some(kept.key));
    let elapsed = admitted.elapsed();
    admitted.settle.with_files(files).answer(
        outcome,
        images,
        elapsed,
        Some(id.to_string()),
        Context {
            lang: kept.lang,
            config: &admitted.config,
            kept: Some(&kept),
            reset,
            restored,
        },
    )
}
