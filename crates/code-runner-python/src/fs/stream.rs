//! File streams. Output: wasmtime-wasi's stream for a file, wrapped so every
//! write reserves its bytes first (a refusal travels as a stream error that
//! `filesystem-error-code` turns into `EDQUOT`) and so one write may carry a
//! whole buffer. Input: a stream of our own whose every read fills the
//! caller's buffer up to end of file.
//!
//! wasi-libc writes a file as `check-write`, one `write` of at most the
//! permit, `blocking-flush`, and returns the permit-sized count; it reads with
//! one `read`/`blocking-read` and returns what came back. wasmtime-wasi's file
//! streams permit and read 64 KiB a call, which is where a 1 MiB `os.write`
//! or `os.read` used to stop. Both are bounded by [`MAX_FILE_CALL`].

use std::sync::Arc;

use bytes::Bytes;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, FsResult, InputStream, OutputStream, Pollable, StreamError,
    StreamResult,
};

use super::{GuardedFs, MAX_FILE_CALL, SharedGuard, lock, read_whole};
use crate::work_quota::write_end;

/// A refused reservation, carried through a stream error to `filesystem-error-code`.
#[derive(Debug)]
pub(super) struct QuotaRefused;

impl std::fmt::Display for QuotaRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("/work quota exceeded")
    }
}

impl std::error::Error for QuotaRefused {}

impl GuardedFs<'_> {
    /// Wraps a file stream wasmtime-wasi handed out so its writes reserve
    /// room first: the growth of `file` when each write lands at `position`
    /// (`None`: appended at its end).
    pub(super) fn guard_stream(
        &mut self,
        stream: Resource<DynOutputStream>,
        file: Option<Arc<std::fs::File>>,
        position: Option<u64>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let slot = self.inner.table.get_mut(&stream)?;
        let inner = std::mem::replace(slot, Box::new(Closed));
        *slot = Box::new(QuotaStream {
            inner,
            guard: self.guard.clone(),
            file,
            position,
        });
        Ok(stream)
    }

    /// Puts a whole-read stream over `file` at `offset` in the slot of the
    /// stream wasmtime-wasi handed out.
    pub(super) fn whole_reads(
        &mut self,
        stream: Resource<DynInputStream>,
        file: Arc<std::fs::File>,
        offset: u64,
    ) -> FsResult<Resource<DynInputStream>> {
        *self.inner.table.get_mut(&stream)? = Box::new(WholeRead {
            file,
            position: offset,
            closed: false,
        });
        Ok(stream)
    }
}

/// A file's output stream whose writes reserve room in the quota first:
/// the growth of the file's size each write causes, holes included.
struct QuotaStream {
    inner: DynOutputStream,
    guard: SharedGuard,
    /// The file written (`None`: not a regular file, charged by bytes).
    file: Option<Arc<std::fs::File>>,
    /// Where the next write lands (as wasmtime-wasi's stream tracks it);
    /// `None` for an appending stream, which writes at the end.
    position: Option<u64>,
}

impl QuotaStream {
    /// Reserves what a write of `n` bytes grows the file by, then moves
    /// the position past it.
    fn reserve(&mut self, n: usize) -> StreamResult<()> {
        let n = n as u64;
        let position = self.position;
        let mut guard = lock(&self.guard);
        let granted = match &self.file {
            Some(file) => {
                guard.reserve_growth(Some(file), |size| write_end(position.unwrap_or(size), n))
            }
            None => guard.reserve_bytes(n),
        };
        if granted {
            if let Some(position) = &mut self.position {
                *position = write_end(*position, n);
            }
            return Ok(());
        }
        guard.denied = true;
        Err(StreamError::LastOperationFailed(wasmtime::Error::new(
            QuotaRefused,
        )))
    }
}

#[async_trait::async_trait]
impl Pollable for QuotaStream {
    async fn ready(&mut self) {
        self.inner.ready().await;
    }
}

#[async_trait::async_trait]
impl OutputStream for QuotaStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        if bytes.len() > MAX_FILE_CALL {
            return Err(StreamError::trap(
                "write larger than `check_write` permitted",
            ));
        }
        self.reserve(bytes.len())?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    /// A ready file takes one whole buffer, up to [`MAX_FILE_CALL`]
    /// (wasmtime-wasi's stream permits 64 KiB, but its `write` writes all it
    /// is given); a write still in flight permits nothing, as before.
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(match self.inner.check_write()? {
            0 => 0,
            _ => MAX_FILE_CALL,
        })
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        if nelem > MAX_FILE_CALL {
            return Err(StreamError::trap(
                "cannot write more zeroes than `check_write` allows",
            ));
        }
        self.reserve(nelem)?;
        self.inner.write(Bytes::from(vec![0; nelem]))
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await;
    }
}

/// A file's input stream whose every read returns as much as was asked for
/// (up to [`MAX_FILE_CALL`]) or all that is left: a read of a regular file is
/// whole, as on Linux. The file is read on the runtime's own thread, as
/// wasmtime-wasi's stream does under `allow_blocking_current_thread`.
struct WholeRead {
    file: Arc<std::fs::File>,
    position: u64,
    /// End of file was reached, or a read failed.
    closed: bool,
}

#[async_trait::async_trait]
impl Pollable for WholeRead {
    /// A regular file is always ready.
    async fn ready(&mut self) {}
}

#[async_trait::async_trait]
impl InputStream for WholeRead {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if self.closed {
            return Err(StreamError::Closed);
        }
        if size == 0 {
            return Ok(Bytes::new());
        }
        match read_whole(&self.file, self.position, size as u64) {
            Ok(buf) if buf.is_empty() => {
                self.closed = true;
                Err(StreamError::Closed)
            }
            Ok(buf) => {
                self.position += buf.len() as u64;
                Ok(Bytes::from(buf))
            }
            Err(err) => {
                self.closed = true;
                Err(StreamError::LastOperationFailed(err.into()))
            }
        }
    }

    async fn blocking_read(&mut self, size: usize) -> StreamResult<Bytes> {
        self.read(size)
    }

    /// Skips without reading (nothing to allocate), up to end of file.
    fn skip(&mut self, nelem: usize) -> StreamResult<usize> {
        if self.closed {
            return Err(StreamError::Closed);
        }
        let len = match self.file.metadata() {
            Ok(meta) => meta.len(),
            Err(err) => {
                self.closed = true;
                return Err(StreamError::LastOperationFailed(err.into()));
            }
        };
        let left = len.saturating_sub(self.position);
        if nelem > 0 && left == 0 {
            self.closed = true;
            return Err(StreamError::Closed);
        }
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(nelem);
        self.position += n as u64;
        Ok(n)
    }

    async fn blocking_skip(&mut self, nelem: usize) -> StreamResult<usize> {
        self.skip(nelem)
    }
}

/// The placeholder a stream's slot holds for the instant it is being wrapped.
struct Closed;

#[async_trait::async_trait]
impl Pollable for Closed {
    async fn ready(&mut self) {}
}

impl OutputStream for Closed {
    fn write(&mut self, _bytes: Bytes) -> StreamResult<()> {
        Err(StreamError::Closed)
    }

    fn flush(&mut self) -> StreamResult<()> {
        Err(StreamError::Closed)
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Err(StreamError::Closed)
    }
}
