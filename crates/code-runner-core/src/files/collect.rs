//! Files out: the `collect` globs, matched against a bounded walk of the
//! runtime's root, read by descriptor, capped like images.

use base64::Engine as _;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::beneath;
use super::path::{MAX_PATH_BYTES, invalid};
use crate::error::RunnerError;
use crate::wire::CollectedFile;

/// The most globs one request may carry.
pub const MAX_COLLECT_GLOBS: usize = 64;

/// The caps on what one response carries (`max_collect_files`, `max_collect_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectCaps {
    /// Most files (default 16).
    pub max_files: usize,
    /// Most base64 bytes in all (default 8 MiB).
    pub max_bytes: usize,
}

impl Default for CollectCaps {
    fn default() -> Self {
        CollectCaps {
            max_files: 16,
            max_bytes: 8 * 1024 * 1024,
        }
    }
}

/// A request's `collect` globs, compiled: `*` and `?` stay within one
/// component, `**` crosses directories, `{a,b}` and `[ab]` work.
#[derive(Debug, Clone)]
pub struct Globs(GlobSet);

impl Globs {
    /// Compiles `patterns`: each relative, without `..`, at most
    /// [`MAX_PATH_BYTES`]; at most [`MAX_COLLECT_GLOBS`] of them.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the glob and the rule.
    pub fn new(patterns: &[String]) -> Result<Globs, RunnerError> {
        if patterns.len() > MAX_COLLECT_GLOBS {
            return Err(RunnerError::invalid(format!(
                "collect: at most {MAX_COLLECT_GLOBS} globs per request, this one has {}",
                patterns.len()
            )));
        }
        let mut set = GlobSetBuilder::new();
        for pattern in patterns {
            let refuse = |rule: &str| Err(invalid(pattern, rule));
            if pattern.is_empty() {
                return refuse("a glob cannot be empty");
            }
            if pattern.len() > MAX_PATH_BYTES {
                return refuse(&format!("a glob is at most {MAX_PATH_BYTES} bytes"));
            }
            if pattern.starts_with('/') {
                return refuse("a glob is relative to the runtime's root, not absolute");
            }
            if pattern.contains('\0') || pattern.split('/').any(|part| part == "..") {
                return refuse("a glob cannot contain `..` or NUL");
            }
            let glob = GlobBuilder::new(pattern.trim_start_matches("./"))
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|err| invalid(pattern, &format!("not a glob: {}", err.kind())))?;
            set.add(glob);
        }
        let set = set
            .build()
            .map_err(|err| RunnerError::invalid(format!("collect: {err}")))?;
        Ok(Globs(set))
    }

    /// Whether no glob was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `path` matches one of the globs.
    pub fn matches(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

/// The files under `root` that `globs` match, sorted by path, read whole
/// and base64-encoded, within `caps`: the first that does not fit ends the
/// list with an omission marker, as does a walk that stopped early.
/// Symlinks are never followed; a file that cannot be read is left out.
pub fn collect(root: &std::path::Path, globs: &Globs, caps: CollectCaps) -> Vec<CollectedFile> {
    if globs.is_empty() {
        return Vec::new();
    }
    let walked = match beneath::walk(root) {
        Ok(walked) => walked,
        Err(err) => return vec![marker(format!("<no files collected: {err}>"))],
    };
    let Ok(fd) = beneath::open_root(root) else {
        return Vec::new();
    };
    let mut matched: Vec<(String, u64)> = walked
        .files
        .into_iter()
        .filter(|(path, _)| globs.matches(path))
        .collect();
    matched.sort();
    let (mut out, mut used) = (Vec::new(), 0usize);
    let mut cut = None;
    for (index, (path, size)) in matched.iter().enumerate() {
        if out.len() >= caps.max_files {
            cut = Some((
                index,
                format!("at most {} files (max_collect_files)", caps.max_files),
            ));
            break;
        }
        if used.saturating_add(base64_len(*size)) > caps.max_bytes {
            let limit = format!(
                "at most {} KB of base64 (max_collect_bytes)",
                crate::caps::approx_kb(caps.max_bytes as u64)
            );
            cut = Some((index, limit));
            break;
        }
        let Ok(bytes) = beneath::read_file(&fd, path, *size) else {
            continue;
        };
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        used = used.saturating_add(data.len());
        out.push(CollectedFile {
            path: path.clone(),
            mime_type: mime_type(path).to_string(),
            size: bytes.len() as u64,
            base64: data,
        });
    }
    let mut notes = Vec::new();
    if let Some((index, limit)) = cut {
        let left = &matched[index..];
        let bytes: u64 = left.iter().map(|(_, size)| *size).sum();
        let plural = if left.len() == 1 { "" } else { "s" };
        notes.push(format!(
            "{} more file{plural} ({bytes} bytes) matched; a response carries {limit} — collect fewer or smaller files, or narrow the globs",
            left.len()
        ));
    }
    if let Some(why) = walked.incomplete {
        notes.push(format!("{why}, so some files may not have been seen"));
    }
    if !notes.is_empty() {
        out.push(marker(format!("<omitted: {}>", notes.join("; "))));
    }
    out
}

fn marker(text: String) -> CollectedFile {
    CollectedFile {
        path: String::new(),
        mime_type: "text/plain".into(),
        size: 0,
        base64: text,
    }
}

/// The length of `size` bytes in padded base64.
fn base64_len(size: u64) -> usize {
    usize::try_from(size.div_ceil(3).saturating_mul(4)).unwrap_or(usize::MAX)
}

/// The MIME type of `path`, from its extension; `application/octet-stream` when unknown.
pub fn mime_type(path: &str) -> &'static str {
    let ext = path
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "json" => "application/json",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "html" | "htm" => "text/html",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "parquet" => "application/vnd.apache.parquet",
        _ => "application/octet-stream",
    }
}
