//! Which of the operator's packages the interpreter shadows. `/packages`
//! is last on `sys.path`, so the standard library and (in the data
//! interpreter) the data stack win over a package of the same name: the
//! stack's modules are imported into the image, and a package replacing
//! one they import (`six`, `packaging`, …) could break them. That is the
//! rule; this module makes it visible instead of silent: a listed package
//! the interpreter already has in another version is named, with what an
//! import really gives, for the start-up log, `/healthz` and the texts a
//! model reads.
//!
//! Two sources say what the interpreter has: the data stack's `MANIFEST`
//! (`package <name> <version>` per distribution it ships), matched by
//! normalised distribution name; and the interpreter's own library (the
//! lean snapshot's `lib/` directory, or the data stack's `python315.zip`:
//! the standard library and the stack's modules), matched by the package's
//! top-level modules. Both are artifacts checked against their hashes.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::PythonPackages;

/// Distribution names compare as pip does: case-insensitive, and `-`,
/// `_` and `.` the same.
fn normalise(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// The distributions the data stack ships, by normalised name: (name, version).
fn data_stack(data_dir: &Path) -> HashMap<String, (String, String)> {
    let text = std::fs::read_to_string(data_dir.join("MANIFEST")).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut parts = line.strip_prefix("package ")?.split_whitespace();
            let (name, version) = (parts.next()?, parts.next()?);
            Some((normalise(name), (name.to_string(), version.to_string())))
        })
        .collect()
}

/// The top-level module names in a directory (`x.py`, `x/`), leaving out
/// metadata and caches.
fn top_level(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            module_name(&name, entry.path().is_dir())
        })
        .collect()
}

/// A top-level module's name from the first part of a path in a library
/// (`json`, `enum.py`, `enum.pyc`), if it names an importable module.
fn module_name(first: &str, is_dir: bool) -> Option<String> {
    let module = match first
        .strip_suffix(".py")
        .or_else(|| first.strip_suffix(".pyc"))
    {
        Some(module) => module,
        None if is_dir => first,
        None => return None,
    };
    (!module.is_empty() && !module.contains(['.', '-']) && !module.starts_with("__"))
        .then(|| module.to_string())
}

/// The top-level modules of a library: a directory, or a zip archive
/// (read from its central directory; a malformed one gives none).
fn library(path: &Path) -> BTreeSet<String> {
    if path.is_dir() {
        return top_level(path);
    }
    std::fs::read(path)
        .map(|bytes| zip_top_level(&bytes))
        .unwrap_or_default()
}

/// The top-level modules named by a zip archive's central directory.
fn zip_top_level(bytes: &[u8]) -> BTreeSet<String> {
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut found = BTreeSet::new();
    // The end record is in the last 22 + 65535 bytes (its comment's cap).
    let tail = bytes.len().saturating_sub(22 + 0xffff);
    let Some(end) = (tail..bytes.len().saturating_sub(21))
        .rev()
        .find(|&at| u32_at(at) == Some(0x0605_4b50))
    else {
        return found;
    };
    let (Some(entries), Some(mut at)) = (u16_at(end + 10), u32_at(end + 16)) else {
        return found;
    };
    for _ in 0..entries {
        if u32_at(at) != Some(0x0201_4b50) {
            break;
        }
        let (Some(name_len), Some(extra), Some(comment)) =
            (u16_at(at + 28), u16_at(at + 30), u16_at(at + 32))
        else {
            break;
        };
        let Some(name) = bytes.get(at + 46..at + 46 + name_len) else {
            break;
        };
        let name = String::from_utf8_lossy(name);
        let (first, rest) = name.split_once('/').unwrap_or((&name, ""));
        if let Some(module) = module_name(
            first,
            name.contains('/') && !rest.is_empty() || name.ends_with('/'),
        ) {
            found.insert(module);
        }
        at += 46 + name_len + extra + comment;
    }
    found
}

/// The note for `requirement` (distribution `name`, `version` when pinned)
/// when the stack ships that distribution in another version, or unpinned.
fn stack_note(
    requirement: &str,
    name: &str,
    version: Option<&str>,
    stack: &HashMap<String, (String, String)>,
) -> Option<String> {
    let (stack_name, stack_version) = stack.get(&normalise(name))?;
    (version != Some(stack_version.as_str())).then(|| {
        format!(
            "{requirement}: the data stack's {stack_name} {stack_version} is what an import gives (the stack wins over /packages)"
        )
    })
}

/// What can be said before an install, from the configured `requirements`
/// alone: those naming a distribution the data stack in `data_dir` ships in
/// another version (or unpinned). The install's [`shadowed`] says the rest.
pub fn shadowed_requirements(requirements: &[String], data_dir: &Path) -> Vec<String> {
    let stack = data_stack(data_dir);
    requirements
        .iter()
        .filter_map(|requirement| {
            let end = requirement
                .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
                .unwrap_or(requirement.len());
            let (name, rest) = requirement.split_at(end);
            let version = rest.trim().strip_prefix("==").map(str::trim);
            stack_note(requirement, name, version, &stack)
        })
        .collect()
}

