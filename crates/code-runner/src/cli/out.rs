//! `code-runner run --out DIR`: collected files written under a local
//! directory, safely. A path from the answer is checked again here (the
//! worker that answered may be remote): relative, `/`-separated, no empty,
//! `.` or `..` component, no NUL or `\`. Each directory on the way is
//! created or must be a real directory (a symlink there is refused, so
//! nothing is written through one), and the file is created with
//! `O_CREAT | O_EXCL`, which never follows a symlink. An existing file is
//! refused unless `--overwrite` (all are checked before any is written); a
//! symlink in its place is refused always.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use base64::Engine;
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
    let files = answer.get("files").and_then(Value::as_array);
    // Every path is checked, and every existing file refused, before any is written.
    for file in files.into_iter().flatten() {
        let path = file.get("path").and_then(Value::as_str).unwrap_or_default();
        if !path.is_empty() {
            checked_components(path)?;
            let at = out.join(path);
            if !overwrite && std::fs::symlink_metadata(&at).is_ok() {
                bail!("{}: exists (pass --overwrite to replace it)", at.display());
            }
        }
    }
    let mut written = Vec::new();
    for file in files.into_iter().flatten() {
        let field = |name: &str| file.get(name).and_then(Value::as_str).unwrap_or_default();
        if field("path").is_empty() {
            continue; // the omission marker
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(field("base64"))
            .with_context(|| format!("collected file `{}`: bad base64", field("path")))?;
        let path = write_one(out, field("path"), &bytes, overwrite)?;
        written.push(Written {
            path,
            size: bytes.len(),
        });
    }
    Ok(written)
}

/// The components of a collected file's `path`, if it is safe to join.
pub fn checked_components(path: &str) -> anyhow::Result<Vec<&str>> {
    if path.starts_with('/') || path.contains(['\0', '\\']) {
        bail!("collected file `{path}`: not a relative path");
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.iter().any(|part| matches!(*part, "" | "." | "..")) {
        bail!("collected file `{path}`: an empty, `.` or `..` component");
    }
    Ok(parts)
}

fn write_one(out: &Path, path: &str, bytes: &[u8], overwrite: bool) -> anyhow::Result<PathBuf> {
    let parts = checked_components(path)?;
    let Some((name, dirs)) = parts.split_last() else {
        bail!("collected file `{path}`: empty");
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut at = out.to_path_buf();
    for dir in dirs {
        at.push(dir);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => bail!(
                "{}: not a directory (a symlink is not followed)",
                at.display()
            ),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&at)
                .with_context(|| format!("cannot create {}", at.display()))?,
            Err(err) => return Err(err).with_context(|| format!("cannot read {}", at.display())),
        }
    }
    at.push(name);
    if let Ok(meta) = std::fs::symlink_metadata(&at) {
        if !meta.is_file() {
            bail!(
                "{}: exists and is not a file (a symlink is not followed)",
                at.display()
            );
        }
        if !overwrite {
            bail!("{}: exists (pass --overwrite to replace it)", at.display());
        }
        std::fs::remove_file(&at).with_context(|| format!("cannot replace {}", at.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&at)
        .with_context(|| format!("cannot create {}", at.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("cannot write {}", at.display()))?;
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(path: &str) -> Value {
        json!({"files": [{"path": path, "mime_type": "text/plain", "size": 2, "base64": "aGk="}]})
    }

    /// Absolute paths, `..`, `.`, empty components, NUL and `\` are refused.
    #[test]
    fn unsafe_paths_are_refused() {
        for bad in [
            "/etc/x",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a\0b",
            "a\\..\\b",
            "",
        ] {
            assert!(checked_components(bad).is_err(), "{bad:?}");
        }
        assert_eq!(checked_components("out/r.csv").unwrap(), ["out", "r.csv"]);
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
        assert_eq!(written[0].path, out.join("a/b/c.txt"));
        assert_eq!(std::fs::read(out.join("a/b/c.txt")).unwrap(), b"hi");
        assert!(write_files(&answer("a/b/c.txt"), &out, false).is_err());
        assert!(write_files(&answer("a/b/c.txt"), &out, true).is_ok());
    }
}
