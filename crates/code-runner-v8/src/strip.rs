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
//! swc's parser, its visitor and the drop of its syntax tree all recurse once
//! per level of nesting, about 3.4 KiB of native stack per level at worst
//! (measured: 2,476 nested parentheses fill 8 MiB), and a stack overflow
//! aborts the process. So [`guard`] bounds the nesting first, in one pass
//! that never recurses: at most [`MAX_NESTING`] levels (brackets, template
//! substitutions, type arguments, and operator chains that nest without
//! brackets), far within what the runtime thread's stack holds.

use std::sync::{Arc, Mutex};

use swc_common::errors::{DiagnosticBuilder, Emitter, HANDLER, Handler};
use swc_common::sync::Lrc;
use swc_common::{BytePos, GLOBALS, Globals, SourceMap};
use swc_ts_fast_strip::{ErrorCode, Mode, Options, operate};

/// The most levels of nesting a TypeScript source may have. Written code
/// nests tens deep; the runtime thread's stack holds some 9,000 levels of
/// the stripper's deepest recursion, so this leaves a margin of four.
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
/// first `offset` bytes (a wrapper on the first line) were not there.
fn strip(source: String, module: bool, offset: usize) -> Result<String, StripError> {
    guard(&source).map_err(|at| locate(&source, at, offset, INVALID, too_deep()))?;
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

/// What the scanner is inside of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `(`, `[`, `{` or a template's `${`.
    Bracket(u8),
    /// `<`: type arguments, or a comparison that never closes (dropped when
    /// its enclosing bracket closes or at `;`).
    Angle,
}

/// Checks, in one pass that does not recurse, that `source` nests at most
/// [`MAX_NESTING`] levels; `Err(at)` gives the byte where it goes deeper.
///
/// A level is an open bracket (`(`, `[`, `{`, `${`, `<`) or a token of an
/// operator chain (`a + b + …`, `!!…x`, `x => y => …`, `a ? b : c ? …`,
/// `.b.c…`, `else if …`): within one bracket, tokens count until a `;`,
/// a `,` or a line break that ends a statement (the line's last token ends
/// an expression and the next one starts a statement). The count is the sum
/// over the open brackets, so chains inside nested brackets add up.
///
/// It over-counts rather than under-counts: strings, comments, template text
/// and regular expressions are skipped, and a `/` is a regular expression
/// only where it cannot be a division.
pub fn guard(source: &str) -> Result<(), usize> {
    let bytes = source.as_bytes();
    // (frame, the chain counted in it before it opened)
    let mut frames: Vec<(Frame, usize)> = Vec::new();
    let mut chain = 0usize; // tokens of the current chain, in the innermost frame
    let mut outer = 0usize; // chains of the enclosing frames, summed
    let mut templates: Vec<usize> = Vec::new(); // frame depths of `${`
    let mut last: u8 = b';'; // the previous token's kind: b'a' word/literal, b')' closer, else the punctuator
    let mut last_word: &[u8] = b"";
    let mut line_break = false;
    let mut i = 0;
    let pressure =
        |frames: &Vec<(Frame, usize)>, outer: usize, chain: usize| frames.len() + outer + chain;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' | b'\r' => {
                line_break = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let start = i;
        // Comments.
        if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            i = memchr_newline(bytes, i);
            continue;
        }
        if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i = find(bytes, i + 2, b"*/").map_or(bytes.len(), |end| end + 2);
            line_break |= bytes[start..i.min(bytes.len())].contains(&b'\n');
            continue;
        }
        // A line break between two tokens ends a statement when the one
        // before ends an expression and this one starts a statement.
        if line_break && ends_expression(last) && starts_statement(b, bytes, i) {
            chain = 0;
        }
        line_break = false;
        let mut kind = b;
        // A template's next substitution continues one flat list: not a level.
        let mut counted = true;
        match b {
            b'"' | b'\'' => {
                i = skip_string(bytes, i);
                kind = b'a';
            }
            b'`' => {
                i = skip_template(bytes, i + 1);
                if bytes.get(i.wrapping_sub(2)..i) == Some(b"${") {
                    templates.push(frames.len());
                    frames.push((Frame::Bracket(b'{'), chain));
                    outer += chain;
                    chain = 0;
                    kind = b'(';
                } else {
                    kind = b'a';
                }
            }
            b'/' if regex_allowed(last, last_word) => {
                i = skip_regex(bytes, i + 1);
                kind = b'a';
            }
            b'(' | b'[' | b'{' => {
                frames.push((Frame::Bracket(b), chain));
                outer += chain;
                chain = 0;
                i += 1;
            }
            b'<' if bytes.get(i + 1) != Some(&b'<') && bytes.get(i + 1) != Some(&b'=') => {
                frames.push((Frame::Angle, chain));
                outer += chain;
                chain = 0;
                i += 1;
            }
            b'>' if matches!(frames.last(), Some((Frame::Angle, _))) => {
                if let Some((_, before)) = frames.pop() {
                    outer -= before;
                    chain = before + 1;
                }
                i += 1;
                kind = b')';
            }
            b')' | b']' | b'}' => {
                // Unclosed `<` (comparisons) end with their bracket.
                while let Some((Frame::Angle, before)) = frames.last().copied() {
                    frames.pop();
                    outer -= before;
                }
                let closes_template = b == b'}'
                    && templates
                        .last()
                        .is_some_and(|depth| *depth + 1 == frames.len());
                if let Some((_, before)) = frames.pop() {
                    outer -= before;
                    chain = before + 1;
                }
                if closes_template {
                    templates.pop();
                    // The template, not its substitution, is the level.
                    chain -= 1;
                    counted = false;
                    i = skip_template(bytes, i + 1);
                    if bytes.get(i.wrapping_sub(2)..i) == Some(b"${") {
                        templates.push(frames.len());
                        frames.push((Frame::Bracket(b'{'), chain));
                        outer += chain;
                        chain = 0;
                        kind = b'(';
                    } else {
                        kind = b'a';
                    }
                } else {
                    i += 1;
                    kind = b')';
                }
            }
            b';' | b',' => {
                if b == b';' {
                    while let Some((Frame::Angle, before)) = frames.last().copied() {
                        frames.pop();
                        outer -= before;
                    }
                }
                chain = 0;
                i += 1;
            }
            _ if is_word(b) => {
                let end = bytes[i..]
                    .iter()
                    .position(|c| !is_word(*c))
                    .map_or(bytes.len(), |n| i + n);
                last_word = &bytes[i..end];
                i = end;
                kind = b'a';
            }
            _ => i += 1,
        }
        if kind != b'a' {
            last_word = b"";
        }
        last = kind;
        if counted {
            chain += 1;
        }
        if pressure(&frames, outer, chain) > MAX_NESTING {
            return Err(start);
        }
    }
    Ok(())
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Whether a token of this kind ends an expression (a statement may end after it).
fn ends_expression(last: u8) -> bool {
    matches!(last, b'a' | b')')
}

