//! The data flavour's WASI preview-1 layer, hardened as the preview-2 one
//! (`crate::fs`) is: the calls that can grow `/work` reserve room in the
//! `WorkQuota` first (the growth of the file's size, holes included, reckoned
//! from its size, position and append flag) and answer `EDQUOT` past it, counting files the guest
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

use wasmtime::{Caller, Linker, TypedFunc};

use super::trampoline::{LSTAT_PATH, MODULE};
use super::wasi::{FsHost, errno, memory, originals};
use crate::work_quota::{growth, write_end};

/// Descriptors one instance may open at once (files and directories, the
/// preopens aside); past it `path_open` answers `EMFILE`. Dropping the
/// instance closes them all.
pub const MAX_DESCRIPTORS: usize = crate::fs::MAX_DESCRIPTORS;

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

/// Reserves what a write of `want` bytes to `fd` grows its file by: at
/// `offset` (a positioned write), else at the descriptor's position, or at
/// the end when it appends. The size a file reaches is charged, its holes
/// included, never just the bytes written. The append flag is asked only
/// when the position is inside the file (a write at or past the end grows
/// it at least as much either way). A descriptor whose size or position
/// cannot be told (not a regular file) is charged `want`.
fn reserve_write<T: FsHost>(
    caller: &mut Caller<'_, T>,
    fd: i32,
    offset: Option<u64>,
    want: u64,
) -> wasmtime::Result<bool> {
    const APPEND: u16 = 1;
    let (stat, tell, flags, page) = {
        let o = originals(caller)?;
        (
            o.stat.clone(),
            o.tell.clone(),
            o.flags.clone(),
            o.stat_memory,
        )
    };
    let word = |caller: &mut Caller<'_, T>, at: usize| {
        let mut bytes = [0u8; 8];
        page.read(&*caller, at, &mut bytes).ok()?;
        Some(u64::from_le_bytes(bytes))
    };
    if stat.call(&mut *caller, fd)? != 0 {
        return reserve_bytes(caller, want);
    }
    let Some(size) = word(caller, 32) else {
        return reserve_bytes(caller, want);
    };
    let position = match offset {
        Some(offset) => offset,
        None => match tell.call(&mut *caller, fd)? {
            0 => match word(caller, 64) {
                Some(position) => position,
                None => return reserve_bytes(caller, want),
            },
            _ => return reserve_bytes(caller, want),
        },
    };
    let mut end = write_end(position, want);
    if position < size {
        // Inside the file: an appending descriptor writes at the end instead.
        let append = flags.call(&mut *caller, fd)? != 0
            || word(caller, 128).is_none_or(|w| (w >> 16) as u16 & APPEND != 0);
        if append {
            end = end.max(write_end(size, want));
        }
    }
    reserve_bytes(caller, growth(size, end))
}

