//! The ledger's stored form: what a node snapshot's `ledger` section holds
//! (JSON; sealed and bounded by `code_runner_snapshot` before it is parsed).

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// A runtime's whole ledger.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Book {
    /// [`super::VERSION`].
    pub version: u32,
    /// The seed `Math.random` started from.
    pub seed: [u32; 4],
    /// What happened to the runtime, in order.
    pub entries: Vec<Entry>,
}

impl Book {
    /// Bytes it holds, about.
    pub fn bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|entry| match entry {
                Entry::Files(files) => files
                    .iter()
                    .map(|f| (f.path.len() + f.bytes.len()) as u64)
                    .sum(),
                Entry::Turn(turn) => {
                    (turn.task.len()
                        + turn.bindings.len()
                        + turn.calls.len() * 96
                        + turn.now.len() * 12
                        + turn.wall.len() * 12) as u64
                        + turn
                            .events
                            .iter()
                            .map(|e| match e {
                                Event::Answer { text, .. } => text.len() as u64 + 32,
                                Event::Timer(_) => 16,
                            })
                            .sum::<u64>()
                }
                Entry::Reseed(_) => 32,
            })
            .sum()
    }

    /// CPU its turns took, together.
    pub fn cpu_ns(&self) -> u64 {
        self.entries
            .iter()
            .map(|entry| match entry {
                Entry::Turn(turn) => turn.cpu_ns,
                _ => 0,
            })
            .sum()
    }
}

/// One thing that happened to the runtime.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Entry {
    /// Files put into its scratch directory between turns.
    Files(Vec<FileRecord>),
    /// A turn.
    Turn(TurnRecord),
    /// `Math.random` drew a fresh seed here (the runtime is a fork).
    Reseed([u32; 4]),
}

/// A file put into the scratch directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRecord {
    /// Its path, relative.
    pub path: String,
    /// Its bytes (base64 in JSON).
    #[serde(with = "b64")]
    pub bytes: Vec<u8>,
}

/// What a turn ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TaskRecord {
    /// A program's source.
    Program(String),
    /// A handler definition.
    Define {
        /// The key the handler is kept under.
        key: String,
        /// Its source.
        source: String,
    },
}

impl TaskRecord {
    /// Bytes of its text.
    pub fn len(&self) -> usize {
        match self {
            TaskRecord::Program(source) => source.len(),
            TaskRecord::Define { key, source } => key.len() + source.len(),
        }
    }

    /// As a task again.
    pub fn task(&self) -> code_runner_core::Task {
        match self {
            TaskRecord::Program(source) => code_runner_core::Task::Program(source.clone()),
            TaskRecord::Define { key, source } => code_runner_core::Task::Define {
                key: key.clone(),
                source: source.clone(),
            },
        }
    }
}

impl Default for TaskRecord {
    fn default() -> Self {
        TaskRecord::Program(String::new())
    }
}

/// One turn and what the guest could not predict in it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRecord {
    /// What it ran.
    pub task: TaskRecord,
    /// The binding globals' spec it ran with (the bootstrap's `install`).
    pub bindings: String,
    /// The binding calls it started, in order.
    pub calls: Vec<CallRecord>,
    /// Answers handed to the guest and timers that fired, in order.
    pub events: Vec<Event>,
    /// `performance.now()` readings, in order.
    pub now: Vec<f64>,
    /// `Date` readings, in order.
    pub wall: Vec<f64>,
    /// How it ended: `exit 0`, `exit 1`, `exhausted`.
    pub ending: String,
    /// CPU it took.
    pub cpu_ns: u64,
}

/// A binding call as the ledger knows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRecord {
    /// `namespace.member`.
    pub function: String,
    /// sha-256 of its argument's JSON, hex.
    pub args: String,
}

/// Something handed to the guest from outside its own code.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A binding call's answer, as the bootstrap reads it (`o…`, `e…`).
    Answer {
        /// The call's number in the runtime.
        call: u32,
        /// The answer.
        text: String,
    },
    /// The runtime's `n`th timer fired.
    Timer(u32),
}

mod b64 {
    use super::*;

    pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}
