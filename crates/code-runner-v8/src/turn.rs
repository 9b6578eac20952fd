//! Turns inside one isolate: launching a task's JavaScript with its marker,
//! and reading how it ended.
//!
//! A turn is a promise: a program's async function, `define`'s import of a
//! handler module, or `invoke`'s call of a kept handler. The runtime thread
//! launches it here and watches the promise settle.

use std::time::{Duration, Instant};

use code_runner_core::{AbortSignal, Bindings, Completion, Task, TurnEnding};
use serde_json::{Value, json};

use crate::convert::{self, Converted, Limits};
use crate::isolate::Isolate;
use crate::state::{ObjectPrototype, SharedIo};

/// The name guest programs run under, in stack traces.
pub const PROGRAM_NAME: &str = "run.js";
/// The name TypeScript programs run under.
pub const TS_PROGRAM_NAME: &str = "run.ts";
/// What a program's body is wrapped in: the first line is the body's first line.
const PROGRAM_PREFIX: &str = "(async function () {";
const PROGRAM_SUFFIX: &str = "\n})";

/// A turn in flight on the runtime thread.
pub struct Turn {
    /// Its marker in the async context.
    pub marker: u32,
    /// The promise that settles when the turn's code is done.
    pub promise: Option<v8::Global<v8::Promise>>,
    /// Whether the task has a completion value (not `Define`).
    pub has_value: bool,
    /// Where the outcome goes.
    pub reply: tokio::sync::oneshot::Sender<code_runner_core::TurnOutcome>,
    /// When its budget ends, as it started: [`Turn::due`] moves it by the
    /// time the turn's clock stood still.
    pub deadline: Instant,
    /// Its budget.
    pub budget: Duration,
    /// Its clock (stopped while a binding call waits for a person).
    pub clock: code_runner_core::TurnClock,
    /// How long the clock had stood still when the watchdog was last armed.
    pub armed_stood: Duration,
    /// Its abort signal.
    pub abort: AbortSignal,
    /// Bytes of JSON payload it carried into the isolate (an `Invoke`).
    pub payload_bytes: usize,
    /// The isolate thread's CPU time when the turn started.
    pub cpu_start: u64,
}

impl Turn {
    /// When running code's time is up: the deadline moved by the time the
    /// clock stood still (a pause in progress does not move it).
    pub fn due(&self) -> Instant {
        self.clock.deadline(self.deadline)
    }

    /// Whether the turn, idle, is out of time at `now` (never while its
    /// clock stands still).
    pub fn past(&self, now: Instant) -> bool {
        self.clock.past(self.deadline, now)
    }
}

/// What launching a turn's JavaScript gave.
pub enum Launch {
    /// The turn's promise.
    Running(v8::Global<v8::Promise>),
    /// It ended before running (a syntax error): exit 1 with this text.
    Failed(String),
    /// JavaScript was terminated (the watchdog's stop says why).
    Terminated,
}

/// The JSON list the bootstrap's `install` turns into binding globals.
/// `files_namespace` names the namespace that also gets `files`.
pub fn bindings_spec(bindings: &Bindings, files_namespace: Option<&str>) -> String {
    let list: Vec<Value> = bindings
        .namespaces()
        .iter()
        .map(|ns| {
            let functions: Vec<&String> = ns
                .functions
                .keys()
                .filter(|name| !ns.registrars.contains(*name) && !ns.paths.contains(*name))
                .collect();
            let files = files_namespace == Some(ns.global.as_str())
                && !ns.functions.contains_key("files")
                && !ns.values.contains_key("files");
            json!({
                "global": ns.global,
                "functions": functions,
                "registrars": ns.registrars,
                "paths": ns.paths,
                "values": ns.values,
                "error_class": ns.error_class.as_ref().map(|class| json!({
                    "name": class.name,
                    "member_name_property": class.member_name_property,
                })),
                "files": files,
            })
        })
        .collect();
    Value::from(list).to_string()
}

/// Calls `function(args)` with the async context set to `marker`, so every
/// reaction the call creates belongs to the turn.
fn call_marked<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    marker: u32,
    function: v8::Local<'s, v8::Function>,
    args: &[v8::Local<'s, v8::Value>],
) -> Option<v8::Local<'s, v8::Value>> {
    let marked = v8::Integer::new_from_unsigned(scope, marker);
    scope.set_continuation_preserved_embedder_data(marked.into());
    let undefined = v8::undefined(scope);
    let result = function.call(scope, undefined.into(), args);
    scope.set_continuation_preserved_embedder_data(undefined.into());
    result
}

