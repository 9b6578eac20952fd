//! The runtime thread's side of the turn ledger ([`crate::ledger`]):
//! starting one, answering it as a snapshot, and a restore's replay, which
//! runs the ledger's turns one after the other in this fresh runtime (their
//! output discarded, each checked against the ledger) and then lets the
//! runtime go live, recording from where the ledger left off.

use std::time::{Duration, Instant};

use code_runner_core::{AbortSignal, Bindings, LedgerOptions, TurnOutcome, TurnSpec};
use serde_json::json;
use tokio::sync::oneshot;

use super::{Boot, Engine};
use crate::isolate::Isolate;
use crate::ledger::{self, Ledger, Step};
use crate::state::SharedIo;
use crate::turn::{self, Internal, InternalArg};

/// What a replay did.
#[derive(Debug, Clone, Copy)]
pub struct Replayed {
    /// Turns it ran again.
    pub turns: usize,
    /// CPU the first runs of those turns took.
    pub recorded_cpu_ns: u64,
}

/// Which ledger sources the isolate's bootstrap has in place.
#[derive(Default, PartialEq, Eq, Clone, Copy)]
pub enum JsLedger {
    /// V8's own `Date` and `Math.random`.
    #[default]
    Off,
    /// Recording.
    Record,
    /// Replaying.
    Replay,
}

/// A replay under way.
pub struct ReplayRun {
    reply: oneshot::Sender<Result<Replayed, String>>,
    /// The next entry of the ledger.
    next: usize,
    /// The turn replaying now: its entry and where its outcome comes.
    current: Option<(usize, oneshot::Receiver<TurnOutcome>)>,
    deadline: Instant,
    turns: usize,
}

/// The ledger a runtime boots with: one to replay (a restore), a new one
/// (the options ask for it), or none.
pub fn ledger_at_boot(boot: &mut Boot) -> Option<Ledger> {
    let options = boot.options.ledger?;
    Some(match boot.replay.take() {
        Some(book) => Ledger::replaying(book, options),
        None => Ledger::recording(options, ledger::draw_seed()),
    })
}

/// Puts the bootstrap's sources in step with the ledger before a turn's
/// JavaScript runs: recording or replaying, and the seed when it starts or
/// a fork reseeds.
pub fn sync_sources(
    isolate: &mut Isolate,
    io: &SharedIo,
    js: &mut JsLedger,
    reseed: &mut Option<[u32; 4]>,
) {
    let (wanted, seed) = {
        let io = io.borrow();
        let Some(ledger) = io.ledger.as_ref() else {
            return;
        };
        let wanted = match ledger.is_replaying() {
            true => JsLedger::Replay,
            false => JsLedger::Record,
        };
        let first = (*js == JsLedger::Off).then(|| ledger.seed());
        (wanted, reseed.take().or(first))
    };
    if wanted == *js && seed.is_none() {
        return;
    }
    let mode = match wanted {
        JsLedger::Replay => "replay",
        _ => "record",
    };
    let spec = json!({"mode": mode, "seed": seed}).to_string();
    turn::call_internal(isolate, Internal::Ledger, InternalArg::Text(spec));
    *js = wanted;
}

impl Engine {
    /// Starts a ledger (before the runtime's first turn; a warm-up turn of
    /// an empty program leaves nothing to record).
    pub(super) fn record(&mut self, options: LedgerOptions) {
        let mut io = self.io.borrow_mut();
        if io.ledger.is_none() {
            io.ledger = Some(Ledger::recording(options, ledger::draw_seed()));
        }
    }

    /// The ledger as a snapshot's sections.
    pub(super) fn ledger_sections(&self) -> Result<code_runner_core::SnapshotSections, String> {
        match self.io.borrow().ledger.as_ref() {
            Some(ledger) => ledger.sections(),
            None => Err("it keeps no turn ledger (only runtimes kept with keep: true do)".into()),
        }
    }

    /// The ledger can no longer be replayed, for `why`.
    pub(super) fn spoil_ledger(&mut self, why: &str) {
        if let Some(ledger) = self.io.borrow_mut().ledger.as_mut() {
            ledger.spoil(why);
        }
    }

    /// Starts replaying the ledger the runtime booted with.
    pub(super) fn replay(
        &mut self,
        budget: Duration,
        reply: oneshot::Sender<Result<Replayed, String>>,
    ) {
        if !self.io.borrow().replaying() || self.replaying.is_some() {
            let _ = reply.send(Err("the runtime has no ledger to replay".into()));
            return;
        }
        self.replaying = Some(ReplayRun {
            reply,
            next: 0,
            current: None,
            deadline: Instant::now() + budget,
            turns: 0,
        });
    }

