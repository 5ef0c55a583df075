//! Code actions over LSP: `textDocument/codeAction` lists them at once (nothing is generated
//! then), `codeAction/resolve` attaches the command, `workspace/executeCommand` runs one — route
//! (local or cloud, with the reason in the `$/progress` title), generation, a parse check — and
//! only then sends the whole edit with `workspace/applyEdit`.
//!
//! The domain work (targets, prompts, placement) is in `crate::actions`; the route in
//! `crate::route`; the cloud client, privacy guard and cache in `crate::cloud`. This module is
//! the glue, and the one place those meet LSP types.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ropey::Rope;
use serde_json::{json, Value};
use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::jsonrpc::{Error, Result};

use super::encoding::{self, Encoding};
use super::Backend;
use crate::actions::apply::{self, Change, FileRef};
use crate::actions::{self, layout, Kind, Source};
use crate::cloud::cache::{self, DiskCache};
use crate::cloud::redact::{self, Exclusions, Redactions};
use crate::cloud::{CloudClient, CloudError};
use crate::config::{CloudConfig, Config, Prefer, Privacy};
use crate::model::{CancelFlag, ChatRequest, ChatStop, ModelStatus};
use crate::route::{self, Breaker, Budget, BudgetState, Route, Task};

/// The command that runs an action; its one argument is the action's `data`.
pub const RUN: &str = "ghostline.runAction";
/// The command answering the last action's route and reason (as a string).
pub const LAST_ROUTE: &str = "ghostline.lastRoute";

/// What code actions keep between requests.
#[derive(Default)]
pub struct ActionState {
    /// The client's capabilities, as JSON (only a few flags are read).
    capabilities: Mutex<Value>,
    /// The workspace folders (the `rootUri` when the client sends none).
    roots: Mutex<Vec<PathBuf>>,
    /// Test files an action is writing now: a second action for the same file is refused
    /// until the first has sent its edit (both would create or fill it from the same text).
    writing: Mutex<std::collections::HashSet<PathBuf>>,
    breaker: Mutex<Option<Breaker>>,
    budget: Mutex<Budget>,
    /// Built on the first cloud-routed action (never in offline mode), rebuilt when the cloud
    /// settings change.
    cloud: Mutex<Option<(CloudConfig, Arc<CloudClient>)>>,
    last_route: Mutex<Option<String>>,
    counter: AtomicU64,
}

impl ActionState {
    pub fn init(&self, params: &InitializeParams) {
        *self.capabilities.lock().unwrap() = serde_json::to_value(&params.capabilities).unwrap_or(Value::Null);
        let folders = serde_json::to_value(&params.workspace_folders_initialize_params.workspace_folders).unwrap_or(Value::Null);
        #[allow(deprecated)] // rootUri: still what clients without workspace folders send
        let root_uri = params.root_uri.as_ref().map(|u| u.0.as_str().to_owned());
        let mut roots: Vec<PathBuf> = folders
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("uri").and_then(Value::as_str).and_then(uri_to_path))
            .collect();
        if roots.is_empty() {
            roots.extend(root_uri.as_deref().and_then(uri_to_path));
        }
        *self.roots.lock().unwrap() = roots;
    }

    /// The workspace folder holding `path` (the innermost, when folders nest); `None` for a
    /// file in none of them.
    fn root_for(&self, path: Option<&Path>) -> Option<PathBuf> {
        let path = path?;
        self.roots.lock().unwrap().iter().filter(|r| path.starts_with(r)).max_by_key(|r| r.as_os_str().len()).cloned()
    }

    fn capability(&self, pointer: &str) -> Value {
        self.capabilities.lock().unwrap().pointer(pointer).cloned().unwrap_or(Value::Null)
    }

    fn resolves_command(&self) -> bool {
        self.capability("/textDocument/codeAction/resolveSupport/properties")
            .as_array()
            .is_some_and(|p| p.iter().any(|v| v == "command"))
    }
}

