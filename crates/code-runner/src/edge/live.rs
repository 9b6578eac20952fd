//! A run's output while it is written, for the callers that stream it (MCP
//! progress and log notifications, server-sent events).
//!
//! [`tap`] makes the [`LiveOutput`] a run writes into and the [`Chunks`]
//! a caller reads: what the guest wrote, cut at character boundaries, at
//! most one piece per stream per [`WINDOW`]. A print after a quiet spell goes
//! out at once; a flood is gathered. The engine hands
//! on only what enters a stream's head, so a caller never receives more
//! than the head budget, however much the guest prints; what is held here
//! waiting is bounded the same way.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_runner_core::LiveOutput;
use code_runner_core::caps::Stream;
use tokio::sync::Notify;

/// How long output gathers before it goes out as one piece per stream.
pub const WINDOW: Duration = Duration::from_millis(50);

/// Most output bytes a tap holds for a reader that has not taken them (a
/// client that stopped reading its event stream). The head budget bounds
/// what a run hands on, but `max_stream_bytes: 0` lifts that budget to
/// 16 MiB per stream; past this, a piece is dropped and the reader is told
/// so where it was (the answer still carries the run's output).
pub const MAX_PENDING_BYTES: usize = 1024 * 1024;

/// Where a dropped piece was, in the text a reader gets.
const SKIPPED: &str =
    "\n[… output skipped here: the reader fell behind; the answer holds the run's output]\n";

/// The reading side of a tap.
pub struct Chunks {
    shared: Arc<Shared>,
    /// When the last pieces went out.
    sent: Option<tokio::time::Instant>,
    /// Bytes taken and not yet gone out (a character cut at the end of the
    /// last piece), per stream.
    pending: [Vec<u8>; 2],
}

/// What the writers left for the reader.
#[derive(Default)]
struct Shared {
    held: Mutex<Held>,
    ready: Notify,
}

#[derive(Default)]
struct Held {
    bytes: [Vec<u8>; 2],
    skipped: [bool; 2],
    writers_gone: bool,
}

/// The writing side, inside the [`LiveOutput`]: dropped with its last clone.
struct Writer(Arc<Shared>);

impl Writer {
    fn push(&self, stream: Stream, bytes: &[u8]) {
        let mut held = self.0.held.lock().unwrap_or_else(|p| p.into_inner());
        let holding: usize = held.bytes.iter().map(Vec::len).sum();
        if holding + bytes.len() > MAX_PENDING_BYTES {
            held.skipped[index(stream)] = true;
        } else {
            held.bytes[index(stream)].extend_from_slice(bytes);
        }
        drop(held);
        self.0.ready.notify_one();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.0
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .writers_gone = true;
        self.0.ready.notify_one();
    }
}

/// A tap: the run writes into the first, the caller reads the second.
pub fn tap() -> (LiveOutput, Chunks) {
    let shared = Arc::new(Shared::default());
    let writer = Writer(shared.clone());
    let live = LiveOutput::new(move |stream, bytes| writer.push(stream, bytes));
    let chunks = Chunks {
        shared,
        sent: None,
        pending: [Vec::new(), Vec::new()],
    };
    (live, chunks)
}

impl Chunks {
    /// The next pieces: waits for output, then for the rest of the
    /// [`WINDOW`] since the last pieces went out (none after a quiet
    /// spell), and returns what came, per stream (stdout first). `None` once
    /// every writer is gone.
    pub async fn next(&mut self) -> Option<Vec<(Stream, String)>> {
        loop {
            self.wait().await?;
            if let Some(sent) = self.sent {
                tokio::time::sleep_until(sent + WINDOW).await;
            }
            self.take();
            let pieces = self.pieces(false);
            // Only part of a character so far: wait for its rest.
            if !pieces.is_empty() {
                self.sent = Some(tokio::time::Instant::now());
                return Some(pieces);
            }
        }
    }

    /// Waits until a writer left something; `None` once none is left and
    /// every writer is gone.
    async fn wait(&self) -> Option<()> {
        loop {
            let ready = self.shared.ready.notified();
            {
                let held = self.shared.held.lock().unwrap_or_else(|p| p.into_inner());
                if held.bytes.iter().any(|bytes| !bytes.is_empty()) || held.skipped.contains(&true)
                {
                    return Some(());
                }
                if held.writers_gone {
                    return None;
                }
            }
            ready.await;
        }
    }

