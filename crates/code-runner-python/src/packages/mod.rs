//! The operator's `python_packages`: pure-Python wheels from the package
//! index, installed once per machine and list into a read-only directory
//! every python runtime mounts at `/packages` (on `sys.path`, after the
//! standard library and the data stack).
//!
//! [`install`] runs `install.py` with the host's python3: pip resolves the
//! list into a lock with sha256 hashes (pure-Python wheels only: `py3-none-any`),
//! downloads exactly the locked wheels (kept in `<cache>/python-wheels`), checks
//! each hash, refuses any wheel with compiled code naming it and why, and
//! unpacks them within bounds (entries, sizes, paths, no symlinks). It builds
//! into a temporary directory renamed into place only when all of it worked:
//! `<cache>/python-packages-<key>/` with `lock.txt`, `installed.json` and
//! `site-packages/`. The key hashes the list, the installer, the target
//! python and (for the data interpreter) the data stack's `MANIFEST`, so an
//! unchanged list is reused without asking the index again and a changed one
//! is installed afresh (and the data image rebuilt, its key including the
//! lock's sha256).
//!
//! For the data interpreter pip resolves against the data stack as it is
//! (its distributions at their exact versions, never fetched): a pure
//! package that depends on numpy or pandas installs when the stack meets its
//! requirements, a listed one the stack has is *provided* (reported, not
//! installed), and one the stack cannot meet is refused naming the conflict.
//! The lean interpreter has no stack, and refuses them naming why.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::PythonError;
use crate::module::{cache_dir, hex, sha256_file};

mod shadow;
pub use shadow::shadowed;

/// The installer, run by the host's python3 (never by a guest).
const INSTALLER: &str = include_str!("install.py");
/// The python version pip resolves for: the lean interpreter's (the data
/// flavour's 3.15 runs what 3.14 does).
const TARGET_PYTHON: &str = "3.14";
/// At most this many requirements.
pub const MAX_PACKAGES: usize = 64;
/// At most this many characters in one requirement.
pub const MAX_REQUIREMENT_CHARS: usize = 200;
/// How long resolving, downloading and unpacking may take in all.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// The most of the installer's stderr kept for the error message.
const MAX_STDERR_BYTES: u64 = 64 << 10;
/// Environment variable naming the python3 that runs pip (default `python3`).
pub const PIP_PYTHON_ENV: &str = "CODE_RUNNER_PIP_PYTHON";
/// Where the guest sees the packages.
pub(crate) const PACKAGES_GUEST: &str = "/packages";

/// An installed package set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonPackages {
    /// The directory mounted read-only at `/packages`.
    pub site_packages: PathBuf,
    /// sha256 of the lock (`name==version --hash=sha256:…` per line).
    pub lock_sha256: String,
    /// What was installed, dependencies included, as `name==version`, sorted.
    pub installed: Vec<String>,
    /// What the list (or its dependencies) takes from the data stack
    /// instead, as `name==version`, sorted.
    pub provided: Vec<String>,
}

/// The data stack's `MANIFEST` when pip resolves against it (the data
/// interpreter), else `None`.
///
/// # Errors
/// The data stack is not there to resolve against.
fn stack_manifest(on_stack: bool) -> Result<Option<PathBuf>, PythonError> {
    if !on_stack {
        return Ok(None);
    }
    let manifest = crate::default_data_dir().join("MANIFEST");
    if !manifest.is_file() {
        return Err(PythonError::Unavailable(format!(
            "python_packages: the data stack is not at {} to resolve against; run scripts/fetch-python-data",
            manifest.display()
        )));
    }
    Ok(Some(manifest))
}

/// Checks one requirement as configuration validation does: a name and a
/// version specifier from the package index (no URLs, paths or pip options).
///
/// # Errors
/// A sentence naming the requirement and what is wrong with it.
pub fn check_requirement(requirement: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-[],<>=!~*; ()'\"".contains(c);
    if requirement.is_empty() || requirement.chars().count() > MAX_REQUIREMENT_CHARS {
        return Err(format!(
            "python_packages: {requirement:?} must be 1 to {MAX_REQUIREMENT_CHARS} characters"
        ));
    }
    if !requirement.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !requirement.chars().all(allowed)
    {
        return Err(format!(
            "python_packages: {requirement:?} is not a requirement like \"tabulate==0.9.0\" or \
             \"beautifulsoup4>=4.12\" (a name from the package index and a version specifier; \
             no URLs, paths or pip options)"
        ));
    }
    Ok(())
}

/// The key of a requirement list for the data interpreter (`on_stack`:
/// resolved against its stack) or the lean one: what [`install`] caches it
/// under.
pub fn packages_key(requirements: &[String], on_stack: bool) -> String {
    let stack = stack_manifest(on_stack)
        .ok()
        .flatten()
        .and_then(|manifest| sha256_file(&manifest).ok())
        .unwrap_or_else(|| "lean".to_string());
    let mut hasher = Sha256::new();
    for part in [INSTALLER, TARGET_PYTHON, stack.as_str()]
        .into_iter()
        .chain(requirements.iter().map(String::as_str))
    {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part);
    }
    hex(&hasher.finalize())[..16].to_string()
}

