//! HTTP: `POST /v1/call/{function_id}`, `GET /v1/functions`, `GET /healthz`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::bus::{CallError, FUNCTION_NOT_FOUND};
use crate::worker::Worker;

/// Largest request body accepted: 1 MiB of source survives JSON escaping with room to spare.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The HTTP face of an error: a status and `{"error": {code, message}}`.
#[derive(Debug)]
pub struct ApiError(pub CallError);

impl ApiError {
    fn invalid(message: String) -> Self {
        ApiError(CallError {
            code: code_runner_core::ErrorCode::InvalidRequest.as_str().into(),
            message,
        })
    }
}

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
        let status = status_of(&self.0.code);
        if status.is_server_error() {
            tracing::error!(code = %self.0.code, "{}", self.0.message);
        }
        (status, axum::Json(json!({ "error": self.0 }))).into_response()
    }
}

/// A JSON body whose every rejection is `code-runner::invalid_request` JSON.
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|err| {
            ApiError::invalid(format!("cannot read the request body: {}", err.body_text()))
        })?;
        if bytes.is_empty() {
            return Ok(JsonBody(json!({})));
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|err| ApiError::invalid(format!("malformed JSON body: {err}")))
    }
}

/// The router over `worker`.
pub fn app(worker: Worker) -> Router {
    Router::new()
        .route("/v1/call/{function_id}", post(call))
        .route("/v1/functions", get(functions))
        .route("/healthz", get(healthz))
        .merge(crate::ui::routes())
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(worker)
}

async fn call(
    State(worker): State<Worker>,
    Path(function_id): Path<String>,
    JsonBody(payload): JsonBody,
) -> Response {
    match worker.call(&function_id, payload).await {
        Ok(value) => axum::Json(value).into_response(),
        Err(err) => ApiError(err).into_response(),
    }
}

async fn functions(State(worker): State<Worker>) -> Response {
    axum::Json(worker.functions()).into_response()
}

async fn healthz(State(worker): State<Worker>) -> Response {
    axum::Json(worker.health()).into_response()
}

/// Serves `app(worker)` on `listener` until `shutdown` resolves.
///
/// # Errors
/// The server's I/O error.
pub async fn serve(
    listener: tokio::net::TcpListener,
    worker: Worker,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(worker))
        .with_graceful_shutdown(shutdown)
        .await
}
