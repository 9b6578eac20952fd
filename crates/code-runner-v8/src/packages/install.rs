//! Installing npm packages for V8 runtimes: the host's `npm` resolves a list
//! into a lock with every tarball's `integrity` (npm checks each tarball
//! against it as it unpacks), install scripts never run, and what npm put
//! down is checked before anything is bundled: a package with an install
//! script, a native addon (`binding.gyp`, `*.node`), a linked or
//! integrity-less entry is refused by name. esbuild (pinned by our own
//! lock in `tool/`, installed once with `npm ci --ignore-scripts`) then
//! bundles the listed packages into ESM (`bundle.mjs`).
//!
//! Everything is built in a temporary directory renamed into place only when
//! all of it worked: `<cache>/node-packages-<key>/` with `lock.json` (npm's
//! lock), `installed.json`, `map.json` and `files/`. The key hashes the list,
//! the registry, the bundler and its lock, so an unchanged list is reused
//! without the registry and a changed one is installed afresh.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// At most this many packages in one list.
pub const MAX_PACKAGES: usize = 64;
/// At most this many characters in one `name@range`.
pub const MAX_SPEC_CHARS: usize = 200;
/// How long one npm or esbuild step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(600);
/// The most of a tool's stderr kept for an error message.
const MAX_STDERR_BYTES: u64 = 256 << 10;
/// The most files and bytes an install's `node_modules` may hold.
const MAX_TREE_FILES: usize = 200_000;
const MAX_TREE_BYTES: u64 = 1 << 30;
/// The largest npm lock read.
const MAX_LOCK_BYTES: u64 = 64 << 20;
/// Environment variable naming the npm binary (default `npm`).
pub const NPM_ENV: &str = "CODE_RUNNER_NPM";
/// Environment variable naming the node binary that runs the bundler (default `node`).
pub const NODE_ENV: &str = "CODE_RUNNER_NODE";

const BUNDLER: &str = include_str!("bundle.mjs");
const TOOL_PACKAGE: &str = include_str!("tool/package.json");
const TOOL_LOCK: &str = include_str!("tool/package-lock.json");

/// What installs a list: its packages, the registry, and whose list it is
/// (`node_packages`, `install`), which every message starts with.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// `name@range` entries.
    pub specs: &'a [String],
    /// The registry to resolve from; `None`: npm's own.
    pub registry: Option<&'a str>,
    /// Whose list it is, for messages.
    pub what: &'a str,
}

/// Checks one `name@range` (or `name`): an npm package name (scoped or not)
/// and a semver range. Tags other than none, URLs, git, paths, aliases and
/// options are refused: npm must read nothing but the registry.
///
/// # Errors
/// What is wrong, quoting the entry.
pub fn check_spec(spec: &str) -> Result<(), String> {
    let refuse = |why: &str| {
        Err(format!(
            "{spec:?} is not a package like \"zod@3\" or \"lodash-es@4.17.21\": {why}"
        ))
    };
    if spec.is_empty() || spec.len() > MAX_SPEC_CHARS {
        return refuse(&format!("1 to {MAX_SPEC_CHARS} characters"));
    }
    let (name, range) = split_spec(spec);
    let name_ok = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && !part.starts_with('_')
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._~".contains(c))
    };
    let named = match name.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('/')
            .is_some_and(|(scope, bare)| name_ok(scope) && name_ok(bare)),
        None => name_ok(name),
    };
    if !named || name.len() > 214 {
        return refuse(
            "the name must be an npm package name (lowercase, digits, - . _ ~, optionally @scope/)",
        );
    }
    if let Some(range) = range {
        let allowed = |c: char| c.is_ascii_alphanumeric() || " .*^~<>=|-+".contains(c);
        if range.is_empty() || !range.chars().all(allowed) || range.contains("npm") {
            return refuse("the version must be a semver range (4, ^4.1, 4.17.21, >=3 <4)");
        }
    }
    Ok(())
}

/// `name` and the range after its `@` (a scope's `@` is part of the name).
pub fn split_spec(spec: &str) -> (&str, Option<&str>) {
    let at = if let Some(rest) = spec.strip_prefix('@') {
        rest.find('@').map(|i| i + 1)
    } else {
        spec.find('@')
    };
    match at {
        Some(i) => (&spec[..i], Some(&spec[i + 1..])),
        None => (spec, None),
    }
}

