//! One guest request, hop by hop: check, resolve, pin, send, read capped.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::address::{canonical, classify};
use crate::allow::Host;
use crate::gate::Gate;
use crate::model::{
    BodyCharge, EgressError, Kind, MAX_BODY_BYTES_IN_FLIGHT, MAX_REDIRECTS,
    MAX_REQUEST_HEADER_BYTES, MAX_REQUEST_HEADERS, MAX_URL_BYTES, Policy, Request, Response, Usage,
};
use crate::secrets::{Destination, Misdirected, Place, Secrets, Why};

/// The `egress_allow` entries a refusal names (the guidance names them too),
/// at most ten, then how many more; a port is named where the entry has one
/// (else 80 for http, 443 for https).
fn allowed(allow: &crate::allow::Allow) -> String {
    const SHOWN: usize = 10;
    let entries = allow.describe();
    let mut named = entries
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if entries.len() > SHOWN {
        named.push_str(&format!(" and {} more", entries.len() - SHOWN));
    }
    named
}

/// The egress of one worker: its live policy, and the budget of the
/// response bodies it holds ([`MAX_BODY_BYTES_IN_FLIGHT`]).
#[derive(Debug)]
pub struct Egress {
    policy: RwLock<Arc<Policy>>,
    bodies: Arc<Semaphore>,
    body_budget: usize,
}

impl Default for Egress {
    fn default() -> Self {
        Egress::new(Policy::default())
    }
}

/// Headers the guest may not set: the connection's own, the proxy's, and
/// content coding (the worker owns it: it asks for bodies as they are, and
/// decodes what a server compresses anyway before the secrets' scrub reads
/// them, so no secret comes back hidden in a compressed body).
fn forbidden(name: &str) -> bool {
    matches!(
        name,
        "host"
            | "connection"
            | "keep-alive"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
            | "expect"
            | "accept-encoding"
    ) || name.starts_with("proxy-")
}

/// One hop's target, checked.
struct Target {
    url: reqwest::Url,
    host: Host,
    port: u16,
    default_port: u16,
}

impl Target {
    /// Where the hop goes, as a secret's hosts are checked against.
    fn destination(&self) -> Destination<'_> {
        Destination {
            host: &self.host,
            port: self.port,
            default_port: self.default_port,
            https: self.url.scheme() == "https",
        }
    }
}

impl Egress {
    /// An egress with `policy`.
    pub fn new(policy: Policy) -> Egress {
        Egress {
            policy: RwLock::new(Arc::new(policy)),
            bodies: Arc::new(Semaphore::new(MAX_BODY_BYTES_IN_FLIGHT)),
            body_budget: MAX_BODY_BYTES_IN_FLIGHT,
        }
    }

