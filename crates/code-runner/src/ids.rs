//! Runtime ids: capabilities, so unguessable and never logged in full.

use rand::RngExt;

/// Characters of an id after its `rt_` prefix: URL-safe, 62 symbols.
pub(crate) const SECRET_CHARS: usize = 32;

/// A fresh runtime id: `rt_` plus 32 alphanumerics (about 190 random bits).
/// On an engine shared by several workers, the minting worker's name goes
/// first (`rt_<worker>_<secret>`), so a call reaches the worker that holds it.
pub fn new_runtime_id(worker: Option<&str>) -> String {
    let body: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(SECRET_CHARS)
        .map(char::from)
        .collect();
    match worker {
        Some(worker) => format!("rt_{worker}_{body}"),
        None => format!("rt_{body}"),
    }
}

/// The worker that minted `runtime_id` (`rt_<worker>_<secret>`, the secret
/// being the last 32 characters), if it says: a standalone id has no worker.
pub fn minted_by(runtime_id: &str) -> Option<&str> {
    let body = runtime_id
        .strip_prefix("rt_")
        .or_else(|| runtime_id.strip_prefix("lk_"))?;
    let split = body.len().checked_sub(SECRET_CHARS + 1)?;
    let (worker, rest) = (body.get(..split)?, body.get(split..)?);
    (rest.starts_with('_') && !worker.is_empty()).then_some(worker)
}

/// A fresh link token (a run's linked files): `lk_` plus 32 alphanumerics,
/// the minting worker's name first on a shared engine (`lk_<worker>_<secret>`),
/// as a runtime id's. A capability: never logged in full.
pub fn new_link_token(worker: Option<&str>) -> String {
    let id = new_runtime_id(worker);
    format!("lk_{}", id.strip_prefix("rt_").unwrap_or(&id))
}

/// A fresh directory name for a runtime's files, unrelated to its id.
pub fn new_dir_name() -> String {
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(16)
        .map(char::from)
        .collect()
}

/// Random characters of a runtime's own namespace after its `rt-` prefix.
pub(crate) const NAMESPACE_CHARS: usize = 20;

/// A fresh namespace of a plain runtime's own (its `iii.namespace`): `rt-`
/// plus 20 lower-case alphanumerics (about 103 random bits), drawn apart
/// from the runtime's id. It is no capability (it shows in every function id
/// registered under it), so it needs only to be unguessable enough that no
/// one holds it first; lower case and a `-` keep it apart from a
/// `runtime_id` (`rt_`, mixed case) and from what cards mask as one.
pub fn new_namespace() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let body: String = (0..NAMESPACE_CHARS)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect();
    format!("rt-{body}")
}

/// The loggable form of an id: its first characters only.
pub fn redact(id: &str) -> String {
    let shown: String = id.chars().take(7).collect();
    format!("{shown}…")
}

/// An internal identity of one runtime the worker booted.
///
/// Unlike a `runtime_id` it is no capability: it never leaves the process
/// and a one-shot runtime has one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuntimeKey(pub(crate) u64);

impl RuntimeKey {
    /// The key numbered `n` (the lineage counts them up from zero).
    pub(crate) const fn new(n: u64) -> RuntimeKey {
        RuntimeKey(n)
    }

    /// A key no runtime has: the context of a pooled runtime's warm-up
    /// turn, whose bindings are never called.
    pub(crate) const PLACEHOLDER: RuntimeKey = RuntimeKey(u64::MAX);

    /// The key that stands for tree `tree` of another worker `worker` (a
    /// guest there called this worker through the engine): what that
    /// guest's calls start here is charged to it. Local keys count up from
    /// zero; these have the top bit set.
    pub(crate) fn remote_tree(worker: &str, tree: &str) -> RuntimeKey {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut hasher = DefaultHasher::new();
        (worker, tree).hash(&mut hasher);
        RuntimeKey((hasher.finish() >> 1 | 1 << 63).min(u64::MAX - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids are long, URL-safe and distinct; the redacted form hides the secret part.
    #[test]
    fn ids_are_unguessable_and_redacted() {
        let a = new_runtime_id(None);
        let b = new_runtime_id(None);
        assert_ne!(a, b);
        assert_eq!(a.len(), 35);
        assert!(a[3..].chars().all(|c| c.is_ascii_alphanumeric()));
        let shown = redact(&a);
        assert!(shown.len() < 12 && !shown.contains(&a[7..]));
        let scoped = new_runtime_id(Some("box1"));
        assert!(scoped.starts_with("rt_box1_") && scoped.len() == 35 + 5);
    }

    /// A runtime's own namespace passes the naming rule, is not reserved,
    /// and is fresh each time.
    #[test]
    fn own_namespaces_are_valid_and_distinct() {
        let a = new_namespace();
        assert_ne!(a, new_namespace());
        assert_eq!(a.len(), 3 + NAMESPACE_CHARS);
        assert!(a.starts_with("rt-"));
        assert!(
            a[3..]
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        crate::bus::naming::check_namespace(&a).unwrap();
        crate::bus::naming::FunctionId::parse(&format!("{a}::ping")).unwrap();
    }
}
