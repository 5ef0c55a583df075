//! The protocol layer's state: what the client said at `initialize` (captured once, typed) and
//! what notifications change (documents, completion sessions, settings, the engine), behind one
//! lock.
//!
//! **Ordering rule.** A `didChange` is applied before the next request on that document is looked
//! at. tower-lsp-server polls each message's handler for the first time in the order the
//! messages arrived; the notification handlers that change [`State`] (`didOpen`, `didChange`,
//! `didClose`) make their change before their first `await` (they have none), and request
//! handlers read a document only through [`State`]. So a request written right after a
//! `didChange` sees its text (`tests/lsp_e2e.rs`,
//! `a_request_right_after_a_change_sees_the_changed_text`).
//!
//! **Locking.** [`State`] is one `Mutex`, never held across an `await`, nor while the engine or
//! the action service runs; a completion session's own lock is taken only after it (or alone).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;
use tower_lsp_server::gen_lsp_types::{InitializeParams, MessageType, Position, ResourceOperationKind, Uri, WorkspaceFolders};

use super::document::{Document, Touched};
use super::encoding::Encoding;
use crate::config::Config;
use crate::engine::Engine;
use crate::session::Session;
pub use crate::uri::{path_to_uri, uri_to_path};


/// `ghostline/lastTimings`' answer: the last completion the engine answered, as the server sends
/// it and `ghostline bench`, its soak and `--warm-cold` read it back (one type, no JSON picked
/// apart key by key).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LastCompletion {
    pub uri: String,
    pub version: i32,
    /// The request's position, in the negotiated encoding.
    pub position: LastPosition,
    /// Whether the editor was given the suggestion (the document had not moved on, and it was
    /// not empty).
    pub shown: bool,
    pub text: String,
    pub timings: crate::model::Timings,
    /// The prompt's token ids (the bench replays them against its peer).
    pub prompt: Vec<crate::model::Token>,
    /// Generating ahead since the model was started.
    pub ahead: crate::engine::AheadCounts,
    /// The cross-file section exactly as the prompt that made the answer carried it: what its
    /// budget kept, with `<file_sep>` before each path where the model has a file separator
    /// (`# path: …` comment headers otherwise); empty when there was none.
    #[serde(default)]
    pub cross_file: String,
}

/// A line and a character, as LSP counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LastPosition {
    pub line: u32,
    pub character: u32,
}

/// What notifications change. See the module's ordering and locking rules.
pub struct State {
    pub docs: HashMap<Uri, Document>,
    /// The completion session of each open document: its generation ahead, the requests in
    /// flight and the last suggestion shown.
    pub sessions: HashMap<Uri, Session>,
    pub config: Config,
    /// The settings in force as the editor sent them: `initializationOptions` with every
    /// `didChangeConfiguration` since laid over them key by key (`config::layer`).
    pub settings: Value,
    /// `None` before `initialize`, and after the model kept stopping.
    pub engine: Option<std::sync::Arc<Engine>>,
    /// Set in `initialize`, shown once the client is ready for messages.
    pub init_messages: Vec<(MessageType, String)>,
    /// When the model thread was restarted after dying, for the restart limit.
    pub restarts: Vec<Instant>,
    /// The last completion the engine answered, for `ghostline/lastTimings`.
    pub last_timings: Option<LastCompletion>,
    /// The workspace index and recent chunks (`completion.crossFile`); `None` without
    /// workspace folders.
    pub workspace: Option<std::sync::Arc<crate::context::cross_file::Workspace>>,
    /// The client was asked to report file changes (once a session: a rebuild does not ask again).
    pub watching: bool,
    /// The document the user last typed or asked in, and the cursor's line there: leaving it
    /// for another hands its text to the index and a chunk of it to the recent ones.
    pub active: Option<(Uri, u32)>,
    /// Where the cursor last rested, as a code-action request or a completion request said:
    /// the prompt there is decoded ahead (again when the workspace changes).
    pub rest: Option<(Uri, Position)>,
    /// The last edit events (`nextEdit.enabled`), in memory only; a document's go when it closes.
    pub history: crate::nextedit::History,
}

