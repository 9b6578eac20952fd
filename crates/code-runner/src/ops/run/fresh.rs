//! A run on a fresh runtime: booted (a pooled one, or a new one with the
//! request's files in), its turn (once more on another if its runtime died
//! before the code began), then kept under its id or closed.

use std::sync::Arc;
use std::time::Duration;

use code_runner_core::{
    Engine, ErrorCode, Fault, Lang, RunnerError, Runtime, RuntimeOptions, TurnEnding, TurnImages,
    TurnOutcome,
};
use serde_json::Value;

use super::Admitted;
use super::settle::{Context, refill_pool};
use crate::bus::{CallError, Caller};
use crate::ids::RuntimeKey;
use crate::ops::Ops;
use crate::ops::guest::GuestContext;
use crate::ops::retire::{self, Live};
use crate::runtimes::lineage::Lasting;
use crate::runtimes::registry::{Held, Slot, WorkDir};

/// The run of an admitted request without a `runtime_id`.
pub(super) async fn run(
    ops: &Arc<Ops>,
    admitted: Admitted,
    caller: &Caller,
) -> Result<Value, CallError> {
    let lang = admitted
        .request
        .lang
        .ok_or_else(|| RunnerError::invalid("lang is required when runtime_id is omitted"))?;
    let engine = ops.engine(lang, caller).await?;
    if lang.on_node_engine() && admitted.request.memory_mb.is_some() {
        return Err(RunnerError::invalid(format!(
            "memory_mb applies to python; a {lang} runtime's heap is the configuration's heap_mb"
        ))
        .into());
    }
    let memory_mb = admitted.config.memory_mb(admitted.request.memory_mb)?;
    if admitted.request.checkpoint && !(admitted.request.keep && lang == Lang::Python) {
        return Err(RunnerError::invalid(
            "checkpoint applies to a kept python runtime: pass it with keep: true and lang python",
        )
        .into());
    }
    let lasting = match admitted.request.keep {
        true => Lasting::Yes,
        false => Lasting::No,
    };
    let key = ops.lineage.begin(
        crate::ops::parent_of(caller),
        lasting,
        admitted.config.max_runtimes,
    )?;
    let live = Live::new(ops, key);
    let wait = crate::runtimes::registry::SLOT_WAIT.min(admitted.timeout);
    let slot = ops
        .registry
        .acquire_waiting(admitted.config.max_runtimes, wait)
        .await?;
    let fresh = Fresh {
        ops,
        lang,
        memory_mb,
        key,
        engine: &engine,
        admitted: &admitted,
    };
    let (runtime, dir, outcome, images) = first_turn(&fresh).await?;
    let collected = admitted
        .files
        .collect(Some(dir.0.clone()), admitted.config.collect_caps())
        .await;
    let succeeded = matches!(outcome.ending, TurnEnding::Exited { exit_code: 0, .. });
    let keeping = admitted.request.keep && succeeded;
    // A kept runtime's links live with it; a one-shot's for the idle TTL.
    let files = admitted
        .files
        .deliver(ops, collected, keeping.then_some(key));
    let elapsed = admitted.elapsed();
    let context = Context {
        lang,
        config: &admitted.config,
        kept: None,
        reset: None,
        restored: false,
    };
    let Admitted { settle, id, .. } = admitted;
    let settle = settle.with_files(files);
    if keeping {
        let response = settle.answer(outcome, images, elapsed, Some(id.clone()), context);
        return keep(
            ops,
            Kept {
                id,
                lang,
                key,
                memory_mb,
                checkpoint: admitted.request.checkpoint,
                runtime,
                dir,
                slot,
                live,
            },
            response,
        )
        .await;
    }
    close(ops, lang, runtime, dir, slot, live).await;
    settle.answer(outcome, images, elapsed, None, context)
}

/// What booting a fresh runtime for one run needs.
struct Fresh<'a> {
    ops: &'a Arc<Ops>,
    lang: Lang,
    memory_mb: u64,
    key: RuntimeKey,
    engine: &'a Arc<dyn Engine>,
    admitted: &'a Admitted,
}

