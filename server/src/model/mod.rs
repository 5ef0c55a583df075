//! The model: one dedicated thread owns llama.cpp's model and context; requests reach it over
//! a channel and answers come back on a oneshot.
//!
//! llama.cpp's context is not `Send`-friendly and its KV cache is state worth keeping, so
//! everything that touches it lives on that thread ([`llama`]). A dropped future cannot stop a
//! blocking decode; a [`CancelFlag`] checked between prefill chunks and tokens does.
//!
//! The model thread knows no prompt layout: a completion reaches it as a [`GenerateRequest`]
//! whose prompt is made, when the thread takes the job, by a function of the caller's
//! (`crate::prompt`) from the model's tokenizer ([`Tokenize`]) and vocabulary facts
//! ([`VocabFacts`]); it returns token ids and a stop predicate ([`Prompt`]). This module imports
//! none of `context`, `prompt` and `postprocess` (a test below checks it).

pub mod backend;
mod cache;
pub mod discover;
mod far;
pub mod fim;
pub mod gguf;
pub mod host;
mod llama;
pub mod memory;
mod remote;
pub use remote::lead_grammar;
mod residency;
#[cfg(ghostline_sgemm_one_column)]
mod flash;
#[cfg(ghostline_sgemm_one_column)]
mod sgemm;
pub mod threads;

pub use fim::{FimFormat, Token};
pub use residency::Residency;

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, watch};

use crate::config::{CompletionConfig, ModelConfig};

/// Why a request got no answer when the model thread died under it.
pub const THREAD_STOPPED: &str = "the model thread has stopped";

/// Shared flag that stops a request's work at the next check, and how far that work got.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    cancelled: AtomicBool,
    prefilled: AtomicUsize,
    generated: AtomicUsize,
}

/// How far the model thread got with a request so far: prompt tokens decoded (those reused from
/// the KV cache not counted) and tokens generated. Kept up to date while it runs, so that a
/// cancelled request shows where its work stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub prefilled: usize,
    pub generated: usize,
}

impl CancelFlag {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::Relaxed);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Relaxed)
    }
    /// The work done for the request so far.
    pub fn progress(&self) -> Progress {
        Progress { prefilled: self.0.prefilled.load(Ordering::Relaxed), generated: self.0.generated.load(Ordering::Relaxed) }
    }
    /// Counts prompt tokens decoded (by the model thread, after each chunk).
    pub(crate) fn add_prefilled(&self, n: usize) {
        self.0.prefilled.fetch_add(n, Ordering::Relaxed);
    }
    /// Counts one generated token (by the model thread).
    pub(crate) fn add_generated(&self) {
        self.0.generated.fetch_add(1, Ordering::Relaxed);
    }
}

/// Where the model is in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelStatus {
    /// No model path configured.
    NotConfigured,
    /// Loading; progress in `0.0..=1.0`.
    Loading { progress: f32 },
    Ready(ModelInfo),
    /// The model could not be loaded; the message names the path and what is wrong.
    Failed(String),
    /// Unloaded after `model.keepAlive` of inactivity; the next request loads it again.
    Unloaded(ModelInfo),
}

/// What was loaded, for status reports (and the shared host's to its windows, less the plan).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub path: PathBuf,
    pub format: String,
    pub n_ctx: u32,
    pub n_ctx_train: u32,
    /// Tokens the context decodes at once (llama.cpp's `n_ubatch`; 0 for an endpoint).
    #[serde(default)]
    pub n_ubatch: u32,
    pub threads: u32,
    pub load_ms: f64,
    /// llama.cpp backend: "CPU", "Metal", "CUDA", "Vulkan".
    pub backend: String,
    /// Layers offloaded to the GPU ("all", "none" or a count).
    pub gpu_layers: String,
    /// The memory plan that chose `n_ctx` (absent when the GGUF's dimensions were unreadable).
    #[serde(skip_deserializing)]
    pub memory: Option<memory::Plan>,
    /// Set when the model was discovered rather than configured: which, and why.
    pub discovered: Option<String>,
}

