//! `wasi:filesystem`, guarded: every call is wasmtime-wasi's own, wrapped so
//! that the `/work` quota is reserved before anything grows and every refusal
//! of the sandbox is observed as the turn's `denied` fact.
//!
//! The wrapper is linked over wasmtime-wasi's filesystem interface (the
//! component linker allows shadowing), so the guest cannot reach the
//! unguarded calls. Writes through streams (`write-via-stream`,
//! `append-via-stream`) are guarded by wrapping the stream wasmtime-wasi
//! returns; the quota refusal surfaces as `EDQUOT`.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode as AsyncErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types::{
    self as fs, Descriptor, DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntry,
    DirectoryEntryStream, ErrorCode, Filesize, MetadataHashValue, NewTimestamp, OpenFlags,
    PathFlags,
};
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{
    DynOutputStream, FsError, FsResult, OutputStream, Pollable, StreamError, StreamResult,
};

use crate::work_quota::WorkQuota;

/// Descriptors (open files and directories, directory listings) one
/// instance may hold at once; past it `open-at` and `read-directory` fail
/// with `insufficient-memory` (preview 2 has no `EMFILE`; the guest sees
/// `ENOMEM`). Dropping the instance closes them all.
pub const MAX_DESCRIPTORS: usize = 512;

/// What the guard keeps for one instance.
#[derive(Debug)]
pub struct Guard {
    /// The `/work` budget.
    pub quota: WorkQuota,
    /// Whether the sandbox refused a file operation during the current turn.
    pub denied: bool,
    /// Descriptors and directory listings the guest holds, by resource rep.
    held: HashSet<(bool, u32)>,
    /// Files the guest holds open, by descriptor rep: their bytes count
    /// against the quota even after they are unlinked.
    files: HashMap<u32, Arc<std::fs::File>>,
}

impl Guard {
    /// A guard over `quota`, holding nothing.
    pub fn new(quota: WorkQuota) -> Self {
        Guard {
            quota,
            denied: false,
            held: HashSet::new(),
            files: HashMap::new(),
        }
    }

    /// Reserves `n` bytes of growth; an exact recount includes open, unlinked files.
    pub fn reserve_bytes(&mut self, n: u64) -> bool {
        let files = &self.files;
        self.quota.reserve_bytes(n, || unlinked_bytes(files))
    }

    /// How many descriptors the guest holds.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// The bytes of files that are open but no longer linked anywhere, each inode once.
fn unlinked_bytes(files: &HashMap<u32, Arc<std::fs::File>>) -> u64 {
    let mut seen = HashSet::new();
    files
        .values()
        .filter_map(|file| file.metadata().ok())
        .filter(|meta| meta.nlink() == 0 && seen.insert((meta.dev(), meta.ino())))
        .map(|meta| meta.len())
        .sum()
}

/// Resource kinds in [`Guard::held`].
const DESCRIPTOR: bool = false;
const LISTING: bool = true;

/// The guard, shared by the filesystem calls and the file streams they hand out.
pub type SharedGuard = Arc<Mutex<Guard>>;

/// A refused reservation, carried through a stream error to `filesystem-error-code`.
#[derive(Debug)]
struct QuotaRefused;

impl std::fmt::Display for QuotaRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("/work quota exceeded")
    }
}

impl std::error::Error for QuotaRefused {}

fn lock(guard: &SharedGuard) -> std::sync::MutexGuard<'_, Guard> {
    guard.lock().unwrap_or_else(|p| p.into_inner())
}

/// wasmtime-wasi's filesystem view plus our guard: what the shadowing
/// bindings call into.
pub struct GuardedFs<'a> {
    /// wasmtime-wasi's own implementation.
    pub inner: WasiFilesystemCtxView<'a>,
    /// Quota and denial facts.
    pub guard: &'a SharedGuard,
}

/// The bindings' `HasData` marker for [`GuardedFs`].
pub struct GuardedFsData;

impl wasmtime::component::HasData for GuardedFsData {
    type Data<'a> = GuardedFs<'a>;
}

/// The errors that mean "the sandbox said no".
fn is_denial(code: &AsyncErrorCode) -> bool {
    matches!(
        code,
        AsyncErrorCode::Access
            | AsyncErrorCode::NotPermitted
            | AsyncErrorCode::ReadOnly
            | AsyncErrorCode::Quota
    )
}

