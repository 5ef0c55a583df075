//! `ghostline bench`: replays recorded typing traces (`fixtures/traces/*.json`, format in
//! `fixtures/traces/README.md`) through the real language server over stdio and reports the
//! figures shared/PERF.md asks for. With `--peer llama-server` it sends every request that
//! ghostline answered with a generation to llama.cpp's own server as well (same GGUF, threads,
//! context, batch, prompt tokens and generation length, greedy on both sides) and prints
//! ghostline/peer ratios measured in the same run.
//!
//! Every side is timed from the key (the `didChange` the request follows), with the trace's
//! debounce or, with `--no-debounce`, a request right after each key; request-to-answer is kept
//! as a secondary figure. The replay is closed-loop: it waits for each answer before the next
//! event (and sleeps the recorded gap when the answer came sooner), so every request is measured
//! on both sides and both do the same work. An editor would instead supersede a request still
//! running when the next key arrives. The peer's side runs after ghostline's, with the same
//! pauses between requests, so that neither side's work falls in the other's time.
//!
//! Modules: `trace` (the schema and loading), `replay` (one run), `peer` (llama-server as a
//! process), `http` (the loopback client), `stats` (figures, ratios, targets), `report` (the
//! table and the SVG), `system` (machine and `/proc`), `sizes` (`--cold-sizes`), `soak`
//! (`--soak`), `warm_cold` (`--warm-cold`), `invariance` (`--batch-invariance`). Server-side figures come from the opt-in `ghostline/lastTimings` request; normal
//! responses carry no timings.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::config;
use crate::engine::AheadCounts;

pub mod http;
pub mod index;
pub mod invariance;
pub mod peer;
pub mod replay;
pub mod report;
pub mod sizes;
pub mod soak;
pub mod stats;
pub mod system;
pub mod trace;
pub mod warm_cold;

pub use report::{chart, print_text};
pub use stats::{Stat, TraceReport};

/// Fixed conditions of every run (ghostline's defaults, stated in the output).
const CONTEXT_SIZE: u32 = 4096;
const BATCH_SIZE: u32 = 512;
const MAX_TOKENS: u32 = 64;
const TIMEOUT: Duration = Duration::from_secs(300);

