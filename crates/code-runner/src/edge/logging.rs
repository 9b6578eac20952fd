//! The process's log: `tracing` events to stderr, one bounded line each,
//! coloured only on a terminal.

use std::io::{IsTerminal, Write};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Longest log line written, in bytes: an error message is already bounded
/// (8 KiB, [`code_runner_core::MAX_ERROR_MESSAGE_BYTES`]); this catches any
/// other event that quotes something large.
pub const MAX_LOG_LINE_BYTES: usize = 16 * 1024;

/// Crates that quote whole messages off the wire, answers with their
/// `runtime_id` included, held at a level below which they do so whatever
/// `CODE_RUNNER_LOG` asks, since a runtime id is never logged in full: the
/// WebSocket crates trace every frame to and from the iii engine; the MCP
/// SDK logs every response at `debug`.
const WIRE_CRATES: [(&str, &str); 3] = [
    ("tungstenite", "debug"),
    ("tokio_tungstenite", "debug"),
    ("rmcp", "info"),
];

/// Installs the subscriber: level from `CODE_RUNNER_LOG` (default `info`;
/// the wire crates capped, see [`WIRE_CRATES`]), ANSI colours only when stderr is a
/// terminal and `NO_COLOR` is unset, so a log file or pipe holds plain text.
pub fn init() {
    tracing_subscriber::fmt()
        .with_env_filter(filter(std::env::var("CODE_RUNNER_LOG").ok().as_deref()))
        .with_ansi(colour())
        .with_writer(BoundedStderr)
        .init();
}

/// The filter for a `CODE_RUNNER_LOG` value (`None`: `info`), with the
/// wire crates capped.
fn filter(spec: Option<&str>) -> EnvFilter {
    let mut filter = spec
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    for (wire, level) in WIRE_CRATES {
        if let Ok(cap) = format!("{wire}={level}").parse() {
            filter = filter.add_directive(cap);
        }
    }
    filter
}

fn colour() -> bool {
    std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// Makes one [`BoundedLine`] per event.
struct BoundedStderr;

impl<'a> MakeWriter<'a> for BoundedStderr {
    type Writer = BoundedLine;

    fn make_writer(&'a self) -> BoundedLine {
        BoundedLine {
            left: MAX_LOG_LINE_BYTES,
            cut: false,
        }
    }
}

/// Stderr for one event: past [`MAX_LOG_LINE_BYTES`] the rest is dropped
/// and the line ends with a marker.
struct BoundedLine {
    left: usize,
    cut: bool,
}

impl Write for BoundedLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut stderr = std::io::stderr().lock();
        if buf.len() <= self.left {
            stderr.write_all(buf)?;
            self.left -= buf.len();
        } else {
            stderr.write_all(&buf[..self.left])?;
            self.left = 0;
            if !self.cut {
                self.cut = true;
                writeln!(
                    stderr,
                    " […log line truncated at {MAX_LOG_LINE_BYTES} bytes]"
                )?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
