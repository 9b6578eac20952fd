//! Guest egress: the `iii.fetch` binding and the `iii.secrets` placeholders,
//! over [`code_runner_egress`] (which checks and makes the requests).
//!
//! The JavaScript `fetch` and Python's `urllib`/`http.client` are shims
//! over `iii.fetch`; bindings cross into sandbox processes like every other
//! host call, so in `isolation: process` requests still leave from the
//! worker, never from a sandbox. The policy follows the configuration's
//! `egress_*` keys live: it is rebuilt when they change, and each request
//! takes the policy in force when it starts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use code_runner_core::wire::EgressUsage;
use code_runner_core::{AbortSignal, BindingCall, BindingError, Config};
use code_runner_egress::{Allow, Egress, Gate, Policy, Request, Secrets, Usage};
use serde::Deserialize;
use serde_json::{Value, json};

/// The error code of a refused or failed request.
pub(crate) const EGRESS: &str = "code-runner::egress";

/// The worker's egress: the live policy, built from the configuration.
#[derive(Debug, Default)]
pub(crate) struct EgressState {
    egress: Egress,
    /// The configuration's egress keys the policy was built from, and what
    /// building it gave (an error text when a secret's variable is unset).
    built: Mutex<Option<(Keys, Result<(), String>)>>,
}

/// The configuration keys the policy is made of.
type Keys = (
    Vec<String>,
    u32,
    u64,
    u64,
    u32,
    Vec<(String, String, Vec<String>)>,
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
            .map(|(name, secret)| (name.clone(), secret.env.clone(), secret.hosts.clone()))
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

/// One turn's egress: its counters, and what its requests cost.
#[derive(Debug, Default)]
pub(crate) struct TurnEgress {
    gate: Gate,
    usage: Mutex<Usage>,
}

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
    let response = response.map_err(|err| refused(err.to_string()))?;
    turn.usage
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .add(response.usage);
    let headers: Vec<Value> = response
        .headers
        .into_iter()
        .map(|(name, value)| json!([name, value]))
        .collect();
    Ok(json!({
        "status": response.status,
        "status_text": response.status_text,
        "url": response.url,
        "redirected": response.redirected,
        "headers": headers,
        "body": STANDARD.encode(&response.body),
    }))
}

/// Resolves once `scope` has fired.
async fn ended(scope: &AbortSignal) {
    while !scope.is_aborted() {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
