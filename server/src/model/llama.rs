//! The model thread: loads the GGUF with llama.cpp, keeps one context and its KV cache, and
//! serves generation jobs one at a time, reusing the longest cached token prefix.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{mpsc, OnceLock};
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::vocab::LlamaVocab;
use tokio::sync::watch;

use super::cache::Lru;
use super::fim::{self, FimFormat, Token};
use super::{check_model_file, GenerateError, Job, ModelInfo, ModelStatus, Sampling, Timings};
use crate::config::ModelConfig;

mod chat;
mod complete;
mod compute;
mod replay;
mod states;
mod windows;

use replay::{Recent, Top};
use states::{common_prefix, Saved, SavedStates};
pub(super) use windows::{serve_windows, HostWork};

/// Prompt tokens a new prompt must drop from the context before the context's state is saved
/// (see `states`), and the tokens a saved state must add to what the context still holds before
/// it is restored: below these, decoding again costs less than copying the state.
const SAVE_MIN: usize = 64;
const RESTORE_MIN: usize = 32;

/// Suggestions remembered by prompt.
const SUGGESTION_CACHE: usize = 256;

/// Initialises llama.cpp's backend (once per process).
pub(super) fn init_backend() -> Result<(), String> {
    backend().map(|_| ())
}

/// llama.cpp's backend may be initialised once per process.
fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            super::backend::pin_kernels();
            let backend = LlamaBackend::init().map_err(|e| format!("cannot initialise llama.cpp: {e}"));
            #[cfg(ghostline_sgemm_one_column)]
            if backend.is_ok() {
                super::sgemm::init(&super::backend::cpu_kernels_of_this_build());
                super::flash::init();
            }
            backend
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// What a prompt builder and the generation loop need of a vocabulary beside its tokenizer.
pub(super) struct VocabInfo {
    pub format: FimFormat,
    pub bos: Option<Token>,
    /// The file separator of repository-level prompts, if the vocabulary has one.
    pub file_sep: Option<Token>,
    /// Tokens beyond the vocabulary's end-of-generation set that end a FIM completion.
    pub extra_stops: Vec<Token>,
}

fn vocab_info(model: &LlamaModel) -> VocabInfo {
    let vocab = model.vocab();
    let marker = |t: LlamaToken| -> Option<(Token, String)> {
        if t.0 < 0 {
            return None;
        }
        let text = vocab.text(t).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        Some((t.0, text))
    };
    let (pre, suf, mid) = (marker(vocab.fim_pre()), marker(vocab.fim_suf()), marker(vocab.fim_mid()));
    fn as_ref(m: &Option<(Token, String)>) -> fim::Marker<'_> {
        m.as_ref().map(|(t, s)| (*t, s.as_str()))
    }
    let format = fim::detect(as_ref(&pre), as_ref(&suf), as_ref(&mid));
    let extra_stops = [vocab.fim_pad(), vocab.fim_rep(), vocab.fim_sep()].into_iter().filter(|t| t.0 >= 0).map(|t| t.0).collect();
    let bos = vocab.should_add_bos().then(|| vocab.bos().0);
    let file_sep = Some(vocab.fim_sep().0).filter(|&t| t >= 0);
    VocabInfo { format, bos, file_sep, extra_stops }
}

/// A GGUF's vocabulary without its weights (llama.cpp's `vocab_only`): what a remote backend
/// tokenizes its prompts with and turns the endpoint's token ids back into text with, exactly
/// as the model thread would.
pub(super) struct VocabOnly {
    model: LlamaModel,
    pub info: VocabInfo,
    /// The trained context from the GGUF header; 0 when unreadable.
    pub n_ctx_train: u32,
}

impl VocabOnly {
    pub fn load(path: &std::path::Path) -> Result<VocabOnly, String> {
        let backend = backend()?;
        check_model_file(path)?;
        // No devices: llama.cpp would otherwise ask each GPU its free memory while it picks
        // devices, which opens a CUDA context (~0.5 GiB of the GPU's memory, held for the
        // process's life) in a window whose model is the shared host's or a server's.
        let unreadable = |e: String| format!("llama.cpp could not read the vocabulary of {}: {e}", path.display());
        let params = LlamaModelParams::default()
            .with_vocab_only(true)
            .with_n_gpu_layers(0)
            .with_devices(&[])
            .map_err(|e| unreadable(e.to_string()))?;
        let model = LlamaModel::load_from_file(backend, path, &params).map_err(|e| unreadable(e.to_string()))?;
        let info = vocab_info(&model);
        // A vocabulary-only model has no hyperparameters (its `n_ctx_train` reads 0): the
        // trained context comes from the GGUF header, as the memory plan reads it.
        let n_ctx_train = super::gguf::Gguf::open(path).ok().and_then(|g| g.shape().ok()).map_or(0, |s| s.n_ctx_train);
        Ok(VocabOnly { model, info, n_ctx_train })
    }

    /// The tokenizer prompts are built with (the model thread's own, [`complete::Vocab`]).
    pub fn tokenizer(&self) -> impl super::Tokenize + '_ {
        complete::Vocab(&self.model)
    }

    /// Whether `token` ends a completion: end of generation, or the FIM pad, repo or separator.
    pub fn ends(&self, token: Token) -> bool {
        self.model.vocab().is_eog(LlamaToken(token)) || self.info.extra_stops.contains(&token)
    }

    /// Appends `token`'s bytes, as the generation loop does.
    pub fn piece(&self, token: Token, bytes: &mut Vec<u8>) {
        self.model.vocab().token_to_piece_into(LlamaToken(token), bytes, false, None);
    }
}

/// Entry point of the model thread. With `model.keepAlive` set, the model and its context are
/// freed after that much inactivity, and the next request loads them again (reported like the
/// first load: `Loading` progress, then `Ready`).
pub(super) fn run(
    path: PathBuf,
    config: ModelConfig,
    sampling: Sampling,
    status: watch::Sender<ModelStatus>,
    jobs: mpsc::Receiver<Job>,
) {
    let mut pending = None;
    loop {
        match load_and_serve(&path, &config, sampling, &status, &jobs, pending.take()) {
            Served::Closed => break,
            Served::Failed(message) => return fail(message, &status, jobs),
            Served::Idle(info) => {
                tracing::info!(keep_alive_s = config.keep_alive.map(|d| d.as_secs_f64()), "model unloaded after inactivity");
                status.send_replace(ModelStatus::Unloaded(info));
                match next_live_job(&jobs) {
                    Some(job) => pending = Some(job),
                    None => break,
                }
                tracing::info!("loading the model again for a request");
            }
        }
    }
    tracing::debug!("model thread exits");
}

/// How a loaded model's service ended.
enum Served {
    /// The job channel closed: the handle was dropped.
    Closed,
    /// Loading failed.
    Failed(String),
    /// No job for `keepAlive`: the model and context have been freed.
    Idle(ModelInfo),
}

/// A model loaded, with the memory plan that sized its context.
struct Loaded {
    backend: &'static LlamaBackend,
    model: LlamaModel,
    plan: Option<super::memory::Plan>,
    /// The configuration with `context_size` as the plan chose it.
    sized: ModelConfig,
    gpu_layers: u32,
    started: Instant,
}

