//! A snapshot store in an object store (`s3://bucket/prefix`), through the
//! `object_store` crate, so that workers on several machines share their
//! snapshots and hibernated sessions. An entry is one PUT (S3 makes a
//! PUT visible whole or not at all); a read is counted as it streams in and
//! stops one byte past its cap; every request is bounded in time.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, ObjectStore, PutPayload};

use crate::names::{Kind, Listed, redact};

/// The longest one request to the object store may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest connecting to it may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An object store and the prefix its entries live under.
#[derive(Clone)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    url: String,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects").field("url", &self.url).finish()
    }
}

impl Objects {
    /// The store `url` names (`s3://bucket` or `s3://bucket/prefix`); its
    /// credentials, region and endpoint come from the `AWS_*` environment
    /// variables (`AWS_ENDPOINT_URL` and `AWS_ALLOW_HTTP` for an
    /// S3-compatible server).
    ///
    /// # Errors
    /// A malformed url, or a configuration the client refuses.
    pub fn open(url: &str) -> Result<Objects, String> {
        let parsed =
            url::Url::parse(url).map_err(|err| format!("snapshot_store `{url}`: {err}"))?;
        let bucket = parsed
            .host_str()
            .filter(|bucket| !bucket.is_empty())
            .ok_or_else(|| format!("snapshot_store `{url}` names no bucket"))?;
        // The environment's client settings (AWS_ALLOW_HTTP, …) stay; the
        // time bounds are ours.
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                format!("{}s", REQUEST_TIMEOUT.as_secs()),
            )
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                format!("{}s", CONNECT_TIMEOUT.as_secs()),
            )
            .build()
            .map_err(|err| format!("snapshot_store `{url}`: {err}"))?;
        let prefix = ObjectPath::from(parsed.path().trim_matches('/'));
        Ok(Objects {
            store: Arc::new(store),
            prefix,
            url: url.to_string(),
        })
    }

    /// Its url.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn place(&self, kind: Kind) -> ObjectPath {
        self.prefix.child(kind.place())
    }

    fn path(&self, kind: Kind, name: &str) -> ObjectPath {
        self.place(kind).child(name)
    }

    /// Keeps `bytes` as `name`, in one PUT.
    ///
    /// # Errors
    /// The request failed.
    pub async fn put(&self, kind: Kind, name: &str, bytes: Vec<u8>) -> Result<(), String> {
        self.store
            .put(&self.path(kind, name), PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|err| format!("cannot write {} {}: {err}", kind.place(), redact(name)))
    }

    /// `name`'s bytes within `max` (and one more to tell an oversized one).
    ///
    /// # Errors
    /// The request failed.
    pub async fn get(&self, kind: Kind, name: &str, max: u64) -> Result<Option<Vec<u8>>, String> {
        let failed = |err: object_store::Error| format!("cannot read {}: {err}", redact(name));
        let result = match self.store.get(&self.path(kind, name)).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(failed(err)),
        };
        let cap = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
        let mut bytes = Vec::new();
        let mut stream = result.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(failed)?;
            let room = cap - bytes.len();
            bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if bytes.len() >= cap {
                break;
            }
        }
        Ok(Some(bytes))
    }

    /// Removes `name` (gone already is fine).
    ///
    /// # Errors
    /// The request failed.
    pub async fn delete(&self, kind: Kind, name: &str) -> Result<(), String> {
        match self.store.delete(&self.path(kind, name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(err) => Err(format!("cannot remove {}: {err}", redact(name))),
        }
    }

    /// Up to `limit` well-formed entries of `kind`.
    ///
    /// # Errors
    /// The listing failed.
    pub async fn list(&self, kind: Kind, limit: usize) -> Result<Vec<Listed>, String> {
        let place = self.place(kind);
        let mut listing = self.store.list(Some(&place));
        let mut listed = Vec::new();
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|err| format!("cannot list {}: {err}", kind.place()))?;
            let Some(name) = meta.location.filename() else {
                continue;
            };
            if kind.check(name).is_err() {
                continue;
            }
            listed.push(Listed {
                name: name.to_string(),
                modified: meta.last_modified.into(),
            });
            if listed.len() >= limit {
                break;
            }
        }
        Ok(listed)
    }
}