/// Reserves what resizing `fd`'s file to `size` bytes grows it by.
fn reserve_resize<T: FsHost>(
    caller: &mut Caller<'_, T>,
    fd: i32,
    size: u64,
) -> wasmtime::Result<bool> {
    let (stat, page) = {
        let o = originals(caller)?;
        (o.stat.clone(), o.stat_memory)
    };
    let mut buf = [0u8; 8];
    if stat.call(&mut *caller, fd)? != 0 || page.read(&*caller, 32, &mut buf).is_err() {
        return reserve_bytes(caller, size);
    }
    reserve_bytes(caller, growth(u64::from_le_bytes(buf), size))
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
                reserve_write(&mut c, fd, None, want)?
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
            let granted = reserve_write(&mut c, fd, Some(off.max(0) as u64), want)?;
            delegate_if(granted, &mut c, func, (fd, iovs, n, off, out))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_filestat_set_size",
        |mut c: Caller<'_, T>, fd: i32, size: i64| {
            let func = originals(&c)?.fd_filestat_set_size.clone();
            let granted = reserve_resize(&mut c, fd, size.max(0) as u64)?;
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
            let first = c.data().fs_ref().first_guest_fd;
            if from < first || to < first {
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
            if let Some(errno) = unlink_with_slash(&mut c, fd, path, len)? {
                return Ok(seen(&mut c, errno));
            }
            let func = originals(&c)?.path_unlink_file.clone();
            delegate_if(true, &mut c, func, (fd, path, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_remove_directory",
        |mut c: Caller<'_, T>, fd: i32, path: i32, len: i32| {
            if let Some(errno) = rmdir_of_parent(&mut c, fd, path, len)? {
                return Ok(seen(&mut c, errno));
            }
            let func = originals(&c)?.path_remove_directory.clone();
            let len = slashless(&mut c, path, len).unwrap_or(len);
            delegate_if(true, &mut c, func, (fd, path, len))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "path_filestat_get",
        |mut c: Caller<'_, T>, fd: i32, flags: i32, path: i32, len: i32, out: i32| {
            const SYMLINK_FOLLOW: i32 = 1;
            let func = originals(&c)?.path_filestat_get.clone();
            if !guest_path(&mut c, path, len).is_some_and(|p| crate::fs::resolves_as_directory(&p))
            {
                return delegate_if(true, &mut c, func, (fd, flags, path, len, out));
            }
            // `stat("x/")` stats what x resolves to and wants a directory.
            let errno = delegate_if(
                true,
                &mut c,
                func,
                (fd, flags | SYMLINK_FOLLOW, path, len, out),
            )?;
            let mut kind = [0u8];
            let read =
                memory(&mut c).map(|mem| mem.read(&c, (out as u32 as usize) + 16, &mut kind));
            Ok(match (errno, read) {
                (0, Some(Ok(()))) if kind[0] != DIRECTORY => errno::NOTDIR,
                _ => errno,
            })
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
    linker.func_wrap(MODULE, "poll_oneoff", super::clock::poll_oneoff::<T>)?;
    Ok(())
}

/// The guest's `path` (`len` bytes), if it is in its memory and at most
/// [`MAX_PATH`] long (longer, wasmtime-wasi answers as it does).
fn guest_path<T: FsHost>(caller: &mut Caller<'_, T>, path: i32, len: i32) -> Option<Vec<u8>> {
    let len = len as u32 as usize;
    if len > MAX_PATH {
        return None;
    }
    let mem = memory(caller)?;
    let start = path as u32 as usize;
    mem.data(&*caller)
        .get(start..start.checked_add(len)?)
        .map(<[u8]>::to_vec)
}

/// The longest path the trailing-slash rules read (Linux's `PATH_MAX`; it
/// fits the stat trampoline's page after [`LSTAT_PATH`]).
const MAX_PATH: usize = 4096;

/// WASI's file type of a directory.
const DIRECTORY: u8 = 3;

/// The guest's `path` (`len` bytes) without its trailing slashes, as a
/// length, when it has some ([`crate::fs::trailing_slash`]).
fn slashless<T: FsHost>(caller: &mut Caller<'_, T>, path: i32, len: i32) -> Option<i32> {
    let bytes = guest_path(caller, path, len)?;
    crate::fs::trailing_slash(&bytes).and_then(|kept| i32::try_from(kept).ok())
}

/// The file type of `name` (at most [`MAX_PATH`] bytes) under `fd`, or
/// the errno of its stat, asked through the stat trampoline (the guest's
/// memory is not written); symlinks followed when `follow`.
fn kind_of<T: FsHost>(
    caller: &mut Caller<'_, T>,
    fd: i32,
    name: &[u8],
    follow: bool,
) -> wasmtime::Result<Result<u8, i32>> {
    const SYMLINK_FOLLOW: i32 = 1;
    let (lstat, page) = {
        let o = originals(caller)?;
        (o.lstat.clone(), o.stat_memory)
    };
    page.write(&mut *caller, LSTAT_PATH, name)?;
    let flags = if follow { SYMLINK_FOLLOW } else { 0 };
    let len = i32::try_from(name.len()).unwrap_or(i32::MAX);
    let errno = lstat.call(&mut *caller, (fd, flags, len))?;
    if errno != 0 {
        return Ok(Err(errno));
    }
    let mut kind = [0u8];
    page.read(&*caller, 16, &mut kind)?;
    Ok(Ok(kind[0]))
}

/// `unlink("x/")`, `unlink("x/.")` remove nothing
/// ([`crate::fs::unlink_check`]): `EISDIR` for a directory, `ENOTDIR` for
/// anything else. `None`: a plain name, or a path longer than [`MAX_PATH`]
/// (wasmtime-wasi then answers as it does).
fn unlink_with_slash<T: FsHost>(
    caller: &mut Caller<'_, T>,
    fd: i32,
    path: i32,
    len: i32,
) -> wasmtime::Result<Option<i32>> {
    let Some(name) = guest_path(caller, path, len) else {
        return Ok(None);
    };
    let Some((kept, follow)) = crate::fs::unlink_check(&name) else {
        return Ok(None);
    };
    Ok(Some(match kind_of(caller, fd, &name[..kept], follow)? {
        Ok(DIRECTORY) => errno::ISDIR,
        Ok(_) => errno::NOTDIR,
        Err(errno) => errno,
    }))
}

/// `rmdir("x/..")`: `ENOTEMPTY` once the path resolves, as on Linux
/// ([`crate::fs::ends_in_parent`]); `None` for any other path.
fn rmdir_of_parent<T: FsHost>(
    caller: &mut Caller<'_, T>,
    fd: i32,
    path: i32,
    len: i32,
) -> wasmtime::Result<Option<i32>> {
    let Some(name) = guest_path(caller, path, len).filter(|name| crate::fs::ends_in_parent(name))
    else {
        return Ok(None);
    };
    Ok(Some(match kind_of(caller, fd, &name, true)? {
        Ok(_) => errno::NOTEMPTY,
        Err(errno) => errno,
    }))
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
