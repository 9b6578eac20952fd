//! MCP over streamable HTTP, mounted at `/mcp` by the HTTP API (behind its
//! Host, Origin and connection rules; the SDK's own Host check is off, ours
//! ran first), its bodies read through the API's body gate (`gate.rs`).
//!
//! Sessions are bounded: at most [`MAX_SESSIONS`] live at once and
//! [`MAX_SESSIONS_PER_CLIENT`] per client address, so one client keeping
//! its sessions busy (pings reset the idle clock) cannot lock others out;
//! each is closed after [`SESSION_IDLE`] without a request. A new session
//! past a cap is answered 429 (this client's cap) or 503 (the server's), not
//! the SDK's 500. A session keeps at most [`MAX_STANDALONE_STREAMS`]
//! standalone event streams (`GET /mcp`): a newer one ends the oldest.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::stream::{AbortHandle, Abortable};
use futures::{Stream, StreamExt};
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::McpServer;
use crate::edge::api::Api;
use crate::edge::http::{ClientAddr, MAX_BODY_BYTES};
use crate::telemetry::TraceParent;

/// The client address the HTTP API saw for the request `parts` belong to.
pub(super) fn client_of(parts: &axum::http::request::Parts) -> Option<IpAddr> {
    parts.extensions.get::<ClientAddr>().map(|addr| addr.0)
}

/// The trace a request continues: its `_meta.traceparent` and
/// `tracestate` (SEP-414), else, over HTTP, the request's W3C headers.
pub(super) fn trace_of(context: &RequestContext<RoleServer>) -> TraceParent {
    match context.meta.get_traceparent() {
        Some(traceparent) => {
            TraceParent::from_w3c(Some(traceparent), context.meta.get_tracestate())
        }
        None => context
            .extensions
            .get::<axum::http::request::Parts>()
            .map_or_else(TraceParent::default, |parts| {
                crate::edge::http::trace_of(&parts.headers)
            }),
    }
}

/// Live MCP sessions at once over HTTP.
pub const MAX_SESSIONS: usize = 64;
/// Live MCP sessions one client address may hold.
pub const MAX_SESSIONS_PER_CLIENT: usize = 16;
/// Standalone event streams (`GET /mcp`) one session keeps open.
pub const MAX_STANDALONE_STREAMS: usize = 2;
/// A session with no request for this long is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(300);

/// The SDK's `/mcp` service over `api`, under the session caps; what
/// `/mcp` serves is this behind the body gate ([`super::gate::service`]).
pub fn sdk_service<A: Api>(api: A) -> StreamableHttpService<McpServer<A>, Bounded> {
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    config.max_request_body_bytes = MAX_BODY_BYTES;
    StreamableHttpService::new(
        move || Ok(McpServer::new(api.clone())),
        Arc::new(Bounded {
            sdk: sessions,
            owners: tokio::sync::Mutex::default(),
            streams: Mutex::default(),
        }),
        config,
    )
}

tokio::task_local! {
    /// Who is asking, for the session manager (the SDK calls it inside the
    /// request's own future).
    static ADMISSION: Arc<Admission>;
}

/// One `/mcp` request's client, and whether a session it asked for was refused.
pub(crate) struct Admission {
    client: Option<IpAddr>,
    refused: Mutex<Option<SessionFull>>,
}

impl Admission {
    pub(crate) fn new(client: Option<IpAddr>) -> Self {
        Admission {
            client,
            refused: Mutex::new(None),
        }
    }

    /// Runs `future` (the SDK's handling of the request) as this request.
    pub(crate) async fn scope<F: Future>(self: &Arc<Self>, future: F) -> F::Output {
        ADMISSION.scope(self.clone(), future).await
    }

    /// The cap a new session hit, if one did.
    pub(crate) fn refused(&self) -> Option<SessionFull> {
        *self.refused.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Which session cap refused a new session.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub enum SessionFull {
    /// The client holds its share.
    #[error(
        "this client holds {MAX_SESSIONS_PER_CLIENT} MCP sessions, the most one client may; close one (DELETE /mcp) or reuse it"
    )]
    Client,
    /// Every session slot is taken.
    #[error(
        "{MAX_SESSIONS} MCP sessions are open, the most this server keeps; retry when one is closed or idles out"
    )]
    Server,
}

/// The SDK's in-memory sessions under the caps.
pub struct Bounded {
    sdk: LocalSessionManager,
    /// The client that opened each session; held while a session is made,
    /// so two new sessions cannot both take the last slot.
    owners: tokio::sync::Mutex<HashMap<SessionId, Option<IpAddr>>>,
    /// Each session's standalone streams, oldest first: alive while the
    /// `Weak` upgrades.
    streams: Mutex<HashMap<SessionId, VecDeque<Standalone>>>,
}

/// One standalone stream: whether it is still open, and how to end it.
type Standalone = (Weak<()>, AbortHandle);

/// Why a session could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionRefusal {
    /// A session cap.
    #[error(transparent)]
    Full(#[from] SessionFull),
    /// What the SDK's session manager said.
    #[error(transparent)]
    Sdk(#[from] LocalSessionManagerError),
}

impl Bounded {
    /// Refuses a session past a cap (telling the request's [`Admission`]).
    async fn admit(
        &self,
        owners: &mut HashMap<SessionId, Option<IpAddr>>,
    ) -> Result<Option<IpAddr>, SessionFull> {
        let admission = ADMISSION.try_with(Arc::clone).ok();
        let client = admission.as_ref().and_then(|admission| admission.client);
        let live = self.sdk.sessions.read().await;
        owners.retain(|id, _| live.contains_key(id));
        let full = if live.len() >= MAX_SESSIONS {
            Some(SessionFull::Server)
        } else if owners.values().filter(|owner| **owner == client).count()
            >= MAX_SESSIONS_PER_CLIENT
        {
            Some(SessionFull::Client)
        } else {
            None
        };
        match (full, admission) {
            (Some(full), admission) => {
                if let Some(admission) = admission {
                    *admission.refused.lock().unwrap_or_else(|p| p.into_inner()) = Some(full);
                }
                Err(full)
            }
            (None, _) => Ok(client),
        }
    }

    /// `stream`, ended when the session opens more than
    /// [`MAX_STANDALONE_STREAMS`] after it.
    fn bounded<S>(
        &self,
        id: &SessionId,
        stream: S,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static + use<S>
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        let (handle, registration) = AbortHandle::new_pair();
        let alive = Arc::new(());
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let open = streams.entry(id.clone()).or_default();
        open.retain(|(alive, _)| alive.strong_count() > 0);
        while open.len() >= MAX_STANDALONE_STREAMS {
            if let Some((_, oldest)) = open.pop_front() {
                oldest.abort();
            }
        }
        open.push_back((Arc::downgrade(&alive), handle));
        Abortable::new(stream, registration).map(move |message| {
            let _alive = &alive;
            message
        })
    }
}

impl SessionManager for Bounded {
    type Error = SessionRefusal;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let mut owners = self.owners.lock().await;
        let client = self.admit(&mut owners).await?;
        let (id, transport) = self.sdk.create_session().await?;
        owners.insert(id.clone(), client);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.sdk.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.sdk.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let streams = self
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        for (_, stream) in streams.into_iter().flatten() {
            stream.abort();
        }
        Ok(self.sdk.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.sdk.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.sdk.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.sdk.create_standalone_stream(id).await?;
        Ok(self.bounded(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.sdk.resume(id, last_event_id).await?;
        Ok(self.bounded(id, stream))
    }
}
