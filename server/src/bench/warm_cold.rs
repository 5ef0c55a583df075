//! `ghostline bench --warm-cold`: is the answer the same whatever the cache holds? Replays a
//! typing trace into one server (its KV cache, saved KV states and generation ahead all in
//! play; typed-ahead off, so that every answer is the model's) and asks a fresh process
//! (`ghostline complete`) for the same text and cursor at every request: the two must agree
//! token for token. The warm side drafts tokens from the prompt at every chance and checks them
//! in one batch (`model.draft: true`; it happens only where the kernels are batch-invariant);
//! the cold side decodes one token at a time (`model.draft: false`): equal answers also say
//! drafting changed nothing.
//! A trace with a workspace replays in a copy of it, with the cross-file
//! section on for both sides. Runs wherever the binary runs (the CPU in CI, a GPU through the device
//! route).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::model::CacheHit;
use crate::typing::{self, TypedDoc};

const TIMEOUT: Duration = Duration::from_secs(300);

pub struct Options {
    pub trace: PathBuf,
    pub model: PathBuf,
    pub threads: Option<u32>,
    /// `model.prefillChunk` for both sides (default: ghostline's).
    pub prefill_chunk: Option<u32>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub trace: String,
    pub model: PathBuf,
    pub backend: String,
    /// Why a position's result may depend on its batch here (`model::backend::batch_invariance`);
    /// `null` where it cannot, and the warm side reuses the cache at any token boundary.
    pub batch_variant: Option<String>,
    pub prefill_chunk: u32,
    pub requests: usize,
    /// Requests whose answer was not empty.
    pub answered: usize,
    pub differ: Vec<Difference>,
    /// The warm server's request-to-answer times (ms), in order.
    pub warm_ms: Vec<f64>,
    /// Prompt tokens the warm server decoded, summed over the requests.
    pub warm_prefill_tokens: u64,
    /// The requests' prompt tokens, summed: what a server without a KV cache would decode.
    pub warm_prompt_tokens: u64,
    /// Requests whose prompt on the warm side held a cross-file section.
    pub with_cross_file: usize,
    /// The warm side's generation, summed over the requests the model answered: tokens
    /// generated, drafted, confirmed by the model, and the decodes it took.
    pub warm_generated_tokens: u64,
    pub warm_drafted_tokens: u64,
    pub warm_accepted_tokens: u64,
    pub warm_decode_passes: u64,
    /// Over every warm answer the model made, generated ahead included: tokens generated, of
    /// them replayed from the logits kept with the KV cache (no decode), and the decodes.
    pub all_generated_tokens: u64,
    pub all_replayed_tokens: u64,
    pub all_decode_passes: u64,
}

#[derive(Debug, Serialize)]
pub struct Difference {
    pub request: usize,
    pub line: u32,
    pub character: u32,
    pub warm: String,
    pub warm_tokens: u64,
    pub cold: String,
    pub cold_tokens: u64,
}

/// One request of the warm session.
struct Asked {
    text: String,
    line: u32,
    character: u32,
    answer: String,
    generated_tokens: u64,
}

