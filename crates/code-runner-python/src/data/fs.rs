//! The data flavour's WASI preview-1 layer, hardened as the preview-2 one
//! (`crate::fs`) is: the calls that can grow `/work` reserve room in the
//! [`WorkQuota`] first and answer `EDQUOT` past it, counting files the guest
//! holds open after unlinking them; the guest may hold [`MAX_DESCRIPTORS`]
//! descriptors (past it `EMFILE`); every refusal of the sandbox is the turn's
//! `denied` fact; sleeps wake at the turn's deadline, abort or close.
//!
//! Each shadow delegates to wasmtime-wasi's own function through a
//! *trampoline*: a tiny instance importing the interpreter's memory and
//! wasmtime-wasi's functions (from the unshadowed linker) and exporting one
//! forwarder each. wasmtime-wasi finds guest memory through its caller's
//! `memory` export, so a host function cannot call it directly; called from
//! the trampoline, whose `memory` *is* the interpreter's, it works unchanged.
//! A second trampoline with a one-page memory of its own answers `fstat` for
//! the quota's recount without touching guest memory.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use wasmtime::{Caller, Extern, Linker, Memory, Module, TypedFunc};

use crate::control::{SLICE, Stop};
use crate::work_quota::WorkQuota;

/// What the shadows need of an instance's store data.
pub trait FsHost: Send + 'static {
    /// The guard's state.
    fn fs(&mut self) -> &mut FsGuard;
    /// The guard's state, to read.
    fn fs_ref(&self) -> &FsGuard;
    /// The store's delegates, once installed.
    fn originals(&self) -> Option<&Originals>;
    /// Whether the guest must stop now; the reason is recorded in the store.
    fn stop_now(&mut self) -> Option<Stop>;
    /// When the instance's monotonic clock started.
    fn clock_base(&self) -> std::time::Instant;
}

/// Descriptors one instance may open at once (files and directories, the
/// preopens aside); past it `path_open` answers `EMFILE`. Dropping the
/// instance closes them all.
pub const MAX_DESCRIPTORS: usize = crate::fs::MAX_DESCRIPTORS;
/// The first descriptor the guest can open: 0–2 are stdio, 3–5 the preopens.
const FIRST_GUEST_FD: i32 = 6;

const MODULE: &str = "wasi_snapshot_preview1";

/// WASI errno values used here.
mod errno {
    pub const DQUOT: i32 = 19;
    pub const FAULT: i32 = 21;
    pub const INVAL: i32 = 28;
    pub const MFILE: i32 = 33;
    pub const NOTSUP: i32 = 58;
    /// `EACCES`, `EPERM`, `EROFS`, `ENOTCAPABLE`, `EDQUOT`, `EMFILE`: the sandbox said no.
    pub const DENIALS: [i32; 6] = [2, 63, 69, 76, 19, 33];
}

/// The guard's state for one instance.
#[derive(Debug)]
pub struct FsGuard {
    /// The `/work` budget.
    pub quota: WorkQuota,
    /// Whether the sandbox refused a file operation during the current turn.
    pub denied: bool,
    /// Descriptors the guest opened and still holds.
    held: HashSet<i32>,
}

impl FsGuard {
    /// A guard over `quota`, holding nothing.
    pub fn new(quota: WorkQuota) -> Self {
        FsGuard {
            quota,
            denied: false,
            held: HashSet::new(),
        }
    }
}

/// The delegated wasmtime-wasi functions, with their signatures as WAT types.
const DELEGATED: &[(&str, &str)] = &[
    ("fd_write", "(param i32 i32 i32 i32) (result i32)"),
    ("fd_pwrite", "(param i32 i32 i32 i64 i32) (result i32)"),
    ("fd_filestat_set_size", "(param i32 i64) (result i32)"),
    (
        "path_open",
        "(param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)",
    ),
    ("fd_close", "(param i32) (result i32)"),
    ("fd_renumber", "(param i32 i32) (result i32)"),
    ("path_create_directory", "(param i32 i32 i32) (result i32)"),
    ("path_symlink", "(param i32 i32 i32 i32 i32) (result i32)"),
    (
        "path_link",
        "(param i32 i32 i32 i32 i32 i32 i32) (result i32)",
    ),
    ("path_unlink_file", "(param i32 i32 i32) (result i32)"),
    ("path_remove_directory", "(param i32 i32 i32) (result i32)"),
    (
        "path_rename",
        "(param i32 i32 i32 i32 i32 i32) (result i32)",
    ),
    ("poll_oneoff", "(param i32 i32 i32 i32) (result i32)"),
];

