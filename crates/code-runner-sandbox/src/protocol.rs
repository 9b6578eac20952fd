//! The frames between the worker and a sandbox process.
//!
//! A frame is `[u32 length][u32 header length][header: JSON][blobs]`, each
//! blob `[u32 length][bytes]`, little-endian. Headers are externally tagged
//! serde enums (lossless for `serde_json::Value` with `arbitrary_precision`);
//! output bytes travel as blobs, never as JSON arrays. Everything the child
//! sends is hostile: [`read_frame`] refuses a length past its bound before
//! allocating, and the parent checks every id against its own tables.

use std::collections::BTreeMap;
use std::path::PathBuf;

use code_runner_core::caps::ResultShape;
use code_runner_core::{
    BindingError, Completion, ErrorCode, Fault, Lang, RunnerError, RuntimeOptions, Task, TurnEnding,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The largest frame a sandbox process may send the worker (64 MiB): two
/// streams at their 16 MiB hard ceiling, a result and images fit; a
/// compromised child cannot make the worker allocate more per frame.
pub const MAX_CHILD_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// The largest frame the worker sends (256 MiB): a 16 MiB request body
/// grows at most a few times in JSON; the child reads what its parent sends.
pub const MAX_PARENT_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// One frame: a header and its blobs.
#[derive(Debug)]
pub struct Frame<T> {
    /// The message.
    pub header: T,
    /// Byte payloads the header refers to by position.
    pub blobs: Vec<Vec<u8>>,
}

impl<T: Serialize> Frame<T> {
    /// A frame with no blobs.
    pub fn new(header: T) -> Self {
        Frame {
            header,
            blobs: Vec::new(),
        }
    }

    /// The frame's bytes.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing our own types to a Vec cannot fail.
        let header = serde_json::to_vec(&self.header).unwrap_or_default();
        let body_len = 4 + header.len() + self.blobs.iter().map(|b| 4 + b.len()).sum::<usize>();
        let mut out = Vec::with_capacity(4 + body_len);
        out.extend_from_slice(&(body_len as u32).to_le_bytes());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        for blob in &self.blobs {
            out.extend_from_slice(&(blob.len() as u32).to_le_bytes());
            out.extend_from_slice(blob);
        }
        out
    }
}

/// Why a frame could not be read.
#[derive(Debug)]
pub enum FrameError {
    /// The peer closed its end (or the read failed).
    Closed,
    /// The frame broke the protocol; the text says how.
    Invalid(String),
}

/// Reads one frame of at most `max` bytes.
///
/// # Errors
/// [`FrameError::Closed`] at end of stream, [`FrameError::Invalid`] for an
/// oversize length or a malformed header (the connection is then unusable).
pub async fn read_frame<T, R>(reader: &mut R, max: usize) -> Result<Frame<T>, FrameError>
where
    T: for<'de> Deserialize<'de>,
    R: AsyncRead + Unpin,
{
    let mut len = [0u8; 4];
    reader
        .read_exact(&mut len)
        .await
        .map_err(|_| FrameError::Closed)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > max || len < 4 {
        return Err(FrameError::Invalid(format!(
            "a frame of {len} bytes (at most {max})"
        )));
    }
    let mut body = vec![0u8; len];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|_| FrameError::Closed)?;
    decode(&body)
}

/// Parses a frame body (everything after the outer length).
///
/// # Errors
/// [`FrameError::Invalid`] when a length runs past the body or the header is not a message.
pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<Frame<T>, FrameError> {
    let invalid = |what: &str| FrameError::Invalid(what.to_string());
    let mut rest = body;
    let take = |rest: &mut &[u8]| -> Result<Vec<u8>, FrameError> {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| invalid("a truncated length"))?;
        let len = u32::from_le_bytes(*len) as usize;
        if len > tail.len() {
            return Err(invalid("a length past the frame"));
        }
        let (bytes, tail) = tail.split_at(len);
        *rest = tail;
        Ok(bytes.to_vec())
    };
    let header = take(&mut rest)?;
    let header = serde_json::from_slice(&header)
        .map_err(|err| FrameError::Invalid(format!("a malformed header: {err}")))?;
    let mut blobs = Vec::new();
    while !rest.is_empty() {
        blobs.push(take(&mut rest)?);
    }
    Ok(Frame { header, blobs })
}

