//! Request bodies: read within a deadline and a shared byte budget, then
//! parsed as JSON whose size and depth are checked before any tree is built.
//!
//! The budget is held for the bytes a body has delivered, as they arrive: a
//! body that declares more than is free is refused before it is read (no
//! upload races the 429), but a declaration alone holds nothing. Holding
//! the declared (or, chunked, the whole 16 MiB) length up front let 16
//! sockets that each sent a header and one byte refuse every other POST
//! for as long as the body timeout, again and again.
//!
//! `serde_json::from_slice` into a `Value` costs ~100 bytes of host memory per
//! JSON value (a 16 MiB `[0,0,…]` body: ~880 MB) before a handler could refuse
//! it; [`parse_payload`] counts values in one pass over the bytes first.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use code_runner_core::ErrorCode;
use serde_json::{Map, Value};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Refusal;
use super::server::{Conn, DEFAULT_BODY_READ_TIMEOUT};

/// Largest request body accepted: 1 MiB of source survives JSON escaping with room to spare.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Most JSON values (scalars, arrays, objects) a body may hold: a parsed value
/// costs up to ~120 bytes, so a body's tree stays near 30 MiB at most.
pub const MAX_BODY_JSON_VALUES: usize = 256 * 1024;

/// Deepest nesting of arrays and objects a body may use (serde_json's own limit).
pub const MAX_BODY_JSON_DEPTH: usize = 128;

/// Budget unit: permits count KiB so the largest budget fits a `u32`.
const PERMIT_BYTES: usize = 1024;

/// How bodies are read on one server: a deadline and a shared byte budget.
#[derive(Debug, Clone)]
pub(crate) struct BodyGate {
    timeout: Duration,
    budget: Option<(Arc<Semaphore>, usize)>,
}

impl BodyGate {
    pub(crate) fn new(timeout: Duration, max_buffered_bytes: usize) -> Self {
        let permits = max_buffered_bytes
            .div_ceil(PERMIT_BYTES)
            .min(Semaphore::MAX_PERMITS);
        BodyGate {
            timeout,
            budget: Some((Arc::new(Semaphore::new(permits)), max_buffered_bytes)),
        }
    }

    /// Refuses, before it is read, a body declaring more bytes than the
    /// budget has free.
    fn check_fits(&self, declared: Option<usize>) -> Result<(), Refusal> {
        let (Some((budget, max)), Some(declared)) = (&self.budget, declared) else {
            return Ok(());
        };
        if declared.div_ceil(PERMIT_BYTES) > budget.available_permits() {
            return Err(full(*max));
        }
        Ok(())
    }

    /// Holds budget for the `total` bytes a body has delivered so far, on top
    /// of what `held` holds already.
    fn hold(&self, held: &mut BodyPermit, total: usize) -> Result<(), Refusal> {
        let Some((budget, max)) = &self.budget else {
            return Ok(());
        };
        let needed = u32::try_from(total.div_ceil(PERMIT_BYTES)).unwrap_or(u32::MAX);
        let more = needed.saturating_sub(held.permits);
        if more == 0 {
            return Ok(());
        }
        let permit = budget
            .clone()
            .try_acquire_many_owned(more)
            .map_err(|_| full(*max))?;
        match &mut held.permit {
            Some(existing) => existing.merge(permit),
            None => held.permit = Some(permit),
        }
        held.permits = needed;
        Ok(())
    }
}

/// Budget held by one body being read; released when dropped.
#[derive(Default)]
struct BodyPermit {
    permit: Option<OwnedSemaphorePermit>,
    permits: u32,
}

/// The refusal when the bodies being received fill the budget.
fn full(max: usize) -> Refusal {
    Refusal::new(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::Capacity.as_str(),
        format!(
            "the server is already receiving its limit of {} MiB of request bodies; retry shortly",
            max / (1024 * 1024)
        ),
    )
}