impl Loaded {
    /// Plans the memory and loads the weights, reporting progress on `status`.
    fn load(path: &std::path::Path, config: &ModelConfig, status: &watch::Sender<ModelStatus>) -> Result<Loaded, String> {
        let started = Instant::now();
        status.send_replace(ModelStatus::Loading { progress: 0.0 });
        let gpu_layers = super::backend::gpu_layers(config.gpu_layers);
        let plan = plan_memory(path, config)?;
        let mut sized = config.clone();
        if let Some(plan) = &plan {
            sized.context_size = plan.n_ctx;
        }
        let backend = backend()?;
        check_model_file(path)?;
        tracing::info!(backend = super::backend::name(), gpu_layers = %super::backend::describe_layers(gpu_layers), "llama.cpp backend");
        let progress = status.clone();
        let params = LlamaModelParams::default().with_n_gpu_layers(gpu_layers).with_progress_callback(move |p| {
            progress.send_replace(ModelStatus::Loading { progress: p });
            true
        });
        let model = LlamaModel::load_from_file(backend, path, &params).map_err(|e| {
            format!("llama.cpp could not load the model file {}: the file is truncated, corrupt or of an unsupported architecture ({e})", path.display())
        })?;
        Ok(Loaded { backend, model, plan, sized, gpu_layers, started })
    }

    /// Host memory left for saved KV states once the model and `contexts` contexts are counted.
    fn saved_bytes(&self, contexts: usize) -> usize {
        let Some(p) = &self.plan else { return states::MAX_BYTES };
        let context = p.total_bytes.saturating_sub(p.weights_bytes);
        let left = p.budget_bytes.saturating_sub(p.weights_bytes + context * contexts as u64);
        (left / contexts.max(1) as u64) as usize
    }

    /// A context (and its worker) for this model; its decodes run on `compute` if given.
    fn worker(&self, path: &std::path::Path, sampling: Sampling, saved_bytes: usize, compute: Option<compute::Compute>) -> Result<Worker<'_>, String> {
        tracing::debug!(mib = saved_bytes.min(states::MAX_BYTES) >> 20, "KV states saved in host memory, at most");
        Worker::new(self.backend, &self.model, path, &self.sized, sampling, saved_bytes, compute)
    }

    /// What was loaded, for status reports (`n_ctx` and the format from a worker's context).
    fn info(&self, path: &std::path::Path, config: &ModelConfig, worker: &Worker<'_>) -> ModelInfo {
        ModelInfo {
            path: path.to_path_buf(),
            format: worker.format.to_string(),
            n_ctx: worker.ctx.n_ctx(),
            n_ctx_train: self.model.n_ctx_train(),
            n_ubatch: worker.ctx.n_ubatch(),
            threads: config.threads,
            load_ms: self.started.elapsed().as_secs_f64() * 1e3,
            backend: super::backend::name().into(),
            gpu_layers: super::backend::describe_layers(self.gpu_layers),
            memory: self.plan.clone(),
            discovered: config.discovered.clone(),
        }
    }
}

/// Loads the model (planning its memory first), reports it ready, serves `pending` and then
/// queued jobs until the channel closes or `keepAlive` passes without a job.
fn load_and_serve(
    path: &std::path::Path,
    config: &ModelConfig,
    sampling: Sampling,
    status: &watch::Sender<ModelStatus>,
    jobs: &mpsc::Receiver<Job>,
    pending: Option<Job>,
) -> Served {
    let loaded = match Loaded::load(path, config, status) {
        Ok(l) => l,
        Err(message) => return Served::Failed(message),
    };
    // Saved KV states live in host memory: what the budget leaves after the model and context.
    let mut worker = match loaded.worker(path, sampling, loaded.saved_bytes(1), None) {
        Ok(w) => w,
        Err(message) => return Served::Failed(message),
    };
    let info = loaded.info(path, config, &worker);
    tracing::info!(path = %path.display(), format = %info.format, n_ctx = info.n_ctx, threads = info.threads, load_ms = info.load_ms, "model ready");
    status.send_replace(ModelStatus::Ready(info.clone()));

    let mut next = pending;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match config.keep_alive {
                None => match jobs.recv() {
                    Ok(job) => job,
                    Err(_) => return Served::Closed,
                },
                Some(idle) => match jobs.recv_timeout(idle) {
                    Ok(job) => job,
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Served::Closed,
                },
            },
        };
        crate::fault::point("thread");
        worker.serve(job);
    }
    // Idle for keepAlive: free the context, then the model.
    drop(worker);
    drop(loaded);
    Served::Idle(info)
}

impl Worker<'_> {
    /// Runs one job and answers it. A panic in the job is contained here: the job fails, the
    /// KV cache is cleared (its state is unknown), and the thread serves the next job.
    fn serve(&mut self, job: Job) {
        self.choose_threads();
        let started = std::time::Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::fault::point("job");
            match &job {
                Job::Complete { request, .. } if request.cancel.is_cancelled() => Err(GenerateError::Cancelled),
                Job::Complete { request, .. } => self.generate(request),
                Job::Chat { request, .. } if request.cancel.is_cancelled() => Err(GenerateError::Cancelled),
                Job::Chat { request, .. } => self.chat(request),
            }
        }))
        .unwrap_or_else(|_| {
            self.forget_cache();
            let why = crate::fault::last_panic().unwrap_or_default();
            Err(GenerateError::Failed(format!("internal error in the model thread ({why}); recovered")))
        });
        if matches!(result, Err(GenerateError::Cancelled)) {
            let (Job::Complete { request: super::GenerateRequest { cancel, .. }, .. } | Job::Chat { request: super::ChatRequest { cancel, .. }, .. }) = &job;
            let done = cancel.progress();
            tracing::debug!(prefilled = done.prefilled, generated = done.generated, ms = started.elapsed().as_millis() as u64, "request cancelled");
        }
        if let Ok(g) = &result {
            let t = &g.timings;
            tracing::debug!(
                ms = started.elapsed().as_millis() as u64,
                prompt = t.prompt_tokens,
                reused = t.reused_tokens,
                restored = t.restored_tokens,
                prefill = t.prefill_tokens,
                generated = t.generated_tokens,
                passes = t.decode_passes,
                threads = t.threads,
                "job done"
            );
        }
        // Between jobs this context holds no threads (a job chooses them again first).
        self.threads.claim.set(0);
        job.reply(result);
    }
}

/// Waits for the next job that is not already cancelled (a cancelled one needs no model);
/// `None` when the channel closes.
fn next_live_job(jobs: &mpsc::Receiver<Job>) -> Option<Job> {
    loop {
        let job = jobs.recv().ok()?;
        if job_cancelled(&job) {
            job.reply(Err(GenerateError::Cancelled));
        } else {
            return Some(job);
        }
    }
}

fn job_cancelled(job: &Job) -> bool {
    match job {
        Job::Complete { request, .. } => request.cancel.is_cancelled(),
        Job::Chat { request, .. } => request.cancel.is_cancelled(),
    }
}

