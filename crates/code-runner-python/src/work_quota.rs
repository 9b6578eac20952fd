//! The `/work` budget: 256 MiB and 20 000 entries per runtime.
//!
//! Growth is reserved before wasmtime-wasi performs it, against an estimate
//! that only ever over-counts (a rewrite is counted as growth). When a
//! reservation would cross the limit the directory is recounted exactly, so
//! the estimate is corrected before anything is refused.

use std::path::{Path, PathBuf};

/// Bytes a runtime's `/work` may hold.
pub const WORK_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Files, directories and links a runtime's `/work` may hold.
pub const WORK_MAX_FILES: u64 = 20_000;

/// Usage accounting for one runtime's `/work`.
#[derive(Debug)]
pub struct WorkQuota {
    root: PathBuf,
    max_bytes: u64,
    max_files: u64,
    bytes: u64,
    files: u64,
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
            hit: false,
        };
        quota.recount();
        quota
    }

    /// Reserves room for `n` more bytes; `false` (and `hit`) when it would cross the limit.
    pub fn reserve_bytes(&mut self, n: u64) -> bool {
        if self.bytes.saturating_add(n) > self.max_bytes {
            self.recount();
            if self.bytes.saturating_add(n) > self.max_bytes {
                self.hit = true;
                return false;
            }
        }
        self.bytes = self.bytes.saturating_add(n);
        true
    }

    /// Reserves one more entry; `false` (and `hit`) at the limit.
    pub fn reserve_file(&mut self) -> bool {
        if self.files >= self.max_files {
            self.recount();
            if self.files >= self.max_files {
                self.hit = true;
                return false;
            }
        }
        self.files += 1;
        true
    }

    /// The message a refused reservation surfaces as.
    pub fn describe(&self) -> String {
        format!(
            "/work quota exceeded (Disk quota exceeded): limit {} MiB and {} files",
            self.max_bytes / (1024 * 1024),
            self.max_files
        )
    }

    /// Counts the directory exactly, never following links.
    fn recount(&mut self) {
        let (mut bytes, mut files) = (0u64, 0u64);
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(meta) = entry.path().symlink_metadata() else {
                    continue;
                };
                files += 1;
                if meta.is_dir() {
                    stack.push(entry.path());
                } else if meta.is_file() {
                    bytes += meta.len();
                }
            }
        }
        self.bytes = bytes;
        self.files = files;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rewrite near the limit is allowed after an exact recount; real growth is refused.
    #[test]
    fn recount_corrects_the_estimate_before_refusing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![0u8; 600]).unwrap();
        let mut quota = WorkQuota::new(dir.path(), 1000, 3);
        assert!(quota.reserve_bytes(300));
        // The estimate now says 900; the file really holds 600, so 350 more fits.
        assert!(quota.reserve_bytes(350));
        std::fs::write(dir.path().join("a"), vec![0u8; 950]).unwrap();
        assert!(!quota.reserve_bytes(100));
        assert!(quota.hit);
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
}