/// Reads `body` to its end, holding budget for its bytes as they arrive,
/// within [`MAX_BODY_BYTES`].
async fn read_body(
    gate: &BodyGate,
    mut body: axum::body::Body,
) -> Result<(Vec<u8>, BodyPermit), Refusal> {
    use http_body::Body as _;
    let mut held = BodyPermit::default();
    let mut bytes = Vec::new();
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        let frame = frame
            .map_err(|err| Refusal::invalid(format!("cannot read the request body: {err}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > MAX_BODY_BYTES {
            return Err(Refusal::invalid(format!(
                "the request body is over the {} MiB limit",
                MAX_BODY_BYTES / (1024 * 1024)
            )));
        }
        bytes.extend_from_slice(&data);
        gate.hold(&mut held, bytes.len())?;
    }
    Ok((bytes, held))
}

impl Default for BodyGate {
    /// No shared budget (a router used without [`super::serve_with`]).
    fn default() -> Self {
        BodyGate {
            timeout: DEFAULT_BODY_READ_TIMEOUT,
            budget: None,
        }
    }
}

/// A body read through the gate: its bytes, holding their share of the
/// budget until dropped (keep it while anything parses them).
pub(crate) struct GatedBytes {
    pub(crate) bytes: Vec<u8>,
    held: BodyPermit,
    gate: BodyGate,
}

impl GatedBytes {
    /// Holds budget for `total` bytes in all (at most the whole budget, so
    /// any body fits an idle server), for a parse that costs more than the
    /// bytes; the same refusal as a body that does not fit.
    pub(crate) fn hold_total(&mut self, total: usize) -> Result<(), Refusal> {
        let total = match &self.gate.budget {
            Some((_, max)) => total.min(*max),
            None => return Ok(()),
        };
        self.gate.hold(&mut self.held, total)
    }
}

/// Reads a request's body through the server's gate (from the request's
/// extensions: [`BodyGate`], and the connection's [`Conn`], marked waiting on
/// the client while the bytes arrive): a declared length over
/// [`MAX_BODY_BYTES`] or more than the budget has free is refused before a
/// byte is read; the rest must arrive within the deadline, each byte held
/// against the budget as it does. Every refusal is a [`Refusal`]:
/// `invalid_request` (400, 408 past the deadline) or `capacity` (429).
pub(crate) async fn read_gated(
    parts: &axum::http::request::Parts,
    body: axum::body::Body,
) -> Result<GatedBytes, Refusal> {
    let gate = parts
        .extensions
        .get::<BodyGate>()
        .cloned()
        .unwrap_or_default();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    if let Some(len) = declared.filter(|len| *len > MAX_BODY_BYTES) {
        return Err(Refusal::invalid(format!(
            "the request body is {len} bytes, over the {} MiB limit",
            MAX_BODY_BYTES / (1024 * 1024)
        )));
    }
    gate.check_fits(declared)?;
    let _waiting = parts.extensions.get::<Conn>().map(Conn::waiting);
    let (bytes, held) = tokio::time::timeout(gate.timeout, read_body(&gate, body))
        .await
        .map_err(|_| {
            Refusal::new(
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::InvalidRequest.as_str(),
                format!(
                    "the request body did not arrive within {} s",
                    gate.timeout.as_secs_f64()
                ),
            )
        })??;
    Ok(GatedBytes { bytes, held, gate })
}

/// Checks, in one pass over `bytes` and without building anything, that
/// they nest at most `max_depth` deep and hold at most `max_values` JSON
/// values (every scalar, array and object counts: a number as much as an
/// object). `what` names the text in the message, e.g. "the body". The
/// shape measured, when within the limits.
///
/// # Errors
/// A message naming the limit that was passed.
pub(crate) fn check_shape(
    bytes: &[u8],
    max_depth: usize,
    max_values: usize,
    what: &str,
) -> Result<code_runner_core::json::JsonShape, String> {
    let shape = code_runner_core::json::measure(bytes);
    if shape.depth > max_depth {
        return Err(format!(
            "{what} nests arrays and objects {} deep, past the limit of {max_depth}",
            shape.depth
        ));
    }
    if shape.values > max_values {
        return Err(format!(
            "{what} holds more than {max_values} values (about {})",
            shape.values
        ));
    }
    Ok(shape)
}

/// A request body that is JSON (an empty body is `{}`), read through the
/// gate ([`read_gated`]) and parsed within the server's limits. Every
/// rejection is a JSON refusal: `invalid_request` (400, 408 past the
/// deadline) or `capacity` (429).
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = Refusal;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let gated = read_gated(&parts, body).await?;
        parse_payload(&gated.bytes)
            .map(JsonBody)
            .map_err(Refusal::invalid)
    }
}

