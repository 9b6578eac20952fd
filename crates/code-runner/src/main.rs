//! `code-runner`: parse flags, run, map the result to an exit status.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // A sandbox process starts before any thread (its confinement is per
    // thread until seccomp), so before the flags, the log and the runtime.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == code_runner::SANDBOX_ROLE)
    {
        return code_runner::cli::sandbox::main();
    }
    // The iii SDK records each engine invocation's payload and answer (the
    // code, its output) on its spans unless told not to; a span of this
    // worker never carries either (docs/operating.md).
    // SAFETY: no other thread runs yet, so nothing reads the environment
    // while it changes.
    unsafe { std::env::set_var("III_DISABLE_TRACE_PAYLOADS", "1") };
    let cli = code_runner::cli::Cli::parse();
    code_runner::logging::init();
    // The blocking pool's size is chosen, not tokio's 512: what runs there
    // is the worker's own file work (a runtime's directory removed, collected
    // files read, the configuration file) and jobs a caller's input decides,
    // which take few places of their own (`ops::host_work`); 64 threads cover
    // them with room, and a burst queues instead of starting hundreds.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(code_runner::MAX_BLOCKING_THREADS)
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(code_runner::cli::run(cli)) {
        Ok(code) => code,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}
