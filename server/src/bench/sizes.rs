//! `ghostline bench --cold-sizes 256,1024,2048`: time to the first token of a cold prompt (no
//! KV entry reusable) at stated prompt sizes, the prefill and decode rates there, and the floor
//! (one forward pass of one token at that context), on the model thread itself, against
//! llama-server given the same prompt token ids with its prompt cache off, once ghostline's
//! samples are all taken.
//!
//! The prompts are the end of `fixtures/traces/*.py` and the other Python fixtures, joined,
//! cut at a different line end for every sample, so that no two prompts of a run share more
//! than their first token. Each size gets one discarded sample first (a GPU backend sets up
//! kernels and graphs per batch shape on first use).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;

use super::replay::start_peer;
use super::system::{load_average, machine};
use super::{Stat, BATCH_SIZE, CONTEXT_SIZE, TIMEOUT};
use crate::config;
use crate::context::{ContextParts, Strategy};
use crate::model::{CancelFlag, ModelHandle, ModelStatus, Sampling};
use crate::postprocess::StopRule;
use crate::prompt::Draft;

/// Generated tokens per sample: enough for a decode rate at that context.
const DECODE_TOKENS: u32 = 32;

/// One cold request at one size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeSample {
    pub prompt_tokens: usize,
    pub reused_tokens: usize,
    pub ttft_ms: f64,
    /// Of `ttft_ms`: fitting, tokenizing and assembling the prompt (llama-server is given the
    /// token ids and does none of it).
    pub build_ms: f64,
    pub generated_tokens: usize,
    pub decode_tokens_per_s: f64,
    pub peer_prompt_ms: Option<f64>,
    pub peer_decode_tokens_per_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SizeReport {
    /// The prompt size asked for; `prompt_tokens` says what was decoded.
    pub size: u32,
    pub prompt_tokens: Option<Stat>,
    pub cold_ttft_ms: Option<Stat>,
    pub prefill_tokens_per_s: Option<Stat>,
    pub decode_tokens_per_s: Option<Stat>,
    /// One forward pass of one token at this context: 1 / ghostline's decode rate, median.
    pub floor_ms: Option<f64>,
    pub peer_prompt_ms: Option<Stat>,
    pub peer_decode_tokens_per_s: Option<Stat>,
    /// ghostline's cold TTFT / llama-server's prompt time for the same tokens (target ≤ 1.0).
    pub cold_ttft_ratio: Option<f64>,
    /// ghostline's decode rate / llama-server's (target ≥ 1.0).
    pub decode_ratio: Option<f64>,
    pub samples: Vec<SizeSample>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SizesReport {
    pub model: PathBuf,
    pub machine: String,
    pub backend: String,
    pub gpu_layers: String,
    pub threads: u32,
    /// `model.adaptiveThreads` on ghostline's side (the peer's threads are fixed).
    pub adaptive_threads: bool,
    pub context_size: u32,
    pub batch_size: u32,
    pub runs: usize,
    pub peer: Option<String>,
    pub load_average: (f64, f64),
    pub sizes: Vec<SizeReport>,
}

/// Python text to cut prompts from: every `.py` fixture, joined.
fn corpus() -> Result<String, String> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["fixtures/traces", "fixtures/demo", "fixtures/e2e", "fixtures/vscode", "fixtures/context"] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        files.extend(entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "py")));
    }
    files.sort();
    if files.is_empty() {
        return Err("no Python fixtures found: run from the repository root".into());
    }
    let mut text = String::new();
    for f in &files {
        text.push_str(&std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?);
        text.push_str("\n\n");
    }
    Ok(text)
}

/// Non-blank lines between the cursors of two samples: the budget keeps whole lines from the
/// start of the kept text, so moving the cursor up by one line would keep the same start (and
/// let the KV cache reuse nearly all of it); a dozen lines moves the start too.
const CURSOR_STEP: usize = 12;

/// Cursor positions: the ends of non-blank lines from the corpus's end up, `CURSOR_STEP` apart.
fn cursors(text: &str, n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut end = text.len();
    let mut seen = 0;
    while out.len() < n {
        let Some(nl) = text[..end].rfind('\n') else { break };
        if !text[nl + 1..end].trim().is_empty() {
            if seen % CURSOR_STEP == 0 {
                out.push(end);
            }
            seen += 1;
        }
        end = nl;
    }
    out
}