    /// `(diverged, held)` for a replayed turn: the replay went otherwise
    /// (end it), or answers and timers of it are still to come (hold it).
    pub(super) fn replay_hold(&self) -> (bool, bool) {
        match self.io.borrow().ledger.as_ref() {
            Some(ledger) if ledger.is_replaying() => {
                (ledger.diverged().is_some(), ledger.events_left())
            }
            _ => (false, false),
        }
    }

    /// Takes the replay as far as it goes now: checks the turn that ended,
    /// puts files, starts the next turn; goes live after the last.
    pub(super) fn replay_progress(&mut self) {
        loop {
            let Some(run) = self.replaying.as_mut() else {
                return;
            };
            if let Some((entry, mut outcome)) = run.current.take() {
                let verdict = match outcome.try_recv() {
                    Err(oneshot::error::TryRecvError::Empty) => {
                        run.current = Some((entry, outcome));
                        return;
                    }
                    Ok(outcome) => self.check_replayed(entry, &outcome),
                    Err(_) => Err(format!("entry {entry}: the turn was not answered")),
                };
                if let Err(why) = verdict {
                    return self.end_replay(Err(why));
                }
                continue;
            }
            let at = run.next;
            run.next += 1;
            let step = self.io.borrow().ledger.as_ref().and_then(|l| l.step(at));
            match step {
                None => return self.go_live(),
                Some(Step::Reseed(seed)) => self.reseed = Some(seed),
                Some(Step::Files(files)) => {
                    let put = self.io.borrow_mut().scratch.put(&files);
                    if let Err(err) = put {
                        return self.end_replay(Err(format!(
                            "its files could not be put back: {}",
                            err.message
                        )));
                    }
                }
                Some(Step::Turn {
                    entry,
                    task,
                    bindings,
                }) => {
                    let Some(run) = self.replaying.as_mut() else {
                        return;
                    };
                    let left = run.deadline.saturating_duration_since(Instant::now());
                    let (reply, outcome) = oneshot::channel();
                    run.current = Some((entry, outcome));
                    run.turns += 1;
                    if let Some(ledger) = self.io.borrow_mut().ledger.as_mut() {
                        ledger.begin_replay(entry);
                    }
                    let spec = TurnSpec {
                        task,
                        timeout: left.max(Duration::from_millis(1)),
                        bindings: Bindings::none(),
                        max_stream_bytes: Some(0),
                        abort: AbortSignal::new(),
                        live: None,
                    };
                    self.start_with(spec, reply, Some(bindings));
                    return;
                }
            }
        }
    }

    /// Whether the replayed turn of entry `entry` did what the ledger holds.
    fn check_replayed(&mut self, entry: usize, outcome: &TurnOutcome) -> Result<(), String> {
        let turn = self.replaying.as_ref().map_or(0, |run| run.turns);
        let mut io = self.io.borrow_mut();
        let Some(ledger) = io.ledger.as_mut() else {
            return Err("the ledger went away".into());
        };
        if let Some(why) = ledger.diverged() {
            return Err(format!("turn {turn}: {why}"));
        }
        let checked = match ledger::ending_class(&outcome.ending) {
            Ok(class) => ledger.finish_replay(&class),
            Err(why)
                if matches!(
                    outcome.ending,
                    code_runner_core::TurnEnding::Faulted(code_runner_core::Fault::Timeout { .. })
                ) =>
            {
                Err(format!(
                    "it did not finish within the replay's budget ({why}); max_replay_ms bounds a replay"
                ))
            }
            Err(why) => Err(format!("it did not finish: {why}")),
        };
        checked.map_err(|why| format!("turn {turn} (entry {entry}): {why}"))
    }

    /// The replay is over: the runtime records from here on; a fork draws
    /// a fresh seed; `performance.now()` goes on from its last reading.
    fn go_live(&mut self) {
        let live = {
            let mut io = self.io.borrow_mut();
            let live = io.ledger.as_mut().map(|ledger| {
                let reseed = ledger.options().reseed.then(ledger::draw_seed);
                ledger.go_live(reseed);
                (reseed, ledger.last_now)
            });
            if let Some((_, last)) = live {
                let last = Duration::from_secs_f64(last.max(0.0) / 1000.0);
                if let Some(epoch) = Instant::now().checked_sub(last) {
                    io.epoch = epoch;
                }
            }
            live
        };
        let Some((reseed, _)) = live else {
            return self.end_replay(Err("the ledger went away".into()));
        };
        if reseed.is_some() {
            self.reseed = reseed;
        }
        let done = self.replaying.as_ref().map(|run| Replayed {
            turns: run.turns,
            recorded_cpu_ns: self.io.borrow().ledger.as_ref().map_or(0, Ledger::cpu_ns),
        });
        if let Some(done) = done {
            self.end_replay(Ok(done));
        }
    }

    fn end_replay(&mut self, verdict: Result<Replayed, String>) {
        if let Some(run) = self.replaying.take() {
            let _ = run.reply.send(verdict);
        }
    }
}
