//! A run's output while it is written, to the MCP client that asked for
//! it: as `notifications/progress` when its request carried a
//! `progressToken`, else as log notifications at the level the client set
//! (stdout at `info`, stderr at `warning`). Each piece names its stream in
//! `_meta` (`code-runner/stream`) or as the logger.

use std::sync::{Arc, Mutex};

use code_runner_core::caps::Stream;
#[allow(
    deprecated,
    reason = "MCP logging is deprecated by SEP-2577 and still what clients read"
)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::model::{MetaObject, NotificationMetaObject, ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::edge::live::{Chunks, stream_name};

/// The `_meta` key naming a piece's stream.
pub const STREAM_KEY: &str = "code-runner/stream";

/// Where the pieces go.
pub enum Outlet {
    /// Progress notifications with this token, counting up.
    Progress {
        /// The client.
        peer: Peer<RoleServer>,
        /// The request's token.
        token: ProgressToken,
        /// Pieces sent so far.
        sent: u64,
    },
    /// Nothing: the request asked for no output (2026-07-28 without a
    /// progress token or a log level); the answer carries it whole.
    Silent,
    /// Log notifications, if the level the client set lets them through.
    #[allow(deprecated, reason = "see the module")]
    Log {
        /// The client.
        peer: Peer<RoleServer>,
        /// The least level the client wants (`None`: it set none; `info`).
        level: Arc<Mutex<Option<LoggingLevel>>>,
    },
}

impl Outlet {
    #[allow(deprecated, reason = "see the module")]
    async fn send(&mut self, pieces: Vec<(Stream, String)>) {
        for (stream, text) in pieces {
            match self {
                Outlet::Silent => {}
                Outlet::Progress { peer, token, sent } => {
                    *sent += 1;
                    let mut note = ProgressNotificationParam::new(token.clone(), *sent as f64);
                    note.message = Some(text);
                    let mut meta = serde_json::Map::new();
                    meta.insert(STREAM_KEY.into(), json!(stream_name(stream)));
                    note.meta = Some(NotificationMetaObject(MetaObject(meta)));
                    let _ = peer.notify_progress(note).await;
                }
                Outlet::Log { peer, level } => {
                    let at = match stream {
                        Stream::Stdout => LoggingLevel::Info,
                        Stream::Stderr => LoggingLevel::Warning,
                    };
                    let least = level
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .unwrap_or(LoggingLevel::Info);
                    if rank(at) < rank(least) {
                        continue;
                    }
                    let mut note = LoggingMessageNotificationParam::new(at, Value::String(text));
                    note.logger = Some(stream_name(stream).into());
                    let _ = peer.notify_logging_message(note).await;
                }
            }
        }
    }
}

/// Severity order, least first.
#[allow(deprecated, reason = "see the module")]
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Sends `chunks` to `outlet` as they come, until `done` fires; then what
/// is left, so the last piece goes before the answer. A last piece is
/// followed by a short pause: the TypeScript SDK hands a notification to its
/// handler a microtask late, so one read holding both the notification and
/// the answer loses the notification (the answer carries the output anyway).
pub async fn forward(mut chunks: Chunks, mut outlet: Outlet, mut done: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            biased;
            _ = &mut done => break,
            next = chunks.next() => match next {
                Some(pieces) => outlet.send(pieces).await,
                None => break,
            },
        }
    }
    let last = chunks.drain();
    if !last.is_empty() {
        outlet.send(last).await;
        tokio::time::sleep(LAST_PIECE_PAUSE).await;
    }
}

/// The pause after a last piece (see [`forward`]).
const LAST_PIECE_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);