pub fn run(sizes: &[u32], runs: usize, model: &Path, threads: u32, adaptive_threads: bool, peer: Option<(PathBuf, Vec<String>)>) -> Result<SizesReport, String> {
    let text = corpus()?;
    let load_start = load_average();
    let mut options = config::Options::default();
    options.model.path = Some(model.to_path_buf());
    options.model.threads = Some(threads);
    options.model.adaptive_threads = Some(adaptive_threads);
    options.model.context_size = Some(CONTEXT_SIZE);
    let config = options.resolve(None);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let handle = ModelHandle::spawn(&config.model, Sampling { repeat_penalty: 1.0, repeat_last_n: 0 });
    let info = match runtime.block_on(handle.wait_loaded()) {
        ModelStatus::Ready(info) | ModelStatus::Unloaded(info) => info,
        ModelStatus::Failed(m) => return Err(m),
        other => return Err(format!("model not loaded: {other:?}")),
    };
    // ghostline's side first, every size, then the peer's on the same token ids: asked in
    // turns, each of ghostline's jobs began milliseconds after the peer's answer, while the
    // peer's threads still spun down, and its adaptive threads counted that as load (the
    // keystroke benchmark's sides are run one after the other for the same reason).
    let mut done: Vec<(u32, Vec<crate::model::Timings>)> = Vec::new();
    for &size in sizes {
        let mut positions = cursors(&text, runs + 1).into_iter();
        let mut timings = Vec::new();
        for run in 0..=runs {
            let cursor = positions.next().ok_or("the fixtures are too short for that many samples")?;
            let draft = Draft {
                context: ContextParts {
                    strategy: Strategy::Window,
                    outline: Vec::new(),
                    prefix_start: 0,
                    prefix: text[..cursor].to_owned(),
                    suffix: String::new(),
                },
                cross_file: None,
                purpose: crate::prompt::Purpose::Complete,
                max_prompt_tokens: size,
                // Never stops on the text: every sample decodes DECODE_TOKENS (unless end of text).
                stop: StopRule::unbounded(),
                max_tokens: DECODE_TOKENS,
                fim: true,
            };
            let request = draft.into_request(Default::default(), CancelFlag::new());
            let g = runtime.block_on(handle.generate(request)).map_err(|e| format!("generation at {size} tokens: {e}"))?;
            let t = g.timings;
            eprintln!(
                "ghostline bench: {size} tokens, sample {run}{}: prompt {} ({} reused), TTFT {:.1} ms, decode {:.1} tok/s",
                if run == 0 { " (discarded)" } else { "" },
                t.prompt_tokens,
                t.reused_tokens,
                t.ttft_ms,
                t.decode_tokens_per_s,
            );
            if run > 0 && t.reused_tokens > 8 {
                eprintln!("ghostline bench: warning: {} prompt tokens were reused from the previous sample", t.reused_tokens);
            }
            timings.push(t);
        }
        done.push((size, timings));
    }

    let logs = std::env::temp_dir().join(format!("ghostline-bench-sizes-{}", std::process::id()));
    let peer_server = match &peer {
        Some((bin, args)) => {
            std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
            Some(start_peer(bin, model, threads, args, &logs)?)
        }
        None => None,
    };
    let mut reports = Vec::new();
    for (size, timings) in done {
        let mut samples = Vec::new();
        for (run, t) in timings.into_iter().enumerate() {
            let (mut peer_prompt_ms, mut peer_decode) = (None, None);
            if let Some(p) = &peer_server {
                let body = json!({
                    "prompt": t.prompt,
                    "n_predict": DECODE_TOKENS,
                    "cache_prompt": false,
                    "temperature": 0.0,
                    "top_k": 1,
                    "repeat_penalty": 1.0,
                    "ignore_eos": true,
                    "stream": false,
                });
                let (status, r) = p.post("/completion", &body, TIMEOUT)?;
                if status != 200 {
                    return Err(format!("llama-server /completion answered {status}: {r}"));
                }
                peer_prompt_ms = r["timings"]["prompt_ms"].as_f64();
                peer_decode = r["timings"]["predicted_per_second"].as_f64();
                eprintln!(
                    "ghostline bench: {size} tokens, sample {run}{}: llama-server prompt {:.1} ms, decode {:.1} tok/s",
                    if run == 0 { " (discarded)" } else { "" },
                    peer_prompt_ms.unwrap_or(f64::NAN),
                    peer_decode.unwrap_or(f64::NAN),
                );
            }
            if run == 0 {
                continue;
            }
            samples.push(SizeSample {
                prompt_tokens: t.prompt_tokens,
                reused_tokens: t.reused_tokens,
                ttft_ms: t.ttft_ms,
                build_ms: t.build_ms,
                generated_tokens: t.generated_tokens,
                decode_tokens_per_s: t.decode_tokens_per_s,
                peer_prompt_ms,
                peer_decode_tokens_per_s: peer_decode,
            });
        }
        reports.push(summarize(size, samples));
    }
    drop(peer_server);
    let _ = std::fs::remove_dir_all(&logs);
    Ok(SizesReport {
        model: model.to_path_buf(),
        machine: machine(),
        backend: info.backend.clone(),
        gpu_layers: info.gpu_layers.clone(),
        threads: info.threads,
        adaptive_threads,
        context_size: info.n_ctx,
        batch_size: BATCH_SIZE,
        runs,
        peer: peer.map(|(bin, args)| format!("{} {}", super::peer::version(&bin), args.join(" ")).trim().to_owned()),
        load_average: (load_start, load_average()),
        sizes: reports,
    })
}

