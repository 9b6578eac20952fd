//! A kept data instance's whole state between turns, captured and put back
//! (issue 47): what a snapshot of a python session is.
//!
//! Between turns no wasm frame is live, so the interpreter's state is its
//! linear memory, its mutable globals, its `/work` and its clock. The image
//! has one mutable global, `__stack_pointer`, which every return from the
//! `turn` export leaves at its image value ([`check_globals`] refuses an
//! image with any other), so the memory's pages that differ from the
//! image's, its size, `/work` and the clock's reading are all of it:
//!
//! - `pages`: for each page (4 KiB) whose 64-bit hash differs from the
//!   image's (hashed once per engine from a fresh instance), its index and
//!   bytes; pages past the image's memory that hold anything. Only the
//!   pages the kernel's page table says may have changed are hashed
//!   ([`super::pagemap`]); the others are the image's;
//! - `meta`: the memory's size, the monotonic clock's reading, `memory_mb`;
//! - `work`: `/work`'s regular files, directories and symlinks.
//!
//! Putting it back: a fresh instance of the same image grows to the size
//! and takes the pages; `/work` is written before the instance is made (so
//! its quota recounts it); the clock continues from its reading.

use std::hash::{DefaultHasher, Hasher};
use std::path::{Component, Path};
use std::time::Duration;

use code_runner_core::RunnerError;

use super::session::DataInstance;

/// Bytes of a wasm page the snapshot works in (the OS page, not wasm's 64 KiB).
const PAGE: usize = 4096;
/// The most `/work` entries a snapshot holds.
const MAX_WORK_ENTRIES: usize = 100_000;

/// The snapshot's sections, as `code_runner_snapshot` stores them.
pub type Sections = code_runner_core::SnapshotSections;

/// What the memory's size, clock and limit were.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Meta {
    memory_bytes: u64,
    clock_ns: u64,
    memory_mb: u64,
}

/// One hash per page of the image's memory.
pub fn page_hashes(memory: &[u8]) -> Vec<u64> {
    memory.chunks(PAGE).map(hash_page).collect()
}

fn hash_page(page: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(page);
    hasher.finish()
}

/// Refuses a snapshot of an instance that holds open files (their host
/// descriptors cannot be written down).
pub fn check_quiet(instance: &DataInstance) -> Result<(), RunnerError> {
    let held = instance.held_files();
    if held > 0 {
        return Err(RunnerError::invalid(format!(
            "the runtime holds {held} open file(s); close them (or end the `with` block) before a snapshot"
        )));
    }
    Ok(())
}

/// The instance's state, against the image's page hashes.
pub fn capture(
    instance: &mut DataInstance,
    pristine: &[u64],
    work: &Path,
    memory_mb: u64,
) -> Result<Sections, RunnerError> {
    check_quiet(instance)?;
    let memory = instance.memory_bytes();
    // Only pages the page table says may have changed are compared.
    let candidates = super::pagemap::candidates(memory);
    let mut pages = Vec::new();
    for (index, page) in memory.chunks(PAGE).enumerate() {
        if candidates
            .as_ref()
            .is_some_and(|flags| !flags.get(index).copied().unwrap_or(true))
        {
            continue;
        }
        let changed = match pristine.get(index) {
            Some(hash) => hash_page(page) != *hash,
            None => page.iter().any(|b| *b != 0),
        };
        if changed {
            pages.extend_from_slice(&(index as u32).to_le_bytes());
            pages.extend_from_slice(page);
            if page.len() < PAGE {
                pages.resize(pages.len() + PAGE - page.len(), 0);
            }
        }
    }
    let meta = Meta {
        memory_bytes: memory.len() as u64,
        clock_ns: u64::try_from(instance.clock_reading().as_nanos()).unwrap_or(u64::MAX),
        memory_mb,
    };
    let meta = serde_json::to_vec(&meta).map_err(|err| RunnerError::engine(err.to_string()))?;
    Ok(vec![
        ("meta".into(), meta),
        ("pages".into(), pages),
        ("work".into(), write_work(work)?),
    ])
}

/// The section named `name`.
fn section<'a>(sections: &'a Sections, name: &str) -> Result<&'a [u8], RunnerError> {
    sections
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, bytes)| bytes.as_slice())
        .ok_or_else(|| RunnerError::invalid(format!("the snapshot has no {name} section")))
}

