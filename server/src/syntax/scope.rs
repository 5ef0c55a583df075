//! Where a scope is: the innermost function (or class) around a cursor (from `scopes.scm`, by
//! indentation for Python), the block headers above a line, a line's indentation. The bottom
//! layer shared by `context` (which text goes into the prompt) and `workspace` (what the scope
//! uses from other files).

use std::ops::Range;

use tree_sitter::{Node, QueryCursor, StreamingIterator, Tree};

use super::{BlockEnd, Spec};
use crate::text::indent_width;

/// The byte range of the innermost scope around `cursor`: a function if there is one, else a
/// class-like container. `None` at module level.
pub fn enclosing_scope(spec: &Spec, tree: &Tree, text: &str, cursor: usize) -> Option<Range<usize>> {
    if spec.block_end == BlockEnd::Indent {
        // On a `def` line the scope is that function from its first keystroke on, whatever the
        // tree makes of the half-typed header (the enclosing class, nothing, an error): the
        // prompt's layout then stays put while the header and the body are written.
        if let Some(range) = def_on_cursor_line(text, cursor) {
            return Some(range);
        }
    }
    let function = spec.scopes.capture_index_for_name("scope");
    let class = spec.scopes.capture_index_for_name("scope.class");
    let mut best: [Option<Node<'_>>; 2] = [None, None];
    let mut qc = QueryCursor::new();
    // Only nodes that contain the cursor can match a range that contains it.
    qc.set_byte_range(cursor.saturating_sub(1)..cursor + 1);
    let mut matches = qc.matches(&spec.scopes, tree.root_node(), text.as_bytes());
    while let Some(m) = matches.next() {
        for c in m.captures {
            let n = c.node;
            // The cursor right after a scope's last character is still inside it.
            if !(n.start_byte() < cursor && cursor <= n.end_byte()) {
                continue;
            }
            let slot = if Some(c.index) == function {
                0
            } else if Some(c.index) == class {
                1
            } else {
                continue;
            };
            if best[slot].is_none_or(|b| n.byte_range().len() < b.byte_range().len()) {
                best[slot] = Some(n);
            }
        }
    }
    if best[0].is_none() && spec.block_end == BlockEnd::Indent {
        // A function whose body is still being written has no node yet (the grammar needs a
        // body): take its header line and the lines indented under it.
        if let Some(range) = unfinished_def(text, cursor) {
            return Some(range);
        }
    }
    let node = best[0].or(best[1])?;
    // Decorators and attributes belong to the scope they decorate.
    let node = match node.parent() {
        Some(p) if p.kind() == "decorated_definition" => p,
        _ => node,
    };
    // Start at the beginning of the scope's first line, so its indentation is kept.
    let start = text[..node.start_byte()].rfind('\n').map_or(0, |i| i + 1);
    let end = match spec.block_end {
        // By indentation, as for unfinished code: error recovery can stretch a node far past
        // its block, and the scope must not change extent when a line is half typed.
        BlockEnd::Indent => indented_block_end(text, cursor.max(node.start_byte()), indent_width(&text[start..])).max(cursor),
        BlockEnd::Braces => node.end_byte(),
    };
    Some(start..end)
}

/// For indentation languages: the `def …:` line that encloses the cursor by indentation (each
/// line above that is indented less than the last one seen is the header of an enclosing
/// block), through the lines indented under it. Half-typed code often leaves the tree without
/// a function node around the cursor; the indentation still says where it is.
fn unfinished_def(text: &str, cursor: usize) -> Option<Range<usize>> {
    let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
    let mut depth = indent_width(&text[line_start..cursor]);
    let mut header_start = None;
    let mut pos = line_start;
    while pos > 0 && depth > 0 {
        let start = text[..pos - 1].rfind('\n').map_or(0, |i| i + 1);
        let line = &text[start..pos - 1];
        pos = start;
        if line.trim().is_empty() || indent_width(line) >= depth {
            continue;
        }
        depth = indent_width(line);
        let word = line.trim_start().trim_start_matches("async ").trim_start();
        if word.starts_with("def ") && line.trim_end().ends_with(':') {
            header_start = Some((start, depth));
            break;
        }
    }
    let (start, header_indent) = header_start?;
    Some(with_decorators(text, start, header_indent)..indented_block_end(text, cursor, header_indent))
}

/// For indentation languages: when the cursor's line is a `def` (or `async def`) line, typed
/// or half typed, that function: its line (and decorators) through the lines indented under it.
fn def_on_cursor_line(text: &str, cursor: usize) -> Option<Range<usize>> {
    let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..cursor];
    let word = line.trim_start();
    let word = word.strip_prefix("async").filter(|w| w.starts_with(' ')).map_or(word, str::trim_start);
    if !(word == "def" || word.starts_with("def ")) {
        return None;
    }
    let indent = indent_width(line);
    Some(with_decorators(text, line_start, indent)..indented_block_end(text, cursor, indent).max(cursor))
}

/// `start` (a header line's start) moved up over the decorators right above it, which belong to
/// the function as they do when the tree has its node.
fn with_decorators(text: &str, mut start: usize, header_indent: usize) -> usize {
    while start > 0 {
        let above = text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
        let line = &text[above..start - 1];
        if line.trim_start().starts_with('@') && indent_width(line) == header_indent {
            start = above;
        } else {
            break;
        }
    }
    start
}

/// The end of the block that holds `from` (a byte offset) under a header indented
/// `header_indent` columns: it runs over blank lines and lines indented deeper than the header.
fn indented_block_end(text: &str, from: usize, header_indent: usize) -> usize {
    let mut end = text[from..].find('\n').map_or(text.len(), |i| from + i);
    let mut next = end;
    while next < text.len() {
        let line_end = text[next + 1..].find('\n').map_or(text.len(), |i| next + 1 + i);
        let line = &text[next + 1..line_end];
        if !line.trim().is_empty() {
            if indent_width(line) <= header_indent {
                break;
            }
            end = line_end;
        }
        next = line_end;
    }
    end
}

/// Line starts of the block headers enclosing the line at `scope_start`, innermost first.
pub fn enclosing_headers(text: &str, scope_start: usize) -> Vec<usize> {
    let first_line_end = text[scope_start..].find('\n').map_or(text.len(), |i| scope_start + i);
    let mut depth = indent_width(&text[scope_start..first_line_end]);
    let mut headers = Vec::new();
    let mut line_start = scope_start;
    while depth > 0 && line_start > 0 {
        line_start = text[..line_start - 1].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
        let line = &text[line_start..line_end];
        if line.trim().is_empty() || indent_width(line) >= depth {
            continue;
        }
        depth = indent_width(line);
        if line.trim_end().ends_with(':') {
            headers.push(line_start);
        }
    }
    headers
}

/// The whitespace before `at` on its line, if only whitespace precedes it.
pub fn line_indent(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[start..at];
    if before.trim().is_empty() {
        before
    } else {
        ""
    }
}
