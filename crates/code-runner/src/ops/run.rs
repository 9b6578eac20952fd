//! `code-runner::run`: one-shot runs (a fresh runtime each, closed after) and
//! kept runtimes (the first run keeps it and returns its `runtime_id`; later
//! runs reuse it by that id).

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runner_core::wire::{
    CollectedFile, ResetTo, RunRequest, RunResponse, RuntimeReset, schema_of,
};
use code_runner_core::{
    AbortSignal, ErrorCode, Fault, ImageCaps, OutputCaps, RunnerError, Task, TurnClock, TurnEnding,
    TurnImages, TurnOutcome, TurnSpec, cap_images, settle_response,
};
use serde_json::Value;

use crate::bus::names::RUN;
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ids::{new_runtime_id, redact};
use crate::ops::Ops;
use crate::ops::approvals::suspended::{Job, Progress};
use crate::ops::approvals::{self, Approver, Gate};
use crate::ops::egress::TurnEgress;
use crate::ops::files::RunFiles;
use crate::ops::guest::{self, GuestContext};
use crate::ops::handler_as;
use crate::ops::retire::{self, Live};
use crate::runtimes::engines::Engines;
use crate::runtimes::lineage::Lasting;

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
    let request: RunRequest = parse(payload)?;
    if let Some(id) = &request.runtime_id {
        crate::ops::standing::for_run(&ops, id)?;
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
    let run_files = RunFiles::parse(request.files, &request.collect, request.collect_mode)?;
    let config = ops.config();
    // A guest's run (from this worker or through the engine) lives within
    // the calling turn's budget, and ends when that turn answers.
    let timeout = match caller.time_left() {
        Some(left) => config
            .timeout(request.timeout_ms)?
            .min(left.max(Duration::from_millis(1))),
        None => config.timeout(request.timeout_ms)?,
    };
    // A signal per attempt: a turn's fires when it answers.
    let new_scope = || match (&caller.guest, &caller.cancel) {
        (Some(guest), _) => guest.scope.child(),
        (None, Some(cancel)) => cancel.child(),
        (None, None) => AbortSignal::new(),
    };
    let (caps, image_caps) = (config.output_caps(), config.image_caps());
    let output = match &suspendable.progress {
        Some(progress) => Some(progress.tee(caller.live.clone())),
        None => caller.live.clone(),
    };
    // Only a host's run can wait for a person: a run guest code started
    // has no gate of its own, so its code never holds a suspension (and a
    // `runtime_id` + `call_id`) it could resume itself.
    let approver = match &caller.guest {
        None => Approver::Run(suspendable.gate),
        Some(_) => Approver::Nobody(approvals::GUEST_STARTED),
    };
    let started = Instant::now();
    let (code, weak) = (request.code, Arc::downgrade(&ops));
    let egress = Arc::new(TurnEgress::default());
    let settled = Settle {
        caps,
        image_caps,
        egress: egress.clone(),
        files: Vec::new(),
    };
    let collect_caps = config.collect_caps();
    // The turn's signal is its scope: the bounded runtime fires it when the
    // turn answers, which ends the runs its guest code started. A retried
    // turn gets what is left of the run's budget.
    let turn = |context: GuestContext, timeout: Duration| {
        let (scope, clock) = (new_scope(), TurnClock::new());
        let bindings = context
            .within(scope.clone())
            .metered(egress.clone())
            .gated(approver.clone(), clock);
        TurnSpec {
            live: output.clone(),
            task: Task::Program(code.clone()),
            timeout,
            bindings: guest::bindings(weak.clone(), bindings).bindings,
            max_stream_bytes: caps.max_stream_bytes,
            abort: scope,
        }
    };
    let elapsed =
        |started: Instant| u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

    if let Some(id) = request.runtime_id {
        if request.memory_mb.is_some() {
            return Err(RunnerError::invalid(
                "memory_mb is fixed when a runtime is created; omit it when passing runtime_id",
            )
            .into());
        }
        let kept = crate::ops::standing::for_run(&ops, &id)?;
        if let Some(lang) = request.lang.filter(|lang| *lang != kept.lang) {
            return Err(RunnerError::invalid(format!(
                "lang {lang} contradicts runtime {}, which runs {}",
                redact(&id),
                kept.lang
            ))
            .into());
        }
        // One turn at a time: the calls waiting for this runtime (its runs and
        // its published functions alike) are bounded, so a client cannot queue
        // turns, and the code they carry, without end.
        let _place = ops.lineage.wait_for(kept.key)?;
        let _busy = kept.enter();
        run_files.put(kept.runtime.as_ref()).await?;
        let context = GuestContext::of(&ops, kept.key, kept.lang, None);
        // Said once, by the first run after the interpreter was lost.
        let reset = kept.take_reset();
        let (outcome, images) = kept.runtime.run_with_images(turn(context, timeout)).await;
        retire::forget_lost_registrations(&ops, kept.key, &outcome.ending);
        let collected = run_files.collect(kept.dir_path(), collect_caps).await;
        let files = run_files.deliver(&ops, collected, Some(kept.key));
        let answer = settled.with_files(files).answer(
            outcome,
            images,
            elapsed(started),
            Some(id),
            Context {
                lang: kept.lang,
                config: &config,
                kept: Some(&kept),
                reset,
            },
        );
        return answer;
    }

    let lang = request
        .lang
        .ok_or_else(|| RunnerError::invalid("lang is required when runtime_id is omitted"))?;
    let engine = ops.engine(lang, &caller).await?;
    if lang.on_node_engine() && request.memory_mb.is_some() {
        return Err(RunnerError::invalid(format!(
            "memory_mb applies to python; a {lang} runtime's heap is the configuration's heap_mb"
        ))
        .into());
    }
    let memory_mb = config.memory_mb(request.memory_mb)?;
    let lasting = if request.keep {
        Lasting::Yes
    } else {
        Lasting::No
    };
    let key = ops
        .lineage
        .begin(crate::ops::parent_of(&caller), lasting, config.max_runtimes)?;
    let live = Live::new(&ops, key);
    let wait = crate::runtimes::registry::SLOT_WAIT.min(timeout);
    let slot = ops
        .registry
        .acquire_waiting(config.max_runtimes, wait)
        .await?;
    let fresh = || async {
        let warm = ops
            .pool(lang)
            .filter(|pool| pool.memory_mb() == memory_mb)
            .and_then(|pool| pool.take());
        let (runtime, dir) = match warm {
            Some(warm) => (warm.runtime, warm.dir),
            None => {
                let dir = ops.engines.work_dir(lang)?;
                let options = ops
                    .engines
                    .runtime_options(&config, lang, memory_mb, dir.0.clone());
                (engine.spawn(options).await?, dir)
            }
        };
        let runtime = crate::ops::retire::attach(&ops, key, runtime);
        // The request's files go in before any code runs; past the
        // runtime's quotas the run ends here.
        if let Err(err) = run_files.put(runtime.as_ref()).await {
            runtime.close().await;
            dir.remove().await;
            return Err(err);
        }
        Ok::<_, RunnerError>((runtime, dir))
    };
    let (mut runtime, mut dir) = fresh().await?;
    let (mut outcome, mut images) = runtime
        .run_with_images(turn(GuestContext::of(&ops, key, lang, None), timeout))
        .await;
    if !request.keep && matches!(outcome.ending, TurnEnding::Faulted(Fault::NotStarted(_))) {
        // Its runtime died before the code began (a sandbox process died
        // between the pool's check and the turn): once more, on a fresh one.
        tracing::info!(%lang, "a one-shot's runtime was gone before its code ran; run again");
        runtime.close().await;
        dir.remove().await;
        (runtime, dir) = fresh().await?;
        let left = timeout.saturating_sub(started.elapsed());
        (outcome, images) = runtime
            .run_with_images(turn(
                GuestContext::of(&ops, key, lang, None),
                left.max(Duration::from_millis(1)),
            ))
            .await;
    }
    let collected = run_files.collect(Some(dir.0.clone()), collect_caps).await;
    let succeeded = matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, .. });
    // A kept runtime's links live with it; a one-shot's for the idle TTL.
    let owner = (request.keep && succeeded).then_some(key);
    let settled = settled.with_files(run_files.deliver(&ops, collected, owner));
    let context = Context {
        lang,
        config: &config,
        kept: None,
        reset: None,
    };
    if request.keep && succeeded {
        let id = suspendable.id;
        let response = settled.answer(outcome, images, elapsed(started), Some(id.clone()), context);
        ops.registry.keep(id.clone(), lang, key, runtime, dir, slot);
        live.keep();
        refill_pool(&ops.engines, lang);
        if ops.lineage.is_orphaned(key) {
            // The runtime whose code started this one ended meanwhile.
            retire::remove_kept(&ops, &id).await.ok();
            return Err(RunnerError::new(
                ErrorCode::Expired,
                "the runtime whose code started this run has ended, and this runtime with it",
            )
            .into());
        }
        return response;
    }
    runtime.close().await;
    live.finish().await;
    dir.remove().await;
    drop(slot);
    refill_pool(&ops.engines, lang);
    settled.answer(outcome, images, elapsed(started), None, context)
}