/// The cache entry whose lock one installer of `requirements` holds
/// ([`crate::maker_lock_path`] names its file).
pub fn lock_entry(requirements: &[String], on_stack: bool) -> String {
    format!("python-packages-{}", packages_key(requirements, on_stack))
}

/// Where the package set of `requirements` is installed.
pub fn packages_dir(requirements: &[String], on_stack: bool) -> PathBuf {
    cache_dir().join(lock_entry(requirements, on_stack))
}

/// Installs `requirements` (see the module docs) for the data interpreter
/// (`on_stack`) or the lean one, or reuses the install of the same list;
/// `None` for an empty list.
///
/// # Errors
/// [`PythonError::Unavailable`] naming the package that failed and why
/// (unknown, compiled code, a hash mismatch, a bound), or pip's absence.
pub fn install(
    requirements: &[String],
    on_stack: bool,
) -> Result<Option<PythonPackages>, PythonError> {
    if requirements.is_empty() {
        return Ok(None);
    }
    if requirements.len() > MAX_PACKAGES {
        return Err(PythonError::Unavailable(format!(
            "python_packages: {} requirements (at most {MAX_PACKAGES})",
            requirements.len()
        )));
    }
    for requirement in requirements {
        check_requirement(requirement).map_err(PythonError::Unavailable)?;
    }
    let manifest = stack_manifest(on_stack)?;
    let dir = packages_dir(requirements, on_stack);
    // Another process installing the same list finishes first; then its
    // install is reused.
    let _maker = crate::makers::Maker::take(
        &crate::module::cache_dir(),
        &lock_entry(requirements, on_stack),
        "this python_packages install",
    )?;
    if dir.join("installed.json").is_file() {
        tracing::info!("python_packages: reusing {}", dir.display());
        return read_installed(&dir).map(Some);
    }
    let started = Instant::now();
    let _step = crate::progress::Step::begin("installing python_packages with pip");
    tracing::info!(
        "python_packages: resolving {} with pip and installing the wheels (seconds; cached at {})",
        requirements.join(" "),
        dir.display()
    );
    let root = cache_dir();
    std::fs::create_dir_all(root.join("python-wheels")).map_err(|err| {
        PythonError::Unavailable(format!(
            "python_packages: cannot create {}: {err}",
            root.display()
        ))
    })?;
    let tmp = root.join(format!(
        ".python-packages-{}.tmp-{}",
        packages_key(requirements, on_stack),
        crate::random_token()
    ));
    code_runner_core::create_private_dir(&tmp).map_err(|err| {
        PythonError::Unavailable(format!(
            "python_packages: cannot create {}: {err}",
            tmp.display()
        ))
    })?;
    let ran = run_installer(
        &tmp,
        &root.join("python-wheels"),
        manifest.as_deref(),
        requirements,
    );
    if let Err(err) = ran {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(err);
    }
    if let Err(err) = std::fs::rename(&tmp, &dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        // Another process installing the same list finished first: use its.
        if !dir.join("installed.json").is_file() {
            return Err(PythonError::Unavailable(format!(
                "python_packages: cannot move the install to {}: {err}",
                dir.display()
            )));
        }
    }
    let packages = read_installed(&dir)?;
    tracing::info!(
        "python_packages: installed {} in {} ms",
        packages.installed.join(" "),
        started.elapsed().as_millis()
    );
    Ok(Some(packages))
}

fn run_installer(
    out: &Path,
    wheels: &Path,
    stack: Option<&Path>,
    requirements: &[String],
) -> Result<(), PythonError> {
    let python = std::env::var(PIP_PYTHON_ENV).unwrap_or_else(|_| "python3".into());
    let fail = |what: String| PythonError::Unavailable(format!("python_packages: {what}"));
    let finished = code_runner_core::child::run_bounded(
        Command::new(&python)
            .arg("-c")
            .arg(INSTALLER)
            .arg(out)
            .arg(wheels)
            .arg(TARGET_PYTHON)
            .arg(stack.map_or_else(
                || std::ffi::OsString::from("-"),
                |m| m.as_os_str().to_owned(),
            ))
            .args(requirements),
        &format!(
            "{python} (pip installs the packages; set {PIP_PYTHON_ENV} to a python3 with pip)"
        ),
        INSTALL_TIMEOUT,
        MAX_STDERR_BYTES,
    )
    .map_err(|why| fail(format!("installing {}: {why}", requirements.join(" "))))?;
    let (status, text) = (finished.status, finished.stderr);
    if status.success() {
        return Ok(());
    }
    let message = text
        .lines()
        .rev()
        .find(|line| line.starts_with("python_packages:"))
        .map(str::to_string)
        .unwrap_or_else(|| {
            let tail = code_runner_core::child::tail(&text, 2000);
            format!("the installer failed ({status}): {tail}")
        });
    Err(PythonError::Unavailable(message))
}

