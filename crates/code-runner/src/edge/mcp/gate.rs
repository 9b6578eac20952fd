//! Every byte sent to `/mcp` passes the HTTP API's body gate before the SDK
//! parses it.
//!
//! rmcp reads a POST body to its end without a deadline or a share of the
//! server's body budget, then parses it into its untagged message enum:
//! serde buffers the whole tree once as `Content` and again as a `Value`,
//! every number a heap string, so one 15 MiB body cost ~2 GiB. [`Gated`]
//! wraps the SDK's service: a POST body is read through
//! [`crate::edge::http::read_gated`] (deadline, the shared byte budget, the
//! 16 MiB limit) and counted ([`MAX_MESSAGE_VALUES`], [`MAX_MESSAGE_DEPTH`])
//! before the SDK gets it, already in memory; the budget then holds what
//! the SDK's parse costs (several times the bytes) until the SDK has answered. A refusal is the HTTP status of `/v1/call`'s refusal with
//! a JSON-RPC error as the body. A `GET` answered with an event stream is
//! marked long-lived, so the connection's cap may close it for a new caller.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, Response, StatusCode, header};
use futures::future::BoxFuture;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, RequestId, ServerJsonRpcMessage};
use serde_json::json;

use super::http::{Admission, SessionFull};
use crate::edge::http::{ClientAddr, LongLived, MAX_BODY_JSON_DEPTH, check_shape, read_gated};

/// The `/mcp` service over `api`: the SDK's ([`super::http::sdk_service`])
/// behind this gate.
pub fn service<A: crate::edge::api::Api>(
    api: A,
) -> Gated<
    rmcp::transport::streamable_http_server::StreamableHttpService<
        super::McpServer<A>,
        super::http::Bounded,
    >,
> {
    Gated::new(super::http::sdk_service(api))
}

/// Most JSON values one MCP message may hold. The SDK's parse costs a few
/// hundred bytes per value (twice buffered, numbers as strings), so this
/// keeps one message's tree near 20 MiB; a tool's arguments rarely hold more
/// than a handful.
pub const MAX_MESSAGE_VALUES: usize = 64 * 1024;

/// What the SDK's parse of a message costs at most per byte of it (a
/// number's digits are copied three times over, with a map around them:
/// measured 6.4 bytes per byte for 65 000 230-digit numbers) and per value
/// (~160 bytes measured), held against the shared body budget while it
/// parses, so the parses in flight stay within the budget too.
const PARSE_BYTES_PER_BYTE: usize = 7;
const PARSE_BYTES_PER_VALUE: usize = 256;

/// Deepest nesting one MCP message may use: the HTTP API's limit.
pub const MAX_MESSAGE_DEPTH: usize = MAX_BODY_JSON_DEPTH;

/// The SDK's `/mcp` service behind the body gate.
#[derive(Clone)]
pub struct Gated<S> {
    inner: S,
}

impl<S> Gated<S> {
    pub(crate) fn new(inner: S) -> Self {
        Gated { inner }
    }
}

impl<S, B> tower::Service<Request<Body>> for Gated<S>
where
    S: tower::Service<Request<Body>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { Ok(serve(inner, req).await) })
    }
}

async fn serve<S, B>(mut inner: S, req: Request<Body>) -> Response<Body>
where
    S: tower::Service<Request<Body>, Response = Response<B>, Error = Infallible>,
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let client = req.extensions().get::<ClientAddr>().map(|addr| addr.0);
    let admission = Arc::new(Admission::new(client));
    if req.method() != Method::POST {
        let (get, delete) = (req.method() == Method::GET, req.method() == Method::DELETE);
        let Ok(response) = admission.scope(inner.call(req)).await;
        let mut response = response.map(Body::new);
        if get && is_event_stream(&response) {
            response.extensions_mut().insert(LongLived);
        }
        // A session ended: `200`, which clients take as done (the SDK's
        // `202` made the official python client warn on every close).
        if delete && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::OK;
        }
        return response;
    }
    // A 2026-07-28 subscription is a POST whose answer is a stream that only
    // waits: the connection cap may close it for a new caller, as it may a
    // standalone GET stream.
    let listen = req
        .headers()
        .get("mcp-method")
        .is_some_and(|method| method.as_bytes() == b"subscriptions/listen");
    let (parts, body) = req.into_parts();
    let mut gated = match read_gated(&parts, body).await {
        Ok(gated) => gated,
        Err(refusal) => {
            return refused(
                refusal.status,
                None,
                &refusal.error.code,
                refusal.error.message,
            );
        }
    };
    let shape = match check_shape(
        &gated.bytes,
        MAX_MESSAGE_DEPTH,
        MAX_MESSAGE_VALUES,
        "the JSON-RPC message",
    ) {
        Ok(shape) => shape,
        Err(message) => {
            let id = request_id(&gated.bytes);
            return refused(StatusCode::BAD_REQUEST, id, INVALID, message);
        }
    };
    // What the SDK's parse will cost is held against the budget until it answers.
    let cost = PARSE_BYTES_PER_BYTE * gated.bytes.len() + PARSE_BYTES_PER_VALUE * shape.values;
    if let Err(refusal) = gated.hold_total(cost) {
        let id = request_id(&gated.bytes);
        return refused(
            refusal.status,
            id,
            &refusal.error.code,
            refusal.error.message,
        );
    }
    let req = Request::from_parts(parts, Body::from(std::mem::take(&mut gated.bytes)));
    let Ok(response) = admission.scope(inner.call(req)).await;
    // The SDK has parsed the message: its bytes leave the budget.
    drop(gated);
    match admission.refused() {
        Some(full) => refused(full.status(), None, CAPACITY, full.to_string()),
        None => {
            let mut response = response.map(Body::new);
            if listen && is_event_stream(&response) {
                response.extensions_mut().insert(LongLived);
            }
            response
        }
    }
}

const INVALID: &str = "code-runner::invalid_request";
const CAPACITY: &str = "code-runner::capacity";

fn is_event_stream<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// The JSON-RPC error for a message refused before parsing: `Invalid
/// Request` for what the client sent wrong, a server error for capacity,
/// with the contract's error code as `data.code`.
pub(crate) fn refusal_message(
    id: Option<RequestId>,
    code: &str,
    message: String,
) -> ServerJsonRpcMessage {
    let rpc_code = if code == INVALID {
        ErrorCode::INVALID_REQUEST
    } else {
        ErrorCode(-32000)
    };
    let data = json!({ "code": code });
    ServerJsonRpcMessage::Error(JsonRpcError::new(
        id,
        ErrorData::new(
            rpc_code,
            code_runner_core::bound_message(message),
            Some(data),
        ),
    ))
}

/// `status` with a JSON-RPC error body.
fn refused(
    status: StatusCode,
    id: Option<RequestId>,
    code: &str,
    message: String,
) -> Response<Body> {
    if status.is_server_error() {
        tracing::warn!(code, "{message}");
    }
    let body = serde_json::to_vec(&refusal_message(id, code, message)).unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    response
}

/// The `id` of a message that was refused before parsing, if its top level
/// has one: read without building the rest (serde_json skips ignored values
/// without recursing or allocating per value).
pub(crate) fn request_id(bytes: &[u8]) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        id: Option<RequestId>,
    }
    serde_json::from_slice::<Envelope>(bytes).ok()?.id
}

impl SessionFull {
    fn status(&self) -> StatusCode {
        match self {
            SessionFull::Client => StatusCode::TOO_MANY_REQUESTS,
            SessionFull::Server => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}
