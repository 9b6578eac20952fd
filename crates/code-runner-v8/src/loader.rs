//! The ES module loader: modules come from the runtime's scratch directory
//! (files written with `iii.files`), the runtime's npm package sets
//! ([`crate::packages`]: bare specifiers such as `zod`, served under
//! `code-runner:pkg/<set>/<file>`) and the small Node surface
//! (`node:buffer` …, under `code-runner:node/<name>`), and nowhere else.
//!
//! A specifier is a bare file name, optionally `./`-prefixed
//! (`import('./util.js')`, `import 'util.js'`); it resolves to `file:///<name>`,
//! a URL naming the scratch file and never the host path. Anything else
//! (`node:fs`, `https://…`, `../x`, `ext:…`) is refused with an error the guest
//! can catch. Handler modules of [`code_runner_core::Task::Define`] come in
//! under `code-runner:define/<n>`, registered by the runtime thread just
//! before it imports them, and only the bootstrap may import those.

use std::cell::RefCell;
use std::collections::HashMap;

use std::sync::Arc;

use deno_core::{
    ModuleLoadOptions, ModuleLoadReferrer, ModuleLoadResponse, ModuleLoader, ModuleSource,
    ModuleSourceCode, ModuleSpecifier, ModuleType, RequestedModuleType, ResolutionKind,
    SourceCodeCacheInfo,
};
use deno_error::JsErrorBox;

use crate::files;
use crate::packages::{self, CodeCache, PackageSet};
use crate::state::SharedIo;

/// The script name of the bootstrap, the only referrer allowed to import handler modules.
pub const BOOTSTRAP_NAME: &str = "[code-runner]";
/// The scheme of handler modules.
const DEFINE_PREFIX: &str = "code-runner:define/";
/// The scheme of bundled package files: `code-runner:pkg/<set>/<file>`.
const PACKAGE_PREFIX: &str = "code-runner:pkg/";
/// The scheme of the provided Node modules: `code-runner:node/<name>`.
const NODE_PREFIX: &str = "code-runner:node/";
/// The name a handler module's `handler` binding is re-exported under
/// (`HANDLER_EXPORT` in the bootstrap).
const HANDLER_EXPORT: &str = "__code_runner_handler__";

/// Loads modules from one runtime's scratch directory.
pub struct ScratchLoader {
    io: SharedIo,
    defines: RefCell<HashMap<String, String>>,
    /// Longest module source compiled, in bytes ([`crate::codegen::max_source_units`]).
    max_source: usize,
    /// The package sets bare specifiers resolve in, in order: the
    /// operator's, then those `install` added to this runtime.
    packages: RefCell<Vec<Arc<PackageSet>>>,
}

impl ScratchLoader {
    /// A loader over `io`'s scratch directory.
    pub fn new(io: SharedIo, max_source: usize, packages: Vec<Arc<PackageSet>>) -> Self {
        ScratchLoader {
            io,
            defines: RefCell::new(HashMap::new()),
            max_source,
            packages: RefCell::new(packages),
        }
    }

    /// Adds a package set, after those already there.
    pub fn add_packages(&self, set: Arc<PackageSet>) {
        self.packages.borrow_mut().push(set);
    }

    /// The set labelled `label`.
    fn set(&self, label: &str) -> Option<Arc<PackageSet>> {
        self.packages
            .borrow()
            .iter()
            .find(|set| set.label() == label)
            .cloned()
    }

    /// Resolves a specifier that is no scratch path: a file of the
    /// referrer's package set, a provided Node module, or a package.
    /// `Ok(None)`: none of these (a scratch file name, perhaps).
    fn resolve_package(
        &self,
        specifier: &str,
        referrer: &str,
    ) -> Result<Option<ModuleSpecifier>, JsErrorBox> {
        let parse = |url: String| {
            ModuleSpecifier::parse(&url)
                .map(Some)
                .map_err(|_| refuse(specifier))
        };
        if let (Some(within), Some(file)) = (
            referrer.strip_prefix(PACKAGE_PREFIX),
            specifier.strip_prefix("./"),
        ) {
            let label = within.split('/').next().unwrap_or_default();
            return match self.set(label).and_then(|set| set.file(file)) {
                Some(_) => parse(format!("{PACKAGE_PREFIX}{label}/{file}")),
                None => Err(refuse(specifier)),
            };
        }
        match packages::node_module(specifier) {
            Ok(Some(name)) => return parse(format!("{NODE_PREFIX}{name}")),
            Ok(None) => {}
            Err(why) => return Err(JsErrorBox::type_error(why)),
        }
        if specifier.starts_with('.') || specifier.starts_with('/') || specifier.contains(':') {
            return Ok(None);
        }
        let sets = self.packages.borrow();
        for set in sets.iter() {
            if let Some(file) = set.module(specifier) {
                return parse(format!("{PACKAGE_PREFIX}{}/{file}", set.label()));
            }
        }
        // A bare name no package provides: a scratch file if there is one.
        let scratch =
            file_name(specifier).is_some_and(|name| self.io.borrow().scratch.size(&name).is_ok());
        if scratch {
            return Ok(None);
        }
        Err(JsErrorBox::type_error(unknown_package(specifier, &sets)))
    }

