//! The workspace index as the protocol layer feeds it: made from the workspace folders at
//! `initialize`, filled in the background after `initialized` (with `$/progress`), kept current
//! from `didOpen`/`didSave`/`didClose` and `workspace/didChangeWatchedFiles` (registered
//! dynamically when the client allows it), and asked for the cross-file section of a cursor.
//! The section of the document the user is in is prefilled ahead when it opens.

use std::path::PathBuf;
use std::sync::Arc;

use tower_lsp_server::gen_lsp_types::*;

use super::document::Snapshot;
use super::state::uri_to_path;
use super::Backend;
use crate::config::Config;
use crate::context::cross_file::Workspace;
use crate::context::CrossFile;
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

impl Backend {
    fn workspace(&self) -> Option<Arc<Workspace>> {
        self.state().workspace.clone()
    }

    /// Indexes the workspace in the background (after `initialized`), reporting `$/progress`
    /// when the client takes it, and asks the client to report file changes.
    pub(super) fn index_workspace(&self) {
        let Some(ws) = self.workspace() else { return };
        let client = self.client.clone();
        let progress = self.caps().work_done_progress;
        let watch = self.info().watch_files;
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
            let token = ProgressToken::String(format!("ghostline/index/{}", std::process::id()));
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
        let ws = self.workspace()?;
        let path = uri_to_path(uri.0.as_str())?;
        let budget = crate::prompt::budget::cross_file_bytes(self.state().config.completion.max_prompt_tokens);
        ws.cross_file(&path, &snap.text, snap.cursor, snap.syntax.as_ref().map(|(s, t)| (*s, t)), budget)
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
    /// chunk around `line` joins the recent ones.
    pub(super) fn workspace_touched(&self, uri: &Uri, text: &str, line: u32) {
        let (Some(ws), Some(path)) = (self.workspace(), uri_to_path(uri.0.as_str())) else { return };
        ws.note(&path, text, line);
        let text = text.to_owned();
        tokio::task::spawn_blocking(move || ws.index.update(&path, &text));
    }

    /// `workspace/didChangeWatchedFiles`: files changed on disk. Open documents follow the
    /// editor's text instead.
    pub(super) fn workspace_files_changed(&self, changes: Vec<FileEvent>) {
        let Some(ws) = self.workspace() else { return };
        let open: Vec<PathBuf> = self.state().docs.keys().filter_map(|u| uri_to_path(u.0.as_str())).collect();
        tokio::task::spawn_blocking(move || {
            for change in changes {
                let Some(path) = uri_to_path(change.uri.0.as_str()) else { continue };
                if open.contains(&path) {
                    continue;
                }
                if change.kind == FileChangeType::Deleted {
                    ws.index.remove(&path);
                } else {
                    match std::fs::read_to_string(&path) {
                        Ok(text) => ws.index.update(&path, &text),
                        Err(_) => ws.index.remove(&path),
                    }
                }
            }
        });
    }
}