/// Empties `work` (its entries, not itself), for a checkpoint's `/work` to
/// be written back in their place. Links are removed, never followed.
pub fn clear_work(work: &Path) -> Result<(), RunnerError> {
    let entries = std::fs::read_dir(work)
        .map_err(|err| RunnerError::engine(format!("cannot read /work: {err}")))?;
    for entry in entries {
        let entry =
            entry.map_err(|err| RunnerError::engine(format!("cannot read /work: {err}")))?;
        let path = entry.path();
        let removed = match entry.file_type() {
            Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        removed.map_err(|err| RunnerError::engine(format!("cannot empty /work: {err}")))?;
    }
    Ok(())
}

/// Writes the snapshot's `/work` under `work` (before the instance is made).
pub fn restore_work(sections: &Sections, work: &Path) -> Result<(), RunnerError> {
    read_work(section(sections, "work")?, work)
}

/// Puts the memory and clock back into a fresh instance of the same image.
pub fn apply(instance: &mut DataInstance, sections: &Sections) -> Result<(), RunnerError> {
    let meta: Meta = serde_json::from_slice(section(sections, "meta")?)
        .map_err(|err| RunnerError::invalid(format!("the snapshot's meta: {err}")))?;
    instance.grow_to(meta.memory_bytes as usize)?;
    let pages = section(sections, "pages")?;
    if !pages.len().is_multiple_of(PAGE + 4) {
        return Err(RunnerError::invalid("the snapshot's pages are not whole"));
    }
    let memory = instance.memory_bytes_mut();
    for record in pages.chunks(PAGE + 4) {
        let index = u32::from_le_bytes([record[0], record[1], record[2], record[3]]) as usize;
        let at = index * PAGE;
        let end = (at + PAGE).min(memory.len());
        if at >= memory.len() {
            return Err(RunnerError::invalid("a snapshot page lies past its memory"));
        }
        memory[at..end].copy_from_slice(&record[4..4 + (end - at)]);
    }
    instance.set_clock_reading(Duration::from_nanos(meta.clock_ns));
    Ok(())
}

/// `/work` as records: kind (0 dir, 1 file, 2 symlink), path, bytes.
fn write_work(root: &Path) -> Result<Vec<u8>, RunnerError> {
    let fail = |err: std::io::Error| RunnerError::engine(format!("reading /work: {err}"));
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut entries = 0;
    while let Some(dir) = stack.pop() {
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing {
            let entry = entry.map_err(fail)?;
            entries += 1;
            if entries > MAX_WORK_ENTRIES {
                return Err(RunnerError::invalid(format!(
                    "/work holds over {MAX_WORK_ENTRIES} entries"
                )));
            }
            let path = entry.path();
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let kind = entry.file_type().map_err(fail)?;
            let (tag, bytes) = if kind.is_symlink() {
                (
                    2u8,
                    std::fs::read_link(&path)
                        .map_err(fail)?
                        .to_string_lossy()
                        .into_owned()
                        .into_bytes(),
                )
            } else if kind.is_dir() {
                stack.push(path.clone());
                (0u8, Vec::new())
            } else if kind.is_file() {
                (1u8, std::fs::read(&path).map_err(fail)?)
            } else {
                continue;
            };
            out.push(tag);
            out.extend_from_slice(&(relative.len() as u32).to_le_bytes());
            out.extend_from_slice(relative.as_bytes());
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(&bytes);
        }
    }
    Ok(out)
}

/// Writes records under `root`: every path is relative and plain (no
/// `..`, no root); directories first, then files, then symlinks, so no
/// write ever passes through a link (the guest's layer resolves links
/// within `/work`).
fn read_work(mut bytes: &[u8], root: &Path) -> Result<(), RunnerError> {
    let bad = || RunnerError::invalid("the snapshot's /work is damaged");
    let fail = |err: std::io::Error| RunnerError::engine(format!("writing /work: {err}"));
    fn take<'a>(n: usize, bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
        if bytes.len() < n {
            return None;
        }
        let (head, rest) = bytes.split_at(n);
        *bytes = rest;
        Some(head)
    }
    let mut records = Vec::new();
    while !bytes.is_empty() {
        let tag = take(1, &mut bytes).ok_or_else(bad)?[0];
        let len = u32::from_le_bytes(
            take(4, &mut bytes)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        let path =
            std::str::from_utf8(take(len, &mut bytes).ok_or_else(bad)?).map_err(|_| bad())?;
        let size = u64::from_le_bytes(
            take(8, &mut bytes)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        let body = take(size, &mut bytes).ok_or_else(bad)?;
        let relative = Path::new(path);
        if path.is_empty()
            || relative
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(bad());
        }
        records.push((tag, root.join(relative), body));
    }
    records.sort_by_key(|(tag, path, _)| (*tag, path.components().count()));
    for (tag, target, body) in records {
        match tag {
            0 => code_runner_core::create_private_dir(&target).map_err(fail)?,
            1 => {
                if let Some(parent) = target.parent() {
                    code_runner_core::create_private_dir(parent).map_err(fail)?;
                }
                std::fs::write(&target, body).map_err(fail)?;
            }
            2 => {
                let link = std::str::from_utf8(body).map_err(|_| bad())?;
                std::os::unix::fs::symlink(link, &target).map_err(fail)?;
            }
            _ => return Err(bad()),
        }
    }
    Ok(())
}
