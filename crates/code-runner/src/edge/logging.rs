//! The process's log: `tracing` events to stderr, one bounded line each,
//! coloured only on a terminal.

use std::io::{IsTerminal, Write};

use tracing::{Level, Metadata};
use tracing_subscriber::filter::{EnvFilter, FilterExt, filter_fn};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Longest log line written, in bytes: an error message is already bounded
/// (8 KiB, [`code_runner_core::MAX_ERROR_MESSAGE_BYTES`]); this catches any
/// other event that quotes something large.
pub const MAX_LOG_LINE_BYTES: usize = 16 * 1024;

/// Crates that quote whole messages off the wire, answers with their
/// `runtime_id` included, held at a level below which they do so whatever
/// `CODE_RUNNER_LOG` asks, since a runtime id is never logged in full: the
/// WebSocket crates trace every frame to and from the iii engine; the MCP
/// SDK logs every response at `debug`. The cap is a filter of its own,
/// applied after the directives, so no directive (`rmcp::service=debug`
/// is more specific than `rmcp=info`) can lift it.
const WIRE_CRATES: [(&str, Level); 3] = [
    ("tungstenite", Level::DEBUG),
    ("tokio_tungstenite", Level::DEBUG),
    ("rmcp", Level::INFO),
];

/// Installs the subscriber: level from `CODE_RUNNER_LOG` (default `info`;
/// the wire crates capped, see [`WIRE_CRATES`]), ANSI colours only when stderr is a
/// terminal and `NO_COLOR` is unset, so a log file or pipe holds plain text.
pub fn init() {
    let spec = std::env::var("CODE_RUNNER_LOG").ok();
    tracing_subscriber::registry()
        .with(layer(spec.as_deref(), BoundedStderr, colour()))
        .init();
}

/// The log's layer: events as lines into `writer`, through the
/// `CODE_RUNNER_LOG` directives and then the wire crates' cap.
fn layer<S, W>(spec: Option<&str>, writer: W, ansi: bool) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let directives = spec
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(writer)
        .with_filter(directives.and(filter_fn(within_wire_cap)))
}

/// Whether an event or span passes [`WIRE_CRATES`]' cap.
fn within_wire_cap(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    WIRE_CRATES
        .iter()
        .find(|(krate, _)| {
            target
                .strip_prefix(krate)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
        .is_none_or(|(_, cap)| metadata.level() <= cap)
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Issue 29 item 13: `info,rmcp::service=debug` logged every MCP response
    /// (runtime ids in full): a directive more specific than the cap won.
    /// The cap is its own filter now; whatever the directives, rmcp's
    /// `debug` and the WebSocket crates' `trace` stay out, the rest passes.
    #[test]
    fn no_directive_lifts_the_wire_crates_cap() {
        let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = lines.clone();
        let writer = move || Sink(sink.clone());
        let spec =
            "info,rmcp::service=debug,rmcp=trace,tungstenite=trace,rmcpx=debug,code_runner=debug";
        let subscriber = tracing_subscriber::registry().with(layer(Some(spec), writer, false));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "rmcp::service", "rt_secret_rmcp_debug");
            tracing::trace!(target: "rmcp", "rt_secret_rmcp_trace");
            tracing::trace!(target: "tungstenite::protocol", "rt_secret_frame");
            tracing::info!(target: "rmcp::service", "rmcp_info_passes");
            tracing::debug!(target: "tungstenite", "tungstenite_debug_passes");
            tracing::debug!(target: "rmcpx", "other_crate_passes");
            tracing::debug!(target: "code_runner::edge", "own_debug_passes");
        });
        let text = String::from_utf8(lines.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("rt_secret"), "{text}");
        for passes in [
            "rmcp_info_passes",
            "tungstenite_debug_passes",
            "other_crate_passes",
            "own_debug_passes",
        ] {
            assert!(text.contains(passes), "{passes} missing: {text}");
        }
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
