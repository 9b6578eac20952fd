//! The worker as an MCP server, for agent hosts: over stdio
//! (`code-runner mcp`) and streamable HTTP at `/mcp` (`serve`), with the
//! official SDK, `rmcp`.
//!
//! Tools are the operations and the published functions ([`tools`]); a call
//! is a bus call as the host. Its answer is the bus response, as
//! `structuredContent` and as text; a failing script is an ordinary result
//! (its exit code and traceback are the answer), a contract error a result
//! with `isError` whose text is `code: message`. A client's
//! `notifications/cancelled` aborts the run it started. The tool list
//! follows the bus: a session is told `notifications/tools/list_changed`
//! when the published tools it sees change. One follower per session at
//! most (none for a stateless request, which has no initialized session);
//! it wakes only when the bus's listing changes, and the listing it compares
//! is built once per change for every follower ([`crate::bus::Bus::listing`]).

mod approve;
mod clean;
mod content;
mod follow;
mod gate;
mod http;
mod modern;
mod output;
mod resources;
mod stdio;
pub mod tools;

pub use follow::followers;
pub use gate::service;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_runner_core::AbortSignal;
use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig,
};
#[allow(
    deprecated,
    reason = "MCP logging is deprecated by SEP-2577 and still what clients read"
)]
use rmcp::model::{LoggingLevel, SetLevelRequestParams};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::bus::Caller;
use crate::bus::names::{READ_FILE, RESUME, RUN};
use crate::edge::api::Api;

/// One MCP session's server over the worker's facade.
#[derive(Clone)]
pub struct McpServer<A: Api> {
    api: A,
    /// Its runtimes (whose guest-published tools it sees) and its follower.
    own: Arc<follow::Own>,
    /// The least log level the client asked for (`logging/setLevel`).
    #[allow(
        deprecated,
        reason = "MCP logging is deprecated by SEP-2577 and still what clients read"
    )]
    level: Arc<Mutex<Option<LoggingLevel>>>,
}

/// The longest a published tool's arguments are checked (the check is
/// bounded by its steps too).
const ARGUMENT_CHECK_TIME: Duration = Duration::from_secs(10);

impl<A: Api> McpServer<A> {
    /// A server over `api`.
    pub fn new(api: A) -> Self {
        McpServer {
            api,
            own: Arc::default(),
            level: Arc::default(),
        }
    }

    /// Serves one client on stdin and stdout until it closes them, every
    /// line counted before it is parsed ([`stdio`]).
    ///
    /// # Errors
    /// The handshake failed (the client spoke no MCP).
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        let lines = stdio::transport(tokio::io::stdin(), tokio::io::stdout());
        let running = self.serve(lines).await?;
        running.waiting().await?;
        Ok(())
    }
}

