//! Next edits over LSP: `ghostline/nextEdit` and Copilot's `textDocument/copilotInlineEdit`
//! (`{textDocument, position}` → `{edits: […]}`), and the "Apply next edit: …" code action
//! with a `WorkspaceEdit` (Helix). Converts the document and the last edit event to
//! `crate::nextedit`'s plain text and byte ranges and back; the FIM model fills the holes a
//! changed signature leaves, one job at a time, each cancelled by the document's next change
//! or completion request (the keystroke path keeps the model thread first).

use std::collections::HashMap;
use std::time::Instant;

use ropey::Rope;
use serde::{Deserialize, Serialize};
use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::jsonrpc::Result;

use super::state::{path_to_uri, uri_to_path};
use super::{contained, encoding, Backend};
use crate::model::{CancelFlag, GenerateError};
use crate::nextedit::{self, Doc};
use crate::stats::track::Offer;
use crate::stats::Route;

/// The command of every proposal: the client runs it once it has applied the edits.
pub const ACCEPTED: &str = "ghostline.nextEditAccepted";

/// [`ACCEPTED`]'s argument: the statistics' id of the proposal (`null` with statistics off,
/// and for the code action) and the documents it changes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Accepted {
    id: Option<u64>,
    uris: Vec<Uri>,
}

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

/// One edit, at its document's version (`null`: a file not open, as it is on disk); `text`
/// repeats `newText` for Copilot's clients.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NextEdit {
    pub text_document: OptionalVersionedTextDocumentIdentifier,
    pub range: Range,
    pub new_text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Command>,
}

/// The edits found, with the plan's title (for the code action): the document's first, then
/// other files' (a renamed module-level definition's uses), each file's together.
struct Found {
    title: String,
    edits: Vec<DocEdit>,
}

/// One edit of a document, at its version (`None`: a closed file, read from the disk).
struct DocEdit {
    uri: Uri,
    version: Option<i32>,
    range: Range,
    new_text: String,
}

impl Backend {
    pub(super) async fn next_edit(&self, params: NextEditParams) -> Result<NextEdits> {
        contained("ghostline/nextEdit", async move {
            let requested = Instant::now();
            let found = self.next_edits(&params.text_document.uri, Some(params.position), true).await;
            let command = found.as_ref().map(|f| self.offered(&params.text_document.uri, f, requested));
            Ok(to_result(found, command, false))
        })
        .await
    }

    pub(super) async fn copilot_inline_edit(&self, params: NextEditParams) -> Result<NextEdits> {
        contained("textDocument/copilotInlineEdit", async move {
            let requested = Instant::now();
            let found = self.next_edits(&params.text_document.uri, Some(params.position), true).await;
            let command = found.as_ref().map(|f| self.offered(&params.text_document.uri, f, requested));
            Ok(to_result(found, command, true))
        })
        .await
    }

    /// A proposal is going out: recorded as shown in the statistics (when on), and the
    /// command its edits carry, which the client runs once it has applied them.
    fn offered(&self, uri: &Uri, found: &Found, requested: Instant) -> Command {
        let enc = self.caps().encoding;
        let id = {
            let state = self.state();
            let first = found.edits.iter().find(|e| &e.uri == uri);
            match (state.docs.get(uri), first) {
                (Some(doc), Some(first)) => {
                    let anchor = encoding::to_char(&doc.rope, first.range.start, enc).unwrap_or(0);
                    let model = state.config.model.path.as_ref().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                    let offer = Offer { uri: uri.0.as_str().to_owned(), anchor, text: first.new_text.clone(), model, language: doc.language_id.clone(), route: Route::NextEdit, requested };
                    self.stats.shown(&state.config.stats, offer)
                }
                _ => None,
            }
        };
        let args = Accepted { id, uris: touched(uri, found) };
        Command { title: "ghostline: next edit accepted".into(), tooltip: None, command: ACCEPTED.into(), arguments: serde_json::to_value(args).ok().map(|v| vec![v]) }
    }

