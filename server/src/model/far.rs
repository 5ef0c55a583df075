//! What the backends that generate outside this process share — the endpoint (`remote.rs`) and
//! the shared host (`host/`): the in-process model a job falls back on, started on first need
//! from the same GGUF, and the words `Timings::backend` carries about it.

use tokio::sync::{oneshot, watch};

use super::{GenerateError, Generation, Job, ModelHandle, ModelStatus, Reach, Sampling, Timings};
use crate::config::ModelConfig;

pub(super) struct Fallback {
    /// The model configuration with neither endpoint nor host: this process's own model.
    config: ModelConfig,
    sampling: Sampling,
    local: Option<ModelHandle>,
}

impl Fallback {
    pub fn new(config: &ModelConfig, sampling: Sampling) -> Fallback {
        let mut config = config.clone();
        config.endpoint = None;
        config.shared = false;
        Fallback { config, sampling, local: None }
    }

    /// The in-process model thread, started now if need be (`why` goes to the log).
    pub fn start(&mut self, why: &str) -> &ModelHandle {
        self.local.get_or_insert_with(|| {
            tracing::info!("starting the model in this process: {why}");
            ModelHandle::spawn(&self.config, self.sampling)
        })
    }

    /// Unloads the in-process model, if it was started (the window went back to the shared
    /// host): its thread ends and its memory is freed before this returns.
    pub fn stop(&mut self) {
        if self.local.take().is_some() {
            tracing::info!("the model in this process is unloaded");
        }
    }

    /// The in-process model's status, once started.
    pub fn status(&self) -> Option<watch::Receiver<ModelStatus>> {
        self.local.as_ref().map(ModelHandle::status)
    }

    /// Runs `job` on the in-process model (started now if need be) when `allowed`, with
    /// `local: why` in its timings; else answers it with no suggestion and `none: why` (a chat
    /// job: unavailable).
    pub fn run(&mut self, job: Job, why: String, allowed: bool) {
        if !allowed || self.config.path.is_none() {
            tracing::info!("no suggestion: {why}");
            let timings = Timings { backend: Some(format!("none: {why}")), ..Timings::default() };
            match job {
                Job::Complete { reply, .. } => {
                    let _ = reply.send(Ok(Generation { text: String::new(), timings }));
                }
                Job::Chat { reply, .. } => {
                    let _ = reply.send(Err(GenerateError::Unavailable(format!("{why}, and `model.localFallback` is off or no `model.path` is set"))));
                }
            }
            return;
        }
        let handle = self.start(&why);
        tracing::debug!("generating locally: {why}");
        let (tx, rx) = oneshot::channel();
        let (forwarded, reply) = match job {
            Job::Complete { request, reply, .. } => (Job::Complete { request, reply: tx, reach: Reach::default() }, reply),
            Job::Chat { request, reply } => (Job::Chat { request, reply: tx }, reply),
        };
        let result = match handle.jobs.as_ref().map(|jobs| jobs.send(forwarded)) {
            Some(Ok(())) => rx.blocking_recv().unwrap_or_else(|_| Err(GenerateError::Unavailable(super::THREAD_STOPPED.into()))),
            _ => Err(GenerateError::Unavailable(super::THREAD_STOPPED.into())),
        };
        let _ = reply.send(result.map(|mut g| {
            g.timings.backend = Some(format!("local: {why}"));
            g
        }));
    }
}
