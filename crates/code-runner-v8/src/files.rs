//! `iii.files`: a runtime's scratch directory, one file per name, with quotas.
//!
//! The directory is the runtime's work directory, created `0700` on the
//! first write (most runs never write one, and a `mkdir` costs a one-shot run
//! as much as booting half an isolate) and owned by the runtime alone, so the
//! sizes kept here are authoritative: only this type writes there. Every
//! call opens at most one descriptor and closes it before returning, so a
//! guest cannot hold descriptors open.

use std::collections::BTreeMap;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
            used: 0,
            quota_hit: false,
            denied: false,
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(scratch),
            Err(err) => return Err(err),
        };
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        scratch.created = true;
        for entry in entries {
            let entry = entry?;
            let (Ok(name), Ok(meta)) = (entry.file_name().into_string(), entry.metadata()) else {
                continue;
            };
            if meta.is_file() {
                scratch.used += meta.len();
                scratch.sizes.insert(name, meta.len());
            }
        }
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
        let new_len = contents.len() as u64;
        let after = self.admit(name, new_len)?;
        if !self.created {
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
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc_o_nofollow())
            .open(self.dir.join(name))
            .and_then(|mut file| file.write_all(contents));
        match written {
            Ok(()) => {
                self.used = after;
                self.sizes.insert(name.to_string(), new_len);
                Ok(())
            }
            Err(err) => {
                self.recount(name);
                Err(FilesError {
                    code: "EIO",
                    message: format!("iii.files: cannot write {name:?}: {err}"),
                })
            }
        }
    }

    /// Whether `name` may be written with `len` bytes (a name, the policy,
    /// the quotas): the bytes this directory would then hold. Asked before
    /// the contents are copied out of the guest, so a refused write costs
    /// the host nothing.
    ///
    /// # Errors
    /// As [`Scratch::write`], without the I/O.
    pub fn admit(&mut self, name: &str, len: u64) -> Result<u64, FilesError> {
        check_name(name)?;
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
        let files_after = self.sizes.len() as u64 + u64::from(old.is_none());
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
        check_name(name)?;
        if !self.sizes.contains_key(name) {
            return Err(self.missing(name));
        }
        let limit = self.limits.max_bytes.unwrap_or(0);
        let mut bytes = Vec::new();
        OpenOptions::new()
            .read(true)
            .custom_flags(libc_o_nofollow())
            .open(self.dir.join(name))
            .and_then(|file| file.take(limit.saturating_add(1)).read_to_end(&mut bytes))
            .map_err(|err| FilesError {
                code: "EIO",
                message: format!("iii.files: cannot read {name:?}: {err}"),
            })?;
        Ok(bytes)
    }

    /// The size of file `name` in bytes.
    ///
    /// # Errors
    /// A bad name or a missing file (`ENOENT`).
    pub fn size(&self, name: &str) -> Result<u64, FilesError> {
        check_name(name)?;
        self.sizes
            .get(name)
            .copied()
            .ok_or_else(|| self.missing(name))
    }

    /// The names of every file, sorted.
    pub fn list(&self) -> Vec<String> {
        self.sizes.keys().cloned().collect()
    }

    /// Removes file `name`; answers whether it existed.
    ///
    /// # Errors
    /// A bad name, the read-only policy, or I/O.
    pub fn remove(&mut self, name: &str) -> Result<bool, FilesError> {
        check_name(name)?;
        if self.limits.read_only {
            self.denied = true;
            return Err(FilesError::invalid(format!(
                "iii.files: cannot remove {name:?}: this run is read-only"
            )));
        }
        let Some(size) = self.sizes.remove(name) else {
            return Ok(false);
        };
        self.used -= size;
        match std::fs::remove_file(self.dir.join(name)) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(true),
            Err(err) => {
                self.recount(name);
                Err(FilesError {
                    code: "EIO",
                    message: format!("iii.files: cannot remove {name:?}: {err}"),
                })
            }
        }
    }

    /// Deletes every file (the runtime is going away); the directory stays for its owner to remove.
    pub fn clear(&mut self) {
        for name in std::mem::take(&mut self.sizes).into_keys() {
            let _ = std::fs::remove_file(self.dir.join(name));
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
    fn recount(&mut self, name: &str) {
        if let Some(old) = self.sizes.remove(name) {
            self.used -= old;
        }
        if let Ok(meta) = std::fs::symlink_metadata(self.dir.join(name))
            && meta.is_file()
        {
            self.used += meta.len();
            self.sizes.insert(name.to_string(), meta.len());
        }
    }
}

/// `O_NOFOLLOW`: nothing here creates symlinks, and nothing here follows one.
fn libc_o_nofollow() -> i32 {
    // The value is fixed by the Linux ABI on every architecture this builds for.
    0o400_000
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
