//! Page tracking in a sandbox process: the two descriptors the python
//! engine's pooled memories reset with (this process's page map and its
//! write-tracking userfaultfd, vendor/README.md's patch 0002), opened before
//! Landlock refuses `/proc/self/pagemap` and before seccomp refuses
//! `userfaultfd`, and the two ioctls on them that the seccomp filter then
//! allows, each on its own descriptor only (docs/security.md).

use std::os::fd::RawFd;

use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};

/// `PAGEMAP_SCAN`: `_IOWR('f', 16, struct pm_scan_arg)`, 96 bytes.
pub(crate) const PAGEMAP_SCAN: u64 = 0xC060_6610;
/// `UFFDIO_REGISTER`: `_IOWR(0xAA, 0x00, struct uffdio_register)`, 32 bytes.
pub(crate) const UFFDIO_REGISTER: u64 = 0xC020_AA00;

/// The descriptors the engines' page tracking holds, found after the
/// engines' hook opened them.
#[derive(Debug, Default, Clone, Copy)]
pub struct PageTracking {
    pagemap: Option<RawFd>,
    uffd: Option<RawFd>,
}

impl PageTracking {
    /// Runs `open` (the engines' hook, on the only thread, after the other
    /// descriptors are closed) and finds what it opened in `/proc/self/fd`:
    /// what to report, and the descriptors the filter names.
    pub(crate) fn open(
        open: impl FnOnce() -> Result<String, String>,
    ) -> (Result<String, String>, Self) {
        let opened = open();
        let mut found = Self::default();
        let entries = std::fs::read_dir("/proc/self/fd").into_iter().flatten();
        for entry in entries.flatten() {
            let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            match target.to_str() {
                Some("anon_inode:[userfaultfd]") => found.uffd = Some(fd),
                Some(t) if t.starts_with("/proc/") && t.ends_with("/pagemap") => {
                    found.pagemap = Some(fd)
                }
                _ => {}
            }
        }
        let report = opened.map(|detail| {
            let mut names = Vec::new();
            if let Some(fd) = found.pagemap {
                names.push(format!("PAGEMAP_SCAN on the page map (descriptor {fd})"));
            }
            if let Some(fd) = found.uffd {
                names.push(format!(
                    "UFFDIO_REGISTER on the userfaultfd (descriptor {fd})"
                ));
            }
            match names.is_empty() {
                true => detail,
                false => format!("{detail}; seccomp allows {} only", names.join(" and ")),
            }
        });
        (report, found)
    }

    /// The page map's and the userfaultfd's descriptors, where open.
    pub(crate) fn descriptors(&self) -> (Option<RawFd>, Option<RawFd>) {
        (self.pagemap, self.uffd)
    }

    /// The filter's `ioctl` rules for these descriptors: each request on its
    /// own descriptor, nothing else on either.
    pub(crate) fn ioctl_rules(&self) -> Result<Vec<SeccompRule>, String> {
        let err = |e: seccompiler::BackendError| e.to_string();
        let pairs = [(self.pagemap, PAGEMAP_SCAN), (self.uffd, UFFDIO_REGISTER)];
        pairs
            .into_iter()
            .filter_map(|(fd, request)| fd.map(|fd| (fd, request)))
            .map(|(fd, request)| {
                let on_fd =
                    SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, fd as u64);
                let request =
                    SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request);
                SeccompRule::new(vec![on_fd.map_err(err)?, request.map_err(err)?]).map_err(err)
            })
            .collect()
    }
}