/// Reads the model's dimensions from its GGUF header and chooses the context size for the
/// memory budget. A header ghostline cannot read leaves the choice to the old rule (the
/// configured size, capped by the trained context) and any error in the file to llama.cpp;
/// a budget too small for the model is an error.
fn plan_memory(path: &std::path::Path, config: &ModelConfig) -> Result<Option<super::memory::Plan>, String> {
    if check_model_file(path).is_err() {
        return Ok(None);
    }
    let shape = super::gguf::Gguf::open(path).map_err(|e| e.to_string()).and_then(|g| Ok((g.shape()?, g.weights_bytes())));
    let (shape, weights) = match shape {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("cannot plan memory from the GGUF header ({e}); using model.contextSize");
            return Ok(None);
        }
    };
    let budget = super::memory::budget(config.memory_budget_mb);
    let plan = super::memory::plan(&shape, weights, budget, config.context_size, super::backend::micro_batch_of(config))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    tracing::info!("memory: {}", plan.describe());
    Ok(Some(plan))
}

/// Reports a load failure and answers every queued or later job with it.
fn fail(message: String, status: &watch::Sender<ModelStatus>, jobs: mpsc::Receiver<Job>) {
    tracing::error!("{message}");
    status.send_replace(ModelStatus::Failed(message.clone()));
    while let Ok(job) = jobs.recv() {
        job.reply(Err(GenerateError::Unavailable(message.clone())));
    }
}

struct Worker<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    format: FimFormat,
    bos: Option<Token>,
    /// The file separator of repository-level prompts, if the vocabulary has one.
    file_sep: Option<Token>,
    /// Tokens beyond the vocabulary's end-of-generation set that end a FIM completion.
    extra_stops: Vec<Token>,
    /// Tokens whose KV entries are in the context, in position order.
    cached: Vec<LlamaToken>,
    /// For positions of `cached` decoded with their logits, the most likely next tokens there
    /// (`replay`): kept where a position's result does not depend on its batch (`replays`), so
    /// that a generation over tokens already cached picks from them instead of decoding again.
    /// Never longer than `cached`; cut with it.
    tops: Vec<Option<Top>>,
    /// Whether `tops` are kept and used: batch-invariant kernels, no aligned prefill.
    replays: bool,
    /// How many of `cached` were prompt (the rest were generated after it).
    cached_prompt: usize,
    /// How many of `cached` were decoded in aligned batches (see `align`): all the prompt after
    /// a completion, only what it kept before a chat job (decoded in `n_batch` batches).
    aligned_upto: usize,
    /// Earlier prompts' KV states, for coming back to them.
    saved: SavedStates,
    /// Each token's text (empty for end tokens), made the first time a lead needs it.
    pieces: Vec<Box<[u8]>>,
    /// Generated text by prompt (tokens, stop key and token cap hashed together).
    suggestions: Lru<u64, (String, usize)>,
    batch: LlamaBatch<'static>,
    /// Prompt tokens decoded at once with the batch-invariant kernels: the context's micro-batch
    /// ([`super::backend::micro_batch`]). A cancellation is seen between batches, so this
    /// bounds how long a key waits for the job it cancelled; what a batch decoded stays cached
    /// (the next key's prompt usually begins with it).
    step: usize,
    /// `model.prefillChunk` (at most `n_batch`): prompt positions are decoded in batches of
    /// this many tokens starting at multiples of it, and only positions decoded that way are
    /// reused, so each position's KV entry comes from the same batch whatever was cached (see
    /// [`Worker::prefill`]). 0: off.
    align: usize,
    sampling: Sampling,
    /// Threads for the next job, and how they are chosen (see [`Worker::choose_threads`]).
    threads: Threads,
    /// Prompt-lookup drafting in the generation loop (only where the kernels are
    /// batch-invariant: a drafted batch must compute what one token at a time would).
    draft: Draft,
    /// In the shared host, the thread that runs this context's decodes with more than one
    /// thread, and on a GPU all of them; `None`: this thread runs them all.
    compute: Option<compute::Compute>,
    /// Layers on a GPU: its decodes never run beside another context's.
    on_gpu: bool,
}

/// Whether the generation loop drafts (`model.draft`).
enum Draft {
    Never,
    Always,
    /// Where it pays, by what the model thread measures (see [`DraftGate`]).
    Auto(DraftGate),
}

/// When drafting pays: a drafted token adds `extra` ms to its batch, a token decoded alone
/// takes `single` ms, and the model confirms a share `accept` of the tokens prompt lookup
/// proposes — measured on every lookup, drafted or not, against the tokens generated next, so it
/// costs nothing to know. A draft of k tokens saves `accept`·k lone decodes and costs
/// k·`extra`: it pays while `accept`·`single` > `extra`. Before any draft was timed, the gate
/// drafts once `accept` is over a half; then it re-times a draft once in [`EXPLORE`] declines.
/// On the CPU's batch-invariant kernels a batch costs nearly its tokens (README, "A busy
/// machine"), so this rarely holds there.
#[derive(Default)]
struct DraftGate {
    single: Ewma,
    extra: Ewma,
    accept: Ewma,
    declined: u32,
}

const EXPLORE: u32 = 64;

impl DraftGate {
    fn pays(&mut self) -> bool {
        let pays = match (self.single.0, self.extra.0, self.accept.0) {
            (Some(single), Some(extra), Some(accept)) => accept * single > extra,
            (_, None, Some(accept)) => accept > 0.5,
            _ => false,
        };
        if pays {
            return true;
        }
        self.declined += 1;
        self.extra.0.is_some() && self.declined % EXPLORE == 0
    }
}

/// An exponentially weighted mean (`None` before the first value).
#[derive(Default, Clone, Copy)]
struct Ewma(Option<f64>);

impl Ewma {
    fn add(&mut self, x: f64) {
        self.0 = Some(self.0.map_or(x, |m| m + 0.2 * (x - m)));
    }
}

/// `model.threads` and what the model thread does with it.
struct Threads {
    /// The most a job gets (`model.threads`), and the count the context decodes with now.
    max: u32,
    now: u32,
    /// The context's raw handle, to change its thread count; `None` keeps `max` for good.
    raw: Option<*mut llama_cpp_sys_2::llama_context>,
    /// Follow the machine's load (`model.adaptiveThreads`, and a readable `/proc`).
    load: Option<&'static super::threads::Load>,
    /// When the count was last chosen: a job chooses again every [`super::threads::RECHECK`].
    chosen_at: Instant,
    /// The threads this context holds during a job, seen by the process's other contexts (the
    /// shared host runs one per window at once).
    claim: super::threads::Claim,
}

impl Threads {
    /// Fewer threads than `model.threads` because of others' load, so the count is worth
    /// choosing again soon: prompts then go in batches from [`super::threads::REDUCED_BATCH`] up.
    fn reduced(&self) -> bool {
        self.load.is_some() && self.raw.is_some() && self.now < self.max
    }
}

