//! The workspace index as the protocol layer feeds it: made from the workspace folders at
//! `initialize`, filled in the background after `initialized` (with `$/progress`), kept current
//! from `didOpen`/`didSave`/`didClose` and `workspace/didChangeWatchedFiles` (registered
//! dynamically when the client allows it, once), and asked for the cross-file section of a
//! cursor. A settings change that alters what the index reads makes a new one that keeps the
//! open documents' text and the recent chunks; a deleted file leaves both, whatever the order
//! of the watcher's event and `didClose`.
//!
//! Decoding ahead: the head of a document's prompts (BOS and the section) when it opens; the
//! whole prompt where the cursor rests (a code-action request with an empty range says where,
//! as VS Code sends one whenever the cursor moves), again when the index changes under it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tower_lsp_server::gen_lsp_types::*;

use super::document::{Snapshot, Touched};
use super::encoding::Encoding;
use super::state::{uri_to_path, State};
use super::Backend;
use crate::config::Config;
use crate::context::cross_file::Workspace;
use crate::context::{CrossFile, LaidOut};
use crate::session::Session;
use crate::engine::OwnedInput;
use crate::workspace::IndexOptions;

/// The files the watcher registration asks the client to report.
const WATCHED: &str = "**/*.{py,pyi,rs,js,jsx,mjs,cjs,ts,tsx,mts,cts,go}";

/// A workspace for `roots` with the index settings of `config`; `None` without roots or with
/// `completion.crossFile` off.
pub(super) fn make(config: &Config, roots: &[PathBuf]) -> Option<Arc<Workspace>> {
    if !config.completion.cross_file || roots.is_empty() {
        return None;
    }
    let c = &config.context;
    Some(Arc::new(Workspace::new(IndexOptions {
        roots: roots.to_vec(),
        exclude: c.exclude.clone(),
        max_files: c.max_files,
        max_file_bytes: c.max_file_bytes,
        memory_cap_bytes: c.memory_bytes,
    })))
}

/// The workspace after a settings change of what the index may read (`make`'s), which keeps
/// the old one's recent chunks (those the new filters let in) and starts from the open
/// documents' text, from their trees (no parse): the build that follows never replaces it with
/// the disk's.
pub(super) fn remake(state: &State, config: &Config, roots: &[PathBuf]) -> Option<Arc<Workspace>> {
    let ws = make(config, roots)?;
    if let Some(old) = &state.workspace {
        ws.keep_recent(old);
    }
    for (uri, doc) in &state.docs {
        let Some(path) = uri_to_path(uri.0.as_str()) else { continue };
        let touched = doc.contents();
        ws.index.update_parsed(&path, &touched.text, touched.syntax.as_ref().map(|(s, t)| (*s, t)));
    }
    Some(ws)
}

