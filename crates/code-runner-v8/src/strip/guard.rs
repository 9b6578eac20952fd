//! The nesting guard: one pass over a TypeScript source that never
//! recurses, so swc is never handed nesting that would overflow its stack.

use super::MAX_NESTING;

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
    use super::guard;
    use crate::strip::program;

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
