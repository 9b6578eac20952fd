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

use std::time::Duration;

use code_runner_core::LiveOutput;
use code_runner_core::caps::Stream;
use tokio::sync::mpsc;

/// How long output gathers before it goes out as one piece per stream.
pub const WINDOW: Duration = Duration::from_millis(50);

/// The reading side of a tap.
pub struct Chunks {
    rx: mpsc::UnboundedReceiver<(Stream, Vec<u8>)>,
    /// When the last pieces went out.
    sent: Option<tokio::time::Instant>,
    /// Bytes of a character cut at the end of the last piece, per stream.
    pending: [Vec<u8>; 2],
}

/// A tap: the run writes into the first, the caller reads the second.
pub fn tap() -> (LiveOutput, Chunks) {
    let (tx, rx) = mpsc::unbounded_channel();
    let live = LiveOutput::new(move |stream, bytes| {
        let _ = tx.send((stream, bytes.to_vec()));
    });
    let chunks = Chunks {
        rx,
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
            let first = self.rx.recv().await?;
            self.take(first);
            if let Some(sent) = self.sent {
                tokio::time::sleep_until(sent + WINDOW).await;
            }
            while let Ok(more) = self.rx.try_recv() {
                self.take(more);
            }
            let pieces = self.pieces(false);
            // Only part of a character so far: wait for its rest.
            if !pieces.is_empty() {
                self.sent = Some(tokio::time::Instant::now());
                return Some(pieces);
            }
        }
    }

    /// Whatever has arrived and not gone out, the run being over: the last
    /// pieces, with a character cut at the end written as U+FFFD.
    pub fn drain(&mut self) -> Vec<(Stream, String)> {
        while let Ok(more) = self.rx.try_recv() {
            self.take(more);
        }
        self.pieces(true)
    }

    fn take(&mut self, (stream, bytes): (Stream, Vec<u8>)) {
        self.pending[index(stream)].extend_from_slice(&bytes);
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
}
