//! The ops the bootstrap calls: output, uncaught errors, binding calls,
//! `iii.files`, the clock. Only the bootstrap holds them: `Deno` (deno_core's
//! global with every op) is deleted before any guest code runs.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;

use code_runner_core::{BindingCall, BindingError};
use deno_core::{OpState, op2};
use deno_error::{JsErrorBox, JsErrorClass, PropertyValue};
use serde_json::{Value, json};

use crate::convert::{self, Converted, Limits};
use crate::files::FilesError;
use crate::state::{
    MAX_ARGUMENT_BYTES_IN_FLIGHT, MAX_ARGUMENT_VALUES_IN_FLIGHT, MAX_CALLS_IN_FLIGHT,
    ObjectPrototype, PendingCall, SharedIo,
};

/// Largest JSON value carried across the boundary (a binding call's
/// argument; a result when `max_result_bytes` is off): the limit every
/// engine keeps, 16 MiB, and at most 262 144 values.
pub const MAX_TRANSFER_BYTES: u64 = code_runner_core::json::MAX_GUEST_JSON_BYTES as u64;

deno_core::extension!(
    code_runner_ops,
    ops = [
        op_cr_print,
        op_cr_uncaught,
        op_cr_call,
        op_cr_wait,
        op_cr_cancel,
        op_cr_now,
        op_cr_wall,
        op_cr_tick,
        op_cr_files_write_text,
        op_cr_files_write_bytes,
        op_cr_files_size,
        op_cr_files_read_into,
        op_cr_files_read_text,
        op_cr_encode_into,
        op_cr_files_list,
        op_cr_files_remove,
        op_cr_reserve,
    ],
);

/// The extension holding our ops (no JavaScript: the bootstrap is a script of its own).
pub fn extension() -> deno_core::Extension {
    code_runner_ops::init()
}

/// The turn marker of the code running now, from V8's async context.
pub fn marker(scope: &v8::PinScope<'_, '_>) -> Option<u32> {
    let data = scope.get_continuation_preserved_embedder_data();
    data.is_uint32().then(|| data.uint32_value(scope)).flatten()
}

fn io(state: &OpState) -> Option<SharedIo> {
    state.try_borrow::<SharedIo>().cloned()
}

/// Writes guest output to the stream (1 stdout, 2 stderr) of the calling turn.
#[op2(nofast)]
fn op_cr_print(
    scope: &mut v8::PinScope<'_, '_>,
    state: &mut OpState,
    #[smi] stream: u32,
    #[string] text: &str,
) {
    let marker = marker(scope);
    let Some(io) = io(state) else { return };
    let mut io = io.borrow_mut();
    if let Some(turn) = io.turn(marker) {
        match stream {
            1 => turn.stdout.push(text.as_bytes()),
            _ => turn.stderr.push(text.as_bytes()),
        }
    }
}

/// Charges a resizable buffer's reservation of `bytes` to `external_mb`
/// (see [`crate::reserve`]): a token to keep beside the buffer, or `null`
/// past the budget.
#[op2]
fn op_cr_reserve<'s>(scope: &mut v8::PinScope<'s, '_>, bytes: f64) -> v8::Local<'s, v8::Value> {
    match crate::reserve::reserve(scope, bytes) {
        Some(token) => token.into(),
        None => v8::null(scope).into(),
    }
}

/// Ends the calling turn with an uncaught error (already formatted), as Node would exit.
#[op2(nofast)]
fn op_cr_uncaught(scope: &mut v8::PinScope<'_, '_>, state: &mut OpState, #[string] text: &str) {
    let marker = marker(scope);
    let Some(io) = io(state) else { return };
    let mut io = io.borrow_mut();
    if let Some(turn) = io.turn(marker)
        && turn.uncaught.is_none()
    {
        turn.stderr.push(text.as_bytes());
        turn.stderr.push(b"\n");
        turn.uncaught = Some(text.to_string());
    }
}

