//! Host tools run as children (pip, npm, esbuild): one way to wait for them
//! within a deadline and keep a bounded tail of what they said, so a tool
//! that hangs or floods its stderr never holds or fills the worker.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a finished child ended and the first `max_stderr` bytes of its stderr.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// What it wrote to stderr, at most the bound asked for (lossy UTF-8).
    pub stderr: String,
}

/// Runs `command` (stdin and stdout closed, stderr read), killing it past
/// `timeout`.
///
/// # Errors
/// The child could not start (`what` and the OS error), or it ran past
/// `timeout` and was killed.
pub fn run_bounded(
    command: &mut Command,
    what: &str,
    timeout: Duration,
    max_stderr: u64,
) -> Result<Finished, String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot run {what}: {err}"))?;
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(stderr) = stderr {
            let mut bounded = stderr.take(max_stderr);
            let _ = bounded.read_to_end(&mut bytes);
            // Drain the rest so the child never blocks on a full pipe.
            let _ = std::io::copy(&mut bounded.into_inner(), &mut std::io::sink());
        }
        String::from_utf8_lossy(&bytes).into_owned()
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} took over {} s; stopped", timeout.as_secs()));
            }
            Err(err) => return Err(format!("waiting for {what}: {err}")),
        }
    };
    let stderr = reader.join().unwrap_or_default();
    Ok(Finished { status, stderr })
}

/// The last `chars` characters of `text`, trimmed.
pub fn tail(text: &str, chars: usize) -> String {
    let skip = text.chars().count().saturating_sub(chars);
    text.chars()
        .skip(skip)
        .collect::<String>()
        .trim()
        .to_string()
}