    /// Whatever has arrived and not gone out, the run being over: the last
    /// pieces, with a character cut at the end written as U+FFFD.
    pub fn drain(&mut self) -> Vec<(Stream, String)> {
        self.take();
        self.pieces(true)
    }

    /// Moves what the writers left into `pending`, marking dropped pieces.
    fn take(&mut self) {
        let mut held = self.shared.held.lock().unwrap_or_else(|p| p.into_inner());
        for at in 0..2 {
            self.pending[at].append(&mut held.bytes[at]);
            if std::mem::take(&mut held.skipped[at]) {
                self.pending[at].extend_from_slice(SKIPPED.as_bytes());
            }
        }
    }

    fn pieces(&mut self, last: bool) -> Vec<(Stream, String)> {
        let mut out = Vec::new();
        for stream in [Stream::Stdout, Stream::Stderr] {
            let pending = &mut self.pending[index(stream)];
            if pending.is_empty() {
                continue;
            }
            let whole = if last {
                pending.len()
            } else {
                match std::str::from_utf8(pending) {
                    Ok(_) => pending.len(),
                    // A sequence cut short at the end waits for its rest.
                    Err(err) if err.error_len().is_none() => err.valid_up_to(),
                    Err(_) => pending.len(),
                }
            };
            if whole == 0 {
                continue;
            }
            let rest = pending.split_off(whole);
            let text = String::from_utf8_lossy(pending).into_owned();
            *pending = rest;
            out.push((stream, text));
        }
        out
    }
}

fn index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

/// The wire name of a stream.
pub fn stream_name(stream: Stream) -> &'static str {
    match stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces gather per window, keep their streams apart and never split a
    /// character; the drain gives the rest.
    #[tokio::test]
    async fn pieces_coalesce_and_keep_characters_whole() {
        let (live, mut chunks) = tap();
        let write = |stream, bytes: &[u8]| {
            let sink = live.clone();
            sink.call(stream, bytes);
        };
        write(Stream::Stdout, b"a");
        write(Stream::Stdout, b"b\xc3");
        write(Stream::Stderr, b"err");
        let first = chunks.next().await.unwrap();
        assert_eq!(
            first,
            vec![
                (Stream::Stdout, "ab".to_string()),
                (Stream::Stderr, "err".to_string())
            ]
        );
        write(Stream::Stdout, b"\xa9!");
        assert_eq!(
            chunks.next().await.unwrap(),
            vec![(Stream::Stdout, "é!".to_string())]
        );
        write(Stream::Stdout, b"\xc3");
        assert_eq!(
            chunks.drain(),
            vec![(Stream::Stdout, "\u{fffd}".to_string())]
        );
        drop(live);
        assert!(chunks.next().await.is_none());
    }

    /// Issue 29 item 13: with `max_stream_bytes: 0` a reader that never read
    /// let the tap queue every piece (~130 MiB per run). What waits is
    /// bounded; a piece past the bound is dropped and the reader told where.
    #[tokio::test]
    async fn a_reader_that_falls_behind_holds_a_bounded_backlog() {
        let (live, mut chunks) = tap();
        let piece = vec![b'x'; 64 * 1024];
        for _ in 0..64 {
            live.call(Stream::Stdout, &piece);
        }
        let held: usize = chunks
            .shared
            .held
            .lock()
            .unwrap()
            .bytes
            .iter()
            .map(Vec::len)
            .sum();
        assert_eq!(held, MAX_PENDING_BYTES);
        let first = chunks.next().await.unwrap();
        assert_eq!(first.len(), 1);
        assert!(first[0].1.ends_with(SKIPPED), "the drop is marked");
        assert_eq!(first[0].1.len(), MAX_PENDING_BYTES + SKIPPED.len());
        live.call(Stream::Stdout, b"after");
        drop(live);
        assert_eq!(chunks.next().await.unwrap()[0].1, "after");
        assert!(chunks.next().await.is_none());
    }
}
