//! Registrations that outlive the worker (issue 47, item 5): what a host
//! registered with `register_function` (its source, language, schemas,
//! description and approval flag) is kept in `<data-dir>/registrations/`,
//! one file per function id, and published again when the worker starts.
//! `teardown {namespace}` removes them for good. What guest code registers
//! belongs to its lineage and ends with it: it is never kept.
//!
//! A file is written whole (temporary file, then rename) with mode 0600;
//! at start at most [`MAX_KEPT`] files of at most [`MAX_FILE_BYTES`] are
//! read, each counted before it is parsed; a damaged one is reported and
//! left, never fatal.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Weak;

use code_runner_core::wire::RegisterRequest;
use serde_json::Value;

use crate::bus::Caller;
use crate::ops::Ops;

/// The most registrations kept.
pub const MAX_KEPT: usize = 10_000;
/// The largest file read (a registration's source is at most 1 MiB, its
/// schemas 16 KiB each).
const MAX_FILE_BYTES: u64 = 2 << 20;

/// The kept registrations of one data directory.
#[derive(Debug)]
pub(crate) struct Registrations {
    dir: PathBuf,
}

impl Registrations {
    /// The registrations kept under `data_dir`.
    pub(crate) fn new(data_dir: &Path) -> Registrations {
        Registrations {
            dir: data_dir.join("registrations"),
        }
    }

    /// A function id's file: its bytes in hex (ids are short; this keeps
    /// every name a plain file name).
    fn path(&self, function_id: &str) -> PathBuf {
        let name: String = function_id.bytes().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    /// Keeps `request` (a host's registration that succeeded); a failure
    /// to write is logged: the function is published either way.
    pub(crate) fn keep(&self, request: &RegisterRequest) {
        let written = (|| {
            code_runner_core::create_private_dir(&self.dir)?;
            let text = serde_json::to_vec(request).map_err(std::io::Error::other)?;
            let path = self.path(&request.function_id);
            let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            std::io::Write::write_all(&mut options.open(&tmp)?, &text)?;
            std::fs::rename(&tmp, &path)
        })();
        if let Err(err) = written {
            tracing::warn!(function = %request.function_id, "cannot keep the registration for the next start: {err}");
        }
    }

    /// Removes the kept registrations of `namespace` (every language).
    pub(crate) fn forget_namespace(&self, namespace: &str) {
        for (path, request) in self.read_all() {
            let in_namespace = crate::bus::naming::FunctionId::parse(&request.function_id)
                .is_ok_and(|id| id.namespace() == namespace);
            if in_namespace && let Err(err) = std::fs::remove_file(&path) {
                tracing::warn!("cannot remove {}: {err}", path.display());
            }
        }
    }

    /// Every kept registration, by file, in id order.
    fn read_all(&self) -> Vec<(PathBuf, RegisterRequest)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for entry in entries.flatten().take(MAX_KEPT) {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            match read_one(&path) {
                Ok(request) => found.push((path, request)),
                Err(why) => {
                    tracing::warn!("a kept registration is damaged ({}): {why}", path.display())
                }
            }
        }
        found.sort_by(|a, b| a.1.function_id.cmp(&b.1.function_id));
        found
    }
}

fn read_one(path: &Path) -> Result<RegisterRequest, String> {
    let file = std::fs::File::open(path).map_err(|err| err.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| err.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("over {MAX_FILE_BYTES} bytes"));
    }
    serde_json::from_slice(&bytes).map_err(|err| err.to_string())
}

/// Publishes every kept registration again, as the host registered it,
/// once the engines are settled (a language still loading is waited for).
/// Each goes through `register_function` itself, so every check applies
/// again; one that fails is logged and kept for the next start.
pub(crate) async fn publish_kept(ops: Weak<Ops>) {
    let Some((kept, engines)) = ops
        .upgrade()
        .map(|ops| (ops.registrations.read_all(), ops.engines.clone()))
    else {
        return;
    };
    if kept.is_empty() {
        return;
    }
    engines.settled().await;
    let (mut published, total) = (0, kept.len());
    for (_, request) in kept {
        // The worker may be shutting down meanwhile: then nothing is left to do.
        let Some(ops) = ops.upgrade() else { return };
        let id = request.function_id.clone();
        let payload = serde_json::to_value(&request).unwrap_or(Value::Null);
        match crate::ops::register::register_function(ops, payload, Caller::host()).await {
            Ok(_) => published += 1,
            Err(err) => {
                tracing::warn!(function = %id, "a kept registration was not published again: {}", err.message)
            }
        }
    }
    tracing::info!("published {published} of {total} kept registrations again");
}
