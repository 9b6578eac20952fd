//! What a tool list shows of text someone else wrote: a published
//! function's description and the strings of its formats.
//!
//! An agent reads a tool list as instructions, and a terminal or a log
//! viewer shows it. So text that is not plainly visible goes: terminal
//! escape sequences (CSI and OSC, whole), control characters but line feed
//! and tab, format characters (bidi embeddings, overrides and isolates,
//! zero-width characters, tag characters), line and paragraph separators,
//! private-use and unassigned code points, and variation selectors (each can
//! carry hidden text). What is left is cut to a length, at a character.

use crate::bus::catalog::visible;
use serde_json::Value;

/// Longest description of a guest-published tool, in characters: room to
/// say what a function does, not a prompt.
pub const MAX_GUEST_DESCRIPTION_CHARS: usize = 1024;

/// What starts the description of a tool guest code published.
pub const GUEST_MARK: &str = "[guest-published, untrusted] ";

/// Deepest a format's strings are cleaned (a published format is bounded
/// in size already; deeper parts are dropped).
const MAX_DEPTH: usize = 64;

/// `text` without what is not plainly visible, at most `max_chars`
/// characters (a cut one ends with `…`).
pub fn clean(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(4)));
    let mut kept = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // ESC [ … final, ESC ] … BEL or ESC \, ESC and one more.
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']') => skip_osc(&mut chars),
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' => skip_osc(&mut chars),
            c if !visible(c) => {}
            c => {
                if kept == max_chars {
                    // A cut ends `word…`, not `word …`.
                    if out.ends_with(char::is_whitespace) {
                        out.pop();
                    }
                    out.push('…');
                    break;
                }
                out.push(c);
                kept += 1;
            }
        }
    }
    out
}

/// `value` with every string and key [`clean`]ed (no length cut), to
/// [`MAX_DEPTH`].
pub fn clean_value(value: &Value, depth: usize) -> Value {
    match value {
        Value::String(text) => Value::String(clean(text, usize::MAX)),
        Value::Array(items) if depth < MAX_DEPTH => items
            .iter()
            .map(|item| clean_value(item, depth + 1))
            .collect(),
        Value::Object(map) if depth < MAX_DEPTH => Value::Object(
            map.iter()
                .map(|(key, item)| (clean(key, usize::MAX), clean_value(item, depth + 1)))
                .collect(),
        ),
        Value::Array(_) | Value::Object(_) => Value::Null,
        other => other.clone(),
    }
}

/// Skips a CSI sequence's parameters up to its final byte (`@` to `~`).
fn skip_csi(chars: &mut impl Iterator<Item = char>) {
    for c in chars.by_ref() {
        if ('@'..='~').contains(&c) {
            return;
        }
    }
}

/// Skips an OSC string up to BEL or ST (`ESC \` or U+009C).
fn skip_osc(chars: &mut std::iter::Peekable<impl Iterator<Item = char>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// NUL, ANSI colour and title sequences, bidi overrides and isolates,
    /// zero-width and tag characters go; letters, line feeds, tabs and
    /// emoji stay.
    #[test]
    fn invisible_text_is_dropped() {
        let hostile = "a\0b\u{1b}[31;1mred\u{1b}[0m\u{1b}]0;title\u{7}c\u{202e}d\u{2066}e\u{2069}\
                       \u{200b}f\u{e0041}\u{e0042}g\u{fe0f}\r\nh\ti\u{2028}j 😀";
        assert_eq!(clean(hostile, usize::MAX), "abredcdefg\nh\tij 😀");
        assert_eq!(clean("\u{1b}]8;;http://x\u{1b}\\link", 100), "link");
        assert_eq!(clean("\u{1b}[", 100), "");
    }

    /// A long text is cut at a character, with a mark.
    #[test]
    fn long_text_is_cut_at_a_character() {
        assert_eq!(clean("héllo wörld", 6), "héllo…");
        assert_eq!(clean("abc", 3), "abc");
        assert_eq!(clean(&"ü".repeat(5000), 10).chars().count(), 11);
    }

    /// Every string and key of a format is cleaned; too deep a part goes.
    #[test]
    fn format_strings_are_cleaned() {
        let format = json!({"type": "object", "properties": {"x\u{202e}": {"description": "\u{1b}[2Jsay\0"}}});
        assert_eq!(
            clean_value(&format, 0),
            json!({"type": "object", "properties": {"x": {"description": "say"}}})
        );
        let mut deep = json!("leaf");
        for _ in 0..100 {
            deep = json!([deep]);
        }
        let cleaned = clean_value(&deep, 0).to_string();
        assert!(cleaned.contains("null") && !cleaned.contains("leaf"));
    }
}
