//! Open documents: a rope per document, kept in sync with incremental `didChange` events.

use ropey::Rope;
use tower_lsp_server::gen_lsp_types::{Position, TextDocumentContentChangeEvent};
use tree_sitter::{InputEdit, Parser, Point, Tree};

use super::encoding::{self, Encoding};
use crate::stats::track::Edit;
use crate::syntax::{self, Spec};

/// Documents larger than this get no syntax tree (the window strategy still works).
pub const MAX_SYNTAX_BYTES: usize = 2 << 20;
/// An edit inserting more than this is not typing (see [`Document::typed_cursor`]).
pub const MAX_TYPED_BYTES: usize = 4096;

pub struct Document {
    pub rope: Rope,
    pub version: i32,
    pub language_id: String,
    syntax: Option<Syntax>,
}

/// A parser and the tree it keeps in step with the rope, edit by edit.
struct Syntax {
    spec: &'static Spec,
    parser: Parser,
    tree: Tree,
}

/// A document's whole text and its tree, as the workspace index takes it when the document is
/// saved, closed or left.
pub struct Touched {
    pub text: String,
    pub syntax: Option<(&'static Spec, Tree)>,
}

/// What the engine needs from a document at one cursor: its text (the whole document when it
/// has a tree, else a window of lines), the cursor's byte offset in it, and the tree.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub text: String,
    pub cursor: usize,
    pub version: i32,
    /// Char index of the cursor in the document.
    pub cursor_char: usize,
    pub syntax: Option<(&'static Spec, Tree)>,
}

impl Document {
    pub fn new(text: &str, version: i32, language_id: String) -> Self {
        let mut doc = Document { rope: Rope::from_str(text), version, language_id, syntax: None };
        doc.reparse_from_scratch();
        doc
    }

    fn reparse_from_scratch(&mut self) {
        self.syntax = None;
        if self.rope.len_bytes() > MAX_SYNTAX_BYTES {
            return;
        }
        if let Some(spec) = syntax::by_language_id(&self.language_id) {
            let mut parser = spec.parser();
            if let Some(tree) = parse_rope(&mut parser, &self.rope, None) {
                self.syntax = Some(Syntax { spec, parser, tree });
            }
        }
    }

    /// Applies content changes (range edits, or the whole text) and reparses incrementally.
    /// Returns them as character edits (a whole text as the span that differs), for the
    /// statistics' accepted regions.
    pub fn apply_all<'a>(&mut self, changes: &'a [TextDocumentContentChangeEvent], enc: Encoding) -> Vec<Edit<'a>> {
        let edits = changes.iter().map(|change| self.apply(change, enc)).collect();
        let too_big = self.rope.len_bytes() > MAX_SYNTAX_BYTES;
        match &mut self.syntax {
            Some(s) if !too_big => match parse_rope(&mut s.parser, &self.rope, Some(&s.tree)) {
                Some(tree) => s.tree = tree,
                None => self.syntax = None,
            },
            Some(_) => self.syntax = None,
            None if !too_big => self.reparse_from_scratch(),
            None => {}
        }
        edits
    }

    /// Applies one content change; the tree (if any) is edited to match but not yet reparsed.
    fn apply<'a>(&mut self, change: &'a TextDocumentContentChangeEvent, enc: Encoding) -> Edit<'a> {
        match change {
            TextDocumentContentChangeEvent::TextDocumentContentChangePartial(c) => {
                let start = encoding::to_char_clamped(&self.rope, c.range.start, enc);
                let end = encoding::to_char_clamped(&self.rope, c.range.end, enc).max(start);
                let (start_byte, old_end_byte) = (self.rope.char_to_byte(start), self.rope.char_to_byte(end));
                let (start_position, old_end_position) = (point(&self.rope, start_byte), point(&self.rope, old_end_byte));
                self.rope.remove(start..end);
                self.rope.insert(start, &c.text);
                if let Some(s) = &mut self.syntax {
                    let new_end_byte = start_byte + c.text.len();
                    s.tree.edit(&InputEdit {
                        start_byte,
                        old_end_byte,
                        new_end_byte,
                        start_position,
                        old_end_position,
                        new_end_position: point(&self.rope, new_end_byte),
                    });
                }
                Edit { start, end, text: &c.text }
            }
            TextDocumentContentChangeEvent::TextDocumentContentChangeWholeDocument(c) => {
                let edit = differing_span(&self.rope, &c.text);
                self.rope = Rope::from_str(&c.text);
                self.syntax = None; // a fresh parse follows in `apply_all`
                edit
            }
        }
    }

    /// Where the cursor will be after `changes` if they look like typing: one range edit that
    /// inserts up to [`MAX_TYPED_BYTES`] (a key, an auto-indented line break, an accepted
    /// suggestion, a paste) or deletes (Backspace); inside an auto-closed pair (`()`, `""`) when
    /// that is what was inserted. A char index into the text after the change; `None` for other
    /// changes (the whole text, several edits at once), which say nothing of a cursor. Call
    /// before applying them.
    pub fn typed_cursor(&self, changes: &[TextDocumentContentChangeEvent], enc: Encoding) -> Option<usize> {
        let [TextDocumentContentChangeEvent::TextDocumentContentChangePartial(c)] = changes else { return None };
        if c.text.len() > MAX_TYPED_BYTES {
            return None;
        }
        let start = encoding::to_char_clamped(&self.rope, c.range.start, enc);
        let pair = matches!(c.text.as_str(), "()" | "[]" | "{}" | "\"\"" | "''" | "``");
        Some(start + if pair { 1 } else { c.text.chars().count() })
    }

    /// The text for the engine at `pos`: the whole document with its tree when it has one, else
    /// the lines from `before` above the cursor's line to `after` below it.
    pub fn snapshot(&self, pos: Position, enc: Encoding, before: usize, after: usize) -> Result<Snapshot, encoding::OutOfRange> {
        let cursor_char = encoding::to_char(&self.rope, pos, enc)?;
        let (start, end) = if self.syntax.is_some() {
            (0, self.rope.len_chars())
        } else {
            let line = self.rope.char_to_line(cursor_char);
            // From a multiple of LINE_STEP, as the window strategy cuts (see there).
            let first = line.saturating_sub(before) / crate::context::LINE_STEP * crate::context::LINE_STEP;
            let last = (line + after + 1).min(self.rope.len_lines());
            (self.rope.line_to_char(first), self.rope.line_to_char(last))
        };
        let text = self.rope.slice(start..end).to_string();
        let cursor = self.rope.char_to_byte(cursor_char) - self.rope.char_to_byte(start);
        let syntax = self.syntax.as_ref().map(|s| (s.spec, s.tree.clone()));
        Ok(Snapshot { text, cursor, version: self.version, cursor_char, syntax })
    }

    /// The current tree, if the document's language has a grammar.
    pub fn tree(&self) -> Option<&Tree> {
        self.syntax.as_ref().map(|s| &s.tree)
    }

    /// The document's text with its language and tree (cheap: the tree is shared), for work
    /// that outlives the state's lock.
    pub fn contents(&self) -> Touched {
        Touched { text: self.rope.to_string(), syntax: self.syntax.as_ref().map(|s| (s.spec, s.tree.clone())) }
    }
}

