//! Code actions over LSP: `textDocument/codeAction` lists them at once (nothing is generated
//! then), `codeAction/resolve` attaches the command, `workspace/executeCommand` runs one — with
//! the route and its reason in the `$/progress` title — and only then sends the whole edit with
//! `workspace/applyEdit`.
//!
//! Only conversion and dispatch: the action's data ⇄ [`ActionData`], positions ⇄ byte offsets,
//! [`Change`]s → a `WorkspaceEdit`. What to run where, the fallback, the breaker and the budget
//! are `crate::actions::service`; targets, prompts and placement `crate::actions`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ropey::Rope;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::{NotCancellable, OngoingProgress, Unbounded};

use super::encoding::{self, Encoding};
pub use super::state::{path_to_uri, uri_to_path};
use super::Backend;
use crate::actions::apply::{Change, FileRef};
use crate::actions::service::{CloudClients, Created, Peers, Request};
use crate::actions::{self, Kind, KindName};
use crate::cloud::{CloudAnswer, CloudError};
use crate::config::CloudConfig;
use crate::engine::Engine;
use crate::model::{CancelFlag, ChatRequest, ChatStop, ModelStatus};

/// The command that runs an action; its one argument is the action's `data`.
pub const RUN: &str = "ghostline.runAction";
/// The command answering the last action's route and reason (as a string).
pub const LAST_ROUTE: &str = "ghostline.lastRoute";

/// A listed action's `data` (and its command's argument): what running it needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActionData {
    pub uri: Uri,
    #[serde(default)]
    pub version: i32,
    pub kind: KindName,
    pub position: Position,
    /// The diagnostic a fix is for.
    #[serde(default)]
    pub diagnostic: Option<Diagnostic>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub language: String,
}

/// `ghostline.runAction`'s answer.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct RunResult {
    applied: bool,
    failure_reason: Option<String>,
    title: String,
    route: &'static str,
    planned: &'static str,
    reason: String,
    fallback: Option<String>,
    cached: bool,
    files: Vec<String>,
    note: Option<String>,
    ms: f64,
    cloud_clients_built: usize,
}

/// `ghostline.runAction`'s answer when the action failed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RunFailed {
    applied: bool,
    error: String,
    last_route: Option<String>,
}

fn message_text(message: &Message) -> String {
    match message {
        Message::String(s) => s.clone(),
        Message::MarkupContent(m) => m.value.clone(),
    }
}

/// `codeAction/resolve`: the command, for clients that resolve it lazily.
pub fn resolve(mut action: CodeAction) -> CodeAction {
    if action.command.is_none() {
        if let Some(data) = action.data.clone() {
            action.command = Some(Command { title: action.title.clone(), tooltip: None, command: RUN.into(), arguments: Some(vec![data]) });
        }
    }
    action
}

/// The server's [`Peers`]: the engine's model thread, the cloud client, and `$/progress`.
struct Live<'a> {
    engine: Option<Arc<Engine>>,
    clouds: &'a CloudClients,
    /// The configured context size, for a model not loaded yet.
    context_size: u64,
    progress: Option<OngoingProgress<Unbounded, NotCancellable>>,
}

impl Peers for Live<'_> {
    async fn cloud(&self, config: &CloudConfig, messages: &[(String, String)], max_tokens: u32, stop: &ChatStop, cancel: &CancelFlag) -> std::result::Result<CloudAnswer, CloudError> {
        self.clouds.get(config)?.chat(messages, max_tokens, stop, cancel).await
    }

    async fn local(&self, request: ChatRequest) -> std::result::Result<String, String> {
        match &self.engine {
            Some(engine) => engine.model.chat(request).await.map(|g| g.text).map_err(|e| e.to_string()),
            None => Err("no local model is loaded".into()),
        }
    }

    fn local_context(&self) -> Option<u64> {
        match self.engine.as_ref().map(|e| e.model.status().borrow().clone()) {
            Some(ModelStatus::Ready(info)) => Some(info.n_ctx as u64),
            Some(ModelStatus::Loading { .. }) | Some(ModelStatus::Unloaded(_)) => Some(self.context_size),
            _ => None,
        }
    }

    async fn report(&self, message: String) {
        if let Some(p) = &self.progress {
            p.report(message).await;
        }
    }
}