    /// The client applied a proposal (`ghostline.nextEditAccepted`): its acceptance goes to
    /// the statistics, and the edit history of the documents it changed is cleared, so that
    /// the next proposal follows the user's next edit, not the accepted ones.
    pub(super) fn next_edit_accepted(&self, arguments: &[serde_json::Value]) -> Result<()> {
        let args: Accepted = arguments
            .first()
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .ok_or_else(|| tower_lsp_server::jsonrpc::Error::invalid_params(format!("{ACCEPTED} takes {{id, uris}}: the proposal's id and the documents it changed")))?;
        let mut state = self.state();
        for uri in &args.uris {
            state.history.forget(uri.0.as_str());
        }
        if let (Some(id), true) = (args.id, state.config.stats.enabled) {
            let doc = args.uris.first().and_then(|u| state.docs.get(u));
            match doc {
                Some(doc) => {
                    self.stats.accepted(id, None, &doc.rope);
                }
                None => tracing::debug!(id, "next edit accepted for a document that is not open"),
            }
        }
        tracing::debug!(documents = args.uris.len(), "next edit accepted: history cleared");
        Ok(())
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
        let uris = touched(uri, &found);
        let files = uris.iter().filter(|u| found.edits.iter().any(|e| &e.uri == *u)).count();
        // One entry per document, in the order found (the edits of a file are together).
        let mut docs: Vec<(Uri, Option<i32>, Vec<TextEdit>)> = Vec::new();
        for e in found.edits {
            match docs.last_mut().filter(|d| d.0 == e.uri) {
                Some(d) => d.2.push(TextEdit { range: e.range, new_text: e.new_text }),
                None => docs.push((e.uri, e.version, vec![TextEdit { range: e.range, new_text: e.new_text }])),
            }
        }
        let edit = if self.caps().document_changes {
            let changes = docs
                .into_iter()
                .map(|(uri, version, edits)| {
                    let id = OptionalVersionedTextDocumentIdentifier { version, text_document_identifier: TextDocumentIdentifier { uri } };
                    TextDocumentEdit { text_document: id, edits: edits.into_iter().map(Into::into).collect() }.into()
                })
                .collect();
            WorkspaceEdit { document_changes: Some(changes), ..Default::default() }
        } else {
            WorkspaceEdit { changes: Some(docs.into_iter().map(|(uri, _, edits)| (uri, edits)).collect::<HashMap<_, _>>()), ..Default::default() }
        };
        let places = match (n, files) {
            (1, _) => "1 place".to_owned(),
            (n, 1) => format!("{n} places"),
            (n, f) => format!("{n} places in {f} files"),
        };
        let title = format!("Apply next edit: {} ({places})", found.title);
        // Run by the client after the edit (Helix does): the history is cleared as for the others.
        let command = Command { title: "ghostline: next edit accepted".into(), tooltip: None, command: ACCEPTED.into(), arguments: serde_json::to_value(Accepted { id: None, uris }).ok().map(|v| vec![v]) };
        Some(CodeActionResponse::CodeAction(CodeAction { title, kind: Some(kind), edit: Some(edit), command: Some(command), ..Default::default() }))
    }

