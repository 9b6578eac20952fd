//! A run's files in and out: `files` checked and decoded before anything
//! starts, written into the runtime through the seam ([`Runtime::put_files`],
//! on the runtime's own thread, within its own quotas) before its code runs,
//! and `collect` matched against the runtime's host directory once the turn
//! is over, whatever its ending.
//!
//! Collected files come back inline (base64 in the answer) or linked
//! (`collect_mode: "link"`: kept in the worker's link store,
//! [`crate::runtimes::links`], the answer carrying each file's `uri`, size,
//! type and a short preview).
//!
//! The worker reads collected files from the host directory itself: in both
//! isolation modes the runtime's directory is a directory of this host (a
//! sandbox process is given the path the worker made), and the turn is over,
//! so nothing but this runtime's next turn could write there, and that waits
//! for this run's answer.

use std::path::PathBuf;

use code_runner_core::files::{
    CollectCaps, Collected, Collection, Globs, InputFile, decode_inputs, is_textual,
};
use code_runner_core::{CollectMode, CollectedFile, FileInput, RunnerError, Runtime};

use crate::ids::RuntimeKey;
use crate::ops::Ops;
use crate::runtimes::links;

/// The most lines of a linked text file's preview.
const PREVIEW_LINES: usize = 10;
/// The most bytes of a linked text file's preview.
const PREVIEW_BYTES: usize = 1024;

/// A request's files to write and globs to collect, and how to give them back.
pub(crate) struct RunFiles {
    inputs: Vec<InputFile>,
    globs: Globs,
    mode: CollectMode,
}

impl RunFiles {
    /// Checks and decodes the request's `files` and compiles its `collect` globs.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the path or glob and the rule.
    pub(crate) fn parse(
        files: Vec<FileInput>,
        collect: &[String],
        mode: Option<CollectMode>,
    ) -> Result<Self, RunnerError> {
        Ok(RunFiles {
            inputs: decode_inputs(files)?,
            globs: Globs::new(collect)?,
            mode: mode.unwrap_or_default(),
        })
    }

    /// The collected files as the answer carries them: inline, or linked in
    /// the worker's store (living with the kept runtime `owner`, else for
    /// the idle TTL).
    pub(crate) fn deliver(
        &self,
        ops: &Ops,
        collection: Collection,
        owner: Option<RuntimeKey>,
    ) -> Vec<CollectedFile> {
        if self.mode == CollectMode::Inline || collection.files.is_empty() {
            return collection.inline();
        }
        let token = crate::ids::new_link_token(ops.worker_name());
        let Collection { files, omitted } = collection;
        let mut out: Vec<CollectedFile> = files.iter().map(|file| linked(&token, file)).collect();
        let ttl = std::time::Duration::from_secs(ops.config().idle_ttl_secs);
        if let Err(err) = ops.links.keep(&token, files, owner, ttl) {
            out = vec![CollectedFile::marker(format!(
                "<omitted: no file linked: {}>",
                err.message
            ))];
        } else if let Some(omitted) = omitted {
            out.push(CollectedFile::marker(omitted));
        }
        out
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
    pub(crate) async fn collect(&self, root: Option<PathBuf>, caps: CollectCaps) -> Collection {
        let Some(root) = root.filter(|_| !self.globs.is_empty()) else {
            return Collection::default();
        };
        let globs = self.globs.clone();
        tokio::task::spawn_blocking(move || code_runner_core::files::collect(&root, &globs, caps))
            .await
            .unwrap_or_default()
    }
}

/// A linked file as the answer carries it: its uri, size, type and, for
/// text, its first lines.
fn linked(token: &str, file: &Collected) -> CollectedFile {
    CollectedFile {
        path: file.path.clone(),
        mime_type: file.mime_type.to_string(),
        size: file.bytes.len() as u64,
        base64: None,
        uri: Some(links::uri(token, &file.path)),
        preview: preview(file),
    }
}

/// The first lines of a text file (at most [`PREVIEW_LINES`] and
/// [`PREVIEW_BYTES`], cut at a character), `…` where it was cut.
fn preview(file: &Collected) -> Option<String> {
    if !is_textual(file.mime_type) {
        return None;
    }
    let head = &file.bytes[..file.bytes.len().min(PREVIEW_BYTES)];
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // Cut inside a character at the byte bound: keep what is whole.
        Err(err) if err.error_len().is_none() => {
            std::str::from_utf8(&head[..err.valid_up_to()]).ok()?
        }
        Err(_) => return None,
    };
    let mut shown: String = text.split_inclusive('\n').take(PREVIEW_LINES).collect();
    if shown.len() < file.bytes.len() {
        shown.push('…');
    }
    Some(shown)
}
