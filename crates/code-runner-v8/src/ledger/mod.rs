//! A kept runtime's turn ledger: what it takes to make the runtime again in
//! a fresh isolate, since a live V8 isolate cannot be serialised (only one
//! born a `SnapshotCreator` can, and a V8 blob aborts the process on bad
//! input).
//!
//! It decides what a node session's snapshot is: every turn's task and
//! bindings, the files put in between turns, and, in the order the guest
//! saw them, everything the guest could not have predicted: the host's
//! answers to binding calls (each call's function and a hash of its
//! argument, so a replay that calls otherwise is caught), the timers that
//! fired, the clock readings (`performance.now()`, `Date`), and the seed
//! of `Math.random`. Replaying the turns against it ([`replay`]) gives the
//! same heap, the same scratch files and the same random stream.
//!
//! What it cannot record spoils it for good, with the reason the runtime
//! gives when asked for a snapshot: a turn stopped mid-way (timeout,
//! abort, its heap limit), a published function's invocation (it runs
//! beside turns), packages installed into the runtime, and a ledger past
//! its bytes or its replay CPU.

mod book;
pub mod replay;

use std::task::Waker;

use code_runner_core::files::InputFile;
use code_runner_core::{Fault, LedgerOptions, Task, TurnEnding};
use sha2::{Digest, Sha256};

pub use book::{Book, CallRecord, Entry, Event, TaskRecord, TurnRecord};

/// Version of the ledger's layout; a snapshot of another is refused.
pub const VERSION: u32 = 1;

/// A runtime's ledger, recording or replaying.
pub struct Ledger {
    book: Book,
    options: LedgerOptions,
    /// Bytes the book holds, about.
    bytes: u64,
    /// CPU its turns took, together.
    cpu_ns: u64,
    /// Why it can no longer be replayed; its entries are dropped then.
    spoiled: Option<String>,
    /// While a restore replays it: where it stands.
    replay: Option<replay::Cursor>,
    /// The last `performance.now()` reading, so the clock goes on after a replay.
    pub last_now: f64,
}

