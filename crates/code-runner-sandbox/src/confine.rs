//! Confinement of a sandbox process, applied before it runs guest code.
//!
//! Two steps, because Linux applies some restrictions per thread:
//! [`before_threads`] runs while the process has its main thread only
//! (descriptors, namespaces, rlimits, capabilities, Landlock and
//! `no_new_privs`, which every later thread inherits); [`seccomp`] runs
//! once the engines are loaded and applies to every thread at once (TSYNC).
//! Each step records what applied and what could not, with the reason: the
//! worker logs it and `/healthz` shows it. Nothing here is fatal: a kernel
//! without Landlock still gets the rest.

use std::collections::BTreeMap;
use std::path::Path;

use crate::protocol::{Init, Report};
use landlock::{
    ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The descriptor the worker hands a sandbox process its socket on.
pub const SOCKET_FD: i32 = 3;

fn errno() -> String {
    std::io::Error::last_os_error().to_string()
}

/// The first step, on the only thread: closes every descriptor but 0–2 and
/// the socket, enters a new network namespace (a fresh one has only a
/// loopback that is down), lowers the rlimits, drops every capability, and
/// applies Landlock (which sets `no_new_privs` too).
pub fn before_threads(init: &Init) -> Report {
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
    report.record("network_namespace", network_namespace());
    report.record(
        "rlimit_nofile",
        rlimit(libc::RLIMIT_NOFILE, Some(init.max_files)),
    );
    report.record("rlimit_core", rlimit(libc::RLIMIT_CORE, Some(0)));
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
    report
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

/// The second step: the seccomp allowlist on every thread of the process.
/// A syscall not on it fails with `EPERM` (`clone3` with `ENOSYS`, so the
/// C library falls back to `clone`, whose flags are checked).
pub fn seccomp(report: &mut Report) {
    let result = filter().and_then(|program| {
        seccompiler::apply_filter_all_threads(&program).map_err(|err| err.to_string())
    });
    report.record(
        "seccomp",
        result.map(|()| {
            format!(
                "allowlist of {} syscalls, other calls fail with EPERM",
                ALLOWED.len() + 4
            )
        }),
    );
}

/// Syscalls allowed whatever their arguments: memory, threads' own
/// synchronisation, time, I/O on descriptors the process already has or
/// opens under Landlock, and signal handling (V8 and wasmtime trap on guard
/// pages). Absent on purpose: `socket`, `connect`, `bind`, `execve`,
/// `ptrace`, `process_vm_*`, `mount`, `unshare`, `setns`, `kill`, `bpf`,
/// `perf_event_open`, `keyctl`, module and reboot calls.
const ALLOWED: &[i64] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_close,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_lseek,
    libc::SYS_mmap,
    libc::SYS_mprotect,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_msync,
    libc::SYS_mincore,
    libc::SYS_membarrier,
    libc::SYS_memfd_create,
    libc::SYS_pkey_alloc,
    libc::SYS_pkey_free,
    libc::SYS_pkey_mprotect,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    libc::SYS_tgkill,
    libc::SYS_gettid,
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getrandom,
    libc::SYS_getrusage,
    libc::SYS_uname,
    libc::SYS_sysinfo,
    libc::SYS_futex,
    libc::SYS_futex_waitv,
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    libc::SYS_rseq,
    libc::SYS_set_tid_address,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_getparam,
    libc::SYS_sched_getscheduler,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_eventfd2,
    libc::SYS_pipe2,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_recvmsg,
    libc::SYS_sendmsg,
    libc::SYS_shutdown,
    libc::SYS_getsockopt,
    libc::SYS_openat,
    // The C library's path calls on x86_64 (Landlock bounds where they reach).
    libc::SYS_open,
    libc::SYS_stat,
    libc::SYS_lstat,
    libc::SYS_access,
    libc::SYS_mkdir,
    libc::SYS_rmdir,
    libc::SYS_unlink,
    libc::SYS_rename,
    libc::SYS_link,
    libc::SYS_symlink,
    libc::SYS_readlink,
    libc::SYS_chmod,
    libc::SYS_getdents,
    libc::SYS_fcntl,
    libc::SYS_dup,
    libc::SYS_dup3,
    libc::SYS_getdents64,
    libc::SYS_mkdirat,
    libc::SYS_unlinkat,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_readlinkat,
    libc::SYS_ftruncate,
    libc::SYS_fallocate,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_utimensat,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_getcwd,
    libc::SYS_fstatfs,
    libc::SYS_statfs,
    libc::SYS_flock,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_settime,
    libc::SYS_prlimit64,
    libc::SYS_getrlimit,
];

/// Namespace flags `clone` may not carry.
const CLONE_NAMESPACES: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u64;

fn filter() -> Result<BpfProgram, String> {
    let err = |e: seccompiler::BackendError| e.to_string();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        ALLOWED.iter().map(|nr| (*nr, Vec::new())).collect();
    // Threads, never new namespaces (a thread's clone carries CLONE_THREAD).
    rules.insert(
        libc::SYS_clone,
        vec![
            SeccompRule::new(vec![
                SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(CLONE_NAMESPACES),
                    0,
                )
                .map_err(err)?,
            ])
            .map_err(err)?,
        ],
    );
    // Thread names and V8's named mappings only.
    let prctl = [
        libc::PR_SET_NAME,
        libc::PR_GET_NAME,
        0x5356_4d41,
        libc::PR_GET_DUMPABLE,
    ]
    .into_iter()
    .map(|op| {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, op as u64)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(err)
    })
    .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_prctl, prctl);
    // ioctl: non-blocking and close-on-exec toggles, and the terminal query isatty makes.
    let ioctl = [libc::FIONBIO, libc::FIOCLEX, libc::TCGETS, libc::FIONREAD]
        .into_iter()
        .map(|op| {
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, op)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(err)
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctl);
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(err)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(err)?;
    let mut program: BpfProgram = filter.try_into().map_err(err)?;
    // clone3 passes its flags in memory, where a filter cannot read them:
    // ENOSYS makes the C library use clone, whose flags the rule above checks.
    let clone3 = [
        // A = syscall number; if A == clone3, return ERRNO(ENOSYS).
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_clone3 as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        },
    ];
    // seccompiler's program starts by checking the architecture (three
    // instructions); the clone3 check goes right after it.
    let tail = program.split_off(3.min(program.len()));
    program.extend(clone3.iter().map(|f| seccompiler::sock_filter {
        code: f.code,
        jt: f.jt,
        jf: f.jf,
        k: f.k,
    }));
    program.extend(tail);
    Ok(program)
}
