//! A runtime's host directory (its `/work`): created owner-only, removed off
//! the async workers.
//!
//! Removing a directory a guest filled (up to 20 000 entries) takes a while
//! and blocks the thread doing it, so it never runs on a tokio worker: the
//! owner awaits [`WorkDir::remove`] (a blocking-pool task) once the runtime
//! is closed, and a directory dropped without that is removed in the
//! background the same way. Most one-shot runs never write to `/work`: an
//! empty directory goes with one `rmdir` where it is, without the blocking
//! pool's hand-off and walk.

use std::path::{Path, PathBuf};

use code_runner_core::RunnerError;

/// A runtime's host directory; removed with the runtime.
#[derive(Debug)]
pub struct WorkDir(pub PathBuf);

impl WorkDir {
    /// Creates `path` (and missing parents) with mode 0700.
    ///
    /// # Errors
    /// `code-runner::engine` naming the directory.
    pub fn create(path: PathBuf) -> Result<WorkDir, RunnerError> {
        code_runner_core::create_private_dir(&path).map_err(|err| {
            RunnerError::engine(format!("cannot create {}: {err}", path.display()))
        })?;
        Ok(WorkDir(path))
    }

    /// Removes the directory on the blocking pool and waits for it. Call it
    /// after the runtime is closed: nothing may still be writing there.
    pub async fn remove(mut self) {
        let path = std::mem::take(&mut self.0);
        if removed_empty(&path) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let _ = handle.spawn_blocking(move || remove_now(&path)).await;
            }
            Err(_) => remove_now(&path),
        }
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let path = std::mem::take(&mut self.0);
        if path.as_os_str().is_empty() || removed_empty(&path) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn_blocking(move || remove_now(&path));
            }
            Err(_) => remove_now(&path),
        }
    }
}

/// Removes `path` if it is an empty directory (or already gone): one
/// `rmdir`, as cheap as the `mkdir` that made it. `false`: it holds
/// something (or cannot be removed so), for [`remove_now`] off the workers.
fn removed_empty(path: &Path) -> bool {
    match std::fs::remove_dir(path) {
        Ok(()) => true,
        Err(err) => err.kind() == std::io::ErrorKind::NotFound,
    }
}

fn remove_now(path: &Path) {
    match std::fs::remove_dir_all(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!("cannot remove {}: {err}", path.display());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An untouched directory and one a guest filled are both gone once
    /// `remove` answers: the one-`rmdir` path must not leave a full one behind.
    #[tokio::test]
    async fn remove_takes_empty_and_filled_directories() {
        let root = tempfile::tempdir().unwrap();
        let empty = WorkDir::create(root.path().join("empty")).unwrap();
        let filled = WorkDir::create(root.path().join("filled")).unwrap();
        std::fs::create_dir(filled.0.join("sub")).unwrap();
        std::fs::write(filled.0.join("sub/file"), b"x").unwrap();
        let (a, b) = (empty.0.clone(), filled.0.clone());
        empty.remove().await;
        filled.remove().await;
        assert!(!a.exists(), "the empty directory is removed");
        assert!(!b.exists(), "the filled directory is removed");
    }
}
