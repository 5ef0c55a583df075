//! Next edits over LSP: `ghostline/nextEdit` and Copilot's `textDocument/copilotInlineEdit`
//! (`{textDocument, position}` → `{edits: […]}`), and the "Apply next edit: …" code action
//! with a `WorkspaceEdit` (Helix). Converts the document and the last edit event to
//! `crate::nextedit`'s plain text and byte ranges and back; the FIM model fills the holes a
//! changed signature leaves, one job at a time, each cancelled by the document's next change
//! or completion request (the keystroke path keeps the model thread first).

use std::collections::HashMap;

use ropey::Rope;
use serde::{Deserialize, Serialize};
use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::jsonrpc::Result;

use super::state::uri_to_path;
use super::{contained, encoding, Backend};
use crate::model::{CancelFlag, GenerateError};
use crate::nextedit::{self, Doc};

/// `ghostline/nextEdit`'s and `textDocument/copilotInlineEdit`'s parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NextEditParams {
    pub text_document: TextDocumentIdentifier,
    pub position: Position,
}

/// `ghostline/nextEdit`'s answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NextEdits {
    pub edits: Vec<NextEdit>,
}

/// One edit, at its document's version; `text` repeats `newText` for Copilot's clients.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NextEdit {
    pub text_document: VersionedTextDocumentIdentifier,
    pub range: Range,
    pub new_text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Command>,
}

/// The edits found, with the plan's title (for the code action).
struct Found {
    title: String,
    version: i32,
    edits: Vec<(Range, String)>,
}

impl Backend {
    pub(super) async fn next_edit(&self, params: NextEditParams) -> Result<NextEdits> {
        contained("ghostline/nextEdit", async move {
            let found = self.next_edits(&params.text_document.uri, Some(params.position), true).await;
            Ok(to_result(&params.text_document.uri, found, false))
        })
        .await
    }

    pub(super) async fn copilot_inline_edit(&self, params: NextEditParams) -> Result<NextEdits> {
        contained("textDocument/copilotInlineEdit", async move {
            let found = self.next_edits(&params.text_document.uri, Some(params.position), true).await;
            Ok(to_result(&params.text_document.uri, found, true))
        })
        .await
    }

    /// "Apply next edit: …" for `uri`, from the tree alone (listing actions never waits for
    /// the model); `None` when there is nothing to apply, or `only` asks for other kinds.
    pub(super) async fn next_edit_action(&self, uri: &Uri, only: Option<&[CodeActionKind]>) -> Option<CodeActionResponse> {
        let kind = CodeActionKind::RefactorRewrite;
        if let Some(only) = only.filter(|o| !o.is_empty()) {
            let name = kind.to_string();
            if !only.iter().any(|o| name == o.to_string() || name.starts_with(&format!("{o}."))) {
                return None;
            }
        }
        let found = self.next_edits(uri, None, false).await?;
        let n = found.edits.len();
        let edits: Vec<TextEdit> = found.edits.into_iter().map(|(range, new_text)| TextEdit { range, new_text }).collect();
        let edit = if self.caps().document_changes {
            let id = OptionalVersionedTextDocumentIdentifier { version: Some(found.version), text_document_identifier: TextDocumentIdentifier { uri: uri.clone() } };
            let edits = edits.into_iter().map(Into::into).collect();
            WorkspaceEdit { document_changes: Some(vec![TextDocumentEdit { text_document: id, edits }.into()]), ..Default::default() }
        } else {
            WorkspaceEdit { changes: Some(HashMap::from([(uri.clone(), edits)])), ..Default::default() }
        };
        let places = if n == 1 { "1 place".to_owned() } else { format!("{n} places") };
        let title = format!("Apply next edit: {} ({places})", found.title);
        Some(CodeActionResponse::CodeAction(CodeAction { title, kind: Some(kind), edit: Some(edit), ..Default::default() }))
    }

    /// The next edits in `uri` after its last edit event; with `model`, the holes too. `None`
    /// when there are none, next edits are off, the file is excluded, or the document moved on
    /// meanwhile.
    async fn next_edits(&self, uri: &Uri, position: Option<Position>, model: bool) -> Option<Found> {
        let enc = self.caps().encoding;
        let (event, contents, version, engine, session) = {
            let mut state = self.state();
            if !state.config.next_edit.enabled || crate::exclude::excluded_by(&state.config.completion.exclude, uri.0.as_str()).is_some() {
                return None;
            }
            let doc = state.docs.get(uri)?;
            let (contents, version) = (doc.contents(), doc.version);
            let event = state.history.last_of(uri.0.as_str())?.clone();
            (event, contents, version, state.engine.clone(), state.session(uri))
        };
        let (spec, tree) = contents.syntax.as_ref()?;
        let text = contents.text.as_str();
        let started = std::time::Instant::now();
        let plan = nextedit::plan(&event, Doc { text, spec, tree });
        tracing::debug!(edits = plan.edits.len(), holes = plan.holes.len(), "next edit: planned");
        let mut proposals = plan.edits;
        let engine = engine.filter(|e| model && e.config.enabled && !e.model.thread_died());
        if let (Some(engine), false) = (engine, plan.holes.is_empty()) {
            let path = uri_to_path(uri.0.as_str());
            let name = path.as_ref().and_then(|p| p.file_name()).map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
            for hole in &plan.holes {
                let cancel = CancelFlag::new();
                session.add_work(cancel.clone());
                match nextedit::fill::fill(&engine, Doc { text, spec, tree }, hole, &name, cancel).await {
                    Ok(found) => proposals.extend(found),
                    // The user typed on: these edits are for a text that is gone.
                    Err(GenerateError::Cancelled) => return None,
                    Err(e) => {
                        tracing::debug!("next edit: the model could not fill a call: {e}");
                        break;
                    }
                }
            }
        }
        if proposals.is_empty() || self.state().docs.get(uri).map(|d| d.version) != Some(version) {
            return None;
        }
        tracing::debug!(edits = proposals.len(), ms = started.elapsed().as_secs_f64() * 1e3, "next edits");
        let rope = Rope::from_str(text);
        let at = position.and_then(|p| encoding::to_char(&rope, p, enc).ok()).map_or(0, |c| rope.char_to_byte(c));
        // The ones after the cursor first, then from the top.
        proposals.sort_by_key(|p| (p.range.start < at, p.range.start));
        let lsp = |byte: usize| encoding::from_char(&rope, rope.byte_to_char(byte), enc);
        let edits = proposals.into_iter().map(|p| (Range::new(lsp(p.range.start), lsp(p.range.end)), p.new_text)).collect();
        Some(Found { title: plan.title, version, edits })
    }
}

fn to_result(uri: &Uri, found: Option<Found>, copilot: bool) -> NextEdits {
    let Some(found) = found else { return NextEdits::default() };
    let edits = found
        .edits
        .into_iter()
        .map(|(range, new_text)| NextEdit {
            text_document: VersionedTextDocumentIdentifier { version: found.version, text_document_identifier: TextDocumentIdentifier { uri: uri.clone() } },
            range,
            text: copilot.then(|| new_text.clone()),
            new_text,
            command: None,
        })
        .collect();
    NextEdits { edits }
}
