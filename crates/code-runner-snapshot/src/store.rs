//! Where snapshots are kept, under ids that are capabilities: `sn_` and 32
//! random alphanumerics, never logged in full ([`redact`]). A snapshot is
//! written whole or not at all (a temporary file renamed into place), read
//! within a byte cap counted as it arrives, and only by an id of this form.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rand::RngExt;

/// The most snapshots one store keeps; past it `put` is refused.
pub const MAX_SNAPSHOTS: usize = 10_000;
/// Characters of an id's secret.
const SECRET_CHARS: usize = 32;

/// A fresh snapshot id.
pub fn new_snapshot_id() -> String {
    let body: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(SECRET_CHARS)
        .map(char::from)
        .collect();
    format!("sn_{body}")
}

/// Whether `id` is of the form [`new_snapshot_id`] makes (nothing else
/// ever names a file).
pub fn is_snapshot_id(id: &str) -> bool {
    id.strip_prefix("sn_").is_some_and(|body| {
        body.len() == SECRET_CHARS && body.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// An id as logs and cards show it: its first characters only.
pub fn redact(id: &str) -> String {
    let shown: String = id.chars().take(7).collect();
    format!("{shown}…")
}

/// Snapshots in a directory (`<data-dir>/snapshots` by default), one file each.
#[derive(Debug, Clone)]
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    /// The store at `dir`, created (0700) if missing.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(dir: &Path) -> Result<DirStore, String> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        Ok(DirStore {
            dir: dir.to_path_buf(),
        })
    }

    fn path(&self, id: &str) -> Result<PathBuf, String> {
        match is_snapshot_id(id) {
            true => Ok(self.dir.join(id)),
            false => Err(format!("{} is not a snapshot id", redact(id))),
        }
    }

    /// Keeps `bytes` under `id`: written to a temporary file, synced, then
    /// renamed into place, so a reader sees all of it or nothing.
    ///
    /// # Errors
    /// A bad id, the store full ([`MAX_SNAPSHOTS`]), or the write failed
    /// (nothing is left under `id`).
    pub fn put(&self, id: &str, bytes: &[u8]) -> Result<(), String> {
        let path = self.path(id)?;
        let held = std::fs::read_dir(&self.dir)
            .map(|entries| entries.take(MAX_SNAPSHOTS + 1).count())
            .unwrap_or(0);
        if held >= MAX_SNAPSHOTS {
            return Err(format!(
                "the store holds {MAX_SNAPSHOTS} snapshots, its most; no more are written"
            ));
        }
        let tmp = self.dir.join(format!(".{id}.tmp-{}", std::process::id()));
        let written = (|| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        written.map_err(|err| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write snapshot {}: {err}", redact(id))
        })
    }

    /// The bytes kept under `id`, read within `max` bytes (one byte more
    /// is read to tell an oversized snapshot, never the rest).
    ///
    /// # Errors
    /// A bad id, no such snapshot, or an I/O error.
    pub fn get(&self, id: &str, max: u64) -> Result<Vec<u8>, String> {
        let path = self.path(id)?;
        let file = std::fs::File::open(&path).map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => format!("no snapshot {}", redact(id)),
            _ => format!("cannot read snapshot {}: {err}", redact(id)),
        })?;
        let mut bytes = Vec::new();
        file.take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|err| format!("cannot read snapshot {}: {err}", redact(id)))?;
        Ok(bytes)
    }

    /// Removes the snapshot `id` (gone already is fine).
    ///
    /// # Errors
    /// A bad id, or the removal failed.
    pub fn delete(&self, id: &str) -> Result<(), String> {
        match std::fs::remove_file(self.path(id)?) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(format!("cannot remove snapshot {}: {err}", redact(id))),
        }
    }
}