impl Backend {
    pub(super) async fn code_action_list(&self, params: CodeActionParams) -> Result<Option<Vec<CodeActionResponse>>> {
        let enc = self.caps().encoding;
        let uri = params.text_document.uri.clone();
        if params.range.start == params.range.end && self.state().docs.contains_key(&uri) {
            self.cursor_rests(&uri, params.range.start).await;
        }
        let (snap, language) = {
            let state = self.state();
            if !state.config.actions.enabled {
                return Ok(None);
            }
            // A file an exclusion names is never put into a prompt: no action offers to.
            if crate::exclude::excluded_by(&state.config.completion.exclude, uri.0.as_str()).is_some() {
                return Ok(None);
            }
            let Some(doc) = state.docs.get(&uri) else { return Ok(None) };
            let snap = doc.snapshot(params.range.start, enc, 0, 0).map_err(|e| Error::invalid_params(e.to_string()))?;
            (snap, doc.language_id.clone())
        };
        let Some((spec, tree)) = snap.syntax.as_ref() else { return Ok(None) };
        let target = actions::function_at(spec, tree, &snap.text, snap.cursor);
        let mut list: Vec<(Kind, Option<Diagnostic>)> = Vec::new();
        if target.is_some() {
            // Tests go in a file beside the source (Rust: in it), so an unsaved document
            // (`untitled:`) has nowhere to put them.
            if spec.name == "rust" || uri_to_path(uri.0.as_str()).is_some() {
                list.push((Kind::Tests, None));
            }
            list.extend([Kind::Docstring, Kind::Refactor].map(|k| (k, None)));
        }
        for d in params.context.diagnostics.iter().filter(|d| d.source.as_deref() != Some("ghostline")) {
            let kind = Kind::Fix { message: message_text(&d.message), source: d.source.clone(), range: 0..0 };
            list.push((kind, Some(d.clone())));
        }
        let only: Vec<String> = params.context.only.iter().flatten().map(ToString::to_string).collect();
        let resolve = self.caps().resolves_command;
        let mut out = Vec::new();
        for (kind, diagnostic) in list {
            let lsp_kind = if matches!(kind, Kind::Fix { .. }) { CodeActionKind::QuickFix } else { CodeActionKind::RefactorRewrite };
            let name = lsp_kind.to_string();
            if !only.is_empty() && !only.iter().any(|o| name == *o || name.starts_with(&format!("{o}."))) {
                continue;
            }
            let named = if kind == Kind::Tests { actions::tests_target(spec, tree, &snap.text, snap.cursor) } else { target.clone() };
            let title = actions::title(&kind, spec, named.as_ref().map(|t| t.name.as_str()));
            let data = ActionData {
                uri: uri.clone(),
                version: snap.version,
                kind: kind.name(),
                position: params.range.start,
                diagnostic: diagnostic.clone(),
                title: Some(title.clone()),
                language: language.clone(),
            };
            let data = serde_json::to_value(&data).map_err(|e| Error::invalid_params(e.to_string()))?;
            let command = (!resolve).then(|| Command { title: title.clone(), tooltip: None, command: RUN.into(), arguments: Some(vec![data.clone()]) });
            let action = CodeAction { title, kind: Some(lsp_kind), diagnostics: diagnostic.map(|d| vec![d]), command, data: Some(data), ..Default::default() };
            out.push(CodeActionResponse::CodeAction(action));
        }
        Ok(Some(out))
    }

    pub(super) async fn execute(&self, params: ExecuteCommandParams) -> Result<Option<LspAny>> {
        match params.command.as_str() {
            LAST_ROUTE => Ok(Some(Value::String(self.actions.last_route().unwrap_or_else(|| "ghostline: no routed action yet".into())))),
            super::completion::ACCEPTED => self.accepted(params.arguments.as_deref().unwrap_or_default()).map(|()| None),
            super::next_edit::ACCEPTED => self.next_edit_accepted(params.arguments.as_deref().unwrap_or_default()).map(|()| None),
            RUN => {
                let data = params.arguments.and_then(|a| a.into_iter().next()).ok_or_else(|| Error::invalid_params("ghostline.runAction needs the action's data"))?;
                let title = data.get("title").and_then(Value::as_str).unwrap_or("ghostline action").to_owned();
                // This action's route, once it has one: what its answer reports, even on failure.
                let mut route = None;
                let result = match serde_json::from_value::<ActionData>(data) {
                    Ok(data) => self.run_action(data, &mut route).await,
                    Err(e) => Err(format!("this is not a ghostline action's data ({e})")),
                };
                let value = match result {
                    Ok(v) => serde_json::to_value(v),
                    Err(message) => {
                        self.client.show_message(MessageType::Warning, format!("ghostline: {message}")).await;
                        self.actions.failed(&title, &message, route.is_some());
                        serde_json::to_value(RunFailed { applied: false, error: message, last_route: route })
                    }
                };
                value.map(Some).map_err(|e| Error::invalid_params(e.to_string()))
            }
            other => Err(Error::invalid_params(format!("unknown command: {other}"))),
        }
    }

