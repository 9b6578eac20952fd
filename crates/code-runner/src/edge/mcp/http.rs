//! MCP over streamable HTTP, mounted at `/mcp` by the HTTP API (behind its
//! Host, Origin and connection rules; the SDK's own Host check is off, ours
//! ran first). Sessions are bounded: at most [`MAX_SESSIONS`] live at once,
//! each closed after [`SESSION_IDLE`] without a request.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::McpServer;
use crate::edge::api::Api;
use crate::edge::http::MAX_BODY_BYTES;

/// Live MCP sessions at once over HTTP.
pub const MAX_SESSIONS: usize = 64;
/// A session with no request for this long is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(300);

/// The `/mcp` service over `api`.
pub fn service<A: Api>(api: A) -> StreamableHttpService<McpServer<A>, Bounded> {
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    config.max_request_body_bytes = MAX_BODY_BYTES;
    StreamableHttpService::new(
        move || Ok(McpServer::new(api.clone())),
        Arc::new(Bounded(sessions)),
        config,
    )
}

/// The SDK's in-memory sessions, refusing a new one past [`MAX_SESSIONS`].
pub struct Bounded(LocalSessionManager);

/// Why a session could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionRefusal {
    /// Every session slot is taken.
    #[error(
        "{MAX_SESSIONS} MCP sessions are open, the most this server keeps; close one (DELETE /mcp) or wait for an idle one to expire"
    )]
    Full,
    /// What the SDK's session manager said.
    #[error(transparent)]
    Sdk(#[from] LocalSessionManagerError),
}

impl SessionManager for Bounded {
    type Error = SessionRefusal;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        if self.0.sessions.read().await.len() >= MAX_SESSIONS {
            return Err(SessionRefusal::Full);
        }
        Ok(self.0.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.0.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.0.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.0.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.0.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.0.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.0.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.0.resume(id, last_event_id).await?)
    }
}
