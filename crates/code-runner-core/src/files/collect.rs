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

/// One collected file, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collected {
    /// Its path relative to the root.
    pub path: String,
    /// Its MIME type ([`mime_type`]).
    pub mime_type: &'static str,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// What a `collect` found: the files that fit the caps, sorted by path,
/// and what was left out and why, if anything was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collection {
    /// The files that fit.
    pub files: Vec<Collected>,
    /// The omission marker's text (`<omitted: …>`), when something matched
    /// and is not in `files`.
    pub omitted: Option<String>,
}

impl Collection {
    /// The files as the wire carries them inline (base64), the omission
    /// marker last.
    pub fn inline(self) -> Vec<CollectedFile> {
        let mut out: Vec<CollectedFile> = self
            .files
            .into_iter()
            .map(|file| CollectedFile {
                size: file.bytes.len() as u64,
                base64: Some(base64::engine::general_purpose::STANDARD.encode(&file.bytes)),
                mime_type: file.mime_type.to_string(),
                path: file.path,
                uri: None,
                preview: None,
            })
            .collect();
        out.extend(self.omitted.map(CollectedFile::marker));
        out
    }
}

/// At most this many skipped files are named in the omission marker.
const NAMED_SKIPS: usize = 8;

/// The files under `root` that `globs` match, sorted by path, read whole,
/// within `caps`: a file that would take the answer past `max_bytes` (in
/// base64) is skipped and the list goes on, so one large file does not hide
/// the small ones after it; past `max_files` the rest are left out. The
/// omission marker names what was skipped or left out and why, as it does
/// a file that could not be read and a walk that stopped early. Symlinks
/// are never followed.
pub fn collect(root: &std::path::Path, globs: &Globs, caps: CollectCaps) -> Collection {
    if globs.is_empty() {
        return Collection::default();
    }
    let walked = match beneath::walk(root) {
        Ok(walked) => walked,
        Err(err) => {
            return Collection {
                files: Vec::new(),
                omitted: Some(format!("<no files collected: {err}>")),
            };
        }
    };
    let Ok(fd) = beneath::open_root(root) else {
        return Collection::default();
    };
    let mut matched: Vec<(String, u64)> = walked
        .files
        .into_iter()
        .filter(|(path, _)| globs.matches(path))
        .collect();
    matched.sort();
    let (mut files, mut used) = (Vec::new(), 0usize);
    let mut skipped: Vec<String> = Vec::new();
    let mut unread: Vec<String> = Vec::new();
    let mut cut = None;
    for (index, (path, size)) in matched.iter().enumerate() {
        if files.len() >= caps.max_files {
            cut = Some(index);
            break;
        }
        if used.saturating_add(base64_len(*size)) > caps.max_bytes {
            skipped.push(format!("{path} ({size} bytes)"));
            continue;
        }
        match beneath::read_file(&fd, path, *size) {
            Ok(bytes) => {
                used = used.saturating_add(base64_len(bytes.len() as u64));
                files.push(Collected {
                    path: path.clone(),
                    mime_type: mime_type(path),
                    bytes,
                });
            }
            Err(err) => unread.push(format!("{path} ({err})")),
        }
    }
    let mut notes = Vec::new();
    if !skipped.is_empty() {
        notes.push(format!(
            "{} skipped, each past what was left of the {} KB of base64 an answer carries (max_collect_bytes) — collect it alone or smaller",
            named(&skipped),
            crate::caps::approx_kb(caps.max_bytes as u64)
        ));
    }
    if let Some(index) = cut {
        let left = &matched[index..];
        let bytes: u64 = left.iter().map(|(_, size)| *size).sum();
        let plural = if left.len() == 1 { "" } else { "s" };
        notes.push(format!(
            "{} more file{plural} ({bytes} bytes) matched; an answer carries at most {} files (max_collect_files) — collect fewer, or narrow the globs",
            left.len(),
            caps.max_files
        ));
    }
    if !unread.is_empty() {
        notes.push(format!("{} could not be read", named(&unread)));
    }
    if let Some(why) = walked.incomplete {
        notes.push(format!("{why}, so some files may not have been seen"));
    }
    Collection {
        files,
        omitted: (!notes.is_empty()).then(|| format!("<omitted: {}>", notes.join("; "))),
    }
}

/// `items` named, the first [`NAMED_SKIPS`] of them, and how many more.
fn named(items: &[String]) -> String {
    let shown = items[..items.len().min(NAMED_SKIPS)].join(", ");
    match items.len().saturating_sub(NAMED_SKIPS) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// The length of `size` bytes in padded base64.
fn base64_len(size: u64) -> usize {
    usize::try_from(size.div_ceil(3).saturating_mul(4)).unwrap_or(usize::MAX)
}

/// Whether bytes of type `mime` are text to read: `text/*`, JSON, XML, SVG.
pub fn is_textual(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/xml" | "image/svg+xml"
        )
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
