//! Finding a secret's value in what comes back, in the forms a server (or a
//! redirect) may echo it: as it is; percent-encoded (`%2F`, either case, a
//! byte at a time, mixed with plain bytes); with `+` for a space (forms);
//! JSON-escaped (`\/`, `\"`, `\\`, `\n` and friends, `\uXXXX` in either
//! case, surrogate pairs); and base64 (standard or URL-safe, at each of the
//! three byte alignments a value can sit at inside a longer encoded text,
//! padding or not). Each occurrence becomes the placeholder.
//!
//! Not covered (docs/security.md says so: a secret's hosts are trusted not
//! to reflect it): other encodings (hex, double encoding, a changed case,
//! compression the worker did not undo), and a value split or transformed.
//! The worker asks servers for bodies without content coding and decodes
//! gzip and deflate itself before this runs, so compression is not a way
//! around it.

use base64::Engine;

/// How a value is found: its characters (matched one form at a time), and
/// its base64 cores.
#[derive(Clone)]
pub(crate) struct Forms {
    chars: Vec<char>,
    /// The base64 characters that depend on the value alone, at each
    /// alignment, in both alphabets (at least [`MIN_CORE`] characters).
    cores: Vec<Vec<u8>>,
}

/// The shortest base64 core matched: shorter ones would match unrelated
/// base64 text by chance.
const MIN_CORE: usize = 8;

/// At most this many ways of reading the text are followed at once while
/// one occurrence is matched (each form of a character can be read as a
/// plain one too: `%` or `\` in a value).
const MAX_WAYS: usize = 16;

impl Forms {
    pub(crate) fn of(value: &str) -> Forms {
        let bytes = value.as_bytes();
        let mut cores = Vec::new();
        for align in 0..3usize {
            let mut padded = vec![0u8; align];
            padded.extend_from_slice(bytes);
            let encoded = base64::engine::general_purpose::STANDARD.encode(&padded);
            let start = (8 * align).div_ceil(6);
            let end = (8 * (align + bytes.len())) / 6;
            let Some(core) = encoded.as_bytes().get(start..end) else {
                continue;
            };
            if core.len() < MIN_CORE {
                continue;
            }
            let url_safe: Vec<u8> = core
                .iter()
                .map(|b| match b {
                    b'+' => b'-',
                    b'/' => b'_',
                    other => *other,
                })
                .collect();
            cores.push(core.to_vec());
            if url_safe != core {
                cores.push(url_safe);
            }
        }
        Forms {
            chars: value.chars().collect(),
            cores,
        }
    }

    /// `text` with every occurrence of the value, in any form, replaced by
    /// `placeholder`; `None` when there is none.
    pub(crate) fn replace(&self, text: &[u8], placeholder: &[u8]) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        let mut from = 0;
        let mut at = 0;
        while at < text.len() {
            if self.may_start(text[at])
                && let Some(end) = self.match_at(text, at)
            {
                let out = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
                out.extend_from_slice(&text[from..at]);
                out.extend_from_slice(placeholder);
                at = end;
                from = end;
                continue;
            }
            at += 1;
        }
        let replaced = match out {
            Some(mut out) => {
                out.extend_from_slice(&text[from..]);
                Some(out)
            }
            None => None,
        };
        let mut current = replaced;
        for core in &self.cores {
            let source = current.as_deref().unwrap_or(text);
            if let Some(again) = replace_exact(source, core, placeholder) {
                current = Some(again);
            }
        }
        current
    }

    /// Whether an occurrence could start with `byte`.
    fn may_start(&self, byte: u8) -> bool {
        let Some(first) = self.chars.first() else {
            return false;
        };
        let mut utf8 = [0u8; 4];
        byte == first.encode_utf8(&mut utf8).as_bytes()[0]
            || byte == b'%'
            || byte == b'\\'
            || (byte == b'+' && *first == ' ')
    }

    /// Where an occurrence starting at `at` ends, if one does.
    fn match_at(&self, text: &[u8], at: usize) -> Option<usize> {
        let mut ways = vec![at];
        for &c in &self.chars {
            let mut next = Vec::new();
            for &pos in &ways {
                for end in char_forms(text, pos, c) {
                    if !next.contains(&end) && next.len() < MAX_WAYS {
                        next.push(end);
                    }
                }
            }
            if next.is_empty() {
                return None;
            }
            ways = next;
        }
        ways.into_iter().min()
    }
}

/// Where each form of `c` that `text` has at `pos` ends.
fn char_forms(text: &[u8], pos: usize, c: char) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut utf8 = [0u8; 4];
    let bytes = c.encode_utf8(&mut utf8).as_bytes();
    // Plain or percent-encoded, byte by byte.
    let mut at = pos;
    let mut ok = true;
    for &b in bytes {
        match text.get(at) {
            Some(&t) if t == b => at += 1,
            Some(b'%') if percent_byte(text, at) == Some(b) => at += 3,
            _ => {
                ok = false;
                break;
            }
        }
    }
    if ok {
        ends.push(at);
    }
    if c == ' ' && text.get(pos) == Some(&b'+') {
        ends.push(pos + 1);
    }
    if text.get(pos) == Some(&b'\\')
        && let Some(end) = json_escape(text, pos, c)
    {
        ends.push(end);
    }
    ends
}

