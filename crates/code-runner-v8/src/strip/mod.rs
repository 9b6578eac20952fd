//! TypeScript type stripping: types and type-only syntax become whitespace,
//! so every remaining character keeps its line and column, and V8 compiles
//! the rest as JavaScript. Nothing is type-checked.
//!
//! The stripper is `swc_ts_fast_strip` in strip-only mode, the crate Node's
//! own `--experimental-strip-types` is built on (through amaro). Syntax that
//! needs a transform rather than erasure (enums, namespaces with values,
//! parameter properties, `import x = require()`, `export =`, `<T>x`
//! assertions) is refused with swc's message; decorators, which V8 does not
//! run yet, are refused by name too.
//!
//! swc's parser, its visitor and the drop of its syntax tree all recurse
//! once per level of nesting (up to 3.3 KiB of native stack per byte of
//! source, 8.8 KiB per level of the costliest construct), and
//! a stack overflow aborts the process. Two walls stand in the way:
//!
//! - [`stack`]: swc runs on a stack that holds any nesting a source of its
//!   length can have (every level costs at least a byte), so no source,
//!   however it nests, overflows it; one too long for any stack the system
//!   can reserve is refused;
//! - [`guard`]: one pass that never recurses refuses more than
//!   [`MAX_NESTING`] levels first (brackets, template substitutions, type
//!   arguments, and operator chains that nest without brackets), with
//!   Node's `ERR_INVALID_TYPESCRIPT_SYNTAX`, so what a strip touches of its
//!   stack stays small (some 7 MiB at most). Property tests hold it to swc's
//!   own tree (`properties`).

use std::sync::{Arc, Mutex};

use swc_common::errors::{DiagnosticBuilder, Emitter, HANDLER, Handler};
use swc_common::sync::Lrc;
use swc_common::{BytePos, GLOBALS, Globals, SourceMap};
use swc_ts_fast_strip::{ErrorCode, Mode, Options, operate};

/// The most levels of nesting a TypeScript source may have. Written code
/// nests tens deep; a strip within it touches a few MiB of stack (a level
/// of the guard's count costs at most 3.3 KiB: constructs that cost more
/// per level count as several).
pub const MAX_NESTING: usize = 2_000;

/// Why a source could not be stripped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripError {
    /// Node's code: `ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX` (needs a transform)
    /// or `ERR_INVALID_TYPESCRIPT_SYNTAX` (does not parse, or too deep).
    pub code: &'static str,
    /// What is wrong, naming the construct.
    pub message: String,
    /// 1-based line of the source.
    pub line: usize,
    /// 0-based column, in characters.
    pub column: usize,
    /// Characters the construct spans on its line (at least 1).
    pub width: usize,
    /// The source line it is on.
    pub source_line: String,
}

impl StripError {
    /// Node's rendering: where, the line, a caret, the error.
    pub fn render(&self, name: &str) -> String {
        let line: String = self.source_line.chars().take(200).collect();
        let caret = format!(
            "{}{}",
            " ".repeat(self.column.min(200)),
            "^".repeat(self.width.clamp(1, 200))
        );
        format!(
            "{name}:{}\n{line}\n{caret}\n\nSyntaxError [{}]: {}",
            self.line, self.code, self.message
        )
    }

    /// One line for an import's error: `name:line:column: message`.
    pub fn one_line(&self, name: &str) -> String {
        format!(
            "[{}] {name}:{}:{}: {}",
            self.code,
            self.line,
            self.column + 1,
            self.message
        )
    }
}

const UNSUPPORTED: &str = "ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX";
const INVALID: &str = "ERR_INVALID_TYPESCRIPT_SYNTAX";

/// What a program's body is wrapped in to strip it (a function body may
/// `return` and `await`); the wrapper is on the body's first line, as in
/// [`crate::turn`], and stripping keeps both ends byte for byte.
const WRAP_PREFIX: &str = "(async function () {";
const WRAP_SUFFIX: &str = "\n})";

/// Strips a program: the body of an async function.
pub fn program(source: &str) -> Result<String, StripError> {
    let wrapped = format!("{WRAP_PREFIX}{source}{WRAP_SUFFIX}");
    let stripped = strip(wrapped, false, WRAP_PREFIX.len())?;
    stripped
        .strip_prefix(WRAP_PREFIX)
        .and_then(|rest| rest.strip_suffix(WRAP_SUFFIX))
        .map(str::to_string)
        .ok_or_else(|| StripError {
            code: INVALID,
            message: "the code must be the body of a function (it closed the function it runs in)"
                .into(),
            line: 1,
            column: 0,
            width: 1,
            source_line: source.lines().next().unwrap_or_default().to_string(),
        })
}

/// Strips an ES module (an `iii.files` module, a handler's source).
pub fn module(source: &str) -> Result<String, StripError> {
    strip(source.to_string(), true, 0)
}

/// Strips `source` (a module, or a script), reporting positions as if the
/// first `offset` bytes (a wrapper on the first line) were not there: the
/// guard first, then swc on a stack deep enough for any source this long.
fn strip(source: String, module: bool, offset: usize) -> Result<String, StripError> {
    guard(&source).map_err(|at| locate(&source, at, offset, INVALID, too_deep()))?;
    let len = source.len();
    let first_line: String = source
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    stack::run(len, move || swc(source, module, offset)).unwrap_or_else(|| {
        Err(StripError {
            code: INVALID,
            message: format!(
                "the code ({len} bytes) could not be stripped: no stack for it could be reserved"
            ),
            line: 1,
            column: 0,
            width: 1,
            source_line: first_line.chars().skip(offset).collect(),
        })
    })
}

