//! `iii.files`: a runtime's scratch directory, files by relative path
//! (`data/in.csv`), with quotas.
//!
//! The directory is the runtime's work directory, created `0700` on the
//! first write (most runs never write one, and a `mkdir` costs a one-shot run
//! as much as booting half an isolate) and owned by the runtime alone, so the
//! sizes kept here are authoritative: only this type writes there (a run's
//! uploaded files too, through [`Scratch::put`]). Paths follow the rules of
//! a run's files ([`code_runner_core::files::normalise`]); directories are
//! made as files need them and count against `scratch_files` like files, so
//! the number of entries stays bounded. Every component is opened by
//! descriptor without following a symlink ([`code_runner_core::files::beneath`]);
//! every call closes what it opened before returning, so a guest cannot
//! hold descriptors open.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::DirBuilder;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use code_runner_core::files::{InputFile, beneath};

/// The longest name a file may have, in bytes (the usual `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// Why a scratch call failed; `code` is what the guest's error carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesError {
    /// `code-runner::resource_exhausted`, `code-runner::invalid_request`, `ENOENT` or `EIO`.
    pub code: &'static str,
    /// What went wrong, naming the file and the number that bit.
    pub message: String,
}

const EXHAUSTED: &str = "code-runner::resource_exhausted";
const INVALID: &str = "code-runner::invalid_request";

impl FilesError {
    fn invalid(message: String) -> Self {
        FilesError {
            code: INVALID,
            message,
        }
    }
}

/// Quotas of one scratch directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilesLimits {
    /// Total bytes; `None` disables `iii.files` (every write is refused).
    pub max_bytes: Option<u64>,
    /// Number of files.
    pub max_files: u64,
    /// Refuse every write and removal (the seam's read-only policy).
    pub read_only: bool,
}

/// One runtime's scratch directory.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
    /// Whether `dir` exists (made by the first write, or found at open).
    created: bool,
    limits: FilesLimits,
    sizes: BTreeMap<String, u64>,
    /// Directories made for files (`data` of `data/in.csv`); each counts as a file.
    dirs: BTreeSet<String>,
    used: u64,
    /// Set when a write was refused for a quota since the last [`Scratch::take_flags`].
    quota_hit: bool,
    /// Set when any write or removal was refused (quota or read-only).
    denied: bool,
}

/// Checks that `name` is one file name: not empty, not `.`/`..`, no `/` or NUL, at most 255 bytes.
///
/// # Errors
/// `code-runner::invalid_request` saying which rule the name breaks.
pub fn check_name(name: &str) -> Result<(), FilesError> {
    if name.is_empty() {
        return Err(FilesError::invalid(
            "iii.files: a file name cannot be empty".into(),
        ));
    }
    if name == "." || name == ".." {
        return Err(FilesError::invalid(format!(
            "iii.files: {name:?} is not a file name"
        )));
    }
    if name.contains('/') || name.contains('\0') {
        return Err(FilesError::invalid(format!(
            "iii.files: {:?} is a path; names are one file each, without '/'",
            shorten(name)
        )));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(FilesError::invalid(format!(
            "iii.files: a name is at most {MAX_NAME_BYTES} bytes, this one is {}",
            name.len()
        )));
    }
    Ok(())
}

/// Checks and normalises `path`, a file's path relative to the scratch
/// directory (`data/in.csv`), by the rules of a run's files.
///
/// # Errors
/// `code-runner::invalid_request` saying which rule the path breaks.
pub fn check_path(path: &str) -> Result<String, FilesError> {
    code_runner_core::files::normalise(path)
        .map_err(|err| FilesError::invalid(format!("iii.files: {}", err.message)))
}

fn shorten(name: &str) -> String {
    match name.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &name[..cut]),
        None => name.to_string(),
    }
}