/// Whether the token at `i` (first byte `b`) starts a statement rather than continuing one.
fn starts_statement(b: u8, bytes: &[u8], i: usize) -> bool {
    if !is_word(b) && !matches!(b, b'"' | b'\'' | b'`' | b'{') {
        return false;
    }
    // `else`, `in`, `instanceof`, `as`, `satisfies`, … continue the statement before.
    let end = bytes[i..]
        .iter()
        .position(|c| !is_word(*c))
        .map_or(bytes.len(), |n| i + n);
    !matches!(
        &bytes[i..end],
        b"else"
            | b"in"
            | b"instanceof"
            | b"as"
            | b"satisfies"
            | b"of"
            | b"catch"
            | b"finally"
            | b"extends"
            | b"implements"
            | b"keyof"
            | b"is"
    )
}

/// Whether a `/` after a token of this kind starts a regular expression.
/// Where it could be a division (after a word, a literal or a closer) it is
/// one, except after the keywords an expression follows.
fn regex_allowed(last: u8, last_word: &[u8]) -> bool {
    match last {
        b'a' => matches!(
            last_word,
            b"return"
                | b"typeof"
                | b"instanceof"
                | b"in"
                | b"of"
                | b"new"
                | b"delete"
                | b"void"
                | b"throw"
                | b"case"
                | b"do"
                | b"else"
                | b"yield"
                | b"await"
        ),
        b')' => false,
        _ => true,
    }
}

fn memchr_newline(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|c| *c == b'\n')
        .map_or(bytes.len(), |n| from + n)
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|n| from + n)
}

/// Past a `'`/`"` string starting at `i` (or the end of its line).
fn skip_string(bytes: &[u8], i: usize) -> usize {
    let quote = bytes[i];
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'\n' => return j,
            c if c == quote => return j + 1,
            _ => j += 1,
        }
    }
    bytes.len()
}

/// Past template text starting at `i`: after the closing backtick, or after
/// a `${` (the caller opens its frame), or the end.
fn skip_template(bytes: &[u8], mut j: usize) -> usize {
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'`' => return j + 1,
            b'$' if bytes.get(j + 1) == Some(&b'{') => return j + 2,
            _ => j += 1,
        }
    }
    bytes.len()
}

/// Past a regular expression's body and flags (`i` is after its `/`), or the end of its line.
fn skip_regex(bytes: &[u8], mut j: usize) -> usize {
    let mut class = false;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'\n' => return j,
            b'[' => {
                class = true;
                j += 1;
            }
            b']' => {
                class = false;
                j += 1;
            }
            b'/' if !class => {
                j += 1;
                while j < bytes.len() && bytes[j].is_ascii_alphabetic() {
                    j += 1;
                }
                return j;
            }
            _ => j += 1,
        }
    }
    bytes.len()
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
        let source = include_str!("../tests/fixtures/typescript_2kb.ts");
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
        eprintln!(
            "strip of {} bytes: {each:?} each (the guard's pass: {guard_each:?})",
            source.len()
        );
    }

    /// Deep nesting of every kind is refused before swc sees it; ordinary code is not.
    #[test]
    fn guard_bounds_nesting_not_length() {
        let deep = [
            format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000)),
            format!("x = 1{}", "+1".repeat(100_000)),
            format!("x = {}1", "!".repeat(100_000)),
            format!("x = {}1", "y=>".repeat(100_000)),
            format!(
                "let x: {}B{} = 1",
                "A<".repeat(100_000),
                ">".repeat(100_000)
            ),
            format!("let x: {}B = 1", "A<1, ".repeat(100_000)),
            format!("x = {}1{}", "`${".repeat(100_000), "}`".repeat(100_000)),
            format!("{}{{}}", "if(a){}else ".repeat(100_000)),
            format!("x = 1\n{}", "+1\n".repeat(100_000)),
        ];
        for source in &deep {
            assert!(guard(source).is_err(), "{}", &source[..40]);
            assert!(program(source).is_err());
        }
        let wide = [
            format!("const a = [{}];", "1, ".repeat(100_000)),
            "const a = 1\n".repeat(50_000),
            "if (a < b) { f(\"(((\", /[(]/) }\n".repeat(20_000),
            format!("const s = `{}`;", "${x} (".repeat(10_000)),
        ];
        for source in &wide {
            assert_eq!(guard(source), Ok(()), "{}", &source[..40]);
        }
    }
}