/// Tokenization as a prompt builder needs it: implemented by the loaded model's vocabulary on
/// the model thread, and by small tokenizers in unit tests.
pub trait Tokenize {
    /// The tokens of `text`: no BOS added, special-token text read as plain text.
    fn tokenize(&self, text: &str) -> Vec<Token>;
    /// The text of one token (lossy UTF-8), for logs and tests.
    fn token_text(&self, token: Token) -> String;
    /// Which reading of the text this tokenizer gives: tokens remembered for a text (the prompt
    /// plan's memo) are reused only under the same view. 0: the text as it is; a tokenizer that
    /// redacts secrets before tokenizing ([`REDACTED_VIEW`]) has its own, so that tokens made
    /// from a text with its secrets never reach a prompt that must go without them.
    fn view(&self) -> u64 {
        0
    }
}

/// The [`Tokenize::view`] of a tokenizer that replaces secrets with placeholders first.
pub const REDACTED_VIEW: u64 = 1;

/// Where a completion may be generated when `model.endpoint` is set: decided per document by
/// `route::completion_endpoint` from the settings in force, kept in its session and carried by
/// each job. Without an endpoint, every job runs where the model thread is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Reach {
    /// The endpoint gets the prompt as the local model would (a trusted endpoint, or an
    /// untrusted one with `privacy: "allow"`).
    #[default]
    Endpoint,
    /// The endpoint gets the prompt with its secrets replaced by placeholders first (an
    /// untrusted endpoint with `privacy: "redact"`), as the cloud route redacts.
    Redacted,
    /// This machine's model only, for this reason.
    Local(String),
}

/// What a prompt builder needs to know of the loaded model besides its tokenizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VocabFacts {
    pub fim: FimFormat,
    /// The token every prompt starts with, if the vocabulary wants one.
    pub bos: Option<Token>,
    /// Tokens in the context: prompt and generated text together.
    pub n_ctx: usize,
    /// The token that starts each file of a repository-level prompt (Qwen2.5-Coder's
    /// `<|file_sep|>`), if the vocabulary has one.
    pub file_sep: Option<Token>,
}

/// A completion's prompt as the model thread runs it.
pub struct Prompt {
    /// Token ids, BOS included; empty: nothing to generate.
    pub tokens: Vec<Token>,
    /// Called with the generated text after each token: `Some(len)` once it is complete (keep
    /// `text[..len]`), `None` to go on.
    pub stop: Box<dyn Fn(&str) -> Option<usize> + Send>,
    /// Identifies `stop` for the suggestion cache: two prompts with the same tokens, stop key
    /// and `max_tokens` get the same text.
    pub stop_key: u64,
    /// Tokens to generate at most (fitted to the context by the builder).
    pub max_tokens: usize,
    /// Called with the generated text before each token: `true` while it may not end there
    /// (the model thread then takes the most likely token that is not an end token). Part of
    /// what `stop_key` identifies.
    pub unfinished: Box<dyn Fn(&str) -> bool + Send>,
    /// Text the generation must start with (a word part left out of the prompt: see
    /// `Engine::draft`); empty: none. Until the text has it, the model thread takes the most
    /// likely token that agrees with it ([`lead_rest`], [`agrees`]) — token healing: the model
    /// writes the word whole, in its own tokens, and what it writes is what the user typed.
    /// Part of what `stop_key` identifies.
    pub lead: String,
    /// Characters that may not start the text past the lead while it is blank (spaces and tabs
    /// at most): a token that would put one there is refused as an end token is while
    /// `unfinished` ([`ends_blank`]; `StopRule::blank_enders`: an argument hole's `,` and `)`).
    /// Empty: no such rule. Part of what `stop_key` identifies.
    pub blank_enders: String,
}