impl Scratch {
    /// Adopts `dir` (counting what it holds) or notes that it is to be made.
    ///
    /// # Errors
    /// The directory exists and cannot be read or made private.
    pub fn open(dir: &Path, limits: FilesLimits) -> std::io::Result<Scratch> {
        let mut scratch = Scratch {
            dir: dir.to_path_buf(),
            created: false,
            limits,
            sizes: BTreeMap::new(),
            dirs: BTreeSet::new(),
            used: 0,
            quota_hit: false,
            denied: false,
        };
        match std::fs::symlink_metadata(dir) {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(scratch),
            Err(err) => return Err(err),
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        scratch.created = true;
        let walked = beneath::walk(dir)?;
        for (path, size) in walked.files {
            scratch.used += size;
            scratch.sizes.insert(path, size);
        }
        scratch.dirs.extend(walked.dirs);
        Ok(scratch)
    }

    /// Whether a quota or a policy refused a call since the last take; resets both.
    pub fn take_flags(&mut self) -> (bool, bool) {
        let flags = (self.quota_hit, self.denied);
        self.quota_hit = false;
        self.denied = false;
        flags
    }

    /// The message a quota refusal carries.
    pub fn describe(&self) -> String {
        match self.limits.max_bytes {
            None => "iii.files is disabled on this worker (scratch_mb: 0)".to_string(),
            Some(bytes) => format!(
                "iii.files quota exceeded: {} MiB and {} files per runtime",
                bytes >> 20,
                self.limits.max_files
            ),
        }
    }

    /// Writes `contents` as the whole of file `name`, within the quotas.
    ///
    /// # Errors
    /// A bad name, the read-only policy, a quota (`code-runner::resource_exhausted`), or I/O.
    pub fn write(&mut self, name: &str, contents: &[u8]) -> Result<(), FilesError> {
        let path = check_path(name)?;
        let after = self.admit(&path, contents.len() as u64)?;
        let root = self.root(true)?;
        match beneath::write_file(&root, &path, contents) {
            Ok(()) => {
                self.used = after;
                self.note_dirs(&path);
                self.sizes.insert(path, contents.len() as u64);
                Ok(())
            }
            Err(err) => {
                self.recount(&path);
                Err(io_error("write", &path, &err))
            }
        }
    }

    /// Writes a run's files before its turn, all or nothing against the
    /// quotas: when they do not fit together, none is written.
    ///
    /// # Errors
    /// The read-only policy or a quota (`code-runner::resource_exhausted`),
    /// a path where a file is in the way, or I/O.
    pub fn put(&mut self, files: &[InputFile]) -> Result<(), FilesError> {
        if self.limits.read_only {
            return Err(FilesError::invalid(
                "iii.files: this runtime is read-only: it takes no files".into(),
            ));
        }
        let Some(max_bytes) = self.limits.max_bytes else {
            return Err(self.exhausted());
        };
        let (mut used, mut entries) = (self.used, self.entries());
        let mut new_dirs = BTreeSet::new();
        let mut new_files = BTreeMap::new();
        for file in files {
            for dir in parents(&file.path) {
                if !self.dirs.contains(dir) && new_dirs.insert(dir) {
                    entries += 1;
                }
            }
            let old = match new_files.insert(file.path.as_str(), file.bytes.len() as u64) {
                Some(old) => Some(old),
                None => self.sizes.get(&file.path).copied(),
            };
            if old.is_none() {
                entries += 1;
            }
            used = (used - old.unwrap_or(0)).saturating_add(file.bytes.len() as u64);
        }
        if used > max_bytes || entries > self.limits.max_files {
            return Err(FilesError {
                code: EXHAUSTED,
                message: format!("the request's files do not fit: {}", self.describe()),
            });
        }
        for file in files {
            self.write(&file.path, &file.bytes)?;
        }
        Ok(())
    }

    /// Files and directories this runtime holds: what `scratch_files` bounds.
    fn entries(&self) -> u64 {
        (self.sizes.len() + self.dirs.len()) as u64
    }

    /// Records the directories `path` lives in.
    fn note_dirs(&mut self, path: &str) {
        for dir in parents(path) {
            if !self.dirs.contains(dir) {
                self.dirs.insert(dir.to_string());
            }
        }
    }

    /// The scratch directory, opened by descriptor; with `create`, made
    /// (0700) by the first write.
    fn root(&mut self, create: bool) -> Result<OwnedFd, FilesError> {
        if create && !self.created {
            let made = DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)
                .and_then(|()| {
                    std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
                });
            if let Err(err) = made {
                return Err(FilesError {
                    code: "EIO",
                    message: format!("iii.files: cannot create the scratch directory: {err}"),
                });
            }
            self.created = true;
        }
        beneath::open_root(&self.dir).map_err(|err| FilesError {
            code: "EIO",
            message: format!("iii.files: cannot open the scratch directory: {err}"),
        })
    }