/// The turn's promise (a plain value is wrapped in a resolved one); `Terminated`
/// when V8 cannot make one because it is terminating.
fn running<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    value: v8::Local<'s, v8::Value>,
    noop: &v8::Global<v8::Function>,
) -> Launch {
    let promise = match v8::Local::<v8::Promise>::try_from(value) {
        Ok(promise) => promise,
        Err(_) => {
            let Some(resolver) = v8::PromiseResolver::new(scope) else {
                return Launch::Terminated;
            };
            resolver.resolve(scope, value);
            resolver.get_promise(scope)
        }
    };
    // The thread reads the outcome itself, so a rejection is not "unhandled".
    // A handler, not just a mark: a body that throws before its first await
    // has already been reported to the rejection tracker, and only adding a
    // handler takes it back.
    let noop = v8::Local::new(scope, noop);
    if promise.catch(scope, noop).is_none() {
        return Launch::Terminated;
    }
    Launch::Running(v8::Global::new(scope, promise))
}

/// Launches `task` as turn `marker` (an `Invoke` with its payload as JSON
/// text when the caller has measured it already); `typescript`: a program's
/// or a definition's source is stripped of its types first.
pub fn launch(
    isolate: &mut Isolate,
    marker: u32,
    task: Task,
    payload_json: Option<String>,
    typescript: bool,
) -> Launch {
    let runtime = &mut isolate.runtime;
    let internals = &isolate.internals;
    let (function, args): (v8::Global<v8::Function>, Vec<String>) = match task {
        Task::Program(source) if typescript => {
            if source.len() > isolate.loader.max_source() {
                return Launch::Failed(too_long(source.len(), isolate.loader.max_source()));
            }
            let source = crate::imports::hoist(&source, true).unwrap_or(source);
            return match crate::strip::program(&source) {
                Ok(code) => {
                    launch_program(runtime, marker, &code, TS_PROGRAM_NAME, &internals.noop)
                }
                Err(err) => Launch::Failed(capped(err.render(TS_PROGRAM_NAME))),
            };
        }
        Task::Program(source) => {
            // Parsed on the host only within what V8 would compile at all.
            let source = match source.len() <= isolate.loader.max_source() {
                true => crate::imports::hoist(&source, false).unwrap_or(source),
                false => source,
            };
            return launch_program(runtime, marker, &source, PROGRAM_NAME, &internals.noop);
        }
        Task::Define { key, source } => {
            let source = if typescript {
                if source.len() > isolate.loader.max_source() {
                    return Launch::Failed(too_long(source.len(), isolate.loader.max_source()));
                }
                match crate::strip::module(&source) {
                    Ok(code) => code,
                    Err(err) => return Launch::Failed(capped(err.render("handler.ts"))),
                }
            } else {
                source
            };
            let (named, plain) = isolate.loader.add_define(marker, source);
            (internals.define.clone(), vec![key, named, plain])
        }
        Task::Invoke { key, payload } => {
            let payload = payload_json.unwrap_or_else(|| {
                serde_json::to_string(&payload).unwrap_or_else(|_| "null".into())
            });
            (internals.invoke.clone(), vec![key, payload])
        }
    };
    deno_core::scope!(scope, runtime);
    v8::tc_scope!(let tc, scope);
    let mut locals = Vec::with_capacity(args.len());
    for arg in &args {
        match v8::String::new(tc, arg) {
            Some(string) => locals.push(string.into()),
            None => return Launch::Failed("the task's text is too large for V8".into()),
        }
    }
    let function = v8::Local::new(tc, &function);
    match call_marked(tc, marker, function, &locals) {
        Some(value) => running(tc, value, &internals.noop),
        None => Launch::Terminated,
    }
}

/// The refusal of a TypeScript source longer than the runtime compiles.
fn too_long(bytes: usize, limit: usize) -> String {
    format!(
        "RangeError: TypeScript is stripped up to {limit} bytes of source in this runtime; this one has {bytes}"
    )
}

