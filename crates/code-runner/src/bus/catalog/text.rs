//! Which characters of text someone else published (a description, a
//! format's strings) are plainly visible: what a tool list keeps
//! (`edge::mcp`'s clean) and what `describe` writes as it is rather than as
//! an escape.

use unicode_general_category::{GeneralCategory, get_general_category};

/// Whether `c` shows as itself: not a control character (but line feed and
/// tab), a format character (bidi embeddings, overrides and isolates,
/// zero-width characters, tag characters), a line or paragraph separator, a
/// private-use, surrogate or unassigned code point, a variation selector or
/// a filler (each can carry hidden text or reorder what is shown).
pub fn visible(c: char) -> bool {
    if c == '\n' || c == '\t' {
        return true;
    }
    let selector = matches!(c, '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}');
    let filler = matches!(c, '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}');
    !selector
        && !filler
        && !matches!(
            get_general_category(c),
            GeneralCategory::Control
                | GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
                | GeneralCategory::PrivateUse
                | GeneralCategory::Surrogate
                | GeneralCategory::Unassigned
        )
}
