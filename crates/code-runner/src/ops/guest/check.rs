//! `iii.fn`'s payload checks against a function's request schema: host work
//! on guest-chosen input, so bounded by work and tied to the turn that asked.
//!
//! - **Measured first.** The schema's expansion is bounded when it is
//!   registered ([`crate::bus::catalog::cost::expansion`]; a schema another
//!   worker published is measured here before its first check), and every
//!   check first counts the steps it could take on this payload
//!   ([`check_steps`], [`MAX_CHECK_STEPS`]); past that it is refused
//!   (`resource_exhausted`), never started. The count stops itself when the
//!   turn ends.
//! - **A few at a time.** At most [`MAX_CHECKS`] checks run in the whole
//!   process (a semaphore), and one turn holds at most one of them, so one
//!   runtime's `Promise.all` of checks waits behind itself, not in front of
//!   every other tenant. Waiting for a place ends when the turn does.
//! - **Off the async workers, on a deep stack.** A check runs on one of the
//!   process's check threads ([`THREADS`], 64 MiB of stack each: the
//!   validator recurses once per schema level, up to 128, times the
//!   payload's own nesting, up to 100), never on tokio's blocking pool.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use code_runner_core::threads::EngineThreads;
use code_runner_core::{AbortSignal, ErrorCode, RunnerError};
use jsonschema::{PatternOptions, Validator};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::bus::catalog::MAX_FORMAT_BYTES;
use crate::bus::catalog::cost::{MAX_CHECK_STEPS, Refused, check_steps, expansion};

/// Checks running at once in the whole process: each holds a core while it
/// runs, and this machine's workers have few to spare.
pub const MAX_CHECKS: usize = 2;

/// Most bytes a compiled `pattern` may take (the `regex` crate's engine,
/// linear in the text it matches; never backtracking).
const MAX_PATTERN_BYTES: usize = 1 << 20;

/// The threads checks run on.
static THREADS: EngineThreads = EngineThreads::new("schema-check", 64 << 20);

/// The process's places for checks.
static PLACES: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(MAX_CHECKS)));

/// Most compiled request schemas kept (each from a schema of at most 16
/// KiB); when full, the cache starts again empty.
const MAX_COMPILED: usize = 256;

/// Compiled request schemas by their text, shared by every worker of the
/// process: the same text compiles to the same validator. `None`: the text
/// was measured and refused, or does not compile.
static COMPILED: LazyLock<Mutex<HashMap<String, Compiled>>> = LazyLock::new(Mutex::default);

#[derive(Clone)]
enum Compiled {
    Ready(Arc<Validator>),
    /// Too much to check, or a `$ref` out of the schema.
    Refused(String),
    /// The validator does not compile it (a remote `$ref` it cannot load):
    /// left to the handler, as before.
    Unchecked,
}

/// What a turn's checks share: the place its one check at a time holds.
#[derive(Clone)]
pub(crate) struct TurnChecks(Arc<Semaphore>);

impl Default for TurnChecks {
    fn default() -> Self {
        TurnChecks(Arc::new(Semaphore::new(1)))
    }
}

/// Why a payload was not let through.
#[derive(Debug)]
pub(crate) enum Rejected {
    /// It does not match: the first mismatch, its path and the rule.
    Mismatch(String),
    /// It could not be checked within the bounds, or the turn ended.
    Refused(RunnerError),
}

