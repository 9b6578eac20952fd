//! The test role of a sandbox process (`Init::probe`): after confining
//! itself it attempts what confinement forbids and reports each answer, so
//! a test sees the real filter, Landlock and rlimits from inside.

use std::collections::BTreeMap;

use crate::confine::PageTracking;

/// Test role: what confinement forbids, attempted; each entry says what the kernel answered.
pub(crate) fn probe_confinement(tracking: &PageTracking) -> BTreeMap<String, String> {
    let answer = |ok: bool| match ok {
        true => "allowed".to_string(),
        false => format!("refused: {}", std::io::Error::last_os_error()),
    };
    let mut results = BTreeMap::new();
    // SAFETY: socket takes integers; a descriptor it returns is closed at exit.
    let socket = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    results.insert("socket".to_string(), answer(socket >= 0));
    let path = c"/bin/true";
    let argv = [path.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null()];
    // SAFETY: the arguments are NUL-terminated and the arrays null-terminated; on success the
    // process image is replaced (the probe then never answers, which the test sees).
    let exec = unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    results.insert("execve".to_string(), answer(exec == 0));
    let opened = std::fs::File::open("/etc/passwd");
    results.insert(
        "open_host_file".to_string(),
        match opened {
            Ok(_) => "allowed".to_string(),
            Err(err) => format!("refused: {err}"),
        },
    );
    let written = std::fs::write("/tmp/code-runner-sandbox-probe", b"x");
    results.insert(
        "write_host_file".to_string(),
        match written {
            Ok(()) => "allowed".to_string(),
            Err(err) => format!("refused: {err}"),
        },
    );
    // SAFETY: ptrace(PTRACE_TRACEME) takes integers.
    let traced = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
    results.insert("ptrace".to_string(), answer(traced == 0));
    // SAFETY: unshare changes only this process's namespaces.
    let unshared = unsafe { libc::unshare(libc::CLONE_NEWNS) };
    results.insert("unshare".to_string(), answer(unshared == 0));
    // SAFETY: kill with signal 0 only checks permission.
    let signalled = unsafe { libc::kill(1, 0) };
    results.insert("kill_init".to_string(), answer(signalled == 0));
    probe_other_processes(&mut results);
    probe_page_tracking(tracking, &mut results);
    results
}

/// The page tracking's descriptors and requests: a new userfaultfd is
/// refused, and so is any request but the one the filter allows on each of
/// the two descriptors, or that one on another descriptor. The allowed ones
/// are made with a null argument, so the kernel refuses them after the
/// filter let them through (`EFAULT`) and nothing is registered or scanned.
fn probe_page_tracking(tracking: &PageTracking, results: &mut BTreeMap<String, String>) {
    use crate::confine::tracking::{PAGEMAP_SCAN, UFFDIO_REGISTER};
    /// `UFFDIO_COPY`: `_IOWR(0xAA, 0x03, struct uffdio_copy)`, 40 bytes.
    const UFFDIO_COPY: u64 = 0xC028_AA03;
    let answer = |result: i32| match result {
        0 => "allowed".to_string(),
        _ => format!("refused: {}", std::io::Error::last_os_error()),
    };
    let ioctl = |fd: i32, request: u64| {
        // SAFETY: a null argument: the kernel checks the pointer before it reads or writes.
        answer(unsafe { libc::ioctl(fd, request as libc::Ioctl, std::ptr::null_mut::<u8>()) })
    };
    // SAFETY: userfaultfd takes flags; a descriptor it returns is closed at exit.
    let opened = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | 1) };
    results.insert(
        "userfaultfd_open".to_string(),
        answer(if opened < 0 { -1 } else { 0 }),
    );
    let (pagemap, uffd) = tracking.descriptors();
    if let Some(uffd) = uffd {
        results.insert(
            "uffd_register_own".to_string(),
            ioctl(uffd, UFFDIO_REGISTER),
        );
        results.insert("uffd_copy".to_string(), ioctl(uffd, UFFDIO_COPY));
        results.insert(
            "uffd_register_elsewhere".to_string(),
            ioctl(0, UFFDIO_REGISTER),
        );
    }
    if let Some(pagemap) = pagemap {
        results.insert("pagemap_scan_own".to_string(), ioctl(pagemap, PAGEMAP_SCAN));
        results.insert("pagemap_scan_elsewhere".to_string(), ioctl(0, PAGEMAP_SCAN));
    }
}