/// Whether a token whose text is `piece`, after the generation `so_far`, ends the text blank
/// ([`Prompt::blank_enders`]): the text past `lead` was blank (or not reached) before it, and
/// its first character after spaces and tabs is one of `enders` (a doubled `.` or `:` is not:
/// it begins a spread, a range or a path). A pure function of the text, so every backend
/// refuses the same tokens.
pub(crate) fn ends_blank(lead: &[u8], enders: &[u8], so_far: &[u8], piece: &[u8]) -> bool {
    if enders.is_empty() {
        return false;
    }
    let past = if so_far.len() < lead.len() {
        // The lead is not written yet: what of the piece goes past it.
        piece.get(lead.len() - so_far.len()..).unwrap_or_default()
    } else if so_far[lead.len()..].iter().all(|&b| b == b' ' || b == b'\t') {
        piece
    } else {
        return false;
    };
    let Some(at) = past.iter().position(|&b| b != b' ' && b != b'\t') else { return false };
    let b = past[at];
    // Doubled, `.` and `:` begin an expression (`...rest`, `..end`, `::std`).
    enders.contains(&b) && !(matches!(b, b'.' | b':') && past.get(at + 1) == Some(&b))
}

/// Whether [`ends_blank`] can refuse the next token after `so_far`.
pub(crate) fn blank_guarded(lead: &[u8], enders: &[u8], so_far: &[u8]) -> bool {
    !enders.is_empty() && so_far.get(lead.len()..).is_none_or(|past| past.iter().all(|&b| b == b' ' || b == b'\t'))
}

/// What of `lead` the generation `so_far` has still to write; `None` once it has written it
/// (or has left it: the stop rule ends it then).
pub(crate) fn lead_rest<'a>(lead: &'a [u8], so_far: &[u8]) -> Option<&'a [u8]> {
    lead.strip_prefix(so_far).filter(|rest| !rest.is_empty())
}

/// Whether a token whose text is `piece` agrees with the `rest` of a lead: it writes the rest's
/// start, or all of it and more.
pub(crate) fn agrees(rest: &[u8], piece: &[u8]) -> bool {
    !piece.is_empty() && (rest.starts_with(piece) || piece.starts_with(rest))
}

/// The suggestion cache's key of a prompt: two prompts with the same tokens, stop key and token
/// cap get the same text, whichever backend makes it.
pub(crate) fn suggestion_key(tokens: &[Token], stop_key: u64, max_tokens: usize) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tokens.hash(&mut h);
    stop_key.hash(&mut h);
    max_tokens.hash(&mut h);
    h.finish()
}

impl fmt::Debug for Prompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prompt").field("tokens", &self.tokens.len()).field("stop_key", &self.stop_key).field("max_tokens", &self.max_tokens).finish()
    }
}

/// Makes a completion's [`Prompt`] on the model thread, when it takes the job, from the loaded
/// model's tokenizer and facts (so a job queued while the model loads, or after `keepAlive`
/// unloaded it, needs no second trip). Its time counts as `Timings::build_ms`.
pub type BuildPrompt = Box<dyn Fn(&dyn Tokenize, &VocabFacts) -> Prompt + Send>;

/// One completion for the model thread to generate.
pub struct GenerateRequest {
    pub prompt: BuildPrompt,
    pub cancel: CancelFlag,
}

impl fmt::Debug for GenerateRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenerateRequest").finish_non_exhaustive()
    }
}

