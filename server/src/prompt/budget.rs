//! The token budget, in one place: how many tokens the prompt and the answer may take for a
//! context size, how the context's parts share the prompt's room (counted line by line with the
//! model's tokenizer), and the last cut in tokens.

use crate::context::{ContextParts, OutlineItem, Related, LINE_STEP};
use crate::model::Token;

/// Tokens the layout adds around the text at most: BOS and three FIM markers.
const LAYOUT_TOKENS: usize = 4;

/// How much of a budget each part may take, in hundredths.
const OUTLINE_SHARE: usize = 35;
const SUFFIX_SHARE: usize = 15;
/// The cross-file section's share of the whole text budget (the other parts share what it
/// leaves), and the budget below which it gets nothing: it is the first part to go.
const CROSS_FILE_SHARE: usize = 25;
const CROSS_FILE_MIN_BUDGET: usize = 384;
/// Tokens a path header takes, as the budget counts it before the section is tokenized.
const HEADER_TOKENS: usize = 10;

/// How many tokens a completion may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Tokens to generate at most: the configured cap, at most half the context.
    pub max_tokens: usize,
    /// Tokens of text (outline, prefix, suffix) the prompt may hold.
    pub text: usize,
    /// Tokens the laid-out prompt may hold, markers and BOS included.
    pub prompt: usize,
}

/// The limits for a context of `n_ctx` tokens: the answer's `max_tokens` (capped at half the
/// context) and one more token must fit after the prompt, which is also held to
/// `max_prompt_tokens` (`completion.maxPromptTokens`).
pub fn limits(n_ctx: usize, max_prompt_tokens: usize, max_tokens: usize) -> Limits {
    let max_tokens = max_tokens.min(n_ctx / 2);
    let prompt = n_ctx.saturating_sub(max_tokens + 1).min(max_prompt_tokens);
    let text = prompt.saturating_sub(LAYOUT_TOKENS);
    Limits { max_tokens, text, prompt: text + LAYOUT_TOKENS }
}

/// Tokens of text the cross-file section may take out of a text budget of `text` tokens.
pub fn cross_file_room(text: usize) -> usize {
    if text < CROSS_FILE_MIN_BUDGET {
        0
    } else {
        text * CROSS_FILE_SHARE / 100
    }
}

/// Bytes of definitions to ask the workspace index for, for a prompt of `max_prompt_tokens`
/// (`completion.maxPromptTokens`): the section's share at about 4 bytes a token (code averages
/// 3–4), so that the index's ranking, not the budget's order, decides what goes in.
pub fn cross_file_bytes(max_prompt_tokens: u32) -> usize {
    cross_file_room(max_prompt_tokens as usize) * 4
}

/// The snippets the cross-file section keeps within `room` tokens as counted by `count`: the
/// most wanted first (the order given), each whole or not at all, with a header per new file.
/// Depends only on the snippets, never on the text around the cursor, so the section stays
/// the same while the user types in one scope.
pub fn fit_cross_file<'a>(snippets: &'a [Related], room: usize, count: &dyn Fn(&str) -> usize) -> Vec<&'a Related> {
    let mut kept: Vec<&Related> = Vec::new();
    let mut used = HEADER_TOKENS; // the current file's own header
    for snippet in snippets {
        let header = if kept.iter().any(|k| k.path == snippet.path && k.recent == snippet.recent) { 0 } else { HEADER_TOKENS };
        let cost = count(&snippet.text) + 1 + header;
        if used + cost <= room {
            used += cost;
            kept.push(snippet);
        }
    }
    kept
}

/// The prompt text after the budget: `outline + prefix` before the cursor, `suffix` after.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptParts {
    /// Outline lines, each ending in `\n`; empty when there is none.
    pub outline: String,
    pub prefix: String,
    pub suffix: String,
}

/// Fits the parts into `budget` tokens as counted by `count` (the model's tokenizer, line by
/// line):
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
    // Counted from the kept end and no further than the room: a long text (a window's prefix,
    // a long function's) is not counted whole first.
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
    if kept == lines.len() {
        return text.to_owned();
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

/// The last cut, in tokens, for a prompt of `room` tokens of text: the suffix keeps its first
/// tokens, at most a quarter of the room; the prefix (outline and text before the cursor) its
/// last ones. [`fit`] counts line by line, and a line longer than its share is kept whole, so
/// the tokenized text can still be over; this is where it is brought under.
pub fn cut<'a>(prefix: &'a [Token], suffix: &'a [Token], room: usize) -> (&'a [Token], &'a [Token]) {
    let suffix = &suffix[..suffix.len().min(room / 4)];
    let room = room - suffix.len();
    (&prefix[prefix.len().saturating_sub(room)..], suffix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Strategy;

    fn words(s: &str) -> usize {
        s.split_whitespace().count()
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
    /// lines (the window's head likewise as the cursor moves down: `context`'s tests).
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
    }

    #[test]
    fn limits_leave_room_for_the_answer() {
        // The configured prompt budget when the context is large enough.
        assert_eq!(limits(4096, 1024, 128), Limits { max_tokens: 128, text: 1020, prompt: 1024 });
        // A small context: the answer and one token come first.
        assert_eq!(limits(512, 1024, 128), Limits { max_tokens: 128, text: 379, prompt: 383 });
        // The answer never takes more than half the context.
        assert_eq!(limits(256, 1024, 1000).max_tokens, 128);
    }

    #[test]
    fn the_last_cut_keeps_the_near_ends() {
        let prefix: Vec<Token> = (100..200).collect();
        let suffix: Vec<Token> = (300..400).collect();
        let (p, s) = cut(&prefix, &suffix, 40);
        assert_eq!((p.len(), s.len()), (30, 10));
        assert_eq!((p[0], s[0]), (170, 300));
        let (p, s) = cut(&prefix[..5], &suffix[..2], 40);
        assert_eq!((p, s), (&prefix[..5], &suffix[..2]));
    }
}