/// The byte `%XX` at `at` spells (either case of hex).
fn percent_byte(text: &[u8], at: usize) -> Option<u8> {
    let hex = |i: usize| text.get(i).and_then(|b| (*b as char).to_digit(16));
    Some(((hex(at + 1)? << 4) | hex(at + 2)?) as u8)
}

/// Where a JSON escape of `c` starting at `pos` (a `\`) ends.
fn json_escape(text: &[u8], pos: usize, c: char) -> Option<usize> {
    let short = match c {
        '"' => Some(b'"'),
        '\\' => Some(b'\\'),
        '/' => Some(b'/'),
        '\n' => Some(b'n'),
        '\r' => Some(b'r'),
        '\t' => Some(b't'),
        '\u{8}' => Some(b'b'),
        '\u{c}' => Some(b'f'),
        _ => None,
    };
    if short.is_some() && text.get(pos + 1).copied() == short {
        return Some(pos + 2);
    }
    let mut units = [0u16; 2];
    let units = c.encode_utf16(&mut units);
    let mut at = pos;
    for unit in units.iter() {
        if text.get(at) != Some(&b'\\') || !matches!(text.get(at + 1), Some(b'u' | b'U')) {
            return None;
        }
        let digits = text.get(at + 2..at + 6)?;
        let spelled = std::str::from_utf8(digits).ok()?;
        if u16::from_str_radix(spelled, 16).ok()? != *unit {
            return None;
        }
        at += 6;
    }
    Some(at)
}

/// `text` with every `needle` replaced by `with`; `None` when there is none.
fn replace_exact(text: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    if needle.is_empty() || text.len() < needle.len() {
        return None;
    }
    let mut out: Option<Vec<u8>> = None;
    let (mut from, mut at) = (0, 0);
    while at + needle.len() <= text.len() {
        if text[at] == needle[0] && &text[at..at + needle.len()] == needle {
            let out = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
            out.extend_from_slice(&text[from..at]);
            out.extend_from_slice(with);
            at += needle.len();
            from = at;
        } else {
            at += 1;
        }
    }
    out.map(|mut out| {
        out.extend_from_slice(&text[from..]);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    const VALUE: &str = "s3cr/t+v@l=ué 1";

    fn scrubbed(text: &str) -> String {
        let forms = Forms::of(VALUE);
        let out = forms
            .replace(text.as_bytes(), b"PH")
            .unwrap_or_else(|| text.as_bytes().to_vec());
        String::from_utf8(out).unwrap()
    }

    /// Each form a server may echo the value in is found and replaced.
    #[test]
    fn every_common_form_is_found() {
        let json = serde_json::to_string(VALUE).unwrap();
        let json_ascii = "\"s3cr\\/t+v@l=u\\u00E9 1\"";
        let b64 = |engine: &base64::engine::GeneralPurpose, prefix: &[u8]| {
            let mut bytes = prefix.to_vec();
            bytes.extend_from_slice(VALUE.as_bytes());
            bytes.extend_from_slice(b"!!");
            engine.encode(bytes)
        };
        for text in [
            format!("x {VALUE} y"),
            "x s3cr%2Ft%2Bv%40l%3Du%C3%A9%201 y".to_string(),
            "x s3cr%2ft%2bv%40l%3du%c3%a9%201 y".to_string(),
            "x s3cr%2ft+v%40l=u%C3%a9+1 y".replace("t+v", "t%2Bv"),
            format!("x {json} y"),
            format!("x {json_ascii} y"),
            "x s3cr\\/t+v@l=u\\u00e9 1 y".to_string(),
        ] {
            let out = scrubbed(&text);
            assert!(out.contains("PH"), "{text} -> {out}");
            assert!(!out.contains("s3cr"), "{text} -> {out}");
        }
        for prefix in [&b""[..], b"a", b"ab", b"abc"] {
            for engine in [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ] {
                let text = b64(engine, prefix);
                let out = scrubbed(&text);
                assert!(out.contains("PH"), "{prefix:?}: {text} -> {out}");
            }
        }
        // Unrelated text is left alone, byte for byte.
        let plain = "s3cr is not the secret, nor is %2F or \\u0041";
        assert_eq!(Forms::of(VALUE).replace(plain.as_bytes(), b"PH"), None);
    }

    /// A text full of near misses stays linear enough: every start is
    /// refused within the value's length.
    #[test]
    fn near_misses_are_refused() {
        let forms = Forms::of("aaaaaaaaab");
        let text = "a".repeat(100_000);
        assert_eq!(forms.replace(text.as_bytes(), b"PH"), None);
        let text = "%61".repeat(30_000);
        assert_eq!(forms.replace(text.as_bytes(), b"PH"), None);
    }
}
