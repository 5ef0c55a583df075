//! Context: which text around the cursor goes into the prompt.
//!
//! Pure code over a `&str`, a byte offset and (when the language is known) its tree-sitter tree;
//! no LSP types. Two strategies:
//! - **scope**: the enclosing function from its first line to the cursor (prefix) and to its end
//!   (suffix), after a compact outline of the rest of the file (imports, signatures with bodies
//!   elided, class headers, constants);
//! - **window**: whole lines around the cursor, when the language is unknown or the cursor is at
//!   module level.
//!
//! The prompt plan (`crate::prompt`) then fits these parts to the token budget with the model's
//! own tokenizer. The outline comes first and depends only on text outside the scope, so it
//! stays byte-identical (and its KV cache entries reusable) while the user types inside one
//! scope.

pub mod cross_file;
pub mod scope;

use tree_sitter::Tree;

use crate::syntax::Spec;

/// One line (or a few) of the outline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlineItem {
    pub text: String,
    /// Byte offset of the item in the file (for the distance from the cursor).
    pub start: usize,
    /// Where the item is shown: its own offset for items above the scope; for items below it,
    /// the offset of the scope's ancestor at the item's depth, so that they come before that
    /// ancestor (the prompt must end with the scope).
    pub order: usize,
    /// The item written out in full (a function with its body), shown instead of `text` for
    /// the items nearest the scope while the outline's share of the budget allows.
    pub full: Option<String>,
    /// A header of a block around the scope (its class, impl…): kept before anything else.
    pub pinned: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Scope,
    Window,
}

/// The text around the cursor, before the token budget (`crate::prompt::budget::fit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextParts {
    pub strategy: Strategy,
    pub outline: Vec<OutlineItem>,
    /// Byte offset in the file where `prefix` starts (the scope's first line).
    pub prefix_start: usize,
    /// Text that ends exactly at the cursor.
    pub prefix: String,
    /// Text that starts exactly at the cursor.
    pub suffix: String,
}

/// What the code at the cursor uses from other files of the workspace (found by
/// `crate::workspace`), for the prompt's cross-file section, which comes before the outline.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CrossFile {
    /// The current file's path relative to its workspace root (`/`-separated): the last header.
    pub path: String,
    /// The line comment of the current file's language (`#`, `//`), for path headers.
    pub comment: &'static str,
    /// Definitions and recent chunks, most wanted first: the budget keeps them in this order.
    pub snippets: Vec<Related>,
    /// Where the prompt plan leaves the section as it laid it out.
    pub laid_out: LaidOut,
}

/// The cross-file section as a prompt plan laid it out: what its budget kept, with the
/// model's file separator (written `<file_sep>`) or comment headers. Written by
/// `crate::prompt::PromptPlan::build` on the model thread, read by whoever made the
/// [`CrossFile`] (the server reports it in `ghostline/lastTimings`). Clones share it, so a
/// caller can hand the same one to every prompt of a document. Not part of what a section is:
/// any two compare equal.
#[derive(Clone, Default)]
pub struct LaidOut(std::sync::Arc<std::sync::Mutex<String>>);

impl LaidOut {
    pub fn set(&self, section: String) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = section;
    }

    /// The last section written; empty before any.
    pub fn get(&self) -> String {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl PartialEq for LaidOut {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for LaidOut {}

impl std::fmt::Debug for LaidOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LaidOut")
    }
}

/// One piece of another file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Related {
    /// Relative to the workspace root, `/`-separated.
    pub path: String,
    /// Lines of that file (a definition's signature and doc line, or a chunk of recent code).
    pub text: String,
    /// Where `text` starts in its file (0-based), for the order within a file.
    pub line: u32,
    /// A chunk of code the user recently saw or edited, rather than a definition.
    pub recent: bool,
}

/// Where text is cut off above the cursor (the window's first line, the prefix's first kept
/// line), it is cut at a line whose number is a multiple of this: while the user types, the
/// head of the prompt then moves once every `LINE_STEP` lines instead of on every line, and
/// the KV cache entries of everything after it stay usable. Costs up to `LINE_STEP - 1` lines
/// (a prefix cut to fewer than `8 * LINE_STEP` lines uses a smaller step: at most an eighth).
pub const LINE_STEP: usize = 8;

