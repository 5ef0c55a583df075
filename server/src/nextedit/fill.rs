//! The model's part of a next edit: a hole a changed signature left (a call's arguments) is
//! completed by the FIM model like any completion — the same draft, prompt plan, greedy
//! sampling and cancel flag — with the changed definition as the prompt's cross-file section
//! and the rest of the document around the hole.

use crate::context::{CrossFile, Related};
use crate::engine::{Engine, Input};
use crate::model::{CancelFlag, GenerateError};

use super::{Doc, Hole, Kind, Proposal};

/// The edit the model proposes for `hole` of `doc` (`file`: the name the section shows for
/// it); `None` when it writes nothing, or the call as it is.
pub async fn fill(engine: &Engine, doc: Doc<'_>, hole: &Hole, file: &str, cancel: CancelFlag) -> Result<Option<Proposal>, GenerateError> {
    let mut holed = doc.text.to_owned();
    holed.replace_range(hole.range.clone(), &format!("{}{}", hole.lead, hole.trail));
    let cursor = hole.range.start + hole.lead.len();
    let tree = doc.spec.parse(&holed);
    let cross_file = CrossFile {
        path: file.to_owned(),
        comment: doc.spec.line_comment(),
        snippets: vec![Related { path: file.to_owned(), text: hole.definition.clone(), line: hole.def_line, recent: false }],
        laid_out: Default::default(),
    };
    let input = Input { text: &holed, cursor, syntax: Some((doc.spec, &tree)), cross_file: Some(&cross_file) };
    let mut draft = engine.draft(input);
    // The call's own `)` follows the hole: what the model writes past it is not the arguments.
    draft.stop = draft.stop.arguments(hole.takes);
    let s = engine.run(input, draft, cancel).await?;
    if crate::config::log_code() {
        tracing::debug!(text = ?s.text, "next edit: the model's arguments");
    }
    let args = s.text.split('\n').next().unwrap_or("").trim_end();
    let new_text = format!("{}{args}{}", hole.lead, hole.trail);
    if args.trim().is_empty() || doc.text.get(hole.range.clone()) == Some(new_text.as_str()) {
        return Ok(None);
    }
    Ok(Some(Proposal { range: hole.range.clone(), new_text, kind: Kind::Signature }))
}