pub struct Options {
    pub traces: Vec<PathBuf>,
    /// `llama-server`, the only peer so far.
    pub peer: Option<String>,
    /// The peer's binary (default: `$GHOSTLINE_LLAMA_SERVER`, then `llama-server` on PATH).
    pub peer_bin: Option<PathBuf>,
    /// Extra llama-server arguments (e.g. `--cache-ram 0`), stated in the output.
    pub peer_args: Vec<String>,
    pub runs: usize,
    pub json: bool,
    pub model: Option<PathBuf>,
    pub threads: Option<u32>,
    /// Where to write an SVG chart of latency per request.
    pub svg: Option<PathBuf>,
    /// Instead of the traces: cold prompts of these sizes (tokens), see `sizes`.
    pub cold_sizes: Vec<u32>,
    /// ghostline's `completion.generateAhead` (its default: on). Off compares the engines
    /// request for request.
    pub generate_ahead: bool,
    /// A request right after every key instead of the trace's debounced requests.
    pub no_debounce: bool,
    /// ghostline's `completion.crossFile` (default: on; it needs a trace with a workspace).
    pub cross_file: bool,
    /// ghostline's `nextEdit.enabled` (default: on).
    pub next_edit: bool,
    /// ghostline's `model.adaptiveThreads` (default on; the peer's threads are fixed).
    pub adaptive_threads: bool,
    /// ghostline's `model.prefillChunk` (default: its own default).
    pub prefill_chunk: Option<u32>,
    /// The pause after `didOpen` (a code-action request at the cursor, then the user reading).
    pub open_pause_ms: u64,
    /// ghostline generates through a llama-server on loopback (`model.endpoint`), started for
    /// each run like the peer, instead of in-process.
    pub remote: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Conditions {
    pub model: PathBuf,
    pub prompt_format: String,
    pub threads: u32,
    pub context_size: u32,
    pub batch_size: u32,
    pub max_tokens: u32,
    pub sampling: String,
    pub machine: String,
    pub ghostline_version: String,
    /// The CPU (and GPU) kernels of ghostline's llama.cpp, from its system info.
    pub ghostline_kernels: String,
    pub peer: Option<String>,
    /// The peer's kernels, from the `system_info` line of its log.
    pub peer_kernels: Option<String>,
    pub peer_endpoint: Option<String>,
    pub replay: String,
    /// Where the clock starts.
    pub clock: String,
    /// Whether requests follow the trace's debounce (false: `--no-debounce`).
    pub debounce: bool,
    /// What each side was sent.
    pub ghostline_got: String,
    pub peer_got: Option<String>,
    /// ghostline's `completion.generateAhead`: whether it started generating on each keystroke.
    pub generate_ahead: bool,
    /// ghostline's `model.prefillChunk`: prompt tokens per aligned batch (0: off).
    pub prefill_chunk: u32,
    /// ghostline's `completion.crossFile` (only traces with a workspace have other files).
    pub cross_file: bool,
    /// ghostline's `nextEdit.enabled`: the edit history recorded on every key.
    pub next_edit: bool,
    /// ghostline's `model.adaptiveThreads`: fewer threads than `threads` while other processes
    /// keep cores busy (llama-server has no such switch: its threads are fixed).
    pub adaptive_threads: bool,
    /// Between `didOpen` and the first event: a code-action request at the cursor, then this
    /// pause (`--open-pause`); 0: none.
    pub open_pause_ms: u64,
    /// ghostline's `model.endpoint`: a llama-server on loopback generated its answers (`--remote`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The 1-minute load average when the bench started and ended: other work on the machine
    /// competes for the same cores.
    pub load_average: (f64, f64),
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub conditions: Conditions,
    pub traces: Vec<TraceReport>,
}

/// `ghostline/lastTimings`: the last completion the server answered (`None` before any), read as
/// the type the server sends.
fn last_completion(client: &mut crate::stdio_client::StdioClient) -> Result<Option<crate::lsp::LastCompletion>, String> {
    let answer = client.request("ghostline/lastTimings", serde_json::Value::Null, TIMEOUT)?;
    serde_json::from_value(answer["result"].clone()).map_err(|e| format!("ghostline/lastTimings: {e}: {answer}"))
}

/// A typing cursor as `ghostline/lastTimings` states a position.
fn position(c: crate::typing::Cursor) -> crate::lsp::LastPosition {
    crate::lsp::LastPosition { line: c.line, character: c.character }
}

/// `--cold-sizes`: cold prompts by size, against llama-server when `--peer` says so.
pub fn run_sizes(opts: &Options) -> Result<sizes::SizesReport, String> {
    let (model, threads) = model_and_threads(opts.model.clone(), opts.threads)?;
    let peer = peer_binary(opts.peer.as_deref(), opts.peer_bin.clone())?.map(|bin| (bin, opts.peer_args.clone()));
    sizes::run(&opts.cold_sizes, opts.runs.max(1), &model, threads, opts.adaptive_threads, peer)
}

/// The model (`--model`, else `$GHOSTLINE_MODEL`) and llama.cpp's threads (`--threads`, else the
/// physical cores), as every bench mode takes them.
fn model_and_threads(model: Option<PathBuf>, threads: Option<u32>) -> Result<(PathBuf, u32), String> {
    let model = model.or_else(config::env_model).ok_or_else(|| format!("no model: pass --model or set {}", config::MODEL_ENV))?;
    let model = model.canonicalize().map_err(|e| format!("model {}: {e}", model.display()))?;
    Ok((model, threads.filter(|&t| t > 0).unwrap_or_else(config::default_threads)))
}

/// `--peer`: llama-server's binary, or none.
fn peer_binary(peer: Option<&str>, bin: Option<PathBuf>) -> Result<Option<PathBuf>, String> {
    match peer {
        None => Ok(None),
        Some("llama-server") => peer::find(bin).map(Some),
        Some(other) => Err(format!("unknown peer {other:?}: the only peer is llama-server")),
    }
}

/// What a run needs to start the servers.
pub struct Setup {
    exe: PathBuf,
    model: PathBuf,
    threads: u32,
    peer_bin: Option<PathBuf>,
    peer_args: Vec<String>,
    /// Server logs of the current run (removed at the end).
    logs: PathBuf,
    generate_ahead: bool,
    no_debounce: bool,
    cross_file: bool,
    next_edit: bool,
    adaptive_threads: bool,
    prefill_chunk: u32,
    open_pause_ms: u64,
    /// `--remote`: llama-server's binary, started for each run as ghostline's `model.endpoint`.
    remote: Option<PathBuf>,
}

pub fn run(opts: Options) -> Result<Report, String> {
    let (model, threads) = model_and_threads(opts.model.clone(), opts.threads)?;
    let traces = trace::trace_paths(&opts.traces)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let runs = opts.runs.max(1);
    let peer_bin = peer_binary(opts.peer.as_deref(), opts.peer_bin.clone())?;
    let logs = std::env::temp_dir().join(format!("ghostline-bench-{}", std::process::id()));
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let setup = Setup {
        exe,
        model: model.clone(),
        threads,
        peer_bin: peer_bin.clone(),
        peer_args: opts.peer_args.clone(),
        logs,
        generate_ahead: opts.generate_ahead,
        no_debounce: opts.no_debounce,
        cross_file: opts.cross_file,
        next_edit: opts.next_edit,
        adaptive_threads: opts.adaptive_threads,
        open_pause_ms: opts.open_pause_ms,
        remote: if opts.remote { Some(peer::find(opts.peer_bin.clone())?) } else { None },
        prefill_chunk: opts.prefill_chunk.unwrap_or_else(|| crate::model::backend::default_prefill_chunk(crate::model::backend::gpu_layers(None))),
    };

    let client = if opts.no_debounce {
        "a request right after every key (no debounce; the trace's own requests are dropped but for one with no key before it)"
    } else {
        "the trace's requests, each after its recorded gap from the last key (the editor's debounce)"
    };
    let ghostline_got = format!(
        "every key as a didChange and {client}; {}; typed-ahead reuse off",
        if opts.generate_ahead {
            "generating ahead on (completion.generateAhead): a generation starts on each didChange and answers the request that follows"
        } else {
            "generating ahead off: each request calls the model itself"
        }
    );
    let peer_got = peer_bin.as_ref().map(|_| {
        format!(
            "{client}, with cache_prompt (as llama.vim sends: a request per key when there is no debounce), except requests \
             ghostline answered from its suggestion cache; no keystrokes (llama-server has no didChange); none cancelled: \
             the replay is closed-loop, so no request is still running when the next key comes"
        )
    });
    let mut conditions = Conditions {
        model: model.clone(),
        prompt_format: String::new(),
        threads,
        context_size: CONTEXT_SIZE,
        batch_size: BATCH_SIZE,
        max_tokens: MAX_TOKENS,
        sampling: "greedy: temperature 0 / top-k 1, no repetition penalty, on both sides".into(),
        machine: system::machine(),
        ghostline_version: format!("ghostline {} (llama.cpp through llama-cpp-2 0.1.160)", env!("CARGO_PKG_VERSION")),
        ghostline_kernels: system::kernels(&crate::model::backend::system_info()),
        peer: peer_bin.as_deref().map(|bin| {
            let args = if opts.peer_args.is_empty() { "default settings".to_owned() } else { opts.peer_args.join(" ") };
            format!("{}, {args}", peer::version(bin))
        }),
        peer_kernels: None,
        peer_endpoint: None,
        replay: "closed-loop: each request waits for its answer before the next event; the recorded gaps are slept \
                 when the answers came sooner; the peer's side after ghostline's run, the same requests in order, each \
                 after the pause ghostline had before it (neither side's work in the other's time)"
            .into(),
        clock: "from the key: the didChange of the last key before the request (the request itself when no key came since \
                the previous one) to the answer, client side; the peer, which sees no keys, is given the same \
                key-to-request time"
            .into(),
        debounce: !opts.no_debounce,
        ghostline_got,
        peer_got,
        generate_ahead: opts.generate_ahead,
        prefill_chunk: setup.prefill_chunk,
        cross_file: opts.cross_file,
        next_edit: opts.next_edit,
        adaptive_threads: opts.adaptive_threads,
        open_pause_ms: opts.open_pause_ms,
        remote: setup.remote.as_deref().map(|bin| {
            let args = if opts.peer_args.is_empty() { "default settings".to_owned() } else { opts.peer_args.join(" ") };
            format!(
                "{}, {args}, on a loopback port: ghostline builds each prompt and sends its token ids to /completion \
                 (cache_prompt, streamed, greedy without a repetition penalty), then cuts and cleans the answer itself",
                peer::version(bin)
            )
        }),
        load_average: (system::load_average(), 0.0),
    };
    if let Some(bin) = &peer_bin {
        let (endpoint, kernels) = replay::probe_peer(bin, &model, threads, &opts.peer_args, &setup.logs)?;
        conditions.peer_endpoint = Some(endpoint);
        conditions.peer_kernels = Some(kernels);
    }

    let mut reports = Vec::new();
    for path in &traces {
        let trace = trace::load_trace(path)?;
        let mut samples = Vec::new();
        let mut rss = (0u64, 0u64);
        let mut loads = (Vec::new(), Vec::new());
        let mut ahead = AheadCounts::default();
        for run in 0..runs {
            eprintln!("ghostline bench: {} run {}/{runs}", trace.0.name, run + 1);
            let r = replay::run_trace(&trace, run, &setup)?;
            conditions.prompt_format = r.format.clone();
            samples.extend(r.samples);
            rss = (rss.0.max(r.rss_kb), rss.1.max(r.peer_rss_kb));
            loads.0.push(r.load_ms);
            loads.1.extend(r.peer_load_ms);
            ahead += r.ahead;
        }
        let mut report = stats::summarize(&trace.0, path, runs, samples, rss, loads, peer_bin.is_some());
        report.ahead = opts.generate_ahead.then_some(ahead);
        reports.push(report);
    }
    conditions.load_average.1 = system::load_average();
    let report = Report { conditions, traces: reports };
    if let Some(svg) = &opts.svg {
        std::fs::write(svg, chart(&report)).map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    }
    let _ = std::fs::remove_dir_all(&setup.logs);
    Ok(report)
}
