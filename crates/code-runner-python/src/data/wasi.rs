//! What the data flavour's preview-1 shadows ([`super::fs`], [`super::clock`])
//! share: the store data they need ([`FsHost`]), the guard's state
//! ([`FsGuard`]), WASI's errno values and the caller's memory and delegates.

use std::collections::HashSet;

use wasmtime::{Caller, Extern, Memory};

use super::trampoline::Originals;
use crate::control::Stop;
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

/// WASI errno values used here.
pub mod errno {
    pub const DQUOT: i32 = 19;
    pub const FAULT: i32 = 21;
    pub const INVAL: i32 = 28;
    pub const ISDIR: i32 = 31;
    pub const NOTDIR: i32 = 54;
    pub const NOTEMPTY: i32 = 55;
    pub const MFILE: i32 = 33;
    pub const NOTSUP: i32 = 58;
    /// `EACCES`, `EPERM`, `EROFS`, `ENOTCAPABLE`, `EDQUOT`, `EMFILE`: the sandbox said no.
    pub const DENIALS: [i32; 6] = [2, 63, 69, 76, 19, 33];
}

/// The first guest descriptor with the three usual preopens.
const FIRST_GUEST_FD: i32 = 6;

/// The guard's state for one instance.
#[derive(Debug)]
pub struct FsGuard {
    /// The `/work` budget.
    pub quota: WorkQuota,
    /// Whether the sandbox refused a file operation during the current turn.
    pub denied: bool,
    /// Descriptors the guest opened and still holds.
    pub(super) held: HashSet<i32>,
    /// The first descriptor the guest can open: 0–2 are stdio, then the
    /// preopens (three, or four with the operator's packages).
    pub(super) first_guest_fd: i32,
}

impl FsGuard {
    /// A guard over `quota`, holding nothing.
    pub fn new(quota: WorkQuota) -> Self {
        FsGuard {
            quota,
            denied: false,
            held: HashSet::new(),
            first_guest_fd: FIRST_GUEST_FD,
        }
    }

    /// How many descriptors the guest holds open.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// The guard of an instance with `count` preopens (3 + 3 or more).
    #[must_use]
    pub fn with_preopens(mut self, count: i32) -> Self {
        self.first_guest_fd = 3 + count;
        self
    }
}

/// The store's delegates; a missing one is a host bug, reported as a trap.
pub(super) fn originals<'a, T: FsHost>(
    caller: &'a Caller<'_, T>,
) -> wasmtime::Result<&'a Originals> {
    caller
        .data()
        .originals()
        .ok_or_else(|| wasmtime::Error::msg("the trampolines are not installed"))
}

pub(super) fn memory<T: FsHost>(caller: &mut Caller<'_, T>) -> Option<Memory> {
    caller.get_export("memory").and_then(Extern::into_memory)
}
