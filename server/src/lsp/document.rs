//! Open documents: a rope per document, kept in sync with incremental `didChange` events, and
//! its tree. Python is parsed with long comment runs read as spaces (`syntax::comment_runs`),
//! which keeps the parse linear; an edit is widened over the comment and blank lines around
//! it, whose blanking it may change, so the incremental parse stays that of the text read.

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
    /// Python: long comment runs are parsed as spaces.
    blank: bool,
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
            let blank = spec.name == "python";
            if let Some(tree) = parse_rope(&mut parser, &self.rope, None, blank) {
                self.syntax = Some(Syntax { spec, parser, tree, blank });
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
            Some(s) if !too_big => match parse_rope(&mut s.parser, &self.rope, Some(&s.tree), s.blank) {
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
                // The span the parser reads differently: the edit, or its widening.
                let (from, to) = match &self.syntax {
                    Some(s) if s.blank => widened(&self.rope, start_byte, old_end_byte),
                    _ => (start_byte, old_end_byte),
                };
                let (start_position, old_end_position) = (point(&self.rope, from), point(&self.rope, to));
                self.rope.remove(start..end);
                self.rope.insert(start, &c.text);
                if let Some(s) = &mut self.syntax {
                    let new_end_byte = start_byte + c.text.len() + (to - old_end_byte);
                    s.tree.edit(&InputEdit {
                        start_byte: from,
                        old_end_byte: to,
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

/// The bytes `[start, end)` of `rope` (an edit's, before it) widened to whole lines and over the
/// blank and comment lines around them: a comment run there can grow past
/// `syntax::COMMENT_RUN` or split by the edit, and so change which lines are read as spaces.
/// Lines outside are read as before (a run ends at a line of code).
fn widened(rope: &Rope, start: usize, end: usize) -> (usize, usize) {
    let in_run = |line: usize| syntax::line_kind(&std::borrow::Cow::from(rope.line(line))) != syntax::LineKind::Other;
    let mut first = rope.byte_to_line(start);
    while first > 0 && in_run(first - 1) {
        first -= 1;
    }
    let mut last = rope.byte_to_line(end);
    while last + 1 < rope.len_lines() && in_run(last + 1) {
        last += 1;
    }
    (rope.line_to_byte(first), rope.line_to_byte(last + 1))
}

/// Parses the rope chunk by chunk, reusing `old` (already edited) when given; `blank`: with
/// `syntax::comment_runs` read as spaces.
fn parse_rope(parser: &mut Parser, rope: &Rope, old: Option<&Tree>, blank: bool) -> Option<Tree> {
    let runs = if blank { syntax::comment_runs(rope.lines().map(std::borrow::Cow::from)) } else { Vec::new() };
    parse_counted(parser, rope, old, &runs, true, &mut 0)
}

/// [`parse_rope`] with the ranges to read as spaces given (`blank`; else read as they are, in
/// the same pieces), counting in `reads` the reads the parser asks for: one per chunk of the
/// rope, range, or piece between two ranges; the parser reads again what it looks at again.
fn parse_counted(parser: &mut Parser, rope: &Rope, old: Option<&Tree>, runs: &[std::ops::Range<usize>], blank: bool, reads: &mut usize) -> Option<Tree> {
    const SPACES: [u8; 256] = [b' '; 256];
    let len = rope.len_bytes();
    let mut read = |byte: usize, _: Point| -> &[u8] {
        *reads += 1;
        if byte >= len {
            return &[];
        }
        // The first range that ends after `byte`: spaces inside it, text up to it.
        let range = runs.get(runs.partition_point(|r| r.end <= byte));
        if let Some(r) = range.filter(|r| blank && r.start <= byte) {
            return &SPACES[..(r.end - byte).min(SPACES.len())];
        }
        let (chunk, chunk_start, _, _) = rope.chunk_at_byte(byte);
        let bytes = &chunk.as_bytes()[byte - chunk_start..];
        let end = match range {
            Some(r) if r.start > byte => r.start - byte,
            Some(r) => r.end - byte,
            None => bytes.len(),
        };
        &bytes[..end.min(bytes.len())]
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

    /// The document's tree is a fresh parse of its text as read (long comment runs blanked):
    /// same shape and same byte ranges.
    fn assert_tree_matches(d: &Document) {
        let text = d.rope.to_string();
        let fresh = syntax::by_language_id("python").unwrap().parse(&syntax::without_comment_runs(&text));
        let shape = |t: &Tree| {
            let mut out = Vec::new();
            let mut cursor = t.walk();
            'walk: loop {
                let n = cursor.node();
                out.push((n.kind(), n.byte_range()));
                if cursor.goto_first_child() || cursor.goto_next_sibling() {
                    continue;
                }
                while cursor.goto_parent() {
                    if cursor.goto_next_sibling() {
                        continue 'walk;
                    }
                }
                break out;
            }
        };
        assert_eq!(d.tree().unwrap().root_node().to_sexp(), fresh.root_node().to_sexp(), "{text:?}");
        assert_eq!(shape(d.tree().unwrap()), shape(&fresh), "{text:?}");
    }

    /// `def f():` and `n` comment lines in its body, then its last line.
    fn comment_run(n: usize) -> String {
        let mut text = String::from("def f():\n    x = 1\n");
        for i in 0..n {
            text.push_str(&format!("    # step {i}: nothing to see here, only a long run of comment lines\n"));
        }
        text.push_str("    return x\n");
        text
    }

    /// tree-sitter-python's scanner reads every following comment line again for each comment
    /// line of a run in an indented block: counted here as the reads the parser asks for (it
    /// reads again what it looks at again). With the run blanked, the reads grow with the
    /// lines; read as they are, with their square (the control: the count does see the cost).
    #[test]
    fn a_long_comment_run_is_parsed_in_linear_work() {
        let spec = syntax::by_language_id("python").unwrap();
        let count = |n: usize, blank: bool| {
            let rope = Rope::from_str(&comment_run(n));
            let mut reads = 0;
            let started = std::time::Instant::now();
            let runs = syntax::comment_runs(rope.lines().map(std::borrow::Cow::from));
            assert_eq!(runs.len(), n);
            let tree = parse_counted(&mut spec.parser(), &rope, None, &runs, blank, &mut reads).unwrap();
            let function = tree.root_node().child(0).unwrap();
            assert_eq!((function.kind(), function.end_byte()), ("function_definition", rope.len_bytes() - 1));
            (reads, started.elapsed())
        };
        let (blanked, took) = count(1_750, true);
        let (read_as_is, took_as_is) = count(1_750, false);
        // And as the document was parsed before: in the rope's chunks, nothing blanked.
        let rope = Rope::from_str(&comment_run(1_750));
        let started = std::time::Instant::now();
        parse_rope(&mut spec.parser(), &rope, None, false).unwrap();
        let before = started.elapsed();
        eprintln!("1,750 comment lines in a def: {blanked} reads, {took:?} blanked; {read_as_is} reads, {took_as_is:?} as they are; {before:?} in the rope's chunks");
        // Two pieces a line (the comment, its line break), read a few times over.
        assert!(blanked <= 8 * 1_750, "{blanked} reads for 1,750 lines");
        assert!(read_as_is > 20 * blanked, "the control: {read_as_is} reads as they are, {blanked} blanked");
        // Twice the lines, about twice the reads (not four times).
        let (double, _) = count(3_500, true);
        assert!(double <= 2 * blanked + 64, "{double} reads for 3,500 lines, {blanked} for 1,750");
        // A short run keeps its comments: the tree says where they are.
        let d = Document::new(&comment_run(syntax::COMMENT_RUN - 1), 1, "python".into());
        let at = d.rope.to_string().find("# step 3").unwrap() + 3;
        assert!(syntax::in_string_or_comment(d.tree().unwrap(), at));
    }

    /// Edits that make a run long enough to blank, split it, join two, or turn its lines into
    /// code and back: after each, the incremental tree is the fresh parse of the text as read.
    #[test]
    fn edits_that_make_and_break_comment_runs_keep_the_tree_in_step() {
        let n = syntax::COMMENT_RUN as u32;
        let mut d = Document::new(&comment_run(n as usize - 1), 1, "python".into());
        assert_tree_matches(&d);
        let edits = [
            edit(2, 0, 2, 0, "    # one more: the run is long enough now\n"),
            edit(5, 4, 5, 5, "x = 0 #"),           // a comment in the run becomes code
            edit(5, 4, 5, 11, "#"),                // and a comment again
            edit(1, 9, 1, 9, "\n    # after x"),   // a comment line typed at the run's top
            edit(9, 0, 9, 0, "    y = 2\n"),        // code splits the run in two short ones
            edit(9, 0, 10, 0, ""),                 // and joins them again
            edit(3, 6, 3, 6, "'"),                 // a quote keeps its line, the run goes on
            edit(0, 0, 0, 0, "# top\n"),           // a comment above the def
            edit(3, 0, 12, 0, ""),                 // most of the run deleted
        ];
        for e in edits {
            d.apply_all(&[e], Encoding::Utf16);
            assert_tree_matches(&d);
        }
        // At module level a comment's token looks no further than its line, and a quoted
        // comment stays one in a blanked run: after it, the parser would take the old comment
        // tokens below as they were, if the widened edit did not say that they are spaces now
        // (or comments again).
        let mut text = String::from("x = 1\n# it's quoted\n");
        for i in 0..n - 2 {
            text.push_str(&format!("# note {i}\n"));
        }
        text.push_str("y = 2\n\n# after\nz = 3\n");
        let mut d = Document::new(&text, 1, "python".into());
        assert_tree_matches(&d);
        let edits = [
            edit(n, 0, n, 0, "# the run's last line\n"), // the lines above are blanked now
            edit(n, 0, n + 1, 0, ""),                     // and read as comments again
            edit(1, 0, 1, 0, "# the run's first line\n"), // the lines below
            edit(3, 0, 3, 0, "w = 0\n"),                  // split
            edit(3, 0, 4, 0, ""),                          // joined
        ];
        for e in edits {
            d.apply_all(&[e], Encoding::Utf16);
            assert_tree_matches(&d);
        }
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
