//! The accept loop: hyper's HTTP/1 connections under a connection cap, with
//! header-read deadlines and idle-first eviction.
//!
//! Every connection holds a descriptor and a read buffer, and a client can
//! open thousands and send nothing. So:
//! - a connection has [`HttpOptions::header_read_timeout`] to deliver each
//!   request's headers, counted from its opening or its previous response
//!   (hyper's `header_read_timeout`); the same deadline closes idle
//!   keep-alive connections;
//! - at most [`HttpOptions::max_connections`] are open. At the cap, a new
//!   connection closes the longest-open *idle* one (no request in progress,
//!   including a connection still dribbling its headers), so a flood of idle
//!   sockets cannot lock callers out; when every connection is busy, the new
//!   one is closed at once.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::Request;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Notify;
use tower::ServiceExt;

/// Default cap on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Default time a connection has to deliver a request's headers.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Per-connection read buffer ceiling: headers must fit in it (hyper's
/// default is ~400 KiB, times every open connection).
const MAX_READ_BUFFER_BYTES: usize = 64 * 1024;

/// Pause after a failed `accept` (e.g. out of descriptors) before retrying.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How the HTTP edge treats clients. `Default` gives the documented limits.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Open connections at most (default 1024; `--max-connections`). Past
    /// it, the longest-open idle connection is closed to admit the new one,
    /// or the new one is closed when none is idle. Keep it well under the
    /// process's descriptor limit (`ulimit -n`): runtimes need descriptors too.
    pub max_connections: usize,
    /// Time a connection has to deliver a request's headers, from its
    /// opening or its previous response (default 10 s); also the idle
    /// keep-alive timeout.
    pub header_read_timeout: Duration,
    /// Time a client has to deliver a whole request body once its headers
    /// are in (default 30 s); past it the answer is 408 and the connection closes.
    pub body_read_timeout: Duration,
    /// Request-body bytes buffered at once across all connections (default
    /// 256 MiB), held as they arrive; a body whose bytes do not fit, or
    /// whose `Content-Length` is more than is free, is refused with 429
    /// `code-runner::capacity`.
    pub max_buffered_body_bytes: usize,
    /// Origins besides the server's own allowed to call from a browser
    /// (`--allow-origin`, e.g. `http://localhost:5173`); they get CORS answers.
    pub allow_origins: Vec<String>,
    /// Host names besides IP addresses and `localhost` the server answers to
    /// (`--allow-host`), e.g. the name a reverse proxy forwards.
    pub allow_hosts: Vec<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: super::body::DEFAULT_BODY_READ_TIMEOUT,
            max_buffered_body_bytes: super::body::DEFAULT_MAX_BUFFERED_BODY_BYTES,
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
        }
    }
}

impl HttpOptions {
    /// Checks the allow-lists.
    ///
    /// # Errors
    /// An `allow_origins` entry that is not `scheme://host[:port]`.
    pub fn validate(&self) -> Result<(), String> {
        super::rules::EdgePolicy::new(&self.allow_origins, &self.allow_hosts).map(|_| ())
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets busy
/// connections finish their request.
pub(crate) async fn serve_router(
    listener: tokio::net::TcpListener,
    router: Router,
    options: &HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let connections = Arc::new(Connections::new(options.max_connections.max(1)));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_buf_size(MAX_READ_BUFFER_BYTES);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!("cannot accept a connection: {err}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(ticket) = connections.admit() else {
            tracing::debug!("connection refused: all connections are busy");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = Tracked {
            router: router.clone(),
            active: ticket.active.clone(),
        };
        let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            tokio::select! {
                result = conn => {
                    if let Err(err) = result {
                        tracing::debug!("connection ended: {err}");
                    }
                }
                () = ticket.evicted.notified() => tracing::debug!("idle connection closed to admit a new one"),
            }
            drop(ticket);
        });
    }
    drop(listener);
    connections.evict_idle();
    graceful.shutdown().await;
}

/// The open connections, oldest first, with what each is doing.
struct Connections {
    max: usize,
    table: Mutex<(u64, BTreeMap<u64, Slot>)>,
}

/// One open connection's entry.
struct Slot {
    active: Arc<AtomicUsize>,
    evicted: Arc<Notify>,
}

impl Connections {
    fn new(max: usize) -> Self {
        Connections {
            max,
            table: Mutex::new((0, BTreeMap::new())),
        }
    }

    /// Admits a new connection, closing the oldest idle one at the cap;
    /// `None` when the cap is reached and every connection is busy.
    fn admit(self: &Arc<Self>) -> Option<Ticket> {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let (next, open) = &mut *table;
        if open.len() >= self.max {
            let idle = open
                .iter()
                .find(|(_, slot)| slot.active.load(Ordering::SeqCst) == 0)
                .map(|(id, _)| *id)?;
            if let Some(slot) = open.remove(&idle) {
                slot.evicted.notify_one();
            }
        }
        let id = *next;
        *next += 1;
        let slot = Slot {
            active: Arc::new(AtomicUsize::new(0)),
            evicted: Arc::new(Notify::new()),
        };
        let ticket = Ticket {
            id,
            active: slot.active.clone(),
            evicted: slot.evicted.clone(),
            connections: self.clone(),
        };
        open.insert(id, slot);
        Some(ticket)
    }

    /// Closes every idle connection (shutdown): busy ones finish first.
    fn evict_idle(&self) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        table.1.retain(|_, slot| {
            let busy = slot.active.load(Ordering::SeqCst) > 0;
            if !busy {
                slot.evicted.notify_one();
            }
            busy
        });
    }
}

/// A connection's place in [`Connections`]; dropping it frees the place.
struct Ticket {
    id: u64,
    active: Arc<AtomicUsize>,
    evicted: Arc<Notify>,
    connections: Arc<Connections>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut table = self
            .connections
            .table
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        table.1.remove(&self.id);
    }
}

/// The router, counting the connection's requests in progress: from the
/// headers' arrival to the response body's last byte.
#[derive(Clone)]
struct Tracked {
    router: Router,
    active: Arc<AtomicUsize>,
}

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<ActiveBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let guard = Active::enter(self.active.clone());
        let router = self.router.clone();
        Box::pin(async move {
            let response = router.oneshot(req.map(Body::new)).await?;
            Ok(response.map(|body| ActiveBody {
                body,
                _active: guard,
            }))
        })
    }
}

/// A request in progress on a connection.
struct Active(Arc<AtomicUsize>);

impl Active {
    fn enter(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Active(count)
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted until it is sent.
struct ActiveBody {
    body: Body,
    _active: Active,
}

impl http_body::Body for ActiveBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