    /// A package file's or a Node module's source, with its code-cache info.
    fn load_package(&self, url: &str) -> Option<Result<PackageSource, JsErrorBox>> {
        if let Some(name) = url.strip_prefix(NODE_PREFIX) {
            return Some(
                packages::node_module_source(name)
                    .map(|code| (Arc::from(code), None))
                    .ok_or_else(|| refuse(url)),
            );
        }
        let within = url.strip_prefix(PACKAGE_PREFIX)?;
        let (label, file) = within.split_once('/')?;
        let found = self.set(label).and_then(|set| set.file(file));
        Some(found.ok_or_else(|| refuse(url)).map(|(source, key)| {
            let cache = SourceCodeCacheInfo {
                hash: key,
                data: CodeCache::get(key),
            };
            (source, Some(cache))
        }))
    }

    /// The longest module source this loader compiles, in bytes.
    pub fn max_source(&self) -> usize {
        self.max_source
    }

    /// Registers handler source for the bootstrap to import, under two fresh
    /// specifiers: the source with `handler` re-exported under a name of
    /// ours (so `function handler` needs no `export`), and the source as it is
    /// (for a module that declares no `handler` binding: its default export).
    pub fn add_define(&self, id: u32, source: String) -> (String, String) {
        let plain = format!("{DEFINE_PREFIX}{id}");
        let named = format!("{DEFINE_PREFIX}{id}/named");
        let mut defines = self.defines.borrow_mut();
        defines.clear();
        // Appended, so every line keeps its number in stack traces.
        defines.insert(
            named.clone(),
            format!("{source}\nexport {{ handler as {HANDLER_EXPORT} }};\n"),
        );
        defines.insert(plain.clone(), source);
        (named, plain)
    }
}

/// A package file's or a Node module's source, with its code-cache info.
type PackageSource = (Arc<str>, Option<SourceCodeCacheInfo>);

/// The error for a bare specifier that names nothing: what there is.
fn unknown_package(specifier: &str, sets: &[Arc<PackageSet>]) -> String {
    let quoted: String = specifier.chars().take(files::MAX_NAME_BYTES).collect();
    let listed: Vec<String> = sets
        .iter()
        .flat_map(|set| set.listed.iter().map(ToString::to_string))
        .collect();
    let offered = if listed.is_empty() {
        "this worker provides no npm packages (an operator lists them in node_packages)".to_string()
    } else {
        format!(
            "the packages this runtime can import are {}",
            listed.join(", ")
        )
    };
    format!(
        "cannot import {quoted:?}: it is not a package here, nor a file written with iii.files; {offered}"
    )
}

fn refuse(specifier: &str) -> JsErrorBox {
    // The specifier is the guest's and may be megabytes long: quote its start.
    let quoted: String = specifier.chars().take(files::MAX_NAME_BYTES).collect();
    let more = if quoted.len() < specifier.len() {
        "…"
    } else {
        ""
    };
    JsErrorBox::type_error(format!(
        "cannot import {quoted:?}{more}: only modules written with iii.files can be imported, by their file name (e.g. import('./util.js'))"
    ))
}

