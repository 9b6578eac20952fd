//! File operations under a runtime's root, by descriptor.
//!
//! Every component of a path is opened with `openat(…, O_NOFOLLOW)` from its
//! parent's descriptor, so a symlink anywhere in a path, planted by a guest
//! or not, is refused (`ELOOP`/`ENOTDIR`), never followed: nothing outside
//! the root can be read or written through one. Paths given here are
//! normalised ([`super::normalise`]) and relative.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The deepest directory [`walk`] enters; deeper ones are reported, not walked.
pub const MAX_WALK_DEPTH: usize = 64;
/// The most entries [`walk`] looks at before it stops (python's `/work`
/// holds at most 20 000).
pub const MAX_WALK_ENTRIES: usize = 25_000;

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens the root directory itself (not following a symlink at its last component).
///
/// # Errors
/// The root is missing, not a directory, or a symlink.
pub fn open_root(root: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(root, DIR_FLAGS, Mode::empty())?)
}

/// The directory holding `path`'s last component, opened component by
/// component; with `create`, missing directories are made (mode 0700).
fn parent<'p>(root: &OwnedFd, path: &'p str, create: bool) -> std::io::Result<(OwnedFd, &'p str)> {
    let (dirs, leaf) = match path.rsplit_once('/') {
        Some((dirs, leaf)) => (Some(dirs), leaf),
        None => (None, path),
    };
    let mut dir = rustix::io::dup(root)?;
    for part in dirs.into_iter().flat_map(|d| d.split('/')) {
        dir = match rustix::fs::openat(&dir, part, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(err) => return Err(err.into()),
                }
                rustix::fs::openat(&dir, part, DIR_FLAGS, Mode::empty())?
            }
            Err(err) => return Err(err.into()),
        };
    }
    Ok((dir, leaf))
}

/// Writes `bytes` as the whole of `path` under `root`, making its directories.
///
/// # Errors
/// A component is a symlink or not a directory, or the I/O failed.
pub fn write_file(root: &OwnedFd, path: &str, bytes: &[u8]) -> std::io::Result<()> {
    let (dir, leaf) = parent(root, path, true)?;
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dir, leaf, flags, Mode::from_raw_mode(0o600))?;
    std::fs::File::from(fd).write_all(bytes)
}

/// Reads `path` under `root` whole, at most `limit` bytes of it; answers a
/// regular file only.
///
/// # Errors
/// Missing, a symlink, not a regular file, or the I/O failed.
pub fn read_file(root: &OwnedFd, path: &str, limit: u64) -> std::io::Result<Vec<u8>> {
    let (dir, leaf) = parent(root, path, false)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rustix::fs::openat(&dir, leaf, flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(Errno::INVAL.into());
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(limit)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Removes file `path` under `root`.
///
/// # Errors
/// Missing, a component is a symlink, or the I/O failed.
pub fn remove_file(root: &OwnedFd, path: &str) -> std::io::Result<()> {
    let (dir, leaf) = parent(root, path, false)?;
    Ok(rustix::fs::unlinkat(&dir, leaf, AtFlags::empty())?)
}

/// What writing a set of files would add under `root`: new entries (the
/// files and directories that do not exist yet, each counted once) and the
/// bytes by which files grow (a file's new size less its old one).
///
/// # Errors
/// The path whose component exists and is not a directory (or is a
/// symlink), or whose file is a directory; or I/O.
pub fn growth<'a>(
    root: &OwnedFd,
    files: impl IntoIterator<Item = (&'a str, u64)>,
) -> Result<(u64, u64), (&'a str, std::io::Error)> {
    let (mut entries, mut bytes) = (0u64, 0u64);
    let mut counted = BTreeSet::new();
    for (path, len) in files {
        for (i, _) in path.match_indices('/') {
            let dir = &path[..i];
            if counted.insert(dir) && !dir_exists(root, dir).map_err(|err| (path, err))? {
                entries += 1;
            }
        }
        match file_size(root, path).map_err(|err| (path, err))? {
            Some(old) => bytes = bytes.saturating_add(len.saturating_sub(old)),
            None => {
                entries += 1;
                bytes = bytes.saturating_add(len);
            }
        }
    }
    Ok((entries, bytes))
}

/// The size of regular file `path` under `root`, `None` when it does not exist.
pub fn file_size(root: &OwnedFd, path: &str) -> std::io::Result<Option<u64>> {
    let (dir, leaf) = match parent(root, path, false) {
        Ok(found) => found,
        Err(err) if err.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => return Ok(None),
        Err(err) => return Err(err),
    };
    match rustix::fs::statat(&dir, leaf, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile => {
            Ok(Some(u64::try_from(stat.st_size).unwrap_or(0)))
        }
        Ok(_) => Err(Errno::ISDIR.into()),
        Err(Errno::NOENT) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Whether directory `path` exists under `root` (a symlink or a file there is an error).
fn dir_exists(root: &OwnedFd, path: &str) -> std::io::Result<bool> {
    let (dir, leaf) = match parent(root, path, false) {
        Ok(found) => found,
        Err(err) if err.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => return Ok(false),
        Err(err) => return Err(err),
    };
    match rustix::fs::openat(&dir, leaf, DIR_FLAGS, Mode::empty()) {
        Ok(_) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// What [`walk`] found: regular files with their sizes, directories, and
/// why it stopped early, if it did. Symlinks and other special files are
/// neither followed nor listed; names that are not UTF-8 are skipped.
#[derive(Debug, Default)]
pub struct Walked {
    /// `(path, size)` of each regular file, in no particular order.
    pub files: Vec<(String, u64)>,
    /// Each directory's path.
    pub dirs: Vec<String>,
    /// Set when the walk stopped at [`MAX_WALK_ENTRIES`] or skipped a
    /// directory deeper than [`MAX_WALK_DEPTH`]: says which.
    pub incomplete: Option<String>,
}

/// Walks `root` by descriptor, never following a symlink, within
/// [`MAX_WALK_DEPTH`] and [`MAX_WALK_ENTRIES`]. A missing root is empty.
///
/// # Errors
/// The root exists and cannot be opened.
pub fn walk(root: &Path) -> std::io::Result<Walked> {
    let mut walked = Walked::default();
    let fd = match open_root(root) {
        Ok(fd) => fd,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(walked),
        Err(err) => return Err(err),
    };
    let mut stack = vec![(Dir::new(fd)?, String::new())];
    let mut seen = 0usize;
    loop {
        let depth = stack.len();
        let Some((dir, prefix)) = stack.last_mut() else {
            break;
        };
        let Some(entry) = dir.read() else {
            stack.pop();
            continue;
        };
        let Ok(entry) = entry else { continue };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        seen += 1;
        if seen > MAX_WALK_ENTRIES {
            walked.incomplete = Some(format!("the walk stopped after {MAX_WALK_ENTRIES} entries"));
            break;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        };
        let Ok(parent) = dir.fd() else { continue };
        let Ok(stat) = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => walked
                .files
                .push((path, u64::try_from(stat.st_size).unwrap_or(0))),
            FileType::Directory => {
                if depth > MAX_WALK_DEPTH {
                    walked.incomplete = Some(format!(
                        "directories deeper than {MAX_WALK_DEPTH} were not walked"
                    ));
                    continue;
                }
                let Ok(child) = rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty()) else {
                    continue;
                };
                let Ok(child) = Dir::new(child) else { continue };
                walked.dirs.push(path.clone());
                stack.push((child, path));
            }
            _ => {}
        }
    }
    Ok(walked)
}
