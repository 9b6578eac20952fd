//! File output streams under the quota: wasmtime-wasi's stream for a file,
//! wrapped so every write reserves its bytes first; a refusal travels as a
//! stream error that `filesystem-error-code` turns into `EDQUOT`.

use bytes::Bytes;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::{
    DynOutputStream, FsResult, OutputStream, Pollable, StreamError, StreamResult,
};

use super::{GuardedFs, SharedGuard, lock};

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
    /// Wraps a file stream wasmtime-wasi handed out so its writes reserve room first.
    pub(super) fn guard_stream(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let slot = self.inner.table.get_mut(&stream)?;
        let inner = std::mem::replace(slot, Box::new(Closed));
        *slot = Box::new(QuotaStream {
            inner,
            guard: self.guard.clone(),
        });
        Ok(stream)
    }
}

/// A file's output stream whose writes reserve room in the quota first.
struct QuotaStream {
    inner: DynOutputStream,
    guard: SharedGuard,
}

impl QuotaStream {
    fn reserve(&mut self, n: usize) -> StreamResult<()> {
        let mut guard = lock(&self.guard);
        if guard.reserve_bytes(n as u64) {
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
        self.reserve(bytes.len())?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        self.reserve(nelem)?;
        self.inner.write_zeroes(nelem)
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await;
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
