//! The `/work` budget: 256 MiB and 20 000 entries per runtime.
//!
//! Growth is reserved before wasmtime-wasi performs it, against an estimate
//! that only ever over-counts (a file that shrinks is not credited). A file
//! is charged the size it reaches, not the bytes written to it: a write
//! ending past the end charges everything up to its end, the hole before it
//! included ([`WorkQuota::reserve_growth`]), so `f.seek(2 << 30); f.write(b'x')`
//! is refused as 2 GiB, and no file in `/work` ever outgrows the quota. When a
//! reservation would cross the limit the usage is recounted exactly before
//! anything is refused: the directory tree, walked by descriptor (no path is
//! ever too long), plus the bytes of files the guest still holds open after
//! unlinking them. A tree that cannot be walked whole (unreadable, or nested
//! deeper than [`MAX_WALK_DEPTH`]) is never counted as small: growth is
//! refused until it can be.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

/// Bytes a runtime's `/work` may hold.
pub const WORK_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Files, directories and links a runtime's `/work` may hold.
pub const WORK_MAX_FILES: u64 = 20_000;
/// The deepest directory the recount walks into; deeper trees refuse growth.
pub const MAX_WALK_DEPTH: usize = 256;

/// Usage accounting for one runtime's `/work`.
#[derive(Debug)]
pub struct WorkQuota {
    root: PathBuf,
    max_bytes: u64,
    max_files: u64,
    bytes: u64,
    files: u64,
    /// Why the last recount could not see the whole tree, if it could not.
    unknown: Option<String>,
    /// Set when a reservation was refused during the current turn.
    pub hit: bool,
}

impl WorkQuota {
    /// Accounting for `root`, counted now.
    pub fn new(root: &Path, max_bytes: u64, max_files: u64) -> Self {
        let mut quota = WorkQuota {
            root: root.to_path_buf(),
            max_bytes,
            max_files,
            bytes: 0,
            files: 0,
            unknown: None,
            hit: false,
        };
        quota.recount(0);
        quota
    }

    /// Reserves room for `n` more bytes; `false` (and `hit`) when it would
    /// cross the limit. `unlinked` adds the bytes of open, unlinked files to
    /// an exact recount.
    pub fn reserve_bytes(&mut self, n: u64, unlinked: impl FnOnce() -> u64) -> bool {
        if self.unknown.is_some() || self.bytes.saturating_add(n) > self.max_bytes {
            self.recount(unlinked());
            if self.unknown.is_some() || self.bytes.saturating_add(n) > self.max_bytes {
                self.hit = true;
                return false;
            }
        }
        self.bytes = self.bytes.saturating_add(n);
        true
    }

    /// Reserves what a change that takes a file of `size` bytes to `end`
    /// bytes grows it by (nothing when it does not grow), as
    /// [`WorkQuota::reserve_bytes`] does.
    pub fn reserve_growth(&mut self, size: u64, end: u64, unlinked: impl FnOnce() -> u64) -> bool {
        self.reserve_bytes(growth(size, end), unlinked)
    }

    /// The bytes the running estimate charges: never less than `/work`
    /// holds (files by their size, plus open, unlinked ones).
    pub fn charged(&self) -> u64 {
        self.bytes
    }

    /// Whether `n` more bytes fit the running estimate, so that
    /// [`WorkQuota::reserve_bytes`] would grant them without a recount.
    pub fn fits(&self, n: u64) -> bool {
        self.unknown.is_none() && self.bytes.saturating_add(n) <= self.max_bytes
    }

    /// Reserves one more entry; `false` (and `hit`) at the limit.
    pub fn reserve_file(&mut self) -> bool {
        if self.unknown.is_some() || self.files >= self.max_files {
            self.recount(0);
            if self.unknown.is_some() || self.files >= self.max_files {
                self.hit = true;
                return false;
            }
        }
        self.files += 1;
        true
    }