/// Checks `payload` against `schema` for the turn that ends with `scope` (or
/// at `deadline`), within the bounds of this module.
///
/// # Errors
/// [`Rejected`]: the first mismatch, or why no check was made.
pub(crate) async fn check(
    schema: Arc<Value>,
    payload: Value,
    turn: &TurnChecks,
    scope: &AbortSignal,
    deadline: Instant,
) -> Result<Value, Rejected> {
    if !constrains(&schema) {
        return Ok(payload);
    }
    let ended = || scope.is_aborted() || Instant::now() >= deadline;
    let turn_place = wait_for(turn.0.clone(), scope, deadline).await?;
    let place = wait_for(PLACES.clone(), scope, deadline).await?;
    let (tx, rx) = oneshot::channel();
    let stop = scope.child();
    let job_stop = stop.clone();
    let job = Box::new(move || {
        let _places = (turn_place, place);
        let stopped = || job_stop.is_aborted() || Instant::now() >= deadline;
        let _ = tx.send(run_check(&schema, payload, &stopped));
    });
    if let Err(err) = THREADS.spawn(job) {
        return Err(Rejected::Refused(RunnerError::engine(format!(
            "cannot start a schema check: {err}"
        ))));
    }
    // Dropped (the guest's call abandoned) or ended: the check stops itself.
    let _stop_on_drop = StopOnDrop(stop);
    let answer = tokio::select! {
        answer = rx => answer.ok(),
        () = until(&ended) => None,
    };
    answer.unwrap_or_else(|| Err(Rejected::Refused(turn_ended())))
}

/// Checks the arguments of a call that comes from outside a turn (an MCP
/// client calling a published function's tool) against its request
/// schema, with the same bounds; the check stops with `cancel` or at
/// `deadline`.
///
/// # Errors
/// `invalid_request` naming the first mismatch, or why no check was made.
pub(crate) async fn check_arguments(
    schema: Arc<Value>,
    arguments: Value,
    cancel: &AbortSignal,
    deadline: Instant,
) -> Result<Value, RunnerError> {
    match check(schema, arguments, &TurnChecks::default(), cancel, deadline).await {
        Ok(arguments) => Ok(arguments),
        Err(Rejected::Mismatch(why)) => Err(RunnerError::invalid(format!(
            "the arguments do not match the tool's inputSchema: {why}"
        ))),
        Err(Rejected::Refused(err)) => Err(err),
    }
}

/// Whether `schema` says anything a payload could fail.
fn constrains(schema: &Value) -> bool {
    schema.as_object().is_some_and(|map| {
        [
            "type",
            "properties",
            "$ref",
            "enum",
            "const",
            "anyOf",
            "oneOf",
            "allOf",
            "required",
        ]
        .iter()
        .any(|key| map.contains_key(*key))
    })
}

/// The check itself, on a check thread.
fn run_check(
    schema: &Value,
    payload: Value,
    stopped: &dyn Fn() -> bool,
) -> Result<Value, Rejected> {
    let Some(text) = serde_json::to_string(schema)
        .ok()
        .filter(|text| text.len() <= MAX_FORMAT_BYTES)
    else {
        return Err(Rejected::Refused(RunnerError::invalid(format!(
            "its request schema is larger than {MAX_FORMAT_BYTES} bytes, more than code-runner checks"
        ))));
    };
    let validator = match compiled(text, schema) {
        Compiled::Ready(validator) => validator,
        Compiled::Unchecked => return Ok(payload),
        Compiled::Refused(why) => {
            return Err(Rejected::Refused(RunnerError::invalid(format!(
                "its request schema cannot be checked: {why}"
            ))));
        }
    };
    match check_steps(schema, &payload, MAX_CHECK_STEPS, stopped) {
        Ok(_) => {}
        Err(Refused::Over(budget)) => {
            return Err(Rejected::Refused(RunnerError::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "checking this payload against its request schema could take more than {budget} steps, code-runner's bound for one check; send a smaller payload"
                ),
            )));
        }
        Err(Refused::Stopped) => return Err(Rejected::Refused(turn_ended())),
        Err(Refused::Unmeasurable(why)) => {
            return Err(Rejected::Refused(RunnerError::invalid(format!(
                "its request schema cannot be checked: {why}"
            ))));
        }
    }
    match validator.validate(&payload) {
        Ok(()) => Ok(payload),
        Err(err) => {
            let at = err.instance_path().to_string();
            Err(Rejected::Mismatch(format!(
                "at {} {} (rule {})",
                if at.is_empty() { "/" } else { at.as_str() },
                err.masked(),
                err.schema_path()
            )))
        }
    }
}

