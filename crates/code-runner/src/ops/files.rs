//! A run's files in and out: `files` checked and decoded before anything
//! starts, written into the runtime through the seam ([`Runtime::put_files`],
//! on the runtime's own thread, within its own quotas) before its code runs,
//! and `collect` matched against the runtime's host directory once the turn
//! is over, whatever its ending.
//!
//! The worker reads collected files from the host directory itself: in both
//! isolation modes the runtime's directory is a directory of this host (a
//! sandbox process is given the path the worker made), and the turn is over,
//! so nothing but this runtime's next turn could write there, and that waits
//! for this run's answer.

use std::path::PathBuf;

use code_runner_core::files::{CollectCaps, Globs, InputFile, decode_inputs};
use code_runner_core::{CollectedFile, FileInput, RunnerError, Runtime};

/// A request's files to write and globs to collect.
pub(crate) struct RunFiles {
    inputs: Vec<InputFile>,
    globs: Globs,
}

impl RunFiles {
    /// Checks and decodes the request's `files` and compiles its `collect` globs.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the path or glob and the rule.
    pub(crate) fn parse(files: Vec<FileInput>, collect: &[String]) -> Result<Self, RunnerError> {
        Ok(RunFiles {
            inputs: decode_inputs(files)?,
            globs: Globs::new(collect)?,
        })
    }

    /// Writes the files into `runtime` (nothing when there are none).
    ///
    /// # Errors
    /// As [`Runtime::put_files`]: `resource_exhausted` past the runtime's quotas.
    pub(crate) async fn put(&self, runtime: &dyn Runtime) -> Result<(), RunnerError> {
        if self.inputs.is_empty() {
            return Ok(());
        }
        runtime.put_files(self.inputs.clone()).await
    }

    /// The files under `root` the globs match, capped (off the async workers).
    pub(crate) async fn collect(
        &self,
        root: Option<PathBuf>,
        caps: CollectCaps,
    ) -> Vec<CollectedFile> {
        let Some(root) = root.filter(|_| !self.globs.is_empty()) else {
            return Vec::new();
        };
        let globs = self.globs.clone();
        tokio::task::spawn_blocking(move || code_runner_core::files::collect(&root, &globs, caps))
            .await
            .unwrap_or_default()
    }
}