/// What confinement applied in one sandbox process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Each layer that applied, with a detail.
    pub applied: BTreeMap<String, String>,
    /// Each layer that could not be applied, with the reason.
    pub not_applied: BTreeMap<String, String>,
}

impl Report {
    pub(crate) fn record(&mut self, layer: &str, result: Result<String, String>) {
        match result {
            Ok(detail) => self.applied.insert(layer.to_string(), detail),
            Err(why) => self.not_applied.insert(layer.to_string(), why),
        };
    }
}

/// What a sandbox process is told before anything else (read before it
/// starts a thread): what to load and what to confine itself to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Init {
    /// The python engine's inputs.
    pub python: PythonInit,
    /// The operator's `node_packages` (installed by the worker before it
    /// started the child, found in the cache) and their registry.
    #[serde(default)]
    pub node_packages: Vec<String>,
    /// The registry the list was resolved from (part of its cache key).
    #[serde(default)]
    pub npm_registry: Option<String>,
    /// Directories the runtimes write (python's `/work`, node's `iii.files`): read-write.
    pub writable: Vec<PathBuf>,
    /// Directories the engines read at run time (the python artifacts and caches): read-only.
    pub readable: Vec<PathBuf>,
    /// The process's address-space data ceiling (`RLIMIT_DATA`), in MiB; `None`: none.
    pub data_limit_mb: Option<u64>,
    /// The descriptor ceiling (`RLIMIT_NOFILE`).
    pub max_files: u64,
    /// Test-only: after confining, attempt what confinement forbids and report it.
    pub probe: bool,
}

/// How the child loads python (the worker resolved every path).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PythonInit {
    /// `--python-wasm`, if given.
    pub dir: Option<PathBuf>,
    /// `auto`, `lean` or `data`.
    pub interpreter: String,
    /// The pool's slots in this process.
    pub max_runtimes: usize,
    /// The linear-memory ceiling.
    pub max_memory_mb: u64,
    /// The operator's `python_packages`, which the worker installed before
    /// starting the child: the child finds the install in the cache and
    /// mounts it (it never runs pip).
    #[serde(default)]
    pub packages: Vec<String>,
}

/// Worker → sandbox process.
#[derive(Debug, Serialize, Deserialize)]
pub enum ToChild {
    /// Boot a runtime under the worker's handle `id`.
    Spawn {
        /// The worker's handle for the runtime (and the reply's id).
        id: u64,
        /// Its language.
        lang: Lang,
        /// Its per-runtime options.
        options: RuntimeOptions,
    },
    /// Run one turn on runtime `runtime`.
    Run {
        /// The turn's id.
        turn: u64,
        /// The runtime's handle.
        runtime: u64,
        /// What to run.
        task: TaskWire,
        /// The budget.
        timeout_ms: u64,
        /// The per-stream cap.
        max_stream_bytes: Option<usize>,
        /// The binding namespaces, as names.
        bindings: Vec<NamespaceWire>,
        /// Whether to send output as it is written.
        live: bool,
        /// Whether the images are wanted.
        images: bool,
    },
    /// Write a run's files into runtime `runtime` before its turn; the
    /// frame's blobs are their contents, in the order of `paths` (checked
    /// and normalised by the worker). Answered with `FilesPut`.
    PutFiles {
        /// The request's id (the reply's id).
        id: u64,
        /// The runtime's handle.
        runtime: u64,
        /// The files' paths.
        paths: Vec<String>,
    },
    /// Make the packages installed at `dir` (by the worker, in the cache
    /// this process reads) importable in runtime `runtime`. Answered with
    /// `PackagesAdded`.
    AddPackages {
        /// The request's id (the reply's id).
        id: u64,
        /// The runtime's handle.
        runtime: u64,
        /// The install's directory.
        dir: std::path::PathBuf,
    },
    /// Stop turn `turn`.
    Abort {
        /// The turn's id.
        turn: u64,
    },
    /// Turn `turn`'s clock stopped (`paused`: a binding call waits for a
    /// person) or runs again; the child's engine measures the turn on it.
    Clock {
        /// The turn's id.
        turn: u64,
        /// Whether it stands still now.
        paused: bool,
    },
    /// Close runtime `runtime`; answered with `Closed`.
    Close {
        /// The runtime's handle.
        runtime: u64,
    },
    /// The answer to a binding call.
    Reply {
        /// The call's id.
        call: u64,
        /// The value, or the rejection.
        answer: Result<Value, BindingErrorWire>,
    },
}

