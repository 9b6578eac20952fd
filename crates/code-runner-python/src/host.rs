//! WASI calls the host answers itself, in front of wasmtime-wasi.
//!
//! - fd 0 is the framed channel to the wrapper ([`crate::protocol`]); fd 1
//!   and fd 2 go straight into the turn's bounded [`StreamBuffer`]s.
//! - `poll_oneoff` on clocks (`time.sleep`) sleeps in slices and stops at the
//!   turn's deadline, abort or teardown: epochs alone miss a guest parked in
//!   a host call.
//! - Calls that can grow `/work` reserve room in the [`WorkQuota`] first and
//!   answer `EDQUOT` past it; everything else is delegated to wasmtime-wasi.

use std::time::{Duration, Instant, SystemTime};

use wasmtime::{Caller, Extern, Linker, Memory, TypedFunc};

use crate::session::{Host, Stop};

/// WASI errno values used here.
pub mod errno {
    /// Disk quota exceeded.
    pub const DQUOT: i32 = 19;
    /// Bad address.
    pub const FAULT: i32 = 21;
    /// Invalid argument.
    pub const INVAL: i32 = 28;
    /// The errors that mean "the sandbox said no": permission denied,
    /// operation not permitted, read-only file system, capabilities insufficient.
    pub const DENIALS: [i32; 4] = [2, 63, 69, 76];
}

const MODULE: &str = "wasi_snapshot_preview1";
/// How often a blocked host call re-checks its stop conditions.
const SLICE: Duration = Duration::from_millis(5);

/// The wasmtime-wasi functions the shadows delegate to, with their signatures
/// as WAT types.
const DELEGATED: &[(&str, &str)] = &[
    ("fd_read", "(param i32 i32 i32 i32) (result i32)"),
    ("fd_write", "(param i32 i32 i32 i32) (result i32)"),
    ("fd_pwrite", "(param i32 i32 i32 i64 i32) (result i32)"),
    ("fd_allocate", "(param i32 i64 i64) (result i32)"),
    ("fd_filestat_set_size", "(param i32 i64) (result i32)"),
    (
        "path_open",
        "(param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)",
    ),
    ("path_create_directory", "(param i32 i32 i32) (result i32)"),
    ("path_symlink", "(param i32 i32 i32 i32 i32) (result i32)"),
    (
        "path_link",
        "(param i32 i32 i32 i32 i32 i32 i32) (result i32)",
    ),
    ("poll_oneoff", "(param i32 i32 i32 i32) (result i32)"),
    ("path_unlink_file", "(param i32 i32 i32) (result i32)"),
    ("path_remove_directory", "(param i32 i32 i32) (result i32)"),
    (
        "path_rename",
        "(param i32 i32 i32 i32 i32 i32) (result i32)",
    ),
];

/// The trampoline: a tiny module that imports python's memory and the
/// delegated wasmtime-wasi functions, re-exports the memory, and exports one
/// forwarding function per import.
///
/// wasmtime-wasi finds guest memory through its caller's `memory` export, so
/// a host function cannot call it directly; called from this instance, whose
/// `memory` *is* python's, it works unchanged.
pub fn trampoline_wat() -> String {
    let mut wat = String::from("(module\n  (import \"env\" \"memory\" (memory 0))\n");
    for (name, ty) in DELEGATED {
        wat.push_str(&format!(
            "  (import \"{MODULE}\" \"{name}\" (func ${name} {ty}))\n"
        ));
    }
    wat.push_str("  (export \"memory\" (memory 0))\n");
    for (name, ty) in DELEGATED {
        let arity = ty
            .split(") (result")
            .next()
            .unwrap_or("")
            .matches("i32")
            .count()
            + ty.split(") (result")
                .next()
                .unwrap_or("")
                .matches("i64")
                .count();
        let args: String = (0..arity).map(|i| format!("local.get {i} ")).collect();
        wat.push_str(&format!(
            "  (func (export \"{name}\") {ty} {args}call ${name})\n"
        ));
    }
    wat.push(')');
    wat
}

