//! The seccomp allowlist of a sandbox process: [`seccomp`], its second
//! confinement step, applied to every thread at once once the engines are
//! loaded. A rule per argument where a call can name another process.

use std::collections::BTreeMap;

use super::PageTracking;
use crate::protocol::Report;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The second step: the seccomp allowlist on every thread of the process.
/// A syscall not on it fails with `EPERM` (`clone3` with `ENOSYS`, so the
/// C library falls back to `clone`, whose flags are checked).
pub fn seccomp(report: &mut Report, tracking: &PageTracking) {
    let result = filter(tracking).and_then(|program| {
        seccompiler::apply_filter_all_threads(&program).map_err(|err| err.to_string())
    });
    report.record(
        "seccomp",
        result.map(|()| {
            format!(
                "allowlist of {} syscalls (clone for threads only; prlimit64, tgkill and \
                 get_robust_list on this process only), other calls fail with EPERM",
                ALLOWED.len() + OWN_PROCESS.len() + 4
            )
        }),
    );
}

/// Syscalls allowed whatever their arguments: memory, threads' own
/// synchronisation, time, I/O on descriptors the process already has or
/// opens under Landlock, and signal handling (V8 and wasmtime trap on guard
/// pages). Absent on purpose: `socket`, `connect`, `bind`, `execve`,
/// `fork`, `vfork`, `ptrace`, `process_vm_*`, `pidfd_*`, `kill`, `tkill`,
/// `rt_sigqueueinfo`, `setpriority`, `sched_set*`, `mount`, `unshare`,
/// `setns`, `bpf`, `perf_event_open`, `keyctl`, module and reboot calls.
/// The calls here that take a pid only read scheduling facts
/// (`sched_get*`); those that could act on another process are in
/// [`OWN_PROCESS`], allowed only on this one.
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
    libc::SYS_getrlimit,
];

/// Calls whose first argument names a process, allowed only when it names
/// this one (`0`, where the call takes it to mean the caller, or this
/// process's pid, which cannot change: it never forks). `prlimit64` on
/// another pid would lower the worker's limits (`RLIMIT_NOFILE` to 16, and
/// it stops accepting); `tgkill` on another thread group would signal the
/// worker's threads; `get_robust_list` would read a pointer of the worker's.
/// `prlimit64` on itself may set limits: only lower ones, the hard limits
/// cannot rise without `CAP_SYS_RESOURCE`.
const OWN_PROCESS: &[(i64, bool)] = &[
    // (syscall, whether 0 means "the caller")
    (libc::SYS_prlimit64, true),
    (libc::SYS_tgkill, false),
    (libc::SYS_get_robust_list, true),
];

/// Namespace flags `clone` may not carry.
const CLONE_NAMESPACES: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u64;

fn filter(tracking: &PageTracking) -> Result<BpfProgram, String> {
    let err = |e: seccompiler::BackendError| e.to_string();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        ALLOWED.iter().map(|nr| (*nr, Vec::new())).collect();
    // Threads only: CLONE_THREAD set (no new process, so no fork through
    // clone), no new namespaces.
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
                SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
                    libc::CLONE_THREAD as u64,
                )
                .map_err(err)?,
            ])
            .map_err(err)?,
        ],
    );
    // SAFETY: getpid takes nothing and cannot fail.
    let pid = unsafe { libc::getpid() } as u32 as u64;
    for (nr, zero_is_self) in OWN_PROCESS {
        let pids: &[u64] = match zero_is_self {
            true => &[0, pid],
            false => &[pid],
        };
        let own = pids
            .iter()
            .map(|pid| {
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *pid)
                    .and_then(|c| SeccompRule::new(vec![c]))
                    .map_err(err)
            })
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(*nr, own);
    }
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
    // ioctl: non-blocking and close-on-exec toggles, and the terminal query
    // isatty makes; and the page tracking's two, each on its own descriptor.
    let mut ioctl = [libc::FIONBIO, libc::FIOCLEX, libc::TCGETS, libc::FIONREAD]
        .into_iter()
        .map(|op| {
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, op)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(err)
        })
        .collect::<Result<Vec<_>, _>>()?;
    ioctl.extend(tracking.ioctl_rules()?);
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
