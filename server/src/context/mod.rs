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
//! [`fit`] then enforces a token budget with the model's own tokenizer. The outline comes first
//! and depends only on text outside the scope, so it stays byte-identical (and its KV cache
//! entries reusable) while the user types inside one scope.

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

/// The text around the cursor, before the token budget.
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

/// The prompt text after the budget: `outline + prefix` before the cursor, `suffix` after.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptParts {
    /// Outline lines, each ending in `\n`; empty when there is none.
    pub outline: String,
    pub prefix: String,
    pub suffix: String,
}

/// How much of a budget each part may take, in hundredths.
const OUTLINE_SHARE: usize = 35;
const SUFFIX_SHARE: usize = 15;

/// Builds the context for `cursor` (a char boundary in `text`): the scope strategy when the
/// language and tree are known and the cursor is inside a function or class, else a window of
/// `before`/`after` lines.
pub fn build(text: &str, cursor: usize, syntax: Option<(&Spec, &Tree)>, before: usize, after: usize) -> ContextParts {
    if let Some((spec, tree)) = syntax {
        if let Some(range) = scope::enclosing_scope(spec, tree, text, cursor) {
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

/// A window of `before` whole lines above the cursor's line and `after` lines below it.
///
/// `cursor` must be a char boundary in `text` (callers convert positions before this).
pub fn line_window(text: &str, cursor: usize, before: usize, after: usize) -> ContextParts {
    let cursor = cursor.min(text.len());
    let head = &text[..cursor];
    let tail = &text[cursor..];
    // Start of the line `before` lines above the cursor's line.
    let start = head
        .char_indices()
        .rev()
        .filter(|&(_, c)| c == '\n')
        .nth(before)
        .map_or(0, |(i, _)| i + 1);
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

/// Fits the parts into `budget` tokens as counted by `count` (the model's tokenizer):
/// the suffix keeps its first lines within its share, the prefix its last lines, and the
/// outline the items nearest the scope within its share (shown in file order).
///
/// The outline's share does not depend on the prefix, so typing inside a scope never changes
/// which outline items are kept.
pub fn fit(parts: &ContextParts, budget: usize, count: &dyn Fn(&str) -> usize) -> PromptParts {
    let suffix = keep_lines(&parts.suffix, budget * SUFFIX_SHARE / 100, count, End::First);
    let mut outline_room = budget * OUTLINE_SHARE / 100;
    let mut by_distance: Vec<&OutlineItem> = parts.outline.iter().collect();
    by_distance.sort_by_key(|i| (!i.pinned, i.start.abs_diff(parts.prefix_start)));
    let mut kept: Vec<(&OutlineItem, &str)> = Vec::new();
    for item in by_distance {
        let cost = count(&item.text) + 1;
        if cost <= outline_room {
            outline_room -= cost;
            kept.push((item, &item.text));
        }
    }
    // Then, nearest first, whole functions instead of their signatures: they show the model
    // the file's own style, names and idioms.
    for (item, shown) in kept.iter_mut() {
        if let Some(full) = &item.full {
            let extra = count(full).saturating_sub(count(&item.text));
            if extra <= outline_room {
                outline_room -= extra;
                *shown = full;
            }
        }
    }
    kept.sort_by_key(|(i, _)| (i.order, i.order == i.start, i.start));
    let outline: String = kept.iter().map(|(_, shown)| format!("{shown}\n")).collect();
    let prefix_room = budget.saturating_sub(count(&outline) + count(&suffix));
    let prefix = keep_lines(&parts.prefix, prefix_room, count, End::Last);
    PromptParts { outline, prefix, suffix }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    First,
    Last,
}

/// The longest run of whole lines from one end of `text` that fits in `room` tokens. The line
/// at the kept end is always kept, whole (the cursor's line).
fn keep_lines(text: &str, room: usize, count: &dyn Fn(&str) -> usize, end: End) -> String {
    if count(text) <= room {
        return text.to_owned();
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut kept = 0;
    let mut used = 0;
    let order: Box<dyn Iterator<Item = &&str>> = match end {
        End::First => Box::new(lines.iter()),
        End::Last => Box::new(lines.iter().rev()),
    };
    for line in order {
        let cost = count(line);
        if kept > 0 && used + cost > room {
            break;
        }
        used += cost;
        kept += 1;
    }
    match end {
        End::First => lines[..kept].concat(),
        End::Last => lines[lines.len() - kept..].concat(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> usize {
        s.split_whitespace().count()
    }

    #[test]
    fn window_keeps_whole_lines() {
        let text = "a\nb\nc\nd|x\ne\nf\ng\n";
        let at = text.find('|').unwrap();
        let text = text.replace('|', "");
        let p = line_window(&text, at, 1, 1);
        assert_eq!(p.prefix, "c\nd");
        assert_eq!(p.suffix, "x\ne\n");
        let p = line_window(&text, at, 0, 0);
        assert_eq!(p.prefix, "d");
        assert_eq!(p.suffix, "x\n");
    }

    #[test]
    fn window_at_edges() {
        let p = line_window("abc", 0, 5, 5);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("", "abc"));
        let p = line_window("abc", 3, 5, 5);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("abc", ""));
        let p = line_window("héllo\n🦀 x", 11, 0, 3);
        assert_eq!((p.prefix.as_str(), p.suffix.as_str()), ("🦀", " x"));
    }

    #[test]
    fn fit_drops_far_outline_items_then_old_prefix_lines() {
        let parts = ContextParts {
            strategy: Strategy::Scope,
            outline: vec![
                OutlineItem { text: "import a b c".into(), start: 0, order: 0, full: None, pinned: false },
                OutlineItem { text: "def far(x): ...".into(), start: 10, order: 10, full: None, pinned: false },
                OutlineItem { text: "def near(y): ...".into(), start: 90, order: 90, full: None, pinned: false },
            ],
            prefix_start: 100,
            prefix: "def f():\n    one two\n    three four\n    x =".into(),
            suffix: "\n    return x\n    more lines here\n".into(),
        };
        let all = fit(&parts, 1000, &words);
        assert_eq!(all.outline, "import a b c\ndef far(x): ...\ndef near(y): ...\n");
        assert_eq!(all.prefix, parts.prefix);
        // budget 20: outline share 7 → only the nearest item (3 + 1); suffix share 3 → one line
        let small = fit(&parts, 20, &words);
        assert_eq!(small.outline, "def near(y): ...\n");
        assert_eq!(small.suffix, "\n    return x\n");
        // budget 6: no outline; the prefix loses its first lines, never the cursor's line
        let tiny = fit(&parts, 6, &words);
        assert_eq!(tiny.outline, "");
        assert_eq!(tiny.prefix, "    one two\n    three four\n    x =");
    }
}