/// The calls that can name another process: on the worker (the parent) they
/// are refused, on this process they still work. Each attempt is harmless
/// if it were allowed: limits are read, then set to what they were; a
/// forked child exits at once; signal 0 only checks permission.
fn probe_other_processes(results: &mut BTreeMap<String, String>) {
    let answer = |ok: bool| match ok {
        true => "allowed".to_string(),
        false => format!("refused: {}", std::io::Error::last_os_error()),
    };
    // SAFETY: getppid and getpid take nothing.
    let (parent, own) = unsafe { (libc::getppid(), libc::getpid()) };
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let prlimit = |pid: i32, new: *const libc::rlimit, old: *mut libc::rlimit| {
        // SAFETY: prlimit64 reads `new` and writes `old` when they are not null; both
        // point to a live rlimit or are null.
        unsafe { libc::syscall(libc::SYS_prlimit64, pid, libc::RLIMIT_NOFILE, new, old) == 0 }
    };
    let read = prlimit(parent, std::ptr::null(), &mut limit);
    results.insert("prlimit_parent_get".to_string(), answer(read));
    if !read {
        // Unknown: a value that changes nothing if it is ever set (it is not raised past the hard limit).
        limit = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
    }
    let set = prlimit(parent, &limit, std::ptr::null_mut());
    results.insert("prlimit_parent_set".to_string(), answer(set));
    let own_read = prlimit(0, std::ptr::null(), &mut limit);
    results.insert("prlimit_self".to_string(), answer(own_read));
    let own_set = own_read && prlimit(own, &limit, std::ptr::null_mut());
    results.insert("prlimit_own_pid".to_string(), answer(own_set));
    // SAFETY: tgkill with signal 0 only checks permission.
    let signalled = unsafe { libc::syscall(libc::SYS_tgkill, parent, parent, 0) };
    results.insert("tgkill_parent".to_string(), answer(signalled == 0));
    // SAFETY: as above, on this process's main thread.
    let own_signal = unsafe { libc::syscall(libc::SYS_tgkill, own, own, 0) };
    results.insert("tgkill_self".to_string(), answer(own_signal == 0));
    // SAFETY: a forked child only calls _exit; the parent reaps it.
    let forked = unsafe { libc::fork() };
    if forked == 0 {
        // SAFETY: _exit ends the forked child at once.
        unsafe { libc::_exit(0) };
    }
    results.insert("fork".to_string(), answer(forked > 0));
    if forked > 0 {
        // SAFETY: waitpid on our own child.
        unsafe { libc::waitpid(forked, std::ptr::null_mut(), 0) };
    }
    // SAFETY: as for fork (the raw call, which the C library never makes).
    let child = unsafe { libc::syscall(libc::SYS_fork) };
    if child == 0 {
        // SAFETY: _exit ends the child at once.
        unsafe { libc::_exit(0) };
    }
    results.insert("fork_raw".to_string(), answer(child > 0));
    if child > 0 {
        // SAFETY: waitpid on our own child.
        unsafe { libc::waitpid(child as i32, std::ptr::null_mut(), 0) };
    }
    // clone3 with no arguments: ENOSYS from the filter, EINVAL from a kernel that saw it.
    // SAFETY: a null clone_args with size 0 is rejected before anything is read.
    let cloned = unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) };
    results.insert("clone3".to_string(), answer(cloned >= 0));
    let thread = std::thread::Builder::new()
        .spawn(|| 7)
        .map(|t| t.join().unwrap_or(0) == 7);
    results.insert(
        "thread".to_string(),
        match thread {
            Ok(true) => "allowed".to_string(),
            Ok(false) => "refused: the thread did not finish".to_string(),
            Err(err) => format!("refused: {err}"),
        },
    );
}
