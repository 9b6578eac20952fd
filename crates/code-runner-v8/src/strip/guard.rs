//! The nesting guard: one pass over a TypeScript source that never
//! recurses, so that swc is not handed nesting deeper than
//! [`MAX_NESTING`]. It is defence in depth: swc runs on a stack that holds
//! any nesting a source of its length can have ([`super::stack`]), so a
//! source the guard misjudges costs stack memory (bounded by its length),
//! never an abort.

use super::MAX_NESTING;

/// A bracket (`(`, `[`, `{`, a template's `${`) or a `<` the scanner is inside of.
#[derive(Clone, Copy)]
struct Open {
    /// `<`: type arguments, or a comparison that never closes (dropped when
    /// its enclosing bracket closes or at `;`).
    angle: bool,
    /// The chain counted in the enclosing frame before it opened.
    before: usize,
    /// The `(` of `if`, `for`, `while` or `with`: a statement follows it.
    head: bool,
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
/// and regular expressions are skipped, ending where swc's lexer ends them
/// (every line terminator: LF, CR, U+2028, U+2029; a backslash before CR LF
/// continues a string), and a `/` is a regular expression only where it
/// cannot be a division: not after a name, a literal, a closing bracket, a
/// postfix `++`/`--`/`!`, nor after a keyword used as a property name
/// (`a.return / b`).
pub fn guard(source: &str) -> Result<(), usize> {
    within(source, MAX_NESTING)
}

/// [`guard`] with any limit (the property tests use small ones).
pub(super) fn within(source: &str, limit: usize) -> Result<(), usize> {
    let bytes = source.as_bytes();
    let mut frames: Vec<Open> = Vec::new();
    let mut chain = 0usize; // tokens of the current chain, in the innermost frame
    let mut outer = 0usize; // chains of the enclosing frames, summed
    let mut templates: Vec<usize> = Vec::new(); // frame depths of `${`
    // The previous token's kind: b'a' a name or literal (or a postfix
    // operator), b')' a closer, b'h' the `)` of a statement's head, else
    // the punctuator; and the word it was, when it was a keyword.
    let mut last: u8 = b';';
    let mut last_word: &[u8] = b"";
    let mut dots = 0usize; // `.` tokens in a row before this one
    let mut line_break = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let n = line_terminator(bytes, i);
        if n > 0 {
            line_break = true;
            i += n;
            continue;
        }
        let n = space(source, i);
        if n > 0 {
            i += n;
            continue;
        }
        let start = i;
        // Comments.
        if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            i = line_end(bytes, i);
            continue;
        }
        if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i = find(bytes, i + 2, b"*/").map_or(bytes.len(), |end| end + 2);
            line_break |= (start..i).any(|j| line_terminator(bytes, j) > 0);
            continue;
        }
        let broke = line_break;
        // A line break between two tokens ends a statement when the one
        // before ends an expression and this one starts a statement.
        if line_break && ends_expression(last, last_word) && starts_statement(b, bytes, i) {
            chain = 0;
        }
        line_break = false;
        let mut kind = b;
        let mut word: &[u8] = b"";
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
                    open(&mut frames, &mut outer, &mut chain, false, false);
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
                let head = b == b'(' && matches!(last_word, b"if" | b"for" | b"while" | b"with");
                open(&mut frames, &mut outer, &mut chain, false, head);
                i += 1;
            }
            b'<' if bytes.get(i + 1) != Some(&b'<') && bytes.get(i + 1) != Some(&b'=') => {
                open(&mut frames, &mut outer, &mut chain, true, false);
                i += 1;
            }
            b'>' if frames.last().is_some_and(|f| f.angle) => {
                if let Some(f) = frames.pop() {
                    outer -= f.before;
                    chain = f.before + 1;
                }
                i += 1;
                kind = b')';
            }
            b')' | b']' | b'}' => {
                // Unclosed `<` (comparisons) end with their bracket.
                while let Some(f) = frames.last().copied().filter(|f| f.angle) {
                    frames.pop();
                    outer -= f.before;
                }
                let closes_template = b == b'}'
                    && templates
                        .last()
                        .is_some_and(|depth| *depth + 1 == frames.len());
                let mut head = false;
                if let Some(f) = frames.pop() {
                    outer -= f.before;
                    chain = f.before + 1;
                    head = f.head;
                }
                if closes_template {
                    templates.pop();
                    // The template, not its substitution, is the level.
                    chain -= 1;
                    counted = false;
                    i = skip_template(bytes, i + 1);
                    if bytes.get(i.wrapping_sub(2)..i) == Some(b"${") {
                        templates.push(frames.len());
                        open(&mut frames, &mut outer, &mut chain, false, false);
                        kind = b'(';
                    } else {
                        kind = b'a';
                    }
                } else {
                    i += 1;
                    kind = if head { b'h' } else { b')' };
                }
            }
            b';' | b',' => {
                if b == b';' {
                    while let Some(f) = frames.last().copied().filter(|f| f.angle) {
                        frames.pop();
                        outer -= f.before;
                    }
                }
                chain = 0;
                i += 1;
            }
            // `x++ / 2`, `x! / 2` (a non-null assertion): postfix, so a
            // division may follow; prefix (`++x`, `!x`) after an operator or
            // on a new line.
            b'+' | b'-' if bytes.get(i + 1) == Some(&b) => {
                i += 2;
                if ends_expression(last, last_word) && !broke {
                    kind = b'a';
                }
            }
            b'!' if bytes.get(i + 1) != Some(&b'=')
                && ends_expression(last, last_word)
                && !broke =>
            {
                i += 1;
                kind = b'a';
            }
            _ if is_word(b) => {
                let end = word_end(source, i);
                // After `.`, `?.` or `#` a word is a name, never a keyword.
                if !(last == b'.' && dots == 1 || last == b'#') {
                    word = &bytes[i..end];
                }
                i = end;
                kind = b'a';
            }
            _ => i += 1,
        }
        dots = if kind == b'.' { dots + 1 } else { 0 };
        last_word = word;
        last = kind;
        if counted {
            chain += 1;
        }
        if frames.len() + outer + chain > limit {
            return Err(start);
        }
    }
    Ok(())
}

