//! Position encoding: the one place where LSP positions become rope offsets and back.
//!
//! UTF-16 code units by default (every client supports it); UTF-8 when the client offers it.
//! Lines end at `\n`, `\r\n` or `\r`, as LSP counts them (ropey is built with `cr_lines`).

use ropey::Rope;
use tower_lsp_server::gen_lsp_types::{Position, PositionEncodingKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    Utf8,
    #[default]
    Utf16,
}

impl Encoding {
    /// Picks UTF-8 when the client lists it, UTF-16 otherwise.
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> Encoding {
        match offered {
            Some(kinds) if kinds.contains(&PositionEncodingKind::UTF8) => Encoding::Utf8,
            _ => Encoding::Utf16,
        }
    }

    pub fn kind(self) -> PositionEncodingKind {
        match self {
            Encoding::Utf8 => PositionEncodingKind::UTF8,
            Encoding::Utf16 => PositionEncodingKind::UTF16,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange {
    pub line: u32,
    pub lines: usize,
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {} is out of range: the document has {} lines", self.line, self.lines)
    }
}

/// Char index of the end of `line`'s content (before its line break).
fn line_content_end(rope: &Rope, line: usize) -> usize {
    let start = rope.line_to_char(line);
    let slice = rope.line(line);
    let mut len = slice.len_chars();
    while len > 0 && matches!(slice.char(len - 1), '\n' | '\r') {
        len -= 1;
    }
    start + len
}

/// LSP position → char index. A character past the end of its line means the end of the line
/// (as the specification says); a line past the end of the document is an error.
pub fn to_char(rope: &Rope, pos: Position, enc: Encoding) -> Result<usize, OutOfRange> {
    let line = pos.line as usize;
    if line >= rope.len_lines() {
        return Err(OutOfRange { line: pos.line, lines: rope.len_lines() });
    }
    let start = rope.line_to_char(line);
    let end = line_content_end(rope, line);
    let col = pos.character as usize;
    Ok(match enc {
        Encoding::Utf16 => {
            let base = rope.char_to_utf16_cu(start);
            let limit = rope.char_to_utf16_cu(end);
            rope.utf16_cu_to_char((base + col).min(limit))
        }
        Encoding::Utf8 => {
            let base = rope.char_to_byte(start);
            let limit = rope.char_to_byte(end);
            rope.byte_to_char((base + col).min(limit))
        }
    })
}

/// Like [`to_char`], but a line past the end means the end of the document (for edits).
pub fn to_char_clamped(rope: &Rope, pos: Position, enc: Encoding) -> usize {
    to_char(rope, pos, enc).unwrap_or_else(|_| rope.len_chars())
}

/// Char index → LSP position.
pub fn from_char(rope: &Rope, char_idx: usize, enc: Encoding) -> Position {
    let char_idx = char_idx.min(rope.len_chars());
    let line = rope.char_to_line(char_idx);
    let start = rope.line_to_char(line);
    let character = match enc {
        Encoding::Utf16 => rope.char_to_utf16_cu(char_idx) - rope.char_to_utf16_cu(start),
        Encoding::Utf8 => rope.char_to_byte(char_idx) - rope.char_to_byte(start),
    };
    Position { line: line as u32, character: character as u32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: u32, character: u32) -> Position {
        Position { line, character }
    }

    #[test]
    fn utf16_counts_surrogate_pairs_as_two() {
        let rope = Rope::from_str("a🦀b\né\n");
        // 🦀 is 2 UTF-16 units, 4 UTF-8 bytes, 1 char
        assert_eq!(to_char(&rope, pos(0, 3), Encoding::Utf16), Ok(2));
        assert_eq!(to_char(&rope, pos(0, 5), Encoding::Utf8), Ok(2));
        assert_eq!(from_char(&rope, 2, Encoding::Utf16), pos(0, 3));
        assert_eq!(from_char(&rope, 2, Encoding::Utf8), pos(0, 5));
        assert_eq!(to_char(&rope, pos(1, 1), Encoding::Utf16), Ok(5));
        assert_eq!(from_char(&rope, 5, Encoding::Utf8), pos(1, 2));
    }

    #[test]
    fn past_line_end_clamps_and_past_document_end_errors() {
        let rope = Rope::from_str("ab\r\ncd");
        assert_eq!(to_char(&rope, pos(0, 99), Encoding::Utf16), Ok(2));
        assert_eq!(to_char(&rope, pos(1, 99), Encoding::Utf8), Ok(6));
        assert!(to_char(&rope, pos(2, 0), Encoding::Utf16).is_err());
        assert_eq!(to_char_clamped(&rope, pos(9, 0), Encoding::Utf16), 6);
    }

    #[test]
    fn lone_cr_is_a_line_break_and_unicode_separators_are_not() {
        let rope = Rope::from_str("a\rb\u{2028}c\nd");
        assert_eq!(rope.len_lines(), 3);
        assert_eq!(to_char(&rope, pos(1, 3), Encoding::Utf16), Ok(5));
        assert_eq!(to_char(&rope, pos(2, 0), Encoding::Utf16), Ok(6));
    }

    #[test]
    fn negotiation_prefers_utf8_only_when_offered() {
        assert_eq!(Encoding::negotiate(None), Encoding::Utf16);
        assert_eq!(Encoding::negotiate(Some(&[PositionEncodingKind::UTF16])), Encoding::Utf16);
        assert_eq!(
            Encoding::negotiate(Some(&[PositionEncodingKind::UTF16, PositionEncodingKind::UTF8])),
            Encoding::Utf8
        );
    }
}