/// Sandbox process → worker.
#[derive(Debug, Serialize, Deserialize)]
pub enum FromChild {
    /// The answer to `AddPackages`: what was added, or why not.
    PackagesAdded {
        /// The request's id.
        id: u64,
        /// The packages, as the engine names them.
        added: Result<Vec<String>, ErrorWire>,
    },
    /// The answer to `PutFiles`.
    FilesPut {
        /// The request's id.
        id: u64,
        /// Why the files were not written, if they were not.
        error: Option<ErrorWire>,
    },
    /// The engines are loaded and the process confined.
    Ready {
        /// What confinement applied.
        report: Report,
    },
    /// Runtime `id` booted, or why not.
    Spawned {
        /// The worker's handle.
        id: u64,
        /// Why it did not boot.
        error: Option<ErrorWire>,
    },
    /// Turn `turn` is about to run its code. The child writes it to the
    /// socket before the code starts, so a worker that saw the child die
    /// without it knows the code never ran.
    Begun {
        /// The turn's id.
        turn: u64,
    },
    /// A turn's outcome; blobs: stdout head, stdout tail, stderr head, stderr tail.
    Outcome {
        /// The turn's id.
        turn: u64,
        /// Everything but the stream bytes.
        outcome: OutcomeWire,
    },
    /// Output as it is written; blob: the bytes.
    Live {
        /// The turn's id.
        turn: u64,
        /// Standard error (else standard output).
        stderr: bool,
    },
    /// A binding call the guest made.
    Call {
        /// The call's id, chosen by the child.
        call: u64,
        /// The turn it belongs to.
        turn: u64,
        /// The namespace.
        global: String,
        /// The member.
        member: String,
        /// The argument.
        args: Value,
        /// What the child says is left of the turn's budget.
        remaining_ms: u64,
    },
    /// The guest no longer wants binding call `call`'s answer (an aborted
    /// `fetch`): the worker drops the call's future at once.
    Cancel {
        /// The call's id.
        call: u64,
    },
    /// Runtime `runtime` is closed.
    Closed {
        /// The runtime's handle.
        runtime: u64,
    },
    /// Test role: what each forbidden attempt answered.
    Probe {
        /// Attempt → its result.
        results: BTreeMap<String, String>,
    },
}

/// [`Task`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(missing_docs, reason = "the variants mirror Task")]
pub enum TaskWire {
    Program(String),
    Define { key: String, source: String },
    Invoke { key: String, payload: Value },
}

impl From<Task> for TaskWire {
    fn from(task: Task) -> Self {
        match task {
            Task::Program(code) => TaskWire::Program(code),
            Task::Define { key, source } => TaskWire::Define { key, source },
            Task::Invoke { key, payload } => TaskWire::Invoke { key, payload },
        }
    }
}

impl From<TaskWire> for Task {
    fn from(task: TaskWire) -> Self {
        match task {
            TaskWire::Program(code) => Task::Program(code),
            TaskWire::Define { key, source } => Task::Define { key, source },
            TaskWire::Invoke { key, payload } => Task::Invoke { key, payload },
        }
    }
}

/// A binding namespace as the child sees it: names, never functions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(missing_docs, reason = "the fields mirror BindingNamespace")]
pub struct NamespaceWire {
    pub global: String,
    pub functions: Vec<String>,
    pub registrars: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    pub values: Map<String, Value>,
    pub error_class: Option<(String, String)>,
}

/// A [`RunnerError`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorWire {
    /// Its code's wire spelling.
    pub code: String,
    /// Its message.
    pub message: String,
}