    /// The message a refused reservation surfaces as.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "/work quota exceeded (Disk quota exceeded): limit {} MiB and {} files",
            self.max_bytes / (1024 * 1024),
            self.max_files
        );
        if let Some(why) = &self.unknown {
            text.push_str(&format!("; {why}"));
        }
        text
    }

    /// Counts the tree exactly (never following links) plus `unlinked` bytes.
    fn recount(&mut self, unlinked: u64) {
        match walk(&self.root) {
            Ok((bytes, files)) => {
                self.bytes = bytes.saturating_add(unlinked);
                self.files = files;
                self.unknown = None;
            }
            Err(why) => self.unknown = Some(why),
        }
    }
}

/// What taking a file of `size` bytes to `end` bytes grows it by.
pub fn growth(size: u64, end: u64) -> u64 {
    end.saturating_sub(size)
}

/// Where a write of `len` bytes at `offset` ends (a file's size then is at least this).
pub fn write_end(offset: u64, len: u64) -> u64 {
    offset.saturating_add(len)
}

/// Walks `root` by descriptor: (bytes of regular files, entries).
fn walk(root: &Path) -> Result<(u64, u64), String> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let unreadable = |err: rustix::io::Errno| format!("part of /work cannot be counted ({err})");
    let fd: OwnedFd = rustix::fs::open(root, flags, Mode::empty()).map_err(unreadable)?;
    let mut stack = vec![Dir::new(fd).map_err(unreadable)?];
    let (mut bytes, mut files) = (0u64, 0u64);
    loop {
        let depth = stack.len();
        let Some(dir) = stack.last_mut() else { break };
        let Some(entry) = dir.read() else {
            stack.pop();
            continue;
        };
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        files += 1;
        let parent = dir.fd().map_err(unreadable)?;
        let kind = entry.file_type();
        if kind == FileType::Directory {
            if depth >= MAX_WALK_DEPTH {
                return Err(format!(
                    "/work is nested deeper than {MAX_WALK_DEPTH} directories"
                ));
            }
            let child =
                rustix::fs::openat(parent, name, flags, Mode::empty()).map_err(unreadable)?;
            stack.push(Dir::new(child).map_err(unreadable)?);
        } else if kind == FileType::RegularFile || kind == FileType::Unknown {
            let stat =
                rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).map_err(unreadable)?;
            if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile {
                bytes = bytes.saturating_add(u64::try_from(stat.st_size).unwrap_or(0));
            }
        }
    }
    Ok((bytes, files))
}

