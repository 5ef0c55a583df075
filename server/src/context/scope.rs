//! The scope strategy: the enclosing function (from `scopes.scm`) in full around the cursor, and
//! a compact outline of the rest of the file (from `outline.scm`) before it.

use std::ops::Range;

use tree_sitter::{QueryCursor, StreamingIterator, Tree};

use super::OutlineItem;
use crate::text::indent_width;
use crate::syntax::scope::{enclosing_headers, line_indent};
use crate::syntax::{BlockEnd, Spec};

/// Lines an `@item` keeps in the outline.
const ITEM_LINES: usize = 6;
/// Functions longer than this are only ever shown by their signature.
const FULL_LINES: usize = 40;

/// The tree of `text` with the scope blanked out (every byte but line breaks a space), and
/// long comment runs (`syntax::comment_runs`): the outline comes from it, so that a
/// half-typed line inside the scope, which can leave the real tree in error far beyond the
/// scope, never changes the outline. Cached for the last text, since typing inside one scope
/// keeps asking for the same one.
pub fn tree_without(spec: &Spec, text: &str, scope: &Range<usize>) -> Tree {
    static LAST: crate::memo::Last<Tree> = crate::memo::Last::new();
    let mut blank = text.as_bytes().to_vec();
    // Keep the scope's header (through its first `:` line or `{`) and, for braces, its closing
    // brace; put a minimal body (`...`) under a Python header; blank the rest. A Python header
    // still being typed (no `:` yet) goes too, `...` standing in its place: left half typed, it
    // would swallow what follows into an error.
    let region = &text[scope.clone()];
    let keep = match spec.block_end {
        BlockEnd::Indent => {
            let mut at = 0;
            let mut lines = region.split_inclusive('\n');
            loop {
                match lines.next() {
                    Some(line) => {
                        at += line.len();
                        if line.trim_end().ends_with(':') {
                            break at;
                        }
                    }
                    None => break 0,
                }
            }
        }
        BlockEnd::Braces => region.find('{').map_or(0, |i| i + 1),
    };
    let closing = (spec.block_end == BlockEnd::Braces && region.ends_with('}')).then(|| scope.end - 1);
    for (i, b) in blank[scope.clone()].iter_mut().enumerate() {
        if i >= keep && Some(scope.start + i) != closing && *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
    if spec.block_end == BlockEnd::Indent {
        let body_indent = indent_width(region) + if keep == 0 { 0 } else { 4 };
        let next_line = scope.start + keep;
        let line_len = text[next_line..scope.end].find('\n').unwrap_or(scope.end - next_line);
        if line_len >= body_indent + 3 {
            blank[next_line + body_indent..next_line + body_indent + 3].copy_from_slice(b"...");
        }
    }
    if spec.name == "python" {
        // Long comment runs as spaces too, as the document's own parse reads them: a parse from
        // scratch on every changed text must not pay the grammar's quadratic cost for them.
        let runs = std::str::from_utf8(&blank).map(|t| crate::syntax::comment_runs(crate::syntax::lines(t))).unwrap_or_default();
        for r in runs {
            blank[r].fill(b' ');
        }
    }
    LAST.get_or((spec.name, &blank), || spec.parser().parse(&blank, None).expect("parsing without a timeout or cancellation"))
}

/// Outline items of the file outside `scope`, in file order.
pub fn outline(spec: &Spec, tree: &Tree, text: &str, scope: &Range<usize>) -> Vec<OutlineItem> {
    let idx = |name| spec.outline.capture_index_for_name(name);
    let (item, def, container, body) = (idx("item"), idx("def"), idx("container"), idx("body"));
    let mut items = Vec::new();
    let mut elided: Vec<Range<usize>> = Vec::new(); // bodies of @def: nothing inside is shown
    let mut qc = QueryCursor::new();
    let mut matches = qc.matches(&spec.outline, tree.root_node(), text.as_bytes());
    let mut found = Vec::new();
    while let Some(m) = matches.next() {
        let mut whole = None;
        let mut kind = None;
        let mut body_node = None;
        for c in m.captures {
            if Some(c.index) == body {
                body_node = Some(c.node);
            } else if [item, def, container].contains(&Some(c.index)) {
                whole = Some(c.node);
                kind = Some(c.index);
            }
        }
        if let (Some(node), Some(kind)) = (whole, kind) {
            let kind = if Some(kind) == item {
                Kind::Item
            } else if Some(kind) == def {
                Kind::Def
            } else {
                Kind::Container
            };
            found.push((node.byte_range(), kind, body_node.map(|b| b.byte_range())));
        }
    }
    found.sort_by_key(|(r, _, _)| (r.start, std::cmp::Reverse(r.end)));
    found.dedup_by_key(|(r, _, _)| r.clone());
    for (range, kind, body) in found {
        if elided.iter().any(|b| b.start <= range.start && range.end <= b.end) {
            continue; // inside an elided body
        }
        let overlaps_scope = range.start < scope.end && scope.start < range.end;
        let contains_scope = range.start <= scope.start && scope.end <= range.end;
        if overlaps_scope && !(kind == Kind::Container && contains_scope) {
            continue; // the scope itself, or something inside it: the prompt has it in full
        }
        let indent = line_indent(text, range.start);
        let piece = match (kind, body) {
            (Kind::Item, _) => {
                let t = &text[range.clone()];
                let mut lines: Vec<&str> = t.lines().take(ITEM_LINES).collect();
                if t.lines().count() > ITEM_LINES {
                    lines.push("...");
                }
                lines.join("\n")
            }
            (Kind::Def, Some(b)) => {
                elided.push(b.clone());
                let signature = text[range.start..b.start].trim_end();
                match spec.block_end {
                    BlockEnd::Indent => format!("{signature} ..."),
                    BlockEnd::Braces => format!("{signature} {{ ... }}"),
                }
            }
            (Kind::Container, Some(b)) => {
                let header = text[range.start..b.start].trim_end();
                if spec.block_end == BlockEnd::Braces {
                    // The members follow as their own items; the closing brace as one more,
                    // unless the scope is inside (the prompt ends inside the container).
                    if !contains_scope {
                        items.push(OutlineItem { text: format!("{indent}}}"), start: range.end - 1, order: range.end - 1, full: None, pinned: false });
                    }
                    format!("{header} {{")
                } else {
                    header.to_owned()
                }
            }
            (_, None) => continue,
        };
        let full = (kind == Kind::Def && text[range.clone()].lines().count() <= FULL_LINES)
            .then(|| format!("{indent}{}", &text[range.clone()]));
        let pinned = kind == Kind::Container && contains_scope;
        items.push(OutlineItem { text: format!("{indent}{piece}"), start: range.start, order: range.start, full, pinned });
    }
    if spec.block_end == BlockEnd::Indent {
        // Headers of the blocks around the scope, even where unfinished code left the tree
        // without their nodes: each nearest line above with less indentation ending in `:`.
        for start in enclosing_headers(text, scope.start) {
            if let Some(existing) = items.iter_mut().find(|i| i.start == start) {
                existing.pinned = true;
            } else {
                let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
                items.push(OutlineItem { text: text[start..end].trim_end().to_owned(), start, order: start, full: None, pinned: true });
            }
        }
    }
    for item in &mut items {
        if item.start >= scope.end {
            item.order = ancestor_at_depth(text, scope.start, indent_width(&item.text));
        }
    }
    items.sort_by_key(|i| i.start);
    items
}

/// The start of the nearest line at or above `scope_start` indented at most `depth` columns:
/// the scope's ancestor (or the scope itself) at that depth.
fn ancestor_at_depth(text: &str, scope_start: usize, depth: usize) -> usize {
    let mut line_start = scope_start;
    loop {
        let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
        let line = &text[line_start..line_end];
        if !line.trim().is_empty() && indent_width(line) <= depth {
            return line_start;
        }
        if line_start == 0 {
            return 0;
        }
        line_start = text[..line_start - 1].rfind('\n').map_or(0, |i| i + 1);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Item,
    Def,
    Container,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outline's parse reads a long comment run outside the scope as spaces, as the
    /// document's parse does: no comment node left in it, the function around it whole, its
    /// signature in the outline.
    #[test]
    fn the_outline_parse_reads_long_comment_runs_as_spaces() {
        let spec = crate::syntax::by_language_id("python").unwrap();
        let text = "def g(a: int) -> int:\n    x = a\n".to_owned() + &"    # a long note, one of many\n".repeat(1_750) + "    return x\n\n\ndef f():\n    return 1\n";
        let scope = text.find("def f").unwrap()..text.len();
        let tree = tree_without(spec, &text, &scope);
        let mut cursor = tree.walk();
        let mut comments = 0;
        'walk: loop {
            comments += usize::from(cursor.node().kind() == "comment");
            if cursor.goto_first_child() || cursor.goto_next_sibling() {
                continue;
            }
            while cursor.goto_parent() {
                if cursor.goto_next_sibling() {
                    continue 'walk;
                }
            }
            break;
        }
        assert_eq!(comments, 0);
        let g = tree.root_node().child(0).unwrap();
        assert_eq!((g.kind(), &text[g.end_byte() - 8..g.end_byte()]), ("function_definition", "return x"));
        let items = outline(spec, &tree, &text, &scope);
        assert!(items.iter().any(|i| i.text == "def g(a: int) -> int: ..."), "{items:?}");
    }
}