/// The forwarding trampoline's text.
fn trampoline_wat() -> String {
    let mut wat = String::from("(module\n  (import \"env\" \"memory\" (memory 0))\n");
    for (name, ty) in DELEGATED {
        wat.push_str(&format!(
            "  (import \"{MODULE}\" \"{name}\" (func ${name} {ty}))\n"
        ));
    }
    wat.push_str("  (export \"memory\" (memory 0))\n");
    for (name, ty) in DELEGATED {
        let params = ty.split(") (result").next().unwrap_or("");
        let arity = params.matches("i32").count() + params.matches("i64").count();
        let args: String = (0..arity).map(|i| format!("local.get {i} ")).collect();
        wat.push_str(&format!(
            "  (func (export \"{name}\") {ty} {args}call ${name})\n"
        ));
    }
    wat.push(')');
    wat
}

/// The stat trampoline: `fd_filestat_get` into a page of its own.
const STAT_WAT: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_filestat_get" (func $st (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "stat") (param i32) (result i32) (call $st (local.get 0) (i32.const 0))))"#;

/// The two trampoline modules, compiled once per engine.
pub struct Trampolines {
    forward: Module,
    stat: Module,
}

impl Trampolines {
    /// Compiles both for `engine`.
    pub fn new(engine: &wasmtime::Engine) -> wasmtime::Result<Self> {
        Ok(Trampolines {
            forward: Module::new(engine, trampoline_wat())?,
            stat: Module::new(engine, STAT_WAT)?,
        })
    }
}

type F3 = TypedFunc<(i32, i32, i32), i32>;
type F4 = TypedFunc<(i32, i32, i32, i32), i32>;
/// `path_open`'s wasm signature.
type PathOpen = TypedFunc<(i32, i32, i32, i32, i32, i64, i64, i32, i32), i32>;
/// `path_link`'s wasm signature.
type PathLink = TypedFunc<(i32, i32, i32, i32, i32, i32, i32), i32>;

/// One store's delegates: wasmtime-wasi's functions, reached through its trampolines.
pub struct Originals {
    fd_write: F4,
    fd_pwrite: TypedFunc<(i32, i32, i32, i64, i32), i32>,
    fd_filestat_set_size: TypedFunc<(i32, i64), i32>,
    path_open: PathOpen,
    fd_close: TypedFunc<i32, i32>,
    fd_renumber: TypedFunc<(i32, i32), i32>,
    path_create_directory: F3,
    path_symlink: TypedFunc<(i32, i32, i32, i32, i32), i32>,
    path_link: PathLink,
    path_unlink_file: F3,
    path_remove_directory: F3,
    path_rename: TypedFunc<(i32, i32, i32, i32, i32, i32), i32>,
    poll_oneoff: F4,
    stat: TypedFunc<i32, i32>,
    stat_memory: Memory,
}

