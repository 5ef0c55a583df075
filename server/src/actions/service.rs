//! The code-action service: one action from a plain request to file changes — target, test file
//! placement, prompt, route (local or cloud, and why), the cloud's answer (cache, redaction,
//! circuit breaker, daily budget) or the local model's, the fallback from one to the other, and
//! the answer turned into changes that parse. No LSP: `lsp/actions.rs` converts a request into
//! a [`Request`], shows progress, and turns the [`Answered`] changes into a workspace edit.
//!
//! The cloud and the local model are reached through [`Peers`], so every decision here (when to
//! fall back, what the breaker and the budget count) is unit-tested without a running server.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tree_sitter::Tree;

use super::apply::{self, Change};
use super::layout::{self, TestPlan};
use super::{Kind, Source, Target};
use crate::cloud::cache::{self, DiskCache};
use crate::cloud::redact::{self, Exclusions, Redactions};
use crate::cloud::{CloudAnswer, CloudClient, CloudError};
use crate::config::{CloudConfig, Config, Prefer, Privacy};
use crate::model::{CancelFlag, ChatRequest, ChatStop};
use crate::route::{self, Breaker, Budget, BudgetState, Decision, Route, Task};

/// What the service calls out to: the cloud endpoint, the local model, and whoever shows the
/// user how the action is going. The server's implementation is in `lsp/actions.rs`; unit
/// tests use a scripted one.
pub trait Peers: Sync {
    /// The cloud endpoint's answer (one chat request, with the client's own retries).
    fn cloud(
        &self,
        config: &CloudConfig,
        messages: &[(String, String)],
        max_tokens: u32,
        stop: &ChatStop,
        cancel: &CancelFlag,
    ) -> impl Future<Output = Result<CloudAnswer, CloudError>> + Send;
    /// The local model's answer.
    fn local(&self, request: ChatRequest) -> impl Future<Output = Result<String, String>> + Send;
    /// Tokens the local model's context holds; `None` when no local model is loaded.
    fn local_context(&self) -> Option<u64>;
    /// A line for the user while the action runs (the fallback's reason).
    fn report(&self, message: String) -> impl Future<Output = ()> + Send;
}

/// One action to run, in plain terms.
pub struct Request {
    pub kind: Kind,
    /// The title the action was listed with, if known.
    pub title: Option<String>,
    pub spec: &'static crate::syntax::Spec,
    pub text: String,
    pub tree: Tree,
    /// Byte offset of the position the action was asked at.
    pub cursor: usize,
    /// The file on disk, when the document is a `file:` URI.
    pub path: Option<PathBuf>,
    /// The workspace folder holding it.
    pub root: Option<PathBuf>,
}

/// An action with its prompt made and its route decided; the test file it writes (if any) is
/// claimed for as long as this lives.
pub struct Prepared<'s> {
    request: Request,
    target: Option<Target>,
    pub title: String,
    /// Where tests go, and what is there already.
    plan: Option<TestPlan>,
    existing_tests: Option<String>,
    _writing: Option<Writing<'s>>,
    messages: Vec<(String, String)>,
    stop: ChatStop,
    pub max_tokens: u32,
    local_context: Option<u64>,
    pub decision: Decision,
    /// `"{title} — {route}: {reason}"`, as `ghostline.lastRoute` answers it.
    pub headline: String,
}

/// Why an action was not run; `route` is its route line when it got as far as a route.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub route: Option<String>,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure { message, route: None }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure { message: message.into(), route: None }
    }
}

/// A usable answer: the changes it makes and where it came from.
#[derive(Debug)]
pub struct Answered {
    pub changes: Vec<Change>,
    pub route: Route,
    /// From the cloud answer cache.
    pub cached: bool,
    /// Why the planned cloud route was left for the local model.
    pub fallback: Option<String>,
}

/// What code actions keep between requests: the cloud's circuit breaker and budget, the test
/// files being written, and the last route (`ghostline.lastRoute`).
#[derive(Default)]
pub struct ActionService {
    /// Test files an action is writing now: a second action for the same file is refused
    /// until the first has sent its edit (both would create or fill it from the same text).
    writing: Mutex<HashSet<PathBuf>>,
    breaker: Mutex<Option<Breaker>>,
    budget: Mutex<Budget>,
    last_route: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The answer's token cap for a task on a region of `region_len` bytes.
pub fn max_tokens(kind: &Kind, configured: u32, region_len: usize) -> u32 {
    match kind {
        Kind::Docstring => 64,
        Kind::Tests => configured.min(384),
        _ => configured.min(route::estimate_tokens(&" ".repeat(region_len)) as u32 * 2 + 96),
    }
}

impl Request {
    fn source(&self) -> Source<'_> {
        Source { spec: self.spec, text: &self.text, tree: &self.tree, path: self.path.clone(), root: self.root.clone() }
    }
}