/// What an answer says beyond the turn's outcome: the runtime's language and
/// the configuration (to name a knob that stopped it), and for a kept
/// runtime, the runtime (whose lost interpreter the next run reports) and
/// why it was reset before this run, if it was.
struct Context<'a> {
    lang: code_runner_core::Lang,
    config: &'a code_runner_core::Config,
    kept: Option<&'a crate::runtimes::registry::Kept>,
    reset: Option<String>,
}

/// The caps a run's answer is settled under, what its requests cost, and
/// the files it collected.
struct Settle {
    caps: OutputCaps,
    image_caps: ImageCaps,
    egress: Arc<TurnEgress>,
    files: Vec<CollectedFile>,
}

impl Settle {
    /// With the files the run's `collect` matched (already capped).
    fn with_files(self, files: Vec<CollectedFile>) -> Self {
        Settle { files, ..self }
    }

    /// The response to a finished turn: its outcome settled, its images
    /// capped; a stopped turn's error names its knob and keeps its output.
    fn answer(
        self,
        outcome: TurnOutcome,
        images: TurnImages,
        duration_ms: u64,
        runtime_id: Option<String>,
        context: Context<'_>,
    ) -> Result<Value, CallError> {
        let lost = outcome.interpreter_reset && context.kept.is_some();
        let mut response = match settle_response(outcome, self.caps, duration_ms, runtime_id) {
            Ok(response) => response,
            Err(err) => {
                if let (true, Some(kept)) = (lost, context.kept) {
                    kept.mark_reset(crate::ops::knobs::lost_because(err.code));
                }
                return Err(
                    crate::ops::knobs::explain(err, context.lang, context.config, lost).into(),
                );
            }
        };
        if let (true, Some(kept)) = (lost, context.kept) {
            // It exited the interpreter (os._exit): its next run starts afresh.
            kept.mark_reset("the previous turn exited the interpreter");
        }
        response.runtime_reset = context.reset.map(|because| RuntimeReset {
            to: ResetTo::Fresh,
            because,
        });
        response.images = cap_images(images, self.image_caps);
        response.usage.egress = self.egress.usage();
        response.files = self.files;
        Ok(serde_json::to_value(response).unwrap_or(Value::Null))
    }
}

/// Boots replacements for pooled runtimes once a run is over, so the boot
/// does not compete with the run it would slow down.
fn refill_pool(engines: &Engines, lang: code_runner_core::Lang) {
    if let Some(pool) = engines.pool(lang) {
        pool.refill();
    }
}
