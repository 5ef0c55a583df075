//! The repeated-edit rule: the user changed one line; lines of the same shape near it (the
//! same indentation and tokens, bar the identifiers and literals that vary from line to line,
//! and the same function called first) that have not
//! had the change get it too. The change is the tokens that differ between the line before
//! and after; a change of literals alone (a value) is the line's own business and is not
//! repeated.

use super::lex::{lex, Tok, TokKind};
use super::{line_start, Doc, Edited, Kind, Plan, Proposal};

/// How far from the edited line (in lines, both ways) same-shaped lines are looked for.
pub const NEAR: usize = 12;

pub fn plan(edited: &Edited<'_>, doc: Doc<'_>) -> Option<Plan> {
    let (before, after) = (one_line(edited.before)?, one_line(edited.after)?);
    let comment = doc.spec.line_comment();
    let (b, a) = (lex(before, comment), lex(after, comment));
    let prefix = b.iter().zip(&a).take_while(|(x, y)| x.text == y.text).count();
    let room = b.len().min(a.len()) - prefix;
    let suffix = b.iter().rev().zip(a.iter().rev()).take(room).take_while(|(x, y)| x.text == y.text).count();
    let (old, new) = (&b[prefix..b.len() - suffix], &a[prefix..a.len() - suffix]);
    if old.is_empty() && new.is_empty() {
        return None;
    }
    // A value changed, not a pattern.
    if old.iter().chain(new).all(Tok::literal) || (!old.is_empty() && old.iter().all(Tok::literal) && new.iter().all(|t| t.literal() || t.kind == TokKind::Punct)) {
        return None;
    }
    // One variable passed instead of another: a reference changed, not a pattern (a called
    // function or an attribute renamed is one).
    if let ([o], [n]) = (old, new) {
        let named = b.get(prefix + 1).is_some_and(|t| t.text == "(") || prefix.checked_sub(1).is_some_and(|i| b[i].text == ".");
        if o.kind == TokKind::Ident && n.kind == TokKind::Ident && !named {
            return None;
        }
    }
    // The replacement, raw (spacing kept): from after the token before the change to the
    // token after it.
    let gap = |toks: &[Tok<'_>], line: &str, i: usize, j: usize| -> (usize, usize) {
        let from = if i == 0 { 0 } else { toks[i - 1].end() };
        let to = toks.get(j).map_or(line.trim_end().len(), |t| t.at);
        (from, to.max(from))
    };
    let (bf, bt) = gap(&b, before, prefix, b.len() - suffix);
    let (af, at) = gap(&a, after, prefix, a.len() - suffix);
    let (old_raw, new_raw) = (&before[bf..bt], &after[af..at]);
    // One token replaced by text that holds it (a call wrapped around a value): a template.
    let template = (old.len() == 1 && new.iter().filter(|t| t.text == old[0].text).count() == 1).then(|| old[0]);
    let edited_line = doc.text[..edited.start].matches('\n').count();
    let mut edits = Vec::new();
    let first = edited_line.saturating_sub(NEAR);
    for line in first..=edited_line + NEAR {
        if line == edited_line {
            continue;
        }
        let Some(start) = line_start(doc.text, line) else { break };
        let end = doc.text[start..].find('\n').map_or(doc.text.len(), |i| start + i);
        let content = doc.text[start..end].trim_end_matches('\r');
        if indent(content) != indent(before) {
            continue;
        }
        let c = lex(content, comment);
        if !same_shape(&b, &c) {
            continue;
        }
        let (cf, ct) = gap(&c, content, prefix, c.len() - suffix);
        let window = &c[prefix..c.len() - suffix];
        let replacement = match template {
            Some(t) if window[0].text != t.text => {
                let i = new.iter().position(|n| n.text == t.text).expect("counted");
                let at = new[i].at - af;
                format!("{}{}{}", &new_raw[..at], window[0].text, &new_raw[at + t.text.len()..])
            }
            _ if window.iter().map(|t| t.text).eq(old.iter().map(|t| t.text)) && collapse(&content[cf..ct]) == collapse(old_raw) => new_raw.to_owned(),
            _ => continue,
        };
        if content[cf..ct] == replacement {
            continue;
        }
        edits.push(Proposal { range: start + cf..start + ct, new_text: replacement, kind: Kind::Repeat });
    }
    Some(Plan { edits, holes: Vec::new(), title: "repeat the edit on similar lines".into(), exported: None })
}

/// The one line (without its line break) of an event's text; `None` for more.
fn one_line(text: &str) -> Option<&str> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    (!line.contains('\n') && !line.trim().is_empty()).then_some(line)
}

fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect()
}

/// Whether the candidate line `c` has the shape of the edited line before the edit `b`: as
/// many tokens of the same kinds, the same punctuation, the same function called first (the
/// first identifier before a `(`), and most of the tokens the same.
fn same_shape(b: &[Tok<'_>], c: &[Tok<'_>]) -> bool {
    if b.len() != c.len() || b.is_empty() {
        return false;
    }
    for (x, y) in b.iter().zip(c) {
        if x.kind != y.kind || (x.kind == TokKind::Punct && x.text != y.text) {
            return false;
        }
    }
    if let Some(i) = b.windows(2).position(|w| w[0].kind == TokKind::Ident && w[1].text == "(") {
        if b[i].text != c[i].text {
            return false;
        }
    }
    let same = b.iter().zip(c).filter(|(x, y)| x.text == y.text).count();
    same * 2 >= b.len()
}

#[cfg(test)]
mod tests {
    use crate::nextedit::fixture::edit;

    #[test]
    fn an_argument_added_to_one_call_goes_to_its_neighbours() {
        let before = "def f():\n    p.add('a', x)\n    p.add('b', y)\n    q.other('c', z)\n    p.add('d', w)\n";
        let after = before.replacen("p.add('a', x)", "p.add('a', x, required=True)", 1);
        let (_, text) = edit(before, &after);
        assert_eq!(text, "def f():\n    p.add('a', x, required=True)\n    p.add('b', y, required=True)\n    q.other('c', z)\n    p.add('d', w, required=True)\n");
    }

    #[test]
    fn a_renamed_method_and_a_wrapped_value() {
        let before = "self.assertEquals(a, 1)\nself.assertEquals(b, 2)\n";
        let (_, text) = edit(before, &before.replacen("assertEquals", "assertEqual", 1));
        assert_eq!(text, "self.assertEqual(a, 1)\nself.assertEqual(b, 2)\n");
        let before = "d['a'] = x\nd['b'] = y\n";
        let (_, text) = edit(before, &before.replacen("= x", "= str(x)", 1));
        assert_eq!(text, "d['a'] = str(x)\nd['b'] = str(y)\n");
    }

    #[test]
    fn a_variable_passed_instead_of_another_is_not_repeated() {
        let before = "    r = Mock(request)\n    q = Mock(request)\n";
        let (plan, _) = edit(before, &before.replacen("Mock(request)", "Mock(jar)", 1));
        assert!(plan.edits.is_empty(), "{plan:?}");
    }

    #[test]
    fn a_changed_value_is_not_repeated() {
        let before = "a = f(1)\nb = f(1)\nc = f(1)\n";
        let (plan, _) = edit(before, &before.replacen("f(1)", "f(2)", 1));
        assert!(plan.edits.is_empty(), "{plan:?}");
        let before = "x = 'on'\ny = 'on'\n";
        let (plan, _) = edit(before, &before.replacen("'on'", "'off'", 1));
        assert!(plan.edits.is_empty(), "{plan:?}");
    }
}
