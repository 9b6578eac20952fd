//! Where snapshots are kept. A store holds three kinds of entry, each in a
//! place of its own:
//!
//! - [`Kind::Snapshot`]: what `code-runner::snapshot` wrote, under an `sn_`
//!   id that is a capability (32 random alphanumerics, never logged in
//!   full: [`redact`]);
//! - [`Kind::Session`]: a hibernated runtime, under the SHA-256 of its
//!   `runtime_id` ([`session_name`]), so a store's listing never shows an id
//!   and any worker that is handed the id finds its session;
//! - [`Kind::Holder`]: which worker woke a session that another worker
//!   hibernated (a worker's name, no secret), so calls find it there.
//!
//! An entry is written whole or not at all (a temporary file renamed into
//! place; one PUT to an object store), read within a byte cap counted as it
//! arrives, and only under a name of its kind's form.
//!
//! [`Store`] is either a directory ([`DirStore`], the default:
//! `<data-dir>`) or an object store ([`crate::objects::Objects`], `s3://`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rand::RngExt;

pub use crate::names::{
    Kind, Listed, MAX_LISTED, MAX_SNAPSHOTS, is_snapshot_id, new_snapshot_id, redact, session_name,
};
use crate::objects::Objects;

/// A snapshot store: a directory, or an object store several workers share.
#[derive(Debug, Clone)]
pub enum Store {
    /// A directory on this machine (or a shared file system).
    Dir(DirStore),
    /// An object store (`s3://bucket/prefix`).
    Object(Objects),
}

impl Store {
    /// The store `location` names: empty for `<data_dir>`, a path or
    /// `file:///path` for a directory, `s3://bucket/prefix` for an object
    /// store (its credentials, region and endpoint from the `AWS_*`
    /// environment variables).
    ///
    /// # Errors
    /// A location of no known form, or a directory that cannot be made.
    pub fn open(location: &str, data_dir: &Path) -> Result<Store, String> {
        if location.is_empty() {
            return DirStore::open(data_dir).map(Store::Dir);
        }
        if let Some(path) = location.strip_prefix("file://") {
            return DirStore::open(Path::new(path)).map(Store::Dir);
        }
        if location.starts_with("s3://") {
            return Objects::open(location).map(Store::Object);
        }
        if location.starts_with('/') {
            return DirStore::open(Path::new(location)).map(Store::Dir);
        }
        Err(format!(
            "snapshot_store `{location}` is not an absolute path, file:///path or s3://bucket/prefix"
        ))
    }

    /// Where it is, for logs and health.
    pub fn describe(&self) -> String {
        match self {
            Store::Dir(dir) => dir.root.display().to_string(),
            Store::Object(objects) => objects.url().to_string(),
        }
    }

    /// Keeps `bytes` as `kind`'s `name`, whole or not at all; refused when
    /// the kind already holds `max` entries (`None`: no count is kept).
    ///
    /// # Errors
    /// A bad name, the store full, or the write failed.
    pub async fn put(
        &self,
        kind: Kind,
        name: &str,
        bytes: Vec<u8>,
        max: Option<usize>,
    ) -> Result<(), String> {
        kind.check(name)?;
        if let Some(max) = max {
            let held = self.count(kind, max + 1).await?;
            if held >= max {
                return Err(format!(
                    "the store holds {held} {}, its most; no more are written",
                    kind.place()
                ));
            }
        }
        match self {
            Store::Dir(dir) => {
                let (dir, name) = (dir.clone(), name.to_string());
                blocking(move || dir.put(kind, &name, &bytes)).await
            }
            Store::Object(objects) => objects.put(kind, name, bytes).await,
        }
    }

    /// `kind`'s `name`, read within `max` bytes (one byte more is read to
    /// tell an oversized entry, never the rest); `None` if there is none.
    ///
    /// # Errors
    /// A bad name, or the read failed.
    pub async fn get(&self, kind: Kind, name: &str, max: u64) -> Result<Option<Vec<u8>>, String> {
        kind.check(name)?;
        match self {
            Store::Dir(dir) => {
                let (dir, name) = (dir.clone(), name.to_string());
                blocking(move || dir.get(kind, &name, max)).await
            }
            Store::Object(objects) => objects.get(kind, name, max).await,
        }
    }

