//! HTTP: `POST /v1/call/{function_id}` (a run as server-sent events with
//! `Accept: text/event-stream`: `stream`), `GET /v1/functions`, `GET /healthz`,
//! `GET /metrics` (Prometheus), and MCP at `/mcp` (`crate::edge::mcp`).
//!
//! [`app`] is the routes; [`serve_with`] puts them behind the edge: the
//! `Host`/`Origin`/`Content-Type` rules (`edge`), bodies read within a
//! deadline and a byte budget and parsed with a value count (`body`), and
//! hyper connections under a cap with header deadlines (`server`).

mod body;
mod rules;
mod server;
mod stream;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde_json::json;

pub use crate::edge::api::Api;

pub use body::{JsonBody, MAX_BODY_BYTES, MAX_BODY_JSON_DEPTH, MAX_BODY_JSON_VALUES};
pub use server::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_BUFFERED_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS, HttpOptions,
};

pub(crate) use body::{check_shape, read_gated};
pub(crate) use server::{ClientAddr, LongLived};

use crate::bus::{CallError, FUNCTION_NOT_FOUND};
use crate::telemetry::TraceParent;

/// The HTTP face of an error: a status and `{"error": {code, message}}`.
#[derive(Debug)]
pub struct ApiError(pub CallError);

/// The HTTP status of a bus error code.
pub fn status_of(code: &str) -> StatusCode {
    use code_runner_core::ErrorCode::*;
    match code_runner_core::ErrorCode::parse(code) {
        Some(InvalidRequest) => StatusCode::BAD_REQUEST,
        Some(RuntimeNotFound) => StatusCode::NOT_FOUND,
        Some(Expired) => StatusCode::GONE,
        Some(Capacity) => StatusCode::TOO_MANY_REQUESTS,
        Some(Timeout) => StatusCode::GATEWAY_TIMEOUT,
        Some(ResourceExhausted) => StatusCode::UNPROCESSABLE_ENTITY,
        Some(HandlerError) => StatusCode::BAD_GATEWAY,
        Some(Engine) => StatusCode::INTERNAL_SERVER_ERROR,
        None if code == FUNCTION_NOT_FOUND => StatusCode::NOT_FOUND,
        None => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        Refusal {
            status: status_of(&self.0.code),
            error: self.0,
        }
        .into_response()
    }
}

/// An error answer with an explicit status: `{"error": {code, message}}`,
/// the message bounded by [`code_runner_core::MAX_ERROR_MESSAGE_BYTES`]. A
/// 5xx is logged once, here.
#[derive(Debug)]
pub struct Refusal {
    /// The HTTP status.
    pub status: StatusCode,
    /// The code and message.
    pub error: CallError,
}

impl Refusal {
    /// A refusal with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &str, message: String) -> Self {
        Refusal {
            status,
            error: CallError {
                code: code.to_string(),
                message,
                output: None,
            },
        }
    }

    /// `400 code-runner::invalid_request`.
    pub fn invalid(message: String) -> Self {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            code_runner_core::ErrorCode::InvalidRequest.as_str(),
            message,
        )
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let error = CallError {
            code: self.error.code,
            message: code_runner_core::bound_message(self.error.message),
            output: self.error.output,
        };
        if self.status.is_server_error() {
            tracing::error!(code = %error.code, "{}", error.message);
        }
        (self.status, axum::Json(json!({ "error": error }))).into_response()
    }
}

/// The router over `worker`.
pub fn app<A: Api>(worker: A) -> Router {
    Router::new()
        .route("/v1/call/{function_id}", post(call::<A>))
        .route("/v1/functions", get(functions::<A>))
        .route("/healthz", get(healthz::<A>))
        .route("/metrics", get(metrics::<A>))
        .nest_service("/mcp", crate::edge::mcp::service(worker.clone()))
        .merge(crate::edge::ui::routes())
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            worker.clone(),
            count_status::<A>,
        ))
        .with_state(worker)
}

/// Counts each answer's status in the metrics.
async fn count_status<A: Api>(
    State(worker): State<A>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = next.run(request).await;
    worker.answered_http(response.status().as_u16());
    response
}

/// The router `--metrics-listen` serves: `GET /metrics` alone.
pub fn metrics_app<A: Api>(worker: A) -> Router {
    Router::new()
        .route("/metrics", get(metrics::<A>))
        .with_state(worker)
}

