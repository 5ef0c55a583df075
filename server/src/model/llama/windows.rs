//! The shared host's model thread (`model/host/`): one model, one context per connected window
//! within the memory plan, every job run by the same [`Worker`] as in-process, one at a time in
//! the order they arrive.
//!
//! A window's context is its own: its KV cache, saved states and suggestion cache are never
//! touched by another window's jobs. When more windows are connected than the memory plan has
//! contexts for, the least recently used window's context is freed; its next job gets a new one
//! (a cold prompt, the same answer: completions decode in aligned batches).

use std::path::PathBuf;
use std::sync::mpsc;

use tokio::sync::watch;

use super::{Loaded, Worker};
use crate::config::ModelConfig;
use crate::model::{GenerateError, Job, ModelStatus, Sampling};

/// Contexts at most, whatever the budget allows.
const MAX_CONTEXTS: usize = 8;

/// What the host's connections ask of its model thread.
pub enum HostWork {
    /// A job of the window `window`.
    Job { window: u64, job: Job },
    /// The window has gone: its context is freed.
    Gone { window: u64 },
}

/// Loads the model (reporting on `status`) and serves `work` until the channel closes.
pub fn serve_windows(path: PathBuf, config: ModelConfig, sampling: Sampling, status: watch::Sender<ModelStatus>, work: mpsc::Receiver<HostWork>) {
    let loaded = match Loaded::load(&path, &config, &status) {
        Ok(l) => l,
        Err(message) => return fail(message, &status, work),
    };
    let contexts = contexts_fit(&loaded);
    let saved_bytes = loaded.saved_bytes(contexts);
    // The first context is made at once: it proves the model runs, and gives the facts.
    let first = match loaded.worker(&path, sampling, saved_bytes) {
        Ok(w) => w,
        Err(message) => return fail(message, &status, work),
    };
    let info = loaded.info(&path, &config, &first);
    tracing::info!(path = %path.display(), format = %info.format, n_ctx = info.n_ctx, contexts, load_ms = info.load_ms, "model ready");
    status.send_replace(ModelStatus::Ready(info));
    let mut spare = Some(first);
    // (window, its worker, when it last ran a job)
    let mut windows: Vec<(u64, Worker<'_>, u64)> = Vec::new();
    let mut tick = 0u64;
    while let Ok(work) = work.recv() {
        let (window, job) = match work {
            HostWork::Gone { window } => {
                windows.retain(|(w, _, _)| *w != window);
                continue;
            }
            HostWork::Job { window, job } => (window, job),
        };
        tick += 1;
        let at = match windows.iter().position(|(w, _, _)| *w == window) {
            Some(at) => at,
            None => {
                if windows.len() >= contexts {
                    let lru = windows.iter().enumerate().min_by_key(|(_, (_, _, used))| *used).map_or(0, |(i, _)| i);
                    let (gone, _, _) = windows.remove(lru);
                    tracing::info!(window = gone, for_window = window, contexts, "freed the least recently used window's context: the memory plan holds no more");
                }
                let worker = match spare.take() {
                    Some(w) => Ok(w),
                    None => loaded.worker(&path, sampling, saved_bytes),
                };
                match worker {
                    Ok(w) => {
                        tracing::debug!(window, "a context for the window");
                        windows.push((window, w, tick));
                        windows.len() - 1
                    }
                    Err(message) => {
                        tracing::error!("{message}");
                        job.reply(Err(GenerateError::Failed(message)));
                        continue;
                    }
                }
            }
        };
        windows[at].2 = tick;
        crate::fault::hold("host-job");
        windows[at].1.serve(job);
    }
    tracing::debug!("host model thread exits");
}

/// Contexts the memory plan holds beside the weights (each as the plan sized one), at least one.
fn contexts_fit(loaded: &Loaded) -> usize {
    let Some(p) = &loaded.plan else { return MAX_CONTEXTS };
    let context = p.total_bytes.saturating_sub(p.weights_bytes).max(1);
    let fit = (p.budget_bytes.saturating_sub(p.weights_bytes) / context) as usize;
    tracing::info!(fit, context_mib = context >> 20, "memory: contexts of this size fit the budget beside the weights");
    fit.clamp(1, MAX_CONTEXTS)
}

fn fail(message: String, status: &watch::Sender<ModelStatus>, work: mpsc::Receiver<HostWork>) {
    tracing::error!("{message}");
    status.send_replace(ModelStatus::Failed(message.clone()));
    while let Ok(w) = work.recv() {
        if let HostWork::Job { job, .. } = w {
            job.reply(Err(GenerateError::Unavailable(message.clone())));
        }
    }
}