impl From<&RunnerError> for ErrorWire {
    fn from(err: &RunnerError) -> Self {
        ErrorWire {
            code: err.code.as_str().to_string(),
            message: err.message.clone(),
        }
    }
}

impl From<ErrorWire> for RunnerError {
    /// An unknown code is `engine`: the child does not choose new ones.
    fn from(err: ErrorWire) -> Self {
        let code = ErrorCode::ALL
            .into_iter()
            .find(|code| code.as_str() == err.code)
            .unwrap_or(ErrorCode::Engine);
        RunnerError::new(code, err.message)
    }
}

/// A [`BindingError`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(missing_docs, reason = "the fields mirror BindingError")]
pub struct BindingErrorWire {
    pub code: Option<String>,
    pub message: String,
}

impl From<BindingError> for BindingErrorWire {
    fn from(err: BindingError) -> Self {
        BindingErrorWire {
            code: err.code,
            message: err.message,
        }
    }
}

impl From<BindingErrorWire> for BindingError {
    fn from(err: BindingErrorWire) -> Self {
        BindingError {
            code: err.code,
            message: err.message,
        }
    }
}

/// A [`TurnOutcome`](code_runner_core::TurnOutcome) without its stream bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(missing_docs, reason = "the fields mirror TurnOutcome and TurnImages")]
pub struct OutcomeWire {
    pub stdout_total: u64,
    pub stderr_total: u64,
    pub ending: EndingWire,
    pub denied: bool,
    pub cpu_ns: u64,
    pub peak_memory_bytes: u64,
    pub images: Vec<(String, String)>,
    pub images_omitted: usize,
    #[serde(default)]
    pub interpreter_reset: bool,
}

/// [`TurnEnding`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(
    missing_docs,
    reason = "the variants mirror TurnEnding, Completion and Fault"
)]
pub enum EndingWire {
    Exited {
        exit_code: i64,
        completion: CompletionWire,
        exception: Option<String>,
    },
    Timeout {
        budget_ms: u64,
    },
    Aborted,
    ResourceExhausted(String),
    Crashed(String),
    Protocol(String),
    Unavailable(String),
    NotStarted(String),
}

/// [`Completion`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(
    missing_docs,
    reason = "the variants mirror Completion and ResultShape"
)]
pub enum CompletionWire {
    Absent,
    AbsentWithNote(String),
    Value(Value),
    Converted {
        value: Value,
        substituted: String,
        note: Option<String>,
    },
    NotJson(String),
    Oversize {
        bytes: u64,
        shape: ShapeWire,
    },
}

/// [`ResultShape`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(missing_docs, reason = "the variants mirror ResultShape")]
pub enum ShapeWire {
    Array(u64),
    Object(u64),
    String(u64),
    Scalar,
}

impl From<&TurnEnding> for EndingWire {
    fn from(ending: &TurnEnding) -> Self {
        match ending {
            TurnEnding::Exited {
                exit_code,
                completion,
                exception,
            } => EndingWire::Exited {
                exit_code: *exit_code,
                completion: match completion {
                    Completion::Absent => CompletionWire::Absent,
                    Completion::AbsentWithNote(note) => {
                        CompletionWire::AbsentWithNote(note.clone())
                    }
                    Completion::Value(v) => CompletionWire::Value(v.clone()),
                    Completion::Converted {
                        value,
                        substituted,
                        note,
                    } => CompletionWire::Converted {
                        value: value.clone(),
                        substituted: substituted.clone(),
                        note: note.clone(),
                    },
                    Completion::NotJson(why) => CompletionWire::NotJson(why.clone()),
                    Completion::Oversize { bytes, shape } => CompletionWire::Oversize {
                        bytes: *bytes,
                        shape: match shape {
                            ResultShape::Array(n) => ShapeWire::Array(*n),
                            ResultShape::Object(n) => ShapeWire::Object(*n),
                            ResultShape::String(n) => ShapeWire::String(*n),
                            ResultShape::Scalar => ShapeWire::Scalar,
                        },
                    },
                },
                exception: exception.clone(),
            },
            TurnEnding::Faulted(fault) => match fault {
                Fault::Timeout { budget } => EndingWire::Timeout {
                    budget_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
                },
                Fault::Aborted => EndingWire::Aborted,
                Fault::ResourceExhausted(s) => EndingWire::ResourceExhausted(s.clone()),
                Fault::Crashed(s) => EndingWire::Crashed(s.clone()),
                Fault::Protocol(s) => EndingWire::Protocol(s.clone()),
                Fault::Unavailable(s) => EndingWire::Unavailable(s.clone()),
                Fault::NotStarted(s) => EndingWire::NotStarted(s.clone()),
            },
        }
    }
}