impl Default for State {
    fn default() -> Self {
        State {
            docs: HashMap::new(),
            sessions: HashMap::new(),
            config: Config::default(),
            settings: Value::Null,
            engine: None,
            init_messages: Vec::new(),
            restarts: Vec::new(),
            last_timings: None,
            workspace: None,
            watching: false,
            active: None,
            rest: None,
            history: Default::default(),
        }
    }
}

impl State {
    /// The session of `uri`, made on first use.
    pub fn session(&mut self, uri: &Uri) -> Session {
        let session = self.sessions.entry(uri.clone()).or_default().clone();
        // Where its completions may go, by the settings in force now.
        if let Some(endpoint) = &self.config.model.endpoint {
            let excluded = || crate::exclude::excluded_by(&self.config.cloud.exclude, uri.0.as_str());
            let trusted = endpoint.trusted || self.config.offline;
            let glob = if trusted || self.config.privacy == crate::config::Privacy::LocalOnly { None } else { excluded() };
            session.set_reach(crate::route::completion_endpoint(endpoint.trusted, self.config.offline, self.config.privacy, glob.as_deref()));
        }
        session
    }

    /// `uri` is where the user is now, at `line` when known. When that is another document
    /// than before, returns the one left, with its text and line (for the workspace index).
    pub fn make_active(&mut self, uri: &Uri, line: Option<u32>) -> Option<(Uri, Touched, u32)> {
        let left = match self.active.take() {
            Some((old, old_line)) if old != *uri => self.docs.get(&old).map(|d| (old.clone(), d.contents(), old_line)),
            Some((_, old_line)) => {
                self.active = Some((uri.clone(), line.unwrap_or(old_line)));
                return None;
            }
            None => None,
        };
        self.active = Some((uri.clone(), line.unwrap_or(0)));
        left.filter(|_| self.workspace.is_some())
    }

    /// Where the prompt is decoded ahead: where the cursor last rested; `again` (the workspace
    /// changed, and with it maybe the cross-file section) only while that document is still
    /// the active one — a document left for another (whose leaving updated the index) must not
    /// take the model thread, and the KV cache, from the one being typed in.
    pub fn rest_to_decode(&self, again: bool) -> Option<(Uri, Position)> {
        let (uri, position) = self.rest.clone()?;
        if again && self.active.as_ref().is_none_or(|(active, _)| *active != uri) {
            return None;
        }
        Some((uri, position))
    }

    /// A new engine: what the sessions hold (generations ahead, shown suggestions) was made
    /// with the old one's settings, so it goes.
    pub fn set_engine(&mut self, engine: Option<std::sync::Arc<Engine>>) -> Option<std::sync::Arc<Engine>> {
        for session in self.sessions.values() {
            session.reset();
        }
        std::mem::replace(&mut self.engine, engine)
    }
}

/// The client's capabilities that the server acts on, read once at `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCaps {
    /// The position encoding negotiated.
    pub encoding: Encoding,
    /// `$/progress` for the model load and for code actions.
    pub work_done_progress: bool,
    /// Completion items may be snippets.
    pub snippet_support: bool,
    /// `codeAction/resolve` can fill in the command (else each action carries it).
    pub resolves_command: bool,
    /// Workspace edits as versioned `documentChanges`.
    pub document_changes: bool,
    /// … which may create files.
    pub creates_files: bool,
    /// `experimental.ghostline.chooseModel`: the client opens a file dialog for the model on
    /// `ghostline/chooseModel` (the VS Code extension).
    pub choose_model: bool,
}

/// What `initialize` told: the capabilities and the workspace folders.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub caps: ClientCaps,
    /// `workspace/didChangeWatchedFiles` may be registered dynamically.
    pub watch_files: bool,
    /// The workspace folders (the `rootUri` when the client sends none).
    pub roots: Vec<PathBuf>,
}

