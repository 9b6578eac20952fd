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
//!   including a connection still dribbling its headers); failing that, the
//!   longest-open one the *client* is holding up: a request whose body is
//!   still arriving, or a long-lived event stream that only waits (a
//!   standalone `GET /mcp`). So neither idle sockets, stalled uploads nor
//!   parked streams can lock callers out (`/healthz` always gets in); only
//!   when every connection is busy with work of ours is the new one closed
//!   at once.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::IpAddr;
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

/// Default time a client has to deliver a whole request body, from the
/// moment its headers are in.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default ceiling on request-body bytes buffered at once across every
/// connection: 16 bodies at the 16 MiB limit.
pub const DEFAULT_MAX_BUFFERED_BODY_BYTES: usize = 256 * 1024 * 1024;

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
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_buffered_body_bytes: DEFAULT_MAX_BUFFERED_BODY_BYTES,
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
            conn: ticket.conn.clone(),
            client: stream.peer_addr().ok().map(|addr| ClientAddr(addr.ip())),
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
    conn: Conn,
    evicted: Arc<Notify>,
}

/// The client's address, in every request's extensions: per-client bounds
/// (MCP sessions) key on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ClientAddr(pub(crate) IpAddr);

/// What one connection is doing, in every request's extensions: its
/// requests in progress, and how many of those only wait on the client (a
/// body still arriving, a long-lived stream that only idles).
#[derive(Debug, Clone, Default)]
pub(crate) struct Conn(Arc<ConnCounts>);

#[derive(Debug, Default)]
struct ConnCounts {
    active: AtomicUsize,
    waiting: AtomicUsize,
}

/// How far a connection is from being closable, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Hold {
    Idle,
    ClientHeld,
    Busy,
}

impl Conn {
    fn hold(&self) -> Hold {
        let active = self.0.active.load(Ordering::SeqCst);
        let waiting = self.0.waiting.load(Ordering::SeqCst);
        match active {
            0 => Hold::Idle,
            _ if waiting >= active => Hold::ClientHeld,
            _ => Hold::Busy,
        }
    }

    /// Marks a request of this connection as waiting on the client until the
    /// guard drops.
    pub(crate) fn waiting(&self) -> Waiting {
        self.0.waiting.fetch_add(1, Ordering::SeqCst);
        Waiting(self.0.clone())
    }
}

/// A request waiting on its client (see [`Conn::waiting`]).
pub(crate) struct Waiting(Arc<ConnCounts>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Put in a response's extensions: its body is a long-lived stream that
/// waits on events, not work in progress, so the connection may be closed
/// to admit another at the cap.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LongLived;

impl Connections {
    fn new(max: usize) -> Self {
        Connections {
            max,
            table: Mutex::new((0, BTreeMap::new())),
        }
    }

    /// Admits a new connection, closing at the cap the oldest idle one, or
    /// else the oldest the client holds up; `None` when the cap is reached
    /// and every connection is busy.
    fn admit(self: &Arc<Self>) -> Option<Ticket> {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let (next, open) = &mut *table;
        if open.len() >= self.max {
            let mut closable = None;
            for (id, slot) in open.iter() {
                match slot.conn.hold() {
                    Hold::Idle => {
                        closable = Some(*id);
                        break;
                    }
                    Hold::ClientHeld if closable.is_none() => closable = Some(*id),
                    _ => {}
                }
            }
            if let Some(slot) = open.remove(&closable?) {
                slot.evicted.notify_one();
            }
        }
        let id = *next;
        *next += 1;
        let slot = Slot {
            conn: Conn::default(),
            evicted: Arc::new(Notify::new()),
        };
        let ticket = Ticket {
            id,
            conn: slot.conn.clone(),
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
            let busy = slot.conn.hold() != Hold::Idle;
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
    conn: Conn,
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
/// headers' arrival to the response body's last byte. Each request carries
/// the connection's [`Conn`] and [`ClientAddr`] in its extensions.
#[derive(Clone)]
struct Tracked {
    router: Router,
    conn: Conn,
    client: Option<ClientAddr>,
}

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<ActiveBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let guard = Active::enter(&self.conn);
        let router = self.router.clone();
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(self.conn.clone());
        if let Some(client) = self.client {
            req.extensions_mut().insert(client);
        }
        let conn = self.conn.clone();
        Box::pin(async move {
            let response = router.oneshot(req).await?;
            let long_lived = response.extensions().get::<LongLived>().is_some();
            let waiting = long_lived.then(|| conn.waiting());
            Ok(response.map(|body| ActiveBody {
                body,
                _waiting: waiting,
                _active: guard,
            }))
        })
    }
}

/// A request in progress on a connection.
struct Active(Arc<ConnCounts>);

impl Active {
    fn enter(conn: &Conn) -> Self {
        conn.0.active.fetch_add(1, Ordering::SeqCst);
        Active(conn.0.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted until it is sent (as
/// waiting on the client, for a [`LongLived`] stream).
struct ActiveBody {
    body: Body,
    _waiting: Option<Waiting>,
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