impl Prepared<'_> {
    /// The answer as file changes, or why it cannot be used.
    fn build(&self, answer: &str) -> Result<Vec<Change>, String> {
        let source = self.request.source();
        match (&self.request.kind, &self.target) {
            (Kind::Tests, Some(t)) => apply::tests(&source, t, self.plan.as_ref().expect("tests have a plan"), self.existing_tests.clone(), answer),
            (Kind::Docstring, Some(t)) => apply::docstring(&source, t, answer),
            (Kind::Refactor, Some(t)) => apply::replace(&source, t.range.clone(), answer, Some(&t.name)),
            (Kind::Fix { range, .. }, t) => apply::replace(&source, super::fix_region(&self.request.text, range, t.as_ref()), answer, None),
            _ => Err("no function under the cursor".into()),
        }
    }

    /// The source text the action was prepared on (what the changes' offsets are in).
    pub fn text(&self) -> &str {
        &self.request.text
    }

    /// Said once the edit is applied: tests for a file in no workspace folder went next to it.
    pub fn note(&self) -> Option<String> {
        let plan = self.plan.as_ref().filter(|p| p.outside_workspace)?;
        let tests = plan.path.as_ref()?;
        let file = self.request.path.as_ref().map_or_else(String::new, |s| s.display().to_string());
        Some(format!("{file} is in no workspace folder, so its tests were written next to it: {}", tests.display()))
    }
}

impl ActionService {
    /// `ghostline.lastRoute`'s answer.
    pub fn last_route(&self) -> Option<String> {
        lock(&self.last_route).clone()
    }

    /// An action failed. One that failed before it was routed is what `ghostline.lastRoute`
    /// then reports, rather than the route of an earlier action.
    pub fn failed(&self, title: &str, message: &str, routed: bool) {
        if !routed {
            *lock(&self.last_route) = Some(format!("{title} — not run: {message}"));
        }
    }

