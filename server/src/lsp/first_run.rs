//! The first run as the editor sees it: with no model configured or found, ask once
//! (`window/showMessageRequest`: *Download <model> (<size>)*, *Choose a file…*, *Not now*), pull
//! in-process with `$/progress` (or log lines), then load what was pulled. What to offer and
//! the pull itself are `pull::first_run`'s; this file only asks, converts and reports.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::{Bounded, Client, NotCancellable, OngoingProgress};

type Ongoing = OngoingProgress<Bounded, NotCancellable>;

use super::state::{ClientCaps, State};
use super::Backend;
use crate::config::Config;
use crate::pull::first_run::{self, Offer, Step, Watched};

/// Asked at most once per server.
static ASKED: AtomicBool = AtomicBool::new(false);

pub const CHOOSE: &str = "Choose a file…";
pub const NOT_NOW: &str = "Not now";
/// How long the question may stay unanswered before a message says how else to get a model
/// (a client may never answer it); a later answer is still followed. `GHOSTLINE_QUESTION_WAIT_MS`
/// shortens it for the tests.
const QUESTION_WAIT: Duration = Duration::from_secs(30);
/// How often `$/progress` reports (or, without it, log lines) follow the download.
const REPORT_EVERY: Duration = Duration::from_millis(250);
const LOG_EVERY: Duration = Duration::from_secs(5);

/// Sent on *Choose a file…* to a client that declared `experimental.ghostline.chooseModel`
/// (the VS Code extension: it opens a file dialog and writes `ghostline.model.path`).
pub enum ChooseModel {}

impl Notification for ChooseModel {
    type Params = ();
    const METHOD: LspNotificationMethod<'static> = LspNotificationMethod::new("ghostline/chooseModel");
    const MESSAGE_DIRECTION: MessageDirection = MessageDirection::ServerToClient;
}

impl Backend {
    /// At `initialized`: when no model is configured or found, no `model.endpoint` generates
    /// instead, and downloads are allowed, asks (once per server, in a task: nothing waits for
    /// the answer) and returns `true`. Otherwise `false`, and the usual status report says how to
    /// configure a path.
    pub(super) fn first_run(&self) -> bool {
        let config = self.state().config.clone();
        let needed = config.model.path.is_none() && config.model.endpoint.is_none();
        if !needed || !first_run::may_download(&config) || ASKED.swap(true, Ordering::SeqCst) {
            return false;
        }
        let task = Task { client: self.client.clone(), state: self.state.clone(), caps: self.caps() };
        tokio::spawn(task.run(config));
        true
    }
}

/// What the first run needs of the server, outside any handler.
struct Task {
    client: Client,
    state: Arc<Mutex<State>>,
    caps: ClientCaps,
}

fn action(title: &str) -> MessageActionItem {
    MessageActionItem { title: title.to_owned(), properties: Default::default() }
}

impl Task {
    async fn run(self, config: Config) {
        let offer = first_run::offer(&config).await;
        let message = match &offer {
            Some(o) => format!(
                "ghostline: no model configured, and none found on this machine. Download {} ({}, {}) from the Hugging Face Hub? It is the model recommended for this machine (`ghostline doctor --recommend` says why). {}",
                o.known.name,
                o.known.repo,
                first_run::size_text(o.size),
                if o.size_from_hub {
                    "To show its size, ghostline asked the Hub for this file's metadata (one HEAD request, no code or other data); nothing is downloaded unless you choose Download."
                } else {
                    "Its size is the catalog's estimate (the Hub did not answer the size lookup); nothing is downloaded unless you choose Download."
                }
            ),
            None => "ghostline: no model configured, none found on this machine, and none of the known models fits the memory budget (model.memoryBudgetMb). Choose a GGUF file?".to_owned(),
        };
        let mut actions: Vec<MessageActionItem> = offer.iter().map(|o| action(&o.title())).collect();
        actions.extend([action(CHOOSE), action(NOT_NOW)]);
        let answer = {
            let client = self.client.clone();
            let question = client.show_message_request(MessageType::Info, message, Some(actions));
            tokio::pin!(question);
            tokio::select! {
                answer = &mut question => answer,
                () = tokio::time::sleep(question_wait()) => {
                    // Some clients never answer (or never show) the question: say it plainly,
                    // and still follow an answer that comes later.
                    let message = format!("ghostline: no model, and the download question got no answer: completions are off. {}", fix(offer.as_ref()));
                    tracing::warn!("{message}");
                    self.client.show_message(MessageType::Warning, message).await;
                    question.await
                }
            }
        };
        let title = match answer {
            Ok(Some(item)) => item.title,
            Ok(None) => String::new(),
            Err(e) => {
                // The client cannot ask (MethodNotFound, …): a message instead of the question.
                let message = format!(
                    "ghostline: no model configured and none found; this editor could not show the download question ({}): completions are off. {}",
                    e.message,
                    fix(offer.as_ref())
                );
                tracing::warn!("{message}");
                self.client.show_message(MessageType::Warning, message).await;
                return;
            }
        };
        match offer {
            Some(offer) if title == offer.title() => self.download(offer).await,
            _ if title == CHOOSE => self.choose().await,
            _ => {
                // Not now, or the question closed: no message box, a log line (a status bar shows it).
                let why = "ghostline: no model configured, none downloaded (not now): completions are off this session; set model.path, run `ghostline pull`, or restart the server to be asked again";
                tracing::info!("{why}");
                self.client.log_message(MessageType::Info, why).await;
            }
        }
    }