impl<'m> Worker<'m> {
    fn new(
        backend: &LlamaBackend,
        model: &'m LlamaModel,
        path: &std::path::Path,
        config: &ModelConfig,
        sampling: Sampling,
        saved_bytes: usize,
        compute: Option<compute::Compute>,
    ) -> Result<Self, String> {
        let n_ctx = config.context_size.min(model.n_ctx_train().max(256));
        let n_batch = config.batch_size.min(n_ctx);
        let threads = config.threads as i32;
        let layers = super::backend::gpu_layers(config.gpu_layers);
        let n_ubatch = super::backend::micro_batch(n_batch, layers);
        let invariant = super::backend::batch_invariance(layers).is_ok();
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_batch)
            .with_n_ubatch(n_ubatch)
            .with_n_threads(threads)
            .with_n_threads_batch(threads)
            // llama.cpp's flash attention for the CPU follows the batch (tiles for 64 queries or
            // more, the keys split across threads for one): on where the build replaces it with
            // one order per query (`model::flash`) or the GPU's kernels are the patched ones,
            // else off where the rest is batch-invariant.
            .with_flash_attention_policy(match (invariant, super::backend::flash_attention_invariant(layers)) {
                (true, true) => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
                (true, false) => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
                (false, _) => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
            });
        let ctx = model
            .new_context(backend, params)
            .map_err(|e| format!("cannot create a llama.cpp context of {n_ctx} tokens for {}: {e}", path.display()))?;