/// Starts a binding call: converts the argument (lossless JSON or a
/// `TypeError`) and spawns the host function; [`op_cr_wait`] awaits it.
/// Never a fast call: converting the argument may run guest getters.
#[op2(nofast)]
#[smi]
fn op_cr_call<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    state: &mut OpState,
    #[string] ns: String,
    #[string] member: String,
    args: v8::Local<'s, v8::Value>,
) -> Result<u32, JsErrorBox> {
    let marker = marker(scope);
    let (Some(io), Some(prototype)) = (io(state), state.try_borrow::<ObjectPrototype>()) else {
        return Err(JsErrorBox::type_error("bindings are unavailable"));
    };
    let prototype = prototype.0.clone();
    let watch = io.borrow().watch.clone();
    let stopped = || watch.stop_requested();
    let limits = Limits::bytes(MAX_TRANSFER_BYTES);
    let (args, weight) = {
        v8::tc_scope!(let tc, scope);
        match convert::to_json(
            tc,
            args,
            &prototype,
            "the argument",
            limits,
            &stopped,
            convert::Mode::Strict,
        ) {
            Converted::Value {
                json,
                bytes,
                values,
                ..
            } => (json, (bytes, values)),
            Converted::Undefined => (Value::Null, (4, 1)),
            Converted::NotJson(why) => {
                return Err(JsErrorBox::type_error(format!(
                    "{ns}.{member}: the argument is not lossless JSON: {why}"
                )));
            }
            Converted::Oversize { bytes, values, .. } if values > limits.values => {
                return Err(JsErrorBox::range_error(format!(
                    "{ns}.{member}: a binding call's argument is limited to {} JSON values (this one holds {values}, ~{bytes} bytes)",
                    limits.values
                )));
            }
            Converted::Oversize { bytes, .. } => {
                return Err(JsErrorBox::range_error(format!(
                    "{ns}.{member}: a binding call's argument is limited to {MAX_TRANSFER_BYTES} bytes of JSON (this one is ~{bytes})"
                )));
            }
            Converted::Threw => {
                if !tc.has_terminated() {
                    tc.rethrow();
                }
                return Ok(u32::MAX);
            }
            // The watchdog ends the turn as soon as this op returns.
            Converted::Stopped => return Ok(u32::MAX),
        }
    };
    let mut io = io.borrow_mut();
    if io.in_flight >= MAX_CALLS_IN_FLIGHT {
        return Err(JsErrorBox::range_error(format!(
            "{ns}.{member}: {MAX_CALLS_IN_FLIGHT} binding calls are already in flight; await some first"
        )));
    }
    let (bytes, values) = io.in_flight_weight;
    if bytes + weight.0 > MAX_ARGUMENT_BYTES_IN_FLIGHT
        || values + weight.1 > MAX_ARGUMENT_VALUES_IN_FLIGHT
    {
        return Err(JsErrorBox::range_error(format!(
            "{ns}.{member}: the binding calls in flight already hold {bytes} bytes and {values} values of arguments \
             (at most {MAX_ARGUMENT_BYTES_IN_FLIGHT} bytes and {MAX_ARGUMENT_VALUES_IN_FLIGHT} values per runtime); await some first"
        )));
    }
    let Some(turn) = io.turn(marker) else {
        return Err(JsErrorBox::type_error(format!(
            "{ns}.{member}: no turn is running to make the call"
        )));
    };
    let function = turn.bindings.lookup(&ns, &member).cloned();
    let call = BindingCall {
        deadline: turn.bindings.clock().deadline(turn.deadline),
    };
    if let Some(ledger) = io.ledger.as_mut().filter(|ledger| ledger.is_replaying()) {
        // The answer comes from the ledger (`op_cr_wait`); nothing runs on the host.
        ledger
            .call(&format!("{ns}.{member}"), &args)
            .map_err(|why| JsErrorBox::type_error(format!("restore_diverged: {why}")))?;
        let (_, answer) = tokio::sync::oneshot::channel();
        return Ok(io.add_call(PendingCall { answer, weight }));
    }
    let Some(function) = function else {
        return Err(JsErrorBox::type_error(format!(
            "{ns} has no function {member:?} in this turn"
        )));
    };
    if let Some(ledger) = io.ledger.as_mut() {
        // Recording: noted, for a replay to check against.
        let _ = ledger.call(&format!("{ns}.{member}"), &args);
    }
    let (answer_tx, answer_rx) = tokio::sync::oneshot::channel();
    let future = function(args, call);
    let task = io.host.spawn(async move {
        let _ = answer_tx.send(future.await);
    });
    let id = io.add_call(PendingCall {
        answer: answer_rx,
        weight,
    });
    io.cancels.insert(id, task.abort_handle());
    Ok(id)
}

/// Gives up a call started by [`op_cr_call`] (its caller no longer wants
/// the answer, e.g. an aborted `fetch`): the host function's future is
/// dropped at once, which ends what it was doing (a request's connection
/// is closed); its [`op_cr_wait`] answers an error.
#[op2(fast)]
fn op_cr_cancel(state: &mut OpState, #[smi] id: u32) {
    if let Some(io) = io(state)
        && let Some(task) = io.borrow_mut().cancels.remove(&id)
    {
        task.abort();
    }
}

