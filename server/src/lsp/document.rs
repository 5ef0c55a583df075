//! Open documents: a rope per document, kept in sync with incremental `didChange` events.

use ropey::Rope;
use tower_lsp_server::gen_lsp_types::{Position, TextDocumentContentChangeEvent};

use super::encoding::{self, Encoding};

#[derive(Debug, Clone)]
pub struct Document {
    pub rope: Rope,
    pub version: i32,
    pub language_id: String,
}

/// What the engine needs from a document at one cursor: a window of text and the cursor's
/// byte offset in it. Building it costs the window's size, not the document's.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub text: String,
    pub cursor: usize,
    pub version: i32,
    /// Char index of the cursor in the document.
    pub cursor_char: usize,
}

impl Document {
    pub fn new(text: &str, version: i32, language_id: String) -> Self {
        Document { rope: Rope::from_str(text), version, language_id }
    }

    /// Applies one content change (a range edit, or the whole text).
    pub fn apply(&mut self, change: &TextDocumentContentChangeEvent, enc: Encoding) {
        match change {
            TextDocumentContentChangeEvent::TextDocumentContentChangePartial(c) => {
                let start = encoding::to_char_clamped(&self.rope, c.range.start, enc);
                let end = encoding::to_char_clamped(&self.rope, c.range.end, enc).max(start);
                self.rope.remove(start..end);
                self.rope.insert(start, &c.text);
            }
            TextDocumentContentChangeEvent::TextDocumentContentChangeWholeDocument(c) => {
                self.rope = Rope::from_str(&c.text);
            }
        }
    }

    /// The text from `before` lines above the cursor's line to `after` lines below it.
    pub fn snapshot(&self, pos: Position, enc: Encoding, before: usize, after: usize) -> Result<Snapshot, encoding::OutOfRange> {
        let cursor_char = encoding::to_char(&self.rope, pos, enc)?;
        let line = self.rope.char_to_line(cursor_char);
        let first = line.saturating_sub(before);
        let last = (line + after + 1).min(self.rope.len_lines());
        let start = self.rope.line_to_char(first);
        let end = self.rope.line_to_char(last);
        let text = self.rope.slice(start..end).to_string();
        let cursor = self.rope.char_to_byte(cursor_char) - self.rope.char_to_byte(start);
        Ok(Snapshot { text, cursor, version: self.version, cursor_char })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_lsp_server::gen_lsp_types::{Range, TextDocumentContentChangePartial, TextDocumentContentChangeWholeDocument};

    #[allow(deprecated)]
    fn edit(l0: u32, c0: u32, l1: u32, c1: u32, text: &str) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangePartial {
            range: Range { start: Position { line: l0, character: c0 }, end: Position { line: l1, character: c1 } },
            range_length: None,
            text: text.into(),
        }
        .into()
    }

    #[test]
    fn incremental_edits_in_utf16() {
        let mut d = Document::new("héllo 🦀\nworld\r\n", 1, "python".into());
        d.apply(&edit(0, 8, 0, 8, "!"), Encoding::Utf16); // after the crab (2 units)
        assert_eq!(d.rope.to_string(), "héllo 🦀!\nworld\r\n");
        d.apply(&edit(0, 5, 1, 2, ""), Encoding::Utf16); // across lines
        assert_eq!(d.rope.to_string(), "héllorld\r\n");
        d.apply(&edit(1, 0, 1, 0, "x"), Encoding::Utf16);
        assert_eq!(d.rope.to_string(), "héllorld\r\nx");
        d.apply(&TextDocumentContentChangeWholeDocument { text: "new".into() }.into(), Encoding::Utf16);
        assert_eq!(d.rope.to_string(), "new");
    }

    #[test]
    fn snapshot_is_a_window_with_a_byte_cursor() {
        let d = Document::new("a\nb\nc🦀d\ne\nf\n", 1, "python".into());
        let s = d.snapshot(Position { line: 2, character: 3 }, Encoding::Utf16, 1, 1).unwrap();
        assert_eq!(s.text, "b\nc🦀d\ne\n");
        assert_eq!(&s.text[..s.cursor], "b\nc🦀");
        assert!(d.snapshot(Position { line: 9, character: 0 }, Encoding::Utf16, 1, 1).is_err());
    }
}