        let VocabInfo { format, bos, file_sep, extra_stops } = vocab_info(model);
        let raw = raw_context(&ctx);
        if raw.is_none() {
            tracing::warn!("cannot reach llama.cpp's context to change its thread count; decoding with {threads} threads always");
        }
        let load = if config.adaptive_threads { super::threads::Load::shared() } else { None };
        let align = config
            .prefill_chunk
            .unwrap_or_else(|| super::backend::default_prefill_chunk(super::backend::gpu_layers(config.gpu_layers)))
            .min(n_batch) as usize;
        let mut worker = Worker {
            model,
            ctx,
            format,
            bos,
            file_sep,
            extra_stops,
            cached: Vec::new(),
            tops: Vec::new(),
            replays: invariant && align == 0,
            cached_prompt: 0,
            aligned_upto: 0,
            saved: SavedStates::new(saved_bytes),
            pieces: Vec::new(),
            suggestions: Lru::new(SUGGESTION_CACHE),
            batch: LlamaBatch::new(n_batch as usize, 1),
            step: n_ubatch as usize,
            align,
            sampling,
            threads: Threads { max: threads.max(1) as u32, now: threads.max(1) as u32, raw, load, chosen_at: Instant::now(), claim: Default::default() },
            draft: match config.draft {
                _ if !invariant || align > 0 => Draft::Never,
                Some(false) => Draft::Never,
                Some(true) => Draft::Always,
                None => Draft::Auto(DraftGate::default()),
            },
            compute,
            on_gpu: layers > 0,
        };
        worker.warm_up()?;
        Ok(worker)
    }

    /// One small decode so that the first real request does not pay one-time set-up costs.
    fn warm_up(&mut self) -> Result<(), String> {
        let tokens = self.tokenize("def main():\n    ");
        self.prefill(&tokens, &super::CancelFlag::new(), true).map_err(|e| format!("warm-up decode failed: {e}"))?;
        Ok(())
    }

    /// Empties the KV cache and what we know of it.
    fn forget_cache(&mut self) {
        self.ctx.clear_kv_cache();
        self.cut_cached(0);
        self.aligned_upto = 0;
        self.saved.clear();
    }

    /// Keeps the first `n` of `cached` (and of what is known of their logits); the KV cache must
    /// be cut to match by the caller.
    fn cut_cached(&mut self, n: usize) {
        self.cached.truncate(n);
        self.tops.truncate(n);
    }

    /// Keeps what the logits at batch index `i`, those of cached position `at`, made likely
    /// (where replays are on), and returns it.
    fn keep_top(&mut self, at: usize, i: i32) -> Option<Top> {
        let top = Top::of(self.ctx.get_logits_ith(i));
        if self.replays && at < self.cached.len() {
            if self.tops.len() <= at {
                self.tops.resize(at + 1, None);
            }
            self.tops[at].clone_from(&top);
        }
        top
    }

    /// The token greedy sampling picks from the logits at batch index `i` (cached position
    /// `at`'s, kept there by [`Worker::keep_top`]) under `mask` and the penalty, taken from their
    /// top where that is certain ([`Top::pick`]); `None`: llama.cpp's sampler must decide. The
    /// sampler copies the whole vocabulary's logits into a new array for every token (~0.3 ms
    /// on the development machine's CPU); the top costs one scan of them.
    fn pick_top(&mut self, at: usize, i: i32, mask: &Mask<'_>, guard: Guard<'_>, fim_stops: bool, recent: &Recent) -> Option<LlamaToken> {
        let top = self.keep_top(at, i)?;
        self.pick_certain(&top, mask, guard, fim_stops, recent)
    }

    /// What greedy sampling picks under `mask` and the penalty from `top`, when certain
    /// ([`Top::pick`]), for a fresh token ([`Worker::pick_top`]) and a replayed one
    /// ([`Worker::pick_kept`]) alike.
    fn pick_certain(&mut self, top: &Top, mask: &Mask<'_>, guard: Guard<'_>, fim_stops: bool, recent: &Recent) -> Option<LlamaToken> {
        if mask.reads_pieces(guard) {
            self.load_pieces();
        }
        let vocab = self.model.vocab();
        top.pick(|t| self.allowed(&vocab, mask, guard, fim_stops, t), recent)
    }

    /// Drops KV entries past `cached` (drafted tokens the model did not confirm, or did not get
    /// to): the cache holds exactly `cached` again.
    fn drop_unconfirmed(&mut self) {
        if self.ctx.clear_kv_cache_seq(Some(0), Some(self.cached.len() as u32), None).is_err() {
            self.forget_cache();
        }
    }

    /// What a decode pass of one sampled token and `drafted` drafted ones took, for the gate.
    fn learn_cost(&mut self, ms: f64, drafted: usize) {
        let Draft::Auto(gate) = &mut self.draft else { return };
        match (drafted, gate.single.0) {
            (0, _) => gate.single.add(ms),
            (k, Some(single)) => gate.extra.add(((ms - single) / k as f64).max(0.0)),
            _ => {}
        }
    }

    /// Of `proposed` tokens prompt lookup gave, the model generated the first `matched` next.
    fn learn_acceptance(&mut self, matched: usize, proposed: usize) {
        if let Draft::Auto(gate) = &mut self.draft {
            gate.accept.add(matched as f64 / proposed.max(1) as f64);
        }
    }

    /// Sets the threads of the next job: `model.threads`, or with `model.adaptiveThreads` one
    /// per core that other processes leave free (`model::threads`). llama.cpp's result for a
    /// position does not depend on its thread count (each output element is one thread's dot
    /// product; `bench --batch-invariance` compares 1 and N threads bit for bit).
    fn choose_threads(&mut self) {
        let (Some(raw), Some(load)) = (self.threads.raw, self.threads.load) else { return };
        self.threads.chosen_at = Instant::now();
        let n = load.threads(self.threads.max, &self.threads.claim);
        self.threads.claim.set(n);
        if n != self.threads.now {
            tracing::debug!(from = self.threads.now, to = n, "threads follow the machine's load");
            // SAFETY: `raw` is this worker's live context (see `raw_context`), used on the
            // model thread only.
            unsafe { llama_cpp_sys_2::llama_set_n_threads(raw, n as i32, n as i32) };
            self.threads.now = n;
        }
    }

    /// Chooses the threads again within a job, every [`super::threads::RECHECK`], where the
    /// result does not depend on the count or the batch (`invariant`; not with the aligned
    /// prefill). A job's first choice sees what ran a moment before it: the load a burst that
    /// just ended leaves in the last second, and the tasks still running down from it (another
    /// server's threads spin for ~10 ms after answering, measured), so it may start with one
    /// thread on a machine that is quiet again. Choosing again between batches and tokens
    /// gives the job its threads back, and takes them away from one a build starts beside.
    fn follow_load(&mut self, invariant: bool) {
        if invariant && self.threads.chosen_at.elapsed() >= super::threads::RECHECK {
            self.choose_threads();
        }
    }

    /// Decodes `batch` in the context: here, or in the shared host on its compute thread with
    /// more than one thread (one OpenMP pool for the process; a decode with one thread starts
    /// none, so windows decoding with one thread each run side by side on their own threads)
    /// and on a GPU (one device is not asked to decode two contexts from two threads at once:
    /// not measured, so not done).
    fn decode(&mut self) -> Result<(), llama_cpp_2::DecodeError> {
        let (ctx, batch) = (&mut self.ctx, &mut self.batch);
        match &self.compute {
            Some(compute) if self.threads.now > 1 || self.on_gpu => compute.run(batch.n_tokens().max(0) as usize, move || ctx.decode(batch)),
            _ => ctx.decode(batch),
        }
    }

    fn tokenize(&self, text: &str) -> Vec<LlamaToken> {
        self.model.vocab().tokenize(text.as_bytes(), false, false)
    }

    /// The shared generation loop of completions and chats: brings the KV cache to `prompt`
    /// (in `n_batch` chunks, checking `cancel`), then generates greedily (repetition
    /// penalty, no randomness) until an end-of-generation token (with `fim_stops`, also the FIM
    /// pad, repo and separator tokens), `stop` says where the text ends, `max_tokens`, or a full
    /// context. Fills `timings` but for the prompt fields; returns the text kept.
    ///
    /// Where the KV cache already holds the prompt and tokens after it, with what each of those
    /// positions' logits made likely (`tops`: a generation before this one, typically the last
    /// key's when the user typed what it suggested), the loop picks its tokens from those and
    /// follows the cached tokens without decoding, until a pick is not certain or leaves them;
    /// from there it decodes as usual. The picks are the same as decoding again would give:
    /// a position's logits do not depend on its batch, and the pick applies this generation's
    /// own masks and penalties.
    fn prefill_and_decode(&mut self, prompt: &[LlamaToken], run: &Run<'_>, start: Instant, timings: &mut Timings) -> Result<String, GenerateError> {
        let Run { cancel, max_tokens, stop, unfinished, lead, blank_enders, fim_stops, aligned } = *run;
        let n_ctx = self.ctx.n_ctx() as usize;
        // The cached position whose kept top gives the next token (`None`: the batch's logits
        // at `logits_at` do, those of the last cached position).
        let mut replay = self.replay_from(prompt);
        if replay.is_some() {
            timings.reused_tokens = prompt.len();
            timings.prefill_tokens = 0;
            self.cached_prompt = prompt.len();
        } else {
            let (reused, restored) = self.prefill(prompt, cancel, aligned).map_err(|e| match e {
                PrefillError::Cancelled => GenerateError::Cancelled,
                PrefillError::Decode(m) => GenerateError::Failed(m),
            })?;
            timings.reused_tokens = reused;
            timings.restored_tokens = restored;
            timings.prefill_tokens = prompt.len() - reused;
        }

        let mut sampler = LlamaSampler::chain_simple([
            LlamaSampler::penalties(
                self.model.n_vocab(),
                self.sampling.repeat_last_n as i32,
                self.sampling.repeat_penalty,
                0.0,
                0.0,
            ),
            LlamaSampler::greedy(),
        ]);
        let mut recent = Recent::new(self.sampling.repeat_last_n, self.sampling.repeat_penalty);
        let vocab = self.model.vocab();
        let mut bytes = Vec::new();
        let mut cut = None;
        let mut logits_at = self.batch.n_tokens() - 1;
        let mut first_token_at = None;
        // When the first token sampled from decoded logits came, and how many did since.
        let mut decoding: Option<(Instant, usize)> = None;
        // Drafted tokens decoded after the last sampled one, not yet confirmed: the KV cache
        // holds them at the positions after `cached`, and the batch holds their logits at
        // `logits_at + 1 …`.
        let mut drafts: Vec<LlamaToken> = Vec::new();
        let mut confirmed = 0;
        // A lookup not drafted, checked against what is generated next: (proposed, matched).
        let mut unchecked: Option<(Vec<LlamaToken>, usize)> = None;
        timings.threads = self.threads.now;
        for _ in 0..max_tokens {
            if cancel.is_cancelled() {
                self.drop_unconfirmed();
                return Err(GenerateError::Cancelled);
            }
            let guard = Guard { lead, enders: blank_enders, so_far: &bytes };
            let mask = if let Some(rest) = super::lead_rest(lead, &bytes) {
                Mask::Agree(rest)
            } else if super::blank_guarded(lead, blank_enders, &bytes) || unfinished.is_some_and(|open| open(valid_utf8_prefix(&bytes))) {
                Mask::GoOn
            } else {
                Mask::None
            };
            let picked = replay.and_then(|at| self.pick_kept(at, &mask, guard, fim_stops, &recent));
            if let (Some(at), None) = (replay, picked) {
                // Not certain from what was kept: decode the position again for its logits.
                replay = None;
                self.decode_again(at).map_err(GenerateError::Failed)?;
                // The prompt's last token decoded again counts as prefill, as without kept logits.
                if at + 1 == prompt.len() {
                    timings.reused_tokens -= 1;
                    timings.prefill_tokens += 1;
                } else {
                    timings.decode_passes += 1;
                }
                logits_at = 0;
            }
            let token = match picked {
                Some(token) => {
                    sampler.accept(token);
                    timings.replayed_tokens += 1;
                    token
                }
                None => {
                    let (_, n) = decoding.get_or_insert_with(|| (Instant::now(), 0));
                    *n += 1;
                    match self.pick_top(self.cached.len() - 1, logits_at, &mask, guard, fim_stops, &recent) {
                        Some(token) => {
                            sampler.accept(token);
                            token
                        }
                        None => match mask {
                            Mask::None => sampler.sample(&self.ctx, logits_at),
                            _ => self.sample_masked(&mut sampler, logits_at, &mask, guard, fim_stops),
                        },
                    }
                }
            };
            recent.accept(token);
            first_token_at.get_or_insert_with(Instant::now);
            if let Some((proposed, matched)) = &mut unchecked {
                let hit = proposed.get(*matched) == Some(&token);
                *matched += usize::from(hit);
                if !hit || *matched == proposed.len() {
                    self.learn_acceptance(*matched, proposed.len());
                    unchecked = None;
                }
            }
            if vocab.is_eog(token) || (fim_stops && self.extra_stops.contains(&token.0)) {
                break;
            }
            timings.generated_tokens += 1;
            cancel.add_generated();
            vocab.token_to_piece_into(token, &mut bytes, false, None);
            if let Some(at) = stop(valid_utf8_prefix(&bytes)) {
                cut = Some(at);
                break;
            }
            let position = replay.map_or(self.cached.len(), |at| at + 1);
            if position + 1 >= n_ctx {
                break;
            }
            if replay.take().is_some() {
                // The picked token is cached at `position` already: go on from it without a
                // decode where its logits were kept too.
                if self.cached.get(position) == Some(&token) {
                    if self.tops.get(position).is_some_and(Option::is_some) {
                        replay = Some(position);
                        continue;
                    }
                    self.decode_again(position).map_err(GenerateError::Failed)?;
                    timings.decode_passes += 1;
                    logits_at = 0;
                    continue;
                }
                // Another token than the cached one: what followed there is another text.
                self.cut_kv(position).map_err(GenerateError::Failed)?;
            }
            // The model confirmed the next drafted token: it is in the KV cache already, and
            // its logits are the next in the batch.
            if drafts.get(confirmed) == Some(&token) {
                confirmed += 1;
                timings.accepted_tokens += 1;
                self.cached.push(token);
                logits_at += 1;
                continue;
            }
            if !drafts.is_empty() {
                self.learn_acceptance(confirmed, drafts.len());
            }
            self.drop_unconfirmed();
            drafts = match self.draft {
                Draft::Never => Vec::new(),
                _ if unchecked.is_some() => Vec::new(),
                _ => prompt_lookup(&self.cached, token, DRAFT_MAX.min(n_ctx.saturating_sub(self.cached.len() + 2))),
            };
            if let Draft::Auto(gate) = &mut self.draft {
                if !drafts.is_empty() && !gate.pays() {
                    unchecked = Some((std::mem::take(&mut drafts), 0));
                }
            }
            confirmed = 0;
            timings.drafted_tokens += drafts.len();
            self.follow_load(!aligned || self.align == 0);
            self.batch.clear();
            for (i, &t) in std::iter::once(&token).chain(&drafts).enumerate() {
                self.batch
                    .add(t, (self.cached.len() + i) as i32, &[0], true)
                    .map_err(|e| GenerateError::Failed(e.to_string()))?;
            }
            let pass = Instant::now();
            self.decode().map_err(|e| GenerateError::Failed(e.to_string()))?;
            self.learn_cost(pass.elapsed().as_secs_f64() * 1e3, drafts.len());
            timings.decode_passes += 1;
            self.cached.push(token);
            logits_at = 0;
        }
        if !drafts.is_empty() {
            self.learn_acceptance(confirmed, drafts.len());
        }
        self.drop_unconfirmed();
        let end = Instant::now();
        let first = first_token_at.unwrap_or(end);
        timings.ttft_ms = (first - start).as_secs_f64() * 1e3;
        timings.total_ms = (end - start).as_secs_f64() * 1e3;
        // The rate of tokens decoded, after the first: replayed ones cost no decode.
        if let Some((from, n)) = decoding.filter(|&(_, n)| n > 1) {
            timings.decode_tokens_per_s = (n - 1) as f64 / (end - from).as_secs_f64().max(1e-9);
        }
        let all = valid_utf8_prefix(&bytes);
        Ok(all[..cut.unwrap_or(all.len()).min(all.len())].to_owned())
    }

    /// Where a generation for `prompt` can start from kept logits: the KV cache holds the
    /// whole prompt (and maybe tokens after it) and what its last position's logits made likely.
    fn replay_from(&self, prompt: &[LlamaToken]) -> Option<usize> {
        let at = prompt.len().checked_sub(1)?;
        (self.replays && self.cached.starts_with(prompt) && self.tops.get(at).is_some_and(Option::is_some)).then_some(at)
    }

    /// The token greedy sampling would pick at cached position `at` under `mask`, from what its
    /// logits made likely, when that is certain.
    fn pick_kept(&mut self, at: usize, mask: &Mask<'_>, guard: Guard<'_>, fim_stops: bool, recent: &Recent) -> Option<LlamaToken> {
        let top = self.tops.get(at)?.clone()?;
        self.pick_certain(&top, mask, guard, fim_stops, recent)
    }

    /// Cuts the KV cache and `cached` to the first `n` positions; where llama.cpp refuses, the
    /// cache is emptied and the caller told.
    fn cut_kv(&mut self, n: usize) -> Result<(), String> {
        if self.ctx.clear_kv_cache_seq(Some(0), Some(n as u32), None).is_err() {
            self.forget_cache();
            return Err("the KV cache could not be cut".into());
        }
        self.cut_cached(n);
        Ok(())
    }

    /// Decodes cached position `at` again, alone, dropping what follows it: its logits are then
    /// at batch index 0.
    fn decode_again(&mut self, at: usize) -> Result<(), String> {
        let token = *self.cached.get(at).ok_or("no cached token to decode again")?;
        self.cut_kv(at)?;
        self.batch.clear();
        self.batch.add(token, at as i32, &[0], true).map_err(|e| e.to_string())?;
        if let Err(e) = self.decode() {
            self.forget_cache();
            return Err(e.to_string());
        }
        self.cached.push(token);
        Ok(())
    }

    /// Every token's text, made once (end tokens: empty).
    fn load_pieces(&mut self) -> &[Box<[u8]>] {
        if self.pieces.is_empty() {
            let vocab = self.model.vocab();
            self.pieces = (0..self.model.n_vocab())
                .map(|t| {
                    let mut piece = Vec::new();
                    if !vocab.is_eog(LlamaToken(t)) {
                        vocab.token_to_piece_into(LlamaToken(t), &mut piece, false, None);
                    }
                    piece.into_boxed_slice()
                })
                .collect();
        }
        &self.pieces
    }

    /// Whether `mask` lets token `t` be picked (with `fim_stops`, the FIM stop tokens are end
    /// tokens too). The pieces must be loaded where the mask reads them ([`Mask::reads_pieces`]).
    fn allowed(&self, vocab: &LlamaVocab, mask: &Mask<'_>, guard: Guard<'_>, fim_stops: bool, t: LlamaToken) -> bool {
        let piece = self.pieces.get(t.0 as usize).map_or(&[][..], |p| &p[..]);
        match mask {
            Mask::None => true,
            Mask::Agree(rest) => super::agrees(rest, piece) && !guard.refuses(piece),
            Mask::GoOn => !(vocab.is_eog(t) || (fim_stops && self.extra_stops.contains(&t.0)) || guard.refuses(piece)),
        }
    }

    /// What `sampler` picks from the logits at batch index `i` among the tokens `mask` allows
    /// ([`Worker::allowed`]: for a lead, those that agree with its rest, [`super::agrees`]; past
    /// it, no end token; neither ending the text blank, [`super::ends_blank`]), the sampler's
    /// penalties applied and its pick accepted as [`LlamaSampler::sample`] accepts one.
    fn sample_masked(&mut self, sampler: &mut LlamaSampler, i: i32, mask: &Mask<'_>, guard: Guard<'_>, fim_stops: bool) -> LlamaToken {
        if mask.reads_pieces(guard) {
            self.load_pieces();
        }
        let vocab = self.model.vocab();
        let mut candidates = self.ctx.token_data_array_ith(i);
        for c in &mut candidates.data {
            if !self.allowed(&vocab, mask, guard, fim_stops, c.id()) {
                c.set_logit(f32::NEG_INFINITY);
            }
        }
        sampler.apply(&mut candidates);
        let token = candidates.selected_token().unwrap_or_else(|| self.model.vocab().eos());
        sampler.accept(token);
        token
    }

    /// Brings the KV cache to exactly `prompt`, decoding only what differs from what is cached
    /// (or from a saved state that holds more of it), and leaves the batch holding the last
    /// prompt token's logits. Returns the reused count and, of it, the restored count.
    ///
    /// With `align` set, the answer does not depend on what was cached: llama.cpp's result for a
    /// position changes in its last bits with the batch it is decoded in (kernels and
    /// accumulation order follow the batch's size), and greedy sampling turns a near tie into
    /// another suggestion. So every prompt position is decoded in the batch
    /// `[k·align, min((k+1)·align, prompt end))`, as a cold start would decode it, and only
    /// whole aligned batches of earlier prompts are reused: the kept prefix is cut down to a
    /// multiple of `align` and never reaches generated tokens (decoded one at a time).
    fn prefill(&mut self, prompt: &[LlamaToken], cancel: &super::CancelFlag, aligned: bool) -> Result<(usize, usize), PrefillError> {
        let align = if aligned { self.align } else { 0 };
        let cut = |n: usize| if align > 0 { n / align * align } else { n };
        let mut keep = common_prefix(&self.cached, prompt);
        let mut restored = 0;
        if self.cached_prompt.min(self.cached.len()) >= keep + SAVE_MIN {
            self.save_state();
        }
        if align > 0 {
            keep = cut(keep.min(self.aligned_upto));
        }
        if let Some((i, n)) = self.saved.best(prompt).map(|(i, n)| (i, cut(n))).filter(|&(_, n)| n >= keep + RESTORE_MIN) {
            (keep, restored) = if self.restore_state(i) { (n, n) } else { (0, 0) };
        }
        // The last prompt token is always decoded: its logits start the generation.
        keep = cut(keep.min(prompt.len() - 1));
        restored = restored.min(keep);
        self.ctx
            .clear_kv_cache_seq(Some(0), Some(keep as u32), None)
            .map_err(|e| PrefillError::Decode(e.to_string()))?;
        self.cut_cached(keep);
        self.cached_prompt = keep;
        self.aligned_upto = self.aligned_upto.min(keep);
        // Batch-invariant kernels: batches of `step` (see [`Worker::step`]), or smaller ones
        // while the threads are reduced, so that they are chosen again soon (`follow_load`),
        // doubling while they stay reduced; the result is the same either way.
        let mut reduced = super::threads::REDUCED_BATCH;
        while self.cached.len() < prompt.len() {
            let step = match align {
                0 if self.threads.reduced() => {
                    let step = reduced.min(self.step);
                    reduced = (reduced * 2).min(self.step);
                    step
                }
                0 => {
                    reduced = super::threads::REDUCED_BATCH;
                    self.step
                }
                a => a,
            };
            let from = self.cached.len();
            let chunk = &prompt[from..(from + step).min(prompt.len())];
            if cancel.is_cancelled() {
                return Err(PrefillError::Cancelled);
            }
            self.batch.clear();
            let last_chunk = self.cached.len() + chunk.len() == prompt.len();
            for (i, &token) in chunk.iter().enumerate() {
                let logits = last_chunk && i + 1 == chunk.len();
                self.batch
                    .add(token, (self.cached.len() + i) as i32, &[0], logits)
                    .map_err(|e| PrefillError::Decode(e.to_string()))?;
            }
            if let Err(e) = self.decode() {
                // The cache may hold part of this chunk: forget it all rather than guess.
                self.ctx.clear_kv_cache();
                self.cut_cached(0);
                self.aligned_upto = 0;
                return Err(PrefillError::Decode(e.to_string()));
            }
            #[cfg(ghostline_sgemm_one_column)]
            super::flash::warn_on_fallback();
            self.cached.extend_from_slice(chunk);
            self.cached_prompt = self.cached.len();
            if aligned {
                self.aligned_upto = self.cached_prompt;
            }
            cancel.add_prefilled(chunk.len());
            self.follow_load(align == 0);
        }
        Ok((keep, restored))
    }

    /// Saves the context's prompt tokens and their KV state (the tokens generated after them
    /// are dropped first), unless a saved state already holds them.
    fn save_state(&mut self) {
        let n = self.cached_prompt.min(self.cached.len());
        // Saved states are restored into completions: only a prompt decoded in aligned batches.
        if self.saved.covers(&self.cached[..n]) || (self.align > 0 && self.aligned_upto < n) {
            return;
        }
        if self.ctx.clear_kv_cache_seq(Some(0), Some(n as u32), None).is_err() {
            return;
        }
        self.cut_cached(n);
        match self.ctx.state_seq_get(0, Default::default()) {
            Ok(state) => self.saved.put(Saved { tokens: self.cached.clone(), state }),
            Err(e) => tracing::warn!("cannot save the KV state of {n} tokens: {e}"),
        }
    }

    /// Puts saved state `i` in the context in place of what it holds. False (with the context
    /// left empty) when llama.cpp refuses it.
    fn restore_state(&mut self, i: usize) -> bool {
        let restored = {
            let saved = self.saved.get(i);
            let _ = self.ctx.clear_kv_cache_seq(Some(0), None, None);
            self.ctx.state_seq_set(&saved.state, 0).map(|()| saved.tokens.clone())
        };
        match restored {
            Ok(tokens) => {
                self.cached_prompt = tokens.len();
                self.aligned_upto = tokens.len();
                self.tops.clear();
                self.cached = tokens;
                true
            }
            Err(e) => {
                tracing::warn!("cannot restore a saved KV state ({e}); decoding the prompt instead");
                self.saved.remove(0);
                self.ctx.clear_kv_cache();
                self.cut_cached(0);
                false
            }
        }
    }
}

