//! What a snapshot of a session is as bytes, and where it is kept (issue 47).
//!
//! A snapshot is read back from storage no one has to trust (a directory
//! other processes can write, an object store several workers share), so
//! this crate decides one thing: a snapshot is only ever decoded after it
//! is known to be whole, ours and within bounds.
//!
//! ```text
//! magic "CRSNAP" 0x00 0x01 │ key id (16 bytes) │ header length (u32 LE) │ header (JSON)
//! │ section bytes (zstd, in the header's order) │ HMAC-SHA256 (32 bytes) over all before it
//! ```
//!
//! [`open`] checks, in this order and before anything is parsed or
//! decompressed: the size against the caller's cap, the magic, the key id
//! (a key this worker holds), the MAC over every byte (constant-time); only
//! then the header (authenticated JSON, bounded), its format version, its
//! engine and image (a snapshot of another image is refused), and every
//! section's sizes (compressed lengths must add up to the body, raw lengths
//! within the cap); each section then decompresses into exactly its raw
//! length. Every refusal is its own [`SnapshotError`].
//!
//! [`keys`] holds the worker's MAC keys (generated once into the data
//! directory, mode 0600, each with an id so keys can rotate); [`store`]
//! keeps snapshots under unguessable ids and hibernated sessions under the
//! hash of their runtime's id, written whole or not at all, in a directory
//! or ([`objects`]) an object store several workers share.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

pub mod keys;
pub mod names;
pub mod objects;
pub mod store;

pub use keys::{Key, Keys};
pub use store::{DirStore, Kind, Listed, Store, new_snapshot_id, redact, session_name};

/// The first bytes of every snapshot: a name and the format's version.
pub const MAGIC: [u8; 8] = *b"CRSNAP\x00\x01";
/// The format version [`open`] reads.
pub const FORMAT: u32 = 1;
/// Bytes of a key id.
pub const KEY_ID_BYTES: usize = 16;
/// Bytes of the MAC.
const MAC_BYTES: usize = 32;
/// The longest header read (it is JSON, parsed only once authenticated).
pub const MAX_HEADER_BYTES: usize = 64 << 10;
/// The most sections one snapshot has.
pub const MAX_SECTIONS: usize = 64;
const PREFIX: usize = MAGIC.len() + KEY_ID_BYTES + 4;

/// Why a snapshot was refused. Each is its own, so a caller can say which.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    /// Fewer bytes than any snapshot has, or fewer than its header says.
    #[error("the snapshot is truncated: {0}")]
    Truncated(String),
    /// More bytes than the cap.
    #[error("the snapshot is {size} bytes, over the {cap}-byte cap (max_snapshot_mb)")]
    Oversized {
        /// Its size.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// Not a code-runner snapshot, or one of a format this worker does not read.
    #[error("not a code-runner snapshot of a format this worker reads: {0}")]
    NotASnapshot(String),
    /// Signed with a key this worker does not hold.
    #[error("the snapshot was made with a key this worker does not hold (key {0})")]
    UnknownKey(String),
    /// The MAC does not match: changed, or forged.
    #[error("the snapshot's MAC does not match: it was changed or forged")]
    Forged,
    /// A snapshot of another engine or image.
    #[error("the snapshot is of another image: {0}")]
    OtherImage(String),
    /// Authenticated, but its sizes do not add up (a bug in its maker).
    #[error("the snapshot is damaged: {0}")]
    Damaged(String),
}

/// What a snapshot says about itself, authenticated with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// The format version ([`FORMAT`]).
    pub format: u32,
    /// The engine whose state it holds (`python-data`, `node-ledger`).
    pub engine: String,
    /// The exact image the state belongs to, and the engine build's
    /// compatibility hash: state is only ever loaded into that image.
    pub image: String,
    /// When it was made, in Unix seconds.
    pub created_at: u64,
    /// Its sections, in order.
    pub sections: Vec<SectionInfo>,
}

/// One section's name and sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SectionInfo {
    /// What it holds (`pages`, `globals`, `work`, `clock`, …).
    pub name: String,
    /// Its bytes as stored (zstd).
    pub stored: u64,
    /// Its bytes once decompressed.
    pub raw: u64,
}

/// A snapshot's contents: its engine, its image and its sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// The engine whose state it holds.
    pub engine: String,
    /// The image the state belongs to.
    pub image: String,
    /// When it was made, in Unix seconds.
    pub created_at: u64,
    /// Named sections, in order.
    pub sections: Vec<(String, Vec<u8>)>,
}

/// What [`open`] holds a snapshot to.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The most bytes a stored snapshot may have.
    pub max_stored: u64,
    /// The most bytes its sections may hold once decompressed, together.
    pub max_raw: u64,
}

/// Encodes `contents`, signed with `key`.
///
/// # Errors
/// [`SnapshotError::Damaged`] when a section cannot be compressed or there
/// are more than [`MAX_SECTIONS`].
pub fn seal(contents: &Contents, key: &Key) -> Result<Vec<u8>, SnapshotError> {
    if contents.sections.len() > MAX_SECTIONS {
        return Err(SnapshotError::Damaged(format!(
            "{} sections (at most {MAX_SECTIONS})",
            contents.sections.len()
        )));
    }
    let mut body = Vec::new();
    let mut sections = Vec::new();
    for (name, raw) in &contents.sections {
        let stored = zstd::bulk::compress(raw, 3)
            .map_err(|err| SnapshotError::Damaged(format!("compressing {name}: {err}")))?;
        sections.push(SectionInfo {
            name: name.clone(),
            stored: stored.len() as u64,
            raw: raw.len() as u64,
        });
        body.extend_from_slice(&stored);
    }
    let header = Header {
        format: FORMAT,
        engine: contents.engine.clone(),
        image: contents.image.clone(),
        created_at: contents.created_at,
        sections,
    };
    let header =
        serde_json::to_vec(&header).map_err(|err| SnapshotError::Damaged(err.to_string()))?;
    if header.len() > MAX_HEADER_BYTES {
        return Err(SnapshotError::Damaged("the header is too long".into()));
    }
    let mut out = Vec::with_capacity(PREFIX + header.len() + body.len() + MAC_BYTES);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&key.id);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&body);
    let mac = key.mac().chain_update(&out).finalize().into_bytes();
    out.extend_from_slice(&mac);
    Ok(out)
}