fn summarize(size: u32, samples: Vec<SizeSample>) -> SizeReport {
    let stat = |f: &dyn Fn(&SizeSample) -> Option<f64>| Stat::of(samples.iter().filter_map(f));
    let decoded = |s: &SizeSample| s.generated_tokens >= 4;
    let cold_ttft_ms = stat(&|s| Some(s.ttft_ms));
    let decode = stat(&|s| decoded(s).then_some(s.decode_tokens_per_s));
    let peer_prompt_ms = stat(&|s| s.peer_prompt_ms);
    let peer_decode = stat(&|s| s.peer_decode_tokens_per_s);
    let ratio = |a: Option<Stat>, b: Option<Stat>| a.zip(b).filter(|(_, b)| b.p50 > 0.0).map(|(a, b)| a.p50 / b.p50);
    SizeReport {
        size,
        prompt_tokens: stat(&|s| Some(s.prompt_tokens as f64)),
        cold_ttft_ms,
        prefill_tokens_per_s: stat(&|s| Some((s.prompt_tokens - s.reused_tokens) as f64 / s.ttft_ms * 1e3)),
        floor_ms: decode.filter(|d| d.p50 > 0.0).map(|d| 1e3 / d.p50),
        decode_tokens_per_s: decode,
        cold_ttft_ratio: ratio(cold_ttft_ms, peer_prompt_ms),
        decode_ratio: ratio(decode, peer_decode),
        peer_prompt_ms,
        peer_decode_tokens_per_s: peer_decode,
        samples,
    }
}

pub fn print_text(r: &SizesReport) {
    println!("ghostline bench — cold prompts by size");
    println!("  model: {}", r.model.display());
    println!("  machine: {}", r.machine);
    println!(
        "  backend: {} (GPU layers: {}), threads {}, context {}, batch {}, {} samples per size after one discarded, greedy",
        r.backend, r.gpu_layers, r.threads, r.context_size, r.batch_size, r.runs
    );
    if let Some(p) = &r.peer {
        println!("  peer: {p}, /completion with the same prompt token ids, cache_prompt off, n_predict {DECODE_TOKENS}, ignore_eos");
    }
    println!("  load average: {:.2} at start, {:.2} at end", r.load_average.0, r.load_average.1);
    println!();
    println!(
        "  {:>6} {:>7} {:>16} {:>14} {:>12} {:>9} {:>18} {:>10} {:>8} {:>8}",
        "size", "tokens", "cold TTFT ms", "prefill tok/s", "decode tok/s", "floor ms", "peer prompt ms", "peer tok/s", "TTFT ×", "decode ×"
    );
    let p = |s: Option<Stat>, d: usize| s.map_or("—".into(), |s| format!("{:.d$}", s.p50));
    let pp = |s: Option<Stat>| s.map_or("—".into(), |s| format!("{:.1} / {:.1}", s.p50, s.p95));
    let o = |v: Option<f64>, d: usize| v.map_or("—".into(), |v| format!("{v:.d$}"));
    for s in &r.sizes {
        println!(
            "  {:>6} {:>7} {:>16} {:>14} {:>12} {:>9} {:>18} {:>10} {:>8} {:>8}",
            s.size,
            p(s.prompt_tokens, 0),
            pp(s.cold_ttft_ms),
            p(s.prefill_tokens_per_s, 0),
            p(s.decode_tokens_per_s, 1),
            o(s.floor_ms, 2),
            pp(s.peer_prompt_ms),
            p(s.peer_decode_tokens_per_s, 1),
            o(s.cold_ttft_ratio, 2),
            o(s.decode_ratio, 2)
        );
    }
    println!();
    println!("  cold TTFT: p50 / p95; TTFT × = ghostline / llama-server prompt time (target ≤ 1.0); decode × target ≥ 1.0");
}
