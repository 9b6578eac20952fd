//! The rules every file path of a run follows, and the wire's files decoded.
//!
//! A path is relative to the runtime's root (python's `/work`, node's
//! `iii.files` directory) and normalised before it is checked: `.`
//! components are dropped (`a/./b` is `a/b`); an empty one (`a//b`) is refused.

use base64::Engine as _;

use crate::error::RunnerError;
use crate::wire::FileInput;

/// The longest path, in bytes, once normalised (4 × `NAME_MAX`).
pub const MAX_PATH_BYTES: usize = 1024;
/// The longest component of a path, in bytes (`NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;
/// The most files one request may carry.
pub const MAX_INPUT_FILES: usize = 256;

/// One file to write before a run: a normalised path and its bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputFile {
    /// Normalised, checked, relative (`data/in.csv`).
    pub path: String,
    /// The content.
    pub bytes: Vec<u8>,
}

/// `path` normalised (`.` components dropped) and checked: relative, no
/// `..`, no NUL, no empty component, each component at most
/// [`MAX_COMPONENT_BYTES`], the whole at most [`MAX_PATH_BYTES`].
///
/// # Errors
/// `code-runner::invalid_request` naming the path (shortened) and the rule.
pub fn normalise(path: &str) -> Result<String, RunnerError> {
    let refuse = |rule: &str| Err(invalid(path, rule));
    if path.is_empty() {
        return refuse("a path cannot be empty");
    }
    if path.starts_with('/') {
        return refuse("a path is relative to the runtime's root, not absolute");
    }
    if path.contains('\0') {
        return refuse("a path cannot contain NUL");
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "." => {}
            "" => return refuse("a path cannot have an empty component (`//` or a trailing `/`)"),
            ".." => return refuse("a path cannot contain `..`"),
            _ if part.len() > MAX_COMPONENT_BYTES => {
                return refuse(&format!(
                    "a path component is at most {MAX_COMPONENT_BYTES} bytes, one is {}",
                    part.len()
                ));
            }
            _ => parts.push(part),
        }
    }
    if parts.is_empty() {
        return refuse("a path must name a file, not the root");
    }
    let normal = parts.join("/");
    if normal.len() > MAX_PATH_BYTES {
        return refuse(&format!(
            "a path is at most {MAX_PATH_BYTES} bytes, this one is {}",
            normal.len()
        ));
    }
    Ok(normal)
}

/// The wire's files checked and decoded, in order: each path normalised,
/// exactly one of `text`/`base64`, base64 that decodes, no two files at one
/// path and no file where another's directory is, at most [`MAX_INPUT_FILES`].
///
/// # Errors
/// `code-runner::invalid_request` naming the path and the rule.
pub fn decode_inputs(files: Vec<FileInput>) -> Result<Vec<InputFile>, RunnerError> {
    if files.len() > MAX_INPUT_FILES {
        return Err(RunnerError::invalid(format!(
            "files: at most {MAX_INPUT_FILES} files per request, this one has {}",
            files.len()
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(files.len());
    for file in files {
        let path = normalise(&file.path)?;
        let bytes = match (file.text, file.base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded.as_bytes())
                .map_err(|err| invalid(&file.path, &format!("base64 does not decode: {err}")))?,
            _ => {
                return Err(invalid(
                    &file.path,
                    "give exactly one of `text` and `base64`",
                ));
            }
        };
        if !seen.insert(path.clone()) {
            return Err(invalid(&file.path, "two files have this path"));
        }
        out.push(InputFile { path, bytes });
    }
    // A file cannot also be another file's directory (`a` and `a/b`).
    for file in &out {
        let mut prefix = file.path.as_str();
        while let Some((parent, _)) = prefix.rsplit_once('/') {
            if seen.contains(parent) {
                return Err(invalid(
                    parent,
                    "a file cannot also be another file's directory",
                ));
            }
            prefix = parent;
        }
    }
    Ok(out)
}

/// `code-runner::invalid_request`: `files`/`collect` `path`: `rule`.
pub(crate) fn invalid(path: &str, rule: &str) -> RunnerError {
    RunnerError::invalid(format!("file path {}: {rule}", shorten(path)))
}

/// `path` quoted, cut to its first 80 characters when longer.
pub fn shorten(path: &str) -> String {
    match path.char_indices().nth(80) {
        Some((cut, _)) => format!("{:?}…", &path[..cut]),
        None => format!("{path:?}"),
    }
}
