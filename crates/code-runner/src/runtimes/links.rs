//! Linked files (`collect_mode: "link"`): the bytes of a run's collected
//! files, kept so that a client reads them by `uri` instead of carrying
//! them in the answer (a model's context). This decides how long a link
//! lives and how much the store holds:
//!
//! - a run's files are one *set* under one unguessable token
//!   (`code-runner://files/<token>/<path>`): the token is a capability, as
//!   a `runtime_id` is, so whoever holds the uri reads the file;
//! - a set made on a kept runtime lives while the runtime does (its end
//!   forgets it); a one-shot's lives for the idle TTL since it was made or
//!   last read;
//! - the store holds at most [`STORE_BYTES`]; a new set pushes out the
//!   least recently used ones, and a read of a link that expired or was
//!   pushed out says which, and what to do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_runner_core::files::Collected;
use code_runner_core::{ErrorCode, RunnerError};

use crate::ids::RuntimeKey;

/// The scheme and authority of a linked file's uri.
pub const LINK_PREFIX: &str = "code-runner://files/";

/// The most bytes the store holds, in all sets.
pub const STORE_BYTES: usize = 128 << 20;

/// What one file's entry costs the store beyond its bytes and path.
const ENTRY_BYTES: usize = 128;

/// The most sets remembered as pushed out (to say so when one is read).
const GONE_REMEMBERED: usize = 4096;

/// One linked file.
#[derive(Debug)]
pub struct Linked {
    pub path: String,
    pub mime_type: &'static str,
    pub bytes: Arc<[u8]>,
}

struct Set {
    files: HashMap<String, Linked>,
    bytes: usize,
    /// The kept runtime it lives with, if any.
    owner: Option<RuntimeKey>,
    /// Its last use (made or read).
    used: Instant,
}

#[derive(Default)]
struct State {
    sets: HashMap<String, Set>,
    bytes: usize,
    /// Tokens of sets that left the store, and why (bounded).
    gone: HashMap<String, &'static str>,
}

/// The store of linked files.
#[derive(Default)]
pub struct Links {
    state: Mutex<State>,
}

impl Links {
    /// Keeps `files` as one set under `token`, living with the kept runtime
    /// `owner` or, without one, for `ttl` since its last use. Older sets are
    /// pushed out to make room; a set larger than the whole store is not
    /// kept (the caller's answer says so).
    ///
    /// # Errors
    /// `resource_exhausted` when the files alone are larger than the store.
    pub fn keep(
        &self,
        token: &str,
        files: Vec<Collected>,
        owner: Option<RuntimeKey>,
        ttl: Duration,
    ) -> Result<(), RunnerError> {
        // What the set costs the store: its bytes and, per file, a little
        // for its path and entry, so that many empty files count too.
        let bytes: usize = files
            .iter()
            .map(|file| file.bytes.len() + file.path.len() + ENTRY_BYTES)
            .sum();
        if bytes > STORE_BYTES {
            return Err(RunnerError::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "the linked files hold {bytes} bytes, more than the {} MiB the store keeps",
                    STORE_BYTES >> 20
                ),
            ));
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.expire(ttl);
        while state.bytes + bytes > STORE_BYTES {
            if !state.push_out_oldest() {
                break;
            }
        }
        let files = files
            .into_iter()
            .map(|file| {
                let linked = Linked {
                    path: file.path.clone(),
                    mime_type: file.mime_type,
                    bytes: file.bytes.into(),
                };
                (file.path, linked)
            })
            .collect();
        state.bytes += bytes;
        state.sets.insert(
            token.to_string(),
            Set {
                files,
                bytes,
                owner,
                used: Instant::now(),
            },
        );
        Ok(())
    }

    /// The file `uri` names, if its set still lives (its use refreshed).
    ///
    /// # Errors
    /// `invalid_request` for a uri that is not a linked file's;
    /// `runtime_not_found` for one that is not known, expired or was pushed
    /// out (the message says which, and that a new run with `collect`
    /// makes a new link).
    pub fn read(&self, uri: &str, ttl: Duration) -> Result<Linked, RunnerError> {
        let (token, path) = parse(uri)?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.expire(ttl);
        let gone = |why: &str| {
            RunnerError::new(
                ErrorCode::RuntimeNotFound,
                format!(
                    "{}: {why}; run the code again with `collect` to make a new link (or collect_mode \"inline\" for the bytes in the answer)",
                    shown(uri)
                ),
            )
        };
        if let Some(why) = state.gone.get(token) {
            return Err(gone(why));
        }
        let Some(set) = state.sets.get_mut(token) else {
            return Err(gone("no such linked file"));
        };
        set.used = Instant::now();
        let file = set
            .files
            .get(&path)
            .ok_or_else(|| gone("no such linked file"))?;
        Ok(Linked {
            path: file.path.clone(),
            mime_type: file.mime_type,
            bytes: file.bytes.clone(),
        })
    }

    /// Forgets the sets made on the kept runtime `owner` (it ended).
    pub fn forget(&self, owner: RuntimeKey) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let tokens: Vec<String> = state
            .sets
            .iter()
            .filter(|(_, set)| set.owner == Some(owner))
            .map(|(token, _)| token.clone())
            .collect();
        for token in tokens {
            state.remove(&token, "its runtime has ended");
        }
    }

    /// The sets made on the kept runtime `owner` outlive it (it hibernated):
    /// from now on each lives for the idle TTL since its last use.
    pub fn release(&self, owner: RuntimeKey) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for set in state.sets.values_mut() {
            if set.owner == Some(owner) {
                set.owner = None;
                set.used = Instant::now();
            }
        }
    }

    /// Bytes held now, and sets.
    pub fn held(&self) -> (usize, usize) {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (state.bytes, state.sets.len())
    }
}

