//! Confinement of a sandbox process, applied before it runs guest code.
//!
//! Two steps, because Linux applies some restrictions per thread:
//! [`before_threads`] runs while the process has its main thread only
//! (descriptors, namespaces, rlimits, capabilities, Landlock and
//! `no_new_privs`, which every later thread inherits); [`seccomp()`] runs
//! once the engines are loaded and applies to every thread at once (TSYNC).
//! Each step records what applied and what could not, with the reason: the
//! worker logs it and `/healthz` shows it. Nothing here is fatal: a kernel
//! without Landlock still gets the rest.

use std::path::Path;

use crate::protocol::{Init, Report};
use landlock::{
    ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, path_beneath_rules,
};

mod seccomp;
pub(crate) mod tracking;
pub use seccomp::seccomp;
pub use tracking::PageTracking;

/// The descriptor the worker hands a sandbox process its socket on.
pub const SOCKET_FD: i32 = 3;

fn errno() -> String {
    std::io::Error::last_os_error().to_string()
}

/// Ignores `SIGXFSZ` in this process, so that a write past the host's
/// `RLIMIT_FSIZE` (systemd's `LimitFSIZE=`, `ulimit -f`) fails with `EFBIG`
/// instead of killing the process and every tenant's runtimes in it. The
/// worker calls it when it loads its engines, a sandbox process before it
/// confines itself (guest writes reach files in both).
pub fn ignore_file_size_signal() {
    // SAFETY: SIG_IGN installs no handler; signal() only changes this process's disposition.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
}

/// The first step, on the only thread: closes every descriptor but 0–2 and
/// the socket, lets the engines open what they must before confinement
/// (`open_early`: the page tracking, [`PageTracking`]), enters a new network
/// namespace (a fresh one has only a loopback that is down), lowers the
/// rlimits, drops every capability, and applies Landlock (which sets
/// `no_new_privs` too).
pub fn before_threads(
    init: &Init,
    open_early: impl FnOnce() -> Result<String, String>,
) -> (Report, PageTracking) {
    let mut report = Report::default();
    // SAFETY: close_range only closes descriptors; nothing in this process uses them.
    let closed = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            (SOCKET_FD + 1) as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        )
    };
    report.record(
        "descriptors",
        match closed {
            0 => Ok("all closed but stdio and the socket".to_string()),
            _ => Err(errno()),
        },
    );
    report.record(
        "environment",
        Ok("empty but the artifact paths".to_string()),
    );
    let (opened, tracking) = PageTracking::open(open_early);
    report.record("page_tracking", opened);
    let namespace = network_namespace();
    let own_user_namespace = namespace
        .as_ref()
        .is_ok_and(|how| how.contains("user namespace"));
    report.record("network_namespace", namespace);
    report.record(
        "rlimit_nofile",
        rlimit(libc::RLIMIT_NOFILE, Some(init.max_files)),
    );
    report.record("rlimit_core", rlimit(libc::RLIMIT_CORE, Some(0)));
    report.record("rlimit_nproc", nproc(init, own_user_namespace));
    match init.data_limit_mb {
        Some(mb) => report.record("rlimit_data", rlimit(libc::RLIMIT_DATA, Some(mb << 20))),
        None => report.record(
            "rlimit_data",
            Err("not set: the worker's memory_mb/heap_mb caps bound each runtime".to_string()),
        ),
    }
    report.record("capabilities", drop_capabilities());
    let (landlock, nnp) = landlock(init);
    report.record("landlock", landlock);
    report.record("no_new_privs", nnp);
    (report, tracking)
}

/// A new network namespace: as root directly, else inside a new user namespace.
fn network_namespace() -> Result<String, String> {
    // SAFETY: unshare changes only this process's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
        return Ok("new (no interfaces up)".to_string());
    }
    let direct = errno();
    // SAFETY: as above; the process is single-threaded here, as CLONE_NEWUSER requires.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } == 0 {
        return Ok("new, inside a new user namespace".to_string());
    }
    Err(format!(
        "unshare: {direct}; with a user namespace: {}",
        errno()
    ))
}

fn rlimit(resource: libc::__rlimit_resource_t, value: Option<u64>) -> Result<String, String> {
    let value = value.unwrap_or(libc::RLIM_INFINITY);
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads the struct we pass.
    match unsafe { libc::setrlimit(resource, &limit) } {
        0 => Ok(value.to_string()),
        _ => Err(errno()),
    }
}