/// Parses `bytes` as the function's payload (an empty body is `{}`), after
/// refusing more than [`MAX_BODY_JSON_VALUES`] values or
/// [`MAX_BODY_JSON_DEPTH`] levels without building anything. Any JSON kind
/// is a payload (a published function may take a number); the request types
/// of our own functions refuse what is not an object.
///
/// # Errors
/// A message saying what was wrong with the body.
pub(crate) fn parse_payload(bytes: &[u8]) -> Result<Value, String> {
    if bytes.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    code_runner_core::json::parse_bounded(bytes, MAX_BODY_JSON_DEPTH, Some(MAX_BODY_JSON_VALUES))
        .map_err(|err| {
            if err.starts_with("the JSON ") {
                err.replacen("the JSON ", "the body ", 1)
            } else {
                format!("malformed JSON body: {err}")
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any JSON kind is a payload; malformed text is named as such.
    #[test]
    fn any_json_is_a_payload_and_malformed_text_is_refused() {
        assert_eq!(parse_payload(b"").unwrap(), serde_json::json!({}));
        assert!(
            parse_payload(b"  \n")
                .unwrap_err()
                .starts_with("malformed JSON body: EOF")
        );
        assert_eq!(
            parse_payload(br#" {"a": [1, "x,[{"]} "#).unwrap()["a"][1],
            "x,[{"
        );
        for body in [&b"[1]"[..], b"\"s\"", b"3", b"true", b"null"] {
            assert!(parse_payload(body).is_ok());
        }
        for body in [
            &b"{'a': 1}"[..],
            b"\xff",
            b"not json",
            b"nul",
            b"tru",
            b"[1,",
            b"-",
        ] {
            let err = parse_payload(body).unwrap_err();
            assert!(err.starts_with("malformed JSON body: "), "{err}");
        }
    }

    /// A body nested a million deep is refused by the scan: the build's
    /// serde_json has no recursion limit (the iii SDK turns it off), so
    /// parsing it would overflow the stack.
    #[test]
    fn a_million_deep_body_is_refused_without_recursing() {
        let deep = "[".repeat(1_000_000) + &"]".repeat(1_000_000);
        let err = parse_payload(deep.as_bytes()).unwrap_err();
        assert!(err.contains("1000000 deep"), "{err}");
    }

    /// Issue 9 item 9: a 16 MiB `[0,0,…]` value is refused by count, before
    /// any tree is built; strings full of separators do not count.
    #[test]
    fn value_count_and_depth_are_bounded_before_parsing() {
        let mut flood = b"{\"code\": \"x\", \"bogus\": [".to_vec();
        flood.extend(std::iter::repeat_n(&b"0,"[..], 8 * 1024 * 1024).flatten());
        flood.extend(b"0]}");
        let err = parse_payload(&flood).unwrap_err();
        assert!(
            err.contains(&format!("more than {MAX_BODY_JSON_VALUES} values")),
            "{err}"
        );

        let commas = format!("{{\"code\": \"{}\"}}", ",[{\\\"".repeat(1_000_000));
        assert!(parse_payload(commas.as_bytes()).is_ok());

        let deep = format!("{{\"a\": {}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(
            parse_payload(deep.as_bytes())
                .unwrap_err()
                .contains("201 deep")
        );
    }

    mod gate_against_serde {
        use proptest::prelude::*;
        use serde_json::Value;

        use super::super::*;

        /// Any JSON: strings full of what the count must skip (brackets,
        /// commas, quotes, backslashes, non-ASCII), numbers of every kind,
        /// empty and nested containers.
        fn json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(Value::from),
                r#"[a-z\[\]{},:"\\ é\u{1F600}\n]{0,6}"#.prop_map(Value::from),
            ];
            leaf.prop_recursive(10, 96, 5, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    prop::collection::vec((r#"[a-z"\[{,]{0,4}"#, inner), 0..5)
                        .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
                ]
            })
        }

        /// Values in `value` (scalars, arrays, objects), empty containers
        /// among them, and its depth, as serde built it.
        fn counted(value: &Value) -> (usize, usize, usize) {
            let children: Vec<&Value> = match value {
                Value::Array(items) => items.iter().collect(),
                Value::Object(members) => members.values().collect(),
                _ => return (1, 0, 0),
            };
            let (mut values, mut empties, mut depth) = (1, usize::from(children.is_empty()), 0);
            for child in children {
                let (v, e, d) = counted(child);
                values += v;
                empties += e;
                depth = depth.max(d);
            }
            (values, empties, depth + 1)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// The gate's count is serde's tree: its values (an empty
            /// container counted as if it held one, the bound's only slack)
            /// and its depth, compact or pretty; within the limits the
            /// gate's parse is serde's parse, past either it refuses.
            #[test]
            fn the_gate_counts_what_serde_builds(
                value in json(),
                max_depth in 0usize..12,
                max_values in 1usize..200,
                pretty in any::<bool>(),
            ) {
                let text = if pretty {
                    serde_json::to_vec_pretty(&value).unwrap()
                } else {
                    serde_json::to_vec(&value).unwrap()
                };
                let (values, empties, depth) = counted(&value);
                let shape = code_runner_core::json::measure(&text);
                prop_assert_eq!(shape.values, values + empties);
                prop_assert_eq!(shape.depth, depth);
                let within = depth <= max_depth && values + empties <= max_values;
                prop_assert_eq!(check_shape(&text, max_depth, max_values, "it").is_ok(), within);
                prop_assert_eq!(parse_payload(&text).unwrap(), value);
            }

            /// On broken text the gate never accepts what serde refuses, and
            /// never panics.
            #[test]
            fn the_gate_accepts_no_text_serde_refuses(
                value in json(),
                cut in any::<prop::sample::Index>(),
                noise in prop::collection::vec(any::<u8>(), 0..4),
            ) {
                let mut text = serde_json::to_vec(&value).unwrap();
                let at = cut.index(text.len() + 1);
                text.splice(at..at, noise);
                let serde = serde_json::from_slice::<Value>(&text);
                match parse_payload(&text) {
                    Ok(parsed) => prop_assert_eq!(parsed, serde.unwrap()),
                    Err(_) => prop_assert!(serde.is_err()),
                }
            }
        }
    }
}