impl From<EndingWire> for TurnEnding {
    fn from(ending: EndingWire) -> Self {
        let fault = match ending {
            EndingWire::Exited {
                exit_code,
                completion,
                exception,
            } => {
                return TurnEnding::Exited {
                    exit_code,
                    completion: match completion {
                        CompletionWire::Absent => Completion::Absent,
                        CompletionWire::AbsentWithNote(note) => Completion::AbsentWithNote(note),
                        CompletionWire::Value(v) => Completion::Value(v),
                        CompletionWire::Converted {
                            value,
                            substituted,
                            note,
                        } => Completion::Converted {
                            value,
                            substituted,
                            note,
                        },
                        CompletionWire::NotJson(why) => Completion::NotJson(why),
                        CompletionWire::Oversize { bytes, shape } => Completion::Oversize {
                            bytes,
                            shape: match shape {
                                ShapeWire::Array(n) => ResultShape::Array(n),
                                ShapeWire::Object(n) => ResultShape::Object(n),
                                ShapeWire::String(n) => ResultShape::String(n),
                                ShapeWire::Scalar => ResultShape::Scalar,
                            },
                        },
                    },
                    exception,
                };
            }
            EndingWire::Timeout { budget_ms } => Fault::Timeout {
                budget: std::time::Duration::from_millis(budget_ms),
            },
            EndingWire::Aborted => Fault::Aborted,
            EndingWire::ResourceExhausted(s) => Fault::ResourceExhausted(s),
            EndingWire::Crashed(s) => Fault::Crashed(s),
            EndingWire::Protocol(s) => Fault::Protocol(s),
            EndingWire::Unavailable(s) => Fault::Unavailable(s),
            EndingWire::NotStarted(s) => Fault::NotStarted(s),
        };
        TurnEnding::Faulted(fault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame survives encoding; a length past the body or the bound is refused, not allocated.
    #[tokio::test]
    async fn frames_round_trip_and_hostile_lengths_are_refused() {
        let frame = Frame {
            header: FromChild::Live {
                turn: 7,
                stderr: true,
            },
            blobs: vec![b"abc".to_vec(), Vec::new()],
        };
        let bytes = frame.encode();
        let back: Frame<FromChild> = read_frame(&mut &bytes[..], 1024).await.unwrap();
        assert!(matches!(
            back.header,
            FromChild::Live {
                turn: 7,
                stderr: true
            }
        ));
        assert_eq!(back.blobs, vec![b"abc".to_vec(), Vec::new()]);

        let huge = (u32::MAX).to_le_bytes();
        let err = read_frame::<FromChild, _>(&mut &huge[..], 1024)
            .await
            .unwrap_err();
        assert!(matches!(err, FrameError::Invalid(_)));
        let mut lying = bytes.clone();
        lying[4..8].copy_from_slice(&1_000_000u32.to_le_bytes());
        let err = read_frame::<FromChild, _>(&mut &lying[..], 1024)
            .await
            .unwrap_err();
        assert!(matches!(err, FrameError::Invalid(_)));
    }

    /// Numbers keep their digits across the boundary (arbitrary precision).
    #[test]
    fn values_are_lossless() {
        let value: Value =
            serde_json::from_str(r#"{"n": 12345678901234567890123, "f": 0.1}"#).unwrap();
        let frame = Frame::new(ToChild::Reply {
            call: 1,
            answer: Ok(value.clone()),
        });
        let bytes = frame.encode();
        let back: Frame<ToChild> = decode(&bytes[4..]).unwrap();
        let ToChild::Reply { answer: Ok(v), .. } = back.header else {
            panic!("a reply")
        };
        assert_eq!(v.to_string(), value.to_string());
    }
}
