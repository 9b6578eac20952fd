//! npm packages in V8 runtimes: what decides which bare specifiers a guest
//! can import and where their code comes from.
//!
//! A [`PackageSet`] is one installed list ([`install`]) read into memory,
//! read-only and shared by every isolate of the process: the operator's
//! `node_packages`, and per kept runtime the sets `code-runner::install`
//! added. The loader asks [`PackageSet::module`] for a bare specifier
//! (`zod`, `date-fns/addDays`: the package's root and the subpath exports
//! it declares) and serves the bundled file under
//! `code-runner:pkg/<set>/<file>`, whose relative chunk imports stay inside
//! that set. Nothing here gives a guest a filesystem.
//!
//! [`node_module`] decides the small Node surface (`node:buffer`,
//! `node:events`, `node:path`, `node:process`, `node:util`, with or without
//! `node:`); every other Node built-in is refused by name.
//!
//! Each bundled file carries a code-cache key (its sha256 with V8's
//! version), and [`CodeCache`] keeps what V8 compiled for it, process-wide,
//! so a runtime's import of a package costs a lookup and V8's check of the
//! cache, not a compile, after the first.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use sha2::{Digest, Sha256};

mod install;
pub use install::{
    MAX_PACKAGES, NODE_ENV, NPM_ENV, Request, check_spec, install, install_in, split_spec,
};

/// The most bytes and files one set may hold in memory.
const MAX_SET_BYTES: u64 = 256 << 20;
const MAX_SET_FILES: usize = 50_000;
/// The most package sets `install` adds to one runtime, and their bytes.
pub const MAX_ADDED: usize = 8;
/// The most bytes of bundled code all the sets added to one runtime hold.
pub const MAX_ADDED_BYTES: u64 = 64 << 20;
/// The most compiled code the process keeps for package files.
const MAX_CODE_CACHE_BYTES: usize = 256 << 20;

/// One package at its installed version.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Package {
    /// Its npm name.
    pub name: String,
    /// The version npm installed.
    pub version: String,
}

impl std::fmt::Display for Package {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.version)
    }
}

/// One installed list, in memory.
#[derive(Debug)]
pub struct PackageSet {
    /// Its segment in module URLs (`code-runner:pkg/<label>/…`).
    label: String,
    /// The packages listed, at the versions installed.
    pub listed: Vec<Package>,
    /// Every package installed, dependencies included.
    pub installed: Vec<Package>,
    /// sha256 of npm's lock.
    pub lock_sha256: String,
    /// Specifier → bundled file.
    modules: HashMap<String, String>,
    /// Bundled file → its source and code-cache key.
    files: HashMap<String, (Arc<str>, u64)>,
    /// Bytes of bundled code.
    bytes: u64,
}

