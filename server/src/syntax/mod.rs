//! Syntax: tree-sitter grammars and their queries (from `grammars/`), parsing, incremental
//! edits, and the few tree questions the rest of the engine asks.

mod languages;
pub mod scope;

use std::sync::OnceLock;

use tree_sitter::{InputEdit, Language, Node, Parser, Point, Query, Tree};

/// How a block ends in a language: by indentation (Python) or by a closing brace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockEnd {
    Indent,
    Braces,
}

/// One language: its grammar, its queries, and how it writes blocks.
pub struct Spec {
    pub name: &'static str,
    pub language_ids: &'static [&'static str],
    pub extensions: &'static [&'static str],
    pub language: Language,
    pub block_end: BlockEnd,
    /// `@scope` (functions) and `@scope.class` (containers).
    pub scopes: Query,
    /// `@item`, `@def` + `@body`, `@container` + `@body`.
    pub outline: Query,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Spec {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Spec {
    /// The language's line comment (for the prompt's path headers).
    pub fn line_comment(&self) -> &'static str {
        if self.block_end == BlockEnd::Indent { "#" } else { "//" }
    }

    fn new(
        name: &'static str,
        language_ids: &'static [&'static str],
        extensions: &'static [&'static str],
        language: Language,
        block_end: BlockEnd,
        (scopes, outline): (&str, &str),
    ) -> Spec {
        let query = |kind: &str, src: &str| {
            Query::new(&language, src).unwrap_or_else(|e| panic!("grammars/{name}/{kind}.scm: {e}"))
        };
        let scopes = query("scopes", scopes);
        let outline = query("outline", outline);
        Spec { name, language_ids, extensions, language, block_end, scopes, outline }
    }

    pub fn parser(&self) -> Parser {
        let mut parser = Parser::new();
        parser.set_language(&self.language).expect("grammar compatible with the tree-sitter runtime");
        parser
    }

    /// Parses `text` from scratch.
    pub fn parse(&self, text: &str) -> Tree {
        self.parser().parse(text, None).expect("parsing without a timeout or cancellation")
    }
}

fn registry() -> &'static [Spec] {
    static REGISTRY: OnceLock<Vec<Spec>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let started = std::time::Instant::now();
        let all = languages::all();
        tracing::debug!(ms = started.elapsed().as_secs_f64() * 1e3, "language queries compiled");
        all
    })
}

/// Compiles every language's queries now, where the first document would otherwise pay for it:
/// the server calls it on a thread of its own at start, beside the model's loading (the first
/// `didOpen` took ~70 ms more on two cores, and the first request waited behind it).
pub fn warm() {
    registry();
}

/// The language for an LSP `languageId`.
pub fn by_language_id(id: &str) -> Option<&'static Spec> {
    registry().iter().find(|s| s.language_ids.contains(&id))
}

/// The language for a file name, by extension.
pub fn by_path(path: &str) -> Option<&'static Spec> {
    let ext = path.rsplit_once('.')?.1;
    registry().iter().find(|s| s.extensions.contains(&ext))
}

/// All registered languages.
pub fn all() -> &'static [Spec] {
    registry()
}

/// Comment lines in a run of at least this many are blanked before a Python parse
/// ([`comment_runs`]).
pub const COMMENT_RUN: usize = 16;

/// A line as [`comment_runs`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// Only whitespace.
    Blank,
    /// A whole-line comment; `quoted`: it holds a quote character, and may be inside a string
    /// (ending it), so it is never blanked.
    Comment { quoted: bool },
    Other,
}

/// What `line` is (a Python line, its line break included or not).
pub fn line_kind(line: &str) -> LineKind {
    let code = line.trim_start();
    if code.is_empty() {
        LineKind::Blank
    } else if code.starts_with('#') {
        LineKind::Comment { quoted: line.contains(['"', '\'']) }
    } else {
        LineKind::Other
    }
}

