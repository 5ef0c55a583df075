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
    /// suggestion loses the duplicate instead of being dropped for a worse parse.
    #[test]
    fn auto_closed_brackets_keep_the_suggestion() {
        for (lang, doc, raw, expected) in [
            // raw generations of the test model (SmolLM2-135M) at these cursors
            ("python", "def f(name):\n    print(\"|\")\n", "Hello, my name is {}.{}\".format(name))", "Hello, my name is {}.{}"),
            ("python", "def f(rows):\n    out = [str(|)]\n    return out\n", "x) for x in rows]", "x"),
            ("python", "def f(xs):\n    total = sum(|)\n", "x for x in xs if isinstance(x, list))", "x for x in xs if isinstance(x, list)"),
            ("python", "def f(xs):\n    if any(|)\n", "x > 0 for x in xs):\n        return 1", "x > 0 for x in xs"),
            ("python", "def f(xs):\n    total = sum(|)\n", "len(xs)", "len(xs)"),
            ("javascript", "function f(x) {\n  console.log(|)\n}\n", "`${x} = ${x * 2})`);", "`${x} = ${x * 2})`"),
            ("javascript", "function f() {\n  const m = {|};\n}\n", "a: [1, 2] };", "a: [1, 2]"),
            ("rust", "fn main() {\n    let v = vec![|];\n}\n", "0];", "0"),
            ("rust", "fn main() {\n    let n = f(g(|));\n}\n", "x), y);", "x"),
            ("rust", "fn main() {\n    let s = String::from(|);\n}\n", "\"hi\");", "\"hi\""),
        ] {
            assert_eq!(finish_and_guard(lang, doc, raw), expected, "{doc:?} ← {raw:?}");
        }
    }
}
