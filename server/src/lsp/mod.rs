//! The language server: LSP over stdio (tower-lsp-server), turning editor requests into engine
//! calls. The only module that knows LSP types.
//!
//! A keystroke arrives as `didChange` (applied at once, before any await; with
//! `completion.generateAhead`, it also starts the suggestion for the cursor after it), then as
//! `textDocument/inlineCompletion` (VS Code, Neovim 0.12) or `textDocument/completion` (Helix
//! and older clients). Each completion snapshots a window of its document, supersedes the
//! previous work on that document (unless it is the generation ahead for this very cursor,
//! which becomes its answer), asks the [`Engine`], and drops its answer if the document moved
//! on meanwhile.

pub mod actions;
pub mod document;
pub mod encoding;
pub mod transport;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::Value;
use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::{Client, LanguageServer, LspService, Server};

use crate::config::{self, Config};
use crate::engine::{Engine, Input, OwnedInput, Suggestion};
use crate::model::{CancelFlag, GenerateError, ModelHandle, ModelStatus, Sampling};
use document::Document;
use encoding::Encoding;

/// Set once the client asked for `shutdown`: the process then exits with 0, else with 1 (the
/// LSP specification's rule for `exit`; an editor that vanishes without either gets 1 too).
static SHUTDOWN_ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs the server on stdin/stdout until the client exits. Returns whether `shutdown` came
/// first, which decides the exit code.
pub async fn serve_stdio() -> bool {
    let (service, socket) =
        LspService::build(Backend::new).custom_method("ghostline/lastTimings", Backend::last_timings).finish();
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
    docs: Mutex<HashMap<Uri, Document>>,
    encoding: RwLock<Encoding>,
    config: RwLock<Config>,
    /// The settings in force as the editor sent them: `initializationOptions` with every
    /// `didChangeConfiguration` since laid over them key by key ([`config::layer`]).
    settings: Mutex<Value>,
    engine: RwLock<Option<Arc<Engine>>>,
    /// The work running per document; a change or a request for another cursor cancels it.
    inflight: Mutex<HashMap<Uri, Inflight>>,
    /// Set in `initialize`, shown once the client is ready for messages.
    init_messages: Mutex<Vec<(MessageType, String)>>,
    work_done_progress: RwLock<bool>,
    /// When the model thread was restarted after dying, for the restart limit.
    restarts: Mutex<Vec<std::time::Instant>>,
    /// The client expands snippets in completion items.
    snippet_support: RwLock<bool>,
    /// The last completion the engine answered, for `ghostline/lastTimings`.
    last_timings: Mutex<Option<Value>>,
    /// Code actions' state: route memory, breaker, budget, the cloud client once built.
    actions: actions::ActionState,
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

/// Cancels a request's model work when its future is dropped (e.g. on `$/cancelRequest`).
struct CancelOnDrop(CancelFlag);

/// Resolves once `flag` is cancelled (looked at every 10 ms).
async fn cancelled(flag: &CancelFlag) {
    while !flag.is_cancelled() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The model work running for one document: the generation started ahead on its last
/// keystroke and the requests since. A change, or a request for a cursor the generation ahead
/// was not made for, cancels all of it.
#[derive(Default)]
struct Inflight {
    flags: Vec<CancelFlag>,
    /// The version and cursor the generation ahead is for.
    ahead: Option<(i32, Position)>,
}

impl Inflight {
    fn cancel(&mut self) {
        self.flags.drain(..).for_each(|f| f.cancel());
        self.ahead = None;
    }
}

/// A suggestion placed in the document.
struct Placed {
    suggestion: Suggestion,
    cursor: Position,
    /// Start of the identifier that ends at the cursor, and its text.
    word_start: Position,
    word: String,
    /// The cursor line's indentation (the blanks it starts with, up to the cursor).
    indent: String,
}

impl Backend {
    fn new(client: Client) -> Self {
        Backend {
            client,
            docs: Mutex::default(),
            encoding: RwLock::default(),
            config: RwLock::new(Config::default()),
            settings: Mutex::new(Value::Null),
            engine: RwLock::default(),
            inflight: Mutex::default(),
            init_messages: Mutex::default(),
            work_done_progress: RwLock::new(false),
            restarts: Mutex::default(),
            snippet_support: RwLock::new(false),
            last_timings: Mutex::default(),
            actions: actions::ActionState::default(),
        }
    }

    /// Parses settings; reports unknown keys as a logged warning and bad values as an error.
    fn read_settings(&self, value: &Value) -> std::result::Result<Config, String> {
        let parsed = config::parse(value)?;
        if !parsed.unknown_keys.is_empty() {
            tracing::warn!(keys = ?parsed.unknown_keys, "ignoring unknown ghostline settings");
        }
        let mut config = parsed.options.resolve(config::env_model());
        // No model named: look where users already keep models (model::discover).
        crate::model::discover::fill_in(&mut config.model);
        crate::config::set_log_code(config.log_code);
        Ok(config)
    }

    /// (Re)starts the model with the current configuration. Its loading is reported to the
    /// client when `report` is set (only once the client is initialized).
    fn start_model(&self, report: bool) {
        let config = self.config.read().unwrap_or_else(PoisonError::into_inner).clone();
        // The new model loads only once the old thread has let its model go: one resident.
        let previous = self.engine().map(|e| e.model.residency());
        let handle = ModelHandle::spawn_after(&config.model, Sampling::from(&config.completion), previous);
        let engine = Arc::new(Engine::new(handle, config.completion.clone()));
        let old = self.engine.write().unwrap_or_else(PoisonError::into_inner).replace(engine);
        if let Some(old) = old {
            // Joining the old model thread may wait for its current job: not on the runtime.
            tokio::task::spawn_blocking(move || drop(old));
        }
        if report {
            self.report_model_status();
        }
    }

    /// Completion settings the model thread does not fix at start: a new engine on the same
    /// model, no reload. With no engine (the model kept stopping), a settings change starts it.
    fn apply_completion_settings(&self) {
        let completion = self.config.read().unwrap_or_else(PoisonError::into_inner).completion.clone();
        let mut slot = self.engine.write().unwrap_or_else(PoisonError::into_inner);
        match slot.as_ref() {
            Some(engine) => *slot = Some(Arc::new(engine.with_config(completion))),
            None => {
                drop(slot);
                self.start_model(true);
            }
        }
    }

    fn report_model_status(&self) {
        if let Some(engine) = self.engine() {
            let progress = *self.work_done_progress.read().unwrap_or_else(PoisonError::into_inner);
            tokio::spawn(report_model_status(self.client.clone(), engine.model.status(), progress));
        }
    }

    /// `ghostline/lastTimings`: what the engine measured for the last completion it answered
    /// (shown or not), with its prompt's token ids and what became of the generations made
    /// ahead so far; `null` before any. Used by `ghostline
    /// bench`; normal responses carry no timings.
    async fn last_timings(&self) -> Result<Option<Value>> {
        Ok(self.last_timings.lock().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// The model thread died (a panic outside any job): tell the user and load the model
    /// again, at most three times in ten minutes.
    async fn restart_dead_model(&self) {
        let why = crate::fault::last_panic().unwrap_or_else(|| "unknown cause".into());
        let allowed = {
            let mut restarts = self.restarts.lock().unwrap_or_else(PoisonError::into_inner);
            let now = std::time::Instant::now();
            restarts.retain(|t| now.duration_since(*t) < std::time::Duration::from_secs(600));
            restarts.push(now);
            restarts.len() <= 3
        };
        if allowed {
            tracing::error!("the model thread stopped ({why}); reloading the model");
            self.client
                .show_message(MessageType::Warning, format!("ghostline: the model stopped unexpectedly ({why}); reloading it"))
                .await;
            self.start_model(true);
        } else {
            self.engine.write().unwrap_or_else(PoisonError::into_inner).take();
            self.client
                .show_message(MessageType::Error, format!("ghostline: the model keeps stopping ({why}); completions are off until the settings change"))
                .await;
        }
    }

    fn engine(&self) -> Option<Arc<Engine>> {
        self.engine.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Shared path of both completion requests.
    async fn suggest(&self, params: &TextDocumentPositionParams) -> Result<Option<Placed>> {
        let enc = *self.encoding.read().unwrap_or_else(PoisonError::into_inner);
        let uri = &params.text_document.uri;
        crate::fault::point("completion");
        let Some(mut engine) = self.engine() else { return Ok(None) };
        if engine.model.thread_died() {
            self.restart_dead_model().await;
            match self.engine() {
                Some(e) => engine = e,
                None => return Ok(None),
            }
        }
        if !self.config.read().unwrap_or_else(PoisonError::into_inner).completion.enabled {
            return Ok(None);
        }
        let (snap, word_start, word, indent) = {
            let docs = self.docs.lock().unwrap_or_else(PoisonError::into_inner);
            let doc = docs
                .get(uri)
                .ok_or_else(|| Error::invalid_params(format!("unknown document: {}", uri.0.as_str())))?;
            let before = engine.config.lines_before as usize;
            let after = engine.config.lines_after as usize;
            let snap = doc
                .snapshot(params.position, enc, before, after)
                .map_err(|e| Error::invalid_params(e.to_string()))?;
            let line_start = snap.text[..snap.cursor].rfind('\n').map_or(0, |i| i + 1);
            let word: String = snap.text[line_start..snap.cursor]
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let word_start = encoding::from_char(&doc.rope, snap.cursor_char - word.chars().count(), enc);
            let indent: String = snap.text[line_start..snap.cursor].chars().take_while(|c| *c == ' ' || *c == '\t').collect();
            (snap, word_start, word, indent)
        };
        if let Some(why) = crate::exclude::skip_request(&engine.config, uri.0.as_str(), &snap.text, snap.cursor) {
            tracing::debug!("no completion request: {why}");
            return Ok(None);
        }
        let cursor = {
            let docs = self.docs.lock().unwrap_or_else(PoisonError::into_inner);
            encoding::from_char(&docs[uri].rope, snap.cursor_char, enc)
        };

        let cancel = CancelFlag::new();
        {
            let mut inflight = self.inflight.lock().unwrap_or_else(PoisonError::into_inner);
            let work = inflight.entry(uri.clone()).or_default();
            // The generation ahead for this very cursor is this request's answer in the making:
            // queue behind it (the model thread then finds it in its suggestion cache).
            if work.ahead != Some((snap.version, params.position)) {
                work.cancel();
            }
            work.flags.push(cancel.clone());
        }
        let _guard = CancelOnDrop(cancel.clone());
        let input = Input {
            text: &snap.text,
            cursor: snap.cursor,
            syntax: snap.syntax.as_ref().map(|(spec, tree)| (*spec, tree)),
        };
        // The text moving on (or a request for another cursor) cancels this one: answer at
        // once then, not when the model gets to look at the flag (after a prompt that may take
        // seconds on a busy machine). Helix ignores its automatic triggers while a request is
        // in flight, so a late answer here would cost the user the next suggestion.
        let result = tokio::select! {
            biased;
            result = engine.complete(input, cancel.clone()) => result,
            () = cancelled(&cancel) => Err(GenerateError::Cancelled),
        };
        let result = result.map(|s| crate::exclude::drop_redundant(s, &snap.text[snap.cursor..]));
        let current = self.docs.lock().unwrap_or_else(PoisonError::into_inner).get(uri).map(|d| d.version);
        if let Ok(s) = &result {
            let shown = current == Some(snap.version) && !s.text.is_empty();
            *self.last_timings.lock().unwrap_or_else(PoisonError::into_inner) = Some(serde_json::json!({
                "uri": uri, "version": snap.version, "position": params.position, "shown": shown,
                "text": s.text, "timings": s.timings, "prompt": s.timings.prompt,
                "ahead": engine.ahead_counts(),
            }));
        }
        match result {
            Ok(suggestion) if current == Some(snap.version) && !suggestion.text.is_empty() => {
                tracing::debug!(
                    ttft_ms = suggestion.timings.ttft_ms,
                    total_ms = suggestion.timings.total_ms,
                    prompt_tokens = suggestion.timings.prompt_tokens,
                    reused = suggestion.timings.reused_tokens,
                    "suggestion"
                );
                Ok(Some(Placed { suggestion, cursor, word_start, word, indent }))
            }
            Err(GenerateError::Unavailable(why)) if why == crate::model::THREAD_STOPPED => {
                // It died under this request: start it again now, so that the next one works.
                self.restart_dead_model().await;
                Ok(None)
            }
            Ok(_) | Err(GenerateError::Cancelled) | Err(GenerateError::Unavailable(_)) => Ok(None),
            Err(e @ GenerateError::Failed(_)) => {
                tracing::error!("{e}");
                Err(Error { code: tower_lsp_server::jsonrpc::ErrorCode::InternalError, message: e.to_string().into(), data: None })
            }
        }
    }
}

/// What a settings change asks of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SettingsChange {
    /// `model.*` or the sampling the model thread fixes at start: load the model again.
    Model,
    /// Other completion settings (read per request): swap them in, keep the model.
    Completion,
    /// Nothing the engine uses (cloud, actions, privacy…: read where they are used).
    Other,
}

fn settings_change(old: &Config, new: &Config) -> SettingsChange {
    if old.model != new.model || Sampling::from(&old.completion) != Sampling::from(&new.completion) {
        SettingsChange::Model
    } else if old.completion != new.completion {
        SettingsChange::Completion
    } else {
        SettingsChange::Other
    }
}

/// Follows the model's status for the life of its thread: `$/progress` while it loads (when the
/// client supports it; again for a reload after `model.keepAlive`), and `window/showMessage`
/// when it fails or is not configured.
async fn report_model_status(client: Client, mut status: tokio::sync::watch::Receiver<ModelStatus>, progress: bool) {
    static LOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut ongoing = None;
    let mut first = true;
    let mut announced = false;
    let mut was_unloaded = false;
    loop {
        let current = status.borrow_and_update().clone();
        // Even a load that finished before we looked (the first one, before the client was
        // ready; or a reload seen only once ready) is shown as begin … end.
        let load_starts = match &current {
            ModelStatus::NotConfigured | ModelStatus::Unloaded(_) => false,
            ModelStatus::Loading { .. } => true,
            _ => first || was_unloaded,
        };
        first = false;
        was_unloaded = matches!(current, ModelStatus::Unloaded(_));
        if progress && load_starts && ongoing.is_none() {
            let n = LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let token = ProgressToken::String(format!("ghostline/model-load/{}/{n}", std::process::id()));
            if client.create_work_done_progress(token.clone()).await.is_ok() {
                ongoing = Some(client.progress(token, "ghostline: loading model").with_percentage(0).begin().await);
            }
        }
        match current {
            ModelStatus::Loading { progress } => {
                if let Some(p) = &ongoing {
                    p.report((progress * 100.0) as u32).await;
                }
            }
            ModelStatus::Ready(info) => {
                if let Some(p) = ongoing.take() {
                    p.finish_with_message(format!("ready: {}", info.format)).await;
                }
                client
                    .log_message(MessageType::Info, format!("ghostline: model ready ({}, {}, {} ms)", info.path.display(), info.format, info.load_ms.round()))
                    .await;
                let memory = info.memory.as_ref().map_or_else(|| format!("context {} tokens", info.n_ctx), |p| p.describe());
                client
                    .log_message(MessageType::Info, format!("ghostline: backend {} (GPU layers: {}); memory: {memory}", info.backend, info.gpu_layers))
                    .await;
                if let (Some(why), false) = (&info.discovered, announced) {
                    client.show_message(MessageType::Info, format!("ghostline: {why}")).await;
                }
                announced = true;
            }
            ModelStatus::Unloaded(info) => {
                client
                    .log_message(
                        MessageType::Info,
                        format!("ghostline: model unloaded after model.keepAlive of inactivity ({}); the next request loads it again", info.path.display()),
                    )
                    .await;
            }
            ModelStatus::Failed(message) => {
                if let Some(p) = ongoing.take() {
                    p.finish_with_message("failed").await;
                }
                client.show_message(MessageType::Error, format!("ghostline: {message}")).await;
                return;
            }
            ModelStatus::NotConfigured => {
                client
                    .show_message(
                        MessageType::Warning,
                        format!("ghostline: no model configured, and none found in the Hugging Face, LM Studio, llama.cpp or Ollama folders (see `ghostline models`); set `model.path` in the settings or the {} environment variable", config::MODEL_ENV),
                    )
                    .await;
                return;
            }
        }
        if status.changed().await.is_err() {
            return;
        }
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let general = params.capabilities.general.as_ref();
        let enc = Encoding::negotiate(general.and_then(|g| g.position_encodings.as_deref()));
        *self.encoding.write().unwrap_or_else(PoisonError::into_inner) = enc;
        *self.work_done_progress.write().unwrap_or_else(PoisonError::into_inner) =
            params.capabilities.window.as_ref().and_then(|w| w.work_done_progress).unwrap_or(false);
        *self.snippet_support.write().unwrap_or_else(PoisonError::into_inner) = params
            .capabilities
            .text_document
            .as_ref()
            .and_then(|t| t.completion.as_ref())
            .and_then(|c| c.completion_item.as_ref())
            .and_then(|i| i.snippet_support)
            .unwrap_or(false);
        self.actions.init(&params);
        let options = params.initialization_options.unwrap_or(Value::Null);
        match self.read_settings(&options) {
            Ok(config) => {
                *self.config.write().unwrap_or_else(PoisonError::into_inner) = config;
                *self.settings.lock().unwrap_or_else(PoisonError::into_inner) = config::layer(&Value::Null, &options);
            }
            Err(message) => {
                tracing::error!("{message}");
                let defaults = config::Options::default().resolve(config::env_model());
                *self.config.write().unwrap_or_else(PoisonError::into_inner) = defaults;
                self.init_messages.lock().unwrap_or_else(PoisonError::into_inner).push((MessageType::Error, format!("ghostline: {message}; using defaults")));
            }
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
                    commands: vec![actions::RUN.into(), actions::LAST_ROUTE.into()],
                    ..Default::default()
                }),
                ..Default::default()
            },
            server_info: Some(ServerInfo { name: "ghostline".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        let messages = std::mem::take(&mut *self.init_messages.lock().unwrap_or_else(PoisonError::into_inner));
        for (kind, message) in messages {
            self.client.show_message(kind, message).await;
        }
        self.report_model_status();
    }

    async fn shutdown(&self) -> Result<()> {
        SHUTDOWN_ASKED.store(true, std::sync::atomic::Ordering::SeqCst);
        for work in self.inflight.lock().unwrap_or_else(PoisonError::into_inner).values_mut() {
            work.cancel();
        }
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        contained_notification("textDocument/didOpen", async move {
            let d = params.text_document;
            let language: String = d.language_id.into();
            self.docs.lock().unwrap_or_else(PoisonError::into_inner).insert(d.uri, Document::new(&d.text, d.version, language));
        })
        .await
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        contained_notification("textDocument/didChange", async move {
            let enc = *self.encoding.read().unwrap_or_else(PoisonError::into_inner);
            let uri = params.text_document.text_document_identifier.uri;
            let mut docs = self.docs.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(doc) = docs.get_mut(&uri) else {
                tracing::warn!(uri = uri.0.as_str(), "didChange for a document that is not open");
                return;
            };
            let typed = doc.typed_cursor(&params.content_changes, enc);
            doc.apply_all(&params.content_changes, enc);
            doc.version = params.text_document.version;
            let engine = self.engine().filter(|e| e.config.enabled && e.config.generate_ahead && !e.model.thread_died());
            let ahead = match (typed, &engine) {
                (Some(at), Some(e)) => {
                    let position = encoding::from_char(&doc.rope, at, enc);
                    doc.snapshot(position, enc, e.config.lines_before as usize, e.config.lines_after as usize)
                        .ok()
                        .filter(|snap| crate::exclude::skip_request(&e.config, uri.0.as_str(), &snap.text, snap.cursor).is_none())
                        .map(|snap| (position, snap))
                }
                _ => None,
            };
            drop(docs);
            // The text moved on: whatever was computing for the old text is wasted work.
            self.inflight.lock().unwrap_or_else(PoisonError::into_inner).entry(uri.clone()).or_default().cancel();
            // Start on the suggestion the editor will ask for after its debounce.
            if let (Some((position, snap)), Some(engine)) = (ahead, engine) {
                let cancel = CancelFlag::new();
                let version = snap.version;
                let input = OwnedInput { text: snap.text, cursor: snap.cursor, syntax: snap.syntax };
                if engine.generate_ahead(input, cancel.clone()) {
                    let mut inflight = self.inflight.lock().unwrap_or_else(PoisonError::into_inner);
                    let work = inflight.entry(uri).or_default();
                    work.flags.push(cancel);
                    work.ahead = Some((version, position));
                }
            }
        })
        .await
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        contained_notification("textDocument/didClose", async move {
            let uri = params.text_document.uri;
            self.docs.lock().unwrap_or_else(PoisonError::into_inner).remove(&uri);
            if let Some(mut work) = self.inflight.lock().unwrap_or_else(PoisonError::into_inner).remove(&uri) {
                work.cancel();
            }
        })
        .await
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        contained_notification("workspace/didChangeConfiguration", async move {
            // A change names only what changes: it is laid over the settings in force.
            let layered = match config::check_shape(&params.settings) {
                Ok(()) => {
                    let change = config::unwrap_namespace(&params.settings);
                    if change.is_null() || change.as_object().is_some_and(|m| m.is_empty()) {
                        tracing::debug!("didChangeConfiguration without settings: nothing changes");
                        return;
                    }
                    Ok(config::layer(&self.settings.lock().unwrap_or_else(PoisonError::into_inner), change))
                }
                Err(message) => Err(message),
            };
            match layered.and_then(|layered| self.read_settings(&layered).map(|config| (layered, config))) {
                Ok((layered, new)) => {
                    let change = {
                        let mut config = self.config.write().unwrap_or_else(PoisonError::into_inner);
                        let change = settings_change(&config, &new);
                        *config = new;
                        *self.settings.lock().unwrap_or_else(PoisonError::into_inner) = layered;
                        change
                    };
                    match change {
                        SettingsChange::Model => self.start_model(true),
                        SettingsChange::Completion => self.apply_completion_settings(),
                        SettingsChange::Other => {}
                    }
                }
                Err(message) => {
                    tracing::error!("{message}");
                    self.client.show_message(MessageType::Error, format!("ghostline: {message}; keeping the previous settings")).await;
                }
            }
        })
        .await
    }

    async fn inline_completion(&self, params: InlineCompletionParams) -> Result<Option<InlineCompletionResponse>> {
        contained("textDocument/inlineCompletion", async move {
            let Some(placed) = self.suggest(&params.text_document_position_params).await? else {
                return Ok(None);
            };
            let item = InlineCompletionItem {
                insert_text: placed.suggestion.text.into(),
                filter_text: None,
                range: Some(Range { start: placed.cursor, end: placed.cursor }),
                command: None,
            };
            Ok(Some(InlineCompletionList { items: vec![item] }.into()))
        })
        .await
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        contained("textDocument/completion", async move {
            let Some(placed) = self.suggest(&params.text_document_position_params).await? else {
                return Ok(None);
            };
            Ok(Some(completion_list(placed, *self.snippet_support.read().unwrap_or_else(PoisonError::into_inner)).into()))
        })
        .await
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<Vec<CodeActionResponse>>> {
        self.code_action_list(params).await
    }

    async fn code_action_resolve(&self, action: CodeAction) -> Result<CodeAction> {
        self.code_action_resolve_command(action).await
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LspAny>> {
        self.execute(params).await
    }
}

/// The suggestion as a completion item for clients without ghost text (Helix): it replaces
/// the word before the cursor with that word plus the suggestion, so the client's fuzzy filter
/// (which matches `filterText` against the typed word) keeps it in the list.
fn completion_list(placed: Placed, snippets: bool) -> CompletionList {
    let new_text = format!("{}{}", placed.word, placed.suggestion.text);
    let first_line = new_text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let mut label: String = first_line.chars().take(80).collect();
    if new_text.trim().contains('\n') || first_line.chars().count() > 80 {
        label.push('…');
    }
    let filter_text = new_text.lines().next().unwrap_or("").to_owned();
    // A snippet's continuation lines get the cursor line's indentation from the client (Helix's
    // snippet renderer and Neovim's vim.snippet.expand both prepend it): send them without it.
    // A line that does not start with it (or a blank one, which would gain trailing blanks)
    // cannot be written so: then the text goes as plain text, inserted as it is.
    let snippet_text = snippets.then(|| dedent_continuation(&new_text, &placed.indent)).flatten();
    let item = CompletionItem {
        label,
        // Helix treats an item of kind Snippet as a snippet whatever its format.
        kind: Some(if snippet_text.is_some() { CompletionItemKind::Snippet } else { CompletionItemKind::Text }),
        detail: Some(format!("ghostline · {:.0} ms", placed.suggestion.timings.total_ms)),
        documentation: Some(
            MarkupContent { kind: MarkupKind::PlainText, value: new_text.clone() }.into(),
        ),
        filter_text: Some(filter_text),
        sort_text: Some("0".into()),
        preselect: Some(true),
        // As a snippet where supported: Neovim inserts a plain-text item only up to its first
        // space, but expands a snippet whole (multi-line included).
        insert_text_format: Some(if snippet_text.is_some() { InsertTextFormat::Snippet } else { InsertTextFormat::PlainText }),
        text_edit: Some(
            TextEdit {
                range: Range { start: placed.word_start, end: placed.cursor },
                new_text: match snippet_text {
                    Some(text) => escape_snippet(&text),
                    None => new_text,
                },
            }
            .into(),
        ),
        ..Default::default()
    };
    // Incomplete: the client asks again as the user types, so the suggestion follows the text.
    CompletionList { is_incomplete: true, items: vec![item], ..Default::default() }
}

/// `text` with `indent` taken off the start of each line after the first; `None` when one of
/// those lines is blank or does not start with it.
fn dedent_continuation(text: &str, indent: &str) -> Option<String> {
    let mut lines = text.split('\n');
    let mut out = lines.next().unwrap_or_default().to_owned();
    for line in lines {
        let rest = line.strip_prefix(indent).filter(|_| !line.trim().is_empty())?;
        out.push('\n');
        out.push_str(rest);
    }
    Some(out)
}

/// Text as a snippet that inserts exactly it: `\`, `$` and `}` escaped.
fn escape_snippet(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '$' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(text: &str, word: &str, indent: &str) -> Placed {
        let suggestion = Suggestion { text: text.into(), timings: Default::default(), strategy: crate::context::Strategy::Window };
        let at = Position { line: 3, character: (indent.len() + word.len()) as u32 };
        let word_start = Position { line: 3, character: indent.len() as u32 };
        Placed { suggestion, cursor: at, word_start, word: word.into(), indent: indent.into() }
    }

    fn edit(list: &CompletionList) -> (&str, Option<InsertTextFormat>) {
        let item = &list.items[0];
        let Some(CompletionItemTextEdit::TextEdit(edit)) = &item.text_edit else { panic!("{item:?}") };
        let snippet = item.insert_text_format == Some(InsertTextFormat::Snippet);
        assert_eq!(item.kind == Some(CompletionItemKind::Snippet), snippet, "kind Snippet for snippets only: {item:?}");
        (edit.new_text.as_str(), item.insert_text_format)
    }

    /// Helix and Neovim indent a snippet's continuation lines like the cursor's line: the item
    /// leaves that indentation out, or goes as plain text when it cannot.
    #[test]
    fn snippet_items_leave_the_line_indentation_to_the_client() {
        let list = completion_list(placed("rn x\n    y = $1\n        z", "retu", "    "), true);
        assert_eq!(edit(&list), ("return x\ny = \\$1\n    z", Some(InsertTextFormat::Snippet)));
        // A line indented less than the cursor's line, or a blank one: plain text, as it is.
        for text in ["rn x\nfoo()", "rn x\n\n    y"] {
            let list = completion_list(placed(text, "retu", "    "), true);
            assert_eq!(edit(&list), (format!("retu{text}").as_str(), Some(InsertTextFormat::PlainText)));
        }
        // No snippet support: plain text, whole.
        let list = completion_list(placed("rn x\n    y", "retu", "    "), false);
        assert_eq!(edit(&list), ("return x\n    y", Some(InsertTextFormat::PlainText)));
    }

    #[test]
    fn only_model_and_sampling_settings_reload_the_model() {
        let base = config::Options::default().resolve(Some("a.gguf".into()));
        let with = |edit: &dyn Fn(&mut Config)| {
            let mut c = base.clone();
            edit(&mut c);
            settings_change(&base, &c)
        };
        assert_eq!(with(&|_| {}), SettingsChange::Other);
        assert_eq!(with(&|c| c.completion.enabled = false), SettingsChange::Completion);
        assert_eq!(with(&|c| c.completion.max_tokens = 3), SettingsChange::Completion);
        assert_eq!(with(&|c| c.completion.lines_before = 3), SettingsChange::Completion);
        assert_eq!(with(&|c| c.completion.typed_ahead = false), SettingsChange::Completion);
        assert_eq!(with(&|c| c.completion.repeat_penalty = 1.3), SettingsChange::Model);
        assert_eq!(with(&|c| c.completion.repeat_last_n = 8), SettingsChange::Model);
        assert_eq!(with(&|c| c.model.path = Some("b.gguf".into())), SettingsChange::Model);
        assert_eq!(with(&|c| c.model.threads += 1), SettingsChange::Model);
        assert_eq!(with(&|c| c.offline = !c.offline), SettingsChange::Other);
    }
}
