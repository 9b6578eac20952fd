//! The names a store's entries go by, and their kinds: snapshot ids
//! (capabilities), session names (the hash of a runtime id, never the id)
//! and holder records. Nothing but a well-formed name ever names an entry.

use std::time::SystemTime;

use rand::RngExt;
use sha2::{Digest, Sha256};

/// The most snapshots one store keeps; past it `put` is refused.
pub const MAX_SNAPSHOTS: usize = 10_000;
/// The most entries of one kind a listing reads.
pub const MAX_LISTED: usize = 100_000;
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

/// Whether `id` is of the form [`new_snapshot_id`] makes.
pub fn is_snapshot_id(id: &str) -> bool {
    id.strip_prefix("sn_").is_some_and(|body| {
        body.len() == SECRET_CHARS && body.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// The name a hibernated runtime's session is kept under: the SHA-256 of
/// its `runtime_id`, in hex (the id itself is never written down).
pub fn session_name(runtime_id: &str) -> String {
    Sha256::digest(runtime_id.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn is_session_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// An id as logs and cards show it: its first characters only.
pub fn redact(id: &str) -> String {
    let shown: String = id.chars().take(7).collect();
    format!("{shown}…")
}

/// The kinds of entry a store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A snapshot `code-runner::snapshot` took, under its `sn_` id.
    Snapshot,
    /// A hibernated runtime, under [`session_name`] of its id.
    Session,
    /// The worker now holding a session woken elsewhere, under its session name.
    Holder,
}

impl Kind {
    /// The place (directory or key prefix) entries of this kind live in.
    pub fn place(self) -> &'static str {
        match self {
            Kind::Snapshot => "snapshots",
            Kind::Session => "sessions",
            Kind::Holder => "holders",
        }
    }

    /// Checks `name` is of this kind's form (nothing else ever names an entry).
    ///
    /// # Errors
    /// It is not.
    pub fn check(self, name: &str) -> Result<(), String> {
        let ok = match self {
            Kind::Snapshot => is_snapshot_id(name),
            Kind::Session | Kind::Holder => is_session_name(name),
        };
        match ok {
            true => Ok(()),
            false => Err(format!("{} is not a snapshot id", redact(name))),
        }
    }
}

/// A listed entry: its name and when it was last written.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its name.
    pub name: String,
    /// When it was written.
    pub modified: SystemTime,
}