/// Marks a test file as being written by one action; unmarked when dropped.
struct Writing<'a> {
    set: &'a Mutex<std::collections::HashSet<PathBuf>>,
    path: PathBuf,
}

impl<'a> Writing<'a> {
    /// `None` when another action is writing `path` now.
    fn claim(set: &'a Mutex<std::collections::HashSet<PathBuf>>, path: &Path) -> Option<Self> {
        set.lock().unwrap().insert(path.to_owned()).then(|| Writing { set, path: path.to_owned() })
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.set.lock().unwrap().remove(&self.path);
    }
}

/// Files and folders ghostline created for an edit (for clients that cannot create files),
/// removed again when the edit is not applied: a refused edit leaves nothing behind.
#[derive(Default)]
struct Created(Vec<PathBuf>);

impl Created {
    /// Creates the folders `file` needs and `file` itself, empty, remembering each.
    fn file(&mut self, file: &Path) -> std::result::Result<(), String> {
        let mut missing = Vec::new();
        let mut dir = file.parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            missing.push(d.to_owned());
            dir = d.parent();
        }
        for d in missing.into_iter().rev() {
            std::fs::create_dir(&d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            self.0.push(d);
        }
        std::fs::OpenOptions::new().write(true).create_new(true).open(file).map_err(|e| format!("cannot create {}: {e}", file.display()))?;
        self.0.push(file.to_owned());
        Ok(())
    }

    /// Removes what was created, newest first: the file only while still empty, a folder only
    /// while empty.
    fn undo(self) {
        for p in self.0.into_iter().rev() {
            let removed = if p.is_dir() {
                std::fs::remove_dir(&p)
            } else if std::fs::metadata(&p).is_ok_and(|m| m.len() == 0) {
                std::fs::remove_file(&p)
            } else {
                continue;
            };
            match removed {
                Ok(()) => tracing::debug!(path = %p.display(), "removed what a refused edit would have filled"),
                Err(e) => tracing::warn!("cannot remove {}: {e}", p.display()),
            }
        }
    }
}

/// The `file:` URI's path, percent-decoded.
pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8(out).ok()?))
}

/// A path as a `file:` URI (unreserved characters and `/` kept, the rest percent-encoded).
pub fn path_to_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Tests => "tests",
        Kind::Docstring => "docstring",
        Kind::Refactor => "refactor",
        Kind::Fix { .. } => "fix",
    }
}

fn internal(message: impl Into<String>) -> Error {
    Error { code: tower_lsp_server::jsonrpc::ErrorCode::InternalError, message: message.into().into(), data: None }
}

/// A generated answer and where it came from.
struct Answer {
    text: String,
    route: Route,
    cached: bool,
}