fn launch_program(
    runtime: &mut deno_core::JsRuntime,
    marker: u32,
    source: &str,
    script_name: &str,
    noop: &v8::Global<v8::Function>,
) -> Launch {
    deno_core::scope!(scope, runtime);
    v8::tc_scope!(let tc, scope);
    let wrapped = format!("{PROGRAM_PREFIX}{source}{PROGRAM_SUFFIX}");
    let (Some(code), Some(name)) = (
        v8::String::new(tc, &wrapped),
        v8::String::new(tc, script_name),
    ) else {
        return Launch::Failed("RangeError: the program is too large for V8".into());
    };
    let column = -i32::try_from(PROGRAM_PREFIX.len()).unwrap_or(0);
    let origin = v8::ScriptOrigin::new(
        tc,
        name.into(),
        0,
        column,
        false,
        0,
        None,
        false,
        false,
        false,
        None,
    );
    let compiled = v8::Script::compile(tc, code, Some(&origin)).and_then(|script| script.run(tc));
    let Some(value) = compiled else {
        if tc.has_terminated() {
            return Launch::Terminated;
        }
        return Launch::Failed(syntax_error(tc, script_name));
    };
    let Ok(function) = v8::Local::<v8::Function>::try_from(value) else {
        return Launch::Failed(
            "SyntaxError: the code must be the body of a function (it closed the function it runs in)".into(),
        );
    };
    match call_marked(tc, marker, function, &[]) {
        Some(value) => running(tc, value, noop),
        None => Launch::Terminated,
    }
}

/// Longest error text the host carries out of an isolate into a turn's
/// outcome (the bootstrap caps what it formats at as many UTF-16 units).
const MAX_ERROR_BYTES: usize = 64 * 1024;

/// `text`, cut to [`MAX_ERROR_BYTES`] on a character boundary, saying how much went.
pub fn capped(mut text: String) -> String {
    if text.len() > MAX_ERROR_BYTES {
        let mut cut = MAX_ERROR_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = text.len() - cut;
        text.truncate(cut);
        text.push_str(&format!("… [{dropped} more bytes]"));
    }
    text
}

/// Node's rendering of a syntax error: where, the line, a caret, the error;
/// V8's message quotes the offending token whole, so the text is capped.
fn syntax_error(
    tc: &mut v8::PinnedRef<'_, v8::TryCatch<'_, '_, v8::HandleScope<'_>>>,
    name: &str,
) -> String {
    let text = tc
        .exception()
        .map(|exception| exception.to_rust_string_lossy(tc))
        .unwrap_or_else(|| "SyntaxError".into());
    let Some(message) = tc.message() else {
        return capped(text);
    };
    let line = message.get_line_number(tc).unwrap_or(0);
    let source_line = message
        .get_source_line(tc)
        .map(|line| line.to_rust_string_lossy(tc))
        .unwrap_or_default();
    let (mut start, mut end) = (message.get_start_column(), message.get_end_column());
    let mut source_line = source_line;
    if line == 1 && source_line.starts_with(PROGRAM_PREFIX) {
        source_line.drain(..PROGRAM_PREFIX.len());
        start = start.saturating_sub(PROGRAM_PREFIX.len());
        end = end.saturating_sub(PROGRAM_PREFIX.len());
    }
    let source_line: String = source_line.chars().take(200).collect();
    let caret = format!(
        "{}{}",
        " ".repeat(start.min(200)),
        "^".repeat(end.saturating_sub(start).clamp(1, 200))
    );
    capped(format!("{name}:{line}\n{source_line}\n{caret}\n\n{text}"))
}