pub fn run(options: &Options) -> Result<Report, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the ghostline binary: {e}"))?;
    let (trace, file, text, at) = super::trace::load_trace(&options.trace)?;
    let prefill_chunk = options.prefill_chunk.unwrap_or_else(|| crate::model::backend::default_prefill_chunk(crate::model::backend::gpu_layers(None)));
    let threads = options.threads.unwrap_or_else(crate::config::default_threads);
    let model_options = json!({"path": options.model, "threads": threads, "prefillChunk": prefill_chunk});

    let dir = std::env::temp_dir().join(format!("ghostline-warm-cold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // A trace with a workspace: both sides work on one copy of it (the cold side writes each
    // request's text into the file there), so the cross-file section is in play — its head
    // decoded when the file opens, then kept — and must not change an answer either.
    let (root, file) = match &trace.workspace {
        Some(workspace) => {
            let root = super::replay::file_root(&file, &trace.file, workspace);
            let copy = dir.join("workspace");
            copy_tree(&root, &copy)?;
            let rel = file.strip_prefix(&root).map_err(|_| format!("{} is not inside the trace's workspace {}", file.display(), root.display()))?;
            let file = copy.join(rel);
            (Some(copy), file)
        }
        None => (None, dir.join(file.file_name().unwrap_or(trace.file.as_ref()))),
    };

    // The warm side: one server, every key and request of the trace in order, no waits (each
    // key's generation ahead is cancelled by the next, mid-prefill or mid-decode).
    let mut warm_model = model_options.clone();
    warm_model["draft"] = json!(true);
    let settings = json!({"model": warm_model, "completion": {"typedAhead": false}});
    let session = typing::start_in(&exe, settings, root.as_deref(), Stdio::inherit(), TIMEOUT)?;
    let mut client = session.client;
    if root.is_some() {
        // The cold side indexes the whole workspace before it answers: so does the warm one.
        typing::wait_indexed(&mut client, TIMEOUT)?;
    }
    let mut doc = TypedDoc::open(&mut client, typing::file_uri(&file), &trace.language_id, text, at);
    let mut asked = Vec::new();
    let mut warm_ms = Vec::new();
    let mut warm_prefill_tokens = 0;
    let mut warm_prompt_tokens = 0;
    let mut with_cross_file = 0;
    let (mut generated, mut drafted, mut accepted, mut passes) = (0u64, 0u64, 0u64, 0u64);
    let mut all = (0u64, 0u64, 0u64);
    for event in &trace.events {
        match event.key.as_deref() {
            Some("\u{8}") => doc.backspace(&mut client),
            Some(key) => doc.insert(&mut client, key),
            None => {}
        }
        if !event.complete {
            continue;
        }
        let started = Instant::now();
        let response = doc.inline_completion(&mut client, TIMEOUT)?;
        warm_ms.push(started.elapsed().as_secs_f64() * 1e3);
        if let Some(e) = response.get("error") {
            return Err(format!("inline completion failed: {e}"));
        }
        let answer = response["result"]["items"][0]["insertText"].as_str().unwrap_or("").to_owned();
        let last = super::last_completion(&mut client)?.filter(|l| l.version == doc.version);
        let Some(last) = last else {
            return Err(format!("ghostline/lastTimings did not describe request {} (version {})", asked.len(), doc.version));
        };
        warm_prefill_tokens += last.timings.prefill_tokens as u64;
        warm_prompt_tokens += last.timings.prompt_tokens as u64;
        with_cross_file += usize::from(!last.cross_file.is_empty());
        if matches!(last.timings.cache, None | Some(CacheHit::GeneratedAhead)) {
            all.0 += last.timings.generated_tokens as u64;
            all.1 += last.timings.replayed_tokens as u64;
            all.2 += last.timings.decode_passes as u64;
        }
        if last.timings.cache.is_none() {
            generated += last.timings.generated_tokens as u64;
            drafted += last.timings.drafted_tokens as u64;
            accepted += last.timings.accepted_tokens as u64;
            passes += last.timings.decode_passes as u64;
        }
        let cursor = doc.cursor();
        asked.push(Asked {
            text: doc.text.clone(),
            line: cursor.line,
            character: cursor.character,
            answer,
            generated_tokens: last.timings.generated_tokens as u64,
        });
    }
    if let Err(e) = client.shutdown(Duration::from_secs(10)) {
        eprintln!("ghostline bench: the server did not shut down cleanly ({e}); it was killed");
    }

    // The cold side: a fresh process for every request.
    let doc_file = file;
    let settings_file = dir.join("settings.json");
    let mut cold_model = model_options.clone();
    cold_model["draft"] = json!(false);
    std::fs::write(&settings_file, json!({"model": cold_model}).to_string()).map_err(|e| e.to_string())?;
    let mut differ = Vec::new();
    for (request, a) in asked.iter().enumerate() {
        std::fs::write(&doc_file, &a.text).map_err(|e| format!("cannot write {}: {e}", doc_file.display()))?;
        let (cold, cold_tokens) = cold_answer(&exe, &settings_file, &doc_file, root.as_deref(), a.line, a.character)?;
        if cold != a.answer || cold_tokens != a.generated_tokens {
            differ.push(Difference {
                request,
                line: a.line,
                character: a.character,
                warm: a.answer.clone(),
                warm_tokens: a.generated_tokens,
                cold,
                cold_tokens,
            });
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Report {
        trace: trace.name.clone(),
        model: options.model.clone(),
        backend: crate::model::backend::name().to_owned(),
        batch_variant: crate::model::backend::batch_invariance(crate::model::backend::gpu_layers(None)).err(),
        prefill_chunk,
        requests: asked.len(),
        answered: asked.iter().filter(|a| !a.answer.is_empty()).count(),
        differ,
        warm_ms,
        warm_prefill_tokens,
        warm_prompt_tokens,
        with_cross_file,
        warm_generated_tokens: generated,
        warm_drafted_tokens: drafted,
        warm_accepted_tokens: accepted,
        warm_decode_passes: passes,
        all_generated_tokens: all.0,
        all_replayed_tokens: all.1,
        all_decode_passes: all.2,
    })
}

/// `ghostline complete` in a fresh process: its text and generated token count.
fn cold_answer(exe: &Path, settings: &Path, file: &Path, workspace: Option<&Path>, line: u32, character: u32) -> Result<(String, u64), String> {
    let mut command = Command::new(exe);
    command.args(["complete", "--json", "--settings"]).arg(settings).arg(file);
    if let Some(root) = workspace {
        command.arg("--workspace").arg(root);
    }
    let out = command
        .args(["--line", &line.to_string(), "--character", &character.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!("ghostline complete failed at {line}:{character}"));
    }
    let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("ghostline complete printed no JSON: {e}"))?;
    Ok((v["text"].as_str().unwrap_or_default().to_owned(), v["generated_tokens"].as_u64().unwrap_or(0)))
}

/// Copies the folder `from` to `to` (files and folders; links are not followed).
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let kind = entry.file_type().map_err(|e| e.to_string())?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(|e| format!("cannot copy {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

pub fn print_text(r: &Report) {
    let mut sorted = r.warm_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let pick = |q: f64| sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    println!(
        "warm vs cold on {} ({}, {}; model.prefillChunk {}): {} of {} answers equal ({} not empty, {} with a cross-file section)",
        r.trace,
        r.model.display(),
        r.backend,
        r.prefill_chunk,
        r.requests - r.differ.len(),
        r.requests,
        r.answered,
        r.with_cross_file
    );
    println!(
        "warm requests (no debounce, generation ahead cancelled by each key): median {:.1} ms, p95 {:.1} ms; {} of {} prompt tokens decoded",
        pick(0.5),
        pick(0.95),
        r.warm_prefill_tokens,
        r.warm_prompt_tokens
    );
    println!(
        "warm generation (drafting on; the cold side without): {} tokens in {} decodes, {} drafted, {} confirmed",
        r.warm_generated_tokens, r.warm_decode_passes, r.warm_drafted_tokens, r.warm_accepted_tokens
    );
    println!(
        "warm answers, generated ahead included: {} tokens generated, {} of them replayed from the logits kept with the KV cache, {} decodes",
        r.all_generated_tokens, r.all_replayed_tokens, r.all_decode_passes
    );
    for d in &r.differ {
        println!(
            "  request {} at {}:{}: warm {:?} ({} tokens), cold {:?} ({} tokens)",
            d.request, d.line, d.character, d.warm, d.warm_tokens, d.cold, d.cold_tokens
        );
    }
}