    /// The same egress with a budget of `bytes` for response bodies in
    /// flight instead of [`MAX_BODY_BYTES_IN_FLIGHT`] (for tests).
    #[must_use]
    pub fn with_body_budget(self, bytes: usize) -> Egress {
        Egress {
            bodies: Arc::new(Semaphore::new(bytes)),
            body_budget: bytes,
            ..self
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Puts `policy` in force for the requests that start from now on.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
    }

    /// Makes `request` for a runtime with `gate`, by `deadline` at the
    /// latest (the turn's), within the policy's own timeout.
    pub async fn fetch(
        &self,
        gate: &Gate,
        request: Request,
        deadline: Instant,
    ) -> Result<Response, EgressError> {
        let policy = self.policy();
        let _permit = gate.admit(&policy)?;
        let deadline = deadline.min(Instant::now() + policy.timeout);
        let mut usage = Usage::default();
        let host_of = request_host(&request.url);
        let budget = Budget {
            bodies: &self.bodies,
            bytes: self.body_budget,
        };
        let outcome = tokio::time::timeout_at(
            deadline,
            send(&policy, request, deadline, &mut usage, budget),
        )
        .await;
        let result = match outcome {
            Ok(result) => result.map(|mut response| {
                response.usage = usage;
                response
            }),
            Err(_) => Err(EgressError::new(
                host_of.as_ref(),
                Kind::Timeout,
                format!(
                    "no response within {} ms (egress_timeout_ms, or the run's deadline)",
                    policy.timeout.as_millis()
                ),
            )),
        };
        // The one way out of this crate: everything in it passes the scrub.
        let secrets = &policy.secrets;
        result
            .map(|response| scrubbed(secrets, response))
            .map_err(|err| EgressError {
                host: err.host.map(|host| secrets.scrub_text(host)),
                kind: err.kind,
                reason: secrets.scrub_text(err.reason),
            })
    }
}

/// `response` with every secret's value, in every common encoding, replaced
/// by its placeholder: URL, header names and values, body.
fn scrubbed(secrets: &Secrets, response: Response) -> Response {
    if secrets.is_empty() {
        return response;
    }
    Response {
        url: secrets.scrub_text(response.url),
        headers: response
            .headers
            .into_iter()
            .map(|(name, value)| (secrets.scrub_text(name), secrets.scrub_text(value)))
            .collect(),
        body: secrets.scrub(response.body),
        ..response
    }
}

fn request_host(url: &str) -> Option<Host> {
    url::Url::parse(url).ok().as_ref().and_then(Host::of)
}

/// Checks `url` against the policy: scheme, host and port, secrets in it.
fn check_url(policy: &Policy, raw: &str) -> Result<Target, EgressError> {
    if raw.len() > MAX_URL_BYTES {
        return Err(EgressError::new(
            None,
            Kind::Invalid,
            format!("the URL is longer than {MAX_URL_BYTES} bytes"),
        ));
    }
    let url = url::Url::parse(raw).map_err(|err| {
        EgressError::new(
            None,
            Kind::Invalid,
            format!("`{}` is not an absolute URL ({err})", clip(raw)),
        )
    })?;
    let host = Host::of(&url);
    let default_port = match url.scheme() {
        "http" => 80,
        "https" => 443,
        other => {
            return Err(EgressError::new(
                host.as_ref(),
                Kind::NotAllowed,
                format!("the scheme `{other}:` is not allowed (only http and https)"),
            ));
        }
    };
    let host = host.ok_or_else(|| EgressError::new(None, Kind::Invalid, "the URL has no host"))?;
    let port = url.port().unwrap_or(default_port);
    if !url.username().is_empty() || url.password().is_some() {
        return Err(EgressError::new(
            Some(&host),
            Kind::Invalid,
            "credentials in the URL are not sent; use an Authorization header",
        ));
    }
    if !policy.allow.allows(&host, port, default_port) {
        let why = if policy.allow.is_empty() {
            format!("port {port}: not in egress_allow (it is empty: no host is allowed)")
        } else if policy.allow.allows(&host, default_port, default_port) {
            format!(
                "port {port} is not in egress_allow for this host; allowed: {}",
                allowed(&policy.allow)
            )
        } else {
            format!(
                "port {port}: not in egress_allow; allowed: {}",
                allowed(&policy.allow)
            )
        };
        return Err(EgressError::new(Some(&host), Kind::NotAllowed, why));
    }
    // Secrets in the URL: substituted where allowed, else refused.
    let to = Destination {
        host: &host,
        port,
        default_port,
        https: url.scheme() == "https",
    };
    let substituted = policy
        .secrets
        .substitute(url.as_str(), to, Place::Url)
        .map_err(|m| misdirected(&host, &m))?;
    let url = if substituted == url.as_str() {
        url
    } else {
        let again = url::Url::parse(&substituted).ok();
        match again {
            Some(again)
                if Host::of(&again).as_ref() == Some(&host) && again.port() == url.port() =>
            {
                again
            }
            _ => {
                return Err(EgressError::new(
                    Some(&host),
                    Kind::Invalid,
                    "a secret's placeholder may not change the URL's host or port",
                ));
            }
        }
    };
    Ok(Target {
        url,
        host,
        port,
        default_port,
    })
}

fn misdirected(host: &Host, m: &Misdirected) -> EgressError {
    let name = &m.name;
    let reason = match m.why {
        Why::NotItsHost => {
            format!("the secret {name} may not be sent there (not one of its egress_secrets hosts)")
        }
        Why::PlainHttp => format!(
            "the secret {name} goes to this host only over https (its egress_secrets entry would have to say http://{host} for plain http)"
        ),
        Why::InUrl => format!(
            "the secret {name} may go only in a header's value, not in the URL (egress_secrets.{name}.in_url is off)"
        ),
    };
    EgressError::new(Some(host), Kind::Secret, reason)
}

fn clip(text: &str) -> String {
    let mut end = text.len().min(120);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// The addresses the hop may connect to: every resolved address that is
/// public or named by an entry; none is an error naming the first refused.
async fn approve(policy: &Policy, target: &Target) -> Result<Vec<SocketAddr>, EgressError> {
    let addresses: Vec<IpAddr> = match &target.host {
        Host::Ip(ip) => vec![*ip],
        Host::Name(name) => tokio::net::lookup_host((name.as_str(), target.port))
            .await
            .map_err(|err| {
                EgressError::new(
                    Some(&target.host),
                    Kind::Network,
                    format!("the name does not resolve ({err})"),
                )
            })?
            .map(|sa| canonical(sa.ip()))
            .collect(),
    };
    let mut refused = None;
    let mut approved = Vec::new();
    for ip in addresses {
        match classify(ip) {
            Some(what) if !policy.allow.names_ip(ip, target.port, target.default_port) => {
                refused.get_or_insert((ip, what));
            }
            _ => approved.push(SocketAddr::new(ip, target.port)),
        }
    }
    if approved.is_empty() {
        let reason = match (&target.host, refused) {
            (Host::Ip(_), Some((ip, what))) => format!(
                "{ip} is a private address ({}); an egress_allow entry must name it",
                what.describe()
            ),
            (_, Some((ip, what))) => format!(
                "it resolves to a private address ({ip}, {}); an egress_allow entry must name that address",
                what.describe()
            ),
            (_, None) => "the name resolves to no address".to_string(),
        };
        let kind = if refused.is_some() {
            Kind::PrivateAddress
        } else {
            Kind::Network
        };
        return Err(EgressError::new(Some(&target.host), kind, reason));
    }
    approved.dedup();
    Ok(approved)
}

/// The guest's headers as the wire gets them for `target`: forbidden ones
/// dropped, secrets substituted (or the request refused), caps checked.
fn headers_for(
    policy: &Policy,
    headers: &[(String, String)],
    target: &Target,
) -> Result<(HeaderMap, u64), EgressError> {
    let invalid = |reason: String| EgressError::new(Some(&target.host), Kind::Invalid, reason);
    if headers.len() > MAX_REQUEST_HEADERS {
        return Err(invalid(format!(
            "{} headers, more than the {MAX_REQUEST_HEADERS} a request may have",
            headers.len()
        )));
    }
    let total: usize = headers.iter().map(|(n, v)| n.len() + v.len()).sum();
    if total > MAX_REQUEST_HEADER_BYTES {
        return Err(invalid(format!(
            "the headers are {total} bytes, more than {MAX_REQUEST_HEADER_BYTES}"
        )));
    }
    let mut map = HeaderMap::new();
    let mut bytes = 0u64;
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if forbidden(&lower) {
            continue;
        }
        let header = HeaderName::from_bytes(lower.as_bytes())
            .map_err(|_| invalid(format!("`{}` is not a header name", clip(name))))?;
        let value = policy
            .secrets
            .substitute(value, target.destination(), Place::Header)
            .map_err(|m| misdirected(&target.host, &m))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| invalid(format!("the value of `{lower}` is not a header value")))?;
        bytes += (lower.len() + value.len() + 4) as u64;
        map.append(header, value);
    }
    if !map.contains_key(reqwest::header::USER_AGENT) {
        map.insert(
            reqwest::header::USER_AGENT,
            HeaderValue::from_static("code-runner-fetch"),
        );
    }
    map.insert(
        reqwest::header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    Ok((map, bytes))
}

fn method_of(method: &str) -> Result<reqwest::Method, EgressError> {
    let upper = if method.is_empty() {
        "GET".to_string()
    } else {
        method.to_ascii_uppercase()
    };
    if matches!(upper.as_str(), "CONNECT" | "TRACE" | "TRACK") {
        return Err(EgressError::new(
            None,
            Kind::Invalid,
            format!("the method {upper} is not allowed"),
        ));
    }
    reqwest::Method::from_bytes(upper.as_bytes()).map_err(|_| {
        EgressError::new(
            None,
            Kind::Invalid,
            format!("`{}` is not an HTTP method", clip(method)),
        )
    })
}

/// A client for one hop, connecting only to `addresses`.
fn client_for(target: &Target, addresses: &[SocketAddr]) -> Result<reqwest::Client, EgressError> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .dns_resolver(Arc::new(NoLookup));
    if let Host::Name(name) = &target.host {
        builder = builder.resolve_to_addrs(name, addresses);
    }
    builder.build().map_err(|err| {
        EgressError::new(
            Some(&target.host),
            Kind::Network,
            format!("cannot make the client ({})", err.without_url()),
        )
    })
}