/// Timings and counts of one generation (see shared/PERF.md for what each ruler means). Sent in
/// `ghostline/lastTimings` and read back by `ghostline bench` as this same struct.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Tokens in the assembled prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV entries were reused from the previous request.
    pub reused_tokens: usize,
    /// Of `reused_tokens`, those whose KV entries came back from a state saved in host memory
    /// (an earlier prompt the context had moved away from).
    pub restored_tokens: usize,
    /// Prompt tokens actually decoded for this request.
    pub prefill_tokens: usize,
    /// Request start on the model thread to the first generated token.
    pub ttft_ms: f64,
    /// The part of `ttft_ms` spent building the prompt on the model thread (the prompt plan:
    /// fitting the context to the budget with the tokenizer, tokenizing, laying tokens out)
    /// before any decode.
    pub build_ms: f64,
    /// Filled by the engine, outside the model thread: building the context (scope, outline,
    /// stop rule) before the request went to the model thread, and post-processing after.
    pub context_ms: f64,
    pub postprocess_ms: f64,
    pub generated_tokens: usize,
    /// Tokens per second after the first one (0 when fewer than two tokens).
    pub decode_tokens_per_s: f64,
    pub total_ms: f64,
    /// llama.cpp threads this request was decoded with (`model.threads` at most; fewer while
    /// other processes keep cores busy, see `model::threads`). 0 when nothing was decoded.
    pub threads: u32,
    /// Generation drafted tokens from the prompt and checked them in one batch (see
    /// `Worker::prefill_and_decode`): tokens proposed, tokens the model confirmed, and the
    /// decodes the generation took (one per token without drafting).
    pub drafted_tokens: usize,
    pub accepted_tokens: usize,
    pub decode_passes: usize,
    /// Generated tokens picked without a decode, from the logits kept with the KV cache for
    /// tokens a generation before this one had already decoded there (`model::llama::replay`).
    #[serde(default)]
    pub replayed_tokens: usize,
    /// Answered without the model: from the suggestion cache (same prompt as before), from a
    /// generation made ahead for this prompt (the figures above are then that generation's), or
    /// by typed-ahead reuse (the user typed the start of the previous suggestion).
    pub cache: Option<CacheHit>,
    /// Where it was generated when `model.endpoint` or `model.shared` is set (`None` otherwise):
    /// `"endpoint"`, `"host"` (the shared model host), or `"local: …"` / `"none: …"` with the
    /// reason the endpoint or host was not used (a file the endpoint may not see, offline mode,
    /// the endpoint unreachable, the host refused or gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The prompt's token ids, for `ghostline bench` (`ghostline/lastTimings`), which replays
    /// the same prompt against a peer server. Not part of the serialized timings.
    #[serde(skip)]
    pub prompt: Vec<Token>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheHit {
    /// The suggestion cache (same prompt as before).
    Prompt,
    /// Generated ahead on the keystroke before the request (`completion.generateAhead`); the
    /// request waited only for what was left of it, if anything, and the timings are that
    /// generation's.
    #[serde(rename = "ahead")]
    GeneratedAhead,
    /// The rest of the shown suggestion, whose start the user typed (`completion.typedAhead`).
    #[serde(rename = "typed-ahead")]
    ShownSuggestion,
}

/// The raw generated text (already cut at the stop rule) and its timings.
#[derive(Debug, Clone)]
pub struct Generation {
    pub text: String,
    pub timings: Timings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GenerateError {
    Cancelled,
    /// No model: not configured, failed to load, or the model thread is gone.
    Unavailable(String),
    /// llama.cpp failed while decoding.
    Failed(String),
}

impl fmt::Display for GenerateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenerateError::Cancelled => f.write_str("cancelled"),
            GenerateError::Unavailable(m) => write!(f, "model unavailable: {m}"),
            GenerateError::Failed(m) => write!(f, "generation failed: {m}"),
        }
    }
}

impl std::error::Error for GenerateError {}

type Reply = oneshot::Sender<Result<Generation, GenerateError>>;

/// What the model thread is asked to do.
enum Job {
    /// An inline completion (the engine's path). `reach`: whether it may go to `model.endpoint`,
    /// and how.
    Complete { request: GenerateRequest, reply: Reply, reach: Reach },
    /// An instruction-style generation for a code action (see [`ChatRequest`]).
    Chat { request: ChatRequest, reply: Reply },
}

impl Job {
    fn reply(self, result: Result<Generation, GenerateError>) {
        let (Job::Complete { reply, .. } | Job::Chat { reply, .. }) = self;
        let _ = reply.send(result);
    }
}

/// Decides where a chat answer ends: the byte length to keep once the text so far is complete,
/// `None` to go on.
pub type ChatStop = Arc<dyn Fn(&str) -> Option<usize> + Send + Sync>;