/// The sha-256 of a binding call's argument JSON, in hex.
fn hash(args: &serde_json::Value) -> String {
    let text = serde_json::to_string(args).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Ledger {
    /// A new ledger for a runtime about to run its first turn.
    pub fn recording(options: LedgerOptions, seed: [u32; 4]) -> Ledger {
        Ledger {
            book: Book {
                version: VERSION,
                seed,
                entries: Vec::new(),
            },
            options,
            bytes: 0,
            cpu_ns: 0,
            spoiled: None,
            replay: None,
            last_now: 0.0,
        }
    }

    /// A ledger to replay into a fresh runtime, then to go on recording.
    pub fn replaying(book: Book, options: LedgerOptions) -> Ledger {
        let bytes = book.bytes();
        let cpu_ns = book.cpu_ns();
        Ledger {
            book,
            options,
            bytes,
            cpu_ns,
            spoiled: None,
            replay: Some(replay::Cursor::default()),
            last_now: 0.0,
        }
    }

    /// What it may hold, and how a restored runtime goes on.
    pub fn options(&self) -> LedgerOptions {
        self.options
    }

    /// The seed `Math.random` starts from.
    pub fn seed(&self) -> [u32; 4] {
        self.book.seed
    }

    /// Whether a restore is replaying it now.
    pub fn is_replaying(&self) -> bool {
        self.replay.is_some()
    }

    /// What a snapshot holds: the book as JSON.
    ///
    /// # Errors
    /// Why this runtime cannot be snapshotted.
    pub fn sections(&self) -> Result<Vec<(String, Vec<u8>)>, String> {
        if let Some(why) = &self.spoiled {
            return Err(why.clone());
        }
        let json = serde_json::to_vec(&self.book).map_err(|err| err.to_string())?;
        Ok(vec![(SECTION.to_string(), json)])
    }

    /// The CPU a replay of it would take, about (what its turns took).
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_ns
    }

    /// It can no longer be replayed: says why from now on, holds nothing.
    pub fn spoil(&mut self, why: impl Into<String>) {
        if self.spoiled.is_none() && self.replay.is_none() {
            self.spoiled = Some(why.into());
            self.book.entries = Vec::new();
            self.bytes = 0;
        }
    }

    fn add_bytes(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes as u64);
        if self.bytes > self.options.max_bytes {
            let mib = self.options.max_bytes >> 20;
            self.spoil(format!(
                "its turn ledger passed {mib} MiB (max_snapshot_mb, or heap_mb when smaller): the turns, files, answers and clock readings it would replay are too many"
            ));
        }
    }

    fn current(&mut self) -> Option<&mut TurnRecord> {
        if self.spoiled.is_some() {
            return None;
        }
        match self.book.entries.last_mut() {
            Some(Entry::Turn(turn)) => Some(turn),
            _ => None,
        }
    }

    /// Files put into the scratch directory before a turn.
    pub fn files(&mut self, files: &[InputFile]) {
        if self.spoiled.is_some() || files.is_empty() || self.replay.is_some() {
            return;
        }
        let bytes: usize = files.iter().map(|f| f.path.len() + f.bytes.len()).sum();
        self.book.entries.push(Entry::Files(
            files
                .iter()
                .map(|f| book::FileRecord {
                    path: f.path.clone(),
                    bytes: f.bytes.clone(),
                })
                .collect(),
        ));
        self.add_bytes(bytes * 4 / 3 + 64);
    }

    /// A turn begins: `install` is the binding globals' spec it runs with.
    pub fn begin_turn(&mut self, task: &Task, install: &str) {
        if self.spoiled.is_some() || self.replay.is_some() {
            return;
        }
        let record = match task {
            Task::Program(source) => TaskRecord::Program(source.clone()),
            Task::Define { key, source } => TaskRecord::Define {
                key: key.clone(),
                source: source.clone(),
            },
            Task::Invoke { .. } => {
                self.spoil("it served a published function's call (invocations run beside its turns, so they cannot be replayed in order)");
                return;
            }
        };
        let bytes = record.len() + install.len() + 128;
        self.book.entries.push(Entry::Turn(TurnRecord {
            task: record,
            bindings: install.to_string(),
            ..TurnRecord::default()
        }));
        self.add_bytes(bytes);
    }

    /// A turn ended as `ending` says ([`ending_class`]) after `cpu_ns` of
    /// CPU; an `Err`: it was stopped mid-way, for that reason.
    pub fn end_turn(&mut self, ending: Result<String, String>, cpu_ns: u64) {
        if self.replay.is_some() {
            return;
        }
        let ending = match ending {
            Ok(ending) => ending,
            Err(why) => {
                self.spoil(format!(
                    "a turn of it was stopped mid-way ({why}), and what it left half done cannot be replayed"
                ));
                return;
            }
        };
        self.cpu_ns = self.cpu_ns.saturating_add(cpu_ns);
        if let Some(turn) = self.current() {
            turn.ending = ending;
            turn.cpu_ns = cpu_ns;
        }
        let max_ns = self.options.max_replay_ms.saturating_mul(1_000_000);
        if self.cpu_ns > max_ns {
            let ms = self.cpu_ns / 1_000_000;
            let cap = self.options.max_replay_ms;
            self.spoil(format!(
                "its turns took {ms} ms of CPU, more than a restore may replay (max_replay_ms: {cap})"
            ));
        }
    }

    /// A binding call starts. Recording: noted. Replaying: checked against
    /// the ledger (an `Err` says how the replay went another way).
    pub fn call(&mut self, function: &str, args: &serde_json::Value) -> Result<(), String> {
        let hash = hash(args);
        if let Some(cursor) = self.replay.as_mut() {
            return cursor.call(&self.book, function, &hash);
        }
        let bytes = function.len() + hash.len() + 32;
        if let Some(turn) = self.current() {
            turn.calls.push(CallRecord {
                function: function.to_string(),
                args: hash,
            });
            self.add_bytes(bytes);
        }
        Ok(())
    }

    /// A binding call's answer reached the guest (recording).
    pub fn answered(&mut self, call: u32, text: &str) {
        if self.replay.is_some() {
            return;
        }
        if let Some(turn) = self.current() {
            turn.events.push(Event::Answer {
                call,
                text: text.to_string(),
            });
            self.add_bytes(text.len() + 32);
        }
    }

    /// Replaying: call `call`'s answer once every event before it was
    /// handed over (`None`: not yet; `waker` hears when to ask again).
    pub fn replay_answer(&mut self, call: u32, waker: &Waker) -> Option<String> {
        self.replay
            .as_mut()
            .and_then(|cursor| cursor.answer(&self.book, call, waker))
    }

    /// Timer `timer` (the runtime's `timer`th) is due: whether it fires now.
    /// Recording: always, noted. Replaying: only in its recorded place.
    pub fn tick(&mut self, timer: u32) -> bool {
        if let Some(cursor) = self.replay.as_mut() {
            return cursor.tick(&self.book, timer);
        }
        if let Some(turn) = self.current() {
            turn.events.push(Event::Timer(timer));
            self.add_bytes(16);
        }
        true
    }

    /// A clock reading (`wall`: `Date`'s, else `performance.now()`'s):
    /// the real one, noted, or the recorded one.
    pub fn read(&mut self, wall: bool, real: f64) -> f64 {
        if let Some(cursor) = self.replay.as_mut() {
            let value = cursor.read(&self.book, wall).unwrap_or(real);
            if !wall {
                self.last_now = value;
            }
            return value;
        }
        if !wall {
            self.last_now = real;
        }
        if let Some(turn) = self.current() {
            match wall {
                true => turn.wall.push(real),
                false => turn.now.push(real),
            }
            self.add_bytes(12);
        }
        real
    }
}