/// Checks `bytes` as far as their header (size, magic, key, MAC, the
/// header itself) and answers it and the body after it.
fn authenticated<'b>(
    bytes: &'b [u8],
    keys: &Keys,
    bounds: Bounds,
) -> Result<(Header, &'b [u8]), SnapshotError> {
    let size = bytes.len() as u64;
    if size > bounds.max_stored {
        return Err(SnapshotError::Oversized {
            size,
            cap: bounds.max_stored,
        });
    }
    if bytes.len() < PREFIX + MAC_BYTES {
        return Err(SnapshotError::Truncated(format!("{size} bytes")));
    }
    if bytes[..MAGIC.len()] != MAGIC {
        let named = bytes.starts_with(b"CRSNAP");
        return Err(SnapshotError::NotASnapshot(match named {
            true => "a format version this worker does not read".into(),
            false => "its first bytes are not a snapshot's".into(),
        }));
    }
    let id: [u8; KEY_ID_BYTES] = bytes[MAGIC.len()..MAGIC.len() + KEY_ID_BYTES]
        .try_into()
        .map_err(|_| SnapshotError::Truncated("no key id".into()))?;
    let key = keys
        .find(&id)
        .ok_or_else(|| SnapshotError::UnknownKey(keys::show_id(&id)))?;
    let (signed, mac) = bytes.split_at(bytes.len() - MAC_BYTES);
    key.mac()
        .chain_update(signed)
        .verify_slice(mac)
        .map_err(|_| SnapshotError::Forged)?;
    // Authenticated from here on: what follows was written by a holder of the key.
    let header_len = u32::from_le_bytes(
        signed[MAGIC.len() + KEY_ID_BYTES..PREFIX]
            .try_into()
            .map_err(|_| SnapshotError::Truncated("no header length".into()))?,
    ) as usize;
    if header_len > MAX_HEADER_BYTES || PREFIX + header_len > signed.len() {
        return Err(SnapshotError::Damaged(format!(
            "a header of {header_len} bytes"
        )));
    }
    let header: Header = serde_json::from_slice(&signed[PREFIX..PREFIX + header_len])
        .map_err(|err| SnapshotError::Damaged(format!("its header: {err}")))?;
    if header.format != FORMAT {
        return Err(SnapshotError::NotASnapshot(format!(
            "format {}",
            header.format
        )));
    }
    Ok((header, &signed[PREFIX + header_len..]))
}

/// The header of `bytes`, once they are whole, within `bounds` and ours
/// (their MAC checked, as [`open`] checks it): which engine a caller
/// should open them for.
///
/// # Errors
/// The [`SnapshotError`] of the first check that fails.
pub fn header_of(bytes: &[u8], keys: &Keys, bounds: Bounds) -> Result<Header, SnapshotError> {
    authenticated(bytes, keys, bounds).map(|(header, _)| header)
}

/// Decodes a snapshot of `engine` for `image`, checking it first (see the
/// crate's documentation for the order).
///
/// # Errors
/// The [`SnapshotError`] of the first check that fails.
pub fn open(
    bytes: &[u8],
    keys: &Keys,
    engine: &str,
    image: &str,
    bounds: Bounds,
) -> Result<Contents, SnapshotError> {
    let (header, body) = authenticated(bytes, keys, bounds)?;
    if header.engine != engine || header.image != image {
        return Err(SnapshotError::OtherImage(format!(
            "it holds {} state for image {}, this worker runs {engine} image {image}",
            header.engine, header.image
        )));
    }
    if header.sections.len() > MAX_SECTIONS {
        return Err(SnapshotError::Damaged(format!(
            "{} sections",
            header.sections.len()
        )));
    }
    let stored: u64 = header.sections.iter().map(|s| s.stored).sum();
    let raw: u64 = header.sections.iter().map(|s| s.raw).sum();
    if stored != body.len() as u64 {
        return Err(SnapshotError::Damaged(format!(
            "its sections say {stored} bytes, the body has {}",
            body.len()
        )));
    }
    if raw > bounds.max_raw {
        return Err(SnapshotError::Oversized {
            size: raw,
            cap: bounds.max_raw,
        });
    }
    let mut sections = Vec::with_capacity(header.sections.len());
    let mut at = 0usize;
    for section in &header.sections {
        let end = at + section.stored as usize;
        let capacity = section.raw as usize;
        let data = zstd::bulk::decompress(&body[at..end], capacity)
            .map_err(|err| SnapshotError::Damaged(format!("section {}: {err}", section.name)))?;
        if data.len() != capacity {
            return Err(SnapshotError::Damaged(format!(
                "section {} holds {} bytes, its header says {capacity}",
                section.name,
                data.len()
            )));
        }
        sections.push((section.name.clone(), data));
        at = end;
    }
    Ok(Contents {
        engine: header.engine,
        image: header.image,
        created_at: header.created_at,
        sections,
    })
}

impl Key {
    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length; ours are 32 bytes.
        <Hmac<Sha256> as Mac>::new_from_slice(&self.secret).unwrap_or_else(|_| unreachable!())
    }
}

#[cfg(test)]
mod tests;