impl<A: Api> ServerHandler for McpServer<A> {
    #[allow(
        deprecated,
        reason = "MCP logging is deprecated by SEP-2577 and still what clients read"
    )]
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_resources()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "code-runner",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Runs Python and JavaScript in a sandbox: call `run` with lang and code; \
                 functions published with `register_function` become tools of their own.",
            )
    }

    #[allow(
        deprecated,
        reason = "MCP logging is deprecated by SEP-2577 and still what clients read"
    )]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.level.lock().unwrap_or_else(|p| p.into_inner()) = Some(request.level);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        follow::follow(&self.api, &self.own, context.peer).await;
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let client = context
            .request_context()
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(http::client_of);
        follow::listen(&self.api, client, context)
            .await
            .map_err(|why| McpError::invalid_request(why, None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        resources::read(&self.api, &request).await.map(Into::into)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let listing = self
            .api
            .listing()
            .await
            .map_err(|err| McpError::internal_error(err.message, None))?;
        let roots = self.own.roots();
        Ok(ListToolsResult::with_all_items(tools::tools(
            &listing,
            &self.api.config(),
            &self.api.offer(),
            follow::viewer(&self.api, &roots),
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(id) = tools::function_id(&request.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "no tool `{}` here: tools/list names every tool",
                    request.name
                ),
                None,
            ));
        };
        let modern = modern::is_modern(&context);
        // A round of an approval under 2026-07-28: the code does not run
        // again; the run it suspended goes on with the person's answer.
        let retry = if modern && (id == RUN || id == RESUME) && request.request_state.is_some() {
            Some(modern::retry(&request).map_err(|why| McpError::invalid_params(why, None))?)
        } else {
            None
        };
        if let Some(modern::Retry::AskAgain(asked)) = &retry {
            let ttl = Duration::from_secs(self.api.config().idle_ttl_secs);
            if let Some(round) = modern::round(asked, &request, ttl) {
                return Ok(round.into());
            }
        }
        let (id, payload) = match retry {
            Some(modern::Retry::Resume(resume)) => (RESUME.to_string(), resume),
            _ => {
                let mut arguments = request.arguments.clone().unwrap_or_default();
                // Over MCP a run's files come back by reference unless it
                // asks otherwise: a host reads them with resources/read,
                // and the model's context gets a preview, not the bytes.
                if id == RUN {
                    arguments
                        .entry("collect_mode")
                        .or_insert_with(|| Value::from("link"));
                }
                (id, Value::Object(arguments))
            }
        };
        let cancel = AbortSignal::new();
        // A published function's tool holds to its inputSchema, as
        // `iii.fn` does: a call that does not match never reaches the
        // handler, and the model reads why.
        let payload = match self.checked_arguments(&id, payload, &cancel).await {
            Ok(payload) => payload,
            Err(err) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "{}: {id}: {}",
                    err.code.as_str(),
                    err.message
                ))])
                .into());
            }
        };
        let outlet = match context.meta.get_progress_token() {
            Some(token) => output::Outlet::Progress {
                peer: context.peer.clone(),
                token,
                sent: 0,
            },
            // 2026-07-28: log messages only at the level the request asks
            // for in its `_meta`, none by default.
            None if modern => match context.meta.log_level() {
                Some(level) => output::Outlet::Log {
                    peer: context.peer.clone(),
                    level: Arc::new(Mutex::new(Some(level))),
                },
                None => output::Outlet::Silent,
            },
            None => output::Outlet::Log {
                peer: context.peer.clone(),
                level: self.level.clone(),
            },
        };
        let (live, chunks) = crate::edge::live::tap();
        let (done, finished) = tokio::sync::oneshot::channel();
        let forwarding = tokio::spawn(output::forward(chunks, outlet, finished));
        let mut answer = self
            .call_to_end(&id, payload, &cancel, &live, &context)
            .await;
        let mut round = None;
        if id == RUN || id == RESUME {
            let wait = Duration::from_secs(self.api.config().idle_ttl_secs);
            if modern {
                // Asked as a round of this request, when the client can ask.
                if let Ok(value) = &answer
                    && modern::can_ask(&context)
                    && let Some(asked) = approve::Asked::of(value)
                {
                    round = modern::round(&asked, &request, wait);
                }
            } else {
                // A run suspended on a call that waits for a person: asked
                // through the client (elicitation) when it can, then
                // resumed here.
                while let Ok(value) = &answer {
                    let asked = tokio::select! {
                        asked = approve::ask(&context.peer, value, wait) => asked,
                        () = context.ct.cancelled() => None,
                    };
                    let Some(resume) = asked else {
                        break;
                    };
                    answer = self
                        .call_to_end(RESUME, resume, &cancel, &live, &context)
                        .await;
                }
            }
        }
        // The last output goes before the answer.
        let _ = done.send(());
        let _ = forwarding.await;
        if let Some(round) = round {
            return Ok(round.into());
        }
        let mut pointer = None;
        if let Ok(value) = &answer
            && (id == RUN || id == RESUME)
        {
            self.own.remember(&self.api, value);
            if modern && !self.api.config().mcp_guest_tools {
                pointer = self.guest_functions(value).await;
            }
        }
        Ok(match answer {
            Ok(value) => {
                let mut blocks = match id.as_str() {
                    READ_FILE => content::read_file_content(&value),
                    _ => content::content_of(&value),
                };
                if let Some(note) = pointer.as_deref().and_then(modern::guest_pointer) {
                    blocks.push(ContentBlock::text(note));
                }
                let mut result = CallToolResult::success(blocks);
                if value.is_object() {
                    result.structured_content = Some(content::structured(value));
                }
                result
            }
            Err(err) => CallToolResult::error(vec![ContentBlock::text(err.with_output_text())]),
        }
        .into())
    }
}

impl<A: Api> McpServer<A> {
    /// `payload` checked against the request schema of the published
    /// function `id` (the worker's own operations check their payloads
    /// themselves), within [`ARGUMENT_CHECK_TIME`].
    async fn checked_arguments(
        &self,
        id: &str,
        payload: Value,
        cancel: &AbortSignal,
    ) -> Result<Value, code_runner_core::RunnerError> {
        if tools::is_operation(id) {
            return Ok(payload);
        }
        let Ok(listing) = self.api.listing().await else {
            return Ok(payload);
        };
        let Some(schema) = listing
            .functions
            .iter()
            .find(|f| f.function_id == id)
            .and_then(|f| f.request_schema.clone())
        else {
            return Ok(payload);
        };
        let deadline = std::time::Instant::now() + ARGUMENT_CHECK_TIME;
        crate::ops::guest::check_arguments(Arc::new(schema), payload, cancel, deadline).await
    }

    /// The functions the lineage of the runtime `answer` names published
    /// (guest code's, which a 2026-07-28 client sees as no tools).
    async fn guest_functions(&self, answer: &Value) -> Option<Vec<String>> {
        let root = answer
            .get("runtime_id")
            .and_then(Value::as_str)
            .and_then(|id| self.api.runtime_root(id))?;
        let listing = self.api.listing().await.ok()?;
        let ids: Vec<String> = listing
            .functions
            .iter()
            .zip(&listing.publishers)
            .filter(|(_, publisher)| **publisher == Some(root))
            .map(|(f, _)| f.function_id.clone())
            .collect();
        Some(ids)
    }

    /// Calls `id` with live output to `live`, stopped (`cancel`) when the
    /// client cancels the request, and waits for its answer.
    async fn call_to_end(
        &self,
        id: &str,
        payload: Value,
        cancel: &AbortSignal,
        live: &code_runner_core::LiveOutput,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, crate::bus::CallError> {
        let caller = Caller::host_streaming(cancel.clone(), Some(live.clone()))
            .continuing(http::trace_of(context));
        let call = self.api.call_as(id, payload, caller);
        tokio::pin!(call);
        tokio::select! {
            answer = &mut call => answer,
            () = context.ct.cancelled() => {
                cancel.abort();
                call.await
            }
        }
    }
}