    /// Reads a file as the editor sees it: the open document's text, else the disk's.
    fn read_file(&self, path: &Path) -> Option<(String, Option<i32>)> {
        let uri = Uri(path_to_uri(path));
        if let Some(doc) = self.state().docs.get(&uri) {
            return Some((doc.rope.to_string(), Some(doc.version)));
        }
        std::fs::read_to_string(path).ok().map(|t| (t, None))
    }

    async fn run_action(&self, data: ActionData, route: &mut Option<String>) -> std::result::Result<RunResult, String> {
        let started = Instant::now();
        let enc = self.caps().encoding;
        let uri = data.uri;
        let (config, snap) = {
            let state = self.state();
            let doc = state.docs.get(&uri).ok_or("the document is not open")?;
            (state.config.clone(), doc.snapshot(data.position, enc, 0, 0).map_err(|e| e.to_string())?)
        };
        let (spec, tree) = snap.syntax.ok_or("no grammar for this document's language")?;
        let kind = match data.kind {
            KindName::Tests => Kind::Tests,
            KindName::Docstring => Kind::Docstring,
            KindName::Refactor => Kind::Refactor,
            KindName::Fix => {
                let d = data.diagnostic.ok_or("the fix has no diagnostic")?;
                let rope = Rope::from_str(&snap.text);
                let to_byte = |p: Position| rope.char_to_byte(encoding::to_char_clamped(&rope, p, enc));
                Kind::Fix { message: message_text(&d.message), source: d.source, range: to_byte(d.range.start)..to_byte(d.range.end) }
            }
        };
        let path = uri_to_path(uri.0.as_str());
        let root = self.info().root_for(path.as_deref());
        let request = Request { kind, title: data.title, spec, text: snap.text, tree, cursor: snap.cursor, path, root };
        let mut peers = Live { engine: self.engine(), clouds: &self.clouds, context_size: config.model.context_size as u64, progress: None };
        let prepared = self.actions.prepare(request, &config, &peers, &|p| self.read_file(p).map(|(t, _)| t)).map_err(|failure| {
            *route = failure.route;
            failure.message
        })?;
        *route = Some(prepared.headline.clone());
        let title = prepared.title.clone();

        // Progress, with the route and its reason in the title.
        if self.caps().work_done_progress {
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let token = ProgressToken::String(format!("ghostline/action/{}/{n}", std::process::id()));
            if self.client.create_work_done_progress(token.clone()).await.is_ok() {
                peers.progress = Some(self.client.progress(token, prepared.headline.clone()).begin().await);
            }
        }
        tracing::debug!(progress = peers.progress.is_some(), "action started");
        let answered = match self.actions.answer(&prepared, &config, &peers).await {
            Ok(answered) => answered,
            Err(message) => {
                if let Some(p) = peers.progress.take() {
                    p.finish_with_message("nothing was changed").await;
                }
                return Err(message);
            }
        };

        // Still the text the answer was made for? Otherwise nothing is applied.
        if self.state().docs.get(&uri).map(|d| d.version) != Some(snap.version) {
            if let Some(p) = peers.progress.take() {
                p.finish_with_message("the document changed; nothing was applied").await;
            }
            return Err(format!("{title}: the document changed while the action ran; nothing was applied"));
        }
        let source_text = prepared.text();
        let mut created = Created::default();
        let (edit, files) = match self.workspace_edit(&uri, snap.version, source_text, &answered.changes, enc, &mut created) {
            Ok(v) => v,
            Err(e) => {
                created.undo();
                return Err(e);
            }
        };
        tracing::debug!(files = ?files, cached = answered.cached, "sending workspace/applyEdit");
        let applied = match self.client.apply_edit(edit).await {
            Ok(applied) => applied,
            Err(e) => {
                created.undo();
                return Err(format!("{title}: the editor did not apply the edit: {}", e.message));
            }
        };
        tracing::debug!(applied = applied.applied, "workspace/applyEdit answered");
        if !applied.applied {
            created.undo();
        }
        let note = prepared.note().filter(|_| applied.applied);
        if let Some(note) = &note {
            self.client.show_message(MessageType::Info, format!("ghostline: {note}")).await;
        }
        let route_line = self.actions.conclude(&prepared, &answered);
        *route = Some(route_line.clone());
        if let Some(p) = peers.progress.take() {
            p.finish_with_message(if applied.applied { format!("done ({})", answered.route.name()) } else { "the editor refused the edit".into() }).await;
        }
        if answered.fallback.is_some() {
            self.client.show_message(MessageType::Info, format!("ghostline: {route_line}")).await;
        }
        Ok(RunResult {
            applied: applied.applied,
            failure_reason: applied.failure_reason,
            title,
            route: answered.route.name(),
            planned: prepared.decision.route.name(),
            reason: prepared.decision.reason.clone(),
            fallback: answered.fallback,
            cached: answered.cached,
            files,
            note,
            ms: started.elapsed().as_secs_f64() * 1e3,
            cloud_clients_built: crate::cloud::clients_built(),
        })
    }