/// How one generation runs: see [`Worker::prefill_and_decode`].
#[derive(Clone, Copy)]
struct Run<'a> {
    cancel: &'a super::CancelFlag,
    max_tokens: usize,
    stop: &'a dyn Fn(&str) -> Option<usize>,
    /// While this says the text may not end ([`super::Prompt::unfinished`]), end tokens are
    /// masked.
    unfinished: Option<&'a dyn Fn(&str) -> bool>,
    /// [`super::Prompt::lead`]: until the text has it, only tokens that agree with it.
    lead: &'a [u8],
    /// [`super::Prompt::blank_enders`]: while the text past the lead is blank, no token that
    /// starts with one of them (nor an end token).
    blank_enders: &'a [u8],
    fim_stops: bool,
    /// Decode the prompt in aligned batches (completions, whose answers must not depend on the
    /// cache); chats (code actions) decode in `n_batch` batches.
    aligned: bool,
}

/// Which tokens one sampling step may pick: all; those that agree with the rest of the lead
/// (`super::lead_rest`); or no end token (the text is blank past the lead, or unfinished).
enum Mask<'a> {
    None,
    Agree(&'a [u8]),
    GoOn,
}

impl Mask<'_> {
    /// Whether deciding what it allows reads the tokens' text (made once, for the whole
    /// vocabulary, when first needed: [`Worker::load_pieces`]).
    fn reads_pieces(&self, guard: Guard<'_>) -> bool {
        match self {
            Mask::None => false,
            Mask::Agree(_) => true,
            Mask::GoOn => !guard.enders.is_empty(),
        }
    }
}

