//! The worker's snapshot keys: the one new snapshots are signed with, and
//! older ones still accepted, so a key can rotate without losing sessions.
//!
//! Kept in `<data-dir>/snapshot-keys` (mode 0600, created with it), one key
//! a line as `<id hex> <secret hex>`, the signing key first. A worker that
//! finds no file makes one with a fresh key. Workers that share a store
//! share this file.

use std::io::Write;
use std::path::Path;

use rand::RngExt;

use crate::KEY_ID_BYTES;

/// Bytes of a key's secret.
const SECRET_BYTES: usize = 32;
/// The most keys one file may hold.
const MAX_KEYS: usize = 16;
/// The file's name in the data directory.
pub const KEYS_FILE: &str = "snapshot-keys";

/// One MAC key.
#[derive(Clone)]
pub struct Key {
    /// Its id, stored in each snapshot it signs.
    pub id: [u8; KEY_ID_BYTES],
    pub(crate) secret: [u8; SECRET_BYTES],
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("id", &show_id(&self.id))
            .finish_non_exhaustive()
    }
}

impl Key {
    /// A fresh random key.
    pub fn generate() -> Key {
        let mut rng = rand::rng();
        let mut id = [0u8; KEY_ID_BYTES];
        let mut secret = [0u8; SECRET_BYTES];
        rng.fill(&mut id);
        rng.fill(&mut secret);
        Key { id, secret }
    }
}

/// The keys a worker signs and checks with.
#[derive(Debug, Clone)]
pub struct Keys {
    keys: Vec<Key>,
}

impl Keys {
    /// Keys of one key (tests, a configured key).
    pub fn of(key: Key) -> Keys {
        Keys { keys: vec![key] }
    }

    /// The key new snapshots are signed with.
    pub fn signing(&self) -> &Key {
        &self.keys[0]
    }

    /// The key with id `id`, if held.
    pub fn find(&self, id: &[u8; KEY_ID_BYTES]) -> Option<&Key> {
        self.keys.iter().find(|key| &key.id == id)
    }

    /// Reads `<dir>/snapshot-keys`, or makes it with a fresh key (mode 0600).
    ///
    /// # Errors
    /// The file cannot be read or made, or a line is not a key.
    pub fn load_or_create(dir: &Path) -> Result<Keys, String> {
        Keys::load_or_create_at(&dir.join(KEYS_FILE))
    }

    /// The keys in the file `path` (several workers that share a store
    /// share it), created with one fresh key (mode 0600) if missing.
    ///
    /// # Errors
    /// The file cannot be read or written, or does not parse.
    pub fn load_or_create_at(path: &Path) -> Result<Keys, String> {
        let path = path.to_path_buf();
        match std::fs::read_to_string(&path) {
            Ok(text) => parse(&text).map_err(|why| format!("{}: {why}", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let key = Key::generate();
                let line = format!("{} {}\n", hex(&key.id), hex(&key.secret));
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                match options.open(&path) {
                    Ok(mut file) => {
                        file.write_all(line.as_bytes())
                            .and_then(|()| file.sync_all())
                            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
                        Ok(Keys::of(key))
                    }
                    // Another process made it first: use its.
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                        Keys::load_or_create_at(&path)
                    }
                    Err(err) => Err(format!("cannot create {}: {err}", path.display())),
                }
            }
            Err(err) => Err(format!("cannot read {}: {err}", path.display())),
        }
    }
}

fn parse(text: &str) -> Result<Keys, String> {
    let mut keys = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let mut parts = line.split_whitespace();
        let (Some(id), Some(secret), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("line {} is not `<id hex> <secret hex>`", n + 1));
        };
        let id = unhex::<KEY_ID_BYTES>(id).ok_or(format!(
            "line {}: the id is not {KEY_ID_BYTES} hex bytes",
            n + 1
        ))?;
        let secret = unhex::<SECRET_BYTES>(secret).ok_or(format!(
            "line {}: the secret is not {SECRET_BYTES} hex bytes",
            n + 1
        ))?;
        keys.push(Key { id, secret });
    }
    if keys.is_empty() || keys.len() > MAX_KEYS {
        return Err(format!("{} keys (1 to {MAX_KEYS})", keys.len()));
    }
    Ok(Keys { keys })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

/// A key id as messages show it (ids are not secret).
pub fn show_id(id: &[u8; KEY_ID_BYTES]) -> String {
    hex(id)
}