    /// Changes → one `WorkspaceEdit`: versioned edits for open documents, `CreateFile` for new
    /// files (written by ghostline itself when the client cannot create files: those go into
    /// `created`, to be removed if the edit is not applied). Also the edited files' URIs.
    fn workspace_edit(
        &self,
        uri: &Uri,
        version: i32,
        text: &str,
        changes: &[Change],
        enc: Encoding,
        created: &mut Created,
    ) -> std::result::Result<(WorkspaceEdit, Vec<String>), String> {
        let caps = self.caps();
        let mut ops: Vec<DocumentChange> = Vec::new();
        let mut plain: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
        let mut files = Vec::new();
        for change in changes {
            let (file_uri, base, doc_version) = match &change.file {
                FileRef::Source => (uri.clone(), text.to_owned(), Some(version)),
                FileRef::Path(p) => {
                    let u = Uri(path_to_uri(p));
                    match (&change.base, self.read_file(p)) {
                        (Some(_), Some((t, v))) => (u, t, v),
                        (Some(_), None) => return Err(format!("{} disappeared meanwhile; nothing was applied", p.display())),
                        (None, _) => {
                            if p.exists() {
                                return Err(format!("{} appeared meanwhile; nothing was applied", p.display()));
                            }
                            if caps.document_changes && caps.creates_files {
                                let options = CreateFileOptions { overwrite: Some(false), ignore_if_exists: Some(true) };
                                ops.push(CreateFile { uri: u.clone(), options: Some(options), annotation_id: None }.into());
                            } else {
                                created.file(p)?;
                            }
                            (u, String::new(), None)
                        }
                    }
                }
            };
            if change.base.as_deref().is_some_and(|b| b != base) {
                return Err("a file changed while the action ran; nothing was applied".into());
            }
            let rope = Rope::from_str(&base);
            let pos = |byte: usize| encoding::from_char(&rope, rope.byte_to_char(byte.min(base.len())), enc);
            let edits: Vec<TextEdit> =
                change.edits.iter().map(|(r, t)| TextEdit { range: Range { start: pos(r.start), end: pos(r.end) }, new_text: t.clone() }).collect();
            files.push(file_uri.0.clone());
            if caps.document_changes {
                let document = OptionalVersionedTextDocumentIdentifier { version: doc_version, text_document_identifier: TextDocumentIdentifier { uri: file_uri } };
                ops.push(TextDocumentEdit { text_document: document, edits: edits.into_iter().map(Edit::from).collect() }.into());
            } else {
                plain.insert(file_uri, edits);
            }
        }
        let edit = if caps.document_changes {
            WorkspaceEdit { document_changes: Some(ops), ..Default::default() }
        } else {
            WorkspaceEdit { changes: Some(plain), ..Default::default() }
        };
        Ok((edit, files))
    }
}