impl State {
    fn remove(&mut self, token: &str, why: &'static str) {
        if let Some(set) = self.sets.remove(token) {
            self.bytes -= set.bytes;
            if self.gone.len() >= GONE_REMEMBERED {
                self.gone.clear();
            }
            self.gone.insert(token.to_string(), why);
        }
    }

    /// Removes the one-shot sets unused for `ttl`.
    fn expire(&mut self, ttl: Duration) {
        let now = Instant::now();
        let old: Vec<String> = self
            .sets
            .iter()
            .filter(|(_, set)| set.owner.is_none() && now.duration_since(set.used) > ttl)
            .map(|(token, _)| token.clone())
            .collect();
        for token in old {
            self.remove(&token, "it expired (unread for the idle TTL)");
        }
    }

    /// Pushes out the least recently used set; false when there is none.
    fn push_out_oldest(&mut self) -> bool {
        let oldest = self
            .sets
            .iter()
            .min_by_key(|(_, set)| set.used)
            .map(|(token, _)| token.clone());
        match oldest {
            Some(token) => {
                self.remove(
                    &token,
                    "it was pushed out of the linked-file store by newer files (it keeps 128 MiB)",
                );
                true
            }
            None => false,
        }
    }
}

/// The uri of `path` in the set `token`: each path byte outside the
/// unreserved set percent-encoded, `/` kept.
pub fn uri(token: &str, path: &str) -> String {
    let mut uri = format!("{LINK_PREFIX}{token}/");
    push_path(&mut uri, path);
    uri
}

/// Appends `path` to `uri`, each byte outside the unreserved set
/// percent-encoded, `/` kept.
pub fn push_path(uri: &mut String, path: &str) {
    for byte in path.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(char::from(byte));
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
}

/// The token and the (decoded) path of a linked file's `uri`.
///
/// # Errors
/// `invalid_request` naming what is wrong.
pub fn parse(uri: &str) -> Result<(&str, String), RunnerError> {
    let invalid = |why: &str| {
        RunnerError::invalid(format!(
            "uri: {why}; a linked file's uri looks like {LINK_PREFIX}lk_…/out/report.csv"
        ))
    };
    if uri.len() > 8192 {
        return Err(invalid("longer than 8 KiB"));
    }
    let rest = uri
        .strip_prefix(LINK_PREFIX)
        .ok_or_else(|| invalid("not a code-runner://files/ uri"))?;
    let (token, encoded) = rest
        .split_once('/')
        .ok_or_else(|| invalid("it names no file"))?;
    if !token.starts_with("lk_") || encoded.is_empty() {
        return Err(invalid("it names no link"));
    }
    let mut bytes = Vec::with_capacity(encoded.len());
    let raw = encoded.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let hex = raw
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| invalid("a bad percent escape"))?;
            bytes.push(hex);
            i += 3;
        } else {
            bytes.push(raw[i]);
            i += 1;
        }
    }
    let path = String::from_utf8(bytes).map_err(|_| invalid("its path is not UTF-8"))?;
    Ok((token, path))
}

/// A uri as it may be shown: its token cut.
fn shown(uri: &str) -> String {
    match parse(uri) {
        Ok((token, path)) => format!("{LINK_PREFIX}{}/{path}", crate::ids::redact(token)),
        Err(_) => "the uri".into(),
    }
}

#[cfg(test)]
mod tests;
