//! What a request is, what comes back, what the policy says, what fails.

use std::sync::Arc;
use std::time::Duration;

use crate::allow::{Allow, Host};
use crate::secrets::Secrets;

/// Redirects followed for one request, at most.
pub const MAX_REDIRECTS: u32 = 5;
/// Bytes of response bodies the whole worker holds at once, whatever the
/// runtimes (256 MiB: 32 full 8 MiB bodies). `egress_max_in_flight` bounds
/// one runtime; this bounds their sum, so 32 runtimes of 8 requests each
/// cannot make the worker hold 2 GiB of bodies. A response whose bytes do
/// not fit is refused at once (`Kind::TooMany`), never waited for: waiting
/// bodies holding part of the budget could wait for each other forever.
pub const MAX_BODY_BYTES_IN_FLIGHT: usize = 256 << 20;
/// The longest URL a guest may request.
pub const MAX_URL_BYTES: usize = 16 * 1024;
/// The most request headers a guest may set, and their total bytes.
pub const MAX_REQUEST_HEADERS: usize = 100;
/// See [`MAX_REQUEST_HEADERS`].
pub const MAX_REQUEST_HEADER_BYTES: usize = 64 * 1024;

/// What the operator allows, live: the configuration's egress keys, parsed.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `egress_allow`.
    pub allow: Allow,
    /// `egress_secrets`, with their values.
    pub secrets: Secrets,
    /// `egress_max_requests`: requests one turn may make.
    pub max_requests: u32,
    /// `egress_max_in_flight`: requests one runtime may have open at once.
    pub max_in_flight: u32,
    /// `egress_max_response_bytes`: the most bytes one response body may have.
    pub max_response_bytes: u64,
    /// The most bytes one request body may have.
    pub max_request_bytes: u64,
    /// `egress_timeout_ms`: one request's budget, redirects included.
    pub timeout: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            allow: Allow::default(),
            secrets: Secrets::default(),
            max_requests: 32,
            max_in_flight: 8,
            max_response_bytes: 8 << 20,
            max_request_bytes: 8 << 20,
            timeout: Duration::from_secs(10),
        }
    }
}

/// A guest's request, as its shim hands it over.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `GET`, `POST`, … (`CONNECT`, `TRACE` and `TRACK` are refused).
    pub method: String,
    /// An absolute `http` or `https` URL.
    pub url: String,
    /// Header names and values; `Host`, hop-by-hop and proxy headers are
    /// dropped (the client sets what the connection needs).
    pub headers: Vec<(String, String)>,
    /// The body (empty for none).
    pub body: Vec<u8>,
}

/// A response body's share of [`MAX_BODY_BYTES_IN_FLIGHT`], given back
/// when the last clone is dropped: whoever keeps the body keeps this too.
#[derive(Debug, Clone)]
pub struct BodyCharge {
    _held: Arc<tokio::sync::OwnedSemaphorePermit>,
}

impl BodyCharge {
    pub(crate) fn new(permit: tokio::sync::OwnedSemaphorePermit) -> Self {
        BodyCharge {
            _held: Arc::new(permit),
        }
    }
}

/// What came back.
#[derive(Debug, Clone)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// Its reason phrase (`OK`, `Not Found`, …; empty when none is known).
    pub status_text: String,
    /// The URL of the last hop (after redirects).
    pub url: String,
    /// Whether a redirect was followed.
    pub redirected: bool,
    /// Header names (lower case) and values, in the server's order.
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
    /// The body's share of the worker's budget for bodies in flight.
    pub charge: Option<BodyCharge>,
    /// What the request cost.
    pub usage: Usage,
}

/// What requests cost, for the run's `usage.egress`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Requests sent (each redirect hop counts).
    pub requests: u32,
    /// Bytes received: bodies and headers.
    pub bytes_in: u64,
    /// Bytes sent: bodies, URLs and headers.
    pub bytes_out: u64,
}

impl Usage {
    /// Adds `other` to this.
    pub fn add(&mut self, other: Usage) {
        self.requests = self.requests.saturating_add(other.requests);
        self.bytes_in = self.bytes_in.saturating_add(other.bytes_in);
        self.bytes_out = self.bytes_out.saturating_add(other.bytes_out);
    }
}

/// Why a request did not get a response. Its text names the host and the
/// reason, and is what the guest sees (a `TypeError` in JavaScript, a
/// `URLError` in Python): it never holds a secret's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressError {
    /// The host the request was for, when the URL named one.
    pub host: Option<String>,
    /// What happened.
    pub kind: Kind,
    /// The reason, in words.
    pub reason: String,
}

/// The kinds of [`EgressError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The URL, method, a header or the body is not acceptable.
    Invalid,
    /// Not in `egress_allow` (or the scheme is not `http`/`https`).
    NotAllowed,
    /// The host is, or resolves to, a non-public address no entry names.
    PrivateAddress,
    /// A secret's placeholder bound for a host the secret does not list.
    Secret,
    /// More than [`MAX_REDIRECTS`].
    TooManyRedirects,
    /// The response body is over `egress_max_response_bytes`.
    TooLarge,
    /// Past `egress_timeout_ms` or the turn's deadline.
    Timeout,
    /// Past `egress_max_requests` for the turn, or the in-flight cap.
    TooMany,
    /// The name does not resolve, or the connection failed.
    Network,
}

impl std::fmt::Display for EgressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            Some(host) => write!(f, "fetch to {host}: {}", self.reason),
            None => write!(f, "fetch: {}", self.reason),
        }
    }
}

impl std::error::Error for EgressError {}

impl EgressError {
    pub(crate) fn new(host: Option<&Host>, kind: Kind, reason: impl Into<String>) -> Self {
        EgressError {
            host: host.map(ToString::to_string),
            kind,
            reason: reason.into(),
        }
    }
}
