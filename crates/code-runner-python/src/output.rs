//! The guest's stdout and stderr: written straight into the turn's bounded
//! [`StreamBuffer`]s as the guest writes them, never held whole.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use code_runner_core::caps::{LiveOutput, Stream, StreamBuffer};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// The two buffers output lands in: the turn's, or a small one between turns.
pub struct Streams {
    /// Standard output.
    pub stdout: StreamBuffer,
    /// Standard error.
    pub stderr: StreamBuffer,
}

impl Streams {
    /// Buffers that keep at most `cap` bytes each (head and tail).
    pub fn new(cap: Option<usize>) -> Self {
        Streams::with_live(cap, None)
    }

    /// [`Streams::new`], handing what the guest writes to `live` too.
    pub fn with_live(cap: Option<usize>, live: Option<LiveOutput>) -> Self {
        Streams {
            stdout: StreamBuffer::with_live(Stream::Stdout, cap, live.clone()),
            stderr: StreamBuffer::with_live(Stream::Stderr, cap, live),
        }
    }
}

/// The buffers, shared between the store's host state and the WASI streams.
pub type SharedStreams = Arc<Mutex<Streams>>;

/// One of the guest's output streams.
#[derive(Clone)]
pub struct GuestOutput {
    streams: SharedStreams,
    stream: Stream,
}

impl GuestOutput {
    /// The guest's `stream` (stdout or stderr), landing in `streams`.
    pub fn new(streams: SharedStreams, stream: Stream) -> Self {
        GuestOutput { streams, stream }
    }

    fn push(&self, bytes: &[u8]) {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        match self.stream {
            Stream::Stdout => streams.stdout.push(bytes),
            Stream::Stderr => streams.stderr.push(bytes),
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

/// How much one write may carry; the buffers keep only head and tail anyway.
const WRITE_BUDGET: usize = 1 << 20;

#[async_trait::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_BUDGET)
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