/// The byte ranges of a Python text to parse as spaces: each whole-line comment (its line break
/// kept) in a run of at least [`COMMENT_RUN`] comment lines (blank lines between them count in
/// the run) — the same offsets, lines, definitions and scopes, but none of the grammar's
/// quadratic cost. tree-sitter-python's external scanner, asked for a NEWLINE/INDENT/DEDENT in
/// an indented block, skips every comment line that follows to find the next line's
/// indentation, and a comment is a token of its own, so it is asked again after each one:
/// 1,750 comment lines after an indented `def` took 0.5–0.9 s. Blanked, the run is skipped in
/// one pass. Shorter runs keep their comments (a few lines cost little), so ordinary code keeps
/// its comment nodes: whether the cursor is in a comment is read from the tree. `lines` are
/// the text's lines in order, line breaks included.
pub fn comment_runs<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut run: Vec<std::ops::Range<usize>> = Vec::new();
    let mut comments = 0;
    let mut at = 0;
    let mut flush = |run: &mut Vec<std::ops::Range<usize>>, comments: &mut usize| {
        if *comments >= COMMENT_RUN {
            out.append(run);
        }
        run.clear();
        *comments = 0;
    };
    for line in lines {
        let line = line.as_ref();
        match line_kind(line) {
            LineKind::Blank => {}
            LineKind::Comment { quoted } => {
                comments += 1;
                if !quoted {
                    run.push(at..at + line.trim_end_matches(['\n', '\r']).len());
                }
            }
            LineKind::Other => flush(&mut run, &mut comments),
        }
        at += line.len();
    }
    flush(&mut run, &mut comments);
    out
}

/// The lines of `text` with their line breaks, a line ending at `\n`, `\r\n` or a lone `\r`
/// (as LSP and the document's rope count them).
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= b.len() {
            return None;
        }
        let mut end = start;
        while end < b.len() {
            end += 1;
            match b[end - 1] {
                b'\n' => break,
                b'\r' if b.get(end) != Some(&b'\n') => break,
                _ => {}
            }
        }
        let line = &text[start..end];
        start = end;
        Some(line)
    })
}

/// `text` with [`comment_runs`] turned into spaces (Python), for a parse from scratch.
pub fn without_comment_runs(text: &str) -> std::borrow::Cow<'_, str> {
    let runs = comment_runs(lines(text));
    if runs.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.as_bytes().to_vec();
    for r in runs {
        out[r].fill(b' ');
    }
    // Whole lines' bodies (between line breaks) became spaces: still UTF-8.
    std::borrow::Cow::Owned(String::from_utf8(out).expect("whole lines blanked"))
}

/// The tree-sitter point (row, byte column) of byte offset `at` in `text`.
pub fn point_at(text: &str, at: usize) -> Point {
    let before = &text[..at];
    let row = before.matches('\n').count();
    let column = at - before.rfind('\n').map_or(0, |i| i + 1);
    Point { row, column }
}

/// The edit replacing `text[start..old_end]` with `new_text`, for `Tree::edit`.
pub fn input_edit(text: &str, start: usize, old_end: usize, new_text: &str) -> InputEdit {
    let start_position = point_at(text, start);
    let old_end_position = point_at(text, old_end);
    let new_end_position = match new_text.rfind('\n') {
        Some(i) => Point { row: start_position.row + new_text.matches('\n').count(), column: new_text.len() - i - 1 },
        None => Point { row: start_position.row, column: start_position.column + new_text.len() },
    };
    InputEdit {
        start_byte: start,
        old_end_byte: old_end,
        new_end_byte: start + new_text.len(),
        start_position,
        old_end_position,
        new_end_position,
    }
}

/// ERROR and MISSING nodes in the tree: how broken the parse is.
pub fn error_count(tree: &Tree) -> usize {
    fn walk(node: Node<'_>) -> usize {
        if !node.has_error() {
            return 0;
        }
        let own = usize::from(node.is_error() || node.is_missing());
        let mut cursor = node.walk();
        own + node.children(&mut cursor).map(walk).sum::<usize>()
    }
    walk(tree.root_node())
}

/// Whether the cursor (byte offset, after the last non-blank character of its line) ends a line
/// that opens a block: `:` of a Python compound statement, `{` of a block or body.
pub fn opens_block(tree: &Tree, text: &str, cursor: usize) -> bool {
    let before = text[..cursor].trim_end_matches([' ', '\t']);
    let Some(last) = before.chars().next_back() else { return false };
    if !matches!(last, ':' | '{') {
        return false;
    }
    let at = before.len() - last.len_utf8();
    let Some(node) = tree.root_node().descendant_for_byte_range(at, at + 1) else { return false };
    let parent = node.parent().map(|p| p.kind()).unwrap_or("");
    if parent == "ERROR" || node.is_error() {
        // Unfinished code the grammar could not place: judge by the line's first word.
        const COMPOUND: &[&str] =
            &["def", "class", "if", "elif", "else", "for", "while", "try", "except", "finally", "with", "async", "match", "case"];
        let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
        let word = line.trim_start().split(|c: char| !c.is_alphanumeric()).next().unwrap_or("");
        return last == '{' || COMPOUND.contains(&word);
    }
    let block_like = ["block", "body", "definition", "statement", "clause", "declaration_list", "_item", "declaration"];
    node.kind() == &last.to_string() && block_like.iter().any(|k| parent.contains(k))
}

