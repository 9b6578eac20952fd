//! The lean flavour's instance on its runtime's thread: instantiating the
//! componentize-py snapshot copy-on-write, and one turn through the runner's
//! `turn` export. The thread itself (`runtime::thread_main`) instantiates
//! afresh, on the next turn and the same `/work`, when a turn kills the
//! instance.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_runner_core::caps::Stream;
use code_runner_core::{TurnOutcome, TurnSpec};
use wasmtime::component::{ResourceTable, TypedFunc};
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::control::{Boot, TurnLimits};
use crate::ending::{Facts, death, finish};
use crate::fs::Guard;
use crate::host::{Host, MemoryLimiter};
use crate::output::{GuestOutput, Streams};
use crate::protocol;
use crate::work_quota::{WORK_MAX_BYTES, WORK_MAX_FILES, WorkQuota};

/// The runner's `turn` export.
type TurnFn = TypedFunc<(String,), ((String, Option<String>),)>;

/// A live instance: its store and its entry point.
pub(crate) struct Instance {
    store: Store<Host>,
    turn: TurnFn,
    /// The largest result text this runtime hands over as a value.
    max_result: usize,
}

/// A fresh instance of the snapshot on the runtime's directory.
pub(crate) fn instantiate(boot: &Boot) -> Result<Instance, String> {
    let shared = &boot.shared;
    let crate::Flavour::Lean {
        instance_pre,
        lib,
        packages,
    } = &shared.flavour
    else {
        return Err("not the lean flavour".into());
    };
    let options = &boot.options;
    let streams = Arc::new(Mutex::new(Streams::new(Some(8192))));
    let perms = if options.read_only {
        FsPerms::ReadOnly
    } else {
        FsPerms::ReadWrite
    };
    let mut builder = WasiCtxBuilder::new();
    builder
        .allow_blocking_current_thread(true)
        .stdout(GuestOutput::new(streams.clone(), Stream::Stdout))
        .stderr(GuestOutput::new(streams.clone(), Stream::Stderr));
    builder
        .preopened_dir(&options.work_dir, "/work", perms)
        .map_err(|err| {
            format!(
                "cannot mount {} as /work: {err:#}",
                options.work_dir.display()
            )
        })?;
    builder
        .preopened_dir(lib, "/python", FsPerms::ReadOnly)
        .map_err(|err| format!("cannot mount {} as /python: {err:#}", lib.display()))?;
    if let Some(packages) = packages {
        builder
            .preopened_dir(packages, crate::packages::PACKAGES_GUEST, FsPerms::ReadOnly)
            .map_err(|err| format!("cannot mount {}: {err:#}", packages.display()))?;
    }
    let guard = Guard::new(WorkQuota::new(
        &options.work_dir,
        WORK_MAX_BYTES,
        WORK_MAX_FILES,
    ));
    let host = Host {
        wasi: builder.build(),
        table: ResourceTable::new(),
        guard: Arc::new(Mutex::new(guard)),
        limiter: MemoryLimiter {
            held: 0,
            gauge: shared.memory.clone(),
            max_bytes: (options.memory_mb as usize).saturating_mul(1 << 20),
            hit: false,
            total: None,
        },
        streams,
        turn: None,
        stop: None,
        link: boot.link.clone(),
        runtime: boot.runtime.clone(),
        clock_base: Instant::now(),
    };
    let mut store = Store::new(&shared.engine, host);
    store.limiter(|host| &mut host.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| match ctx.data().should_stop() {
        Some(stop) => {
            ctx.data_mut().stop = Some(stop);
            Err(wasmtime::Error::msg("code-runner stopped the guest"))
        }
        None => Ok(UpdateDeadline::Continue(1)),
    });
    let instance = instance_pre
        .instantiate(&mut store)
        .map_err(|err| format!("cannot instantiate the python snapshot: {err:#}"))?;
    let turn = instance
        .get_typed_func::<(String,), ((String, Option<String>),)>(&mut store, "turn")
        .map_err(|err| format!("the python snapshot has no turn export: {err:#}"))?;
    let max_result = options
        .max_result_bytes
        .map_or(protocol::MAX_RESULT, |cap| cap.min(protocol::MAX_RESULT));
    Ok(Instance {
        store,
        turn,
        max_result,
    })
}

/// Runs one turn; the instance comes back unless the turn killed it.
pub(crate) fn run_turn(mut instance: Instance, spec: TurnSpec) -> (TurnOutcome, Option<Instance>) {
    let max_result = instance.max_result;
    let frame = protocol::turn(&spec.task, &spec.bindings, max_result);
    let cap = spec.max_stream_bytes;
    {
        let host = instance.store.data_mut();
        *host.streams.lock().unwrap_or_else(|p| p.into_inner()) =
            Streams::with_live(cap, spec.live.clone());
        host.limiter.hit = false;
        host.stop = None;
        {
            let mut guard = host.guard.lock().unwrap_or_else(|p| p.into_inner());
            guard.quota.hit = false;
            guard.denied = false;
        }
        host.turn = Some(TurnLimits {
            deadline: Instant::now() + spec.timeout,
            budget: spec.timeout,
            abort: spec.abort,
            bindings: spec.bindings,
        });
    }
    let cpu_before = code_runner_core::thread_cpu_ns();
    let called = instance.turn.call(&mut instance.store, (frame,));
    let cpu_ns = code_runner_core::thread_cpu_ns().saturating_sub(cpu_before);
    let host = instance.store.data_mut();
    let usage = code_runner_core::TurnUsage {
        cpu_ns,
        peak_memory_bytes: host.limiter.held as u64,
    };
    let budget = host.turn.take().map_or(Duration::ZERO, |t| t.budget);
    let streams = std::mem::replace(
        &mut *host.streams.lock().unwrap_or_else(|p| p.into_inner()),
        Streams::new(Some(8192)),
    );
    let (denied, quota_hit, quota_message) = {
        let guard = host.guard.lock().unwrap_or_else(|p| p.into_inner());
        (guard.denied, guard.quota.hit, guard.quota.describe())
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
    let facts = Facts {
        memory_hit: host.limiter.hit,
        memory_message: format!("memory limit {} MiB exceeded", host.limiter.max_bytes >> 20),
        quota_hit,
        quota_message,
    };
    let ((head, result),) = match called {
        Ok(answer) => answer,
        Err(err) => {
            let ending = death(
                host.stop.take(),
                facts.memory_hit,
                facts.memory_message,
                budget,
                &err,
            );
            return (outcome(ending), None);
        }
    };
    let (ending, keep) = finish(&head, result.map(Ok), max_result, facts);
    (outcome(ending), keep.then_some(instance))
}

/// Writes a run's files into `/work` within this instance's quota.
pub(crate) fn put_files(
    instance: &mut Instance,
    root: &std::path::Path,
    files: &[code_runner_core::files::InputFile],
) -> Result<(), code_runner_core::RunnerError> {
    let host = instance.store.data();
    let mut guard = host.guard.lock().unwrap_or_else(|p| p.into_inner());
    crate::work_quota::put_files(&mut guard.quota, root, files)
}
