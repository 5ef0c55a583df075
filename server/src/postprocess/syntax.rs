//! The syntax guard: a suggestion that makes the file parse worse is cut or dropped.

use tree_sitter::Tree;

use crate::syntax::{self, Spec};

/// Returns `suggestion`, or its longest run of leading lines, whose insertion at `cursor` adds
/// no ERROR or MISSING node to `tree` (the parse of `text`); empty when even its first line does.
pub fn keep_if_parse_not_worse(spec: &Spec, tree: &Tree, text: &str, cursor: usize, suggestion: &str) -> String {
    if suggestion.is_empty() {
        return String::new();
    }
    let base = syntax::error_count(tree);
    let mut parser = spec.parser();
    let mut candidate = suggestion;
    loop {
        let mut edited = tree.clone();
        edited.edit(&syntax::input_edit(text, cursor, cursor, candidate));
        let new_text = format!("{}{candidate}{}", &text[..cursor], &text[cursor..]);
        let worse = match parser.parse(&new_text, Some(&edited)) {
            Some(new_tree) => syntax::error_count(&new_tree) > base,
            None => false,
        };
        if !worse {
            return candidate.to_owned();
        }
        match candidate.rfind('\n') {
            Some(i) => candidate = candidate[..i].trim_end(),
            None => {
                if crate::config::log_code() {
                    tracing::debug!(suggestion, "dropped: it makes the file parse worse");
                } else {
                    tracing::debug!(len = suggestion.len(), "suggestion dropped: it makes the file parse worse");
                }
                return String::new();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(lang: &str, doc: &str, suggestion: &str) -> String {
        let spec = syntax::by_language_id(lang).unwrap();
        let cursor = doc.find('|').unwrap();
        let text = doc.replacen('|', "", 1);
        keep_if_parse_not_worse(spec, &spec.parse(&text), &text, cursor, suggestion)
    }

    #[test]
    fn suggestions_that_break_the_parse_are_cut_or_dropped() {
        let doc = "def f(xs):\n    total = sum(|)\n    return total\n";
        assert_eq!(guard("python", doc, "x * 2 for x in xs"), "x * 2 for x in xs");
        assert_eq!(guard("python", doc, "x for x in (xs"), "");
        let doc = "def f(xs):\n    |\n";
        assert_eq!(guard("python", doc, "y = 1\n    z = (y +"), "y = 1");
        // a suggestion that repairs broken code is welcome
        let doc = "fn main() {\n    let v = vec![1, 2|;\n}\n";
        assert_eq!(guard("rust", doc, ", 3]"), ", 3]");
    }

    /// The engine's order: the stop rule finishes the raw generation, then the guard judges it.
    fn finish_and_guard(lang: &str, doc: &str, raw: &str) -> String {
        let at = doc.find('|').unwrap();
        let line_start = doc[..at].rfind('\n').map_or(0, |i| i + 1);
        let rule = crate::postprocess::StopRule::for_cursor(&doc[line_start..at], &doc[at + 1..]);
        guard(lang, doc, &rule.finish(raw))
    }

    /// An editor auto-closed the bracket or quote; a prefix-only model closes it again. The
    /// suggestion loses the duplicate instead of being dropped for a worse parse. The raw
    /// generations are the test model's (SmolLM2-135M) at these cursors: tests/raw_outputs.rs
    /// generates them again and fails when they drift.
    #[test]
    fn auto_closed_brackets_keep_the_suggestion() {
        let cases: Vec<serde_json::Value> =
            serde_json::from_str(include_str!("../../../fixtures/postprocess/auto_closed.json")).unwrap();
        assert!(!cases.is_empty());
        for case in &cases {
            let text = |key: &str| case[key].as_str().unwrap().to_owned();
            let (lang, doc, raw) = (text("language"), text("text"), text("raw"));
            assert_eq!(finish_and_guard(&lang, &doc, &raw), text("suggestion"), "{doc:?} ← {raw:?}");
        }
        // Written by hand, not the model's: a suggestion that closes what it opens keeps its closer.
        assert_eq!(finish_and_guard("python", "def f(xs):\n    total = sum(|)\n", "len(xs)"), "len(xs)");
    }
}