/// A whole new text as one edit of the old: the span between their common start and end.
fn differing_span<'a>(old: &Rope, new: &'a str) -> Edit<'a> {
    let (mut start, mut start_byte) = (0, 0);
    for ((i, a), b) in new.char_indices().zip(old.chars()) {
        if a != b {
            break;
        }
        (start, start_byte) = (start + 1, i + a.len_utf8());
    }
    let room = (old.len_chars() - start).min(new[start_byte..].chars().count());
    let (mut suffix_chars, mut suffix_bytes) = (0, 0);
    for (a, b) in new[start_byte..].chars().rev().zip(old.chars_at(old.len_chars()).reversed()).take(room) {
        if a != b {
            break;
        }
        (suffix_chars, suffix_bytes) = (suffix_chars + 1, suffix_bytes + a.len_utf8());
    }
    Edit { start, end: old.len_chars() - suffix_chars, text: &new[start_byte..new.len() - suffix_bytes] }
}

/// Tree-sitter's point for a byte offset: rows count `\n`, columns count bytes.
fn point(rope: &Rope, byte: usize) -> Point {
    let line = rope.byte_to_line(byte);
    Point { row: line, column: byte - rope.line_to_byte(line) }
}

/// Parses the rope chunk by chunk, reusing `old` (already edited) when given.
fn parse_rope(parser: &mut Parser, rope: &Rope, old: Option<&Tree>) -> Option<Tree> {
    let len = rope.len_bytes();
    let mut read = |byte: usize, _: Point| -> &[u8] {
        if byte >= len {
            return &[];
        }
        let (chunk, chunk_start, _, _) = rope.chunk_at_byte(byte);
        &chunk.as_bytes()[byte - chunk_start..]
    };
    parser.parse_with_options(&mut read, old, None)
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

    fn assert_tree_matches(d: &Document) {
        let text = d.rope.to_string();
        let fresh = syntax::by_language_id("python").unwrap().parse(&text);
        assert_eq!(d.tree().unwrap().root_node().to_sexp(), fresh.root_node().to_sexp(), "{text:?}");
    }

    #[test]
    fn incremental_edits_in_utf16_keep_the_tree_in_step() {
        let mut d = Document::new("héllo 🦀\nworld\r\n", 1, "python".into());
        d.apply_all(&[edit(0, 8, 0, 8, "!")], Encoding::Utf16); // after the crab (2 units)
        assert_eq!(d.rope.to_string(), "héllo 🦀!\nworld\r\n");
        assert_tree_matches(&d);
        d.apply_all(&[edit(0, 5, 1, 2, "")], Encoding::Utf16); // across lines
        assert_eq!(d.rope.to_string(), "héllorld\r\n");
        assert_tree_matches(&d);
        d.apply_all(&[edit(1, 0, 1, 0, "def f(x):\n    return 'é'\n"), edit(0, 0, 0, 1, "")], Encoding::Utf16);
        assert_eq!(d.rope.to_string(), "éllorld\r\ndef f(x):\n    return 'é'\n");
        assert_tree_matches(&d);
        let whole: [TextDocumentContentChangeEvent; 1] = [TextDocumentContentChangeWholeDocument { text: "class A:\n    pass\n".into() }.into()];
        d.apply_all(&whole, Encoding::Utf16);
        assert_eq!(d.rope.to_string(), "class A:\n    pass\n");
        assert_tree_matches(&d);
        // Edits come back in characters; a whole text as the span that differs.
        let whole: [TextDocumentContentChangeEvent; 1] = [TextDocumentContentChangeWholeDocument { text: "class Bé:\n    pass\n".into() }.into()];
        assert_eq!(d.apply_all(&whole, Encoding::Utf16), vec![Edit { start: 6, end: 7, text: "Bé" }]);
        let whole: [TextDocumentContentChangeEvent; 1] = [TextDocumentContentChangeWholeDocument { text: "class Bé:\n    pass\n".into() }.into()];
        assert_eq!(d.apply_all(&whole, Encoding::Utf16), vec![Edit { start: 19, end: 19, text: "" }]);
        assert_eq!(d.apply_all(&[edit(1, 4, 1, 8, "x")], Encoding::Utf16), vec![Edit { start: 14, end: 18, text: "x" }]);
    }

    /// The cursor after typing-like edits, as a char index of the text after them.
    #[test]
    fn typed_cursor_follows_keys_backspace_and_auto_closed_pairs() {
        let mut d = Document::new("ab🦀\ncd\n", 1, "python".into());
        let after = |d: &mut Document, change: TextDocumentContentChangeEvent| {
            let at = d.typed_cursor(std::slice::from_ref(&change), Encoding::Utf16);
            d.apply_all(&[change], Encoding::Utf16);
            at.map(|c| (d.rope.slice(..c).to_string(), d.rope.slice(c..).to_string()))
        };
        let split = |a: &str, b: &str| Some((a.to_owned(), b.to_owned()));
        assert_eq!(after(&mut d, edit(0, 4, 0, 4, "x")), split("ab🦀x", "\ncd\n")); // after a surrogate pair
        assert_eq!(after(&mut d, edit(0, 5, 0, 5, "\n    ")), split("ab🦀x\n    ", "\ncd\n")); // auto-indent
        assert_eq!(after(&mut d, edit(1, 4, 1, 4, "()")), split("ab🦀x\n    (", ")\ncd\n")); // inside the pair
        assert_eq!(after(&mut d, edit(1, 4, 1, 5, "")), split("ab🦀x\n    ", ")\ncd\n")); // Backspace
        assert_eq!(after(&mut d, edit(1, 0, 2, 1, "")), split("ab🦀x\n", "d\n")); // a deleted selection
        // Several edits at once, the whole text, a huge paste: no cursor to guess.
        assert_eq!(d.typed_cursor(&[edit(0, 0, 0, 0, "a"), edit(1, 0, 1, 0, "b")], Encoding::Utf16), None);
        assert_eq!(d.typed_cursor(&[TextDocumentContentChangeWholeDocument { text: "x".into() }.into()], Encoding::Utf16), None);
        assert_eq!(d.typed_cursor(&[edit(0, 0, 0, 0, &"x".repeat(MAX_TYPED_BYTES + 1))], Encoding::Utf16), None);
    }

    #[test]
    fn snapshot_is_the_whole_text_with_a_tree_or_a_window_without() {
        let d = Document::new("a\nb\nc🦀d\ne\nf\n", 1, "python".into());
        let s = d.snapshot(Position { line: 2, character: 3 }, Encoding::Utf16, 1, 1).unwrap();
        assert_eq!(&s.text[..s.cursor], "a\nb\nc🦀");
        assert!(s.syntax.is_some());
        let d = Document::new("a\nb\nc🦀d\ne\nf\n", 1, "plaintext".into());
        let s = d.snapshot(Position { line: 2, character: 3 }, Encoding::Utf16, 1, 1).unwrap();
        assert_eq!(s.text, "a\nb\nc🦀d\ne\n"); // from line 0: a multiple of LINE_STEP
        assert_eq!(&s.text[..s.cursor], "a\nb\nc🦀");
        assert!(s.syntax.is_none());
        assert!(d.snapshot(Position { line: 9, character: 0 }, Encoding::Utf16, 1, 1).is_err());
    }
}
