//! How turns end: answered with their outcome (output, ending, facts), or
//! stopped all at once when the watchdog or the heap callback says so.

use std::time::Instant;

use code_runner_core::caps::{Stream, StreamBuffer};
use code_runner_core::{Completion, Fault, TurnEnding, TurnOutcome};

use super::Engine;
use crate::turn::{self, Internal, InternalArg, Turn};
use crate::watchdog::Stop;

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
        let now = Instant::now();
        match stop {
            Stop::Heap => {
                let message = format!("heap limit {} MiB exceeded", self.boot.options.heap_mb);
                self.end_all(|_| Fault::ResourceExhausted(message.clone()));
                // The isolate is condemned: its heap is past the limit we set.
                self.isolate = None;
                self.boot.watch.set_isolate(None);
                self.installed = None;
                return true;
            }
            Stop::Close => self.end_all(|_| Fault::Aborted),
            Stop::Timeout => self.end_where(
                |t| now >= t.deadline,
                |t| Fault::Timeout { budget: t.budget },
            ),
            Stop::Abort => self.end_where(|t| t.abort.is_aborted(), |_| Fault::Aborted),
        }
        if let Some(isolate) = self.isolate.as_mut() {
            isolate.runtime.v8_isolate().cancel_terminate_execution();
        }
        true
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
        let terminating = self
            .isolate
            .as_mut()
            .is_none_or(|isolate| isolate.runtime.v8_isolate().is_execution_terminating());
        if !terminating && let Some(isolate) = self.isolate.as_mut() {
            let _js = self.boot.watch.enter();
            turn::call_internal(isolate, Internal::EndTurn, InternalArg::Marker(marker));
        }
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
        let ending = match ending {
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
        let _ = turn.reply.send(TurnOutcome {
            stdout,
            stderr,
            ending,
            denied,
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