    async fn choose(&self) {
        if self.caps.choose_model {
            self.client.send_notification::<ChooseModel>(()).await;
        } else {
            let how = format!(
                "ghostline: set `model.path` to a GGUF file in the editor's settings for ghostline (Neovim: `init_options = {{ model = {{ path = … }} }}`; Helix: `[language-server.ghostline.config.model] path = …` in languages.toml), or the {} environment variable; `ghostline models` lists the GGUF files already on this machine",
                crate::config::MODEL_ENV
            );
            self.client.show_message(MessageType::Info, how).await;
        }
    }

    async fn download(self, offer: Offer) {
        // The settings may have named a model while the question was open.
        let config = lock(&self.state).config.clone();
        if config.model.path.is_some() {
            tracing::info!("first run: a model was configured meanwhile; not downloading");
            return;
        }
        let (progress, steps) = Watched::channel();
        let report = tokio::spawn(report(self.client.clone(), self.caps.work_done_progress, offer.known.name, steps));
        let runtime = tokio::runtime::Handle::current();
        let pulled = {
            let (offer, config) = (offer.clone(), config.clone());
            // The sha256 check reads the whole file: not on the runtime's workers.
            tokio::task::spawn_blocking(move || runtime.block_on(first_run::pull(&offer, &config, &progress)))
                .await
                .unwrap_or_else(|e| Err(format!("the download stopped: {e}")))
        };
        let ongoing = report.await.ok().flatten();
        let pulled = match pulled {
            Ok(p) => p,
            Err(e) => {
                if let Some(p) = ongoing {
                    p.finish_with_message("failed").await;
                }
                tracing::error!("first run: {e}");
                let message = format!("ghostline: {} was not downloaded: {e}. {}", offer.known.name, fix(Some(&offer)));
                self.client.show_message(MessageType::Error, message).await;
                return;
            }
        };
        if let Some(p) = ongoing {
            p.finish_with_message("downloaded; loading the model").await;
        }
        tracing::info!(path = %pulled.path.display(), fetched = pulled.fetched, "first run: pulled");
        // Found where discovery looks (the Hub cache): the model loads with no setting edited.
        let mut config = lock(&self.state).config.clone();
        if config.model.path.is_some() {
            return;
        }
        crate::model::discover::fill_in(&mut config.model);
        let same = |p: &std::path::Path| p.canonicalize().ok() == pulled.path.canonicalize().ok();
        if !config.model.path.as_deref().is_some_and(same) {
            tracing::warn!("discovery did not pick the downloaded model first; using it anyway");
            config.model.path = Some(pulled.path.clone());
            config.model.discovered = Some(format!("no model configured; using {} downloaded from the Hugging Face Hub", pulled.path.display()));
        }
        lock(&self.state).config = config;
        super::model::start_model_in(&self.client, &self.state, self.caps, true);
    }
}

/// What is missing is a model; the one command (or setting) that gets one.
fn fix(offer: Option<&Offer>) -> String {
    match offer {
        Some(o) => format!(
            "To get it: run `ghostline pull {}` in a terminal (it resumes an interrupted download), then restart the language server; or set model.path to a GGUF file",
            o.known.name
        ),
        None => "To get one: set model.path to a GGUF file (no known model fits model.memoryBudgetMb; `ghostline doctor --recommend` says what each needs)".to_owned(),
    }
}

fn question_wait() -> Duration {
    std::env::var("GHOSTLINE_QUESTION_WAIT_MS").ok().and_then(|v| v.parse().ok()).map_or(QUESTION_WAIT, Duration::from_millis)
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Follows the download until it ends: `$/progress` begin and reports with percent and MB/s
/// when the client supports it (returned, for the caller to end with the outcome), else a log
/// line every few seconds.
async fn report(client: Client, work_done_progress: bool, name: &'static str, mut steps: tokio::sync::watch::Receiver<Step>) -> Option<Ongoing> {
    let title = format!("ghostline: downloading {name}");
    let mut ongoing = None;
    if work_done_progress {
        let token = ProgressToken::String(format!("ghostline/pull/{}", std::process::id()));
        if client.create_work_done_progress(token.clone()).await.is_ok() {
            ongoing = Some(client.progress(token, title.clone()).with_percentage(0).begin().await);
        }
    }
    let mut last_log = Instant::now();
    loop {
        // The sender goes when the pull ends, whether it started downloading or not.
        let done = steps.changed().await.is_err();
        let step = *steps.borrow_and_update();
        let done = done || step.finished;
        let now = Instant::now();
        if step.total > 0 {
            match &ongoing {
                Some(p) => p.report_with_message(step.describe(now), step.percent()).await,
                None if done || now.duration_since(last_log) >= LOG_EVERY => {
                    last_log = now;
                    client.log_message(MessageType::Info, format!("{title}: {}% ({})", step.percent(), step.describe(now))).await;
                }
                None => {}
            }
        }
        if done {
            return ongoing;
        }
        tokio::time::sleep(REPORT_EVERY).await;
    }
}