impl Originals {
    /// Instantiates the trampolines over the interpreter's `memory` and
    /// wasmtime-wasi's own functions (from the unshadowed `base` linker).
    pub fn new<T: FsHost>(
        base: &Linker<T>,
        trampolines: &Trampolines,
        memory: Memory,
        store: &mut wasmtime::Store<T>,
    ) -> wasmtime::Result<Self> {
        let mut imports: Vec<Extern> = vec![memory.into()];
        for (name, _) in DELEGATED {
            imports.push(base.get(&mut *store, MODULE, name)?);
        }
        let forward = wasmtime::Instance::new(&mut *store, &trampolines.forward, &imports)?;
        let stat_import = base.get(&mut *store, MODULE, "fd_filestat_get")?;
        let stat = wasmtime::Instance::new(&mut *store, &trampolines.stat, &[stat_import])?;
        let s = &mut *store;
        Ok(Originals {
            fd_write: forward.get_typed_func(&mut *s, "fd_write")?,
            fd_pwrite: forward.get_typed_func(&mut *s, "fd_pwrite")?,
            fd_filestat_set_size: forward.get_typed_func(&mut *s, "fd_filestat_set_size")?,
            path_open: forward.get_typed_func(&mut *s, "path_open")?,
            fd_close: forward.get_typed_func(&mut *s, "fd_close")?,
            fd_renumber: forward.get_typed_func(&mut *s, "fd_renumber")?,
            path_create_directory: forward.get_typed_func(&mut *s, "path_create_directory")?,
            path_symlink: forward.get_typed_func(&mut *s, "path_symlink")?,
            path_link: forward.get_typed_func(&mut *s, "path_link")?,
            path_unlink_file: forward.get_typed_func(&mut *s, "path_unlink_file")?,
            path_remove_directory: forward.get_typed_func(&mut *s, "path_remove_directory")?,
            path_rename: forward.get_typed_func(&mut *s, "path_rename")?,
            poll_oneoff: forward.get_typed_func(&mut *s, "poll_oneoff")?,
            stat: stat.get_typed_func(&mut *s, "stat")?,
            stat_memory: stat
                .get_memory(&mut *s, "memory")
                .ok_or_else(|| wasmtime::Error::msg("the stat trampoline has no memory"))?,
        })
    }
}

/// The store's delegates; a missing one is a host bug, reported as a trap.
fn originals<'a, T: FsHost>(caller: &'a Caller<'_, T>) -> wasmtime::Result<&'a Originals> {
    caller
        .data()
        .originals()
        .ok_or_else(|| wasmtime::Error::msg("the trampolines are not installed"))
}

fn memory<T: FsHost>(caller: &mut Caller<'_, T>) -> Option<Memory> {
    caller.get_export("memory").and_then(Extern::into_memory)
}

/// Records a denial in an errno, passing it on.
fn seen<T: FsHost>(caller: &mut Caller<'_, T>, errno: i32) -> i32 {
    if errno::DENIALS.contains(&errno) {
        caller.data_mut().fs().denied = true;
    }
    errno
}

/// Refuses with `errno` (a denial), without calling wasmtime-wasi.
fn refuse<T: FsHost>(caller: &mut Caller<'_, T>, errno: i32) -> wasmtime::Result<i32> {
    caller.data_mut().fs().denied = true;
    Ok(errno)
}

/// The bytes an iovec array asks to move, bounds-checked (0 when it is malformed:
/// wasmtime-wasi then answers `EFAULT` itself).
fn requested_bytes<T: FsHost>(caller: &mut Caller<'_, T>, iovs: i32, count: i32) -> u64 {
    let Some(mem) = memory(caller) else { return 0 };
    let data = mem.data(&*caller);
    let base = iovs as u32 as usize;
    let count = count as u32 as usize;
    let Some(table) = count
        .checked_mul(8)
        .and_then(|n| base.checked_add(n))
        .and_then(|end| data.get(base..end))
    else {
        return 0;
    };
    table
        .chunks_exact(8)
        .map(|entry| u64::from(u32::from_le_bytes([entry[4], entry[5], entry[6], entry[7]])))
        .sum()
}