    /// Finds the target, plans where tests go (claiming that file), builds the prompt and
    /// decides the route. `read` gives a file as the editor sees it (open document, else disk).
    /// Errors are for the user; once routed, the error is the route's (`Unavailable`).
    pub fn prepare<'s>(
        &'s self,
        request: Request,
        config: &Config,
        peers: &impl Peers,
        read: &dyn Fn(&Path) -> Option<String>,
    ) -> Result<Prepared<'s>, Failure> {
        let (spec, text) = (request.spec, request.text.as_str());
        let kind = &request.kind;
        let target = super::target_for(kind, spec, &request.tree, text, request.cursor);
        if target.is_none() && !matches!(kind, Kind::Fix { .. }) {
            return Err("no function under the cursor any more".into());
        }
        let title = request.title.clone().unwrap_or_else(|| super::title(kind, spec, target.as_ref().map(|t| t.name.as_str())));
        let source = request.source();
        let plan = match (kind, &target) {
            (Kind::Tests, Some(t)) => Some(layout::plan(&source, t, &|p: &Path| p.exists(), read).map_err(Failure::from)?),
            _ => None,
        };
        // One action per test file at a time: from reading what is there to sending the edit.
        let writing = match plan.as_ref().and_then(|p| p.path.as_ref()) {
            Some(p) => Some(Writing::claim(&self.writing, p).ok_or_else(|| {
                let name = p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned());
                Failure::from(format!("{title}: another action is writing tests into {name} now; run this one again once it is done"))
            })?),
            None => None,
        };
        let existing_tests = plan.as_ref().and_then(|p| p.path.as_ref()).and_then(|p| read(p));
        let framework = plan.as_ref().map_or("", |p| p.framework);
        let messages = super::messages(kind, &source, target.as_ref(), framework);
        let stop = super::stop_rule(kind, spec);
        let region_len = match (kind, &target) {
            (Kind::Fix { range, .. }, t) => super::fix_region(text, range, t.as_ref()).len(),
            (_, Some(t)) => t.range.len(),
            _ => 0,
        };
        let max_tokens = max_tokens(kind, config.actions.max_tokens, region_len);
        let local_context = peers.local_context();
        let decision = self.route(kind, &request, config, &messages, max_tokens, local_context);
        let headline = format!("{title} — {}: {}", decision.route.name(), decision.reason);
        *lock(&self.last_route) = Some(headline.clone());
        tracing::info!(action = %title, route = decision.route.name(), reason = %decision.reason, "code action routed");
        if decision.route == Route::Unavailable {
            return Err(Failure { message: format!("{title}: {}", decision.reason), route: Some(headline) });
        }
        Ok(Prepared {
            request,
            target,
            title,
            plan,
            existing_tests,
            _writing: writing,
            messages,
            stop,
            max_tokens,
            local_context,
            decision,
            headline,
        })
    }

    /// The route for an action: privacy, exclusions, preference, breaker and budget as they
    /// stand now.
    fn route(&self, kind: &Kind, request: &Request, config: &Config, messages: &[(String, String)], max_tokens: u32, local_context: Option<u64>) -> Decision {
        let relative = request.path.as_ref().map(|p| {
            request.root.as_ref().and_then(|r| p.strip_prefix(r).ok()).unwrap_or(p).to_string_lossy().replace('\\', "/")
        });
        let (exclusions, bad_globs) = Exclusions::new(&config.cloud.exclude);
        for e in bad_globs {
            tracing::warn!("{e}");
        }
        let excluded = relative.as_deref().and_then(|r| exclusions.matching(r)).map(str::to_owned);
        let prompt_text: String = messages.iter().map(|(_, c)| c.as_str()).collect();
        let tokens_needed = route::estimate_tokens(&prompt_text) + 16 + max_tokens as u64;
        let breaker_state = {
            let mut b = lock(&self.breaker);
            let (threshold, cooldown) = (config.cloud.breaker_failures.max(1), Duration::from_secs(config.cloud.breaker_cooldown_s));
            // New breaker settings start a new count.
            if b.as_ref().is_none_or(|b| b.threshold != threshold || b.cooldown != cooldown) {
                *b = Some(Breaker::new(threshold, cooldown));
            }
            b.as_ref().expect("set above").state(Instant::now())
        };
        let used = lock(&self.budget).used_on(route::today());
        let task = kind.task();
        let prefer = match task {
            Task::Tests => config.actions.prefer.tests,
            Task::Docstring => config.actions.prefer.docstring,
            Task::Refactor => config.actions.prefer.refactor,
            _ => config.actions.prefer.fix,
        }
        .unwrap_or(Prefer::Auto);
        route::route(&route::Inputs {
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
        })
    }

    /// Generates on the route decided and turns the answer into changes: a cloud that fails,
    /// or answers with something unusable, falls back to the local model (said through
    /// [`Peers::report`]). The error says what failed, both routes when both did.
    pub async fn answer(&self, p: &Prepared<'_>, config: &Config, peers: &impl Peers) -> Result<Answered, String> {
        let cancel = CancelFlag::new();
        let mut fallback = None;
        if p.decision.route == Route::Cloud {
            let why = match self.cloud_answer(config, &p.messages, p.max_tokens, &p.stop, &cancel, peers).await {
                Ok((text, cached)) => match p.build(&text) {
                    Ok(changes) => return Ok(Answered { changes, route: Route::Cloud, cached, fallback: None }),
                    Err(e) => format!("the cloud's answer was unusable ({e})"),
                },
                Err(e) => format!("the cloud failed: {e}"),
            };
            tracing::warn!("{}: {why}; falling back to the local model", p.title);
            peers.report(format!("{why}; falling back to the local model")).await;
            fallback = Some(why);
        }
        let local = match p.local_context {
            Some(_) => {
                let request = ChatRequest { messages: p.messages.clone(), max_tokens: p.max_tokens, stop: p.stop.clone(), cancel };
                peers.local(request).await
            }
            None => Err("no local model is loaded".into()),
        };
        match local.and_then(|text| p.build(&text)) {
            Ok(changes) => Ok(Answered { changes, route: Route::Local, cached: false, fallback }),
            Err(e) => Err(match &fallback {
                Some(why) => format!("{}: {why}; the local model then failed too: {e}", p.title),
                None => format!("{}: {e}", p.title),
            }),
        }
    }

    /// The action's edit was sent: the route line `ghostline.lastRoute` answers from now on.
    pub fn conclude(&self, p: &Prepared<'_>, answered: &Answered) -> String {
        let summary = match (&answered.fallback, answered.cached) {
            (Some(why), _) => format!("{why}; ran locally instead"),
            (None, true) => format!("{} (cached answer)", p.decision.reason),
            (None, false) => p.decision.reason.clone(),
        };
        let line = format!("{} — {}: {summary}", p.title, answered.route.name());
        *lock(&self.last_route) = Some(line.clone());
        line
    }

    /// The cloud's answer and whether it came from the cache: from the cache, else from the
    /// endpoint; redacted on the way out (privacy `redact`), restored on the way back. The
    /// endpoint's failures feed the circuit breaker, its answers the daily budget.
    async fn cloud_answer(
        &self,
        config: &Config,
        messages: &[(String, String)],
        max_tokens: u32,
        stop: &ChatStop,
        cancel: &CancelFlag,
        peers: &impl Peers,
    ) -> Result<(String, bool), CloudError> {
        let mut redactions = Redactions::default();
        let outgoing: Vec<(String, String)> = match config.privacy {
            Privacy::Redact => messages.iter().map(|(r, c)| (r.clone(), redact::redact(c, &mut redactions))).collect(),
            _ => messages.to_vec(),
        };
        if !redactions.is_empty() {
            tracing::info!(count = redactions.pairs.len(), "redacted secrets before sending");
        }
        let endpoint = config.cloud.endpoint.clone().unwrap_or_default();
        let max = max_tokens.to_string();
        let mut parts: Vec<&str> = vec![&endpoint, &config.cloud.model, &max];
        for (r, c) in &outgoing {
            parts.push(r);
            parts.push(c);
        }
        let key = cache::key(&parts);
        let disk = config.cloud.cache_dir.clone().or_else(cache::default_dir).and_then(|d| DiskCache::open(&d, config.cloud.cache_entries as usize).ok());
        tracing::debug!(key = %key, cache = disk.is_some(), "cloud request");
        if let Some(hit) = disk.as_ref().and_then(|c| c.get(&key)) {
            return Ok((redactions.restore(&hit.text), true));
        }
        let result = peers.cloud(&config.cloud, &outgoing, max_tokens, stop, cancel).await;
        let now = Instant::now();
        let mut breaker = lock(&self.breaker);
        let breaker = breaker.get_or_insert_with(|| Breaker::new(config.cloud.breaker_failures, Duration::from_secs(config.cloud.breaker_cooldown_s)));
        match result {
            Ok(answer) => {
                breaker.success();
                let spent = if answer.prompt_tokens + answer.completion_tokens > 0 {
                    answer.prompt_tokens + answer.completion_tokens
                } else {
                    outgoing.iter().map(|(_, c)| route::estimate_tokens(c)).sum::<u64>() + route::estimate_tokens(&answer.text)
                };
                lock(&self.budget).spend(route::today(), spent);
                if let Some(c) = &disk {
                    let entry = cache::Entry { text: answer.text.clone(), prompt_tokens: answer.prompt_tokens, completion_tokens: answer.completion_tokens };
                    if let Err(e) = c.put(&key, &entry) {
                        tracing::warn!("cannot write the cloud cache: {e}");
                    }
                }
                tracing::info!(attempts = answer.attempts, ms = answer.total_ms, tokens = spent, "cloud answered");
                Ok((redactions.restore(&answer.text), false))
            }
            Err(CloudError::Cancelled) => Err(CloudError::Cancelled),
            Err(e) => {
                breaker.failure(now);
                Err(e)
            }
        }
    }
}

