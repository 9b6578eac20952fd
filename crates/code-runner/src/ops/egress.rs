//! Guest egress: the `iii.fetch` binding and the `iii.secrets` placeholders,
//! over [`code_runner_egress`] (which checks and makes the requests).
//!
//! The JavaScript `fetch` and Python's `urllib`/`http.client` are shims
//! over `iii.fetch`; bindings cross into sandbox processes like every other
//! host call, so in `isolation: process` requests still leave from the
//! worker, never from a sandbox. The policy follows the configuration's
//! `egress_*` keys live: it is rebuilt when they change, and each request
//! takes the policy in force when it starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use code_runner_core::wire::EgressUsage;
use code_runner_core::{AbortSignal, BindingCall, BindingError, Config};
use code_runner_egress::{Allow, BodyCharge, Egress, Gate, Policy, Request, Secrets, Usage};
use serde::Deserialize;
use serde_json::{Value, json};

/// The error code of a refused or failed request.
pub(crate) const EGRESS: &str = "code-runner::egress";

/// The size of a piece of a response body read with `iii.fetch_body`: as
/// base64 (~700 KB) far below what a binding answer may carry into the
/// smallest V8 heap (a sixteenth of it), so a body up to
/// `egress_max_response_bytes` reaches JavaScript whole.
pub(crate) const BODY_PIECE_BYTES: usize = 512 * 1024;

/// The worker's egress: the live policy, built from the configuration.
#[derive(Debug, Default)]
pub(crate) struct EgressState {
    egress: Egress,
    /// The configuration's egress keys the policy was built from, and what
    /// building it gave (an error text when a secret's variable is unset).
    built: Mutex<Option<(Keys, Result<(), String>)>>,
    /// Requests refused or failed, by reason ([`REFUSAL_REASONS`]), for the metrics.
    refusals: [std::sync::atomic::AtomicU64; REFUSAL_REASONS.len()],
}

/// The reasons a request is refused or fails, as the metrics label them.
pub(crate) const REFUSAL_REASONS: [&str; 9] = [
    "invalid",
    "not_allowed",
    "private_address",
    "secret",
    "too_many_redirects",
    "too_large",
    "timeout",
    "too_many",
    "network",
];

/// The metrics' label of `kind`.
fn reason_of(kind: code_runner_egress::Kind) -> usize {
    use code_runner_egress::Kind::*;
    match kind {
        Invalid => 0,
        NotAllowed => 1,
        PrivateAddress => 2,
        Secret => 3,
        TooManyRedirects => 4,
        TooLarge => 5,
        Timeout => 6,
        TooMany => 7,
        Network => 8,
    }
}

/// The configuration keys the policy is made of.
type Keys = (
    Vec<String>,
    u32,
    u64,
    u64,
    u32,
    Vec<(String, code_runner_core::EgressSecret)>,
);

fn keys(config: &Config) -> Keys {
    (
        config.egress_allow.clone(),
        config.egress_max_requests,
        config.egress_max_response_bytes,
        config.egress_timeout_ms,
        config.egress_max_in_flight,
        config
            .egress_secrets
            .iter()
            .map(|(name, secret)| (name.clone(), secret.clone()))
            .collect(),
    )
}

/// The policy `config` describes; the error names what is wrong.
pub(crate) fn policy_of(config: &Config) -> Result<Policy, String> {
    let allow = Allow::parse(&config.egress_allow).map_err(|err| format!("egress_allow: {err}"))?;
    let specs = crate::settings::secret_specs(config);
    let secrets = Secrets::load(&specs, |var| std::env::var(var).ok())?;
    Ok(Policy {
        allow,
        secrets,
        max_requests: config.egress_max_requests,
        max_in_flight: config.egress_max_in_flight,
        max_response_bytes: config.egress_max_response_bytes,
        // Like a binding payload: what one call may carry in.
        max_request_bytes: config.egress_max_response_bytes,
        timeout: Duration::from_millis(config.egress_timeout_ms),
    })
}

impl EgressState {
    /// Requests refused or failed so far, by [`REFUSAL_REASONS`].
    pub(crate) fn refusals(&self) -> [u64; REFUSAL_REASONS.len()] {
        std::array::from_fn(|i| self.refusals[i].load(std::sync::atomic::Ordering::Relaxed))
    }

