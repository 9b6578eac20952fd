//! How a run's answer is settled: its outcome under the caps in force, its
//! images capped, what its requests cost, the files it collected, and for a
//! kept runtime whether its interpreter was lost.

use std::sync::Arc;

use code_runner_core::wire::{CollectedFile, ResetTo, RuntimeReset};
use code_runner_core::{
    ImageCaps, OutputCaps, TurnImages, TurnOutcome, cap_images, settle_response,
};
use serde_json::Value;

use crate::bus::CallError;
use crate::ops::egress::TurnEgress;
use crate::runtimes::engines::Engines;

/// What an answer says beyond the turn's outcome: the runtime's language and
/// the configuration (to name a knob that stopped it), and for a kept
/// runtime, the runtime (whose lost interpreter the next run reports) and
/// why it was reset before this run, if it was.
pub(super) struct Context<'a> {
    pub(super) lang: code_runner_core::Lang,
    pub(super) config: &'a code_runner_core::Config,
    pub(super) kept: Option<&'a crate::runtimes::registry::Kept>,
    pub(super) reset: Option<String>,
    /// The kept runtime was woken from hibernation for this run.
    pub(super) restored: bool,
}

/// What a stopped turn's error adds when its runtime went back to its checkpoint.
const WENT_BACK: &str = " The runtime went back to its state before this run (checkpoint: true): its variables, imports and /work are as they were, and nothing this run did is kept.";

/// The caps a run's answer is settled under, what its requests cost, and
/// the files it collected.
pub(super) struct Settle {
    pub(super) caps: OutputCaps,
    pub(super) image_caps: ImageCaps,
    pub(super) egress: Arc<TurnEgress>,
    pub(super) files: Vec<CollectedFile>,
}

impl Settle {
    /// With the files the run's `collect` matched (already capped).
    pub(super) fn with_files(self, files: Vec<CollectedFile>) -> Self {
        Settle { files, ..self }
    }

    /// The response to a finished turn: its outcome settled, its images
    /// capped; a stopped turn's error names its knob and keeps its output.
    pub(super) fn answer(
        self,
        outcome: TurnOutcome,
        images: TurnImages,
        duration_ms: u64,
        runtime_id: Option<String>,
        context: Context<'_>,
    ) -> Result<Value, CallError> {
        let lost = outcome.interpreter_reset && context.kept.is_some();
        let went_back = outcome.went_back;
        let mut response = match settle_response(outcome, self.caps, duration_ms, runtime_id) {
            Ok(response) => response,
            Err(err) => {
                if let (true, Some(kept)) = (lost, context.kept) {
                    kept.mark_reset(crate::ops::knobs::lost_because(err.code));
                }
                let mut err = crate::ops::knobs::explain(err, context.lang, context.config, lost);
                if went_back {
                    err.message.push_str(WENT_BACK);
                }
                return Err(err.into());
            }
        };
        if went_back {
            response.runtime_reset = Some(RuntimeReset {
                to: ResetTo::Checkpoint,
                because: "this run exited the interpreter; the runtime went back to its state before it (checkpoint)".into(),
            });
        }
        if let (true, Some(kept)) = (lost, context.kept) {
            // It exited the interpreter (os._exit): its next run starts afresh.
            kept.mark_reset("the previous turn exited the interpreter");
        }
        if let Some(because) = context.reset {
            response.runtime_reset = Some(RuntimeReset {
                to: ResetTo::Fresh,
                because,
            });
        }
        response.restored = context.restored;
        response.images = cap_images(images, self.image_caps);
        response.usage.egress = self.egress.usage();
        response.files = self.files;
        Ok(serde_json::to_value(response).unwrap_or(Value::Null))
    }
}

/// Boots replacements for pooled runtimes once a run is over, so the boot
/// does not compete with the run it would slow down.
pub(super) fn refill_pool(engines: &Engines, lang: code_runner_core::Lang) {
    if let Some(pool) = engines.pool(lang) {
        pool.refill();
    }
}
