//! The interpreter artifact: where `scripts/fetch-python-wasm` leaves it,
//! checking it is the one this binary was built for, and compiling it once
//! per machine.
//!
//! The artifact is a directory `python-snapshot-<key>/` holding `runner.wasm`
//! (a component: CPython 3.14 pre-initialised around our guest runner),
//! `lib/` (the rest of the standard library, mounted read-only at `/python`)
//! and a `manifest`. The key hashes every input of the build, the runner's
//! sources included, so this binary only ever loads a snapshot of the runner
//! it embeds.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::PythonError;

/// componentize-py's version, as pinned by `scripts/fetch-python-wasm`.
pub const TOOL_VERSION: &str = "0.25.1";
/// sha256 of the componentize-py wheel, as pinned by `scripts/fetch-python-wasm`.
pub const TOOL_WHEEL_SHA256: &str =
    "8623cd8cab8453cb0cd8bf03f3c7103420d06f2f3d360186a280a70a1ca5e89f";

/// The guest runner's interface and source, built into the snapshot.
const RUNNER_WIT: &str = include_str!("../guest/runner.wit");
const RUNNER_PY: &str = include_str!("../guest/runner.py");
const HTTP_PY: &str = include_str!("../guest/_iii_http.py");

/// Environment variable naming the snapshot directory explicitly.
pub const PYTHON_DIR_ENV: &str = "CODE_RUNNER_PYTHON_DIR";

pub use code_runner_core::cache_dir;

/// The snapshot's key: 16 hex digits of the sha256 over the tool's pin and
/// the runner's sources, computed exactly as `scripts/fetch-python-wasm` does.
pub fn snapshot_key() -> String {
    let mut hasher = Sha256::new();
    hasher.update(format!(
        "componentize-py=={TOOL_VERSION} sha256={TOOL_WHEEL_SHA256}\n"
    ));
    hasher.update(RUNNER_WIT);
    hasher.update(RUNNER_PY);
    hasher.update(HTTP_PY);
    hex(&hasher.finalize())[..16].to_string()
}

/// Where the snapshot is looked for: `$CODE_RUNNER_PYTHON_DIR`, else
/// `<cache_dir>/python-snapshot-<key>`.
pub fn default_snapshot_dir() -> PathBuf {
    std::env::var_os(PYTHON_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join(format!("python-snapshot-{}", snapshot_key())))
}

const FETCH_HINT: &str = "run scripts/fetch-python-wasm (it fetches componentize-py from PyPI, \
     checks its hash and builds the snapshot, in about 10 s), or point CODE_RUNNER_PYTHON_DIR at a built one";

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn sha256_file(path: &Path) -> Result<String, PythonError> {
    let unreadable = |err: std::io::Error| {
        PythonError::Unavailable(format!("cannot read {}: {err}", path.display()))
    };
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(unreadable)?;
        if n == 0 {
            return Ok(hex(&hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

/// A checked snapshot directory.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The component.
    pub wasm: PathBuf,
    /// Its sha256, from the manifest, checked against the file.
    pub wasm_sha256: String,
    /// The standard library for the read-only `/python` mount.
    pub lib: PathBuf,
}

/// Checks that `dir` holds a complete snapshot of this binary's runner: the
/// manifest's key matches ours and `runner.wasm` has the manifest's sha256.
/// A sidecar remembers a verified (size, mtime) so a restart does not hash
/// 20 MB again.
pub fn verify(dir: &Path) -> Result<Snapshot, PythonError> {
    let manifest_path = dir.join("manifest");
    let manifest = std::fs::read_to_string(&manifest_path).map_err(|err| {
        PythonError::Unavailable(format!(
            "no python snapshot at {} ({}: {err}); {FETCH_HINT}",
            dir.display(),
            manifest_path.display()
        ))
    })?;
    let field = |prefix: &str| {
        manifest
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .map(str::to_string)
    };
    let key = snapshot_key();
    if field("key=").as_deref() != Some(key.as_str()) {
        return Err(PythonError::Unavailable(format!(
            "the python snapshot at {} was built from another guest runner (key {}, this binary needs {key}); {FETCH_HINT}",
            dir.display(),
            field("key=").unwrap_or_else(|| "missing".into())
        )));
    }
    let wasm = dir.join("runner.wasm");
    let lib = dir.join("lib");
    let expected = field("runner.wasm sha256=").ok_or_else(|| {
        PythonError::Unavailable(format!(
            "{} names no runner.wasm sha256; delete {} and {FETCH_HINT}",
            manifest_path.display(),
            dir.display()
        ))
    })?;
    if !lib.join("os.py").is_file() {
        return Err(PythonError::Unavailable(format!(
            "the standard library is missing from {}; delete {} and {FETCH_HINT}",
            lib.display(),
            dir.display()
        )));
    }
    let meta = std::fs::metadata(&wasm).map_err(|err| {
        PythonError::Unavailable(format!(
            "runner.wasm not found at {} ({err}); {FETCH_HINT}",
            wasm.display()
        ))
    })?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let stamp = format!("{} {:?} {expected}", meta.len(), mtime);
    let sidecar = dir.join("runner.wasm.verified");
    if !std::fs::read_to_string(&sidecar).is_ok_and(|text| text == stamp) {
        let digest = sha256_file(&wasm)?;
        if digest != expected {
            return Err(PythonError::Unavailable(format!(
                "{} is corrupt: sha256 {digest}, expected {expected} (from its manifest); delete {} and {FETCH_HINT}",
                wasm.display(),
                dir.display()
            )));
        }
        let _ = std::fs::write(&sidecar, stamp);
    }
    Ok(Snapshot {
        wasm,
        wasm_sha256: expected,
        lib,
    })
}

/// Loads the compiled component from the cache, or compiles and caches it.
///
/// The cache key holds the component's sha256 and the engine's compatibility
/// hash, which covers the wasmtime version and every compile-affecting
/// setting, so an upgrade or a config change recompiles.
pub fn load(engine: &Engine, snapshot: &Snapshot) -> Result<Component, PythonError> {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let key = format!(
        "python-{}-engine-{:016x}.cwasm",
        &snapshot.wasm_sha256[..16],
        hasher.finish()
    );
    let cached = cache_dir().join(&key);
    let _maker = crate::makers::Maker::take(&cache_dir(), &key, "the compiled python snapshot")?;
    if cached.exists() {
        // SAFETY: the file was written by `Component::serialize` of an engine
        // with this compatibility hash, into our own cache directory; it is
        // as trusted as this binary. A corrupt file fails to load (checked
        // header) and is recompiled below.
        match unsafe { Component::deserialize_file(engine, &cached) } {
            Ok(component) => return Ok(component),
            Err(err) => tracing::warn!(
                "ignoring unusable compiled component {}: {err:#}",
                cached.display()
            ),
        }
    }
    tracing::info!(
        "compiling the python snapshot once for this machine (about 30 s of CPU; cached at {})",
        cached.display()
    );
    let _step = crate::progress::Step::begin("compiling the python snapshot");
    let started = Instant::now();
    let component = Component::from_file(engine, &snapshot.wasm).map_err(|err| {
        PythonError::Unavailable(format!(
            "cannot compile {}: {err:#}",
            snapshot.wasm.display()
        ))
    })?;
    tracing::info!(
        "compiled the python snapshot in {} ms",
        started.elapsed().as_millis()
    );
    match component.serialize() {
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
                    "cannot cache the compiled component at {}: {err}",
                    cached.display()
                );
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Err(err) => tracing::warn!("cannot serialize the compiled component: {err:#}"),
    }
    Ok(component)
}