/// Numbers the indexing progress tokens: a rebuild's is not the one a build in flight uses.
static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Backend {
    fn workspace(&self) -> Option<Arc<Workspace>> {
        self.state().workspace.clone()
    }

    /// Indexes the workspace in the background (after `initialized`), reporting `$/progress`
    /// when the client takes it, and asks the client to report file changes (the first time:
    /// a registration stays for the session).
    pub(super) fn index_workspace(&self) {
        let Some(ws) = self.workspace() else { return };
        let client = self.client.clone();
        let progress = self.caps().work_done_progress;
        let watch = self.info().watch_files && !std::mem::replace(&mut self.state().watching, true);
        tokio::spawn(async move {
            if watch {
                let watchers = vec![FileSystemWatcher { glob_pattern: GlobPattern::Pattern(WATCHED.into()), kind: None }];
                let options = serde_json::to_value(DidChangeWatchedFilesRegistrationOptions { watchers }).ok();
                let registration =
                    Registration { id: "ghostline/watched-files".into(), method: "workspace/didChangeWatchedFiles".into(), register_options: options };
                if let Err(e) = client.register_capability(vec![registration]).await {
                    tracing::warn!("the client refused to watch files for the index: {e}");
                }
            }
            let token = ProgressToken::String(format!("ghostline/index/{}/{}", std::process::id(), BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
            let ongoing = if progress && client.create_work_done_progress(token.clone()).await.is_ok() {
                Some(client.progress(token, "ghostline: indexing").with_percentage(0).begin().await)
            } else {
                None
            };
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, usize)>();
            let started = std::time::Instant::now();
            let index = ws.index.clone();
            let build = tokio::task::spawn_blocking(move || {
                index.build(&|done, total| {
                    let _ = tx.send((done, total));
                })
            });
            let mut last = 0;
            while let Some((done, total)) = rx.recv().await {
                let percent = (done * 100 / total.max(1)) as u32;
                if let (Some(p), true) = (&ongoing, percent >= last + 5) {
                    p.report_with_message(format!("{done}/{total} files"), percent).await;
                    last = percent;
                }
            }
            match build.await {
                Ok(stats) => {
                    let what = format!(
                        "{} files, {} definitions, {:.1} MB, {:.1} s{}",
                        stats.files,
                        stats.definitions,
                        stats.bytes as f64 / 1e6,
                        started.elapsed().as_secs_f64(),
                        if stats.truncated { " (limit reached: context.maxFiles or the memory cap)" } else { "" }
                    );
                    tracing::info!("workspace indexed: {what}");
                    if let Some(p) = ongoing {
                        p.finish_with_message(what).await;
                    }
                }
                Err(e) => {
                    tracing::error!("indexing the workspace failed: {e}");
                    if let Some(p) = ongoing {
                        p.finish_with_message("failed (see the log)").await;
                    }
                }
            }
        });
    }

    /// The cross-file section for a snapshot of `uri` (`None`: no workspace, file outside it,
    /// nothing found).
    pub(super) fn cross_file_for(&self, uri: &Uri, snap: &Snapshot) -> Option<CrossFile> {
        let (max_prompt_tokens, laid_out) = {
            let mut state = self.state();
            (state.config.completion.max_prompt_tokens, state.session(uri).laid_out())
        };
        section(&*self.workspace()?, &uri_to_path(uri.0.as_str())?, snap, max_prompt_tokens, laid_out)
    }

    /// The cursor rests at `position` in `uri` (a code-action request for an empty range says
    /// so): the prompt there is made (on a blocking thread) and queued on the model thread
    /// before this returns, so that a request the client sends next finds it decoded or in the
    /// making.
    pub(super) async fn cursor_rests(&self, uri: &Uri, position: Position) {
        self.state().rest = Some((uri.clone(), position));
        let (state, enc) = (Arc::clone(&self.state), self.caps().encoding);
        let _ = tokio::task::spawn_blocking(move || prefill_rest(&state, enc, false)).await;
    }

    /// A document opened: its entries follow the editor's text from now on, a chunk of it joins
    /// the recent ones, and the head of its prompts is decoded ahead.
    pub(super) fn workspace_opened(&self, uri: &Uri, text: &str) {
        let (Some(ws), Some(path)) = (self.workspace(), uri_to_path(uri.0.as_str())) else { return };
        ws.note(&path, text, 0);
        let text = text.to_owned();
        let (snapshot, session) = {
            let mut state = self.state();
            let snapshot = state.docs.get(uri).and_then(|d| d.snapshot(Position::new(0, 0), self.caps().encoding, 0, 0).ok());
            (snapshot, state.session(uri))
        };
        let engine = self.engine();
        let budget = crate::prompt::budget::cross_file_bytes(self.state().config.completion.max_prompt_tokens);
        tokio::task::spawn_blocking(move || {
            ws.index.update(&path, &text);
            let cross = snapshot.and_then(|s| ws.cross_file(&path, &s.text, s.cursor, s.syntax.as_ref().map(|(sp, t)| (*sp, t)), budget));
            // (A blocking task runs inside the runtime: the engine can spawn from here.)
            if let (Some(engine), Some(cross)) = (engine, cross) {
                engine.prefill_head(&session, cross);
            }
        });
    }

    /// A document saved or closed (or left for another): the index takes its text, and a
    /// chunk around `line` joins the recent ones. A document closed whose file is gone from
    /// the disk (deleted while open) leaves both instead.
    pub(super) fn workspace_touched(&self, uri: &Uri, touched: Touched, line: u32) {
        let (Some(ws), Some(path)) = (self.workspace(), uri_to_path(uri.0.as_str())) else { return };
        if !self.state().docs.contains_key(uri) && !path.exists() {
            ws.forget(&path);
            return;
        }
        ws.note(&path, &touched.text, line);
        let (state, enc) = (Arc::clone(&self.state), self.caps().encoding);
        tokio::task::spawn_blocking(move || {
            ws.index.update_parsed(&path, &touched.text, touched.syntax.as_ref().map(|(s, t)| (*s, t)));
            index_changed(&state, enc);
        });
    }

    /// `workspace/didChangeWatchedFiles`: files changed on disk, read through the index's
    /// filters. Open documents follow the editor's text instead, but a deleted one leaves the
    /// index and the recent chunks (leaving or saving it in the editor brings it back).
    pub(super) fn workspace_files_changed(&self, changes: Vec<FileEvent>) {
        let Some(ws) = self.workspace() else { return };
        let open: Vec<Uri> = self.state().docs.keys().cloned().collect();
        let (state, enc) = (Arc::clone(&self.state), self.caps().encoding);
        tokio::task::spawn_blocking(move || {
            let open: std::collections::HashSet<PathBuf> = open.iter().filter_map(|u| uri_to_path(u.0.as_str())).map(|p| crate::workspace::canonical(&p)).collect();
            tracing::debug!(changes = changes.len(), "files changed on disk");
            for change in changes {
                let Some(path) = uri_to_path(change.uri.0.as_str()) else { continue };
                let path = crate::workspace::canonical(&path);
                tracing::trace!(path = %path.display(), kind = ?change.kind, "file changed on disk");
                if change.kind == FileChangeType::Deleted {
                    ws.forget(&path);
                } else if !open.contains(&path) {
                    ws.index.update_from_disk(&path);
                }
            }
            index_changed(&state, enc);
        });
    }
}

/// The cross-file section of `path` for `snap`, within the share of `max_prompt_tokens`, its
/// prompt to lay it out in `laid_out` (the document session's: `Session::laid_out`).
fn section(ws: &Workspace, path: &Path, snap: &Snapshot, max_prompt_tokens: u32, laid_out: LaidOut) -> Option<CrossFile> {
    let budget = crate::prompt::budget::cross_file_bytes(max_prompt_tokens);
    let cross = ws.cross_file(path, &snap.text, snap.cursor, snap.syntax.as_ref().map(|(s, t)| (*s, t)), budget)?;
    Some(CrossFile { laid_out, ..cross })
}

/// The index changed (a file saved, left or changed on disk): generations made ahead with the
/// old cross-file section are no answers for the new one, and the prompt where the cursor
/// rests is decoded again. Blocking, as [`prefill_rest`].
fn index_changed(state: &Mutex<State>, enc: Encoding) {
    state.lock().unwrap_or_else(PoisonError::into_inner).sessions.values().for_each(Session::workspace_changed);
    prefill_rest(state, enc, true);
}

/// Decodes the prompt where the cursor last rested (`State::rest`), if its document is open
/// and completions may run there. `again`: even when it was decoded for this text and cursor
/// already (the workspace changed, and with it maybe the cross-file section), and only when
/// that document is still the active one: a prompt whose
/// tokens are all in the KV cache costs nothing to decode again. Blocking (the section is
/// resolved here); call it off the async threads.
fn prefill_rest(state: &Mutex<State>, enc: Encoding, again: bool) {
    let (engine, session, snap, path, ws, max_prompt_tokens, position) = {
        let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((uri, position)) = st.rest_to_decode(again) else { return };
        let Some(engine) = st.engine.clone() else { return };
        let Some(doc) = st.docs.get(&uri) else { return };
        let Ok(snap) = doc.snapshot(position, enc, engine.config.lines_before as usize, engine.config.lines_after as usize) else { return };
        if crate::exclude::skip_request(&engine.config, uri.0.as_str(), &snap.text, snap.cursor).is_some() {
            return;
        }
        let (ws, max_prompt_tokens) = (st.workspace.clone(), st.config.completion.max_prompt_tokens);
        (engine, st.session(&uri), snap, uri_to_path(uri.0.as_str()), ws, max_prompt_tokens, position)
    };
    let cross_file = match (&ws, &path) {
        // Decoded for no answer: its layout is not the session's (see `Engine::prefill_at`).
        (Some(ws), Some(path)) => section(ws, path, &snap, max_prompt_tokens, LaidOut::default()),
        _ => None,
    };
    if again {
        session.forget_rest();
    }
    if engine.prefill_at(&session, OwnedInput { text: snap.text, cursor: snap.cursor, syntax: snap.syntax, cross_file }) {
        tracing::debug!(line = position.line, character = position.character, again, "decoding the prompt where the cursor rests");
    }
}
