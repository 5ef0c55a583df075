//! The shared host's model threads (`model/host/`): one model, and for each connected window a
//! context of its own (within the memory plan) on a thread of its own, running the window's jobs
//! with the same [`Worker`] as in-process, in the order they arrive.
//!
//! A window's context is its own: its KV cache, saved states and suggestion cache are never
//! touched by another window's jobs. When more windows are connected than the memory plan has
//! contexts for, the least recently used window's context is freed once its job in flight is
//! done; its next job gets a new one (a cold prompt, the same answer).
//!
//! The windows' jobs run at once, and their decodes take turns on one compute thread
//! ([`Compute`], a generated token before a prompt batch): a key in one window does not wait
//! for the whole job another window's key started.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::ScopedJoinHandle;

use tokio::sync::watch;

use super::compute::Compute;
use super::{next_live_job, Loaded};
use crate::config::ModelConfig;
use crate::model::{GenerateError, Job, ModelStatus, Sampling};

/// Contexts at most, whatever the budget allows.
const MAX_CONTEXTS: usize = 8;

/// What the host's connections ask of its model threads.
pub enum HostWork {
    /// A job of the window `window`.
    Job { window: u64, job: Job },
    /// The window has gone: its context is freed.
    Gone { window: u64 },
}

/// A connected window's model thread, as the dispatcher sees it.
struct Window<'scope> {
    id: u64,
    jobs: mpsc::Sender<Job>,
    /// When it last got a job (the dispatcher's count of jobs).
    used: u64,
    thread: ScopedJoinHandle<'scope, ()>,
}

/// Loads the model (reporting on `status`) and serves `work` until the channel closes.
pub fn serve_windows(path: PathBuf, config: ModelConfig, sampling: Sampling, status: watch::Sender<ModelStatus>, work: mpsc::Receiver<HostWork>) {
    let loaded = match Loaded::load(&path, &config, &status) {
        Ok(l) => l,
        Err(message) => return fail(message, &status, work),
    };
    let contexts = contexts_fit(&loaded);
    let saved_bytes = loaded.saved_bytes(contexts);
    let compute = match Compute::start() {
        Ok(c) => c,
        Err(message) => return fail(message, &status, work),
    };
    // A first context proves the model runs and gives the facts; each window makes its own.
    let info = match loaded.worker(&path, sampling, saved_bytes, Some(compute.handle())) {
        Ok(first) => loaded.info(&path, &config, &first),
        Err(message) => return fail(message, &status, work),
    };
    tracing::info!(path = %path.display(), format = %info.format, n_ctx = info.n_ctx, contexts, load_ms = info.load_ms, "model ready");
    status.send_replace(ModelStatus::Ready(info));
    let (loaded, path, compute) = (&loaded, path.as_path(), &compute);
    std::thread::scope(|scope| {
        let mut windows: Vec<Window<'_>> = Vec::new();
        let mut tick = 0u64;
        while let Ok(work) = work.recv() {
            let (window, job) = match work {
                // Its sender dropped, the thread ends (its jobs were cancelled by the connection).
                HostWork::Gone { window } => {
                    windows.retain(|w| w.id != window);
                    continue;
                }
                HostWork::Job { window, job } => (window, job),
            };
            tick += 1;
            let at = match windows.iter().position(|w| w.id == window) {
                Some(at) => at,
                None => {
                    // Over the plan: the least recently used window's thread ends after its job
                    // in flight, and the new one waits for it before making its context.
                    let freed = (windows.len() >= contexts).then(|| {
                        let lru = windows.iter().enumerate().min_by_key(|(_, w)| w.used).map_or(0, |(i, _)| i);
                        let gone = windows.remove(lru);
                        tracing::info!(window = gone.id, for_window = window, contexts, "freeing the least recently used window's context: the memory plan holds no more");
                        gone.thread
                    });
                    let (jobs, queue) = mpsc::channel();
                    let spawned = std::thread::Builder::new()
                        .name(format!("ghostline-model-{window}"))
                        .spawn_scoped(scope, move || window_thread(loaded, path, sampling, saved_bytes, compute, queue, freed));
                    match spawned {
                        Ok(thread) => {
                            windows.push(Window { id: window, jobs, used: tick, thread });
                            windows.len() - 1
                        }
                        Err(e) => {
                            job.reply(Err(GenerateError::Failed(format!("cannot start a model thread for a window: {e}"))));
                            continue;
                        }
                    }
                }
            };
            windows[at].used = tick;
            if let Err(mpsc::SendError(job)) = windows[at].jobs.send(job) {
                windows.remove(at);
                job.reply(Err(GenerateError::Failed("the window's model thread stopped; its next request starts another".into())));
            }
        }
        // The connections' side closed: every window's thread ends with its sender.
        windows.clear();
    });
    tracing::debug!("host model threads exit");
}

/// One window's model thread: makes its context at its first job (once `freed`, the thread of
/// the window whose context it replaces, has ended), then runs its jobs until the dispatcher
/// drops its sender.
fn window_thread(loaded: &Loaded, path: &Path, sampling: Sampling, saved_bytes: usize, compute: &Compute, jobs: mpsc::Receiver<Job>, freed: Option<ScopedJoinHandle<'_, ()>>) {
    if let Some(thread) = freed {
        let _ = thread.join();
    }
    let mut worker = None;
    while let Some(job) = next_live_job(&jobs) {
        if worker.is_none() {
            match loaded.worker(path, sampling, saved_bytes, Some(compute.handle())) {
                Ok(w) => {
                    tracing::debug!("a context for the window");
                    worker = Some(w);
                }
                Err(message) => {
                    tracing::error!("{message}");
                    job.reply(Err(GenerateError::Failed(message)));
                    continue;
                }
            }
        }
        let Some(worker) = worker.as_mut() else { continue };
        // A held job is one that runs long (tests).
        crate::fault::hold("host-job");
        worker.serve(job);
    }
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
