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
    let cli = code_runner::cli::Cli::parse();
    code_runner::logging::init();
    let runtime = match tokio::runtime::Runtime::new() {
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