/// What a replay does next.
pub enum Step {
    /// Put these files into the scratch directory.
    Files(Vec<InputFile>),
    /// Run this turn (entry `entry`): its task and its bindings' spec.
    Turn {
        /// The entry's index.
        entry: usize,
        /// What it runs.
        task: Task,
        /// The spec `install` gets.
        bindings: String,
    },
    /// Draw this seed for `Math.random`.
    Reseed([u32; 4]),
}

impl Ledger {
    /// The replay's step at entry `at`, if there is one.
    pub fn step(&self, at: usize) -> Option<Step> {
        Some(match self.book.entries.get(at)? {
            Entry::Files(files) => Step::Files(
                files
                    .iter()
                    .map(|f| InputFile {
                        path: f.path.clone(),
                        bytes: f.bytes.clone(),
                    })
                    .collect(),
            ),
            Entry::Turn(turn) => Step::Turn {
                entry: at,
                task: turn.task.task(),
                bindings: turn.bindings.clone(),
            },
            Entry::Reseed(seed) => Step::Reseed(*seed),
        })
    }

    /// Replaying: entry `entry` (a turn) starts.
    pub fn begin_replay(&mut self, entry: usize) {
        if let Some(cursor) = self.replay.as_mut() {
            cursor.begin(entry);
        }
    }

    /// Replaying: whether the turn still has answers or timers to hand over.
    pub fn events_left(&self) -> bool {
        self.replay
            .as_ref()
            .is_some_and(|cursor| cursor.events_left(&self.book))
    }

    /// Replaying: the turn's code is done, and the next event is the answer
    /// to a call it never made (`started` says which calls are in flight):
    /// the replay cannot go on.
    pub fn check_stalled(&mut self, started: impl Fn(u32) -> bool) {
        if let Some(cursor) = self.replay.as_mut()
            && let Some(call) = cursor.next_answer(&self.book)
            && !started(call)
        {
            cursor.stall(format!(
                "the turn's code finished without making the call whose answer the ledger holds next (call {call})"
            ));
        }
    }

    /// Replaying: how the replay went otherwise than the ledger, if it did.
    pub fn diverged(&self) -> Option<&str> {
        self.replay.as_ref().and_then(|c| c.diverged.as_deref())
    }

    /// Replaying: the turn ended as `ending` says.
    ///
    /// # Errors
    /// How the replay went otherwise than the ledger.
    pub fn finish_replay(&mut self, ending: &str) -> Result<(), String> {
        match self.replay.as_mut() {
            Some(cursor) => cursor.finish(&self.book, ending),
            None => Ok(()),
        }
    }

    /// The replay is over: the runtime records from here on; `reseed`
    /// (a fork) is noted, so a replay of this ledger draws it here too.
    pub fn go_live(&mut self, reseed: Option<[u32; 4]>) {
        self.replay = None;
        if let Some(seed) = reseed
            && self.spoiled.is_none()
        {
            self.book.entries.push(Entry::Reseed(seed));
            self.add_bytes(32);
        }
    }
}

/// How a turn ended, as the ledger keeps it (`exit 0`, `exit 1`,
/// `exhausted`), or, for a turn stopped mid-way, why.
///
/// # Errors
/// The turn did not run to its end (a timeout, an abort, a crash).
pub fn ending_class(ending: &TurnEnding) -> Result<String, String> {
    match ending {
        TurnEnding::Exited { exit_code, .. } => Ok(format!("exit {exit_code}")),
        TurnEnding::Faulted(Fault::ResourceExhausted(_)) => Ok("exhausted".into()),
        TurnEnding::Faulted(Fault::Timeout { .. }) => Err("its timeout".into()),
        TurnEnding::Faulted(Fault::Aborted) => Err("it was aborted".into()),
        TurnEnding::Faulted(other) => Err(format!("{other:?}")),
    }
}

/// A fresh seed for `Math.random` (never all zero, which the generator cannot leave).
pub fn draw_seed() -> [u32; 4] {
    loop {
        let seed: [u32; 4] = rand::random();
        if seed != [0; 4] {
            return seed;
        }
    }
}

/// The snapshot section the book is in.
pub const SECTION: &str = "ledger";
