//! Where a replay stands in a ledger's turn, and the gate that hands the
//! guest its recorded answers and lets its timers fire in the order the
//! guest first saw them. The first difference between what the replayed
//! code does and what the ledger holds is kept as the divergence, which
//! fails the restore.

use std::task::Waker;

use super::book::{Book, Entry, Event, TurnRecord};

/// A replay's position in the turn it replays.
#[derive(Default)]
pub struct Cursor {
    /// The entry (a turn) being replayed.
    entry: usize,
    calls: usize,
    events: usize,
    now: usize,
    wall: usize,
    /// The first way the replay went otherwise than the ledger.
    pub diverged: Option<String>,
    /// Answers waiting for their place.
    waiters: Vec<Waker>,
}

impl Cursor {
    /// Replays entry `entry` (a turn) from its start.
    pub fn begin(&mut self, entry: usize) {
        *self = Cursor {
            entry,
            diverged: self.diverged.take(),
            ..Cursor::default()
        };
    }

    fn turn<'b>(&self, book: &'b Book) -> Option<&'b TurnRecord> {
        match book.entries.get(self.entry) {
            Some(Entry::Turn(turn)) => Some(turn),
            _ => None,
        }
    }

    fn diverge(&mut self, why: String) {
        if self.diverged.is_none() {
            self.diverged = Some(why);
        }
        // Whatever waits will not get its place now; the turn is ended.
        for waker in self.waiters.drain(..) {
            waker.wake();
        }
    }

    fn advance(&mut self) {
        self.events += 1;
        for waker in self.waiters.drain(..) {
            waker.wake();
        }
    }

    /// A binding call starts: it must be the next one the ledger holds.
    pub fn call(&mut self, book: &Book, function: &str, hash: &str) -> Result<(), String> {
        let at = self.calls;
        let expected = self.turn(book).and_then(|turn| turn.calls.get(at)).cloned();
        self.calls += 1;
        match expected {
            Some(call) if call.function == function && call.args == hash => Ok(()),
            Some(call) if call.function == function => {
                self.diverge(format!(
                    "binding call {} of the turn passed {function} another argument than the ledger holds",
                    at + 1
                ));
                Err(self.diverged.clone().unwrap_or_default())
            }
            Some(call) => {
                self.diverge(format!(
                    "binding call {} of the turn went to {function}, the ledger has {}",
                    at + 1,
                    call.function
                ));
                Err(self.diverged.clone().unwrap_or_default())
            }
            None => {
                self.diverge(format!(
                    "the turn made a binding call ({function}) the ledger does not hold"
                ));
                Err(self.diverged.clone().unwrap_or_default())
            }
        }
    }

    /// Call `call`'s answer if it is next; else `waker` waits for a move.
    pub fn answer(&mut self, book: &Book, call: u32, waker: &Waker) -> Option<String> {
        if self.diverged.is_some() {
            return None;
        }
        let next = self
            .turn(book)
            .and_then(|turn| turn.events.get(self.events));
        if let Some(Event::Answer { call: c, text }) = next
            && *c == call
        {
            let text = text.clone();
            self.advance();
            return Some(text);
        }
        self.waiters.push(waker.clone());
        None
    }

    /// Whether timer `timer` fires now: it is the next event.
    pub fn tick(&mut self, book: &Book, timer: u32) -> bool {
        if self.diverged.is_some() {
            return false;
        }
        let next = self
            .turn(book)
            .and_then(|turn| turn.events.get(self.events));
        if matches!(next, Some(Event::Timer(t)) if *t == timer) {
            self.advance();
            return true;
        }
        false
    }

    /// The next recorded clock reading.
    pub fn read(&mut self, book: &Book, wall: bool) -> Option<f64> {
        let turn = self.turn(book)?;
        let (list, at) = match wall {
            true => (&turn.wall, &mut self.wall),
            false => (&turn.now, &mut self.now),
        };
        let value = list.get(*at).copied();
        *at += 1;
        if value.is_none() {
            let which = if wall { "Date" } else { "performance.now()" };
            self.diverge(format!(
                "the turn read the clock ({which}) more often than the ledger holds"
            ));
        }
        value
    }

    /// The call whose answer is the next event, if an answer is.
    pub fn next_answer(&self, book: &Book) -> Option<u32> {
        match self.turn(book)?.events.get(self.events)? {
            Event::Answer { call, .. } => Some(*call),
            Event::Timer(_) => None,
        }
    }

    /// The replay cannot go on: `why`.
    pub fn stall(&mut self, why: String) {
        self.diverge(why);
    }

    /// Whether answers or timers of the turn are still to be handed over.
    pub fn events_left(&self, book: &Book) -> bool {
        self.turn(book)
            .is_some_and(|turn| self.events < turn.events.len())
    }

    /// The turn ended as `ending` says: it must have done all the ledger holds.
    ///
    /// # Errors
    /// How the replay went otherwise.
    pub fn finish(&mut self, book: &Book, ending: &str) -> Result<(), String> {
        if let Some(why) = &self.diverged {
            return Err(why.clone());
        }
        let Some(turn) = self.turn(book) else {
            return Err("the ledger holds no such turn".into());
        };
        let missing = if turn.ending != ending {
            Some(format!(
                "it ended {ending}, the ledger says {}",
                turn.ending
            ))
        } else if self.calls != turn.calls.len() {
            Some(format!(
                "it made {} binding calls, the ledger holds {}",
                self.calls,
                turn.calls.len()
            ))
        } else if self.events != turn.events.len() {
            Some(format!(
                "{} of its {} answers and timers were not reached",
                turn.events.len() - self.events,
                turn.events.len()
            ))
        } else if self.now != turn.now.len() || self.wall != turn.wall.len() {
            Some("it read the clock less often than the ledger holds".into())
        } else {
            None
        };
        match missing {
            Some(why) => {
                self.diverge(why.clone());
                Err(why)
            }
            None => Ok(()),
        }
    }
}