/// The cloud client, built on the first cloud-routed action (never in offline mode) and
/// rebuilt when the cloud settings change.
#[derive(Default)]
pub struct CloudClients(Mutex<Option<(CloudConfig, Arc<CloudClient>)>>);

impl CloudClients {
    pub fn get(&self, config: &CloudConfig) -> Result<Arc<CloudClient>, CloudError> {
        let mut slot = lock(&self.0);
        match slot.as_ref() {
            Some((c, client)) if c == config => Ok(client.clone()),
            _ => CloudClient::new(config).map(|client| {
                let client = Arc::new(client);
                *slot = Some((config.clone(), client.clone()));
                client
            }),
        }
    }
}

/// Marks a test file as being written by one action; unmarked when dropped.
struct Writing<'a> {
    set: &'a Mutex<HashSet<PathBuf>>,
    path: PathBuf,
}

impl<'a> Writing<'a> {
    /// `None` when another action is writing `path` now.
    fn claim(set: &'a Mutex<HashSet<PathBuf>>, path: &Path) -> Option<Self> {
        lock(set).insert(path.to_owned()).then(|| Writing { set, path: path.to_owned() })
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        lock(self.set).remove(&self.path);
    }
}

/// Files and folders ghostline created for an edit (for clients that cannot create files),
/// removed again when the edit is not applied: a refused edit leaves nothing behind.
#[derive(Default)]
pub struct Created(Vec<PathBuf>);

impl Created {
    /// Creates the folders `file` needs and `file` itself, empty, remembering each.
    pub fn file(&mut self, file: &Path) -> Result<(), String> {
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
    pub fn undo(self) {
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

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