    /// Removes `kind`'s `name` (gone already is fine).
    ///
    /// # Errors
    /// A bad name, or the removal failed.
    pub async fn delete(&self, kind: Kind, name: &str) -> Result<(), String> {
        kind.check(name)?;
        match self {
            Store::Dir(dir) => {
                let (dir, name) = (dir.clone(), name.to_string());
                blocking(move || dir.delete(kind, &name)).await
            }
            Store::Object(objects) => objects.delete(kind, name).await,
        }
    }

    /// How many entries of `kind` there are, counted up to `limit`.
    ///
    /// # Errors
    /// The listing failed.
    pub async fn count(&self, kind: Kind, limit: usize) -> Result<usize, String> {
        match self {
            Store::Dir(dir) => {
                let dir = dir.clone();
                blocking(move || Ok(dir.count(kind, limit))).await
            }
            Store::Object(objects) => Ok(objects.list(kind, limit).await?.len()),
        }
    }

    /// Up to `limit` entries of `kind` (well-formed names only).
    ///
    /// # Errors
    /// The listing failed.
    pub async fn list(&self, kind: Kind, limit: usize) -> Result<Vec<Listed>, String> {
        let limit = limit.min(MAX_LISTED);
        match self {
            Store::Dir(dir) => {
                let dir = dir.clone();
                blocking(move || dir.list(kind, limit)).await
            }
            Store::Object(objects) => objects.list(kind, limit).await,
        }
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| format!("the store's work failed: {err}"))?
}

/// A store in a directory: one file per entry under `<root>/<kind>/`,
/// directories 0700 and files 0600.
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
}

fn private_dir(dir: &Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))
}

impl DirStore {
    /// The store at `root`, created (0700) if missing.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(root: &Path) -> Result<DirStore, String> {
        private_dir(root)?;
        Ok(DirStore {
            root: root.to_path_buf(),
        })
    }

    fn path(&self, kind: Kind, name: &str) -> Result<PathBuf, String> {
        kind.check(name)?;
        Ok(self.root.join(kind.place()).join(name))
    }

    /// Keeps `bytes` as `name`: written to a temporary file, synced, then
    /// renamed into place, so a reader sees all of it or nothing.
    ///
    /// # Errors
    /// A bad name, or the write failed (nothing is left under `name`).
    pub fn put(&self, kind: Kind, name: &str, bytes: &[u8]) -> Result<(), String> {
        let path = self.path(kind, name)?;
        private_dir(&self.root.join(kind.place()))?;
        let tmp = self.root.join(kind.place()).join(format!(
            ".{name}.tmp-{}-{}",
            std::process::id(),
            rand::rng().random::<u32>()
        ));
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
            format!("cannot write {} {}: {err}", kind.place(), redact(name))
        })
    }

    /// `name`'s bytes within `max` (and one more to tell an oversized one).
    ///
    /// # Errors
    /// A bad name, or an I/O error.
    pub fn get(&self, kind: Kind, name: &str, max: u64) -> Result<Option<Vec<u8>>, String> {
        let path = self.path(kind, name)?;
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(format!("cannot read {}: {err}", redact(name))),
        };
        let mut bytes = Vec::new();
        file.take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|err| format!("cannot read {}: {err}", redact(name)))?;
        Ok(Some(bytes))
    }

    /// Removes `name` (gone already is fine).
    ///
    /// # Errors
    /// A bad name, or the removal failed.
    pub fn delete(&self, kind: Kind, name: &str) -> Result<(), String> {
        match std::fs::remove_file(self.path(kind, name)?) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(format!("cannot remove {}: {err}", redact(name))),
        }
    }

    /// Entries in `kind`'s place (names only, nothing looked up), up to `limit`.
    pub fn count(&self, kind: Kind, limit: usize) -> usize {
        std::fs::read_dir(self.root.join(kind.place()))
            .map_or(0, |entries| entries.take(limit).count())
    }

    /// Up to `limit` well-formed entries of `kind`.
    ///
    /// # Errors
    /// The directory cannot be read.
    pub fn list(&self, kind: Kind, limit: usize) -> Result<Vec<Listed>, String> {
        let dir = self.root.join(kind.place());
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(format!("cannot list {}: {err}", dir.display())),
        };
        Ok(entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                kind.check(&name).ok()?;
                let modified = entry.metadata().ok()?.modified().ok()?;
                Some(Listed { name, modified })
            })
            .take(limit)
            .collect())
    }
}
