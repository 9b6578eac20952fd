//! A runtime's host directory (its `/work`): created owner-only, removed off
//! the async workers.
//!
//! Removing a directory a guest filled (up to 20 000 entries) takes a while
//! and blocks the thread doing it, so it never runs on a tokio worker: the
//! owner awaits [`WorkDir::remove`] (a blocking-pool task) once the runtime
//! is closed, and a directory dropped without that is removed in the
//! background the same way.

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
        if path.as_os_str().is_empty() {
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

fn remove_now(path: &Path) {
    match std::fs::remove_dir_all(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!("cannot remove {}: {err}", path.display());
        }
        _ => {}
    }
}
