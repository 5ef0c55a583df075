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

/// Where text is cut off above the cursor (the window's first line, the prefix's first kept
/// line), it is cut at a line whose number is a multiple of this: while the user types, the
/// head of the prompt then moves once every `LINE_STEP` lines instead of on every line, and
/// the KV cache entries of everything after it stay usable. Costs up to `LINE_STEP - 1` lines
/// (a prefix cut to fewer than `8 * LINE_STEP` lines uses a smaller step: at most an eighth).
pub const LINE_STEP: usize = 8;

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
/// at the kept end is always kept, whole (the cursor's line). Cut from the start, the first
/// line kept is one whose number is a multiple of a step: [`LINE_STEP`], or for a short run
/// the largest power of two up to an eighth of its lines.
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
        End::Last => {
            let eighth = (kept / 8).max(1);
            let step = (1 << eighth.ilog2()).min(LINE_STEP);
            let first = (lines.len() - kept).next_multiple_of(step).min(lines.len() - 1);
            lines[first..].concat()
        }
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

    /// While the prefix grows line by line past its room, its head moves only every LINE_STEP
    /// lines; the window's head likewise as the cursor moves down.
    #[test]
    fn prompt_heads_move_in_steps_of_lines() {
        let mut heads = Vec::new();
        for n in 70..100 {
            let prefix: String = (0..n).map(|i| format!("line {i}\n")).collect::<String>() + "x";
            let parts = ContextParts { strategy: Strategy::Scope, outline: vec![], prefix_start: 0, prefix, suffix: String::new() };
            let kept = fit(&parts, 141, &words).prefix; // 2 words a line: room for 70 lines and x
            assert!(words(&kept) <= 141 && kept.ends_with("x"), "{kept}");
            heads.push(kept.lines().next().unwrap().to_owned());
        }
        let moves = heads.windows(2).filter(|w| w[0] != w[1]).count();
        assert_eq!(moves, 4, "{heads:?}"); // to 8, 16, 24 and 32 dropped lines
        assert!(heads.iter().all(|h| h == "x" || h.trim_start_matches("line ").parse::<usize>().unwrap() % LINE_STEP == 0), "{heads:?}");

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
