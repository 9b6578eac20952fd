//! Which pages of a live instance's memory can differ from its image,
//! read from the kernel's page table (`/proc/self/pagemap`), so that a
//! snapshot compares only those with the image instead of all of memory.
//!
//! The image is a private file mapping and memory past it is private
//! anonymous memory. A page the instance never wrote is then either not
//! there (it reads as the image's bytes, or zeros past the image) or a
//! page of the file; only a page that is private anonymous memory now (a
//! copy made on write, or a copy a pooled reset put back) or is in swap
//! can hold anything else. So those are the candidates; every other page
//! equals the image's. A candidate is still compared (a reset's copy
//! holds the image's bytes).
//!
//! Entries are 64-bit: bit 63 present, bit 62 swapped, bit 61 a file page
//! or shared anonymous memory (Documentation/admin-guide/mm/pagemap.rst);
//! the frame numbers, which an unprivileged process reads as zero, are not
//! used. Anything unexpected (no `/proc`, a short read) answers `None`,
//! and the caller compares every page.

use std::os::unix::fs::FileExt;

const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
const FILE_OR_SHARED: u64 = 1 << 61;
/// Entries read at once (512 KiB of entries cover 256 MiB of memory).
const CHUNK: usize = 64 * 1024;

/// For each 4 KiB page of `memory` (page-aligned), whether it may differ
/// from what a fresh instance of the image holds there; `None` when the
/// page table cannot be read.
pub fn candidates(memory: &[u8]) -> Option<Vec<bool>> {
    const PAGE: usize = 4096;
    let start = memory.as_ptr() as usize;
    // 4 KiB kernel pages (x86-64's); elsewhere every page is compared.
    if !start.is_multiple_of(PAGE) || !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return None;
    }
    let pages = memory.len().div_ceil(PAGE);
    let file = std::fs::File::open("/proc/self/pagemap").ok()?;
    let mut flags = Vec::with_capacity(pages);
    let mut buffer = vec![0u8; CHUNK * 8];
    while flags.len() < pages {
        let take = (pages - flags.len()).min(CHUNK);
        let offset = ((start / PAGE + flags.len()) * 8) as u64;
        let bytes = &mut buffer[..take * 8];
        file.read_exact_at(bytes, offset).ok()?;
        flags.extend(bytes.chunks_exact(8).map(|entry| {
            let entry = u64::from_le_bytes(entry.try_into().unwrap_or_default());
            (entry & SWAPPED != 0) || (entry & PRESENT != 0 && entry & FILE_OR_SHARED == 0)
        }));
    }
    Some(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Anonymous memory: untouched pages are no candidates, written ones are.
    #[test]
    fn written_pages_are_candidates_and_untouched_ones_are_not() {
        let len = 64 * 4096;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap();
        // SAFETY: the mapping is `len` bytes, readable and writable, ours alone.
        let memory = unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) };
        memory[3 * 4096 + 17] = 1;
        memory[40 * 4096] = 2;
        let flags = candidates(memory).expect("the page table reads");
        assert_eq!(flags.len(), 64);
        let written: Vec<usize> = (0..64).filter(|&i| flags[i]).collect();
        assert_eq!(written, [3, 40]);
        // SAFETY: unmaps what was mapped above; `memory` is not used after.
        unsafe { rustix::mm::munmap(ptr, len) }.unwrap();
    }
}