/// Installs and bundles `request`'s list (or finds its install), answering
/// the directory [`super::PackageSet::open`] reads.
///
/// # Errors
/// A message naming the package that failed and why (unknown, no matching
/// version, an integrity mismatch, an install script, a native addon, a
/// bound), or npm's or node's absence.
pub fn install(request: &Request<'_>) -> Result<PathBuf, String> {
    install_in(request, &code_runner_core::cache_dir())
}

/// [`install`] under the cache root `root` (the benchmark measures a cold
/// set-up in a fresh one).
///
/// # Errors
/// As [`install`].
pub fn install_in(request: &Request<'_>, root: &Path) -> Result<PathBuf, String> {
    let what = request.what;
    let fail = |why: String| format!("{what}: {why}");
    if request.specs.len() > MAX_PACKAGES {
        return Err(fail(format!(
            "{} packages (at most {MAX_PACKAGES})",
            request.specs.len()
        )));
    }
    let mut names = Vec::new();
    for spec in request.specs {
        check_spec(spec).map_err(&fail)?;
        let name = split_spec(spec).0.to_string();
        if names.contains(&name) {
            return Err(fail(format!("{name} is listed twice")));
        }
        names.push(name);
    }
    let key = list_key(request);
    let dir = root.join(format!("node-packages-{key}"));
    let _lock = lock(root, &format!("node-packages-{key}"))?;
    if dir.join("installed.json").is_file() {
        tracing::info!("{what}: reusing {}", dir.display());
        return Ok(dir);
    }
    let started = Instant::now();
    tracing::info!(
        "{what}: resolving {} with npm, checking and bundling (seconds; cached at {})",
        request.specs.join(" "),
        dir.display()
    );
    // The bundler is ours, pinned by our lock: it comes from the host npm's
    // own registry (its configuration, a mirror included), never from the
    // list's `npm_registry`, which serves the operator's packages.
    let esbuild = tool(root).map_err(&fail)?;
    let tmp = root.join(format!(".node-packages-{key}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let built = build(request, &names, &esbuild, root, &tmp).map_err(&fail);
    if let Err(err) = built {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(err);
    }
    let out = tmp.join("out");
    if let Err(err) = std::fs::rename(&out, &dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(fail(format!(
            "cannot move the install to {}: {err}",
            dir.display()
        )));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    tracing::info!(
        "{what}: installed {} in {} ms",
        request.specs.join(" "),
        started.elapsed().as_millis()
    );
    Ok(dir)
}

/// The list's cache key: 16 hex digits over what decides its bundle.
fn list_key(request: &Request<'_>) -> String {
    let mut specs = request.specs.to_vec();
    specs.sort();
    let mut hash = Sha256::new();
    hash.update(json!([specs, request.registry, BUNDLER, TOOL_LOCK]).to_string());
    hex(&hash.finalize()[..8])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Holds an advisory lock on `<cache>/locks/<entry>.lock`, so two processes
/// installing one list make it once.
fn lock(root: &Path, entry: &str) -> Result<Option<File>, String> {
    let path = root.join("locks").join(format!("{entry}.lock"));
    let opened = path
        .parent()
        .map_or(Ok(()), code_runner_core::create_private_dir)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
        });
    match opened {
        Ok(file) => {
            file.lock()
                .map_err(|err| format!("cannot lock {}: {err}", path.display()))?;
            Ok(Some(file))
        }
        // A confined sandbox process reads what its worker made.
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => Ok(None),
        Err(err) if err.raw_os_error() == Some(30) => Ok(None),
        Err(err) => Err(format!("cannot lock {}: {err}", path.display())),
    }
}

fn npm(registry: Option<&str>, root: &Path) -> Command {
    let mut command = Command::new(std::env::var(NPM_ENV).unwrap_or_else(|_| "npm".into()));
    command
        .env("npm_config_cache", root.join("npm-cache"))
        .env("npm_config_ignore_scripts", "true")
        .env("npm_config_audit", "false")
        .env("npm_config_fund", "false")
        .env("npm_config_update_notifier", "false")
        .env("npm_config_loglevel", "error");
    if let Some(registry) = registry {
        command.env("npm_config_registry", registry);
    }
    command
}

/// esbuild, installed once from the pinned lock in `tool/`: its JS entry.
fn tool(root: &Path) -> Result<PathBuf, String> {
    let mut hash = Sha256::new();
    hash.update(TOOL_LOCK);
    let key = hex(&hash.finalize()[..8]);
    let dir = root.join(format!("node-bundler-{key}"));
    let entry = dir.join("node_modules/esbuild/lib/main.js");
    let _lock = lock(root, &format!("node-bundler-{key}"))?;
    if entry.is_file() {
        return Ok(entry);
    }
    let tmp = root.join(format!(".node-bundler-{key}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let made = (|| {
        code_runner_core::create_private_dir(&tmp).map_err(|err| err.to_string())?;
        std::fs::write(tmp.join("package.json"), TOOL_PACKAGE).map_err(|e| e.to_string())?;
        std::fs::write(tmp.join("package-lock.json"), TOOL_LOCK).map_err(|e| e.to_string())?;
        run(
            npm(None, root).arg("ci").current_dir(&tmp),
            "npm ci (installing the bundler, esbuild, from its lock)",
        )?;
        std::fs::rename(&tmp, &dir).map_err(|err| err.to_string())
    })();
    if let Err(why) = made {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!("cannot install the bundler: {why}"));
    }
    Ok(entry)
}

/// Runs a tool, answering its stderr's tail as the error when it fails.
fn run(command: &mut Command, what: &str) -> Result<String, String> {
    let finished =
        code_runner_core::child::run_bounded(command, what, STEP_TIMEOUT, MAX_STDERR_BYTES)?;
    if finished.status.success() {
        return Ok(finished.stderr);
    }
    Err(explain(&finished.stderr).unwrap_or_else(|| {
        format!(
            "{what} failed ({}): {}",
            finished.status,
            code_runner_core::child::tail(&finished.stderr, 2000)
        )
    }))
}

/// npm's failures a reader needs in one line: which package and why.
fn explain(stderr: &str) -> Option<String> {
    let code = stderr
        .lines()
        .find_map(|line| line.strip_prefix("npm error code "))?
        .trim();
    let said: Vec<&str> = stderr
        .lines()
        .filter_map(|line| line.strip_prefix("npm error "))
        .filter(|line| !line.starts_with("code ") && !line.starts_with("A complete log"))
        .filter(|line| !line.trim().is_empty())
        .take(6)
        .collect();
    let said = code_runner_core::child::tail(&said.join(" "), 800);
    Some(match code {
        "E404" => format!("a package is not in the registry (npm said: {said})"),
        "ETARGET" => format!("no published version matches (npm said: {said})"),
        "EINTEGRITY" => format!(
            "a tarball failed its integrity check: the registry's bytes do not match the integrity it published, so nothing was installed (npm said: {said})"
        ),
        "ERESOLVE" => format!("the packages' dependencies conflict (npm said: {said})"),
        _ => format!("npm failed with {code}: {said}"),
    })
}

fn build(
    request: &Request<'_>,
    names: &[String],
    esbuild: &Path,
    root: &Path,
    tmp: &Path,
) -> Result<(), String> {
    let project = tmp.join("project");
    let out = tmp.join("out");
    code_runner_core::create_private_dir(&project).map_err(|err| err.to_string())?;
    code_runner_core::create_private_dir(&out).map_err(|err| err.to_string())?;
    let dependencies: serde_json::Map<String, Value> = request
        .specs
        .iter()
        .map(|spec| {
            let (name, range) = split_spec(spec);
            (name.to_string(), Value::from(range.unwrap_or("*")))
        })
        .collect();
    let manifest =
        json!({"name": "code-runner-packages", "private": true, "dependencies": dependencies});
    std::fs::write(project.join("package.json"), manifest.to_string())
        .map_err(|e| e.to_string())?;
    run(
        npm(request.registry, root)
            .args(["install", "--omit=dev"])
            .current_dir(&project),
        &format!("npm install {}", request.specs.join(" ")),
    )?;
    let lock_path = project.join("package-lock.json");
    let lock = read_bounded(&lock_path, MAX_LOCK_BYTES)?;
    // Addons first: a `binding.gyp` makes npm mark an install script too,
    // and the addon is the reason to name.
    check_tree(&project.join("node_modules"))?;
    let installed = check_lock(&lock)?;
    let script = tmp.join("bundle.mjs");
    std::fs::write(&script, BUNDLER).map_err(|e| e.to_string())?;
    let mut bundle = Command::new(std::env::var(NODE_ENV).unwrap_or_else(|_| "node".into()));
    bundle
        .arg(&script)
        .arg(esbuild)
        .arg(&project)
        .arg(&out)
        .args(names);
    run(&mut bundle, "esbuild (bundling the packages)")?;
    let listed: Vec<Value> = names
        .iter()
        .map(|name| {
            let version = installed
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            json!({"name": name, "version": version})
        })
        .collect();
    let all: Vec<Value> = installed
        .iter()
        .map(|(name, version)| json!({"name": name, "version": version}))
        .collect();
    let mut hash = Sha256::new();
    hash.update(&lock);
    std::fs::write(out.join("lock.json"), &lock).map_err(|e| e.to_string())?;
    let record = json!({"listed": listed, "installed": all, "lock_sha256": hex(&hash.finalize())});
    std::fs::write(out.join("installed.json"), record.to_string()).map_err(|e| e.to_string())
}

fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = File::open(path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(format!("{} is over {max} bytes", path.display()));
    }
    Ok(bytes)
}

