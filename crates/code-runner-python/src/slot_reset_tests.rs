//! The isolation rule for pooled memories, below CPython: whatever a run
//! writes into its linear memory (the image's pages, the heap past it, memory
//! it grew, pages the kernel swapped out, a write cut short by a trap), the
//! next instance in that slot sees the pristine image, with the pool set up
//! as both flavours set it up ([`crate::keep_resident`]: pages kept resident,
//! write tracking where the kernel has it), and with tracking off (the reset
//! every tracked one falls back to). Two modules take turns, one with
//! its image mapped from a compiled file (as the data flavour's) and one
//! from memory, so slots also change images.

use std::fmt::Write as _;

use wasmtime::{Config, Engine, Instance, InstanceAllocationStrategy, Module, Store};

const WASM_PAGE: usize = 64 << 10;
/// The image starts one wasm page in and spans this many bytes.
const IMAGE_LEN: usize = 300 << 10;
const INITIAL_PAGES: usize = 24;
/// Past the 16 MiB a slot keeps: a run that fills it spends the budget.
const MAX_PAGES: usize = 400;

fn module_text(seed: u8) -> String {
    let mut data = String::with_capacity(IMAGE_LEN * 3);
    for i in 0..IMAGE_LEN {
        // Every byte nonzero, and different between the two modules.
        let byte = (i % 251) as u8 ^ seed | 1;
        write!(data, "\\{byte:02x}").unwrap();
    }
    format!(
        r#"(module
          (memory (export "memory") {INITIAL_PAGES} {MAX_PAGES})
          (data (i32.const {WASM_PAGE}) "{data}")
          (func (export "fill") (param i32 i32 i32)
            (memory.fill (local.get 0) (local.get 2) (local.get 1)))
          (func (export "grow") (param i32) (result i32)
            (memory.grow (local.get 0)))
          (func (export "fill_then_trap") (param i32 i32 i32)
            (memory.fill (local.get 0) (local.get 2) (local.get 1))
            unreachable))"#
    )
}

fn pristine(seed: u8, offset: usize) -> u8 {
    match offset.checked_sub(WASM_PAGE) {
        Some(i) if i < IMAGE_LEN => (i % 251) as u8 ^ seed | 1,
        _ => 0,
    }
}

/// A small deterministic generator: the failures it finds replay.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

fn engine(slots: u32, protect_every: Option<u32>) -> Engine {
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    pool.total_core_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .max_memory_size(MAX_PAGES * WASM_PAGE)
        .total_stacks(0);
    crate::keep_resident(&mut pool, slots);
    match protect_every {
        Some(n) => {
            // Both flavours' pools ask for tracking (unless the operator
            // turned it off), and the runs below get exactly that.
            if std::env::var("CODE_RUNNER_WRITE_TRACKING").as_deref() != Ok("off") {
                assert!(pool.get_pagemap_write_tracking() == wasmtime::Enabled::Auto);
            }
            pool.pagemap_write_protect_every(n)
        }
        None => pool.pagemap_write_tracking(wasmtime::Enabled::No),
    };
    let mut config = Config::new();
    config
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .memory_init_cow(true);
    Engine::new(&config).expect("engine")
}

/// Pages out (to swap, where there is swap) every page of `memory`.
fn page_out(memory: &mut [u8]) {
    // SAFETY: advice on memory this store owns; MADV_PAGEOUT never changes
    // its contents.
    unsafe {
        rustix::mm::madvise(
            memory.as_mut_ptr().cast(),
            memory.len(),
            rustix::mm::Advice::LinuxPageOut,
        )
        .expect("MADV_PAGEOUT");
    }
}

#[test]
fn what_a_run_writes_never_reaches_the_next_instance_in_its_slot() {
    // Protecting again on every reset, and on some (every 32nd, as the
    // product does): between, pages copied back stay writable and must still
    // be copied back at the next reset.
    for protect_every in [1, 3, 32] {
        runs_in_rotation(Some(protect_every));
    }
    // And the untracked reset, which is also every tracked one's fallback.
    runs_in_rotation(None);
}