/// The resolver behind the pinned addresses: it resolves nothing, so a
/// name the pin does not cover cannot be looked up again.
struct NoLookup;

impl reqwest::dns::Resolve for NoLookup {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_string();
        Box::pin(async move { Err(format!("{name} was not approved for this request").into()) })
    }
}

async fn send(
    policy: &Policy,
    request: Request,
    deadline: Instant,
    usage: &mut Usage,
    budget: Budget<'_>,
) -> Result<Response, EgressError> {
    if request.body.len() as u64 > policy.max_request_bytes {
        return Err(EgressError::new(
            request_host(&request.url).as_ref(),
            Kind::Invalid,
            format!(
                "the request body is {} bytes, more than {}",
                request.body.len(),
                policy.max_request_bytes
            ),
        ));
    }
    let mut method = method_of(&request.method)?;
    let mut body = request.body;
    let mut headers = request.headers;
    let mut url = request.url;
    let mut origin = None;
    for hop in 0..=MAX_REDIRECTS {
        let target = check_url(policy, &url)?;
        let this_origin = (
            target.host.clone(),
            target.port,
            target.url.scheme().to_string(),
        );
        if origin.as_ref().is_some_and(|o| o != &this_origin) {
            // A redirect to another origin (another host or port, or from
            // https to http) does not carry credentials on, nor any header
            // that named a secret.
            headers.retain(|(n, v)| {
                !matches!(
                    n.to_ascii_lowercase().as_str(),
                    "authorization" | "cookie" | "proxy-authorization"
                ) && !policy.secrets.names_any(v)
            });
        }
        origin = Some(this_origin);
        let addresses = approve(policy, &target).await?;
        let (header_map, header_bytes) = headers_for(policy, &headers, &target)?;
        let client = client_for(&target, &addresses)?;
        usage.requests += 1;
        usage.bytes_out += header_bytes + target.url.as_str().len() as u64 + body.len() as u64;
        let mut builder = client
            .request(method.clone(), target.url.clone())
            .headers(header_map);
        if !body.is_empty() {
            builder = builder.body(body.clone());
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        let response = builder
            .timeout(remaining.max(Duration::from_millis(1)))
            .send()
            .await
            .map_err(|err| network(policy, &target.host, err))?;
        let status = response.status();
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let (true, Some(location)) = (status.is_redirection(), location)
            && matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
        {
            if hop == MAX_REDIRECTS {
                return Err(EgressError::new(
                    Some(&target.host),
                    Kind::TooManyRedirects,
                    format!("more than {MAX_REDIRECTS} redirects"),
                ));
            }
            let next = target.url.join(&location).map_err(|_| {
                EgressError::new(
                    Some(&target.host),
                    Kind::Invalid,
                    format!("the redirect to `{}` is not a URL", clip(&location)),
                )
            })?;
            // A value the server put in the location goes on as its placeholder.
            url = policy.secrets.scrub_text(next.to_string());
            let to_get = status.as_u16() == 303 && method != reqwest::Method::HEAD
                || matches!(status.as_u16(), 301 | 302) && method == reqwest::Method::POST;
            if to_get {
                method = reqwest::Method::GET;
                body = Vec::new();
                headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
            }
            continue;
        }
        return read(policy, response, &target, hop > 0, usage, budget).await;
    }
    unreachable!("the loop returns by its last hop")
}

fn network(policy: &Policy, host: &Host, err: reqwest::Error) -> EgressError {
    let kind = if err.is_timeout() {
        Kind::Timeout
    } else {
        Kind::Network
    };
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    EgressError::new(Some(host), kind, policy.secrets.scrub_text(clip(&text)))
}

/// The worker's budget for response bodies, and its size.
#[derive(Clone, Copy)]
struct Budget<'a> {
    bodies: &'a Arc<Semaphore>,
    bytes: usize,
}

