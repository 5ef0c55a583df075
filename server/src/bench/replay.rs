//! One run of a trace: a fresh `ghostline lsp` is typed into as the trace says, each completion
//! request is timed from its key, and (with a peer) llama-server is then asked for the same
//! prompt tokens, request by request, once ghostline's run is over.
//!
//! The clock starts at the key: the `didChange` of the last key before the request (or the
//! request itself when no key came since the previous one, e.g. the first request after
//! `didOpen`). With the trace's debounce the request follows its key by the recorded gap (150 ms
//! in the traces); with `--no-debounce` a request follows every key at once. Both sides carry
//! the same key-to-request time: ghostline's is measured, and the peer, which sees no
//! keystrokes, has its answer time added to the same key-to-request time.
//!
//! The two sides run one after the other, not request by request in turns: each sees a machine
//! that only it keeps busy, as a user's editor would. In turns, each side's answer came just
//! before the other's next request, and ghostline's threads (`model.adaptiveThreads`) counted
//! the peer's burst as other work and often decoded with one thread. The peer is given the same
//! pause before each request as ghostline had between its previous answer and that request.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::peer::{Launch, LlamaServer};
use super::system::peak_rss_kb;
use super::trace::LoadedTrace;
use super::{Setup, BATCH_SIZE, CONTEXT_SIZE, MAX_TOKENS, TIMEOUT};
use crate::engine::AheadCounts;
use crate::model::{CacheHit, Timings};
use crate::typing::{self, TypedDoc};

/// One completion request of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub run: usize,
    pub request: usize,
    /// Keys typed since the previous request.
    pub keys: usize,
    /// The key (the `didChange` this request follows) to the answer, client side: what the user
    /// waits for the suggestion. Includes `debounce_ms`.
    pub key_ms: f64,
    /// The key to the request: the editor's debounce (about 0 with `--no-debounce`, and 0 when
    /// no key came since the previous request).
    pub debounce_ms: f64,
    /// The request sent to its answer received, client side.
    pub request_ms: f64,
    pub suggestion: String,
    /// ghostline's figures for this request (`ghostline/lastTimings`); `None` when the engine
    /// answered it without a generation of its own (no timings for this request).
    pub server: Option<Timings>,
    pub peer: Option<PeerFigures>,
}

/// How ghostline answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A generation for this request, on the request or started ahead on its key.
    Generated,
    /// From the suggestion cache or typed-ahead reuse: no generation (counted apart).
    Cached,
    /// No timings for this request (the engine answered without the model).
    Unmatched,
}

impl Sample {
    pub fn answer(&self) -> Answer {
        match self.server.as_ref().map(|t| t.cache) {
            None => Answer::Unmatched,
            Some(Some(CacheHit::Prompt | CacheHit::ShownSuggestion)) => Answer::Cached,
            Some(None | Some(CacheHit::GeneratedAhead)) => Answer::Generated,
        }
    }