    fn refused_for(&self, reason: usize) {
        self.refusals[reason].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Brings the policy up to `config`; the error says why requests are
    /// refused (a secret's variable is unset).
    fn refresh(&self, config: &Config) -> Result<(), String> {
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        let wanted = keys(config);
        if let Some((keys, outcome)) = built.as_ref()
            && *keys == wanted
        {
            return outcome.clone();
        }
        let outcome = policy_of(config).map(|policy| self.egress.set_policy(policy));
        if let Err(err) = &outcome {
            tracing::warn!("egress is refused until the configuration is fixed: {err}");
        }
        *built = Some((wanted, outcome.clone()));
        outcome
    }

    /// `iii.secrets`: each secret's name and placeholder.
    pub(crate) fn secrets(&self, config: &Config) -> Value {
        // Every turn asks: with no secret configured, nothing to build.
        if config.egress_secrets.is_empty() || self.refresh(config).is_err() {
            return json!({});
        }
        let policy = self.egress.policy();
        Value::Object(
            policy
                .secrets
                .placeholders()
                .map(|(name, placeholder)| (name.to_string(), Value::String(placeholder.into())))
                .collect(),
        )
    }

    /// The allow-list as the guidance states it (empty: no host).
    pub(crate) fn allowed(config: &Config) -> Vec<String> {
        Allow::parse(&config.egress_allow)
            .map(|allow| allow.describe())
            .unwrap_or_default()
    }
}

/// One turn's egress: its counters, what its requests cost, and the
/// response bodies its guest reads in pieces.
#[derive(Debug, Default)]
pub(crate) struct TurnEgress {
    gate: Gate,
    usage: Mutex<Usage>,
    /// Bodies past [`BODY_PIECE_BYTES`] of requests that asked for pieces,
    /// by id, until their last piece is read or the turn ends (a request
    /// for pieces is refused while `egress_max_in_flight` bodies wait).
    /// Each keeps its share of the worker's budget for bodies in flight.
    bodies: Mutex<(u64, HashMap<u64, HeldBody>)>,
}

/// A response body kept for `iii.fetch_body`, and its budget charge.
type HeldBody = (Vec<u8>, Option<BodyCharge>);

impl TurnEgress {
    /// What the turn's requests cost, if it made any.
    pub(crate) fn usage(&self) -> Option<EgressUsage> {
        let usage = *self.usage.lock().unwrap_or_else(|p| p.into_inner());
        (usage.requests > 0).then_some(EgressUsage {
            requests: u64::from(usage.requests),
            bytes_in: usage.bytes_in,
            bytes_out: usage.bytes_out,
        })
    }
}

/// `iii.fetch`'s argument.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FetchArgs {
    #[serde(default)]
    method: Option<String>,
    url: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    /// Base64.
    #[serde(default)]
    body: Option<String>,
    /// A body past [`BODY_PIECE_BYTES`] comes back as `body_id` and
    /// `body_bytes`, its pieces read with `iii.fetch_body` (the JavaScript
    /// shim asks for this; without it the body is inline).
    #[serde(default)]
    pieces: bool,
}

/// `iii.fetch_body`'s argument.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PieceArgs {
    id: u64,
    offset: usize,
}

fn refused(message: impl Into<String>) -> BindingError {
    BindingError {
        code: Some(EGRESS.into()),
        message: message.into(),
    }
}

/// `iii.fetch(request)`: one request through the host, within the turn's
/// deadline; it is abandoned when the turn (`scope`) ends.
pub(crate) async fn fetch(
    state: Arc<EgressState>,
    turn: Arc<TurnEgress>,
    config: Config,
    scope: AbortSignal,
    args: Value,
    call: BindingCall,
) -> Result<Value, BindingError> {
    let args: FetchArgs = serde_json::from_value(args).map_err(|err| {
        refused(format!(
            "fetch: the request is not {{method, url, headers, body}}: {err}"
        ))
    })?;
    let body = match args.body {
        Some(text) => STANDARD
            .decode(text.as_bytes())
            .map_err(|_| refused("fetch: the request body is not base64"))?,
        None => Vec::new(),
    };
    state
        .refresh(&config)
        .map_err(|err| refused(format!("fetch: refused, {err}")))?;
    let held = turn
        .bodies
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .1
        .len();
    let max_held = state.egress.policy().max_in_flight as usize;
    if args.pieces && held >= max_held {
        state.refused_for(reason_of(code_runner_egress::Kind::TooMany));
        return Err(refused(format!(
            "fetch: {held} response bodies are waiting to be read, the most egress_max_in_flight allows; read them first"
        )));
    }
    let request = Request {
        method: args.method.unwrap_or_default(),
        url: args.url,
        headers: args.headers,
        body,
    };
    let deadline = tokio::time::Instant::from_std(call.deadline);
    let request = state.egress.fetch(&turn.gate, request, deadline);
    let response = tokio::select! {
        response = request => response,
        () = ended(&scope) => return Err(refused("fetch: the run ended before the response came")),
    };
    let response = response.map_err(|err| {
        state.refused_for(reason_of(err.kind));
        refused(err.to_string())
    })?;
    turn.usage
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .add(response.usage);
    let headers: Vec<Value> = response
        .headers
        .into_iter()
        .map(|(name, value)| json!([name, value]))
        .collect();
    let mut answer = json!({
        "status": response.status,
        "status_text": response.status_text,
        "url": response.url,
        "redirected": response.redirected,
        "headers": headers,
    });
    if args.pieces && response.body.len() > BODY_PIECE_BYTES {
        let bytes = response.body.len();
        let mut bodies = turn.bodies.lock().unwrap_or_else(|p| p.into_inner());
        bodies.0 += 1;
        let id = bodies.0;
        bodies.1.insert(id, (response.body, response.charge));
        answer["body_id"] = json!(id);
        answer["body_bytes"] = json!(bytes);
    } else {
        answer["body"] = json!(STANDARD.encode(&response.body));
    }
    Ok(answer)
}

/// `iii.fetch_body({id, offset})`: the next piece of a body held for the
/// turn, as `{piece}` (base64, at most [`BODY_PIECE_BYTES`]); the body is
/// let go of once its last piece is read.
pub(crate) fn fetch_body(turn: &TurnEgress, args: Value) -> Result<Value, BindingError> {
    let args: PieceArgs = serde_json::from_value(args).map_err(|err| {
        refused(format!(
            "fetch: the body request is not {{id, offset}}: {err}"
        ))
    })?;
    let mut bodies = turn.bodies.lock().unwrap_or_else(|p| p.into_inner());
    let (body, _) = bodies
        .1
        .get(&args.id)
        .ok_or_else(|| refused("fetch: no such response body in this run"))?;
    let end = args.offset.saturating_add(BODY_PIECE_BYTES).min(body.len());
    let piece = body
        .get(args.offset..end)
        .ok_or_else(|| refused("fetch: the offset is past the body's end"))?;
    let answer = json!({ "piece": STANDARD.encode(piece) });
    if end == body.len() {
        bodies.1.remove(&args.id);
    }
    Ok(answer)
}

/// Resolves once `scope` has fired.
async fn ended(scope: &AbortSignal) {
    while !scope.is_aborted() {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