async fn metrics<A: Api>(State(worker): State<A>) -> Response {
    // Rendering walks every series: off the async workers.
    match tokio::task::spawn_blocking(move || worker.metrics()).await {
        Ok(text) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => {
            ApiError(code_runner_core::RunnerError::engine("rendering the metrics failed").into())
                .into_response()
        }
    }
}

async fn call<A: Api>(
    State(worker): State<A>,
    Path(function_id): Path<String>,
    headers: axum::http::HeaderMap,
    JsonBody(payload): JsonBody,
) -> Response {
    let trace = trace_of(&headers);
    if function_id == crate::bus::names::RUN && stream::wants_events(&headers) {
        return stream::events(worker, function_id, payload, trace);
    }
    let caller = crate::bus::Caller::host().continuing(trace);
    match worker.call_as(&function_id, payload, caller).await {
        Ok(value) => axum::Json(value).into_response(),
        Err(err) => ApiError(err).into_response(),
    }
}

/// The trace a request continues: its W3C `traceparent` and `tracestate`
/// headers (none, or a malformed one: a trace of its own).
pub(crate) fn trace_of(headers: &axum::http::HeaderMap) -> TraceParent {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    TraceParent::from_w3c(header("traceparent"), header("tracestate"))
}

async fn functions<A: Api>(State(worker): State<A>) -> Response {
    match worker.functions().await {
        Ok(listing) => {
            // Serialising a large listing is work too: off the async workers.
            let body = tokio::task::spawn_blocking(move || serde_json::to_vec(&listing)).await;
            match body {
                Ok(Ok(bytes)) => (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    bytes,
                )
                    .into_response(),
                _ => ApiError(
                    code_runner_core::RunnerError::engine("listing functions failed").into(),
                )
                .into_response(),
            }
        }
        Err(err) => ApiError(err).into_response(),
    }
}

async fn healthz<A: Api>(State(worker): State<A>) -> Response {
    axum::Json(worker.health()).into_response()
}

/// Serves `app(worker)` on `listener` with the default [`HttpOptions`] until
/// `shutdown` resolves.
///
/// # Errors
/// None today; the signature leaves room for listener failures.
pub async fn serve<A: Api>(
    listener: tokio::net::TcpListener,
    worker: A,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, worker, HttpOptions::default(), shutdown).await
}

/// Serves `app(worker)` behind the edge rules of `options` until `shutdown`
/// resolves, then lets requests in progress finish.
///
/// # Errors
/// `InvalidInput` for an `--allow-origin` that is not an origin.
pub async fn serve_with<A: Api>(
    listener: tokio::net::TcpListener,
    worker: A,
    options: HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_guarded(listener, app(worker), options, shutdown).await
}

/// Serves [`metrics_app`] alone (`--metrics-listen`, for a worker that
/// serves no HTTP API) behind the same edge rules as the API, until
/// `shutdown` resolves.
///
/// # Errors
/// `InvalidInput` for an `--allow-origin` that is not an origin.
pub async fn serve_metrics<A: Api>(
    listener: tokio::net::TcpListener,
    worker: A,
    options: HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_guarded(listener, metrics_app(worker), options, shutdown).await
}

/// Serves `router` behind the edge rules of `options` until `shutdown`
/// resolves, then lets requests in progress finish.
async fn serve_guarded(
    listener: tokio::net::TcpListener,
    router: Router,
    options: HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = guarded(router, &options)
        .map_err(|message| std::io::Error::new(std::io::ErrorKind::InvalidInput, message))?;
    server::serve_router(listener, router, &options, shutdown).await;
    Ok(())
}

/// `router` behind the `Host`/`Origin`/`Content-Type` rules, with CORS for
/// the allowed origins and the body limits of `options`.
///
/// # Errors
/// An `allow_origins` entry that is not an origin.
pub fn guarded(router: Router, options: &HttpOptions) -> Result<Router, String> {
    let policy = rules::EdgePolicy::new(&options.allow_origins, &options.allow_hosts)?;
    let mut router = router.layer(Extension(body::BodyGate::new(
        options.body_read_timeout,
        options.max_buffered_body_bytes,
    )));
    if let Some(cors) = policy.cors() {
        router = router.layer(cors);
    }
    Ok(router.layer(axum::middleware::from_fn_with_state(
        Arc::new(policy),
        rules::guard,
    )))
}