/// A chat (instruction) generation for code actions: the messages go through the model's own
/// chat template; sampling is the same deterministic greedy chain as completion's. It shares the
/// one context (and KV cache) with completions but never their suggestion cache.
pub struct ChatRequest {
    /// `(role, content)` pairs: `system`, `user`, `assistant`.
    pub messages: Vec<(String, String)>,
    pub max_tokens: u32,
    pub stop: ChatStop,
    pub cancel: CancelFlag,
}

impl fmt::Debug for ChatRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatRequest").field("messages", &self.messages).field("max_tokens", &self.max_tokens).finish()
    }
}

/// Sampling settings fixed for the life of a model thread: changing them starts a new one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub repeat_penalty: f32,
    pub repeat_last_n: u32,
}

impl From<&CompletionConfig> for Sampling {
    fn from(c: &CompletionConfig) -> Self {
        Sampling { repeat_penalty: c.repeat_penalty, repeat_last_n: c.repeat_last_n }
    }
}

/// The handle the rest of the server holds. Dropping it ends the model thread.
pub struct ModelHandle {
    jobs: Option<mpsc::Sender<Job>>,
    status: watch::Receiver<ModelStatus>,
    thread: Option<JoinHandle<()>>,
    residency: Residency,
}

impl ModelHandle {
    /// Starts the model thread, which loads the model in the background, in this process
    /// (`model.shared` aside: the doctor's load check, `complete`, `eval`, the benchmarks).
    /// Requests sent while it loads wait for it; if loading fails they are answered with
    /// `Unavailable`.
    pub fn spawn(config: &ModelConfig, sampling: Sampling) -> ModelHandle {
        Self::start(config, sampling, None, false)
    }

    /// The language server's model: like [`ModelHandle::spawn`], but the new thread loads only
    /// once the thread behind `previous` has ended, so that two models are never resident
    /// together; and with `model.shared`, its jobs go to the user's model host (`host`).
    pub fn spawn_after(config: &ModelConfig, sampling: Sampling, previous: Option<Residency>) -> ModelHandle {
        Self::start(config, sampling, previous, config.shared)
    }

    fn start(config: &ModelConfig, sampling: Sampling, previous: Option<Residency>, shared: bool) -> ModelHandle {
        let residency = Residency::new();
        // With an endpoint, the thread is its client (`remote.rs`); with the shared host, the
        // host's (`host/client.rs`); else it runs the GGUF.
        let (path, run): (_, &str) = match (&config.endpoint, config.path.clone()) {
            (Some(_), _) => (None, "ghostline-remote"),
            (None, Some(path)) if shared => (Some(path), "ghostline-host-client"),
            (None, Some(path)) => (Some(path), "ghostline-model"),
            (None, None) => {
                let (_tx, status) = watch::channel(ModelStatus::NotConfigured);
                drop(residency.guard()); // no thread, nothing resident
                return ModelHandle { jobs: None, status, thread: None, residency };
            }
        };
        let (status_tx, status) = watch::channel(ModelStatus::Loading { progress: 0.0 });
        let (jobs, rx) = mpsc::channel::<Job>();
        let config = config.clone();
        let thread = std::thread::Builder::new()
            .name(run.into())
            .spawn({
                let guard = residency.guard();
                move || {
                    let _guard = guard;
                    if let Some(previous) = previous {
                        previous.wait_gone();
                    }
                    match path {
                        Some(_) if shared => host::client::run(config, sampling, status_tx, rx),
                        Some(path) => llama::run(path, config, sampling, status_tx, rx),
                        None => remote::run(config, sampling, status_tx, rx),
                    }
                }
            })
            .expect("spawning the model thread");
        ModelHandle { jobs: Some(jobs), status, thread: Some(thread), residency }
    }

    /// The model thread's residency: [`ModelHandle::spawn_after`] waits for it to end.
    pub fn residency(&self) -> Residency {
        self.residency.clone()
    }

    /// Whether the model thread ended on its own (a panic outside a job): the handle is then
    /// useless and the model must be started again.
    pub fn thread_died(&self) -> bool {
        self.jobs.is_some() && self.thread.as_ref().is_some_and(|t| t.is_finished())
    }