/// The blank guard of one sampling step ([`super::ends_blank`]).
#[derive(Clone, Copy)]
struct Guard<'a> {
    lead: &'a [u8],
    enders: &'a [u8],
    so_far: &'a [u8],
}

impl Guard<'_> {
    fn refuses(&self, piece: &[u8]) -> bool {
        super::ends_blank(self.lead, self.enders, self.so_far, piece)
    }
}

enum PrefillError {
    Cancelled,
    Decode(String),
}

impl std::fmt::Display for PrefillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrefillError::Cancelled => f.write_str("cancelled"),
            PrefillError::Decode(m) => f.write_str(m),
        }
    }
}

/// The longest prefix of `bytes` that is valid UTF-8 (a token may end inside a character).
pub(super) fn valid_utf8_prefix(bytes: &[u8]) -> &str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// Drafted tokens at most per forward pass.
const DRAFT_MAX: usize = 8;
/// Longest and shortest run of the context's last tokens looked up in what came before.
const LOOKUP_NGRAM: std::ops::RangeInclusive<usize> = 2..=3;

/// Prompt lookup (code repeats itself: names, argument lists, a line copied from the section):
/// the tokens that followed the latest earlier occurrence of the last few tokens of `cached`
/// followed by `next`, at most `max` of them; none when those tokens occur nowhere before.
fn prompt_lookup(cached: &[LlamaToken], next: LlamaToken, max: usize) -> Vec<LlamaToken> {
    if max == 0 {
        return Vec::new();
    }
    for n in LOOKUP_NGRAM.rev() {
        if cached.len() < n {
            continue;
        }
        // The key: the last n-1 cached tokens, then `next`.
        let tail = &cached[cached.len() + 1 - n..];
        let found = (0..cached.len() - n).rev().find(|&i| cached[i..i + n - 1] == *tail && cached[i + n - 1] == next);
        if let Some(i) = found {
            let from = i + n;
            return cached[from..(from + max).min(cached.len())].to_vec();
        }
    }
    Vec::new()
}

