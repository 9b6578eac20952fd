//! Who may call: the `Host`, `Origin` and `Content-Type` rules that keep web
//! pages from driving a server on localhost.
//!
//! - **Host** (DNS rebinding): a page on `evil.example` whose name later
//!   resolves to 127.0.0.1 sends `Host: evil.example:PORT`. A request must
//!   name the server by IP address (any, so a `0.0.0.0` listener answers on
//!   each of its addresses) or `localhost`; other names need `--allow-host`.
//!   A request with no `Host` at all (HTTP/1.0 allows that) is refused too:
//!   the rule cannot be checked without one.
//! - **Origin**: a browser names the page behind every `fetch` that is not a
//!   plain navigation. Only the server's own origin (`http(s)://` + the
//!   request's `Host`) and the `--allow-origin` list may call; the listed
//!   origins also get CORS answers (preflights included).
//! - **Content-Type**: a `POST` must say `application/json`. A form or a
//!   `text/plain` fetch needs no CORS preflight, so without this rule any page
//!   could post a run; with it, a cross-origin page must preflight and is
//!   refused.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use code_runner_core::ErrorCode;
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::Refusal;

/// The allow-lists, normalised (lower case, origins without a trailing `/`).
#[derive(Debug, Default)]
pub(crate) struct EdgePolicy {
    origins: Vec<String>,
    hosts: Vec<String>,
}

impl EdgePolicy {
    /// A policy over `--allow-origin` and `--allow-host` values.
    ///
    /// # Errors
    /// An origin that is not `scheme://host[:port]`.
    pub(crate) fn new(origins: &[String], hosts: &[String]) -> Result<Self, String> {
        let origins = origins
            .iter()
            .map(|origin| normalise_origin(origin))
            .collect::<Result<_, _>>()?;
        let hosts = hosts
            .iter()
            .map(|host| host.trim().trim_end_matches('.').to_ascii_lowercase())
            .collect();
        Ok(EdgePolicy { origins, hosts })
    }

    /// CORS answers for the allowed origins, if there are any.
    pub(crate) fn cors(&self) -> Option<CorsLayer> {
        if self.origins.is_empty() {
            return None;
        }
        let origins: Vec<HeaderValue> = self
            .origins
            .iter()
            .filter_map(|origin| HeaderValue::from_str(origin).ok())
            .collect();
        Some(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([header::CONTENT_TYPE]),
        )
    }

    fn check(&self, req: &Request) -> Result<(), Refusal> {
        let Some(host) = req.headers().get(header::HOST) else {
            return Err(forbidden(
                "the request has no Host header: send one naming this server (its IP address \
                 or localhost, e.g. `Host: 127.0.0.1:7979`); HTTP/1.1 clients always do"
                    .into(),
            ));
        };
        let host = self.check_host(host)?;
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            self.check_origin(origin, &host)?;
        }
        if req.method() == Method::POST {
            check_content_type(req.headers().get(header::CONTENT_TYPE))?;
        }
        Ok(())
    }

    /// The request's `Host`, lower-cased, if it names this server.
    fn check_host(&self, value: &HeaderValue) -> Result<String, Refusal> {
        let host = value
            .to_str()
            .map_err(|_| forbidden("the Host header is not text".into()))?
            .trim()
            .to_ascii_lowercase();
        let name = host_name(&host);
        let allowed = name.parse::<IpAddr>().is_ok()
            || name == "localhost"
            || self.hosts.iter().any(|allowed| allowed == name);
        if allowed {
            return Ok(host);
        }
        Err(forbidden(format!(
            "Host `{host}` does not name this server: address it by IP or as localhost \
             (names are refused against DNS rebinding), or start it with --allow-host {name}"
        )))
    }

    fn check_origin(&self, value: &HeaderValue, host: &str) -> Result<(), Refusal> {
        let origin = value.to_str().unwrap_or("").trim().to_ascii_lowercase();
        let own = origin.strip_prefix("http://") == Some(host)
            || origin.strip_prefix("https://") == Some(host);
        if own || self.origins.contains(&origin) {
            return Ok(());
        }
        Err(forbidden(format!(
            "cross-origin request from `{origin}` refused: only pages served by this server may \
             call it from a browser; start it with --allow-origin {origin} to allow that front-end"
        )))
    }
}

/// The middleware: refuses a request that breaks a rule, passes the rest on.
pub(crate) async fn guard(
    State(policy): State<Arc<EdgePolicy>>,
    req: Request,
    next: Next,
) -> Response {
    match policy.check(&req) {
        Ok(()) => next.run(req).await,
        Err(refusal) => refusal.into_response(),
    }
}

fn check_content_type(value: Option<&HeaderValue>) -> Result<(), Refusal> {
    let given = value.and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = given.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        return Ok(());
    }
    let got = if given.is_empty() {
        "none".to_string()
    } else {
        format!("`{given}`")
    };
    Err(Refusal::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ErrorCode::InvalidRequest.as_str(),
        format!(
            "send the body as JSON with the header `Content-Type: application/json` (got {got})"
        ),
    ))
}

/// The name part of a `Host` value: `[::1]:80` → `::1`, `a.b:80` → `a.b`.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    name.trim_end_matches('.')
}

fn normalise_origin(origin: &str) -> Result<String, String> {
    let trimmed = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let uri: axum::http::Uri = trimmed
        .parse()
        .map_err(|_| format!("--allow-origin {origin}: not a URL"))?;
    match (uri.scheme_str(), uri.authority(), uri.path()) {
        (Some(scheme), Some(authority), "" | "/") if uri.query().is_none() => {
            Ok(format!("{scheme}://{authority}"))
        }
        _ => Err(format!(
            "--allow-origin {origin}: give an origin, scheme://host[:port], e.g. http://localhost:5173"
        )),
    }
}

fn forbidden(message: String) -> Refusal {
    Refusal::new(
        StatusCode::FORBIDDEN,
        ErrorCode::InvalidRequest.as_str(),
        message,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host names are reduced to their name part, IPv6 brackets included.
    #[test]
    fn host_name_strips_ports_and_brackets() {
        assert_eq!(host_name("127.0.0.1:7979"), "127.0.0.1");
        assert_eq!(host_name("[::1]:7979"), "::1");
        assert_eq!(host_name("localhost"), "localhost");
        assert_eq!(host_name("localhost.:80"), "localhost");
        assert_eq!(host_name("evil.example:7979"), "evil.example");
    }

    /// `--allow-origin` takes origins only, normalised for comparison.
    #[test]
    fn allowed_origins_are_normalised_and_validated() {
        assert_eq!(
            normalise_origin("HTTP://LocalHost:5173/").unwrap(),
            "http://localhost:5173"
        );
        assert!(normalise_origin("http://localhost:5173/app").is_err());
        assert!(normalise_origin("localhost").is_err());
    }
}