impl ClientInfo {
    pub fn from_initialize(params: &InitializeParams) -> Self {
        let c = &params.capabilities;
        let text = c.text_document.as_ref();
        let edit = c.workspace.as_ref().and_then(|w| w.workspace_edit.as_ref());
        let caps = ClientCaps {
            encoding: Encoding::negotiate(c.general.as_ref().and_then(|g| g.position_encodings.as_deref())),
            work_done_progress: c.window.as_ref().and_then(|w| w.work_done_progress).unwrap_or(false),
            snippet_support: text
                .and_then(|t| t.completion.as_ref())
                .and_then(|c| c.completion_item.as_ref())
                .and_then(|i| i.snippet_support)
                .unwrap_or(false),
            resolves_command: text
                .and_then(|t| t.code_action.as_ref())
                .and_then(|a| a.resolve_support.as_ref())
                .is_some_and(|r| r.properties.iter().any(|p| p == "command")),
            document_changes: edit.and_then(|e| e.document_changes).unwrap_or(false),
            creates_files: edit
                .and_then(|e| e.resource_operations.as_ref())
                .is_some_and(|ops| ops.contains(&ResourceOperationKind::Create)),
            choose_model: c.experimental.as_ref().is_some_and(|e| e["ghostline"]["chooseModel"] == true),
        };
        let folders = match &params.workspace_folders_initialize_params.workspace_folders {
            Some(WorkspaceFolders::WorkspaceFolderList(list)) => list.as_slice(),
            _ => &[],
        };
        let mut roots: Vec<PathBuf> = folders.iter().filter_map(|f| uri_to_path(f.uri.0.as_str())).collect();
        #[allow(deprecated)] // rootUri: still what clients without workspace folders send
        let root = params.root_uri.as_ref().and_then(|u| uri_to_path(u.0.as_str()));
        if roots.is_empty() {
            roots.extend(root);
        }
        let watch_files = c
            .workspace
            .as_ref()
            .and_then(|w| w.did_change_watched_files.as_ref())
            .and_then(|d| d.dynamic_registration)
            .unwrap_or(false);
        ClientInfo { caps, watch_files, roots }
    }

    /// The workspace folder holding `path` (the innermost, when folders nest); `None` for a
    /// file in none of them.
    pub fn root_for(&self, path: Option<&Path>) -> Option<PathBuf> {
        let path = path?;
        self.roots.iter().filter(|r| path.starts_with(r)).max_by_key(|r| r.as_os_str().len()).cloned()
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// Typing in another document (which hands the left one's text to the index) never
    /// decodes the left document's prompt again; coming back to it does.
    #[test]
    fn the_rest_is_decoded_again_only_in_the_active_document() {
        let (a, b) = (Uri(path_to_uri(Path::new("/w/a.py"))), Uri(path_to_uri(Path::new("/w/b.py"))));
        let mut state = State::default();
        let at = Position::new(3, 4);
        state.make_active(&a, Some(3));
        state.rest = Some((a.clone(), at));
        assert_eq!(state.rest_to_decode(true), Some((a.clone(), at)));
        state.make_active(&b, Some(0));
        assert_eq!(state.rest_to_decode(true), None, "the left document's prompt, while typing in another");
        assert_eq!(state.rest_to_decode(false), Some((a.clone(), at)), "a code action asked there");
        state.make_active(&a, None);
        assert_eq!(state.rest_to_decode(true), Some((a, at)));
    }

    #[test]
    fn file_uris_round_trip_with_percent_encoding() {
        let p = PathBuf::from("/tmp/my project/naïve.py");
        let u = path_to_uri(&p);
        assert_eq!(u, "file:///tmp/my%20project/na%C3%AFve.py");
        assert_eq!(uri_to_path(&u), Some(p));
        assert_eq!(uri_to_path("untitled:Untitled-1"), None);
    }

    #[test]
    fn capabilities_are_read_once_into_flags() {
        let params: InitializeParams = serde_json::from_value(serde_json::json!({
            "processId": null, "rootUri": "file:///r",
            "capabilities": {
                "general": {"positionEncodings": ["utf-8"]},
                "window": {"workDoneProgress": true},
                "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit", "command"]}}},
                "workspace": {"workspaceEdit": {"documentChanges": true, "resourceOperations": ["create", "rename"]}},
                "experimental": {"ghostline": {"chooseModel": true}}
            }
        }))
        .unwrap();
        let info = ClientInfo::from_initialize(&params);
        let want = ClientCaps {
            encoding: Encoding::Utf8,
            work_done_progress: true,
            snippet_support: false,
            resolves_command: true,
            document_changes: true,
            creates_files: true,
            choose_model: true,
        };
        assert_eq!(info.caps, want);
        assert_eq!(info.roots, vec![PathBuf::from("/r")]);
        assert_eq!(ClientInfo::default().caps.encoding, Encoding::default());
    }
}