/// The raw `llama_context` behind `ctx`, to change its thread count between jobs
/// (`llama_set_n_threads`), which llama-cpp-2 (pinned at 0.1.160 in Cargo.toml) does not
/// wrap. Its context's `Debug` output is that pointer, `LlamaContext { context: 0x… }`; any
/// other shape, or a pointer that does not answer with this context's sizes, gives `None`, and
/// the threads then stay as configured. `tests`: the test below fails when an upgrade changes it.
fn raw_context(ctx: &LlamaContext<'_>) -> Option<*mut llama_cpp_sys_2::llama_context> {
    let shown = format!("{ctx:?}");
    let hex = shown.strip_prefix("LlamaContext { context: 0x")?.strip_suffix(" }")?;
    let address = usize::from_str_radix(hex, 16).ok().filter(|&a| a != 0)?;
    let raw: *mut llama_cpp_sys_2::llama_context = std::ptr::with_exposed_provenance_mut(address);
    // SAFETY: the address is the context's own handle as its wrapper printed it; read-only
    // getters confirm it before it is used.
    let same = unsafe { llama_cpp_sys_2::llama_n_ctx(raw) == ctx.n_ctx() && llama_cpp_sys_2::llama_n_batch(raw) == ctx.n_batch() };
    same.then_some(raw)
}

#[cfg(test)]
mod draft_tests {
    use super::*;

    fn t(v: &[i32]) -> Vec<LlamaToken> {
        v.iter().copied().map(LlamaToken).collect()
    }

    #[test]
    fn lookup_proposes_what_followed_the_latest_match() {
        // … 5 6 7 8 9 … 5 6 7 1 2 …, then 5 6 sampled 7: the latest "6 7" is followed by 1 2.
        let cached = t(&[1, 5, 6, 7, 8, 9, 4, 5, 6, 7, 1, 2, 3, 5, 6]);
        assert_eq!(prompt_lookup(&cached, LlamaToken(7), 8), t(&[1, 2, 3, 5, 6]));
        assert_eq!(prompt_lookup(&cached, LlamaToken(7), 2), t(&[1, 2]));
        // Only the 2-token key matches ("6 4" never occurs, "4" after 9 does: n=2 is "x 4").
        assert_eq!(prompt_lookup(&t(&[9, 4, 3, 2, 9]), LlamaToken(4), 8), t(&[3, 2, 9]));
        // Nothing before matches, or nothing may be drafted.
        assert!(prompt_lookup(&cached, LlamaToken(42), 8).is_empty());
        assert!(prompt_lookup(&cached, LlamaToken(7), 0).is_empty());
        assert!(prompt_lookup(&t(&[1]), LlamaToken(1), 8).is_empty());
    }

    #[test]
    fn the_key_itself_is_not_a_match() {
        // "3 4" occurs only as the key (cached ends in 3, next is 4): nothing follows it.
        assert!(prompt_lookup(&t(&[1, 2, 3]), LlamaToken(4), 8).is_empty());
        // A match must leave at least one token after it.
        assert_eq!(prompt_lookup(&t(&[3, 4, 3]), LlamaToken(4), 8), t(&[3]));
    }
}

#[cfg(test)]
mod gate_tests {
    use super::*;

    #[test]
    fn the_gate_drafts_only_when_the_confirmed_share_pays_for_the_batch() {
        let mut gate = DraftGate::default();
        assert!(!gate.pays(), "nothing known: no draft");
        gate.single.add(11.0);
        gate.accept.add(0.2);
        assert!(!gate.pays(), "a low confirmed share, never timed: no draft");
        gate.accept = Ewma(Some(0.6));
        assert!(gate.pays(), "a high confirmed share: time one draft");
        // This CPU: a drafted token adds ~7.5 ms to a batch, a lone token takes ~11 ms.
        gate.extra.add(7.5);
        assert!(!gate.pays(), "0.6 × 11 < 7.5");
        gate.accept = Ewma(Some(0.9));
        assert!(gate.pays(), "0.9 × 11 > 7.5");
        // Declined, it re-times a draft once in EXPLORE declines.
        gate.accept = Ewma(Some(0.1));
        let drafted = (0..EXPLORE * 2).filter(|_| gate.pays()).count();
        assert_eq!(drafted, 2);
    }
}