/// `protect_every`: `None` for no write tracking.
fn runs_in_rotation(protect_every: Option<u32>) {
    if protect_every.is_some() && kernel_tracks_writes() {
        // This kernel and process have what write tracking needs: a reset
        // that quietly fell back would leave the tracked path untested.
        assert!(
            wasmtime::PoolingAllocationConfig::is_pagemap_write_tracking_available(),
            "Linux 6.7+ lets this process open a userfaultfd, but wasmtime has no write tracking"
        );
    }
    let engine = engine(3, protect_every);
    let dir = tempfile::tempdir().unwrap();
    let compiled = dir.path().join("from-file.cwasm");
    std::fs::write(
        &compiled,
        Module::new(&engine, module_text(0x5a))
            .unwrap()
            .serialize()
            .unwrap(),
    )
    .unwrap();
    // SAFETY: the file is the one this test just wrote with this engine.
    let from_file = unsafe { Module::deserialize_file(&engine, &compiled) }.unwrap();
    let from_memory = Module::new(&engine, module_text(0xa5)).unwrap();
    let modules = [(0x5a, &from_file), (0xa5, &from_memory)];

    let mut rng = Lcg(0x0dd5_eed5);
    let mut stores = Vec::new();
    let mut swapped_out = 0;
    for round in 0..240 {
        let (seed, module) = modules[rng.below(100) / 85];
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, module, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "memory").unwrap();

        assert_eq!(
            memory.data_size(&store),
            INITIAL_PAGES * WASM_PAGE,
            "round {round}"
        );
        let grow = instance
            .get_typed_func::<i32, i32>(&mut store, "grow")
            .unwrap();
        // Now and then, look past the initial size too: what an earlier run
        // wrote in memory it grew must be gone when memory grows again.
        if rng.below(4) == 0 {
            let more = (MAX_PAGES - INITIAL_PAGES) as i32;
            assert!(grow.call(&mut store, more).unwrap() >= 0);
        }
        let bytes = memory.data(&store);
        if let Some(at) = (0..bytes.len()).find(|&at| bytes[at] != pristine(seed, at)) {
            panic!(
                "protecting every {protect_every:?}, round {round}: byte {at} is {:#04x}, not \
                 the image's {:#04x}: an earlier run's write survived the reset",
                bytes[at],
                pristine(seed, at)
            );
        }

        let fill = instance
            .get_typed_func::<(i32, i32, i32), ()>(&mut store, "fill")
            .unwrap();
        let trap = instance
            .get_typed_func::<(i32, i32, i32), ()>(&mut store, "fill_then_trap")
            .unwrap();
        let mut size = memory.data_size(&store);
        match rng.below(12) {
            // Grow and write there.
            0 | 1 if size < MAX_PAGES * WASM_PAGE => {
                let more = 1 + rng.below(MAX_PAGES - size / WASM_PAGE);
                assert!(grow.call(&mut store, more as i32).unwrap() >= 0);
                let from = size + rng.below(more * WASM_PAGE);
                size += more * WASM_PAGE;
                let len = rng.below(size - from) + 1;
                fill.call(&mut store, (from as i32, len as i32, 0xee))
                    .unwrap();
            }
            // Write more than the slot keeps resident: the reset decommits
            // the rest.
            3 => {
                let more = MAX_PAGES - size / WASM_PAGE;
                assert!(grow.call(&mut store, more as i32).unwrap() >= 0);
                size = MAX_PAGES * WASM_PAGE;
                fill.call(&mut store, (0, size as i32, 0xcc)).unwrap();
            }
            // Pages far apart all over memory, grown to the maximum: past
            // the budget a reset drops them one by one, and past a few
            // hundred such drops it drops the rest of memory at once.
            4 | 5 => {
                let more = MAX_PAGES - size / WASM_PAGE;
                assert!(grow.call(&mut store, more as i32).unwrap() >= 0);
                size = MAX_PAGES * WASM_PAGE;
                let stride = 4096 * (2 + rng.below(2));
                let phase = 4096 * rng.below(stride / 4096);
                for at in (phase..size).step_by(stride) {
                    fill.call(&mut store, (at as i32, 1, 0x66)).unwrap();
                }
            }
            // A write cut short by a trap.
            2 => {
                let at = rng.below(size - 4096);
                trap.call(&mut store, (at as i32, 4096, 0xdd)).unwrap_err();
            }
            // A few scattered pages, in the image and past it.
            _ => {
                for _ in 0..1 + rng.below(12) {
                    let at = rng.below(size);
                    let len = (rng.below(3) * 4096 + 1).min(size - at);
                    fill.call(&mut store, (at as i32, len as i32, 0x77))
                        .unwrap();
                }
            }
        }
        if rng.below(6) == 0 {
            page_out(memory.data_mut(&mut store));
            swapped_out = swapped_out.max(vm_swap_kb());
        }
        // Ending out of order keeps several slots in play at once.
        stores.push(store);
        if stores.len() > 2 || rng.below(2) == 0 {
            let at = rng.below(stores.len());
            drop(stores.swap_remove(at));
        }
    }
    // Where the machine has swap, pages did go there (and the resets above
    // found the written ones); without swap, MADV_PAGEOUT drops only clean
    // file pages.
    let has_swap = std::fs::read_to_string("/proc/swaps").is_ok_and(|s| s.lines().count() > 1);
    assert!(
        !has_swap || swapped_out > 0,
        "swap is on but no page went out"
    );
    tracing::info!("swap: {has_swap}, this process had up to {swapped_out} kB in swap");
}

/// Linux 6.7 or later, and a userfaultfd this process may open in user mode
/// (a container's seccomp profile may refuse it; then every reset is the
/// untracked one, which the runs still check).
fn kernel_tracks_writes() -> bool {
    let recent = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|release| {
            let mut parts = release.trim().split(['.', '-']);
            Some((
                parts.next()?.parse::<u32>().ok()?,
                parts.next()?.parse::<u32>().ok()?,
            ))
        })
        .is_some_and(|version| version >= (6, 7));
    const USER_MODE_ONLY: u32 = 1;
    let flags = rustix::mm::UserfaultfdFlags::CLOEXEC
        | rustix::mm::UserfaultfdFlags::from_bits_retain(USER_MODE_ONLY);
    // SAFETY: the descriptor is dropped at once, never used.
    let opens = unsafe { rustix::mm::userfaultfd(flags) }.is_ok();
    if recent && !opens {
        tracing::warn!("Linux 6.7+ but no userfaultfd here: only the untracked reset is checked");
    }
    recent && opens
}

fn vm_swap_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmSwap:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}