    /// Current status, and a way to wait for changes.
    pub fn status(&self) -> watch::Receiver<ModelStatus> {
        self.status.clone()
    }

    /// Queues a generation and waits for it.
    pub async fn generate(&self, request: GenerateRequest) -> Result<Generation, GenerateError> {
        self.submit(request)?.await.unwrap_or_else(|_| Err(self.unavailable()))
    }

    /// Queues a generation and returns at once with the way to its answer.
    pub fn submit(&self, request: GenerateRequest) -> Result<oneshot::Receiver<Result<Generation, GenerateError>>, GenerateError> {
        self.submit_where(request, Reach::default())
    }

    /// [`ModelHandle::generate`] for a file whose prompts reach `model.endpoint` as `reach`
    /// says (see `route::completion_endpoint`); the same as `generate` without an endpoint.
    pub async fn generate_where(&self, request: GenerateRequest, reach: Reach) -> Result<Generation, GenerateError> {
        self.submit_where(request, reach)?.await.unwrap_or_else(|_| Err(self.unavailable()))
    }

    /// [`ModelHandle::submit`] with [`ModelHandle::generate_where`]'s `reach`.
    pub fn submit_where(&self, request: GenerateRequest, reach: Reach) -> Result<oneshot::Receiver<Result<Generation, GenerateError>>, GenerateError> {
        if let ModelStatus::Failed(_) | ModelStatus::NotConfigured = &*self.status.borrow() {
            return Err(self.unavailable());
        }
        let jobs = self.jobs.as_ref().ok_or_else(|| self.unavailable())?;
        let (reply, answer) = oneshot::channel();
        jobs.send(Job::Complete { request, reply, reach }).map_err(|_| self.unavailable())?;
        Ok(answer)
    }

    /// Why a completion gets no model: not configured, failed to load, or the thread is gone.
    fn unavailable(&self) -> GenerateError {
        match &*self.status.borrow() {
            ModelStatus::NotConfigured => GenerateError::Unavailable(format!(
                "no model configured (set model.path or {})",
                crate::config::MODEL_ENV
            )),
            ModelStatus::Failed(m) => GenerateError::Unavailable(m.clone()),
            _ => GenerateError::Unavailable(THREAD_STOPPED.into()),
        }
    }

    /// Queues a chat generation (code actions) and waits for it.
    pub async fn chat(&self, request: ChatRequest) -> Result<Generation, GenerateError> {
        let unavailable = || match &*self.status.borrow() {
            ModelStatus::Failed(m) => GenerateError::Unavailable(m.clone()),
            ModelStatus::NotConfigured => GenerateError::Unavailable("no model configured".into()),
            _ => GenerateError::Unavailable(THREAD_STOPPED.into()),
        };
        if let ModelStatus::Failed(_) | ModelStatus::NotConfigured = &*self.status.borrow() {
            return Err(unavailable());
        }
        let jobs = self.jobs.as_ref().ok_or_else(unavailable)?;
        let (reply, answer) = oneshot::channel();
        jobs.send(Job::Chat { request, reply }).map_err(|_| unavailable())?;
        answer.await.unwrap_or_else(|_| Err(unavailable()))
    }

    /// Waits until the model is ready or has failed; returns the final status.
    pub async fn wait_loaded(&self) -> ModelStatus {
        let mut rx = self.status.clone();
        let status = rx
            .wait_for(|s| !matches!(s, ModelStatus::Loading { .. }))
            .await
            .map(|s| s.clone())
            .unwrap_or_else(|_| ModelStatus::Failed(THREAD_STOPPED.into()));
        status
    }
}