/// Builds the context for `cursor` (a char boundary in `text`): the scope strategy when the
/// language and tree are known and the cursor is inside a function or class, else a window of
/// `before`/`after` lines.
pub fn build(text: &str, cursor: usize, syntax: Option<(&Spec, &Tree)>, before: usize, after: usize) -> ContextParts {
    if let Some((spec, tree)) = syntax {
        if let Some(range) = crate::syntax::scope::enclosing_scope(spec, tree, text, cursor) {
            let _ = tree;
            return ContextParts {
                strategy: Strategy::Scope,
                outline: scope::outline(spec, &scope::tree_without(spec, text, &range), text, &range),
                prefix_start: range.start,
                prefix: text[range.start..cursor].to_owned(),
                suffix: text[cursor..range.end.max(cursor)].to_owned(),
            };
        }
    }
    line_window(text, cursor, before, after)
}

/// A window of at least `before` whole lines above the cursor's line (from a line whose number
/// in `text` is a multiple of [`LINE_STEP`]) and `after` lines below it.
///
/// `cursor` must be a char boundary in `text` (callers convert positions before this).
pub fn line_window(text: &str, cursor: usize, before: usize, after: usize) -> ContextParts {
    let cursor = cursor.min(text.len());
    let head = &text[..cursor];
    let tail = &text[cursor..];
    let cursor_line = head.bytes().filter(|&b| b == b'\n').count();
    let first_line = cursor_line.saturating_sub(before) / LINE_STEP * LINE_STEP;
    // Start of that line: after the line break that ends the line above it.
    let start = match first_line {
        0 => 0,
        n => head.match_indices('\n').nth(n - 1).map_or(0, |(i, _)| i + 1),
    };
    // End of the line `after` lines below the cursor's line (keeping its newline).
    let end = tail
        .char_indices()
        .filter(|&(_, c)| c == '\n')
        .nth(after)
        .map_or(tail.len(), |(i, _)| i + 1);
    ContextParts {
        strategy: Strategy::Window,
        outline: Vec::new(),
        prefix_start: start,
        prefix: head[start..].to_owned(),
        suffix: tail[..end].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_keeps_whole_lines() {
        let text = "a\nb\nc\nd|x\ne\nf\ng\n";
        let at = text.find('|').unwrap();
        let text = text.replace('|', "");
        let p = line_window(&text, at, 1, 1);
        assert_eq!(p.prefix, "a\nb\nc\nd"); // from line 0, the multiple of LINE_STEP at or above
        assert_eq!(p.suffix, "x\ne\n");
        let p = line_window(&text, at, 0, 0);
        assert_eq!(p.prefix, "a\nb\nc\nd");
        assert_eq!(p.suffix, "x\n");
    }

    #[test]
    fn window_at_edges() {
        let p = line_window("abc", 0, 5, 5);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("", "abc"));
        let p = line_window("abc", 3, 5, 5);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("abc", ""));
        let p = line_window("héllo\n🦀 x", 11, 0, 3);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("héllo\n🦀", " x"));
    }

    /// As the cursor moves down, the window's head moves only every LINE_STEP lines (the
    /// prefix's head does the same under the budget: `prompt::budget`).
    #[test]
    fn window_heads_move_in_steps_of_lines() {
        let text: String = (0..100).map(|i| format!("l{i}\n")).collect();
        let starts: Vec<usize> = (20..60)
            .map(|line| {
                let cursor = text.match_indices('\n').nth(line - 1).unwrap().0 + 1;
                line_window(&text, cursor, 10, 0).prefix_start
            })
            .collect();
        assert_eq!(starts.windows(2).filter(|w| w[0] != w[1]).count(), 5, "{starts:?}");
        for (line, start) in (20..60).zip(&starts) {
            let first = text[..*start].matches('\n').count();
            assert!(first % LINE_STEP == 0 && first + 10 <= line && line - first < 10 + LINE_STEP, "line {line}: window from {first}");
        }
    }
}
