//! What the host gives an instance: its store data ([`Host`]), and the
//! linker that wires wasmtime-wasi (preview 2) plus our own pieces.
//!
//! - `wasi:filesystem` is guarded ([`crate::fs`]): quota and denial facts.
//! - `wasi:clocks/monotonic-clock` subscriptions (`time.sleep`) wake at the
//!   turn's deadline, abort or teardown, whichever comes first; the epoch
//!   callback then stops the guest. Epochs alone would miss a guest parked
//!   in a host call.
//! - `call` (the runner's import) runs a binding on the tokio runtime and
//!   waits for it in slices, so a call that never answers still ends on time.
//! - stdout and stderr land in the turn's bounded buffers ([`crate::output`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use code_runner_core::AbortSignal;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime::{ResourceLimiter, StoreContextMut};
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::control::{Link, SLICE, Stop, TurnLimits, run_binding, stop_reason};
use crate::fs::{GuardedFs, GuardedFsData, SharedGuard};
use crate::output::SharedStreams;

/// Linear-memory ceiling; remembers that the guest asked for more.
pub struct MemoryLimiter {
    /// The ceiling in bytes.
    pub max_bytes: usize,
    /// Set when a grow past the ceiling was refused during the current turn.
    pub hit: bool,
    /// `Some(bytes)`: the ceiling covers all the store's memories together
    /// (the data flavour: its interpreter, a trampoline page and the GC heap
    /// of wasm exceptions), and this is their sum so far. `None`: each memory
    /// on its own (the lean component's memories).
    pub total: Option<usize>,
    /// Linear memory granted so far, all memories together: the instance's
    /// high-water mark, since WebAssembly memory never shrinks.
    pub held: usize,
    /// The engine's sum of every live instance's `held`: this one's is
    /// added as it grows and taken off when its store goes.
    pub gauge: HeldGauge,
}

/// Linear memory all of an engine's live instances hold, in bytes.
#[derive(Debug, Clone, Default)]
pub struct HeldGauge(Arc<AtomicU64>);

impl HeldGauge {
    /// The bytes held now.
    pub fn bytes(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.gauge.0.fetch_sub(self.held as u64, Ordering::Relaxed);
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let after = match self.total {
            Some(total) => total.saturating_sub(current).saturating_add(desired),
            None => desired,
        };
        if after > self.max_bytes {
            self.hit = true;
            return Ok(false);
        }
        if let Some(total) = &mut self.total {
            *total = after;
        }
        let grown = desired.saturating_sub(current);
        self.held = self.held.saturating_add(grown);
        self.gauge.0.fetch_add(grown as u64, Ordering::Relaxed);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= crate::MAX_TABLE_ELEMENTS)
    }
}

/// The store's data: WASI, limits, and what the turn in flight needs.
pub struct Host {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) guard: SharedGuard,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) streams: SharedStreams,
    pub(crate) turn: Option<TurnLimits>,
    /// Why the host stopped the guest, recorded before trapping.
    pub(crate) stop: Option<Stop>,
    pub(crate) link: Arc<Link>,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) clock_base: Instant,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl Host {
    /// Whether the guest must stop now, and why.
    pub fn should_stop(&self) -> Option<Stop> {
        stop_reason(&self.link, self.turn.as_ref())
    }

    /// One binding call from the runner: a reply frame, or why the guest must stop.
    fn binding_call(&mut self, frame: &str) -> Result<String, Stop> {
        run_binding(&self.link, self.turn.as_ref(), &self.runtime, frame, SLICE)
    }

    /// What a sleep subscribed now must also wake for.
    fn wake(&self) -> Wake {
        Wake {
            deadline: self
                .turn
                .as_ref()
                .map(|t| t.bindings.clock().deadline(t.deadline)),
            abort: self.turn.as_ref().map(|t| t.abort.clone()),
            link: self.link.clone(),
        }
    }
}

/// The linker every instance is made from: wasmtime-wasi, then our shadows.
pub fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<Host>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    linker.allow_shadowing(true);
    wasmtime_wasi::p2::bindings::sync::filesystem::types::add_to_linker::<Host, GuardedFsData>(
        &mut linker,
        |host| GuardedFs {
            inner: WasiFilesystemCtxView {
                ctx: host.wasi.filesystem(),
                table: &mut host.table,
            },
            guard: &host.guard,
        },
    )?;
    monotonic_clock::add_to_linker::<Host, ClockData>(&mut linker, |host| Clock {
        wake: host.wake(),
        table: &mut host.table,
        base: host.clock_base,
    })?;
    linker.root().func_wrap(
        "call",
        |mut store: StoreContextMut<'_, Host>,
         (frame,): (String,)|
         -> wasmtime::Result<(String,)> {
            match store.data_mut().binding_call(&frame) {
                Ok(reply) => Ok((reply,)),
                Err(stop) => {
                    store.data_mut().stop = Some(stop);
                    Err(wasmtime::Error::msg("code-runner stopped the guest"))
                }
            }
        },
    )?;
    Ok(linker)
}

/// The conditions that end a guest's sleep early.
#[derive(Clone)]
struct Wake {
    deadline: Option<Instant>,
    abort: Option<AbortSignal>,
    link: Arc<Link>,
}

impl Wake {
    fn now(&self) -> bool {
        self.link.closing.load(Ordering::SeqCst)
            || self.abort.as_ref().is_some_and(AbortSignal::is_aborted)
            || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// The monotonic clock: time since the instance started, and sleeps that
/// wake for the turn's stop conditions.
struct Clock<'a> {
    wake: Wake,
    table: &'a mut ResourceTable,
    base: Instant,
}

struct ClockData;

impl wasmtime::component::HasData for ClockData {
    type Data<'a> = Clock<'a>;
}

impl Clock<'_> {
    fn elapsed(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn sleep(&mut self, nanos: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let until = Instant::now().checked_add(Duration::from_nanos(nanos));
        let sleep = self.table.push(Sleep {
            until,
            wake: self.wake.clone(),
        })?;
        subscribe(self.table, sleep)
    }
}

impl monotonic_clock::Host for Clock<'_> {
    fn now(&mut self) -> wasmtime::Result<u64> {
        Ok(self.elapsed())
    }

    fn resolution(&mut self) -> wasmtime::Result<u64> {
        Ok(1_000)
    }

    fn subscribe_instant(&mut self, when: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let nanos = when.saturating_sub(self.elapsed());
        self.sleep(nanos)
    }

    fn subscribe_duration(&mut self, nanos: u64) -> wasmtime::Result<Resource<DynPollable>> {
        self.sleep(nanos)
    }
}

/// A guest sleep: ready at its time, or as soon as the turn must stop.
struct Sleep {
    until: Option<Instant>,
    wake: Wake,
}

#[async_trait::async_trait]
impl Pollable for Sleep {
    async fn ready(&mut self) {
        loop {
            if self.wake.now() {
                return;
            }
            let now = Instant::now();
            let left = match self.until {
                Some(until) if now >= until => return,
                Some(until) => until - now,
                None => SLICE,
            };
            tokio::time::sleep(left.min(SLICE)).await;
        }
    }
}