fn read_installed(dir: &Path) -> Result<PythonPackages, PythonError> {
    let fail = |err: &dyn std::fmt::Display| {
        PythonError::Unavailable(format!(
            "python_packages: {} is damaged ({err}); remove it to install again",
            dir.display()
        ))
    };
    let text = std::fs::read_to_string(dir.join("installed.json")).map_err(|e| fail(&e))?;
    let parsed: serde_json::Value = serde_json::from_str(&text).map_err(|e| fail(&e))?;
    let named = |key: &str| {
        let mut named: Vec<String> = parsed[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| {
                        Some(format!(
                            "{}=={}",
                            item["name"].as_str()?,
                            item["version"].as_str()?
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        named.sort();
        named
    };
    let (installed, provided) = (named("installed"), named("provided"));
    let site_packages = dir.join("site-packages");
    if !site_packages.is_dir() {
        return Err(fail(&"no site-packages"));
    }
    Ok(PythonPackages {
        site_packages,
        lock_sha256: sha256_file(&dir.join("lock.txt"))?,
        installed,
        provided,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options, URLs and paths are not requirements: pip must never see them.
    #[test]
    fn requirements_are_names_and_specifiers_only() {
        for good in [
            "tabulate==0.9.0",
            "beautifulsoup4>=4.12",
            "requests[socks]~=2.31",
            "attrs",
        ] {
            assert!(check_requirement(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-r/etc/passwd",
            "--index-url=http://x",
            "pkg @ https://x/y.whl",
            "./local",
            "a\nb",
        ] {
            assert!(check_requirement(bad).is_err(), "{bad:?}");
        }
        assert!(check_requirement(&"a".repeat(MAX_REQUIREMENT_CHARS + 1)).is_err());
    }

    /// The unpacker's bounds, on wheels made to break them: each is refused
    /// with its reason before anything lands outside `site-packages`, and a
    /// good wheel lands where `import` finds it.
    #[test]
    fn the_unpacker_refuses_unsafe_wheels() {
        const CASES: &str = r##"
import os, stat, sys, tempfile, types, zipfile
m = types.ModuleType("install")
exec(compile(os.environ["INSTALLER"], "install.py", "exec"), m.__dict__)
WHEEL = ("w-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")

def case(entries, expect):
    work = tempfile.mkdtemp()
    path = os.path.join(work, "w-1.0-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries:
            if isinstance(data, zipfile.ZipInfo):
                z.writestr(data, "target")
            else:
                z.writestr(name, data)
    site = os.path.join(work, "site")
    os.makedirs(site)
    try:
        m.unpack("w", path, site, [m.MAX_TOTAL_BYTES])
        outcome = "installed"
    except m.Refused as err:
        outcome = str(err)
    assert expect in outcome, (expect, outcome)
    outside = [f for f in os.listdir(work) if f not in ("site", os.path.basename(path))]
    assert not outside, outside
    return site

link = zipfile.ZipInfo("w/link")
link.external_attr = (stat.S_IFLNK | 0o777) << 16
case([WHEEL, ("../evil.py", "x")], "unsafe path")
case([WHEEL, ("/etc/evil.py", "x")], "unsafe path")
case([WHEEL, ("w/../../evil.py", "x")], "unsafe path")
case([WHEEL, ("w/link", link)], "symlink")
case([WHEEL, ("w/_speedups.cpython-314-wasm32-wasi.so", "x")], "compiled code")
case([("w-1.0.dist-info/WHEEL", "Root-Is-Purelib: false\n"), ("w/a.py", "")], "not a purelib")
case([WHEEL] + [(f"w/{i}.py", "") for i in range(m.MAX_ENTRIES)], "entries")
case([WHEEL, ("w/a.py", "1"), ("w/./a.py", "2")], "already wrote")
site = case([WHEEL, ("w/__init__.py", "x = 1"), ("w-1.0.data/purelib/extra.py", ""),
             ("w-1.0.data/scripts/tool", "#!/bin/sh")], "installed")
assert sorted(os.listdir(site)) == ["extra.py", "w", "w-1.0.dist-info"], os.listdir(site)
try:
    m.check_tag("w", "w-1.0-cp314-cp314-manylinux_2_28_x86_64.whl")
    raise AssertionError("a compiled tag passed")
except m.Refused as err:
    assert "compiled code" in str(err), err
print("all refused")
"##;
        let python = std::env::var(PIP_PYTHON_ENV).unwrap_or_else(|_| "python3".into());
        let output = Command::new(python)
            .arg("-c")
            .arg(CASES)
            .env("INSTALLER", INSTALLER)
            .output()
            .expect("python3 runs the installer (as it must for python_packages)");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "all refused"
        );
    }

    /// The key follows the list: a changed list is another install (and image).
    #[test]
    fn the_key_changes_with_the_list() {
        let one = vec!["tabulate==0.9.0".to_string()];
        let two = vec!["tabulate==0.9.0".to_string(), "attrs".to_string()];
        assert_eq!(packages_key(&one, false), packages_key(&one.clone(), false));
        assert_ne!(packages_key(&one, false), packages_key(&two, false));
    }
}