/// Writes a run's files into `/work` (the host directory `root`) between
/// turns, reserving their entries (new directories included) and their
/// growth from `quota` first, as the guest's own writes are: past the quota
/// nothing is written and the answer is `resource_exhausted`.
///
/// # Errors
/// `resource_exhausted` with the quota's message; `invalid_request` when
/// the tree is in the way ([`code_runner_core::files::put_error`]).
pub fn put_files(
    quota: &mut WorkQuota,
    root: &Path,
    files: &[code_runner_core::files::InputFile],
) -> Result<(), code_runner_core::RunnerError> {
    use code_runner_core::files::{beneath, put_error};
    use code_runner_core::{ErrorCode, RunnerError};
    let fd = beneath::open_root(root).map_err(|err| put_error("/work", &err))?;
    // Between turns the tree is still: count it exactly (the running
    // estimate may lag what the guest created), then reserve on that.
    quota.recount(0);
    let sizes = files
        .iter()
        .map(|f| (f.path.as_str(), f.bytes.len() as u64));
    let (entries, bytes) =
        beneath::growth(&fd, sizes).map_err(|(path, err)| put_error(path, &err))?;
    let fits = quota.unknown.is_none()
        && quota.files.saturating_add(entries) <= quota.max_files
        && quota.bytes.saturating_add(bytes) <= quota.max_bytes;
    if !fits {
        return Err(RunnerError::new(
            ErrorCode::ResourceExhausted,
            format!("the request's files do not fit: {}", quota.describe()),
        ));
    }
    quota.files += entries;
    quota.bytes += bytes;
    for file in files {
        beneath::write_file(&fd, &file.path, &file.bytes)
            .map_err(|err| put_error(&file.path, &err))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's files are charged their entries (directories too) and bytes,
    /// all or nothing.
    #[test]
    fn put_files_is_charged_all_or_nothing() {
        use code_runner_core::files::InputFile;
        let dir = tempfile::tempdir().unwrap();
        let mut quota = WorkQuota::new(dir.path(), 100, 3);
        let file = |path: &str, len: usize| InputFile {
            path: path.into(),
            bytes: vec![b'x'; len],
        };
        put_files(&mut quota, dir.path(), &[file("d/a", 40), file("d/b", 40)]).unwrap();
        assert_eq!(std::fs::read(dir.path().join("d/b")).unwrap().len(), 40);
        let err = put_files(&mut quota, dir.path(), &[file("c", 1)]).unwrap_err();
        assert!(err.message.contains("do not fit"), "{}", err.message);
        let err = put_files(&mut quota, dir.path(), &[file("d/a", 61)]).unwrap_err();
        assert!(
            err.message.contains("limit 0 MiB and 3 files"),
            "{}",
            err.message
        );
        put_files(&mut quota, dir.path(), &[file("d/a", 60)]).unwrap();
        assert!(!dir.path().join("c").exists());
    }

    /// A rewrite near the limit is allowed after an exact recount; real growth is refused.
    #[test]
    fn recount_corrects_the_estimate_before_refusing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![0u8; 600]).unwrap();
        let mut quota = WorkQuota::new(dir.path(), 1000, 3);
        assert!(quota.reserve_bytes(300, || 0));
        // The estimate now says 900; the file really holds 600, so 350 more fits.
        assert!(quota.reserve_bytes(350, || 0));
        std::fs::write(dir.path().join("a"), vec![0u8; 950]).unwrap();
        assert!(!quota.reserve_bytes(100, || 0));
        assert!(quota.hit);
    }

    /// Bytes the tree no longer shows (open, unlinked files) still count.
    #[test]
    fn unlinked_bytes_count_in_the_recount() {
        let dir = tempfile::tempdir().unwrap();
        let mut quota = WorkQuota::new(dir.path(), 1000, 3);
        assert!(quota.reserve_bytes(900, || 0));
        assert!(!quota.reserve_bytes(200, || 900));
        assert!(quota.reserve_bytes(200, || 0));
    }

    /// The entry limit counts directories and links too.
    #[test]
    fn entry_limit_counts_every_kind() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("l")).unwrap();
        let mut quota = WorkQuota::new(dir.path(), 1000, 3);
        assert!(quota.reserve_file());
        std::fs::write(dir.path().join("f"), b"").unwrap();
        assert!(!quota.reserve_file());
    }

    /// One change to a file of `/work`, as the guest can make it.
    #[derive(Debug, Clone)]
    enum Op {
        /// A write of `len` bytes at `offset` (a seek, then a write).
        Write { file: usize, offset: u64, len: u64 },
        /// An appending write.
        Append { file: usize, len: u64 },
        /// `truncate`/`set_size`.
        Resize { file: usize, size: u64 },
        /// `unlink`.
        Remove { file: usize },
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        // Offsets up to 4 GiB (sparse files cost nothing on disk), writes up to 4 KiB.
        prop_oneof![
            (0..3usize, 0..(4u64 << 30), 0..4096u64).prop_map(|(file, offset, len)| Op::Write {
                file,
                offset,
                len
            }),
            (0..3usize, 0..(8u64 << 10), 0..4096u64).prop_map(|(file, offset, len)| Op::Write {
                file,
                offset,
                len
            }),
            (0..3usize, 0..4096u64).prop_map(|(file, len)| Op::Append { file, len }),
            (0..3usize, 0..(4u64 << 30)).prop_map(|(file, size)| Op::Resize { file, size }),
            (0..3usize, 0..(16u64 << 10)).prop_map(|(file, size)| Op::Resize { file, size }),
            (0..3usize).prop_map(|file| Op::Remove { file }),
        ]
    }

    /// The bytes `/work` holds: every regular file by its size.
    fn held(dir: &Path) -> u64 {
        walk(dir).unwrap().0
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Issue 29, item 6: against any sequence of seeks, writes,
        /// appends, truncations and removals, the charged total never falls
        /// below what the files' sizes add up to, the files never add up to
        /// more than the quota, and a refusal is only ever of a change that
        /// really would not fit (a seek of 2 GiB then one byte is refused).
        #[test]
        fn the_quota_bounds_the_size_files_reach(ops in proptest::collection::vec(op(), 1..40)) {
            use std::io::{Seek, SeekFrom, Write};
            const MAX: u64 = 64 * 1024;
            let dir = tempfile::tempdir().unwrap();
            let mut quota = WorkQuota::new(dir.path(), MAX, 100);
            let path = |file: usize| dir.path().join(format!("f{file}"));
            for op in ops {
                let file = match &op {
                    Op::Write { file, .. } | Op::Append { file, .. } | Op::Resize { file, .. } | Op::Remove { file } => *file,
                };
                let size = std::fs::metadata(path(file)).map_or(0, |m| m.len());
                let end = match op {
                    Op::Write { offset, len, .. } => write_end(offset, len),
                    Op::Append { len, .. } => write_end(size, len),
                    Op::Resize { size, .. } => size,
                    Op::Remove { .. } => 0,
                };
                let before = held(dir.path());
                if !quota.reserve_growth(size, end, || 0) {
                    // Refused only when the exact count could not take the growth.
                    proptest::prop_assert!(before + growth(size, end) > MAX, "{op:?}");
                    continue;
                }
                let open = || std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(path(file)).unwrap();
                match op {
                    Op::Write { offset, len, .. } => {
                        let mut f = open();
                        f.seek(SeekFrom::Start(offset)).unwrap();
                        f.write_all(&vec![b'x'; len as usize]).unwrap();
                    }
                    Op::Append { len, .. } => {
                        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path(file)).unwrap();
                        f.write_all(&vec![b'y'; len as usize]).unwrap();
                    }
                    Op::Resize { size, .. } => open().set_len(size).unwrap(),
                    Op::Remove { .. } => { let _ = std::fs::remove_file(path(file)); }
                }
                let now = held(dir.path());
                proptest::prop_assert!(now <= quota.charged(), "{op:?}: {now} held, {} charged", quota.charged());
                proptest::prop_assert!(now <= MAX, "{op:?}: {now} held");
                proptest::prop_assert!(quota.charged() <= MAX, "{op:?}");
            }
        }
    }

    /// A seek far past the end then one byte is charged as the size it
    /// would make the file, so it is refused; the same byte at the end is not.
    #[test]
    fn a_write_past_the_end_is_charged_its_hole() {
        let dir = tempfile::tempdir().unwrap();
        let mut quota = WorkQuota::new(dir.path(), 1 << 20, 10);
        assert!(!quota.reserve_growth(0, write_end(2 << 30, 1), || 0));
        assert!(quota.hit);
        assert!(quota.reserve_growth(0, write_end(0, 1), || 0));
        assert!(quota.reserve_growth(1, 1, || 0), "a rewrite grows nothing");
        assert_eq!(quota.charged(), 1);
    }

    /// A tree nested past the walk's depth (here also past PATH_MAX) is not
    /// counted as empty: once a recount is needed, growth is refused.
    #[test]
    fn too_deep_a_tree_refuses_growth() {
        let dir = tempfile::tempdir().unwrap();
        let mut quota = WorkQuota::new(dir.path(), 1000, 100_000);
        assert!(quota.reserve_bytes(900, || 0));
        let mut fd: OwnedFd =
            rustix::fs::open(dir.path(), OFlags::DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..2100 {
            rustix::fs::mkdirat(&fd, "d", Mode::RWXU).unwrap();
            fd = rustix::fs::openat(&fd, "d", OFlags::DIRECTORY, Mode::empty()).unwrap();
        }
        assert!(!quota.reserve_bytes(200, || 0));
        assert!(
            quota.describe().contains("nested deeper"),
            "{}",
            quota.describe()
        );
        assert!(!quota.reserve_bytes(1, || 0));
    }
}
