//! The language server: LSP over stdio (tower-lsp-server), turning editor requests into engine
//! and action-service calls. The only module that knows LSP types; it converts, dispatches and
//! keeps per-client state ([`state`]), and holds no completion or action policy.
//!
//! A keystroke arrives as `didChange` (applied at once, before any await; with
//! `completion.generateAhead`, it also starts the suggestion for the cursor after it in the
//! document's completion session), then as `textDocument/inlineCompletion` (VS Code, Neovim
//! 0.12) or `textDocument/completion` (Helix and older clients), answered by
//! [`completion`]. Code actions are [`actions`].

pub mod actions;
mod completion;
pub mod document;
pub mod encoding;
mod first_run;
mod model;
pub mod next_edit;
pub mod state;
pub mod transport;
mod workspace;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use serde_json::Value;
use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::{Client, LanguageServer, LspService, Server};

use crate::actions::service::{ActionService, CloudClients};
use crate::config;
use crate::engine::{Engine, OwnedInput};
use document::Document;
pub use state::{LastCompletion, LastPosition};
use state::{ClientCaps, ClientInfo, State};

/// Set once the client asked for `shutdown`: the process then exits with 0, else with 1 (the
/// LSP specification's rule for `exit`; an editor that vanishes without either gets 1 too).
static SHUTDOWN_ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs the server on stdin/stdout until the client exits. Returns whether `shutdown` came
/// first, which decides the exit code.
pub async fn serve_stdio() -> bool {
    // The grammars' queries compile while the client initializes and the model loads.
    let _ = std::thread::Builder::new().name("syntax-warm".into()).spawn(crate::syntax::warm);
    let (service, socket) =
        LspService::build(Backend::new)
        .custom_method("ghostline/lastTimings", Backend::last_timings)
        .custom_method("ghostline/nextEdit", Backend::next_edit)
        .custom_method("textDocument/copilotInlineEdit", Backend::copilot_inline_edit)
        .finish();
    // The protocol layer talks to an in-memory pipe; `transport::guard` checks every frame
    // between it and the real stdio.
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (server_out, server_in) = tokio::io::split(ours);
    let (theirs_read, theirs_write) = tokio::io::split(theirs);
    let guard = tokio::spawn(transport::guard(tokio::io::stdin(), tokio::io::stdout(), server_in, server_out));
    Server::new(theirs_read, theirs_write, socket).serve(service).await;
    // Let the last frames (the answer to `shutdown`) reach the editor.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), guard).await;
    SHUTDOWN_ASKED.load(std::sync::atomic::Ordering::SeqCst)
}

pub struct Backend {
    client: Client,
    /// What `initialize` told; defaults before it.
    info: OnceLock<ClientInfo>,
    /// What notifications change, behind one lock (see [`state`] for the ordering rule);
    /// shared with the first run's download task.
    state: Arc<Mutex<State>>,
    /// Code actions: breaker, budget, test files being written, last route.
    actions: ActionService,
    clouds: CloudClients,
    /// Acceptance statistics: suggestions shown, accepted, and their retention.
    stats: crate::stats::track::Tracker,
}

/// Runs a request handler so that a panic inside it becomes an `InternalError` answer (and a
/// log line, from the panic hook) instead of taking the server down.
async fn contained<T>(method: &'static str, work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(_) => {
            let why = crate::fault::last_panic().unwrap_or_default();
            tracing::error!(method, "request handler panicked: {why}");
            Err(Error {
                code: tower_lsp_server::jsonrpc::ErrorCode::InternalError,
                message: format!("ghostline: internal error while handling {method} ({why}); the server keeps running").into(),
                data: None,
            })
        }
    }
}

/// [`contained`] for notifications: a panic is logged and the notification dropped.
async fn contained_notification(method: &'static str, work: impl std::future::Future<Output = ()>) {
    let _ = contained(method, async {
        work.await;
        Ok(())
    })
    .await;
}

impl Backend {
    fn new(client: Client) -> Self {
        // The statistics' writing thread (not async) tells the user through the runtime.
        let (notifier, runtime) = (client.clone(), tokio::runtime::Handle::try_current().ok());
        let stats = crate::stats::track::Tracker::with_notify(Arc::new(move |message: String| {
            if let Some(runtime) = &runtime {
                let client = notifier.clone();
                runtime.spawn(async move { client.show_message(MessageType::Warning, message).await });
            }
        }));
        Backend {
            client,
            info: OnceLock::new(),
            state: Arc::default(),
            actions: ActionService::default(),
            clouds: CloudClients::default(),
            stats,
        }
    }

    /// The state lock (a panic while it was held leaves the state as it was then).
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn info(&self) -> &ClientInfo {
        static NONE: OnceLock<ClientInfo> = OnceLock::new();
        self.info.get().unwrap_or_else(|| NONE.get_or_init(ClientInfo::default))
    }