/// The operator's packages the interpreter shadows, each as a sentence
/// (`tabulate==0.9.0: the data stack's tabulate 0.10.0 is what an import
/// gives …`). `data_dir` is the data stack's directory when python runs it;
/// `library` the interpreter's own library (a directory or a zip), if known.
pub fn shadowed(
    packages: &PythonPackages,
    data_dir: Option<&Path>,
    library_path: Option<&Path>,
) -> Vec<String> {
    let stack = data_dir.map(data_stack).unwrap_or_default();
    let own = library_path.map(library).unwrap_or_default();
    let mine = top_level(&packages.site_packages);
    let mut notes = Vec::new();
    // Modules of a listed distribution the stack ships (in any version) are
    // said once, by the distribution, not again as modules.
    let mut said = BTreeSet::new();
    for installed in &packages.installed {
        let Some((name, version)) = installed.split_once("==") else {
            continue;
        };
        if stack.contains_key(&normalise(name)) {
            said.insert(normalise(name).replace('-', "_"));
        }
        notes.extend(stack_note(installed, name, Some(version), &stack));
    }
    for module in mine.intersection(&own) {
        if !said.contains(&module.to_ascii_lowercase()) {
            notes.push(format!(
                "/packages/{module}: the interpreter's own `{module}` is what `import {module}` gives (the standard library and the stack win over /packages)"
            ));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listed package the stack ships in another version is named with
    /// what an import gives; the same version, or one the stack lacks, is
    /// not; a module named as the standard library's is.
    #[test]
    fn shadowed_packages_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (data, lib, site) = (
            dir.path().join("data"),
            dir.path().join("lib"),
            dir.path().join("site"),
        );
        for d in [&data, &lib, &site] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(
            data.join("MANIFEST"),
            "python 3.15.0\npackage tabulate 0.10.0\npackage Six 1.17.0\npin x y\n",
        )
        .unwrap();
        std::fs::write(lib.join("enum.py"), "").unwrap();
        std::fs::create_dir_all(lib.join("json")).unwrap();
        std::fs::write(site.join("enum.py"), "").unwrap();
        std::fs::write(site.join("tabulate.py"), "").unwrap();
        std::fs::create_dir_all(site.join("roman-4.2.dist-info")).unwrap();
        let packages = PythonPackages {
            site_packages: site,
            lock_sha256: String::new(),
            installed: vec![
                "enum34==1.1.10".into(),
                "roman==4.2".into(),
                "six==1.17.0".into(),
                "tabulate==0.9.0".into(),
            ],
        };
        let notes = shadowed(&packages, Some(&data), Some(&lib));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("tabulate==0.9.0: the data stack's tabulate 0.10.0"),
            "{notes:?}"
        );
        assert!(notes[1].contains("interpreter's own `enum`"), "{notes:?}");
        assert!(shadowed(&packages, None, None).is_empty());
        // Before the install, from the list alone: a pinned other version
        // and an unpinned requirement are said; the stack's own version is not.
        let listed = ["tabulate==0.9.0", "six == 1.17.0", "SIX>=1", "roman==4.2"].map(String::from);
        let notes = shadowed_requirements(&listed, &data);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("tabulate==0.9.0: the data stack's tabulate 0.10.0"),
            "{notes:?}"
        );
        assert!(
            notes[1].starts_with("SIX>=1: the data stack's Six 1.17.0"),
            "{notes:?}"
        );
    }

    /// A central directory of `names` and its end record: what the zip
    /// reader reads (no file data).
    fn central_directory(names: &[&str]) -> Vec<u8> {
        let mut bytes = b"PK\x03\x04 local data the reader skips".to_vec();
        let start = bytes.len();
        for name in names {
            let mut header = vec![0u8; 46];
            header[..4].copy_from_slice(&0x0201_4b50u32.to_le_bytes());
            header[28..30].copy_from_slice(&u16::try_from(name.len()).unwrap().to_le_bytes());
            bytes.extend(header);
            bytes.extend(name.as_bytes());
        }
        let mut end = vec![0u8; 22];
        end[..4].copy_from_slice(&0x0605_4b50u32.to_le_bytes());
        end[10..12].copy_from_slice(&u16::try_from(names.len()).unwrap().to_le_bytes());
        end[16..20].copy_from_slice(&u32::try_from(start).unwrap().to_le_bytes());
        bytes.extend(end);
        bytes
    }

    /// The data stack's library is a zip: its top-level modules (files,
    /// packages, directories named only by their entries) are read from
    /// its central directory; metadata and malformed archives give none.
    #[test]
    fn a_zip_library_names_its_top_level_modules() {
        let zip = central_directory(&[
            "enum.pyc",
            "json/",
            "json/__init__.pyc",
            "numpy/core/x.pyc",
            "numpy-2.5.2.dist-info/METADATA",
            "__future__.pyc",
            "README.txt",
        ]);
        let found: Vec<_> = zip_top_level(&zip).into_iter().collect();
        assert_eq!(found, ["enum", "json", "numpy"]);
        assert!(zip_top_level(&zip[..zip.len() - 1]).is_empty());
        assert!(zip_top_level(b"not a zip").is_empty());
        let mut cut = zip.clone();
        let entries = cut.len() - 22 + 10;
        cut[entries] = 0xff; // more entries than the directory holds
        assert_eq!(zip_top_level(&cut).len(), 3);
    }
}