/// swc's strip of `source`, unguarded: its caller provides the stack.
fn swc(source: String, module: bool, offset: usize) -> Result<String, StripError> {
    let cm: Lrc<SourceMap> = Default::default();
    let found = Arc::new(Mutex::new(Vec::new()));
    let handler = Handler::with_emitter(true, false, Box::new(Collect(found.clone())));
    let options = Options {
        module: Some(module),
        mode: Mode::StripOnly,
        ..Options::default()
    };
    // The source map numbers files from 1: a position is its byte offset + 1.
    let text = source.clone();
    let outcome = GLOBALS.set(&Globals::new(), || {
        HANDLER.set(&handler, || operate(&cm, &handler, text, options))
    });
    match outcome {
        Ok(output) => Ok(output.code),
        Err(err) => {
            let found = found.lock().unwrap_or_else(|p| p.into_inner());
            let first = found.iter().min_by_key(|(at, _)| *at);
            let (at, message) = match first {
                Some((at, message)) => (at.0.saturating_sub(1) as usize, message.clone()),
                None => (offset, err.message.clone()),
            };
            let code = match err.code {
                ErrorCode::UnsupportedSyntax => UNSUPPORTED,
                _ => INVALID,
            };
            let mut error = locate(&source, at, offset, code, message);
            if source.as_bytes().get(at) == Some(&b'@') {
                error.code = UNSUPPORTED;
                error.message = "TypeScript decorators are not supported: V8 runs no decorators yet, and legacy decorators' metadata needs a transform".into();
            }
            if found.len() > 1 {
                error
                    .message
                    .push_str(&format!(" (and {} more)", found.len() - 1));
            }
            Err(error)
        }
    }
}

fn too_deep() -> String {
    format!(
        "the code nests more than {MAX_NESTING} levels deep (brackets, type arguments, template substitutions or chained operators); TypeScript is stripped only within that"
    )
}

/// The error at byte `at` of `source`, numbered as if its first `offset`
/// bytes were not there.
fn locate(
    source: &str,
    at: usize,
    offset: usize,
    code: &'static str,
    message: String,
) -> StripError {
    let mut at = at.min(source.len());
    while !source.is_char_boundary(at) {
        at -= 1;
    }
    let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = source[at..].find('\n').map_or(source.len(), |i| at + i);
    let line = source[..at].matches('\n').count() + 1;
    let skip = if line == 1 { offset.min(at) } else { 0 };
    let column = source[line_start + skip..at].chars().count();
    let source_line = source[line_start + skip..line_end].to_string();
    StripError {
        code,
        message,
        line,
        column,
        width: 1,
        source_line,
    }
}

/// Collects swc's diagnostics: (position, message).
struct Collect(Arc<Mutex<Vec<(BytePos, String)>>>);

impl Emitter for Collect {
    fn emit(&mut self, db: &mut DiagnosticBuilder<'_>) {
        let at = db.span.primary_span().map_or(BytePos(0), |span| span.lo);
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((at, db.message()));
    }
}

mod guard;
#[cfg(test)]
mod properties;
mod stack;

pub use guard::guard;

/// Runs `parse` (swc over a source of `len` bytes that passed [`guard`]) on
/// a stack deep enough for it; `None` if none could be had.
pub fn run_on_stack<T: Send + 'static>(
    len: usize,
    parse: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    stack::run(len, parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Types become whitespace; everything else keeps its place.
    #[test]
    fn strips_types_in_place() {
        let source = "let x: number = 1;\nconst y = x as any;\nreturn y satisfies unknown;";
        let stripped = program(source).unwrap();
        assert_eq!(stripped.len(), source.len());
        assert_eq!(stripped.lines().count(), 3);
        assert!(stripped.starts_with("let x         = 1;"));
        assert!(!stripped.contains("as any"));
    }

    /// A construct that needs a transform is refused with its line and Node's code.
    #[test]
    fn refuses_transforms_with_their_line() {
        let err = program("let a = 1;\nenum E { A }\nreturn a").unwrap_err();
        assert_eq!(err.code, UNSUPPORTED);
        assert_eq!(err.line, 2);
        assert!(err.message.contains("enum"), "{}", err.message);
        let err = module("@sealed class C {}").unwrap_err();
        assert!(err.message.contains("decorators"), "{}", err.message);
        let err = program("let x = ;").unwrap_err();
        assert_eq!((err.code, err.line, err.column), (INVALID, 1, 8));
    }

    /// The cost of stripping a 2 KB program, guard included (issue 22's goal:
    /// at most 0.1 ms): `cargo test --release --workspace --lib strip -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    #[allow(clippy::print_stderr, reason = "the measurement is its output")]
    fn measure_strip_cost() {
        let source = include_str!("../../tests/fixtures/typescript_2kb.ts");
        for _ in 0..100 {
            module(source).unwrap();
        }
        let rounds = 2_000u32;
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            module(source).unwrap();
        }
        let each = started.elapsed() / rounds;
        let guard_started = std::time::Instant::now();
        for _ in 0..rounds {
            guard(source).unwrap();
        }
        let guard_each = guard_started.elapsed() / rounds;
        // The same strip on this thread: no hop to a strip thread.
        let here_started = std::time::Instant::now();
        for _ in 0..rounds {
            guard(source).unwrap();
            swc(source.to_string(), true, 0).unwrap();
        }
        let here_each = here_started.elapsed() / rounds;
        eprintln!(
            "strip of {} bytes: {each:?} each (the guard's pass: {guard_each:?}; on the caller's thread: {here_each:?})",
            source.len()
        );
    }
}