    fn caps(&self) -> ClientCaps {
        self.info().caps
    }

    fn engine(&self) -> Option<Arc<Engine>> {
        self.state().engine.clone()
    }

    /// `ghostline/lastTimings`: what the engine measured for the last completion it answered
    /// (shown or not), with its prompt's token ids and what became of the generations made
    /// ahead so far; `null` before any. Used by `ghostline bench`; normal responses carry no
    /// timings.
    async fn last_timings(&self) -> Result<Option<LastCompletion>> {
        Ok(self.state().last_timings.clone())
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let info = ClientInfo::from_initialize(&params);
        let enc = info.caps.encoding;
        if self.info.set(info).is_err() {
            tracing::warn!("initialize came twice; keeping the first client capabilities");
        }
        let options = params.initialization_options.unwrap_or(Value::Null);
        let read = self.read_settings(&options, &Value::Null);
        {
            let mut state = self.state();
            match read {
                Ok(model::ReadSettings { config, kept, errors }) => {
                    state.config = config;
                    state.settings = kept;
                    for error in errors {
                        state.init_messages.push((MessageType::Error, format!("ghostline: {error}; ignoring it (the other settings apply)")));
                    }
                }
                Err(message) => {
                    tracing::error!("{message}");
                    state.config = config::Options::default().resolve(config::env_model());
                    state.init_messages.push((MessageType::Error, format!("ghostline: {message}; using defaults")));
                }
            }
            state.workspace = workspace::make(&state.config, &self.info().roots);
        }
        // Load now, so that requests arriving right after `initialized` already queue for it.
        self.start_model(false);
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                position_encoding: Some(enc.kind()),
                text_document_sync: Some(
                    TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(TextDocumentSyncKind::Incremental),
                        // Saved text goes to the workspace index.
                        save: Some(SaveOptions { include_text: Some(true) }.into()),
                        ..Default::default()
                    }
                    .into(),
                ),
                // No trigger characters: a request per `.` or space from clients that complete
                // automatically would supersede the one the user asked for.
                completion_provider: Some(CompletionOptions::default()),
                inline_completion_provider: Some(true.into()),
                code_action_provider: Some(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![CodeActionKind::QuickFix, CodeActionKind::RefactorRewrite]),
                        resolve_provider: Some(true),
                        ..Default::default()
                    }
                    .into(),
                ),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: vec![actions::RUN.into(), actions::LAST_ROUTE.into(), completion::ACCEPTED.into(), next_edit::ACCEPTED.into()],
                    ..Default::default()
                }),
                // Next edits: `ghostline/nextEdit`, and Copilot's `textDocument/copilotInlineEdit`.
                experimental: Some(serde_json::json!({"ghostline": {"nextEdit": true}, "copilotInlineEdit": true})),
                ..Default::default()
            },
            server_info: Some(ServerInfo { name: "ghostline".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        let messages = std::mem::take(&mut self.state().init_messages);
        for (kind, message) in messages {
            self.client.show_message(kind, message).await;
        }
        // No model: ask whether to download one (`first_run`), else report the model's status.
        if !self.first_run() {
            self.report_model_status();
        }
        self.index_workspace();
    }

    async fn shutdown(&self) -> Result<()> {
        SHUTDOWN_ASKED.store(true, std::sync::atomic::Ordering::SeqCst);
        for session in self.state().sessions.values() {
            session.text_changed();
        }
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        contained_notification("textDocument/didOpen", async move {
            let d = params.text_document;
            let language: String = d.language_id.into();
            self.state().docs.insert(d.uri.clone(), Document::new(&d.text, d.version, language));
            self.workspace_opened(&d.uri, &d.text);
        })
        .await
    }

    /// Applies the edit, cancels the work for the old text, and (when the edit looks like
    /// typing) starts the suggestion the editor will ask for after its debounce. No `await`:
    /// the ordering rule in [`state`] rests on it.
    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        contained_notification("textDocument/didChange", async move {
            let enc = self.caps().encoding;
            let uri = params.text_document.text_document_identifier.uri;
            let (ahead, session, engine, left) = {
                let mut guard = self.state();
                let state = &mut *guard;
                // Next edits read the edit history; an excluded file is never recorded.
                let record = state.config.next_edit.enabled && crate::exclude::excluded_by(&state.config.completion.exclude, uri.0.as_str()).is_none();
                let engine = state.engine.clone().filter(|e| e.config.enabled && e.config.generate_ahead && !e.model.thread_died());
                let Some(doc) = state.docs.get_mut(&uri) else {
                    tracing::warn!(uri = uri.0.as_str(), "didChange for a document that is not open");
                    return;
                };
                let typed = doc.typed_cursor(&params.content_changes, enc);
                let old = record.then(|| doc.rope.clone());
                let edits = doc.apply_all(&params.content_changes, enc);
                self.stats.edited(uri.0.as_str(), &edits);
                let recorded = old.map(|old| {
                    let change = match edits.as_slice() {
                        [e] => Some(crate::nextedit::history::Change { start: e.start, old_end: e.end, new_end: e.start + e.text.chars().count() }),
                        _ => None,
                    };
                    (old, doc.rope.clone(), change)
                });
                doc.version = params.text_document.version;
                let line = typed.map(|at| doc.rope.char_to_line(at.min(doc.rope.len_chars())) as u32);
                let ahead = match (typed, &engine) {
                    (Some(at), Some(e)) => {
                        let position = encoding::from_char(&doc.rope, at, enc);
                        doc.snapshot(position, enc, e.config.lines_before as usize, e.config.lines_after as usize)
                            .ok()
                            .filter(|snap| crate::exclude::skip_request(&e.config, uri.0.as_str(), &snap.text, snap.cursor).is_none())
                    }
                    _ => None,
                };
                if let Some((old, new, change)) = recorded {
                    state.history.record(uri.0.as_str(), &old, &new, change, std::time::Instant::now());
                }
                let left = state.make_active(&uri, line);
                (ahead, state.session(&uri), engine, left)
            };
            // The text moved on: whatever was computing for the old text is wasted work.
            session.text_changed();
            if let Some((uri, touched, line)) = left {
                self.workspace_touched(&uri, touched, line);
            }
            if let (Some(snap), Some(engine)) = (ahead, engine) {
                let cross_file = self.cross_file_for(&uri, &snap);
                engine.start_ahead(&session, OwnedInput { text: snap.text, cursor: snap.cursor, syntax: snap.syntax, cross_file });
            }
        })
        .await
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        contained_notification("textDocument/didClose", async move {
            let uri = params.text_document.uri;
            let closed = {
                let mut state = self.state();
                let doc = state.docs.remove(&uri);
                state.history.forget(uri.0.as_str());
                self.stats.closed(uri.0.as_str());
                if let Some(session) = state.sessions.remove(&uri) {
                    session.close();
                }
                let line = state.active.take_if(|(u, _)| *u == uri).map_or(0, |(_, l)| l);
                doc.map(|d| (d.contents(), line))
            };
            if let Some((touched, line)) = closed {
                self.workspace_touched(&uri, touched, line);
            }
        })
        .await
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        contained_notification("textDocument/didSave", async move {
            let uri = params.text_document.uri;
            let saved = {
                let state = self.state();
                let line = state.active.as_ref().filter(|(u, _)| *u == uri).map_or(0, |(_, l)| *l);
                // The document's tree is the saved text's (the client sends its changes first);
                // a text sent with the save that differs is parsed.
                let doc = state.docs.get(&uri).map(|d| d.contents());
                match (params.text, doc) {
                    (Some(text), Some(doc)) if text == doc.text => Some(doc),
                    (Some(text), _) => Some(document::Touched { text, syntax: None }),
                    (None, doc) => doc,
                }
                .map(|t| (t, line))
            };
            if let Some((touched, line)) = saved {
                self.workspace_touched(&uri, touched, line);
            }
        })
        .await
    }

    async fn did_change_watched_files(&self, params: DidChangeWatchedFilesParams) {
        contained_notification("workspace/didChangeWatchedFiles", async move { self.workspace_files_changed(params.changes) }).await
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        contained_notification("workspace/didChangeConfiguration", async move { self.change_settings(&params.settings).await }).await
    }

    async fn inline_completion(&self, params: InlineCompletionParams) -> Result<Option<InlineCompletionResponse>> {
        contained("textDocument/inlineCompletion", async move {
            let placed = self.suggest(&params.text_document_position_params).await?;
            Ok(placed.map(|p| completion::inline_list(p).into()))
        })
        .await
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        contained("textDocument/completion", async move {
            let placed = self.suggest(&params.text_document_position_params).await?;
            Ok(placed.map(|p| completion::completion_list(p, self.caps().snippet_support).into()))
        })
        .await
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<Vec<CodeActionResponse>>> {
        contained("textDocument/codeAction", async move {
            let next = self.next_edit_action(&params.text_document.uri, params.context.only.as_deref()).await;
            let mut list = self.code_action_list(params).await?;
            if let Some(action) = next {
                list.get_or_insert_with(Vec::new).insert(0, action);
            }
            Ok(list)
        })
        .await
    }

    async fn code_action_resolve(&self, action: CodeAction) -> Result<CodeAction> {
        Ok(actions::resolve(action))
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LspAny>> {
        self.execute(params).await
    }
}