impl PackageSet {
    /// Reads the install at `dir` (see [`install`]) into memory, labelled
    /// `label` in module URLs.
    ///
    /// # Errors
    /// The install is damaged or past the bounds.
    pub fn open(dir: &Path, label: &str) -> Result<PackageSet, String> {
        let damaged = |why: String| {
            format!(
                "{} is damaged ({why}); remove it to install again",
                dir.display()
            )
        };
        let read_json = |name: &str| -> Result<Value, String> {
            let text =
                std::fs::read_to_string(dir.join(name)).map_err(|e| damaged(e.to_string()))?;
            serde_json::from_str(&text).map_err(|e| damaged(e.to_string()))
        };
        let installed = read_json("installed.json")?;
        let map = read_json("map.json")?;
        let packages = |key: &str| -> Vec<Package> {
            installed[key]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| serde_json::from_value(item.clone()).ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut modules = HashMap::new();
        for (specifier, file) in map["modules"].as_object().into_iter().flatten() {
            let file = file.as_str().ok_or_else(|| damaged("map.json".into()))?;
            modules.insert(specifier.clone(), file.to_string());
        }
        let version = v8::VERSION_STRING;
        let mut files = HashMap::new();
        let mut bytes = 0u64;
        let entries = std::fs::read_dir(dir.join("files")).map_err(|e| damaged(e.to_string()))?;
        for entry in entries {
            let entry = entry.map_err(|e| damaged(e.to_string()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !file_name_ok(&name) {
                return Err(damaged(format!("unexpected file {name:?}")));
            }
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
            if files.len() >= MAX_SET_FILES || bytes > MAX_SET_BYTES {
                return Err(format!(
                    "{} is over {MAX_SET_FILES} files or {} MiB",
                    dir.display(),
                    MAX_SET_BYTES >> 20
                ));
            }
            let source =
                std::fs::read_to_string(entry.path()).map_err(|e| damaged(e.to_string()))?;
            let mut hash = Sha256::new();
            hash.update(version);
            hash.update([0]);
            hash.update(source.as_bytes());
            let digest = hash.finalize();
            let key = u64::from_le_bytes(digest[..8].try_into().unwrap_or_default());
            files.insert(name, (Arc::<str>::from(source), key));
        }
        if let Some((specifier, file)) = modules.iter().find(|(_, f)| !files.contains_key(*f)) {
            return Err(damaged(format!("{specifier} maps to a missing {file}")));
        }
        Ok(PackageSet {
            label: label.to_string(),
            listed: packages("listed"),
            installed: packages("installed"),
            lock_sha256: installed["lock_sha256"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            modules,
            files,
            bytes,
        })
    }

    /// Its segment in module URLs.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The bundled file a bare specifier names, if this set provides it.
    pub fn module(&self, specifier: &str) -> Option<&str> {
        self.modules.get(specifier).map(String::as_str)
    }

    /// A bundled file's source and code-cache key.
    pub fn file(&self, name: &str) -> Option<(Arc<str>, u64)> {
        self.files.get(name).cloned()
    }

    /// Bytes of bundled code it holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// How many importable specifiers it has.
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }
}

/// A bundled file's name: esbuild's `e<n>.js` and `c-<hash>.js`.
fn file_name_ok(name: &str) -> bool {
    name.len() <= 64
        && name.ends_with(".js")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && !name.starts_with('.')
}

/// The Node built-ins a runtime provides, each with the names it exports.
const NODE_MODULES: [(&str, &[&str]); 5] = [
    ("buffer", &["Buffer", "kMaxLength", "constants"]),
    ("events", &["EventEmitter", "once"]),
    (
        "path",
        &[
            "sep",
            "delimiter",
            "normalize",
            "join",
            "resolve",
            "isAbsolute",
            "dirname",
            "basename",
            "extname",
            "relative",
            "parse",
            "format",
            "toNamespacedPath",
            "posix",
        ],
    ),
    ("process", &["process", "env", "nextTick", "platform"]),
    (
        "util",
        &[
            "format",
            "inspect",
            "promisify",
            "callbackify",
            "inherits",
            "deprecate",
            "types",
            "isArray",
            "TextEncoder",
            "TextDecoder",
        ],
    ),
];

/// Node's other built-in modules: refused by name rather than taken for a
/// missing package.
const NODE_REFUSED: &[&str] = &[
    "assert",
    "async_hooks",
    "child_process",
    "cluster",
    "console",
    "constants",
    "crypto",
    "dgram",
    "diagnostics_channel",
    "dns",
    "domain",
    "fs",
    "fs/promises",
    "http",
    "http2",
    "https",
    "inspector",
    "module",
    "net",
    "os",
    "perf_hooks",
    "punycode",
    "querystring",
    "readline",
    "repl",
    "stream",
    "stream/promises",
    "stream/web",
    "string_decoder",
    "sys",
    "test",
    "timers",
    "timers/promises",
    "tls",
    "trace_events",
    "tty",
    "url",
    "v8",
    "vm",
    "wasi",
    "worker_threads",
    "zlib",
    "sqlite",
    "sea",
];

/// Which provided Node module a specifier names (`node:path`, `path`,
/// `path/posix`): `Ok(Some(name))`; `Ok(None)` when it names no Node
/// built-in.
///
/// # Errors
/// A Node built-in this runtime does not provide, named with what it does.
pub fn node_module(specifier: &str) -> Result<Option<&'static str>, String> {
    let prefixed = specifier.strip_prefix("node:");
    let name = prefixed.unwrap_or(specifier);
    let name = if name == "path/posix" { "path" } else { name };
    if let Some((provided, _)) = NODE_MODULES.iter().find(|(n, _)| *n == name) {
        return Ok(Some(provided));
    }
    if prefixed.is_some() || NODE_REFUSED.contains(&name) {
        let quoted: String = specifier.chars().take(64).collect();
        return Err(format!(
            "cannot import {quoted:?}: code-runner's JavaScript runtimes provide only node:buffer, node:events, node:path, node:process and node:util (subsets) of Node's modules; files are iii.files, the network is fetch"
        ));
    }
    Ok(None)
}

/// The ES module source of a provided Node module.
pub fn node_module_source(name: &str) -> Option<String> {
    let (_, exports) = NODE_MODULES.iter().find(|(n, _)| *n == name)?;
    Some(format!(
        "const m = globalThis[Symbol.for(\"code-runner.node\")]({name:?});\nexport default m.default ?? m;\nexport const {{ {} }} = m;\n",
        exports.join(", ")
    ))
}

/// What V8 compiled for package files, by code-cache key, process-wide and
/// bounded (past the bound, files compile as if uncached).
#[derive(Default)]
pub struct CodeCache {
    entries: HashMap<u64, Arc<[u8]>>,
    bytes: usize,
}

static CODE_CACHE: Mutex<Option<CodeCache>> = Mutex::new(None);

impl CodeCache {
    /// The cached code of `key`, if any.
    pub fn get(key: u64) -> Option<Cow<'static, [u8]>> {
        let cache = CODE_CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        let data = cache.as_ref()?.entries.get(&key)?;
        Some(Cow::Owned(data.to_vec()))
    }

    /// Keeps `data` under `key` while the bound allows.
    pub fn put(key: u64, data: &[u8]) {
        let mut cache = CODE_CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        let cache = cache.get_or_insert_with(CodeCache::default);
        if cache.entries.contains_key(&key) || cache.bytes + data.len() > MAX_CODE_CACHE_BYTES {
            return;
        }
        cache.bytes += data.len();
        cache.entries.insert(key, Arc::from(data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The five provided modules resolve with and without `node:`; the rest
    /// of Node is refused by name; anything else is not Node's.
    #[test]
    fn node_modules_are_provided_or_refused_by_name() {
        assert_eq!(node_module("node:buffer"), Ok(Some("buffer")));
        assert_eq!(node_module("events"), Ok(Some("events")));
        assert_eq!(node_module("node:path/posix"), Ok(Some("path")));
        assert!(node_module("node:fs").unwrap_err().contains("\"node:fs\""));
        assert!(node_module("child_process").is_err());
        assert!(node_module("node:anything").is_err());
        assert_eq!(node_module("zod"), Ok(None));
        assert!(node_module_source("util").unwrap().contains("promisify"));
    }
}
