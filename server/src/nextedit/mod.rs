//! Next edits: after the user's edit, the follow-up edits elsewhere — found from the syntax
//! tree, not the model. A renamed binding (definition, parameter, local, `self.` attribute) →
//! its other uses in its scope ([`rename`]); a changed signature → its call sites, removed
//! arguments deterministically, new ones as holes the FIM model fills ([`signature`]); an
//! edit of one line → the lines of the same shape near it ([`repeat`]). Plain text and byte
//! ranges in, plain text and byte ranges out: no LSP here (the server converts in
//! `lsp/next_edit.rs`). Python only for now: other languages get no proposals. A renamed
//! module-level definition's uses in the other files come from the workspace index
//! ([`across`]).

pub mod across;
pub mod fill;
pub mod history;
pub mod lex;
pub mod rename;
pub mod repeat;
pub mod signature;
pub mod sweep;

use std::ops::Range;

use tree_sitter::Tree;

pub use history::{EditEvent, History};

use crate::syntax::Spec;

/// A document as next edits read it: its text and tree now.
#[derive(Clone, Copy)]
pub struct Doc<'a> {
    pub text: &'a str,
    pub spec: &'static Spec,
    pub tree: &'a Tree,
}

/// Which rule proposed an edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    Rename,
    Signature,
    Repeat,
    /// Written by a next-edit model ([`sweep`]).
    Model,
}

/// One proposed edit of the document: bytes `range` of its text become `new_text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub range: Range<usize>,
    pub new_text: String,
    pub kind: Kind,
}

/// A call whose arguments the FIM model is to write: `range` (the arguments between the
/// call's parentheses, or an empty place for a new one) becomes `lead`, what the model writes
/// there, and `trail` (`", "` around a new argument); the prompt's cross-file section shows
/// `definition` (the changed definition's header) as a piece of this file at `def_line`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hole {
    pub range: Range<usize>,
    pub lead: String,
    pub trail: String,
    pub definition: String,
    pub def_line: u32,
    /// One argument (a parameter added) or the whole list between the parentheses.
    pub takes: crate::postprocess::Arguments,
}

/// What follows from an edit: edits made here, holes for the model, and a title for them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub edits: Vec<Proposal>,
    pub holes: Vec<Hole>,
    /// "rename `a` to `count`", "update the calls of `f`"…; no code.
    pub title: String,
    /// A module-level function, class or constant renamed at its definition: other files'
    /// uses follow ([`across`]).
    pub exported: Option<Renamed>,
}

/// A name renamed: `old` is now `new`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Renamed {
    pub old: String,
    pub new: String,
}

/// Holes given to the model for one edit at most: the rest wait for the next request.
pub const MAX_HOLES: usize = 8;

/// What the user's edit changed in the document now: the event's lines, their byte span,
/// and the bytes that differ within them.
pub struct Edited<'a> {
    pub before: &'a str,
    pub after: &'a str,
    /// Byte offset of the event's first line in the document.
    pub start: usize,
    /// The bytes the user changed, in the document now (empty for a pure deletion).
    pub changed: Range<usize>,
    /// The same bytes in `before`, relative to its start.
    pub changed_before: Range<usize>,
}