impl Drop for ModelHandle {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop; join so that only one model is resident.
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Checks that `path` is a readable GGUF file before llama.cpp sees it, so that the user gets
/// a message naming the path and the problem.
pub fn check_model_file(path: &Path) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("model file not found: {shown}"),
        _ => format!("cannot read model file {shown}: {e}"),
    })?;
    if !meta.is_file() {
        return Err(format!("model path is not a file: {shown}"));
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                format!("model file {shown} is not a GGUF file: it is only {} bytes long", meta.len())
            }
            _ => format!("cannot read model file {shown}: {e}"),
        })?;
    if &magic != b"GGUF" {
        return Err(format!("model file {shown} is not a GGUF file (it does not start with the GGUF magic bytes)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_that_ends_the_text_blank_is_refused_until_the_text_is_not() {
        let enders = b"\n,)";
        // No lead: the text is blank until a character other than a space or tab.
        assert!(ends_blank(b"", enders, b"", b","));
        assert!(ends_blank(b"", enders, b"", b" )"));
        assert!(ends_blank(b"", enders, b" \t", b"\n"));
        assert!(!ends_blank(b"", enders, b"", b"x,"));
        assert!(!ends_blank(b"", enders, b"", b"  "));
        assert!(!ends_blank(b"", enders, b"a", b","));
        assert!(!ends_blank(b"", b"", b"", b","), "no enders, no rule");
        // With a lead: what the piece writes past it counts, and the text before it does not.
        assert!(ends_blank(b" ", enders, b"", b" ,"));
        assert!(!ends_blank(b" ", enders, b"", b" "));
        assert!(!ends_blank(b" ", enders, b"", b" b"));
        assert!(ends_blank(b"\n    ", enders, b"\n", b"    )"));
        assert!(blank_guarded(b" ", enders, b""));
        assert!(blank_guarded(b" ", enders, b"  "));
        assert!(!blank_guarded(b" ", enders, b" b"));
        assert!(!blank_guarded(b"", b"", b""));
        // A doubled `.` or `:` begins an expression; a single one does not.
        let enders = b"\n,):.";
        assert!(ends_blank(b"", enders, b"", b".get"));
        assert!(ends_blank(b"", enders, b"", b" :"));
        assert!(!ends_blank(b"", enders, b"", b"..."));
        assert!(!ends_blank(b"", enders, b"", b" ::std"));
        assert!(ends_blank(b"", enders, b"", b"))"), "only `.` and `:` pass doubled");
    }

    /// The model thread knows no prompt layout: no file under `src/model/` names `context`,
    /// `prompt` or `postprocess` in a `crate::` path (comments aside).
    #[test]
    fn the_model_imports_no_prompt_layout() {
        fn files(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    files(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let mut all = Vec::new();
        files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model"), &mut all);
        assert!(all.len() > 5, "{all:?}");
        let mut found = Vec::new();
        for path in &all {
            let code: String = std::fs::read_to_string(path).unwrap().lines().map(|l| l.split("//").next().unwrap_or("").to_owned() + "\n").collect();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let end = rest.find(|c: char| !(c.is_alphanumeric() || "_:{}, \n".contains(c))).unwrap_or(rest.len());
                let named = rest[..end].split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| ["context", "prompt", "postprocess"].contains(&w));
                if named {
                    found.push(format!("{}: crate::{}", path.display(), rest[..end].trim()));
                }
            }
        }
        assert!(found.is_empty(), "model/ must not import the prompt layout's modules: {found:#?}");
    }

    #[test]
    fn model_file_errors_name_the_path_and_the_problem() {
        let dir = crate::testing::TempDir::new("check");
        let missing = dir.join("missing.gguf");
        assert!(check_model_file(&missing).unwrap_err().contains("not found: "));
        let text = dir.join("notes.gguf");
        std::fs::write(&text, "just some text, not a model").unwrap();
        let e = check_model_file(&text).unwrap_err();
        assert!(e.contains("notes.gguf") && e.contains("not a GGUF file"), "{e}");
        let tiny = dir.join("tiny.gguf");
        std::fs::write(&tiny, "GG").unwrap();
        assert!(check_model_file(&tiny).unwrap_err().contains("only 2 bytes"));
        assert!(check_model_file(&dir).unwrap_err().contains("not a file"));
        let ok = dir.join("header.gguf");
        std::fs::write(&ok, b"GGUF\x03\x00\x00\x00").unwrap();
        assert_eq!(check_model_file(&ok), Ok(()));
    }
}