/// A runtime for the run: a pooled one at its memory, else a new one; the
/// request's files go in before any code runs (past the runtime's quotas
/// the run ends here).
async fn boot(fresh: &Fresh<'_>) -> Result<(Arc<dyn Runtime>, WorkDir), RunnerError> {
    let ops = fresh.ops;
    let checkpoint = fresh.admitted.request.checkpoint;
    let warm = ops
        .pool(fresh.lang)
        .filter(|pool| pool.memory_mb() == fresh.memory_mb && !checkpoint)
        .and_then(|pool| pool.take());
    let (runtime, dir) = match warm {
        Some(warm) => (warm.runtime, warm.dir),
        None => {
            let dir = ops.engines.work_dir(fresh.lang)?;
            let options = RuntimeOptions {
                checkpoint,
                ..ops.engines.runtime_options(
                    &fresh.admitted.config,
                    fresh.lang,
                    fresh.memory_mb,
                    dir.0.clone(),
                )
            };
            (fresh.engine.spawn(options).await?, dir)
        }
    };
    let runtime = retire::attach(ops, fresh.key, runtime);
    if fresh.admitted.request.keep && fresh.lang.on_node_engine() {
        // A kept node runtime keeps a turn ledger, its snapshot, from the start.
        let options = crate::ops::sessions::ledger_options(&fresh.admitted.config, false);
        runtime.record(options).await;
    }
    if let Err(err) = fresh.admitted.files.put(runtime.as_ref()).await {
        runtime.close().await;
        dir.remove().await;
        return Err(err);
    }
    Ok((runtime, dir))
}

/// The run's turn on a fresh runtime; if that runtime died before the code
/// began (a sandbox process died between the pool's check and the turn), a
/// one-shot runs once more on another, with what is left of its budget.
async fn first_turn(
    fresh: &Fresh<'_>,
) -> Result<(Arc<dyn Runtime>, WorkDir, TurnOutcome, TurnImages), RunnerError> {
    let admitted = fresh.admitted;
    let context =
        || GuestContext::of(fresh.ops, fresh.key, fresh.lang, None).traced(admitted.trace.clone());
    let (runtime, dir) = boot(fresh).await?;
    let (outcome, images) = runtime
        .run_with_images(admitted.plan.turn(context(), admitted.timeout))
        .await;
    if admitted.request.keep || !matches!(outcome.ending, TurnEnding::Faulted(Fault::NotStarted(_)))
    {
        return Ok((runtime, dir, outcome, images));
    }
    tracing::info!(lang = %fresh.lang, "a one-shot's runtime was gone before its code ran; run again");
    runtime.close().await;
    dir.remove().await;
    let (runtime, dir) = boot(fresh).await?;
    let left = admitted.timeout.saturating_sub(admitted.started.elapsed());
    let (outcome, images) = runtime
        .run_with_images(
            admitted
                .plan
                .turn(context(), left.max(Duration::from_millis(1))),
        )
        .await;
    Ok((runtime, dir, outcome, images))
}

/// A runtime a run keeps, with what holds it.
struct Kept {
    id: String,
    lang: Lang,
    key: RuntimeKey,
    memory_mb: u64,
    checkpoint: bool,
    runtime: Arc<dyn Runtime>,
    dir: WorkDir,
    slot: Slot,
    live: Live,
}

/// Files the runtime under its id; if the runtime whose code started this
/// run ended meanwhile, ends it too and says so instead of `response`.
async fn keep(
    ops: &Arc<Ops>,
    kept: Kept,
    response: Result<Value, CallError>,
) -> Result<Value, CallError> {
    let Kept {
        id,
        lang,
        key,
        memory_mb,
        checkpoint,
        runtime,
        dir,
        slot,
        live,
    } = kept;
    let held = Held {
        lang,
        key,
        runtime,
        memory_mb,
        checkpoint,
    };
    ops.registry.keep(id.clone(), held, dir, slot);
    live.keep();
    refill_pool(&ops.engines, lang);
    if ops.lineage.is_orphaned(key) {
        retire::remove_kept(ops, &id).await.ok();
        return Err(RunnerError::new(
            ErrorCode::Expired,
            "the runtime whose code started this run has ended, and this runtime with it",
        )
        .into());
    }
    response
}

/// Ends a one-shot's runtime: closed, what it published retired, its
/// directory removed, its slot freed, the pool refilled.
async fn close(
    ops: &Arc<Ops>,
    lang: Lang,
    runtime: Arc<dyn Runtime>,
    dir: WorkDir,
    slot: Slot,
    live: Live,
) {
    runtime.close().await;
    live.finish().await;
    dir.remove().await;
    drop(slot);
    refill_pool(&ops.engines, lang);
}