impl Backend {
    pub(super) async fn code_action_list(&self, params: CodeActionParams) -> Result<Option<Vec<CodeActionResponse>>> {
        let config = self.config.read().unwrap().clone();
        if !config.actions.enabled {
            return Ok(None);
        }
        let enc = *self.encoding.read().unwrap();
        let uri = params.text_document.uri.clone();
        let (snap, spec_name) = {
            let docs = self.docs.lock().unwrap();
            let Some(doc) = docs.get(&uri) else { return Ok(None) };
            let snap = doc.snapshot(params.range.start, enc, 0, 0).map_err(|e| Error::invalid_params(e.to_string()))?;
            (snap, doc.language_id.clone())
        };
        let Some((spec, tree)) = snap.syntax.as_ref() else { return Ok(None) };
        let target = actions::function_at(spec, tree, &snap.text, snap.cursor);
        let mut list: Vec<(Kind, Value)> = Vec::new();
        if target.is_some() {
            // Tests go in a file beside the source (Rust: in it), so an unsaved document
            // (`untitled:`) has nowhere to put them.
            if spec.name == "rust" || uri_to_path(uri.0.as_str()).is_some() {
                list.push((Kind::Tests, Value::Null));
            }
            for kind in [Kind::Docstring, Kind::Refactor] {
                list.push((kind, Value::Null));
            }
        }
        for d in &params.context.diagnostics {
            let d = serde_json::to_value(d).unwrap_or(Value::Null);
            if d.get("source").and_then(Value::as_str) == Some("ghostline") {
                continue;
            }
            let message = match d.get("message") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Object(m)) => m.get("value").and_then(Value::as_str).unwrap_or("").to_owned(),
                _ => String::new(),
            };
            let kind = Kind::Fix { message, source: d.get("source").and_then(Value::as_str).map(str::to_owned), range: 0..0 };
            list.push((kind, d));
        }
        let only: Vec<String> = params.context.only.as_ref().map_or_else(Vec::new, |o| {
            o.iter().filter_map(|k| serde_json::to_value(k).ok()?.as_str().map(str::to_owned)).collect()
        });
        let resolve = self.actions.resolves_command();
        let mut out = Vec::new();
        for (kind, diagnostic) in list {
            let lsp_kind = if matches!(kind, Kind::Fix { .. }) { "quickfix" } else { "refactor.rewrite" };
            if !only.is_empty() && !only.iter().any(|o| lsp_kind == o || lsp_kind.starts_with(&format!("{o}."))) {
                continue;
            }
            let named = if kind == Kind::Tests { actions::tests_target(spec, tree, &snap.text, snap.cursor) } else { target.clone() };
            let title = actions::title(&kind, spec, named.as_ref().map(|t| t.name.as_str()));
            let data = json!({
                "uri": uri.0.as_str(), "version": snap.version, "kind": kind_name(&kind),
                "position": params.range.start, "diagnostic": diagnostic, "title": title, "language": spec_name,
            });
            let mut action = json!({"title": title, "kind": lsp_kind, "data": data});
            if !diagnostic.is_null() {
                action["diagnostics"] = json!([diagnostic]);
            }
            if !resolve {
                action["command"] = json!({"title": title, "command": RUN, "arguments": [data]});
            }
            let action: CodeAction = serde_json::from_value(action).map_err(|e| internal(e.to_string()))?;
            out.push(CodeActionResponse::CodeAction(action));
        }
        Ok(Some(out))
    }

    pub(super) async fn code_action_resolve_command(&self, mut action: CodeAction) -> Result<CodeAction> {
        if action.command.is_none() {
            if let Some(data) = action.data.clone() {
                action.command = Some(Command { title: action.title.clone(), tooltip: None, command: RUN.into(), arguments: Some(vec![data]) });
            }
        }
        Ok(action)
    }

    pub(super) async fn execute(&self, params: ExecuteCommandParams) -> Result<Option<LspAny>> {
        match params.command.as_str() {
            LAST_ROUTE => Ok(Some(Value::String(
                self.actions.last_route.lock().unwrap().clone().unwrap_or_else(|| "ghostline: no routed action yet".into()),
            ))),
            RUN => {
                let data = params.arguments.and_then(|a| a.into_iter().next()).ok_or_else(|| Error::invalid_params("ghostline.runAction needs the action's data"))?;
                // This action's route, once it has one: what its answer reports, even on failure.
                let mut route = None;
                let result = self.run_action(&data, &mut route).await;
                match result {
                    Ok(v) => Ok(Some(v)),
                    Err(message) => {
                        self.client.show_message(MessageType::Warning, format!("ghostline: {message}")).await;
                        if route.is_none() {
                            // Failed before it was routed: `ghostline.lastRoute` says so, rather
                            // than naming the route of an earlier action.
                            let title = data.get("title").and_then(Value::as_str).unwrap_or("ghostline action");
                            *self.actions.last_route.lock().unwrap() = Some(format!("{title} — not run: {message}"));
                        }
                        Ok(Some(json!({"applied": false, "error": message, "lastRoute": route})))
                    }
                }
            }
            other => Err(Error::invalid_params(format!("unknown command: {other}"))),
        }
    }

    /// Reads a file as the editor sees it: the open document's text, else the disk's.
    fn read_file(&self, path: &Path) -> Option<(String, Option<i32>)> {
        let uri = Uri(path_to_uri(path));
        if let Some(doc) = self.docs.lock().unwrap().get(&uri) {
            return Some((doc.rope.to_string(), Some(doc.version)));
        }
        std::fs::read_to_string(path).ok().map(|t| (t, None))
    }

    async fn run_action(&self, data: &Value, route_out: &mut Option<String>) -> std::result::Result<Value, String> {
        let started = Instant::now();
        let config = self.config.read().unwrap().clone();
        let enc = *self.encoding.read().unwrap();
        let uri_text = data.get("uri").and_then(Value::as_str).ok_or("the action has no document")?.to_owned();
        let uri = Uri(uri_text);
        let position: Position = serde_json::from_value(data["position"].clone()).map_err(|e| e.to_string())?;
        let snap = {
            let docs = self.docs.lock().unwrap();
            let doc = docs.get(&uri).ok_or("the document is not open")?;
            doc.snapshot(position, enc, 0, 0).map_err(|e| e.to_string())?
        };
        let (spec, tree) = snap.syntax.clone().ok_or("no grammar for this document's language")?;
        let text = snap.text.as_str();
        let kind = match data.get("kind").and_then(Value::as_str) {
            Some("tests") => Kind::Tests,
            Some("docstring") => Kind::Docstring,
            Some("refactor") => Kind::Refactor,
            Some("fix") => {
                let d = &data["diagnostic"];
                let range: Range = serde_json::from_value(d["range"].clone()).map_err(|e| format!("the diagnostic has no range: {e}"))?;
                let rope = Rope::from_str(text);
                let to_byte = |p: Position| rope.char_to_byte(encoding::to_char_clamped(&rope, p, enc));
                let message = match &d["message"] {
                    Value::String(s) => s.clone(),
                    m => m.get("value").and_then(Value::as_str).unwrap_or("").to_owned(),
                };
                Kind::Fix { message, source: d.get("source").and_then(Value::as_str).map(str::to_owned), range: to_byte(range.start)..to_byte(range.end) }
            }
            _ => return Err("unknown action kind".into()),
        };
        let target = actions::target_for(&kind, spec, &tree, text, snap.cursor);
        if target.is_none() && !matches!(kind, Kind::Fix { .. }) {
            return Err("no function under the cursor any more".into());
        }
        let path = uri_to_path(uri.0.as_str());
        let root = self.actions.root_for(path.as_deref());
        let source = Source { spec, text, tree: &tree, path: path.clone(), root: root.clone() };
        let title = data.get("title").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| actions::title(&kind, spec, target.as_ref().map(|t| t.name.as_str())));

        // Where tests go, and what is there already.
        let plan = match (&kind, &target) {
            (Kind::Tests, Some(t)) => Some(layout::plan(&source, t, &|p: &Path| p.exists(), &|p: &Path| self.read_file(p).map(|(t, _)| t))?),
            _ => None,
        };
        // One action per test file at a time: from reading what is there to sending the edit.
        let _writing = match plan.as_ref().and_then(|p| p.path.as_ref()) {
            Some(p) => Some(Writing::claim(&self.actions.writing, p).ok_or_else(|| {
                let name = p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned());
                format!("{title}: another action is writing tests into {name} now; run this one again once it is done")
            })?),
            None => None,
        };
        let existing_tests = plan.as_ref().and_then(|p| p.path.as_ref()).and_then(|p| self.read_file(p));
        let framework = plan.as_ref().map_or("", |p| p.framework);
        let messages = actions::messages(&kind, &source, target.as_ref(), framework);
        let stop = actions::stop_rule(&kind, spec);
        let region_len = match (&kind, &target) {
            (Kind::Fix { range, .. }, t) => actions::fix_region(text, range, t.as_ref()).len(),
            (_, Some(t)) => t.range.len(),
            _ => 0,
        };
        let max_tokens = match kind {
            Kind::Docstring => 64,
            Kind::Tests => config.actions.max_tokens.min(384),
            _ => config.actions.max_tokens.min(route::estimate_tokens(&" ".repeat(region_len)) as u32 * 2 + 96),
        };

        // Route.
        let relative = path.as_ref().map(|p| {
            root.as_ref().and_then(|r| p.strip_prefix(r).ok()).unwrap_or(p).to_string_lossy().replace('\\', "/")
        });
        let (exclusions, bad_globs) = Exclusions::new(&config.cloud.exclude);
        for e in bad_globs {
            tracing::warn!("{e}");
        }
        let excluded = relative.as_deref().and_then(|r| exclusions.matching(r)).map(str::to_owned);
        let engine = self.engine();
        let local_context = match engine.as_ref().map(|e| e.model.status().borrow().clone()) {
            Some(ModelStatus::Ready(info)) => Some(info.n_ctx as u64),
            Some(ModelStatus::Loading { .. }) | Some(ModelStatus::Unloaded(_)) => Some(config.model.context_size as u64),
            _ => None,
        };
        let prompt_text: String = messages.iter().map(|(_, c)| c.as_str()).collect();
        let tokens_needed = route::estimate_tokens(&prompt_text) + 16 + max_tokens as u64;
        let now = Instant::now();
        let breaker_state = {
            let mut b = self.actions.breaker.lock().unwrap();
            let (threshold, cooldown) = (config.cloud.breaker_failures.max(1), Duration::from_secs(config.cloud.breaker_cooldown_s));
            // New breaker settings start a new count.
            if b.as_ref().is_none_or(|b| b.threshold != threshold || b.cooldown != cooldown) {
                *b = Some(Breaker::new(threshold, cooldown));
            }
            b.as_ref().expect("set above").state(now)
        };
        let today = route::today();
        let used = self.actions.budget.lock().unwrap().used_on(today);
        let task = kind.task();
        let prefer = match task {
            Task::Tests => config.actions.prefer.tests,
            Task::Docstring => config.actions.prefer.docstring,
            Task::Refactor => config.actions.prefer.refactor,
            _ => config.actions.prefer.fix,
        }
        .unwrap_or(Prefer::Auto);
        let decision = route::route(&route::Inputs {
            task,
            tokens_needed,
            local_context,
            privacy: config.privacy,
            offline: config.offline,
            excluded_by: excluded.as_deref(),
            cloud_configured: config.cloud.endpoint.is_some(),
            prefer,
            budget: BudgetState { used, limit: config.cloud.daily_token_budget },
            breaker: breaker_state,
        });
        let headline = format!("{title} — {}: {}", decision.route.name(), decision.reason);
        *self.actions.last_route.lock().unwrap() = Some(headline.clone());
        *route_out = Some(headline.clone());
        tracing::info!(action = %title, route = decision.route.name(), reason = %decision.reason, "code action routed");
        if decision.route == Route::Unavailable {
            return Err(format!("{title}: {}", decision.reason));
        }

        // Progress, with the route and its reason in the title.
        let progress = if self.actions.capability("/window/workDoneProgress").as_bool().unwrap_or(false) {
            let n = self.actions.counter.fetch_add(1, Ordering::Relaxed);
            let token = ProgressToken::String(format!("ghostline/action/{}/{n}", std::process::id()));
            match self.client.create_work_done_progress(token.clone()).await {
                Ok(()) => Some(self.client.progress(token, headline.clone()).begin().await),
                Err(_) => None,
            }
        } else {
            None
        };
        tracing::debug!(progress = progress.is_some(), "action started");
        let cancel = CancelFlag::new();
        let mut fallback: Option<String> = None;
        let build = |answer: &str| -> std::result::Result<Vec<Change>, String> {
            match (&kind, &target) {
                (Kind::Tests, Some(t)) => apply::tests(&source, t, plan.as_ref().expect("tests have a plan"), existing_tests.as_ref().map(|(t, _)| t.clone()), answer),
                (Kind::Docstring, Some(t)) => apply::docstring(&source, t, answer),
                (Kind::Refactor, Some(t)) => apply::replace(&source, t.range.clone(), answer, Some(&t.name)),
                (Kind::Fix { range, .. }, t) => apply::replace(&source, actions::fix_region(text, range, t.as_ref()), answer, None),
                _ => Err("no function under the cursor".into()),
            }
        };

        let mut outcome: std::result::Result<(Vec<Change>, Answer), String> = Err(String::new());
        if decision.route == Route::Cloud {
            match self.cloud_answer(&config, &messages, max_tokens, &stop, &cancel).await {
                Ok(answer) => match build(&answer.text) {
                    Ok(changes) => outcome = Ok((changes, answer)),
                    Err(e) => fallback = Some(format!("the cloud's answer was unusable ({e})")),
                },
                Err(e) => fallback = Some(format!("the cloud failed: {e}")),
            }
            if let Some(why) = &fallback {
                tracing::warn!("{title}: {why}; falling back to the local model");
                if let Some(p) = &progress {
                    p.report(format!("{why}; falling back to the local model")).await;
                }
            }
        }
        if outcome.is_err() {
            let local = match engine.as_ref() {
                Some(engine) if local_context.is_some() => engine
                    .model
                    .chat(ChatRequest { messages: messages.clone(), max_tokens, stop: stop.clone(), cancel: cancel.clone() })
                    .await
                    .map_err(|e| e.to_string()),
                _ => Err("no local model is loaded".into()),
            };
            outcome = match local {
                Ok(generation) => {
                    build(&generation.text).map(|changes| (changes, Answer { text: generation.text, route: Route::Local, cached: false }))
                }
                Err(e) => Err(e),
            };
        }
        let route_used = outcome.as_ref().map(|(_, a)| a.route).unwrap_or(Route::Local);
        let (changes, answer) = match outcome {
            Ok(v) => v,
            Err(e) => {
                let message = match &fallback {
                    Some(why) => format!("{title}: {why}; the local model then failed too: {e}"),
                    None => format!("{title}: {e}"),
                };
                if let Some(p) = progress {
                    p.finish_with_message("nothing was changed").await;
                }
                return Err(message);
            }
        };

        // Still the text the answer was made for? Otherwise nothing is applied.
        let current = self.docs.lock().unwrap().get(&uri).map(|d| d.version);
        if current != Some(snap.version) {
            if let Some(p) = progress {
                p.finish_with_message("the document changed; nothing was applied").await;
            }
            return Err(format!("{title}: the document changed while the action ran; nothing was applied"));
        }
        let (edit, files, created) = self.workspace_edit(&uri, snap.version, text, &changes, enc)?;
        tracing::debug!(files = ?files, cached = answer.cached, "sending workspace/applyEdit");
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
        // Tests for a file in no workspace folder went next to it: say where.
        let note = match (&plan, applied.applied) {
            (Some(p), true) if p.outside_workspace => p.path.as_ref().map(|t| {
                let file = path.as_ref().map_or_else(String::new, |s| s.display().to_string());
                format!("{file} is in no workspace folder, so its tests were written next to it: {}", t.display())
            }),
            _ => None,
        };
        if let Some(note) = &note {
            self.client.show_message(MessageType::Info, format!("ghostline: {note}")).await;
        }
        let summary = match (&fallback, answer.cached) {
            (Some(why), _) => format!("{why}; ran locally instead"),
            (None, true) => format!("{} (cached answer)", decision.reason),
            (None, false) => decision.reason.clone(),
        };
        let route_line = format!("{title} — {}: {summary}", route_used.name());
        *self.actions.last_route.lock().unwrap() = Some(route_line.clone());
        *route_out = Some(route_line.clone());
        if let Some(p) = progress {
            p.finish_with_message(if applied.applied { format!("done ({})", route_used.name()) } else { "the editor refused the edit".into() }).await;
        }
        if fallback.is_some() {
            self.client.show_message(MessageType::Info, format!("ghostline: {route_line}")).await;
        }
        Ok(json!({
            "applied": applied.applied,
            "failureReason": applied.failure_reason,
            "title": title,
            "route": route_used.name(),
            "planned": decision.route.name(),
            "reason": decision.reason,
            "fallback": fallback,
            "cached": answer.cached,
            "files": files,
            "note": note,
            "ms": started.elapsed().as_secs_f64() * 1e3,
            "cloudClientsBuilt": crate::cloud::clients_built(),
        }))
    }

    /// The cloud's answer: from the cache, else from the endpoint; redacted on the way out
    /// (privacy `redact`), restored on the way back. Failures feed the circuit breaker.
    async fn cloud_answer(
        &self,
        config: &Config,
        messages: &[(String, String)],
        max_tokens: u32,
        stop: &ChatStop,
        cancel: &CancelFlag,
    ) -> std::result::Result<Answer, CloudError> {
        let mut redactions = Redactions::default();
        let outgoing: Vec<(String, String)> = match config.privacy {
            Privacy::Redact => messages.iter().map(|(r, c)| (r.clone(), redact::redact(c, &mut redactions))).collect(),
            _ => messages.to_vec(),
        };
        if !redactions.is_empty() {
            tracing::info!(count = redactions.pairs.len(), "redacted secrets before sending");
        }
        let endpoint = config.cloud.endpoint.clone().unwrap_or_default();
        let mut parts: Vec<&str> = vec![&endpoint, &config.cloud.model];
        let max = max_tokens.to_string();
        parts.push(&max);
        for (r, c) in &outgoing {
            parts.push(r);
            parts.push(c);
        }
        let key = cache::key(&parts);
        let disk = config.cloud.cache_dir.clone().or_else(cache::default_dir).and_then(|d| DiskCache::open(&d, config.cloud.cache_entries as usize).ok());
        tracing::debug!(key = %key, cache = disk.is_some(), "cloud request");
        if let Some(hit) = disk.as_ref().and_then(|c| c.get(&key)) {
            return Ok(Answer { text: redactions.restore(&hit.text), route: Route::Cloud, cached: true });
        }
        let client = {
            let mut slot = self.actions.cloud.lock().unwrap();
            match slot.as_ref() {
                Some((c, client)) if *c == config.cloud => Ok(client.clone()),
                _ => CloudClient::new(&config.cloud).map(|client| {
                    let client = Arc::new(client);
                    *slot = Some((config.cloud.clone(), client.clone()));
                    client
                }),
            }
        };
        let result = match client {
            Ok(client) => client.chat(&outgoing, max_tokens, stop, cancel).await,
            Err(e) => Err(e),
        };
        let now = Instant::now();
        let mut breaker = self.actions.breaker.lock().unwrap();
        let breaker = breaker.get_or_insert_with(|| Breaker::new(config.cloud.breaker_failures, Duration::from_secs(config.cloud.breaker_cooldown_s)));
        match result {
            Ok(answer) => {
                breaker.success();
                let spent = if answer.prompt_tokens + answer.completion_tokens > 0 {
                    answer.prompt_tokens + answer.completion_tokens
                } else {
                    outgoing.iter().map(|(_, c)| route::estimate_tokens(c)).sum::<u64>() + route::estimate_tokens(&answer.text)
                };
                self.actions.budget.lock().unwrap().spend(route::today(), spent);
                if let Some(c) = &disk {
                    let entry = cache::Entry { text: answer.text.clone(), prompt_tokens: answer.prompt_tokens, completion_tokens: answer.completion_tokens };
                    if let Err(e) = c.put(&key, &entry) {
                        tracing::warn!("cannot write the cloud cache: {e}");
                    }
                }
                tracing::info!(attempts = answer.attempts, ms = answer.total_ms, tokens = spent, "cloud answered");
                Ok(Answer { text: redactions.restore(&answer.text), route: Route::Cloud, cached: false })
            }
            Err(CloudError::Cancelled) => Err(CloudError::Cancelled),
            Err(e) => {
                breaker.failure(now);
                Err(e)
            }
        }
    }

    /// Changes → one `WorkspaceEdit`: versioned edits for open documents, `CreateFile` for new
    /// files (written by ghostline itself when the client cannot create files: those come back
    /// in [`Created`], to be removed if the edit is not applied).
    fn workspace_edit(
        &self,
        uri: &Uri,
        version: i32,
        text: &str,
        changes: &[Change],
        enc: Encoding,
    ) -> std::result::Result<(WorkspaceEdit, Vec<String>, Created), String> {
        let mut created = Created::default();
        match self.workspace_edit_creating(uri, version, text, changes, enc, &mut created) {
            Ok((edit, files)) => Ok((edit, files, created)),
            Err(e) => {
                created.undo();
                Err(e)
            }
        }
    }

    fn workspace_edit_creating(
        &self,
        uri: &Uri,
        version: i32,
        text: &str,
        changes: &[Change],
        enc: Encoding,
        created: &mut Created,
    ) -> std::result::Result<(WorkspaceEdit, Vec<String>), String> {
        let document_changes = self.actions.capability("/workspace/workspaceEdit/documentChanges").as_bool().unwrap_or(false);
        let can_create = self
            .actions
            .capability("/workspace/workspaceEdit/resourceOperations")
            .as_array()
            .is_some_and(|ops| ops.iter().any(|o| o == "create"));
        let mut ops: Vec<Value> = Vec::new();
        let mut plain = serde_json::Map::new();
        let mut files = Vec::new();
        for change in changes {
            let (file_uri, base, doc_version) = match &change.file {
                FileRef::Source => (uri.0.as_str().to_owned(), text.to_owned(), Some(version)),
                FileRef::Path(p) => {
                    let u = path_to_uri(p);
                    match (&change.base, self.read_file(p)) {
                        (Some(_), Some((t, v))) => (u, t, v),
                        (Some(_), None) => return Err(format!("{} disappeared meanwhile; nothing was applied", p.display())),
                        (None, _) => {
                            if p.exists() {
                                return Err(format!("{} appeared meanwhile; nothing was applied", p.display()));
                            }
                            if document_changes && can_create {
                                ops.push(json!({"kind": "create", "uri": u, "options": {"overwrite": false, "ignoreIfExists": true}}));
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
            let edits: Vec<Value> = change
                .edits
                .iter()
                .map(|(r, t)| json!({"range": {"start": pos(r.start), "end": pos(r.end)}, "newText": t}))
                .collect();
            files.push(file_uri.clone());
            if document_changes {
                ops.push(json!({"textDocument": {"uri": file_uri, "version": doc_version}, "edits": edits}));
            } else {
                plain.insert(file_uri, Value::Array(edits));
            }
        }
        let edit = if document_changes { json!({"documentChanges": ops}) } else { json!({"changes": plain}) };
        let edit: WorkspaceEdit = serde_json::from_value(edit).map_err(|e| format!("cannot build the edit: {e}"))?;
        Ok((edit, files))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_round_trip_with_percent_encoding() {
        let p = PathBuf::from("/tmp/my project/naïve.py");
        let u = path_to_uri(&p);
        assert_eq!(u, "file:///tmp/my%20project/na%C3%AFve.py");
        assert_eq!(uri_to_path(&u), Some(p));
        assert_eq!(uri_to_path("untitled:Untitled-1"), None);
    }
}