impl Budget<'_> {
    /// `more` bytes added to `charge`, or the refusal when they do not fit.
    fn take(
        self,
        charge: &mut Option<OwnedSemaphorePermit>,
        more: usize,
        host: &Host,
    ) -> Result<(), EgressError> {
        let refused = || {
            EgressError::new(
                Some(host),
                Kind::TooMany,
                format!(
                    "the worker already holds {} bytes of response bodies, the most it holds at once; try again later",
                    self.bytes
                ),
            )
        };
        let more = u32::try_from(more).map_err(|_| refused())?;
        let permit = self
            .bodies
            .clone()
            .try_acquire_many_owned(more)
            .map_err(|_| refused())?;
        match charge {
            Some(held) => held.merge(permit),
            None => *charge = Some(permit),
        }
        Ok(())
    }
}

async fn read(
    policy: &Policy,
    mut response: reqwest::Response,
    target: &Target,
    redirected: bool,
    usage: &mut Usage,
    budget: Budget<'_>,
) -> Result<Response, EgressError> {
    let cap = policy.max_response_bytes;
    let too_large = || {
        EgressError::new(
            Some(&target.host),
            Kind::TooLarge,
            format!("the response is larger than {cap} bytes (egress_max_response_bytes)"),
        )
    };
    if response.content_length().is_some_and(|len| len > cap) {
        return Err(too_large());
    }
    let status = response.status();
    let coding = coding_of(response.headers(), &target.host)?;
    let mut headers = Vec::with_capacity(response.headers().len());
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        usage.bytes_in += (name.as_str().len() + value.len() + 4) as u64;
        // A body decoded here is handed over as it is now.
        if coding.is_some() && matches!(name.as_str(), "content-encoding" | "content-length") {
            continue;
        }
        headers.push((name.as_str().to_string(), value));
    }
    // A declared length is charged and reserved at once (the body then
    // never grows by doubling); an undeclared one chunk by chunk.
    let declared = response
        .content_length()
        .and_then(|len| usize::try_from(len).ok());
    let mut charge = None;
    if let Some(len) = declared {
        budget.take(&mut charge, len, &target.host)?;
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| network(policy, &target.host, err))?
    {
        if body.len() as u64 + chunk.len() as u64 > cap {
            return Err(too_large());
        }
        let charged = charge.as_ref().map_or(0, |c| c.num_permits());
        let past = (body.len() + chunk.len()).saturating_sub(charged);
        if past > 0 {
            budget.take(&mut charge, past, &target.host)?;
        }
        body.extend_from_slice(&chunk);
    }
    usage.bytes_in += body.len() as u64;
    if let Some(coding) = coding {
        body = crate::coding::decode(coding, &body, cap)
            .map_err(|why| EgressError::new(Some(&target.host), why.kind(), why.to_string()))?;
        let charged = charge.as_ref().map_or(0, |c| c.num_permits());
        let past = body.len().saturating_sub(charged);
        if past > 0 {
            budget.take(&mut charge, past, &target.host)?;
        }
    }
    Ok(Response {
        status: status.as_u16(),
        status_text: status.canonical_reason().unwrap_or_default().to_string(),
        url: target.url.to_string(),
        redirected,
        headers,
        body,
        charge: charge.map(BodyCharge::new),
        usage: Usage::default(),
    })
}

/// The content coding the worker must undo, from the response's
/// `Content-Encoding` (none, or identity: `None`).
fn coding_of(
    headers: &HeaderMap,
    host: &Host,
) -> Result<Option<crate::coding::Coding>, EgressError> {
    let mut codings = headers
        .get_all(reqwest::header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity");
    let first = codings.next();
    if let Some(second) = codings.next() {
        return Err(EgressError::new(
            Some(host),
            Kind::Invalid,
            format!(
                "the response is encoded twice ({}, {second}), which code-runner does not undo; it is not passed on",
                first.unwrap_or_default()
            ),
        ));
    }
    first
        .map(|name| {
            crate::coding::Coding::named(&name).ok_or_else(|| {
                EgressError::new(
                    Some(host),
                    Kind::Invalid,
                    format!(
                        "the response is `{}`-encoded though code-runner asked for none; only gzip and deflate are decoded, so it is not passed on",
                        name.chars().take(40).collect::<String>()
                    ),
                )
            })
        })
        .transpose()
}