/// Awaits a call started by [`op_cr_call`]: `o<json>` for a value, `e<json>` for `{code, message}`.
/// A recording ledger notes the answer; a replaying one gives it, in its place.
#[op2]
#[string]
async fn op_cr_wait(state: Rc<RefCell<OpState>>, #[smi] id: u32) -> String {
    let replaying = io(&state.borrow()).is_some_and(|io| io.borrow().replaying());
    if replaying {
        return replayed_answer(&state, id).await;
    }
    let text = host_answer(&state, id).await;
    if let Some(io) = io(&state.borrow())
        && let Some(ledger) = io.borrow_mut().ledger.as_mut()
    {
        ledger.answered(id, &text);
    }
    text
}

/// Call `id`'s answer from a replayed ledger, once every answer and timer before it was handed over.
async fn replayed_answer(state: &Rc<RefCell<OpState>>, id: u32) -> String {
    let answer = std::future::poll_fn(|cx| {
        let Some(io) = io(&state.borrow()) else {
            return std::task::Poll::Ready(None);
        };
        let mut io = io.borrow_mut();
        let Some(ledger) = io.ledger.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        if ledger.diverged().is_some() {
            return std::task::Poll::Ready(None);
        }
        match ledger.replay_answer(id, cx.waker()) {
            Some(text) => std::task::Poll::Ready(Some(text)),
            None => std::task::Poll::Pending,
        }
    })
    .await;
    if let Some(io) = io(&state.borrow()) {
        let mut io = io.borrow_mut();
        if let Some(call) = io.calls.remove(&id) {
            io.answered(call.weight);
        }
    }
    answer.unwrap_or_else(|| {
        format!(
            "e{}",
            json!({"code": "code-runner::invalid_request", "message": "restore_diverged: the replay went another way than the ledger"})
        )
    })
}

/// Call `id`'s answer from its host function.
async fn host_answer(state: &Rc<RefCell<OpState>>, id: u32) -> String {
    let call = state
        .borrow()
        .try_borrow::<SharedIo>()
        .and_then(|io| io.borrow_mut().calls.remove(&id));
    let (outcome, weight) = match call {
        Some(call) => (
            call.answer.await.unwrap_or_else(|_| {
                Err(BindingError::message(
                    "the binding call ended without an answer",
                ))
            }),
            call.weight,
        ),
        None => (Err(BindingError::message("no such binding call")), (0, 0)),
    };
    let limit = match state.borrow().try_borrow::<SharedIo>() {
        Some(io) => {
            let mut io = io.borrow_mut();
            io.cancels.remove(&id);
            io.answered(weight);
            io.max_transfer_in
        }
        None => 0,
    };
    match outcome {
        Ok(value) => {
            let text = serde_json::to_string(&value).unwrap_or_else(|_| "null".into());
            // Measured before it becomes a V8 string: an answer the heap
            // cannot hold is the guest's catchable error, not a full heap.
            if text.len() > limit {
                let message = format!(
                    "the answer is {} bytes of JSON; a call's answer is limited to {limit} bytes in this runtime (a sixteenth of heap_mb): ask for less",
                    text.len()
                );
                return format!(
                    "e{}",
                    json!({"code": "code-runner::resource_exhausted", "message": message})
                );
            }
            format!("o{text}")
        }
        Err(err) => format!("e{}", json!({"code": err.code, "message": err.message})),
    }
}

/// Milliseconds since the runtime booted, for `performance.now()` (kept
/// in, or taken from, a runtime's ledger).
#[op2(fast)]
fn op_cr_now(state: &mut OpState) -> f64 {
    let Some(io) = io(state) else { return 0.0 };
    let mut io = io.borrow_mut();
    let real = io.epoch.elapsed().as_secs_f64() * 1000.0;
    match io.ledger.as_mut() {
        Some(ledger) => ledger.read(false, real),
        None => real,
    }
}

/// Milliseconds since the Unix epoch, for `Date` in a runtime that keeps a
/// ledger (kept in it, or taken from it).
#[op2(fast)]
fn op_cr_wall(state: &mut OpState) -> f64 {
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_millis() as f64);
    let Some(io) = io(state) else { return real };
    match io.borrow_mut().ledger.as_mut() {
        Some(ledger) => ledger.read(true, real),
        None => real,
    }
}

