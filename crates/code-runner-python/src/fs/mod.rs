//! `wasi:filesystem`, guarded: every call is wasmtime-wasi's own, wrapped so
//! that the `/work` quota is reserved before anything grows and every refusal
//! of the sandbox is observed as the turn's `denied` fact.
//!
//! The wrapper is linked over wasmtime-wasi's filesystem interface (the
//! component linker allows shadowing), so the guest cannot reach the
//! unguarded calls. Writes through streams (`write-via-stream`,
//! `append-via-stream`) are guarded by wrapping the stream wasmtime-wasi
//! returns; the quota refusal surfaces as `EDQUOT`. Every write and resize
//! is charged the growth of the file's size (a write past the end charges
//! the hole before it too), never just the bytes it carries.
//!
//! One `write`/`read` of a regular file moves the whole buffer, as on Linux,
//! up to [`MAX_FILE_CALL`]: wasmtime-wasi's own file streams and positioned
//! reads move at most 64 KiB a call, and the guest's libc returns that short
//! count to code that mostly ignores it.
//!
//! Here: the guard's state and the checks every call shares; [`wasi`]: the
//! guarded host calls; [`stream`]: the file streams (quota-bound writes,
//! whole reads).

mod stream;
mod wasi;

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};

use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode as AsyncErrorCode;
use wasmtime_wasi::p2::{FsError, FsResult};

use crate::work_quota::{WORK_MAX_BYTES, WorkQuota};

/// The most one read or write of a file moves in a single call, and so the
/// largest host buffer one call allocates: as much as `/work` may hold (a
/// larger write could never fit). The guest's buffer is its own memory; this
/// bounds the host's copy of it.
pub const MAX_FILE_CALL: usize = WORK_MAX_BYTES as usize;

/// The length of `path` without its trailing slashes, when it has some and
/// something is left (`d/` → `d`; `/` stays). Linux resolves a trailing
/// slash as "this must be a directory, symlinks followed": `rmdir("d/")`
/// removes `d`, `lstat("f/")` of a file is `ENOTDIR`, `unlink("x/")` never
/// removes anything. wasmtime-wasi refuses the first (`EINVAL`) and ignores
/// the slash in the others, so the guards apply the rule themselves.
pub(crate) fn trailing_slash(path: &[u8]) -> Option<usize> {
    let kept = path.iter().rposition(|&b| b != b'/')? + 1;
    (kept < path.len()).then_some(kept)
}

/// Whether `path`'s last component must be a directory, symlinks followed,
/// as Linux resolves it: a trailing slash (`x/`) or a final `.` (`x/.`).
/// `stat` of such a path that is not a directory is `ENOTDIR`.
pub(crate) fn resolves_as_directory(path: &[u8]) -> bool {
    trailing_slash(path).is_some() || path.ends_with(b"/.")
}

/// When `unlink(path)` removes nothing on Linux, what to stat to answer
/// it: `(length of path to stat, follow symlinks)`; the answer is then
/// `EISDIR` for a directory, `ENOTDIR` for anything else, the stat's error
/// when nothing is there. A last component `.` or `..` (`x/.`, `x/./`) is
/// always a directory's (followed); a name with a trailing slash (`x/`) is
/// looked at itself (a symlink is `ENOTDIR`). `None`: a plain name.
pub(crate) fn unlink_check(path: &[u8]) -> Option<(usize, bool)> {
    let kept = trailing_slash(path).unwrap_or(path.len());
    let stem = &path[..kept];
    let last = stem.rsplit(|&b| b == b'/').next().unwrap_or(stem);
    match (last, kept < path.len()) {
        (b"." | b"..", _) => Some((kept, true)),
        (_, true) => Some((kept, false)),
        _ => None,
    }
}

/// Whether `path`'s last component is `..` (slashes after it aside):
/// Linux's `rmdir` of such a path answers `ENOTEMPTY` (the parent is never
/// empty of its child) once the path resolves.
pub(crate) fn ends_in_parent(path: &[u8]) -> bool {
    let stem = &path[..trailing_slash(path).unwrap_or(path.len())];
    stem == b".." || stem.ends_with(b"/..")
}

/// What a read allocates up front when the file's size says less is left
/// (it may be growing, or not be a regular file): wasmtime-wasi's own chunk.
const MIN_READ_BUFFER: usize = 64 * 1024;

/// Reads up to `want` bytes (at most [`MAX_FILE_CALL`]) of `file` at `offset`,
/// stopping early only at end of file. The buffer is sized by what the file
/// holds past `offset`, never by `want` alone.
fn read_whole(file: &std::fs::File, offset: u64, want: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let want = usize::try_from(want)
        .unwrap_or(usize::MAX)
        .min(MAX_FILE_CALL);
    let left = file.metadata()?.len().saturating_sub(offset);
    let size = want.min(
        usize::try_from(left)
            .unwrap_or(usize::MAX)
            .max(MIN_READ_BUFFER),
    );
    let mut buf = vec![0; size];
    let mut got = 0;
    while got < size {
        match file.read_at(&mut buf[got..], offset.saturating_add(got as u64)) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            // Hand back what was read; the error recurs on the next call.
            Err(_) if got > 0 => break,
            Err(err) => return Err(err),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

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

    /// Reserves what a change taking `file` to `end(size)` bytes grows it
    /// by, its current size read now: the size a file reaches is charged,
    /// not the bytes written. A directory (`None`) grows nothing
    /// (wasmtime-wasi refuses the call itself); a file whose size cannot be
    /// read is charged as if empty.
    pub fn reserve_growth(
        &mut self,
        file: Option<&std::fs::File>,
        end: impl FnOnce(u64) -> u64,
    ) -> bool {
        let Some(file) = file else { return true };
        let size = file.metadata().map_or(0, |meta| meta.len());
        let files = &self.files;
        self.quota
            .reserve_growth(size, end(size), || unlinked_bytes(files))
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
}
