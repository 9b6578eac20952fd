//! Which of the operator's packages the interpreter shadows. `/packages`
//! is last on `sys.path`, so the interpreter's own library (the standard
//! library and, in the data interpreter, the data stack) wins over a module
//! of the same name: the stack's modules are imported into the image, and a
//! package replacing one they import could break them. Distributions the
//! stack ships are never installed into `/packages` (pip resolves against
//! the stack: see `install.py`); what is left is a package whose *modules*
//! the interpreter has (`enum34`'s `enum`). That is the rule; this module
//! makes it visible instead of silent: each such module is named, with what
//! an import really gives, for the start-up log, `/healthz` and the texts a
//! model reads.
//!
//! The interpreter's own library is the lean snapshot's `lib/` directory or
//! the data stack's `python315.zip`, both artifacts checked against their
//! hashes; a zip's names come from its central directory.

use std::collections::BTreeSet;
use std::path::Path;

use crate::PythonPackages;

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

/// The modules of the operator's packages the interpreter shadows, each as
/// a sentence (`/packages/enum: the interpreter's own \`enum\` is what
/// \`import enum\` gives …`). `library_path` is the interpreter's own
/// library (a directory or a zip), if known.
pub fn shadowed(packages: &PythonPackages, library_path: Option<&Path>) -> Vec<String> {
    let own = library_path.map(library).unwrap_or_default();
    let mine = top_level(&packages.site_packages);
    mine.intersection(&own)
        .map(|module| {
            format!(
                "/packages/{module}: the interpreter's own `{module}` is what `import {module}` gives (the standard library and the stack win over /packages)"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module of an installed package that the interpreter's library
    /// also has is named with what an import gives; the others are not.
    #[test]
    fn shadowed_modules_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (lib, site) = (dir.path().join("lib"), dir.path().join("site"));
        for d in [&lib, &site] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(lib.join("enum.py"), "").unwrap();
        std::fs::create_dir_all(lib.join("json")).unwrap();
        std::fs::write(site.join("enum.py"), "").unwrap();
        std::fs::write(site.join("roman.py"), "").unwrap();
        std::fs::create_dir_all(site.join("enum34-1.1.10.dist-info")).unwrap();
        let packages = PythonPackages {
            site_packages: site,
            lock_sha256: String::new(),
            installed: vec!["enum34==1.1.10".into(), "roman==4.2".into()],
            provided: Vec::new(),
        };
        let notes = shadowed(&packages, Some(&lib));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("interpreter's own `enum`"), "{notes:?}");
        assert!(shadowed(&packages, None).is_empty());
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