/// The validator of `schema` (serialized as `text`), measured and compiled
/// once.
fn compiled(text: String, schema: &Value) -> Compiled {
    let cache = || COMPILED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(found) = cache().get(&text) {
        return found.clone();
    }
    let made = match expansion(schema) {
        Err(why) => Compiled::Refused(why),
        Ok(_) => {
            let built = jsonschema::options()
                .with_pattern_options(
                    PatternOptions::regex()
                        .size_limit(MAX_PATTERN_BYTES)
                        .dfa_size_limit(MAX_PATTERN_BYTES),
                )
                .build(schema);
            match built {
                Ok(validator) => Compiled::Ready(Arc::new(validator)),
                Err(err) => {
                    tracing::debug!(error = %err.masked(), "a request schema did not compile; the payload goes unchecked");
                    Compiled::Unchecked
                }
            }
        }
    };
    let mut cached = cache();
    if cached.len() >= MAX_COMPILED {
        cached.clear();
    }
    cached.insert(text, made.clone());
    made
}

/// A place from `places`, unless the turn ends first.
async fn wait_for(
    places: Arc<Semaphore>,
    scope: &AbortSignal,
    deadline: Instant,
) -> Result<OwnedSemaphorePermit, Rejected> {
    let ended = || scope.is_aborted() || Instant::now() >= deadline;
    tokio::select! {
        place = places.acquire_owned() => place.map_err(|_| Rejected::Refused(turn_ended())),
        () = until(&ended) => Err(Rejected::Refused(turn_ended())),
    }
}

/// Resolves once `ended` says so (looked at every 20 ms).
async fn until(ended: &(dyn Fn() -> bool + Sync)) {
    while !ended() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn turn_ended() -> RunnerError {
    RunnerError::new(
        ErrorCode::Timeout,
        "the turn ended before its payload was checked",
    )
}

/// Fires the check's own signal when the waiting side goes.
struct StopOnDrop(AbortSignal);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checked(schema: Value, payload: Value) -> Result<Value, Rejected> {
        run_check(&schema, payload, &|| false)
    }

    /// A mismatch names the payload's path and the schema's rule; a schema
    /// that says nothing checks nothing.
    #[test]
    fn a_mismatch_names_the_path_and_the_rule() {
        let schema = json!({"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}});
        assert!(checked(schema.clone(), json!({"name": "x", "tags": ["a"]})).is_ok());
        let Err(Rejected::Mismatch(why)) = checked(schema.clone(), json!({"name": 5})) else {
            panic!("a mismatch");
        };
        assert!(
            why.contains("at /name") && why.contains("/properties/name/type"),
            "{why}"
        );
        let Err(Rejected::Mismatch(why)) =
            checked(schema.clone(), json!({"name": "x", "tags": ["c"]}))
        else {
            panic!("a mismatch");
        };
        assert!(why.contains("at /tags/0") && why.contains("enum"), "{why}");
        let any =
            json!({"title": "any", "description": "No format was registered: any JSON value."});
        assert!(!constrains(&any));
    }

    /// A backtracking-hungry pattern runs on the linear engine.
    #[test]
    fn patterns_run_in_linear_time() {
        let schema = json!({"type": "string", "pattern": "^(a+)+$"});
        let text = format!("{}b", "a".repeat(100_000));
        assert!(matches!(
            checked(schema, Value::String(text)),
            Err(Rejected::Mismatch(_))
        ));
    }

    /// A schema too costly to check, and a payload too large for one check,
    /// are refused with their bounds, before the validator runs.
    #[test]
    fn what_costs_too_much_is_refused_before_it_runs() {
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert("d40".into(), json!({"type": "object"}));
        let bomb = json!({"type": "object", "$defs": defs, "$ref": "#/$defs/d0"});
        let Err(Rejected::Refused(err)) = checked(bomb, json!({})) else {
            panic!("refused");
        };
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(err.message.contains("2000 subschemas"), "{}", err.message);
        let schema = json!({"type": "array", "items": {"enum": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}});
        let payload = Value::Array((0..250_000).map(|_| json!(1)).collect());
        let Err(Rejected::Refused(err)) = checked(schema, payload) else {
            panic!("refused");
        };
        assert_eq!(err.code, ErrorCode::ResourceExhausted);
        assert!(err.message.contains("4194304 steps"), "{}", err.message);
    }
}