    /// The next edits in `uri` after its last edit event; with `model`, the holes too. `None`
    /// when there are none, next edits are off, the file is excluded, or the document moved on
    /// meanwhile.
    async fn next_edits(&self, uri: &Uri, position: Option<Position>, model: bool) -> Option<Found> {
        let enc = self.caps().encoding;
        let (event, contents, version, engine, session, workspace, state_format, model_path) = {
            let mut state = self.state();
            if !state.config.next_edit.enabled || crate::exclude::excluded_by(&state.config.completion.exclude, uri.0.as_str()).is_some() {
                return None;
            }
            let doc = state.docs.get(uri)?;
            let (contents, version) = (doc.contents(), doc.version);
            let event = state.history.last_of(uri.0.as_str())?.clone();
            let (format, model_path) = (state.config.next_edit.format, state.config.model.path.clone());
            (event, contents, version, state.engine.clone(), state.session(uri), state.workspace.clone(), format, model_path)
        };
        let (spec, tree) = contents.syntax.as_ref()?;
        let text = contents.text.as_str();
        let started = std::time::Instant::now();
        let plan = nextedit::plan(&event, Doc { text, spec, tree });
        tracing::debug!(edits = plan.edits.len(), holes = plan.holes.len(), "next edit: planned");
        let mut proposals = plan.edits;
        let engine = engine.filter(|e| model && e.config.enabled && !e.model.thread_died());
        let engine_for_model = engine.clone();
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
        let others = match (&plan.exported, &workspace, uri_to_path(uri.0.as_str())) {
            (Some(renamed), Some(workspace), Some(path)) => self.renamed_elsewhere(&workspace.index, &path, renamed),
            _ => Vec::new(),
        };
        let sweep = match state_format {
            crate::config::NextEditFormat::Sweep => true,
            crate::config::NextEditFormat::Fim => false,
            crate::config::NextEditFormat::Auto => model_path.as_deref().is_some_and(nextedit::sweep::model_is_sweep),
        };
        if let (true, Some(engine)) = (sweep, engine_for_model) {
            let path = uri_to_path(uri.0.as_str());
            let shown = path.as_deref().and_then(|p| workspace.as_ref().and_then(|w| w.relative(p))).or_else(|| path.as_ref().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned())).unwrap_or_else(|| "file".to_owned());
            let earlier: Vec<nextedit::EditEvent> = {
                let state = self.state();
                let all: Vec<&nextedit::EditEvent> = state.history.of(uri.0.as_str()).collect();
                all[..all.len().saturating_sub(1)].iter().map(|e| (*e).clone()).collect()
            };
            let earlier: Vec<&nextedit::EditEvent> = earlier.iter().collect();
            if let Some(prompt) = nextedit::sweep::prompt(&shown, text, &event, &earlier) {
                let cancel = CancelFlag::new();
                session.add_work(cancel.clone());
                match nextedit::sweep::generate(&engine, &prompt, text, cancel).await {
                    Ok(found) => {
                        let found = nextedit::sweep::admissible(&event, text, &proposals, found);
                        proposals.extend(found);
                    }
                    Err(GenerateError::Cancelled) => return None,
                    Err(e) => tracing::debug!("next edit: the next-edit model wrote nothing: {e}"),
                }
            }
        }
        if (proposals.is_empty() && others.is_empty()) || self.state().docs.get(uri).map(|d| d.version) != Some(version) {
            return None;
        }
        tracing::debug!(edits = proposals.len(), files = others.len(), ms = started.elapsed().as_secs_f64() * 1e3, "next edits");
        let rope = Rope::from_str(text);
        let at = position.and_then(|p| encoding::to_char(&rope, p, enc).ok()).map_or(0, |c| rope.char_to_byte(c));
        // The ones after the cursor first, then from the top.
        proposals.sort_by_key(|p| (p.range.start < at, p.range.start));
        let mut edits = doc_edits(uri, Some(version), &rope, proposals, enc);
        for file in others {
            let rope = Rope::from_str(&file.text);
            edits.extend(doc_edits(&Uri(path_to_uri(&file.path)), file.version, &rope, file.edits, enc));
        }
        let title = if plan.title.is_empty() { "the next-edit model's edit".to_owned() } else { plan.title };
        Some(Found { title, edits })
    }

    /// A renamed module-level definition's uses in the other files the index knows: open
    /// documents as the editor has them, closed files from the disk; excluded files never.
    fn renamed_elsewhere(&self, index: &crate::workspace::Index, path: &std::path::Path, renamed: &nextedit::Renamed) -> Vec<nextedit::across::FileEdits> {
        let (open, exclude) = {
            let state = self.state();
            let open: HashMap<std::path::PathBuf, (String, i32)> = state
                .docs
                .iter()
                .filter_map(|(u, d)| Some((crate::workspace::canonical(&uri_to_path(u.0.as_str())?), (d.rope.to_string(), d.version))))
                .collect();
            (open, state.config.completion.exclude.clone())
        };
        let read = |p: &std::path::Path| {
            if crate::exclude::excluded_by(&exclude, &path_to_uri(p)).is_some() {
                return None;
            }
            match open.get(p) {
                Some((text, version)) => Some((text.clone(), Some(*version))),
                None => std::fs::read_to_string(p).ok().map(|t| (t, None)),
            }
        };
        nextedit::across::plan(index, path, renamed, &read)
    }
}

/// The documents a proposal concerns, for its command: the one the user edited (whose edit
/// history the accept clears, and whose statistics entry it is), then those it changes.
fn touched(uri: &Uri, found: &Found) -> Vec<Uri> {
    let mut out = vec![uri.clone()];
    for e in &found.edits {
        if !out.contains(&e.uri) {
            out.push(e.uri.clone());
        }
    }
    out
}

/// `proposals` (bytes of the text in `rope`) as edits of the document `uri` at `version`.
fn doc_edits(uri: &Uri, version: Option<i32>, rope: &Rope, proposals: Vec<nextedit::Proposal>, enc: encoding::Encoding) -> Vec<DocEdit> {
    let lsp = |byte: usize| encoding::from_char(rope, rope.byte_to_char(byte), enc);
    proposals.into_iter().map(|p| DocEdit { uri: uri.clone(), version, range: Range::new(lsp(p.range.start), lsp(p.range.end)), new_text: p.new_text }).collect()
}

fn to_result(found: Option<Found>, command: Option<Command>, copilot: bool) -> NextEdits {
    let Some(found) = found else { return NextEdits::default() };
    let edits = found
        .edits
        .into_iter()
        .map(|e| NextEdit {
            text_document: OptionalVersionedTextDocumentIdentifier { version: e.version, text_document_identifier: TextDocumentIdentifier { uri: e.uri } },
            range: e.range,
            text: copilot.then(|| e.new_text.clone()),
            new_text: e.new_text,
            command: command.clone(),
        })
        .collect();
    NextEdits { edits }
}