/// `path_open`'s wasm signature.
type PathOpen = TypedFunc<(i32, i32, i32, i32, i32, i64, i64, i32, i32), i32>;
/// `path_link`'s wasm signature.
type PathLink = TypedFunc<(i32, i32, i32, i32, i32, i32, i32), i32>;

/// The wasmtime-wasi implementations the shadows delegate to, per store.
pub struct Originals {
    fd_read: TypedFunc<(i32, i32, i32, i32), i32>,
    fd_write: TypedFunc<(i32, i32, i32, i32), i32>,
    fd_pwrite: TypedFunc<(i32, i32, i32, i64, i32), i32>,
    fd_allocate: TypedFunc<(i32, i64, i64), i32>,
    fd_filestat_set_size: TypedFunc<(i32, i64), i32>,
    path_open: PathOpen,
    path_create_directory: TypedFunc<(i32, i32, i32), i32>,
    path_symlink: TypedFunc<(i32, i32, i32, i32, i32), i32>,
    path_link: PathLink,
    poll_oneoff: TypedFunc<(i32, i32, i32, i32), i32>,
    path_unlink_file: TypedFunc<(i32, i32, i32), i32>,
    path_remove_directory: TypedFunc<(i32, i32, i32), i32>,
    path_rename: TypedFunc<(i32, i32, i32, i32, i32, i32), i32>,
}

impl Originals {
    /// Instantiates the trampoline over python's `memory` and wasmtime-wasi's
    /// own functions (from the unshadowed `base` linker).
    pub fn new(
        base: &Linker<Host>,
        trampoline: &wasmtime::Module,
        memory: Memory,
        store: &mut wasmtime::Store<Host>,
    ) -> wasmtime::Result<Self> {
        let mut imports: Vec<Extern> = vec![memory.into()];
        for (name, _) in DELEGATED {
            imports.push(base.get(&mut *store, MODULE, name)?);
        }
        let instance = wasmtime::Instance::new(&mut *store, trampoline, &imports)?;
        Ok(Originals {
            fd_read: instance.get_typed_func(&mut *store, "fd_read")?,
            fd_write: instance.get_typed_func(&mut *store, "fd_write")?,
            fd_pwrite: instance.get_typed_func(&mut *store, "fd_pwrite")?,
            fd_allocate: instance.get_typed_func(&mut *store, "fd_allocate")?,
            fd_filestat_set_size: instance.get_typed_func(&mut *store, "fd_filestat_set_size")?,
            path_open: instance.get_typed_func(&mut *store, "path_open")?,
            path_create_directory: instance.get_typed_func(&mut *store, "path_create_directory")?,
            path_symlink: instance.get_typed_func(&mut *store, "path_symlink")?,
            path_link: instance.get_typed_func(&mut *store, "path_link")?,
            poll_oneoff: instance.get_typed_func(&mut *store, "poll_oneoff")?,
            path_unlink_file: instance.get_typed_func(&mut *store, "path_unlink_file")?,
            path_remove_directory: instance.get_typed_func(&mut *store, "path_remove_directory")?,
            path_rename: instance.get_typed_func(&mut *store, "path_rename")?,
        })
    }
}

fn originals<'a>(caller: &'a Caller<'_, Host>) -> &'a Originals {
    caller
        .data()
        .originals
        .as_ref()
        .expect("originals are installed before instantiation")
}

fn memory(caller: &mut Caller<'_, Host>) -> Option<Memory> {
    caller.get_export("memory").and_then(Extern::into_memory)
}

/// The `(offset, len)` pairs of an iovec array, bounds-checked against memory.
fn iovecs(mem: &[u8], iovs: i32, count: i32) -> Option<Vec<(usize, usize)>> {
    let base = iovs as u32 as usize;
    let count = count as u32 as usize;
    let table = mem.get(base..base.checked_add(count.checked_mul(8)?)?)?;
    table
        .chunks_exact(8)
        .map(|entry| {
            let ptr = u32::from_le_bytes(entry[0..4].try_into().ok()?) as usize;
            let len = u32::from_le_bytes(entry[4..8].try_into().ok()?) as usize;
            mem.get(ptr..ptr.checked_add(len)?)?;
            Some((ptr, len))
        })
        .collect()
}