    /// Whether `name` may be written with `len` bytes (a name, the policy,
    /// the quotas): the bytes this directory would then hold. Asked before
    /// the contents are copied out of the guest, so a refused write costs
    /// the host nothing.
    ///
    /// # Errors
    /// As [`Scratch::write`], without the I/O.
    pub fn admit(&mut self, name: &str, len: u64) -> Result<u64, FilesError> {
        let path = check_path(name)?;
        let name = path.as_str();
        if self.limits.read_only {
            self.denied = true;
            return Err(FilesError::invalid(format!(
                "iii.files: cannot write {name:?}: this run is read-only"
            )));
        }
        let Some(max_bytes) = self.limits.max_bytes else {
            self.refuse();
            return Err(self.exhausted());
        };
        let old = self.sizes.get(name).copied();
        let after = (self.used - old.unwrap_or(0)).saturating_add(len);
        let new_dirs = parents(name)
            .filter(|dir| !self.dirs.contains(*dir))
            .count() as u64;
        let files_after = self.entries() + new_dirs + u64::from(old.is_none());
        if after > max_bytes || files_after > self.limits.max_files {
            self.refuse();
            return Err(self.exhausted());
        }
        Ok(after)
    }

    /// Reads file `name` whole.
    ///
    /// # Errors
    /// A bad name, a missing file (`ENOENT`), or I/O.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, FilesError> {
        let path = check_path(name)?;
        if !self.sizes.contains_key(&path) {
            return Err(self.missing(&path));
        }
        let limit = self.limits.max_bytes.unwrap_or(0);
        beneath::open_root(&self.dir)
            .and_then(|root| beneath::read_file(&root, &path, limit.saturating_add(1)))
            .map_err(|err| io_error("read", &path, &err))
    }

    /// The size of file `name` in bytes.
    ///
    /// # Errors
    /// A bad name or a missing file (`ENOENT`).
    pub fn size(&self, name: &str) -> Result<u64, FilesError> {
        let path = check_path(name)?;
        self.sizes
            .get(&path)
            .copied()
            .ok_or_else(|| self.missing(&path))
    }

    /// The paths of every file, sorted (`data/in.csv`; directories are not listed).
    pub fn list(&self) -> Vec<String> {
        self.sizes.keys().cloned().collect()
    }

    /// Removes file `name`; answers whether it existed.
    ///
    /// # Errors
    /// A bad name, the read-only policy, or I/O.
    pub fn remove(&mut self, name: &str) -> Result<bool, FilesError> {
        let path = check_path(name)?;
        if self.limits.read_only {
            self.denied = true;
            return Err(FilesError::invalid(format!(
                "iii.files: cannot remove {path:?}: this run is read-only"
            )));
        }
        let Some(size) = self.sizes.remove(&path) else {
            return Ok(false);
        };
        self.used -= size;
        let removed = self.root(false).and_then(|root| {
            beneath::remove_file(&root, &path).map_err(|err| io_error("remove", &path, &err))
        });
        match removed {
            Ok(()) => Ok(true),
            Err(err) if err.code == "ENOENT" => Ok(true),
            Err(err) => {
                self.recount(&path);
                Err(err)
            }
        }
    }

    /// Deletes every file (the runtime is going away); the directory stays for its owner to remove.
    pub fn clear(&mut self) {
        let files = std::mem::take(&mut self.sizes);
        if let Ok(root) = beneath::open_root(&self.dir) {
            for path in files.into_keys() {
                let _ = beneath::remove_file(&root, &path);
            }
        }
        self.used = 0;
    }

    fn refuse(&mut self) {
        self.quota_hit = true;
        self.denied = true;
    }

    fn exhausted(&self) -> FilesError {
        FilesError {
            code: EXHAUSTED,
            message: self.describe(),
        }
    }

    fn missing(&self, name: &str) -> FilesError {
        FilesError {
            code: "ENOENT",
            message: format!("iii.files: no file named {:?}", shorten(name)),
        }
    }

    /// Re-reads one file's size after a failed call left it unknown.
    fn recount(&mut self, path: &str) {
        if let Some(old) = self.sizes.remove(path) {
            self.used -= old;
        }
        let size = beneath::open_root(&self.dir)
            .and_then(|root| beneath::file_size(&root, path))
            .ok()
            .flatten();
        if let Some(size) = size {
            self.used += size;
            self.sizes.insert(path.to_string(), size);
        }
    }
}