/// Every locked package has an integrity, none is linked, none has an
/// install script. Answers `(name, version)` of each, sorted.
fn check_lock(lock: &[u8]) -> Result<Vec<(String, String)>, String> {
    let parsed: Value =
        serde_json::from_slice(lock).map_err(|err| format!("npm's lock does not parse: {err}"))?;
    let mut found = Vec::new();
    let Some(packages) = parsed["packages"].as_object() else {
        return Err("npm's lock has no packages".into());
    };
    for (path, entry) in packages {
        if path.is_empty() {
            continue;
        }
        let name = entry["name"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| {
                path.rsplit("node_modules/")
                    .next()
                    .unwrap_or(path)
                    .to_string()
            });
        let version = entry["version"].as_str().unwrap_or("").to_string();
        let label = format!("{name}@{version}");
        if entry["link"].as_bool() == Some(true) {
            return Err(format!("{label} is a link, not a registry package"));
        }
        if entry["hasInstallScript"].as_bool() == Some(true) {
            return Err(format!(
                "{label} has an install script (preinstall, install or postinstall); code-runner never runs them, so it does not install packages that need them"
            ));
        }
        if entry["integrity"].as_str().is_none_or(str::is_empty) {
            return Err(format!(
                "{label} has no integrity in npm's lock; every tarball must have one"
            ));
        }
        found.push((name, version));
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// No native addon anywhere in the tree (`binding.gyp`, `*.node`), within
/// bounds on its files and bytes; symlinks are not followed.
fn check_tree(modules: &Path) -> Result<(), String> {
    let mut stack = vec![modules.to_path_buf()];
    let (mut files, mut bytes) = (0usize, 0u64);
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            files += 1;
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
            if files > MAX_TREE_FILES || bytes > MAX_TREE_BYTES {
                return Err(format!(
                    "the packages are over {MAX_TREE_FILES} files or {} MiB installed",
                    MAX_TREE_BYTES >> 20
                ));
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "binding.gyp" || name.ends_with(".node") {
                let owner = package_of(modules, &path);
                return Err(format!(
                    "{owner} has a native addon ({name}): only JavaScript runs in code-runner's V8 runtimes"
                ));
            }
        }
    }
    Ok(())
}

/// The package a file under `node_modules` belongs to (its innermost one).
fn package_of(modules: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(modules).unwrap_or(path);
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let mut owner = String::new();
    let mut i = 0;
    while i < parts.len() {
        if parts[i].starts_with('@') && i + 1 < parts.len() {
            owner = format!("{}/{}", parts[i], parts[i + 1]);
            i += 2;
        } else {
            owner.clone_from(&parts[i]);
            i += 1;
        }
        if parts.get(i).map(String::as_str) != Some("node_modules") {
            break;
        }
        i += 1;
    }
    owner
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names and ranges only: npm must never read a URL, a path, git or an option.
    #[test]
    fn specs_are_names_and_ranges_only() {
        for good in [
            "zod@3",
            "lodash-es@4.17.21",
            "@scope/pkg@^1.2",
            "date-fns",
            "a@>=3 <4",
        ] {
            assert!(check_spec(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Zod@3",
            "zod@",
            "x@npm:y@1",
            "x@git+https://h/x.git",
            "x@file:../y",
            "x@https://h/x.tgz",
            "--registry=http://x",
            "../x",
            "@scope",
            "a\nb@1",
        ] {
            assert!(check_spec(bad).is_err(), "{bad:?}");
        }
        assert_eq!(split_spec("@s/p@1"), ("@s/p", Some("1")));
        assert_eq!(split_spec("p"), ("p", None));
    }

    /// An addon's owner is the innermost package holding it.
    #[test]
    fn an_addon_names_its_package() {
        let root = Path::new("/x/node_modules");
        let of = |p: &str| package_of(root, &root.join(p));
        assert_eq!(of("a/build/x.node"), "a");
        assert_eq!(of("@s/b/binding.gyp"), "@s/b");
        assert_eq!(of("a/node_modules/@s/c/lib/x.node"), "@s/c");
    }
}