impl GuardedFs<'_> {
    /// Records a denial in `result`, passing it on.
    fn seen<T>(&mut self, result: FsResult<T>) -> FsResult<T> {
        if let Err(err) = &result
            && err.downcast_ref().is_some_and(is_denial)
        {
            lock(self.guard).denied = true;
        }
        result
    }

    /// Answers `insufficient-memory` when the descriptor budget is spent.
    fn budget(&mut self) -> FsResult<()> {
        let mut guard = lock(self.guard);
        if guard.held() >= MAX_DESCRIPTORS {
            guard.denied = true;
            return Err(FsError::from(AsyncErrorCode::InsufficientMemory));
        }
        Ok(())
    }

    /// Runs `call` when the quota grants `reserve`, else answers `EDQUOT`.
    fn reserved<T>(
        &mut self,
        reserve: impl FnOnce(&mut Guard) -> bool,
        call: impl FnOnce(&mut WasiFilesystemCtxView<'_>) -> FsResult<T>,
    ) -> FsResult<T> {
        let granted = reserve(&mut lock(self.guard));
        if !granted {
            lock(self.guard).denied = true;
            return Err(FsError::from(AsyncErrorCode::Quota));
        }
        let result = call(&mut self.inner);
        self.seen(result)
    }

    /// Wraps a file stream wasmtime-wasi handed out so its writes reserve room first.
    fn guard_stream(
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

impl fs::Host for GuardedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        fs::Host::convert_error_code(&mut self.inner, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<streams::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        if self
            .inner
            .table
            .get(&err)?
            .downcast_ref::<QuotaRefused>()
            .is_some()
        {
            return Ok(Some(ErrorCode::Quota));
        }
        fs::Host::filesystem_error_code(&mut self.inner, err)
    }
}

impl fs::HostDescriptor for GuardedFs<'_> {
    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: Filesize,
    ) -> FsResult<Resource<streams::InputStream>> {
        let result = self.inner.read_via_stream(fd, offset);
        self.seen(result)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: Filesize,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let result = self.inner.write_via_stream(fd, offset);
        let stream = self.seen(result)?;
        self.guard_stream(stream)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let result = self.inner.append_via_stream(fd);
        let stream = self.seen(result)?;
        self.guard_stream(stream)
    }

    fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: Filesize,
        len: Filesize,
        advice: fs::Advice,
    ) -> FsResult<()> {
        let result = self.inner.advise(fd, offset, len, advice);
        self.seen(result)
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        let result = self.inner.sync_data(fd);
        self.seen(result)
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorFlags> {
        let result = self.inner.get_flags(fd);
        self.seen(result)
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorType> {
        let result = self.inner.get_type(fd);
        self.seen(result)
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: Filesize) -> FsResult<()> {
        self.reserved(|g| g.reserve_bytes(size), |inner| inner.set_size(fd, size))
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: NewTimestamp,
        mtim: NewTimestamp,
    ) -> FsResult<()> {
        let result = self.inner.set_times(fd, atim, mtim);
        self.seen(result)
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: Filesize,
        offset: Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        let result = self.inner.read(fd, len, offset);
        self.seen(result)
    }

    fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: Filesize,
    ) -> FsResult<Filesize> {
        let want = buf.len() as u64;
        self.reserved(
            |g| g.reserve_bytes(want),
            |inner| inner.write(fd, buf, offset),
        )
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DirectoryEntryStream>> {
        self.budget()?;
        let result = self.inner.read_directory(fd);
        let listing = self.seen(result)?;
        lock(self.guard).held.insert((LISTING, listing.rep()));
        Ok(listing)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        let result = self.inner.sync(fd);
        self.seen(result)
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.reserved(
            |g| g.quota.reserve_file(),
            |inner| inner.create_directory_at(fd, path),
        )
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorStat> {
        let result = self.inner.stat(fd);
        self.seen(result)
    }

    fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> FsResult<DescriptorStat> {
        let result = self.inner.stat_at(fd, path_flags, path);
        self.seen(result)
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        atim: NewTimestamp,
        mtim: NewTimestamp,
    ) -> FsResult<()> {
        let result = self.inner.set_times_at(fd, path_flags, path, atim, mtim);
        self.seen(result)
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.reserved(
            |g| g.quota.reserve_file(),
            |inner| inner.link_at(fd, old_path_flags, old_path, new_descriptor, new_path),
        )
    }

    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        self.budget()?;
        let creates = oflags.contains(OpenFlags::CREATE);
        let opened = self.reserved(
            |g| !creates || g.quota.reserve_file(),
            |inner| inner.open_at(fd, path_flags, path, oflags, flags),
        )?;
        let file = match self.inner.table.get(&opened)? {
            wasmtime_wasi::filesystem::Descriptor::File(f) => Some(f.file.clone()),
            wasmtime_wasi::filesystem::Descriptor::Dir(_) => None,
        };
        let mut guard = lock(self.guard);
        guard.held.insert((DESCRIPTOR, opened.rep()));
        if let Some(file) = file {
            guard.files.insert(opened.rep(), file);
        }
        Ok(opened)
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        {
            let mut guard = lock(self.guard);
            guard.held.remove(&(DESCRIPTOR, fd.rep()));
            guard.files.remove(&fd.rep());
        }
        fs::HostDescriptor::drop(&mut self.inner, fd)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let result = self.inner.readlink_at(fd, path);
        self.seen(result)
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let result = self.inner.remove_directory_at(fd, path);
        self.seen(result)
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let result = self.inner.rename_at(fd, old_path, new_fd, new_path);
        self.seen(result)
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.reserved(
            |g| g.quota.reserve_file(),
            |inner| inner.symlink_at(fd, src_path, dest_path),
        )
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let result = self.inner.unlink_file_at(fd, path);
        self.seen(result)
    }

    fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.inner.is_same_object(a, b)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<MetadataHashValue> {
        let result = self.inner.metadata_hash(fd);
        self.seen(result)
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> FsResult<MetadataHashValue> {
        let result = self.inner.metadata_hash_at(fd, path_flags, path);
        self.seen(result)
    }
}

impl fs::HostDirectoryEntryStream for GuardedFs<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<DirectoryEntryStream>,
    ) -> FsResult<Option<DirectoryEntry>> {
        let result = self.inner.read_directory_entry(stream);
        self.seen(result)
    }

    fn drop(&mut self, stream: Resource<DirectoryEntryStream>) -> wasmtime::Result<()> {
        lock(self.guard).held.remove(&(LISTING, stream.rep()));
        fs::HostDirectoryEntryStream::drop(&mut self.inner, stream)
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
