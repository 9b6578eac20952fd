//! One maker per cache entry, across processes. What python's engine makes
//! once per machine (the operator's package install, the data image, the
//! compiled snapshot) takes minutes of CPU on a cold machine; two processes
//! starting together (a `prepare` beside a `serve`, two servers, CI jobs on
//! one cache) would each make it. Each maker holds an advisory lock on
//! `<cache>/locks/<entry>.lock` while it checks and makes its entry: the
//! second waits, saying for what, then finds the entry made. A process
//! that may not write the cache (a confined sandbox process, which reads
//! what its worker made) takes no lock: it can make nothing there.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::PythonError;

/// Where the lock of cache entry `entry` lives under the cache root `cache`.
pub fn lock_path(cache: &Path, entry: &str) -> PathBuf {
    cache.join("locks").join(format!("{entry}.lock"))
}

/// Holds the lock of `entry` until dropped, waiting for another process
/// that holds it (making `what`) and saying so meanwhile.
pub(crate) struct Maker {
    _file: Option<File>,
}

impl Maker {
    /// Takes the lock of `entry` in the cache directory `cache`.
    ///
    /// # Errors
    /// [`PythonError::Unavailable`] when the lock file cannot be made.
    pub(crate) fn take(cache: &Path, entry: &str, what: &str) -> Result<Maker, PythonError> {
        let path = lock_path(cache, entry);
        let unavailable = |err: std::io::Error| {
            PythonError::Unavailable(format!("cannot lock {}: {err}", path.display()))
        };
        let opened = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&path)
            });
        let file = match opened {
            Ok(file) => file,
            Err(err) if read_only(&err) => return Ok(Maker { _file: None }),
            Err(err) => return Err(unavailable(err)),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let waiting = format!("waiting for another process that is making {what}");
                tracing::info!("{waiting} (it holds {})", path.display());
                let _step = crate::progress::Step::begin(&waiting);
                file.lock().map_err(unavailable)?;
            }
            Err(TryLockError::Error(err)) => return Err(unavailable(err)),
        }
        Ok(Maker { _file: Some(file) })
    }
}

/// Whether `err` says this process may not write there.
fn read_only(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::PermissionDenied
        || err.kind() == std::io::ErrorKind::ReadOnlyFilesystem
}
