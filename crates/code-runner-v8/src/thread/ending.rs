//! How turns end: answered with their outcome (output, ending, facts), or
//! stopped all at once when the watchdog or the heap callback says so.

use std::time::Instant;

use code_runner_core::caps::{Stream, StreamBuffer};
use code_runner_core::{Completion, Fault, TurnEnding, TurnOutcome};

use super::Engine;
use crate::turn::{self, Internal, InternalArg, Turn};
use crate::watchdog::Stop;

/// The deadline the host gives the bootstrap's own clean-up after a turn:
/// far more than it needs (it cancels at most 10 000 timers), so it bites
/// only if something the bootstrap must not do (run guest code) happened.
const BOOTSTRAP_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

impl Engine {
    /// Handles a stop the watchdog (or the heap callback) recorded; answers whether there was one.
    pub(super) fn handle_stop(&mut self) -> bool {
        let Some(stop) = self.boot.watch.take(self.generation) else {
            if let Some(isolate) = self.isolate.as_mut()
                && isolate.runtime.v8_isolate().is_execution_terminating()
            {
                isolate.runtime.v8_isolate().cancel_terminate_execution();
            }
            return false;
        };
        self.apply_stop(stop);
        true
    }

    /// Ends the turns `stop` is about. JavaScript has unwound when this
    /// runs, so the termination is cancelled first: the bootstrap can then
    /// clean up after each turn it ends (under a deadline of its own).
    fn apply_stop(&mut self, stop: Stop) {
        if stop == Stop::Heap {
            let message = format!("heap limit {} MiB exceeded", self.boot.options.heap_mb);
            // The isolate is condemned: its heap is past the limit we set.
            self.discard_isolate(|_| Fault::ResourceExhausted(message.clone()));
            return;
        }
        if let Some(isolate) = self.isolate.as_mut() {
            isolate.runtime.v8_isolate().cancel_terminate_execution();
        }
        let now = Instant::now();
        match stop {
            Stop::Heap => {}
            Stop::Close => self.end_all(|_| Fault::Aborted),
            Stop::Timeout => {
                self.end_where(|t| now >= t.due(), |t| Fault::Timeout { budget: t.budget })
            }
            Stop::Abort => self.end_where(|t| t.abort.is_aborted(), |_| Fault::Aborted),
        }
    }

    /// Ends every turn with `fault` and drops the isolate (after the turns:
    /// they hold handles into it); the next turn boots a fresh one.
    fn discard_isolate(&mut self, fault: impl Fn(&Turn) -> Fault) {
        let isolate = self.isolate.take();
        self.end_all(fault);
        self.boot.watch.set_isolate(None);
        self.installed = None;
        drop(isolate);
        self.spoil_ledger("its isolate was replaced (its heap passed heap_mb), and the state it held went with it");
    }

    /// Calls the bootstrap's `endTurn(marker)` for a turn that has ended,
    /// under a deadline of its own ([`BOOTSTRAP_BUDGET`], or a turn's
    /// earlier one). The bootstrap touches nothing guest code can reach, so
    /// the deadline is a backstop: if it ever bites, the isolate cannot be
    /// trusted to be clean and is discarded, and the turns still in it end.
    fn end_turn_timers(&mut self, marker: u32) {
        let Some(isolate) = self.isolate.as_mut() else {
            return;
        };
        if isolate.runtime.v8_isolate().is_execution_terminating() {
            return;
        }
        let guard = Instant::now() + BOOTSTRAP_BUDGET;
        let earliest = self.turns.iter().map(Turn::due).min();
        let aborts = self.turns.iter().map(|t| t.abort.clone()).collect();
        self.generation = self
            .boot
            .watch
            .set_turns(Some(earliest.map_or(guard, |d| d.min(guard))), aborts);
        {
            let _js = self.boot.watch.enter();
            turn::call_internal(isolate, Internal::EndTurn, InternalArg::Marker(marker));
        }
        let stop = self.boot.watch.take(self.generation);
        self.rearm();
        let Some(stop) = stop else {
            return;
        };
        let now = Instant::now();
        if stop == Stop::Timeout && now >= guard && !self.turns.iter().any(|t| now >= t.due()) {
            tracing::error!(
                "the bootstrap did not finish cleaning up after a turn within {} ms; discarding the isolate",
                BOOTSTRAP_BUDGET.as_millis()
            );
            self.discard_isolate(|_| {
                Fault::Crashed(
                    "the runtime's isolate was discarded: cleaning up after a turn did not finish in time".into(),
                )
            });
            return;
        }
        self.apply_stop(stop);
    }