/// Opens a frame: the chain so far is the enclosing frame's.
fn open(frames: &mut Vec<Open>, outer: &mut usize, chain: &mut usize, angle: bool, head: bool) {
    frames.push(Open {
        angle,
        before: *chain,
        head,
    });
    *outer += *chain;
    *chain = 0;
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Past a word (a name, a keyword, a number): up to the first byte that is
/// not a word's, or a white space or line terminator beyond ASCII.
fn word_end(source: &str, i: usize) -> usize {
    let bytes = source.as_bytes();
    let mut j = i;
    while j < bytes.len() && is_word(bytes[j]) {
        if bytes[j] >= 0x80 && (line_terminator(bytes, j) > 0 || space(source, j) > 0) {
            break;
        }
        j += 1;
    }
    j
}

/// The length of the line terminator at `i` (LF, CR, U+2028, U+2029), or 0.
fn line_terminator(bytes: &[u8], i: usize) -> usize {
    match bytes.get(i..).unwrap_or_default() {
        [b'\n' | b'\r', ..] => 1,
        [0xE2, 0x80, 0xA8 | 0xA9, ..] => 3,
        _ => 0,
    }
}

/// The length of the white space at `i` that is not a line terminator
/// (ECMAScript's WhiteSpace: tab, VT, FF, space, NBSP, BOM, Zs), or 0.
fn space(source: &str, i: usize) -> usize {
    match source.as_bytes()[i] {
        b' ' | b'\t' | 0x0B | 0x0C => 1,
        b if b < 0x80 => 0,
        _ => match source.get(i..).and_then(|s| s.chars().next()) {
            Some(
                c @ ('\u{A0}'
                | '\u{FEFF}'
                | '\u{1680}'
                | '\u{2000}'..='\u{200A}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'),
            ) => c.len_utf8(),
            _ => 0,
        },
    }
}

/// Where the line that `from` is on ends: its line terminator, or the end.
fn line_end(bytes: &[u8], from: usize) -> usize {
    (from..bytes.len())
        .find(|j| line_terminator(bytes, *j) > 0)
        .unwrap_or(bytes.len())
}

/// Whether the keyword `word` expects an expression after it.
fn expects_operand(word: &[u8]) -> bool {
    matches!(
        word,
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
    )
}

/// Whether a token of this kind ends an expression (a statement may end after it).
fn ends_expression(last: u8, last_word: &[u8]) -> bool {
    match last {
        b'a' => !expects_operand(last_word),
        b')' => true,
        _ => false,
    }
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

/// Whether a `/` after a token of this kind starts a regular expression:
/// where it could be a division (after a name, a literal, a postfix
/// operator or a closer) it is one, except after the keywords an
/// expression follows; after the head of an `if`/`for`/`while`/`with`, or
/// an operator, it is a regular expression.
fn regex_allowed(last: u8, last_word: &[u8]) -> bool {
    match last {
        b'a' => expects_operand(last_word),
        b')' => false,
        _ => true,
    }
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|n| from + n)
}

/// Past a `'`/`"` string starting at `i`, or to the line terminator (LF or
/// CR; swc ends it there too) that leaves it unterminated. A backslash
/// escapes the next character, or a whole CR LF.
fn skip_string(bytes: &[u8], i: usize) -> usize {
    let quote = bytes[i];
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' if bytes.get(j + 1..j + 3) == Some(b"\r\n") => j += 3,
            b'\\' => j += 2,
            b'\n' | b'\r' => return j,
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

/// Past a regular expression's body and flags (`i` is after its `/`), or to
/// the line terminator that leaves it unterminated.
fn skip_regex(bytes: &[u8], mut j: usize) -> usize {
    let mut class = false;
    while j < bytes.len() {
        if line_terminator(bytes, j) > 0 {
            return j;
        }
        match bytes[j] {
            b'\\' if line_terminator(bytes, j + 1) > 0 => return j + 1,
            b'\\' => j += 2,
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
    use super::guard;
    use crate::strip::program;

    /// Sources that hid 60,000 nested parentheses from the guard, which lexed
    /// them differently from swc (issue 29: swc then overflowed its stack and
    /// aborted the process). Each is refused by the guard now.
    #[test]
    fn what_swc_lexes_is_what_the_guard_counts() {
        let deep = format!("{}1{}", "(".repeat(60_000), ")".repeat(60_000));
        let hidden = [
            format!("// a line comment ended by a lone CR\r{deep}"),
            format!("// ended by U+2028\u{2028}{deep}"),
            format!("// ended by U+2029\u{2029}{deep}"),
            format!("x = \"a string continued by backslash CR LF\\\r\n\" + {deep}"),
            format!("x++ / {deep} / 1"),
            format!("x-- / {deep} / 1"),
            format!("x! / {deep} / 1"),
            format!("x.return / {deep} / 1"),
            format!("x?.typeof / {deep} / 1"),
            format!("if (a) /\"/.test(b); {deep}"),
            format!("return\u{a0}/\"/; {deep}"),
            format!("x\u{0b}/ {deep} / 1"),
        ];
        for source in &hidden {
            let head: String = source.chars().take(50).collect();
            assert!(guard(source).is_err(), "{head:?}");
            let err = program(source).unwrap_err();
            assert!(err.message.contains("nests more than"), "{head:?}: {err:?}");
        }
        // What the guard now reads as a division or a regular expression, when shallow.
        let fine = [
            "x++ / 2 / 1; y = /[(]/.test(s) ? a! / b : c.return / 2",
            "if (a) /\"/.test(b); else x = 1",
            "s = \"((\\\r\n((\"; t = '((('\r// ((((\u{2028}x = 1",
        ];
        for source in &fine {
            assert_eq!(guard(source), Ok(()), "{source:?}");
            program(source).unwrap();
        }
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