/// The scratch file name a specifier names, if it names one.
fn file_name(specifier: &str) -> Option<String> {
    let name = match (
        specifier.strip_prefix("file:///"),
        specifier.strip_prefix("./"),
    ) {
        (Some(encoded), _) => percent_decode(encoded)?,
        (None, Some(name)) => name.to_string(),
        // `node:fs`, `https://…`: a scheme, not a scratch file.
        (None, None) if specifier.contains(':') => return None,
        (None, None) => specifier.to_string(),
    };
    files::check_name(&name).ok()?;
    Some(name)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl ModuleLoader for ScratchLoader {
    fn code_cache_ready(
        &self,
        _specifier: ModuleSpecifier,
        hash: u64,
        code_cache: &[u8],
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        CodeCache::put(hash, code_cache);
        Box::pin(std::future::ready(()))
    }

    fn resolve(
        &self,
        specifier: &str,
        referrer: &str,
        _kind: ResolutionKind,
    ) -> Result<ModuleSpecifier, JsErrorBox> {
        if specifier.starts_with(DEFINE_PREFIX) {
            if referrer != BOOTSTRAP_NAME {
                return Err(refuse(specifier));
            }
            return ModuleSpecifier::parse(specifier).map_err(|_| refuse(specifier));
        }
        if let Some(url) = self.resolve_package(specifier, referrer)? {
            return Ok(url);
        }
        let name = file_name(specifier).ok_or_else(|| refuse(specifier))?;
        let mut url = ModuleSpecifier::parse("file:///").map_err(|_| refuse(specifier))?;
        url.path_segments_mut()
            .map_err(|()| refuse(specifier))?
            .clear()
            .push(&name);
        Ok(url)
    }

    fn load(
        &self,
        specifier: &ModuleSpecifier,
        _referrer: Option<&ModuleLoadReferrer>,
        options: ModuleLoadOptions,
    ) -> ModuleLoadResponse {
        let text = specifier.as_str();
        if let Some(found) = self.load_package(text) {
            return ModuleLoadResponse::Sync(found.map(|(code, cache)| {
                ModuleSource::new(
                    ModuleType::JavaScript,
                    ModuleSourceCode::String(code.into()),
                    specifier,
                    cache,
                )
            }));
        }
        let source = if text.starts_with(DEFINE_PREFIX) {
            self.defines
                .borrow_mut()
                .remove(text)
                .ok_or_else(|| refuse(text))
        } else {
            file_name(text)
                .ok_or_else(|| refuse(text))
                .and_then(|name| {
                    let io = self.io.borrow();
                    io.scratch
                        .read(&name)
                        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                        .map_err(|err| {
                            JsErrorBox::type_error(format!(
                                "cannot import {name:?}: {}",
                                err.message
                            ))
                        })
                })
        };
        // Compiling takes zone memory outside the heap cap, in proportion to the source.
        let source = source.and_then(|code| {
            if code.len() > self.max_source {
                Err(JsErrorBox::range_error(format!(
                    "a module compiled in this runtime is limited to {} bytes of source; this one has {}",
                    self.max_source,
                    code.len()
                )))
            } else {
                Ok(code)
            }
        });
        // `*.ts` and `*.mts` modules are TypeScript in any runtime, as in Node.
        let source = source.and_then(|code| {
            if !is_typescript(text)
                || !matches!(options.requested_module_type, RequestedModuleType::None)
            {
                return Ok(code);
            }
            let name = file_name(text).unwrap_or_default();
            crate::strip::module(&code)
                // deno_core hands every loader error to the importer as a TypeError.
                .map_err(|err| JsErrorBox::type_error(err.one_line(&name)))
        });
        let module_type = match options.requested_module_type {
            RequestedModuleType::Json => ModuleType::Json,
            _ => ModuleType::JavaScript,
        };
        ModuleLoadResponse::Sync(source.map(|code| {
            ModuleSource::new(
                module_type,
                ModuleSourceCode::String(code.into()),
                specifier,
                None,
            )
        }))
    }
}

/// Whether a scratch module is TypeScript, by its name.
fn is_typescript(specifier: &str) -> bool {
    !specifier.starts_with(DEFINE_PREFIX)
        && (specifier.ends_with(".ts") || specifier.ends_with(".mts"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only bare scratch names resolve; everything that would reach elsewhere is refused.
    #[test]
    fn only_scratch_names_resolve() {
        assert_eq!(file_name("util.js").as_deref(), Some("util.js"));
        assert_eq!(file_name("./util.js").as_deref(), Some("util.js"));
        assert_eq!(
            file_name("file:///with%20space.js").as_deref(),
            Some("with space.js")
        );
        for bad in [
            "node:fs",
            "../x.js",
            "./a/b.js",
            "https://x/y.js",
            "/etc/passwd",
            "file:///a/b",
            "ext:core/ops",
            "",
            "file:///%2e%2e",
        ] {
            assert_eq!(file_name(bad), None, "{bad}");
        }
    }
}