/// Whether the byte offset lies inside a string or comment node.
pub fn in_string_or_comment(tree: &Tree, at: usize) -> bool {
    let Some(mut node) = tree.root_node().descendant_for_byte_range(at, at) else { return false };
    loop {
        let kind = node.kind();
        if (kind.contains("string") || kind.contains("comment")) && node.start_byte() < at && at < node.end_byte() {
            return true;
        }
        match node.parent() {
            Some(p) => node = p,
            None => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_end_as_lsp_counts_them_and_only_long_runs_are_blanked() {
        assert_eq!(lines("a\nb\r\nc\rd").collect::<Vec<_>>(), ["a\n", "b\r\n", "c\r", "d"]);
        assert_eq!(lines("").count(), 0);
        let short = "def f():\n".to_owned() + &"    # c\n".repeat(COMMENT_RUN - 1) + "    pass\n";
        assert!(comment_runs(lines(&short)).is_empty());
        // Blank lines and a quoted comment count in the run; the quoted one is kept.
        let long = "def f():\n    # it's\n\n".to_owned() + &"    # c\r\n".repeat(COMMENT_RUN - 1) + "    pass\n";
        let blanked = without_comment_runs(&long);
        assert_eq!(blanked.len(), long.len());
        assert_eq!(blanked.matches("# c").count(), 0);
        assert!(blanked.contains("    # it's\n\n       \r\n"), "{blanked:?}");
    }

    #[test]
    fn every_registered_grammar_and_query_loads() {
        for spec in all() {
            let tree = spec.parse("");
            assert_eq!(tree.root_node().kind().is_empty(), false, "{}", spec.name);
            assert!(spec.scopes.capture_index_for_name("scope").is_some(), "{}", spec.name);
            assert!(spec.outline.capture_index_for_name("def").is_some(), "{}", spec.name);
        }
        assert_eq!(by_language_id("python").unwrap().name, "python");
        assert_eq!(by_path("src/main.rs").unwrap().name, "rust");
        assert_eq!(by_path("a/b.tsx").unwrap().name, "tsx");
        assert!(by_language_id("cobol").is_none());
    }

    #[test]
    fn incremental_reparse_matches_a_fresh_parse() {
        let spec = by_language_id("python").unwrap();
        let mut text = String::from("def f(x):\n    return x\n");
        let mut parser = spec.parser();
        let mut tree = parser.parse(&text, None).unwrap();
        for (start, end, insert) in [(23, 23, "\nclass A:\n    pass\n"), (4, 5, "g"), (15, 23, "y = 'é🦀'")] {
            tree.edit(&input_edit(&text, start, end, insert));
            text.replace_range(start..end, insert);
            tree = parser.parse(&text, Some(&tree)).unwrap();
            assert_eq!(tree.root_node().to_sexp(), spec.parse(&text).root_node().to_sexp(), "after {insert:?}: {text:?}");
        }
    }

    #[test]
    fn block_openers_come_from_the_tree() {
        let py = by_language_id("python").unwrap();
        let check = |spec: &Spec, src: &str| {
            let tree = spec.parse(src);
            opens_block(&tree, src, src.trim_end_matches('\n').len())
        };
        assert!(check(py, "def f(x):\n"));
        assert!(check(py, "if a and b:  \n"));
        assert!(!check(py, "d = {\"a\":\n"));
        assert!(!check(py, "return math.\n"));
        let rs = by_language_id("rust").unwrap();
        assert!(check(rs, "fn main() {\n"));
        assert!(!check(rs, "let x = foo(\n"));
        let tree = py.parse("s = 'a b' # c d\n");
        assert!(in_string_or_comment(&tree, 6));
        assert!(in_string_or_comment(&tree, 13));
        assert!(!in_string_or_comment(&tree, 2));
    }

    #[test]
    fn error_count_sees_broken_code() {
        let py = by_language_id("python").unwrap();
        assert_eq!(error_count(&py.parse("def f(x):\n    return x\n")), 0);
        assert!(error_count(&py.parse("def f(x:\n    return x\n")) > 0);
    }
}
