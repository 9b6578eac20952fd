//! `code-runner run --out DIR`: collected files written under a local
//! directory, safely. A path from the answer is checked again here with
//! the worker's own rule (the worker that answered may be remote):
//! relative, no `..`, NUL or empty component, bounded lengths
//! ([`normalise`]). Files are written by descriptor from `DIR`, each
//! component opened with `O_NOFOLLOW` ([`beneath`]), so a symlink anywhere
//! on the way, or in a file's place, is refused and never followed.
//! Directories made are 0700, files 0600. An existing file is refused
//! unless `--overwrite` (all are checked before any is written).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use base64::Engine;
use code_runner_core::files::{beneath, normalise};
use serde_json::Value;

/// One file written: its local path and size.
#[derive(Debug)]
pub struct Written {
    /// Where it went.
    pub path: PathBuf,
    /// Its bytes.
    pub size: usize,
}

/// Writes the answer's `files` under `out`, the omission marker left out.
///
/// # Errors
/// A path that fails the checks, a symlink on the way, an existing file
/// without `overwrite`, bad base64, or an I/O error; each names the path.
pub fn write_files(answer: &Value, out: &Path, overwrite: bool) -> anyhow::Result<Vec<Written>> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let out =
        std::fs::canonicalize(out).with_context(|| format!("cannot open {}", out.display()))?;
    let root =
        beneath::open_root(&out).with_context(|| format!("cannot open {}", out.display()))?;
    let mut planned = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for file in answer
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |name: &str| file.get(name).and_then(Value::as_str).unwrap_or_default();
        if field("path").is_empty() {
            continue; // the omission marker
        }
        let path = normalise(field("path")).map_err(|err| anyhow::anyhow!(err.message))?;
        let at = out.join(&path);
        // One answer, one file per path: a second would overwrite the
        // first without --overwrite (nothing is written).
        if !seen.insert(path.clone()) {
            bail!(
                "the answer lists `{path}` twice; nothing was written ({} is where it would go)",
                at.display()
            );
        }
        match beneath::file_size(&root, &path) {
            Ok(None) => {}
            Ok(Some(_)) if overwrite => {}
            Ok(Some(_)) => bail!("{}: exists (pass --overwrite to replace it)", at.display()),
            Err(err) => bail!(
                "{}: cannot be written ({err}; a symlink is not followed)",
                at.display()
            ),
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(field("base64"))
            .with_context(|| format!("collected file `{path}`: bad base64"))?;
        planned.push((path, at, bytes));
    }
    let mut written = Vec::new();
    for (path, at, bytes) in planned {
        beneath::write_file(&root, &path, &bytes).with_context(|| {
            format!("cannot write {} (a symlink is not followed)", at.display())
        })?;
        written.push(Written {
            path: at,
            size: bytes.len(),
        });
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(path: &str) -> Value {
        json!({"files": [{"path": path, "mime_type": "text/plain", "size": 2, "base64": "aGk="}]})
    }

    /// Absolute paths, `..`, empty components and NUL are refused, and
    /// nothing is written.
    #[test]
    fn unsafe_paths_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("out");
        for bad in ["/etc/x", "../x", "a/../../x", "a//b", "a\0b", "x/"] {
            assert!(write_files(&answer(bad), &out, true).is_err(), "{bad:?}");
        }
        assert_eq!(
            std::fs::read_dir(root.path()).unwrap().count(),
            1,
            "only out"
        );
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    }

    /// Nothing is written through a symlink, in a directory or as the file;
    /// an existing file needs `overwrite`.
    #[test]
    fn symlinks_are_not_followed_and_files_not_replaced_unasked() {
        let root = tempfile::tempdir().unwrap();
        let (out, outside) = (root.path().join("out"), root.path().join("outside"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, out.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), out.join("f")).unwrap();
        assert!(write_files(&answer("link/x"), &out, true).is_err());
        assert!(write_files(&answer("f"), &out, true).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

        let written = write_files(&answer("a/b/c.txt"), &out, false).unwrap();
        let real = std::fs::canonicalize(&out).unwrap();
        assert_eq!(written[0].path, real.join("a/b/c.txt"));
        assert_eq!(std::fs::read(out.join("a/b/c.txt")).unwrap(), b"hi");
        assert!(write_files(&answer("a/b/c.txt"), &out, false).is_err());
        assert!(write_files(&answer("a/b/c.txt"), &out, true).is_ok());
    }
}