/// Whether the runtime's `timer`th timer, due, fires now: always, noted,
/// while a ledger records; in its recorded place while one is replayed.
#[op2(fast)]
fn op_cr_tick(state: &mut OpState, #[smi] timer: u32) -> bool {
    let Some(io) = io(state) else { return true };
    match io.borrow_mut().ledger.as_mut() {
        Some(ledger) => ledger.tick(timer),
        None => true,
    }
}

/// A scratch failure as a JavaScript `Error` carrying `code`.
#[derive(Debug)]
struct FilesJsError(FilesError);

impl std::fmt::Display for FilesJsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for FilesJsError {}

impl JsErrorClass for FilesJsError {
    fn get_class(&self) -> Cow<'static, str> {
        Cow::Borrowed("Error")
    }

    fn get_message(&self) -> Cow<'static, str> {
        Cow::Owned(self.0.message.clone())
    }

    fn get_additional_properties(&self) -> deno_error::AdditionalProperties {
        Box::new(std::iter::once((
            Cow::Borrowed("code"),
            PropertyValue::String(Cow::Borrowed(self.0.code)),
        )))
    }

    fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }
}

fn files<T>(
    state: &OpState,
    f: impl FnOnce(&mut crate::files::Scratch) -> Result<T, FilesError>,
) -> Result<T, JsErrorBox> {
    let io = io(state).ok_or_else(|| JsErrorBox::type_error("iii.files is unavailable"))?;
    let mut io = io.borrow_mut();
    f(&mut io.scratch).map_err(|err| JsErrorBox::from_err(FilesJsError(err)))
}

/// Writes `text` as UTF-8. Measured in the isolate and admitted against the
/// quota before it is copied out: a 500 MB string past `scratch_mb` costs the
/// host nothing (as a `#[string]` it was copied whole, up to 3 bytes a unit).
#[op2(nofast)]
fn op_cr_files_write_text(
    scope: &mut v8::PinScope<'_, '_>,
    state: &mut OpState,
    #[string] name: &str,
    text: v8::Local<'_, v8::String>,
) -> Result<(), JsErrorBox> {
    files(state, |scratch| scratch.admit(name, text.length() as u64))?;
    files(state, |scratch| {
        scratch.admit(name, text.utf8_length(scope) as u64)
    })?;
    let text = text.to_rust_string_lossy(scope);
    files(state, |scratch| scratch.write(name, text.as_bytes()))
}

#[op2]
fn op_cr_files_write_bytes(
    state: &mut OpState,
    #[string] name: &str,
    #[anybuffer] bytes: &[u8],
) -> Result<(), JsErrorBox> {
    files(state, |scratch| scratch.write(name, bytes))
}

/// The size of file `name`: the guest allocates the buffer to read it into,
/// so the bytes it holds are charged to `external_mb` like any ArrayBuffer.
#[op2(fast)]
fn op_cr_files_size(state: &mut OpState, #[string] name: &str) -> Result<f64, JsErrorBox> {
    files(state, |scratch| scratch.size(name)).map(|size| size as f64)
}

/// Reads file `name` into `out` (allocated by the guest); answers the bytes copied.
#[op2(fast)]
fn op_cr_files_read_into(
    state: &mut OpState,
    #[string] name: &str,
    #[buffer] out: &mut [u8],
) -> Result<u32, JsErrorBox> {
    files(state, |scratch| scratch.read(name)).map(|bytes| {
        let n = bytes.len().min(out.len());
        out[..n].copy_from_slice(&bytes[..n]);
        u32::try_from(n).unwrap_or(u32::MAX)
    })
}

/// UTF-8 of `text` into `out` (allocated by the guest, sized by `core.byteLength`),
/// for `TextEncoder`: deno_core's own `encode` allocates outside `external_mb`.
#[op2(fast)]
fn op_cr_encode_into(#[string] text: &str, #[buffer] out: &mut [u8]) -> u32 {
    let n = text.len().min(out.len());
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[op2]
#[string]
fn op_cr_files_read_text(state: &mut OpState, #[string] name: &str) -> Result<String, JsErrorBox> {
    files(state, |scratch| {
        scratch
            .read(name)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    })
}

#[op2]
#[serde]
fn op_cr_files_list(state: &mut OpState) -> Result<Vec<String>, JsErrorBox> {
    files(state, |scratch| Ok(scratch.list()))
}

#[op2(fast)]
fn op_cr_files_remove(state: &mut OpState, #[string] name: &str) -> Result<bool, JsErrorBox> {
    files(state, |scratch| scratch.remove(name))
}