fn write_u32(mem: &mut [u8], at: i32, value: u32) -> bool {
    let at = at as u32 as usize;
    match mem.get_mut(at..at.saturating_add(4)) {
        Some(slot) => {
            slot.copy_from_slice(&value.to_le_bytes());
            true
        }
        None => false,
    }
}

fn stop_trap(caller: &mut Caller<'_, Host>, stop: Stop) -> wasmtime::Error {
    caller.data_mut().stop = Some(stop);
    wasmtime::Error::msg("code-runner stopped the guest")
}

/// Adds the shadowing functions to `linker`, which already holds wasmtime-wasi's.
pub fn add_shadows(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap(MODULE, "fd_read", fd_read)?;
    linker.func_wrap(MODULE, "fd_write", fd_write)?;
    linker.func_wrap(MODULE, "poll_oneoff", poll_oneoff)?;
    linker.func_wrap(
        MODULE,
        "fd_pwrite",
        |mut c: Caller<'_, Host>, fd: i32, iovs: i32, n: i32, off: i64, out: i32| {
            let want = requested_bytes(&mut c, iovs, n);
            let reserved = c.data_mut().quota.reserve_bytes(want);
            let func = originals(&c).fd_pwrite.clone();
            delegate_if(reserved, &mut c, func, (fd, iovs, n, off, out))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_allocate",
        |mut c: Caller<'_, Host>, fd: i32, off: i64, len: i64| {
            let reserved = c.data_mut().quota.reserve_bytes(len.max(0) as u64);
            let func = originals(&c).fd_allocate.clone();
            delegate_if(reserved, &mut c, func, (fd, off, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_filestat_set_size",
        |mut c: Caller<'_, Host>, fd: i32, size: i64| {
            let reserved = c.data_mut().quota.reserve_bytes(size.max(0) as u64);
            let func = originals(&c).fd_filestat_set_size.clone();
            delegate_if(reserved, &mut c, func, (fd, size))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_open",
        |mut c: Caller<'_, Host>,
         fd: i32,
         dirflags: i32,
         path: i32,
         len: i32,
         oflags: i32,
         base: i64,
         inh: i64,
         fdflags: i32,
         out: i32| {
            const O_CREAT: i32 = 1;
            let reserved = oflags & O_CREAT == 0 || c.data_mut().quota.reserve_file();
            let func = originals(&c).path_open.clone();
            delegate_if(
                reserved,
                &mut c,
                func,
                (fd, dirflags, path, len, oflags, base, inh, fdflags, out),
            )
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_create_directory",
        |mut c: Caller<'_, Host>, fd: i32, path: i32, len: i32| {
            let reserved = c.data_mut().quota.reserve_file();
            let func = originals(&c).path_create_directory.clone();
            delegate_if(reserved, &mut c, func, (fd, path, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_symlink",
        |mut c: Caller<'_, Host>, old: i32, old_len: i32, fd: i32, new: i32, new_len: i32| {
            let reserved = c.data_mut().quota.reserve_file();
            let func = originals(&c).path_symlink.clone();
            delegate_if(reserved, &mut c, func, (old, old_len, fd, new, new_len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_link",
        |mut c: Caller<'_, Host>,
         ofd: i32,
         oflags: i32,
         old: i32,
         old_len: i32,
         nfd: i32,
         new: i32,
         new_len: i32| {
            let reserved = c.data_mut().quota.reserve_file();
            let func = originals(&c).path_link.clone();
            delegate_if(
                reserved,
                &mut c,
                func,
                (ofd, oflags, old, old_len, nfd, new, new_len),
            )
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_unlink_file",
        |mut c: Caller<'_, Host>, fd: i32, path: i32, len: i32| {
            let func = originals(&c).path_unlink_file.clone();
            delegate_if(true, &mut c, func, (fd, path, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_remove_directory",
        |mut c: Caller<'_, Host>, fd: i32, path: i32, len: i32| {
            let func = originals(&c).path_remove_directory.clone();
            delegate_if(true, &mut c, func, (fd, path, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_rename",
        |mut c: Caller<'_, Host>,
         fd: i32,
         old: i32,
         old_len: i32,
         new_fd: i32,
         new: i32,
         new_len: i32| {
            let func = originals(&c).path_rename.clone();
            delegate_if(true, &mut c, func, (fd, old, old_len, new_fd, new, new_len))
        },
    )?;
    Ok(())
}

/// Delegates to wasmtime-wasi when the `/work` quota granted the room, else
/// answers `EDQUOT`; either refusal is recorded as a sandbox denial.
fn delegate_if<P: wasmtime::WasmParams>(
    reserved: bool,
    caller: &mut Caller<'_, Host>,
    func: TypedFunc<P, i32>,
    args: P,
) -> wasmtime::Result<i32> {
    if !reserved {
        caller.data_mut().denied = true;
        return Ok(errno::DQUOT);
    }
    let result = func.call(&mut *caller, args)?;
    if errno::DENIALS.contains(&result) {
        caller.data_mut().denied = true;
    }
    Ok(result)
}

fn requested_bytes(caller: &mut Caller<'_, Host>, iovs: i32, count: i32) -> u64 {
    let Some(mem) = memory(caller) else { return 0 };
    iovecs(mem.data(&*caller), iovs, count)
        .map_or(0, |list| list.iter().map(|(_, len)| *len as u64).sum())
}

/// fd 0: the wrapper's inbound frames; a guest's own read mid-turn sees end-of-file.
fn fd_read(
    mut caller: Caller<'_, Host>,
    fd: i32,
    iovs: i32,
    count: i32,
    nread: i32,
) -> wasmtime::Result<i32> {
    if fd != 0 {
        return originals(&caller)
            .fd_read
            .clone()
            .call(&mut caller, (fd, iovs, count, nread));
    }
    if let Err(stop) = caller.data_mut().fill_inbound() {
        return Err(stop_trap(&mut caller, stop));
    }
    let Some(mem) = memory(&mut caller) else {
        return Ok(errno::FAULT);
    };
    let (data, host) = mem.data_and_store_mut(&mut caller);
    let Some(list) = iovecs(data, iovs, count) else {
        return Ok(errno::FAULT);
    };
    let mut copied = 0usize;
    for (ptr, len) in list {
        let n = host.take_inbound(&mut data[ptr..ptr + len]);
        copied += n;
        if n < len {
            break;
        }
    }
    Ok(if write_u32(data, nread, copied as u32) {
        0
    } else {
        errno::FAULT
    })
}

/// fd 0: frames from the wrapper; fd 1/2: captured output; files: quota, then wasmtime-wasi.
fn fd_write(
    mut caller: Caller<'_, Host>,
    fd: i32,
    iovs: i32,
    count: i32,
    nwritten: i32,
) -> wasmtime::Result<i32> {
    if !(0..=2).contains(&fd) {
        let want = requested_bytes(&mut caller, iovs, count);
        let reserved = caller.data_mut().quota.reserve_bytes(want);
        let func = originals(&caller).fd_write.clone();
        return delegate_if(reserved, &mut caller, func, (fd, iovs, count, nwritten));
    }
    let Some(mem) = memory(&mut caller) else {
        return Ok(errno::FAULT);
    };
    let (data, host) = mem.data_and_store_mut(&mut caller);
    let Some(list) = iovecs(data, iovs, count) else {
        return Ok(errno::FAULT);
    };
    let total: usize = list.iter().map(|(_, len)| len).sum();
    if fd == 0 {
        let mut frame = Vec::with_capacity(total.min(crate::protocol::MAX_GUEST_FRAME));
        if total <= crate::protocol::MAX_GUEST_FRAME {
            for (ptr, len) in &list {
                frame.extend_from_slice(&data[*ptr..*ptr + *len]);
            }
        }
        if !write_u32(data, nwritten, total as u32) {
            return Ok(errno::FAULT);
        }
        return match caller.data_mut().guest_frame(&frame) {
            Ok(()) => Ok(0),
            Err(stop) => Err(stop_trap(&mut caller, stop)),
        };
    }
    for (ptr, len) in &list {
        host.capture(fd, &data[*ptr..*ptr + *len]);
    }
    Ok(if write_u32(data, nwritten, total as u32) {
        0
    } else {
        errno::FAULT
    })
}

/// One clock subscription's wake-up time, or `None` for an fd subscription.
fn clock_wake(host: &Host, sub: &[u8]) -> Option<Instant> {
    const TAG_CLOCK: u8 = 0;
    const ABSTIME: u16 = 1;
    const REALTIME: u32 = 0;
    if sub[8] != TAG_CLOCK {
        return None;
    }
    let id = u32::from_le_bytes(sub[16..20].try_into().ok()?);
    let timeout = u64::from_le_bytes(sub[24..32].try_into().ok()?);
    let flags = u16::from_le_bytes(sub[40..42].try_into().ok()?);
    let now = Instant::now();
    let wait = if flags & ABSTIME == 0 {
        Duration::from_nanos(timeout)
    } else if id == REALTIME {
        let target = SystemTime::UNIX_EPOCH + Duration::from_nanos(timeout);
        target.duration_since(SystemTime::now()).unwrap_or_default()
    } else {
        (host.clock_base + Duration::from_nanos(timeout)).saturating_duration_since(now)
    };
    Some(now + wait.min(Duration::from_secs(365 * 24 * 3600)))
}

/// Clock-only polls (sleeps) are ours, bounded by the turn's stop conditions;
/// polls on descriptors go to wasmtime-wasi.
fn poll_oneoff(
    mut caller: Caller<'_, Host>,
    subs: i32,
    events: i32,
    count: i32,
    nevents: i32,
) -> wasmtime::Result<i32> {
    const SUB: usize = 48;
    const EVENT: usize = 32;
    let Some(mem) = memory(&mut caller) else {
        return Ok(errno::FAULT);
    };
    let n = count as u32 as usize;
    let start = subs as u32 as usize;
    let table: Vec<u8> = match mem
        .data(&caller)
        .get(start..start.saturating_add(n.saturating_mul(SUB)))
    {
        Some(bytes) if n > 0 => bytes.to_vec(),
        _ => return Ok(errno::INVAL),
    };
    let wakes: Option<Vec<Instant>> = table
        .chunks_exact(SUB)
        .map(|sub| clock_wake(caller.data(), sub))
        .collect();
    let Some(wakes) = wakes else {
        return originals(&caller)
            .poll_oneoff
            .clone()
            .call(&mut caller, (subs, events, count, nevents));
    };
    let (first, wake) = wakes
        .iter()
        .enumerate()
        .min_by_key(|(_, at)| **at)
        .map(|(i, at)| (i, *at))
        .unwrap_or((0, Instant::now()));
    loop {
        if let Some(stop) = caller.data().should_stop() {
            return Err(stop_trap(&mut caller, stop));
        }
        let now = Instant::now();
        if now >= wake {
            break;
        }
        std::thread::sleep((wake - now).min(SLICE));
    }
    let mut event = [0u8; EVENT];
    event[0..8].copy_from_slice(&table[first * SUB..first * SUB + 8]);
    // error = 0 (bytes 8..10), type = clock (0) at byte 10.
    let at = events as u32 as usize;
    let data = mem.data_mut(&mut caller);
    match data.get_mut(at..at.saturating_add(EVENT)) {
        Some(slot) => slot.copy_from_slice(&event),
        None => return Ok(errno::FAULT),
    }
    Ok(if write_u32(data, nevents, 1) {
        0
    } else {
        errno::FAULT
    })
}

/// Waits for `rx` in slices, checking the turn's stop conditions between them.
pub fn wait_for<T>(host: &Host, rx: &std::sync::mpsc::Receiver<T>) -> Result<Option<T>, Stop> {
    loop {
        if let Some(stop) = host.should_stop() {
            return Err(stop);
        }
        match rx.recv_timeout(SLICE) {
            Ok(value) => return Ok(Some(value)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
        }
    }
}
