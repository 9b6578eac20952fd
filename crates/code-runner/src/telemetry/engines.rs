//! The engines' own gauges, read at each scrape: per language, its live
//! runtimes and the guest memory they hold; for an engine with a pool of
//! instance slots of its own (python's wasmtime pooling allocator), the
//! slots, how many have been reset for reuse, and the freed memory kept
//! resident for the next instance.

use code_runner_core::EngineStats;
use metrics::{Key, Label, Recorder, SharedString};

use super::{META, Metrics};

const RUNTIMES: &str = "code_runner_engine_runtimes";
const MEMORY: &str = "code_runner_engine_memory_bytes";
const SLOTS_MAX: &str = "code_runner_engine_slots_max";
const RESETS: &str = "code_runner_engine_slot_resets_total";
const RESIDENT: &str = "code_runner_engine_resident_bytes";

impl Metrics {
    pub(super) fn describe_engines(&self) {
        let gauges = [
            (
                RUNTIMES,
                "Live runtimes by engine (python: instance slots in use; node, typescript: isolates, pooled ones included).",
            ),
            (
                MEMORY,
                "Guest memory the live runtimes hold, by engine (python: linear memory; node, typescript: V8 heap at each runtime's last turn's peak).",
            ),
            (
                SLOTS_MAX,
                "Instance slots an engine's own pool holds (python).",
            ),
            (
                RESIDENT,
                "Bytes of freed instance slots kept resident for the next instance (python).",
            ),
        ];
        for (name, help) in gauges {
            self.recorder
                .describe_gauge(name.into(), None, SharedString::const_str(help));
        }
        self.recorder.describe_counter(
            RESETS.into(),
            None,
            SharedString::const_str(
                "Instance slots freed and reset for the next instance since start (python).",
            ),
        );
    }

    /// Sets the engines' gauges from `stats`, by language.
    pub(super) fn engines(&self, stats: &[(&'static str, EngineStats)]) {
        for (lang, stats) in stats {
            let key = |name: &'static str| {
                Key::from_parts(name, vec![Label::from_static_parts("lang", lang)])
            };
            let gauge = |name, value: u64| {
                self.recorder
                    .register_gauge(&key(name), &META)
                    .set(value as f64);
            };
            gauge(RUNTIMES, stats.live);
            gauge(MEMORY, stats.memory_bytes);
            if stats.max > 0 {
                gauge(SLOTS_MAX, stats.max);
                gauge(RESIDENT, stats.resident_bytes);
                self.recorder
                    .register_counter(&key(RESETS), &META)
                    .absolute(stats.resets);
            }
        }
    }
}