    pub(super) fn end_where(
        &mut self,
        which: impl Fn(&Turn) -> bool,
        fault: impl Fn(&Turn) -> Fault,
    ) {
        let ending: Vec<(u32, Fault)> = self
            .turns
            .iter()
            .filter(|t| which(t))
            .map(|t| (t.marker, fault(t)))
            .collect();
        for (marker, fault) in ending {
            self.finish(marker, TurnEnding::Faulted(fault));
        }
    }

    pub(super) fn end_all(&mut self, fault: impl Fn(&Turn) -> Fault) {
        self.end_where(|_| true, fault);
    }

    pub(super) fn fail_all(&mut self, text: &str) {
        let markers: Vec<u32> = self.turns.iter().map(|t| t.marker).collect();
        for marker in markers {
            self.fail(marker, text.to_string());
        }
    }

    /// Ends turn `marker` as a failed program: exit 1, `text` on stderr.
    pub(super) fn fail(&mut self, marker: u32, text: String) {
        if let Some(io) = self.io.borrow_mut().turns.get_mut(&marker) {
            io.stderr.push(text.as_bytes());
            io.stderr.push(b"\n");
        }
        self.finish(marker, exited_with(text));
    }

    /// Answers turn `marker` with `ending` and forgets it.
    pub(super) fn finish(&mut self, marker: u32, ending: TurnEnding) {
        let Some(position) = self.turns.iter().position(|t| t.marker == marker) else {
            return;
        };
        let turn = self.turns.swap_remove(position);
        let io = self.io.borrow_mut().turns.remove(&marker);
        self.rearm();
        self.end_turn_timers(marker);
        let (quota_hit, denied) = {
            let mut io = self.io.borrow_mut();
            if io.turns.is_empty() {
                io.forget_calls();
            }
            io.scratch.take_flags()
        };
        let external_hit = self
            .isolate
            .as_ref()
            .is_some_and(|isolate| isolate.external.take_hit());
        // V8 admits one young large object whatever its size (a 1 GiB string
        // in a 128 MiB heap) before any limit check: a turn that ends with
        // the heap past its limit had it, and the isolate is condemned (the
        // watch's heap stop discards it before the next turn).
        let over_heap = matches!(ending, TurnEnding::Exited { .. })
            && self.isolate.as_mut().is_some_and(|isolate| {
                let stats = isolate.runtime.v8_isolate().get_heap_statistics();
                stats.used_heap_size() > stats.heap_size_limit()
            });
        if over_heap {
            self.boot.watch.heap_exhausted();
        }
        let ending = match ending {
            TurnEnding::Exited { .. } if over_heap => {
                TurnEnding::Faulted(Fault::ResourceExhausted(format!(
                    "heap limit {} MiB exceeded",
                    self.boot.options.heap_mb
                )))
            }
            TurnEnding::Exited { exit_code, .. } if exit_code != 0 && external_hit => {
                let message = self
                    .isolate
                    .as_ref()
                    .map(|i| i.external.describe())
                    .unwrap_or_default();
                TurnEnding::Faulted(Fault::ResourceExhausted(message))
            }
            TurnEnding::Exited { exit_code, .. } if exit_code != 0 && quota_hit => {
                TurnEnding::Faulted(Fault::ResourceExhausted(
                    self.io.borrow().scratch.describe(),
                ))
            }
            other => other,
        };
        let (stdout, stderr) = match io {
            Some(io) => (io.stdout, io.stderr),
            None => (
                StreamBuffer::new(Stream::Stdout, Some(0)),
                StreamBuffer::new(Stream::Stderr, Some(0)),
            ),
        };
        let usage = code_runner_core::TurnUsage {
            cpu_ns: code_runner_core::thread_cpu_ns().saturating_sub(turn.cpu_start),
            peak_memory_bytes: self.isolate.as_mut().map_or(0, |isolate| {
                isolate.heap_peak.read(isolate.runtime.v8_isolate())
            }),
        };
        if let Some(ledger) = self.io.borrow_mut().ledger.as_mut() {
            ledger.end_turn(crate::ledger::ending_class(&ending), usage.cpu_ns);
        }
        let _ = turn.reply.send(TurnOutcome {
            usage,
            stdout,
            stderr,
            ending,
            denied,
            // A stopped turn leaves the isolate and its state (a condemned
            // one ends the runtime, which answers for itself).
            interpreter_reset: false,
            went_back: false,
        });
    }
}

pub(super) fn exited_with(text: String) -> TurnEnding {
    TurnEnding::Exited {
        exit_code: 1,
        completion: Completion::Absent,
        exception: Some(text),
    }
}
