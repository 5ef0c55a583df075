//! The model's life as the protocol layer sees it: settings read and applied (a new model, or
//! new completion settings on the same one), the model thread restarted when it dies, and its
//! status reported to the editor (`$/progress` while it loads, messages when it fails).

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tower_lsp_server::gen_lsp_types::*;
use tower_lsp_server::Client;

use super::state::{ClientCaps, State};
use super::Backend;
use crate::config::{self, Config};
use crate::engine::Engine;
use crate::model::{ModelHandle, ModelStatus, Sampling};

impl Backend {
    /// Parses settings key by key over `base` (the settings in force; `null` at `initialize`):
    /// unknown keys are a logged warning; a bad value is an error message, and that key keeps
    /// its value in `base` while the others apply. Settings that are not an object are refused.
    pub(super) fn read_settings(&self, value: &Value, base: &Value) -> Result<ReadSettings, String> {
        let read = config::parse_lenient(value, base)?;
        if !read.parsed.unknown_keys.is_empty() {
            tracing::warn!(keys = ?read.parsed.unknown_keys, "ignoring unknown ghostline settings");
        }
        for error in &read.errors {
            tracing::error!("{error}");
        }
        let mut config = read.parsed.options.resolve(config::env_model());
        // No model named: look where users already keep models (model::discover).
        crate::model::discover::fill_in(&mut config.model);
        crate::config::set_log_code(config.log_code);
        Ok(ReadSettings { config, kept: read.kept, errors: read.errors })
    }

    /// (Re)starts the model with the current configuration. Its loading is reported to the
    /// client when `report` is set (only once the client is initialized).
    pub(super) fn start_model(&self, report: bool) {
        start_model_in(&self.client, &self.state, self.caps(), report);
    }

    /// Completion settings the model thread does not fix at start: a new engine on the same
    /// model, no reload. With no engine (the model kept stopping), a settings change starts it.
    pub(super) fn apply_completion_settings(&self) {
        let mut state = self.state();
        let completion = state.config.completion.clone();
        match state.engine.as_ref().map(|engine| Arc::new(engine.with_config(completion))) {
            Some(engine) => {
                state.set_engine(Some(engine));
            }
            None => {
                drop(state);
                self.start_model(true);
            }
        }
    }

    pub(super) fn report_model_status(&self) {
        report_status_in(&self.client, &self.state, self.caps());
    }

    /// The model thread died (a panic outside any job): tell the user and load the model
    /// again, at most three times in ten minutes.
    pub(super) async fn restart_dead_model(&self) {
        let why = crate::fault::last_panic().unwrap_or_else(|| "unknown cause".into());
        let allowed = {
            let mut state = self.state();
            let now = std::time::Instant::now();
            state.restarts.retain(|t| now.duration_since(*t) < std::time::Duration::from_secs(600));
            state.restarts.push(now);
            state.restarts.len() <= 3
        };
        if allowed {
            tracing::error!("the model thread stopped ({why}); reloading the model");
            self.client
                .show_message(MessageType::Warning, format!("ghostline: the model stopped unexpectedly ({why}); reloading it"))
                .await;
            self.start_model(true);
        } else {
            let old = self.state().set_engine(None);
            drop(old);
            self.client
                .show_message(MessageType::Error, format!("ghostline: the model keeps stopping ({why}); completions are off until the settings change"))
                .await;
        }
    }

    /// `workspace/didChangeConfiguration`: the change laid over the settings in force, then
    /// applied (a new model, new completion settings, or nothing for the engine); a bad value
    /// keeps its key's previous value, settings that are not an object keep all of them.
    pub(super) async fn change_settings(&self, settings: &Value) {
        // A change names only what changes: it is laid over the settings in force.
        let layered = match config::check_shape(settings) {
            Ok(()) => {
                let change = config::unwrap_namespace(settings);
                if change.is_null() || change.as_object().is_some_and(|m| m.is_empty()) {
                    tracing::debug!("didChangeConfiguration without settings: nothing changes");
                    return;
                }
                Ok(config::layer(&self.state().settings, change))
            }
            Err(message) => Err(message),
        };
        let base = self.state().settings.clone();
        match layered.and_then(|layered| self.read_settings(&layered, &base)) {
            Ok(ReadSettings { config: new, kept, errors }) => {
                let (change, reindex) = {
                    let mut state = self.state();
                    let change = settings_change(&state.config, &new);
                    // What the index may read changed: a new one, read again.
                    let reindex = state.config.context != new.context || state.config.completion.cross_file != new.completion.cross_file;
                    if reindex {
                        state.workspace = super::workspace::remake(&state, &new, &self.info().roots);
                    }
                    state.config = new;
                    state.settings = kept;
                    (change, reindex)
                };
                for error in errors {
                    self.client.show_message(MessageType::Error, format!("ghostline: {error}; keeping its previous value")).await;
                }
                if reindex {
                    self.index_workspace();
                }
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
    }
}

/// Settings as read: the configuration, the settings kept (bad keys replaced), and one
/// message per bad key.
pub(super) struct ReadSettings {
    pub config: Config,
    pub kept: Value,
    pub errors: Vec<String>,
}

/// [`Backend::start_model`] from outside a handler (the first run's download): the state, the
/// client and its capabilities are all it needs.
pub(super) fn start_model_in(client: &Client, state: &Mutex<State>, caps: ClientCaps, report: bool) {
    let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
    let config = lock().config.clone();
    // The new model loads only once the old thread has let its model go: one resident.
    let previous = lock().engine.as_ref().map(|e| e.model.residency());
    let handle = ModelHandle::spawn_after(&config.model, Sampling::from(&config.completion), previous);
    let engine = Arc::new(Engine::new(handle, config.completion.clone()));
    let old = lock().set_engine(Some(engine));
    if let Some(old) = old {
        // Joining the old model thread may wait for its current job: not on the runtime.
        tokio::task::spawn_blocking(move || drop(old));
    }
    if report {
        report_status_in(client, state, caps);
    }
}

fn report_status_in(client: &Client, state: &Mutex<State>, caps: ClientCaps) {
    let engine = state.lock().unwrap_or_else(PoisonError::into_inner).engine.clone();
    if let Some(engine) = engine {
        tokio::spawn(report_model_status(client.clone(), engine.model.status(), caps.work_done_progress));
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


#[cfg(test)]
mod tests {
    use super::*;

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