    /// Answered by a generation started ahead, on the key.
    pub fn ahead(&self) -> bool {
        self.server.as_ref().is_some_and(|t| t.cache == Some(CacheHit::GeneratedAhead))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PeerFigures {
    /// The same key-to-request time as ghostline's, plus `request_ms`.
    pub key_ms: f64,
    /// HTTP request sent to answer received, client side.
    pub request_ms: f64,
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

pub struct RunResult {
    pub samples: Vec<Sample>,
    pub format: String,
    pub load_ms: f64,
    pub peer_load_ms: Option<f64>,
    pub rss_kb: u64,
    pub peer_rss_kb: u64,
    pub ahead: AheadCounts,
}

/// llama-server with the bench's settings: the same model, threads, context and batch as
/// ghostline, one slot, its log in the run's log folder.
pub fn start_peer(bin: &Path, model: &Path, threads: u32, args: &[String], logs: &Path) -> Result<LlamaServer, String> {
    LlamaServer::start(&Launch {
        bin,
        model,
        threads,
        context: CONTEXT_SIZE,
        batch: Some(BATCH_SIZE),
        args,
        log: Some(&logs.join("llama-server.log")),
        ready_within: Duration::from_secs(120),
    })
}

pub fn run_trace((trace, file, text, at): &LoadedTrace, run: usize, setup: &Setup) -> Result<RunResult, String> {
    let log = std::fs::File::create(setup.logs.join("ghostline.log")).map_err(|e| e.to_string())?;
    // `--remote`: the server ghostline generates through, started first (as a team's would be).
    let remote = match &setup.remote {
        Some(bin) => Some(LlamaServer::start(&Launch {
            bin,
            model: &setup.model,
            threads: setup.threads,
            context: CONTEXT_SIZE,
            batch: Some(BATCH_SIZE),
            args: &setup.peer_args,
            log: Some(&setup.logs.join("remote-llama-server.log")),
            ready_within: Duration::from_secs(120),
        })?),
        None => None,
    };
    let mut options = json!({
        "model": {"path": setup.model, "threads": setup.threads, "contextSize": CONTEXT_SIZE, "batchSize": BATCH_SIZE, "prefillChunk": setup.prefill_chunk, "adaptiveThreads": setup.adaptive_threads},
        // Typed-ahead reuse is off: it would answer keys from the previous suggestion, a
        // client-side reuse the peer is not given either. With generating ahead (the default),
        // a request is answered by the generation started on its key, not by a call of its own.
        "completion": {"maxTokens": MAX_TOKENS, "repeatPenalty": 1.0, "typedAhead": false, "generateAhead": setup.generate_ahead, "crossFile": setup.cross_file},
        "nextEdit": {"enabled": setup.next_edit}
    });
    if let Some(server) = &remote {
        options["model"]["endpoint"] = json!(format!("http://127.0.0.1:{}", server.port()));
    }
    let root = trace.workspace.as_ref().map(|w| file_root(file, &trace.file, w));
    // The peer first: started after ghostline, its loading and warm-up ran into ghostline's
    // first request (up to ~100 ms more on two cores).
    let peer = match &setup.peer_bin {
        Some(bin) => Some(start_peer(bin, &setup.model, setup.threads, &setup.peer_args, &setup.logs)?),
        None => None,
    };
    let session = typing::start_in(&setup.exe, options, root.as_deref(), Stdio::from(log), TIMEOUT)?;
    let mut client = session.client;
    let mut doc = TypedDoc::open(&mut client, typing::file_uri(file), &trace.language_id, text.clone(), *at);
    if setup.open_pause_ms > 0 {
        // The editor shows the file with its cursor (VS Code then asks for the code actions
        // there), and the user reads before typing.
        let pause_until = Instant::now() + Duration::from_millis(setup.open_pause_ms);
        doc.code_actions(&mut client, TIMEOUT)?;
        std::thread::sleep(pause_until.saturating_duration_since(Instant::now()));
    }

    let mut samples = Vec::new();
    let mut keys = 0;
    let mut ahead = AheadCounts::default();
    let mut next_at = Instant::now();
    // When the last key was typed, if no request has followed it yet.
    let mut key_at: Option<Instant> = None;
    let mut requested_once = false;
    // The peer's requests, asked once ghostline's run is over; when ghostline last answered.
    let mut peer_jobs: Vec<PeerJob> = Vec::new();
    let mut last_answered: Option<Instant> = None;
    for event in &trace.events {
        next_at += Duration::from_millis(event.gap_ms);
        let now = Instant::now();
        if next_at > now {
            std::thread::sleep(next_at - now);
        } else {
            next_at = now;
        }
        if let Some(k) = event.key.as_deref() {
            let now = Instant::now();
            // The next gaps count from when the key was really sent (a sleep may overshoot), so
            // that a request follows its key by at least the recorded debounce.
            next_at = next_at.max(now);
            key_at = Some(now);
            if k == "\u{8}" {
                doc.backspace(&mut client);
            } else {
                doc.insert(&mut client, k);
            }
            keys += 1;
        }
        // With the debounce: the trace's requests. Without: a request right after every key,
        // and the trace's requests only where no key came before them (the first one).
        let ask = if setup.no_debounce { event.key.is_some() || (event.complete && !requested_once && keys == 0) } else { event.complete };
        if !ask {
            continue;
        }
        requested_once = true;
        let started = Instant::now();
        let response = doc.inline_completion(&mut client, TIMEOUT)?;
        let answered = Instant::now();
        if let Some(e) = response.get("error") {
            return Err(format!("inline completion failed: {e}"));
        }
        let request_ms = ms(answered - started);
        let from = key_at.take().unwrap_or(started);
        let (key_ms, debounce_ms) = (ms(answered - from), ms(started - from));
        let suggestion = response["result"]["items"][0]["insertText"].as_str().unwrap_or("").to_owned();
        let last = super::last_completion(&mut client)?;
        if let Some(last) = &last {
            ahead = last.ahead; // counted since the server started: the last one holds the run's
        }
        let last = last.filter(|l| l.version == doc.version && l.position == super::position(doc.cursor()));
        let server: Option<Timings> = last.as_ref().map(|l| l.timings.clone());
        let prompt: Vec<i64> = last.map(|l| l.prompt.into_iter().map(i64::from).collect()).unwrap_or_default();
        let sample = Sample { run, request: samples.len(), keys, key_ms, debounce_ms, request_ms, suggestion, server, peer: None };
        // Only a generation is paired with one on the peer: a suggestion-cache hit is counted
        // apart (a client such as llama.vim keeps its own cache of shown suggestions).
        if let (Some(_), Some(s)) = (&peer, &sample.server) {
            if !prompt.is_empty() && sample.answer() == Answer::Generated {
                let pause = last_answered.map_or(Duration::ZERO, |at| started.saturating_duration_since(at));
                peer_jobs.push(PeerJob { sample: samples.len(), prompt, n_predict: s.generated_tokens.max(1), pause, debounce_ms });
            }
        }
        last_answered = Some(answered);
        samples.push(sample);
        keys = 0;
    }

    // With `--remote`, the server's memory is the model's: counted as ghostline's.
    let rss_kb = peak_rss_kb(client.pid()) + remote.as_ref().map_or(0, |r| peak_rss_kb(r.pid()));
    drop(remote);
    if let Err(e) = client.shutdown(Duration::from_secs(10)) {
        eprintln!("ghostline bench: the server did not shut down cleanly ({e}); it was killed");
    }
    // The peer's side: the same requests in the same order, each after the same pause.
    if let Some(p) = &peer {
        for job in peer_jobs {
            std::thread::sleep(job.pause);
            let sample = &mut samples[job.sample];
            sample.peer = Some(ask_peer(p, &job.prompt, job.n_predict, &sample.suggestion, job.debounce_ms)?);
        }
    }
    let peer_rss_kb = peer.as_ref().map_or(0, |p| peak_rss_kb(p.pid()));
    let peer_load_ms = peer.as_ref().map(|p| p.load_ms);
    drop(peer);
    Ok(RunResult { samples, format: session.format, load_ms: session.load_ms, peer_load_ms, rss_kb, peer_rss_kb, ahead })
}

/// The trace's workspace folder: `workspace` is relative to the trace file, as `file` is, and
/// `path` is where `file` was found.
pub(super) fn file_root(path: &std::path::Path, file: &str, workspace: &str) -> std::path::PathBuf {
    let trace_dir = (0..std::path::Path::new(file).components().count()).fold(path.to_path_buf(), |p, _| p.parent().map(|p| p.to_path_buf()).unwrap_or(p));
    trace_dir.join(workspace)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A request of ghostline's run to ask the peer: the prompt ghostline decoded, as many tokens as
/// it generated, after `pause` (ghostline's time from its previous answer to this request).
struct PeerJob {
    sample: usize,
    prompt: Vec<i64>,
    n_predict: usize,
    pause: Duration,
    debounce_ms: f64,
}

/// The same prompt tokens and generation length as ghostline's request, greedy, with the
/// server's prompt cache on (as llama.vim and llama.vscode use it).
fn ask_peer(peer: &LlamaServer, prompt: &[i64], n_predict: usize, suggestion: &str, debounce_ms: f64) -> Result<PeerFigures, String> {
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
    let (status, r) = peer.post("/completion", &body, TIMEOUT)?;
    let request_ms = ms(started.elapsed());
    if status != 200 {
        return Err(format!("llama-server /completion answered {status}: {r}"));
    }
    let t = &r["timings"];
    let n = |k: &str| t[k].as_u64().unwrap_or(0) as usize;
    let content = r["content"].as_str().unwrap_or("");
    Ok(PeerFigures {
        key_ms: debounce_ms + request_ms,
        request_ms,
        prompt_tokens: n("prompt_n") + n("cache_n"),
        prefill_tokens: n("prompt_n"),
        prompt_ms: t["prompt_ms"].as_f64().unwrap_or(0.0),
        generated_tokens: n("predicted_n"),
        decode_tokens_per_s: t["predicted_per_second"].as_f64().unwrap_or(0.0),
        same_text: !suggestion.trim().is_empty() && content.contains(suggestion.trim()),
    })
}

/// Which endpoint the peer replay uses and why, and the peer's CPU kernels, found by asking a
/// running llama-server.
pub fn probe_peer(bin: &Path, model: &Path, threads: u32, args: &[String], logs: &Path) -> Result<(String, String), String> {
    // llama-server logs its system info (backends and CPU features) only at verbosity 4; the
    // measured servers keep the default, this probe alone logs more.
    let args: Vec<String> = args.iter().cloned().chain(["-lv".to_owned(), "4".to_owned()]).collect();
    let peer = start_peer(bin, model, threads, &args, logs)?;
    let probe = json!({"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n", "n_predict": 1});
    let (status, r) = peer.post("/infill", &probe, TIMEOUT)?;
    let infill = if status == 200 {
        "/infill accepts this model, but it builds its own FIM layout from the text; /completion gets the exact tokens".to_owned()
    } else {
        let message = r["error"]["message"].as_str().map_or_else(|| r.to_string(), str::to_owned);
        format!("/infill refused this model ({status}: {message}): it has no FIM tokens")
    };
    let endpoint = format!(
        "/completion with cache_prompt, given the prompt token ids ghostline decoded for the same request and \
         n_predict = ghostline's generated tokens (ignore_eos), so both sides decode the same tokens; {infill}"
    );
    let kernels = peer.system_info().map(|s| super::system::kernels(&s)).filter(|k| !k.is_empty());
    Ok((endpoint, kernels.unwrap_or_else(|| "not in its log (no system_info line)".into())))
}