/// How a settled turn ended, or `None` while it runs. A result of more
/// than `max_bytes` of JSON (or [`MAX_JSON_VALUES`](code_runner_core::json::MAX_JSON_VALUES)
/// values) is measured, never built.
pub fn settled(isolate: &mut Isolate, turn: &Turn, max_bytes: u64) -> Option<Settled> {
    let promise = turn.promise.as_ref()?;
    let (prototype, watch) = {
        let state = isolate.runtime.op_state();
        let state = state.borrow();
        let prototype = state.try_borrow::<ObjectPrototype>()?.0.clone();
        let watch = state.try_borrow::<SharedIo>()?.borrow().watch.clone();
        (prototype, watch)
    };
    let stopped = || watch.stop_requested();
    let describe = isolate.internals.describe_thrown.clone();
    deno_core::scope!(scope, &mut isolate.runtime);
    v8::tc_scope!(let tc, scope);
    let promise = v8::Local::new(tc, promise);
    match promise.state() {
        v8::PromiseState::Pending => None,
        v8::PromiseState::Fulfilled if !turn.has_value => Some(Settled::Value(Completion::Absent)),
        v8::PromiseState::Fulfilled => {
            let value = promise.result(tc);
            let limits = Limits::bytes(max_bytes);
            let completion = match convert::to_json(
                tc,
                value,
                &prototype,
                "result",
                limits,
                &stopped,
                convert::Mode::Stringify,
            ) {
                Converted::Value {
                    json,
                    substituted: None,
                    ..
                } => Completion::Value(json),
                Converted::Value {
                    json,
                    substituted: Some(substituted),
                    note,
                    ..
                } => Completion::Converted {
                    value: json,
                    substituted,
                    note,
                },
                Converted::Undefined => Completion::Absent,
                Converted::NotJson(why) => Completion::NotJson(why),
                Converted::Oversize { bytes, shape, .. } => Completion::Oversize { bytes, shape },
                Converted::Threw if tc.has_terminated() => return Some(Settled::Terminated),
                Converted::Stopped => return Some(Settled::Terminated),
                Converted::Threw => {
                    Completion::NotJson("reading the result threw an exception".into())
                }
            };
            Some(Settled::Value(completion))
        }
        v8::PromiseState::Rejected => {
            let reason = promise.result(tc);
            let describe = v8::Local::new(tc, &describe);
            let undefined = v8::undefined(tc);
            match describe.call(tc, undefined.into(), &[reason]) {
                Some(text) => Some(Settled::Threw(text.to_rust_string_lossy(tc))),
                None if tc.has_terminated() => Some(Settled::Terminated),
                None => Some(Settled::Threw("Uncaught exception".into())),
            }
        }
    }
}

/// How a settled turn ended.
pub enum Settled {
    /// It returned (or resolved with) this completion.
    Value(Completion),
    /// It threw; Node's text for the exception.
    Threw(String),
    /// Reading the outcome was terminated (the watchdog's stop says why).
    Terminated,
}

impl Settled {
    /// The ending this maps to, when the turn was not stopped.
    pub fn ending(self) -> Option<TurnEnding> {
        match self {
            Settled::Value(completion) => Some(TurnEnding::Exited {
                exit_code: 0,
                completion,
                exception: None,
            }),
            Settled::Threw(text) => Some(TurnEnding::Exited {
                exit_code: 1,
                completion: Completion::Absent,
                exception: Some(text),
            }),
            Settled::Terminated => None,
        }
    }
}

/// Calls the bootstrap's `install` and `endTurn` (plain calls, no marker).
pub fn call_internal(isolate: &mut Isolate, which: Internal, arg: InternalArg) -> bool {
    let function = match which {
        Internal::Install => isolate.internals.install.clone(),
        Internal::EndTurn => isolate.internals.end_turn.clone(),
        Internal::Ledger => isolate.internals.ledger.clone(),
    };
    deno_core::scope!(scope, &mut isolate.runtime);
    v8::tc_scope!(let tc, scope);
    let arg: v8::Local<v8::Value> = match arg {
        InternalArg::Text(text) => match v8::String::new(tc, &text) {
            Some(string) => string.into(),
            None => return false,
        },
        InternalArg::Marker(marker) => v8::Integer::new_from_unsigned(tc, marker).into(),
    };
    let function = v8::Local::new(tc, &function);
    let undefined = v8::undefined(tc);
    function.call(tc, undefined.into(), &[arg]).is_some()
}

/// Which bootstrap function [`call_internal`] calls.
pub enum Internal {
    /// `install(specJson)`.
    Install,
    /// `endTurn(marker)`.
    EndTurn,
    /// `ledger(specJson)`: the ledger's sources, recording or replaying.
    Ledger,
}

/// The argument of [`call_internal`].
pub enum InternalArg {
    /// A string.
    Text(String),
    /// A turn marker.
    Marker(u32),
}