/// The directories `path` lives in, outermost first (`a`, `a/b` of `a/b/c`).
fn parents(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// A failed I/O call on `path`: `ENOENT` when it is missing,
/// `invalid_request` when the tree is in the way (a file where a directory
/// must be, a symlink), else `EIO`.
fn io_error(what: &str, path: &str, err: &std::io::Error) -> FilesError {
    if err.kind() == std::io::ErrorKind::NotFound {
        return FilesError {
            code: "ENOENT",
            message: format!("iii.files: cannot {what} {}: {err}", shorten(path)),
        };
    }
    let classified = code_runner_core::files::put_error(path, err);
    if classified.code == code_runner_core::ErrorCode::InvalidRequest {
        return FilesError::invalid(format!("iii.files: cannot {what}: {}", classified.message));
    }
    FilesError {
        code: "EIO",
        message: format!("iii.files: cannot {what} {}: {err}", shorten(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(max_bytes: Option<u64>, max_files: u64) -> (tempfile::TempDir, Scratch) {
        let dir = tempfile::tempdir().unwrap();
        let limits = FilesLimits {
            max_bytes,
            max_files,
            read_only: false,
        };
        let scratch = Scratch::open(&dir.path().join("files"), limits).unwrap();
        (dir, scratch)
    }

    /// Names are one file each: paths, dot names, empty and over-long names are refused.
    #[test]
    fn names_are_single_files() {
        for bad in ["", ".", "..", "a/b", "../x", "/etc/passwd", "a\0b"] {
            assert_eq!(check_name(bad).unwrap_err().code, INVALID, "{bad:?}");
        }
        assert!(check_name(&"x".repeat(256)).is_err());
        for good in [
            "a.js",
            ".case",
            "with space",
            "ünï",
            "..hidden",
            &"x".repeat(255),
        ] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
    }

    /// Bytes and files are both bounded; overwriting counts the new size, not both.
    #[test]
    fn quotas_bound_bytes_and_files() {
        let (_dir, mut s) = scratch(Some(100), 2);
        s.write("a", &[1; 60]).unwrap();
        s.write("a", &[2; 90]).unwrap();
        assert_eq!(s.write("b", &[3; 20]).unwrap_err().code, EXHAUSTED);
        assert_eq!(s.take_flags(), (true, true));
        s.write("b", &[3; 10]).unwrap();
        assert_eq!(s.write("c", b"").unwrap_err().code, EXHAUSTED);
        assert!(s.remove("a").unwrap());
        s.write("c", b"x").unwrap();
        assert_eq!(s.list(), vec!["b", "c"]);
        assert_eq!(s.read("c").unwrap(), b"x");
        assert_eq!(s.read("a").unwrap_err().code, "ENOENT");
        assert!(!s.remove("a").unwrap());
    }

    /// `scratch_mb: 0` is "no iii.files", never "no limit".
    #[test]
    fn disabled_scratch_refuses_every_write() {
        let (_dir, mut s) = scratch(None, 64);
        let err = s.write("a", b"x").unwrap_err();
        assert_eq!(err.code, EXHAUSTED);
        assert!(err.message.contains("scratch_mb: 0"), "{}", err.message);
        assert!(s.list().is_empty());
    }

    /// Nested paths are files too; their directories count against the
    /// file quota; put is all or nothing.
    #[test]
    fn nested_paths_count_their_directories() {
        let (_dir, mut s) = scratch(Some(100), 4);
        s.write("data/in.csv", b"a,b").unwrap();
        assert_eq!(s.read("./data/in.csv").unwrap(), b"a,b");
        assert_eq!(s.list(), vec!["data/in.csv"]);
        for bad in ["../x", "/etc/passwd", "a//b", "data/../../x"] {
            assert_eq!(s.write(bad, b"x").unwrap_err().code, INVALID, "{bad:?}");
        }
        s.write("data/more/x", b"1").unwrap();
        assert_eq!(
            s.write("y", b"").unwrap_err().code,
            EXHAUSTED,
            "4 entries: data, data/more and two files"
        );
        let files = |paths: &[&str]| -> Vec<InputFile> {
            paths
                .iter()
                .map(|p| InputFile {
                    path: p.to_string(),
                    bytes: b"z".to_vec(),
                })
                .collect()
        };
        assert!(s.remove("data/more/x").unwrap());
        assert_eq!(s.put(&files(&["p", "q"])).unwrap_err().code, EXHAUSTED);
        assert!(
            s.read("p").is_err(),
            "nothing written when the files do not fit"
        );
        s.put(&files(&["p"])).unwrap();
        assert_eq!(s.read("p").unwrap(), b"z");
    }

    /// The directory is private and a symlink planted in it is not followed.
    #[test]
    fn directory_is_0700_and_symlinks_are_not_followed() {
        let (dir, mut s) = scratch(Some(1 << 20), 64);
        assert!(!s.dir.exists(), "made before the first write");
        s.write("first", b"x").unwrap();
        let mode = std::fs::metadata(&s.dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let target = dir.path().join("outside");
        std::fs::write(&target, b"secret").unwrap();
        std::os::unix::fs::symlink(&target, s.dir.join("link")).unwrap();
        let mut reopened = Scratch::open(&s.dir, s.limits).unwrap();
        assert!(reopened.read("link").is_err());
        assert!(reopened.write("link", b"overwrite").is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        s.clear();
    }
}