impl<'a> Edited<'a> {
    /// `None` when the event no longer matches the document (a stale event, or a large one).
    pub fn of(event: &'a EditEvent, text: &str) -> Option<Edited<'a>> {
        if event.large {
            return None;
        }
        let start = line_start(text, event.first_line)?;
        if text.get(start..start + event.after.len()) != Some(event.after.as_str()) {
            return None;
        }
        let (b, a) = (event.before.as_bytes(), event.after.as_bytes());
        let prefix = b.iter().zip(a).take_while(|(x, y)| x == y).count();
        let room = b.len().min(a.len()) - prefix;
        let suffix = b.iter().rev().zip(a.iter().rev()).take(room).take_while(|(x, y)| x == y).count();
        Some(Edited {
            before: &event.before,
            after: &event.after,
            start,
            changed: start + prefix..start + a.len() - suffix,
            changed_before: prefix..b.len() - suffix,
        })
    }

    /// The whole document as it was before the event.
    pub fn old_text(&self, text: &str) -> String {
        format!("{}{}{}", &text[..self.start], self.before, &text[self.start + self.after.len()..])
    }
}

/// Byte offset where line `line` (0-based) starts; the text's end for the line after a final
/// line break; `None` past it.
pub fn line_start(text: &str, line: usize) -> Option<usize> {
    if line == 0 {
        return Some(0);
    }
    text.match_indices('\n').nth(line - 1).map(|(i, _)| i + 1)
}

/// The next edits after `event` in `doc`: the first rule that recognises the edit decides
/// (a rename, else a signature change, else a repeated edit). Edits that touch what the user
/// changed, or change nothing, are dropped.
pub fn plan(event: &EditEvent, doc: Doc<'_>) -> Plan {
    if doc.spec.name != "python" {
        return Plan::default();
    }
    let Some(edited) = Edited::of(event, doc.text) else { return Plan::default() };
    let old_text = edited.old_text(doc.text);
    let old_tree = doc.spec.parse(&old_text);
    let old = Doc { text: &old_text, spec: doc.spec, tree: &old_tree };
    let mut plan = rename::plan(&edited, doc)
        .or_else(|| signature::plan(&edited, doc, old))
        .or_else(|| repeat::plan(&edited, doc))
        .unwrap_or_default();
    plan.edits.retain(|p| !touches(&p.range, &edited.changed) && doc.text.get(p.range.clone()) != Some(p.new_text.as_str()));
    plan.holes.retain(|h| !touches(&h.range, &edited.changed));
    plan.edits.sort_by_key(|p| (p.range.start, p.range.end));
    plan.edits.dedup_by(|a, b| a.range == b.range);
    plan.holes.truncate(MAX_HOLES);
    if plan.edits.is_empty() && plan.holes.is_empty() && plan.exported.is_none() {
        return Plan::default();
    }
    plan
}

/// Whether `a` overlaps or touches `b` (an insertion at either end of a change counts).
pub(crate) fn touches(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start <= b.end && b.start <= a.end
}

/// Test helpers: a document and an edit made on it, from two texts.
#[cfg(test)]
pub(crate) mod fixture {
    use std::time::Instant;

    use ropey::Rope;

    use super::history::{Change, History};
    use super::*;

    /// The plan after editing `before` into `after` (one change: the span that differs), and
    /// `after`'s text with each proposal applied.
    pub fn edit(before: &str, after: &str) -> (Plan, String) {
        let (old, new) = (Rope::from_str(before), Rope::from_str(after));
        let prefix = before.chars().zip(after.chars()).take_while(|(a, b)| a == b).count();
        let room = before.chars().count().min(after.chars().count()) - prefix;
        let suffix = before.chars().rev().zip(after.chars().rev()).take(room).take_while(|(a, b)| a == b).count();
        let change = Change { start: prefix, old_end: old.len_chars() - suffix, new_end: new.len_chars() - suffix };
        let mut h = History::default();
        h.record("file:///t.py", &old, &new, Some(change), Instant::now());
        let spec = crate::syntax::by_language_id("python").unwrap();
        let tree = spec.parse(after);
        let Some(event) = h.last_of("file:///t.py") else { return (Plan::default(), after.to_owned()) };
        let plan = plan(event, Doc { text: after, spec, tree: &tree });
        (plan.clone(), apply(after, &plan.edits))
    }

    pub fn apply(text: &str, edits: &[Proposal]) -> String {
        let mut out = text.to_owned();
        let mut sorted = edits.to_vec();
        sorted.sort_by_key(|p| std::cmp::Reverse(p.range.start));
        for p in sorted {
            out.replace_range(p.range.clone(), &p.new_text);
        }
        out
    }
}