/// Tasks (threads) a sandbox process may hold: two per runtime it could
/// host (a node runtime's thread, a python turn's thread) and 1024 for the
/// async runtime's blocking pool (512), V8's platform and the rest.
fn max_tasks(init: &Init) -> u64 {
    (init.python.max_runtimes as u64)
        .saturating_mul(2)
        .saturating_add(1024)
}

/// `RLIMIT_NPROC`, only where it counts this process's own tasks. The
/// kernel counts it per user and per user namespace (since Linux 5.14), and
/// checks the count of the namespace the process is in first: inside a user
/// namespace of its own, that is this process's threads alone, so the bound
/// is [`max_tasks`]. Outside one, it would count every task of the worker's
/// uid across the machine (the worker's own threads, the other sandbox
/// processes, anything else the user runs), and a low bound would stop this
/// process from starting its own threads; root is not held to it at all. So
/// there it is not set: the seccomp filter is the wall (no `fork`, `vfork`
/// or `clone` without `CLONE_THREAD`).
fn nproc(init: &Init, own_user_namespace: bool) -> Result<String, String> {
    if !kernel_at_least(5, 14) {
        return Err(
            "not set: before Linux 5.14 it counts every task of the worker's uid".to_string(),
        );
    }
    if !own_user_namespace {
        return Err(
            "not set: outside a user namespace of its own it would count every task of the \
             worker's uid (seccomp refuses fork; threads only)"
                .to_string(),
        );
    }
    rlimit(libc::RLIMIT_NPROC, Some(max_tasks(init)))
}

/// Whether the running kernel's release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    // SAFETY: uname fills the struct we pass; a zeroed utsname is valid.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::uname(&mut name) } != 0 {
        return false;
    }
    let release: String = name
        .release
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8 as char)
        .collect();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

/// Empties the bounding set and every capability set (a root worker's
/// children keep uid 0 but lose its privileges).
fn drop_capabilities() -> Result<String, String> {
    for cap in 0..=63 {
        // SAFETY: PR_CAPBSET_DROP takes a capability number; unknown ones fail with EINVAL.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
    // capset(2) with version 3 headers and zeroed data: no effective,
    // permitted or inheritable capability left.
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version-3 header and two data structs, which we pass.
    match unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } {
        0 => Ok("none".to_string()),
        _ => Err(errno()),
    }
}

/// Landlock: the runtimes' directories read-write, the engines' artifacts
/// read-only, nothing else; no TCP bind or connect; no signals or abstract
/// sockets outside the process. Answers the Landlock and `no_new_privs` results.
fn landlock(init: &Init) -> (Result<String, String>, Result<String, String>) {
    let abi = ABI::V6;
    let existing = |paths: &[&Path]| -> Vec<std::path::PathBuf> {
        paths
            .iter()
            .filter(|p| p.exists())
            .map(|p| p.to_path_buf())
            .collect()
    };
    let writable: Vec<&Path> = init.writable.iter().map(|p| p.as_path()).collect();
    let mut readable: Vec<&Path> = init.readable.iter().map(|p| p.as_path()).collect();
    readable.extend([Path::new("/dev/null"), Path::new("/dev/urandom")]);
    let attempt = || -> Result<landlock::RestrictionStatus, landlock::RulesetError> {
        Ruleset::default()
            .handle_access(AccessFs::from_all(abi))?
            .handle_access(AccessNet::from_all(abi))?
            .scope(Scope::from_all(abi))?
            .create()?
            .add_rules(path_beneath_rules(
                existing(&writable),
                AccessFs::from_all(abi),
            ))?
            .add_rules(path_beneath_rules(
                existing(&readable),
                AccessFs::from_read(abi),
            ))?
            .restrict_self()
    };
    match attempt() {
        Ok(status) => {
            let nnp = match status.no_new_privs {
                true => Ok("set".to_string()),
                false => set_no_new_privs(),
            };
            let landlock = match status.ruleset {
                RulesetStatus::FullyEnforced => Ok(format!(
                    "fully enforced: {} read-write, {} read-only paths",
                    writable.len(),
                    readable.len()
                )),
                RulesetStatus::PartiallyEnforced => Ok(format!(
                    "partially enforced (kernel {:?}): {} read-write, {} read-only paths",
                    status.landlock,
                    writable.len(),
                    readable.len()
                )),
                RulesetStatus::NotEnforced => Err(format!(
                    "not enforced: the kernel has no Landlock ({:?})",
                    status.landlock
                )),
            };
            (landlock, nnp)
        }
        Err(err) => (Err(err.to_string()), set_no_new_privs()),
    }
}

fn set_no_new_privs() -> Result<String, String> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers.
    match unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } {
        0 => Ok("set".to_string()),
        _ => Err(errno()),
    }
}