/// The bytes of files the guest holds open that are no longer linked
/// anywhere, each inode once, asked of wasmtime-wasi through the stat trampoline.
fn unlinked_bytes<T: FsHost>(caller: &mut Caller<'_, T>) -> wasmtime::Result<u64> {
    const REGULAR_FILE: u8 = 4;
    let (stat, page) = {
        let o = originals(caller)?;
        (o.stat.clone(), o.stat_memory)
    };
    let fds: Vec<i32> = caller.data().fs_ref().held.iter().copied().collect();
    let mut seen = HashSet::new();
    let mut total = 0u64;
    for fd in fds {
        if stat.call(&mut *caller, fd)? != 0 {
            continue;
        }
        let mut buf = [0u8; 64];
        if page.read(&*caller, 0, &mut buf).is_err() {
            continue;
        }
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&buf[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        let (dev, ino, nlink, size) = (word(0), word(8), word(24), word(32));
        if buf[16] == REGULAR_FILE && nlink == 0 && seen.insert((dev, ino)) {
            total = total.saturating_add(size);
        }
    }
    Ok(total)
}

/// Reserves `n` bytes of `/work` growth; an exact recount adds open, unlinked files.
fn reserve_bytes<T: FsHost>(caller: &mut Caller<'_, T>, n: u64) -> wasmtime::Result<bool> {
    if caller.data().fs_ref().quota.fits(n) {
        return Ok(caller.data_mut().fs().quota.reserve_bytes(n, || 0));
    }
    let unlinked = unlinked_bytes(caller)?;
    Ok(caller.data_mut().fs().quota.reserve_bytes(n, || unlinked))
}

fn reserve_file<T: FsHost>(caller: &mut Caller<'_, T>) -> bool {
    caller.data_mut().fs().quota.reserve_file()
}

/// Delegates when `granted`, else answers `EDQUOT`; a refusal either way is a denial.
fn delegate_if<T: FsHost, P: wasmtime::WasmParams>(
    granted: bool,
    caller: &mut Caller<'_, T>,
    func: TypedFunc<P, i32>,
    args: P,
) -> wasmtime::Result<i32> {
    if !granted {
        return refuse(caller, errno::DQUOT);
    }
    let errno = func.call(&mut *caller, args)?;
    Ok(seen(caller, errno))
}

/// Adds the shadows to `linker`, which holds wasmtime-wasi's own functions.
pub fn add_shadows<T: FsHost>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap(
        MODULE,
        "fd_write",
        |mut c: Caller<'_, T>, fd: i32, iovs: i32, n: i32, out: i32| {
            let func = originals(&c)?.fd_write.clone();
            // stdio is the turn's bounded buffers, not /work (renumbering onto it
            // is refused; a file the guest opened after closing it is its own).
            let stdio = (0..=2).contains(&fd) && !c.data().fs_ref().held.contains(&fd);
            let granted = stdio || {
                let want = requested_bytes(&mut c, iovs, n);
                reserve_bytes(&mut c, want)?
            };
            delegate_if(granted, &mut c, func, (fd, iovs, n, out))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_pwrite",
        |mut c: Caller<'_, T>, fd: i32, iovs: i32, n: i32, off: i64, out: i32| {
            let func = originals(&c)?.fd_pwrite.clone();
            let want = requested_bytes(&mut c, iovs, n);
            let granted = reserve_bytes(&mut c, want)?;
            delegate_if(granted, &mut c, func, (fd, iovs, n, off, out))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_filestat_set_size",
        |mut c: Caller<'_, T>, fd: i32, size: i64| {
            let func = originals(&c)?.fd_filestat_set_size.clone();
            let granted = reserve_bytes(&mut c, size.max(0) as u64)?;
            delegate_if(granted, &mut c, func, (fd, size))
        },
    )?;
    linker.func_wrap(MODULE, "path_open", path_open::<T>)?;
    linker.func_wrap(MODULE, "fd_close", |mut c: Caller<'_, T>, fd: i32| {
        let func = originals(&c)?.fd_close.clone();
        let errno = func.call(&mut c, fd)?;
        if errno == 0 {
            c.data_mut().fs().held.remove(&fd);
        }
        Ok(errno)
    })?;
    linker.func_wrap(
        MODULE,
        "fd_renumber",
        |mut c: Caller<'_, T>, from: i32, to: i32| {
            // stdio and the preopens keep their numbers: a file renumbered onto
            // fd 1 would write past the quota, one onto fd 5 would move /work.
            if from < FIRST_GUEST_FD || to < FIRST_GUEST_FD {
                return refuse(&mut c, errno::NOTSUP);
            }
            let func = originals(&c)?.fd_renumber.clone();
            let errno = func.call(&mut c, (from, to))?;
            if errno == 0 {
                let held = &mut c.data_mut().fs().held;
                held.remove(&from);
                held.insert(to);
            }
            Ok(seen(&mut c, errno))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_create_directory",
        |mut c: Caller<'_, T>, fd: i32, path: i32, len: i32| {
            let func = originals(&c)?.path_create_directory.clone();
            let granted = reserve_file(&mut c);
            delegate_if(granted, &mut c, func, (fd, path, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_symlink",
        |mut c: Caller<'_, T>, old: i32, old_len: i32, fd: i32, new: i32, new_len: i32| {
            let func = originals(&c)?.path_symlink.clone();
            let granted = reserve_file(&mut c);
            delegate_if(granted, &mut c, func, (old, old_len, fd, new, new_len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_link",
        |mut c: Caller<'_, T>,
         ofd: i32,
         oflags: i32,
         old: i32,
         old_len: i32,
         nfd: i32,
         new: i32,
         new_len: i32| {
            let func = originals(&c)?.path_link.clone();
            let granted = reserve_file(&mut c);
            delegate_if(
                granted,
                &mut c,
                func,
                (ofd, oflags, old, old_len, nfd, new, new_len),
            )
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_unlink_file",
        |mut c: Caller<'_, T>, fd: i32, path: i32, len: i32| {
            let func = originals(&c)?.path_unlink_file.clone();
            delegate_if(true, &mut c, func, (fd, path, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_remove_directory",
        |mut c: Caller<'_, T>, fd: i32, path: i32, len: i32| {
            let func = originals(&c)?.path_remove_directory.clone();
            delegate_if(true, &mut c, func, (fd, path, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_rename",
        |mut c: Caller<'_, T>,
         fd: i32,
         old: i32,
         old_len: i32,
         new_fd: i32,
         new: i32,
         new_len: i32| {
            let func = originals(&c)?.path_rename.clone();
            delegate_if(true, &mut c, func, (fd, old, old_len, new_fd, new, new_len))
        },
    )?;
    linker.func_wrap(MODULE, "poll_oneoff", poll_oneoff::<T>)?;
    Ok(())
}

/// `path_open`: the descriptor budget, then (for `O_CREAT`) one entry of the
/// quota, then wasmtime-wasi; the new descriptor is remembered.
#[allow(clippy::too_many_arguments, reason = "WASI's signature")]
fn path_open<T: FsHost>(
    mut c: Caller<'_, T>,
    fd: i32,
    dirflags: i32,
    path: i32,
    len: i32,
    oflags: i32,
    base: i64,
    inheriting: i64,
    fdflags: i32,
    out: i32,
) -> wasmtime::Result<i32> {
    const O_CREAT: i32 = 1;
    let func = originals(&c)?.path_open.clone();
    if c.data().fs_ref().held.len() >= MAX_DESCRIPTORS {
        return refuse(&mut c, errno::MFILE);
    }
    let granted = oflags & O_CREAT == 0 || reserve_file(&mut c);
    let errno = delegate_if(
        granted,
        &mut c,
        func,
        (
            fd, dirflags, path, len, oflags, base, inheriting, fdflags, out,
        ),
    )?;
    if errno == 0 {
        let mut bytes = [0u8; 4];
        if let Some(mem) = memory(&mut c)
            && mem.read(&c, out as u32 as usize, &mut bytes).is_ok()
        {
            c.data_mut().fs().held.insert(i32::from_le_bytes(bytes));
        }
    }
    Ok(errno)
}

/// One clock subscription's wake-up time, or `None` for a descriptor subscription.
fn clock_wake(clock_base: Instant, sub: &[u8]) -> Option<Instant> {
    const TAG_CLOCK: u8 = 0;
    const ABSTIME: u16 = 1;
    const REALTIME: u32 = 0;
    if sub.get(8) != Some(&TAG_CLOCK) {
        return None;
    }
    let id = u32::from_le_bytes(sub.get(16..20)?.try_into().ok()?);
    let timeout = u64::from_le_bytes(sub.get(24..32)?.try_into().ok()?);
    let flags = u16::from_le_bytes(sub.get(40..42)?.try_into().ok()?);
    let now = Instant::now();
    let wait = if flags & ABSTIME == 0 {
        Duration::from_nanos(timeout)
    } else if id == REALTIME {
        let target = SystemTime::UNIX_EPOCH + Duration::from_nanos(timeout);
        target.duration_since(SystemTime::now()).unwrap_or_default()
    } else {
        (clock_base + Duration::from_nanos(timeout)).saturating_duration_since(now)
    };
    Some(now + wait.min(Duration::from_secs(365 * 24 * 3600)))
}

/// Clock-only polls (sleeps) are ours, bounded by the turn's stop
/// conditions; polls on descriptors go to wasmtime-wasi.
fn poll_oneoff<T: FsHost>(
    mut caller: Caller<'_, T>,
    subs: i32,
    events: i32,
    count: i32,
    nevents: i32,
) -> wasmtime::Result<i32> {
    const SUB: usize = 48;
    const EVENT: usize = 32;
    const MAX_SUBS: usize = 4096;
    let Some(mem) = memory(&mut caller) else {
        return Ok(errno::FAULT);
    };
    let n = count as u32 as usize;
    if n == 0 || n > MAX_SUBS {
        return Ok(errno::INVAL);
    }
    let start = subs as u32 as usize;
    let table: Vec<u8> = match mem.data(&caller).get(start..start.saturating_add(n * SUB)) {
        Some(bytes) => bytes.to_vec(),
        None => return Ok(errno::FAULT),
    };
    let base = caller.data().clock_base();
    let wakes: Option<Vec<Instant>> = table
        .chunks_exact(SUB)
        .map(|s| clock_wake(base, s))
        .collect();
    let Some(wakes) = wakes else {
        let func = originals(&caller)?.poll_oneoff.clone();
        return func.call(&mut caller, (subs, events, count, nevents));
    };
    let (first, wake) = wakes
        .iter()
        .enumerate()
        .min_by_key(|(_, at)| **at)
        .map_or((0, Instant::now()), |(i, at)| (i, *at));
    loop {
        if caller.data_mut().stop_now().is_some() {
            return Err(wasmtime::Error::msg("code-runner stopped the guest"));
        }
        let now = Instant::now();
        if now >= wake {
            break;
        }
        std::thread::sleep((wake - now).min(SLICE));
    }
    let mut event = [0u8; EVENT];
    event[0..8].copy_from_slice(&table[first * SUB..first * SUB + 8]);
    let at = events as u32 as usize;
    if mem.write(&mut caller, at, &event).is_err() {
        return Ok(errno::FAULT);
    }
    let ok = mem.write(&mut caller, nevents as u32 as usize, &1u32.to_le_bytes());
    Ok(if ok.is_ok() { 0 } else { errno::FAULT })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trampoline forwards every delegated function with its own arity.
    #[test]
    fn trampoline_parses_and_forwards_every_function() {
        let engine = wasmtime::Engine::default();
        let module = Module::new(&engine, trampoline_wat()).expect("valid WAT");
        assert_eq!(module.exports().count(), DELEGATED.len() + 1);
        Module::new(&engine, STAT_WAT).expect("valid stat WAT");
    }

    /// A relative clock subscription wakes after its timeout; a descriptor one is not ours.
    #[test]
    fn clock_subscriptions_are_told_apart() {
        let mut sub = [0u8; 48];
        sub[8] = 0;
        sub[16..20].copy_from_slice(&1u32.to_le_bytes());
        sub[24..32].copy_from_slice(&5_000_000u64.to_le_bytes());
        let wake = clock_wake(Instant::now(), &sub).expect("a clock");
        assert!(wake > Instant::now());
        sub[8] = 1;
        assert!(clock_wake(Instant::now(), &sub).is_none());
    }
}
