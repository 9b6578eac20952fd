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

/// A fresh directory name for a runtime's files, unrelated to its id.
pub fn new_dir_name() -> String {
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(16)
        .map(char::from)
        .collect()
}

/// The loggable form of an id: its first characters only.
pub fn redact(id: &str) -> String {
    let shown: String = id.chars().take(7).collect();
    format!("{shown}…")
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
}
