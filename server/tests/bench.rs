//! `ghostline bench` on a tiny trace: the structure and sanity of its JSON output (no timing
//! thresholds: timings are measured, never asserted), and the llama-server peer replaying the
//! same requests.

mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

/// The aligned prefill chunk the tiny trace runs with: its prompts (17–20 tokens) are shorter
/// than the default chunk (32), which would keep no cached prefix at all.
const PREFILL_CHUNK: &str = "4";

fn bench(extra: &[&str]) -> Value {
    let trace = fixture("bench-test/tiny.json");
    let out = Command::new(binary())
        .args(["bench", "--runs", "1", "--json", "--prefill-chunk", PREFILL_CHUNK, "--trace"])
        .arg(&trace)
        .arg("--model")
        .arg(model())
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn positive(v: &Value, what: &str) -> f64 {
    let x = v.as_f64().unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x > 0.0 && x.is_finite(), "{what} = {x}");
    x
}

fn trace_events() -> Vec<Value> {
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(fixture("bench-test/tiny.json")).unwrap()).unwrap();
    trace["events"].as_array().unwrap().clone()
}

/// The requests of a run: the trace's, or with `--no-debounce` one per key plus the first
/// request, which no key precedes.
fn requests_in_trace(no_debounce: bool) -> usize {
    let events = trace_events();
    let keys = events.iter().filter(|e| e["key"].is_string()).count();
    let asked = events.iter().filter(|e| e["complete"] == true).count();
    if no_debounce { keys + 1 } else { asked }
}

/// Checks ghostline's side of a report; returns the trace report.
fn check_ghostline(report: &Value, no_debounce: bool) -> Value {
    let c = &report["conditions"];
    positive(&c["threads"], "threads");
    assert_eq!(c["context_size"], 4096);
    assert_eq!(c["batch_size"], 512);
    assert!(c["machine"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(c["prompt_format"].as_str().is_some_and(|f| f.contains("prefix-only")), "{}", c["prompt_format"]);
    assert!(c["clock"].as_str().is_some_and(|k| k.starts_with("from the key")), "{}", c["clock"]);
    assert_eq!(c["debounce"], !no_debounce);
    assert!(c["ghostline_kernels"].as_str().is_some_and(|k| k.starts_with("CPU: ") && k.contains("AVX")), "{}", c["ghostline_kernels"]);

    let traces = report["traces"].as_array().unwrap();
    assert_eq!(traces.len(), 1);
    let t = &traces[0];
    assert_eq!(t["name"], "tiny");
    let requests = requests_in_trace(no_debounce);
    assert_eq!(t["requests"], requests);
    let samples = t["samples"].as_array().unwrap();
    assert_eq!(samples.len(), requests, "one sample per completion request");
    // The gap of each trace request after its last key: the debounce the replay must keep.
    let gaps: Vec<f64> = trace_events()
        .iter()
        .filter(|e| e["complete"] == true)
        .map(|e| e["gap_ms"].as_f64().unwrap_or(0.0))
        .collect();
    for (i, s) in samples.iter().enumerate() {
        let (key, request, debounce) = (positive(&s["key_ms"], "key_ms"), positive(&s["request_ms"], "request_ms"), s["debounce_ms"].as_f64().unwrap());
        assert!((key - debounce - request).abs() < 1.0, "from the key = the debounce + the request: {s}");
        if i == 0 {
            assert_eq!(debounce, 0.0, "no key before the first request: the clock starts at the request: {s}");
        } else if no_debounce {
            assert!(debounce < 50.0, "a request right after each key: {s}");
            assert_eq!(s["keys"], 1, "{s}");
        } else {
            assert!(debounce >= gaps[i] - 1.0, "the clock starts at the key, {} ms before the request: {s}", gaps[i]);
        }
        let f = &s["server"];
        if f.is_null() {
            continue;
        }
        let prompt = positive(&f["prompt_tokens"], "prompt_tokens") as u64;
        let (reused, prefill) = (f["reused_tokens"].as_u64().unwrap(), f["prefill_tokens"].as_u64().unwrap());
        assert_eq!(reused + prefill, prompt, "{s}");
        positive(&f["ttft_ms"], "ttft_ms");
        // The first request on a fresh server is cold; every later generation is served from
        // the KV cache: it reuses most of its prompt (whole aligned chunks of it) and re-decodes
        // only the changed tail and the rest of its chunk.
        if i > 0 && f["cache"] != "prompt" {
            assert_eq!(reused % PREFILL_CHUNK.parse::<u64>().unwrap(), 0, "the kept prefix is whole aligned chunks: {s}");
            assert!(prefill * 2 < prompt, "a later request re-decodes less than half its prompt (KV cache kept): {s}");
        }
    }
    assert!(!samples[0]["server"].is_null(), "the cold request made a model call");

    let g = &t["ghostline"];
    let p50 = positive(&g["key_ms"]["p50"], "key-to-suggestion p50");
    assert!(g["key_ms"]["p95"].as_f64().unwrap() >= p50);
    positive(&g["request_ms"]["p50"], "request-to-answer p50");
    positive(&g["cold_ttft_ms"]["p50"], "cold TTFT");
    positive(&g["cold_prompt_tokens"]["p50"], "cold prompt tokens");
    positive(&g["prefill_tokens_per_s"]["p50"], "prefill tokens/s");
    positive(&g["peak_rss_mb"], "peak RSS");
    positive(&g["load_ms"]["p50"], "load");
    let prompt = positive(&t["prompt_tokens"]["p50"], "prompt tokens");
    let redecoded = g["redecoded_tokens"]["p50"].as_f64().expect("re-decoded tokens");
    assert!(redecoded < prompt, "re-decoded per keystroke {redecoded} < prompt {prompt}: the KV cache is kept");
    let decoding = samples.iter().any(|s| s["server"]["generated_tokens"].as_u64().unwrap_or(0) >= 4);
    if decoding {
        positive(&g["decode_tokens_per_s"]["p50"], "decode tokens/s");
        positive(&t["floor"]["ms"], "floor");
    }
    let cached = samples.iter().filter(|s| s["server"]["cache"] == "prompt").count();
    assert_eq!(t["cached"], cached, "suggestion-cache hits are counted apart");
    let generated = samples.iter().filter(|s| !s["server"].is_null() && s["server"]["cache"] != "prompt").count();
    assert_eq!(g["key_ms"]["n"], generated, "the latency figures are over the generated answers only");
    let targets = t["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 5);
    t.clone()
}

#[test]
fn bench_reports_every_figure_on_a_tiny_trace() {
    let report = bench(&[]);
    let t = check_ghostline(&report, false);
    assert!(t["peer"].is_null() && t["ratios"].is_null());
    assert!(report["conditions"]["peer_kernels"].is_null());
    assert_eq!(report["conditions"]["prefill_chunk"], 4, "the setting reached the server's settings and the report");
    // Without a peer, the targets that compare with llama.cpp are not measured; the floor is
    // ghostline's own.
    let unmeasured = t["targets"].as_array().unwrap().iter().filter(|x| x["met"].is_null()).count();
    assert_eq!(unmeasured, 4);
    if !t["floor"].is_null() {
        assert_eq!(t["floor"]["from"], "ghostline");
    }
}

/// `--no-debounce`: a request right after every key, timed from that key.
#[test]
fn bench_without_a_debounce_asks_after_every_key() {
    let report = bench(&["--no-debounce"]);
    check_ghostline(&report, true);
}

/// The peer: llama.cpp's llama-server (scripts/llama-server.sh builds it; scripts/test.sh
/// provides it as GHOSTLINE_LLAMA_SERVER), fed the very prompt tokens ghostline decoded.
#[test]
fn bench_replays_the_same_requests_against_llama_server() {
    let bin = std::env::var("GHOSTLINE_LLAMA_SERVER")
        .expect("GHOSTLINE_LLAMA_SERVER must name llama-server: run scripts/test.sh (scripts/llama-server.sh builds it)");
    let report = bench(&["--peer", "llama-server", "--peer-bin", &bin]);
    let t = check_ghostline(&report, false);
    let c = &report["conditions"];
    assert!(c["peer"].as_str().is_some_and(|p| p.starts_with("llama-server")), "{}", c["peer"]);
    assert!(c["peer_endpoint"].as_str().is_some_and(|e| e.contains("/completion")), "{}", c["peer_endpoint"]);
    assert!(c["peer_kernels"].as_str().is_some_and(|k| k.contains("CPU: ")), "the peer's kernels, from its log: {}", c["peer_kernels"]);
    assert!(c["peer_got"].as_str().is_some_and(|g| g.contains("cache_prompt")), "{}", c["peer_got"]);
    for s in t["samples"].as_array().unwrap() {
        let (mine, theirs) = (&s["server"], &s["peer"]);
        if mine.is_null() || mine["cache"] == "prompt" {
            assert!(theirs.is_null(), "a request with no generation is not paired with one on the peer: {s}");
            continue;
        }
        assert!(!theirs.is_null(), "every request with a model call is replayed: {s}");
        assert_eq!(theirs["prompt_tokens"], mine["prompt_tokens"], "the same prompt on both sides: {s}");
        let n = mine["generated_tokens"].as_u64().unwrap().max(1);
        assert_eq!(theirs["generated_tokens"].as_u64().unwrap(), n, "the same generation length: {s}");
        let (key, request) = (positive(&theirs["key_ms"], "peer key_ms"), positive(&theirs["request_ms"], "peer request_ms"));
        let debounce = s["debounce_ms"].as_f64().unwrap();
        assert!((key - request - debounce).abs() < 1e-6, "the peer carries the same key-to-request time: {s}");
    }
    let p = &t["peer"];
    positive(&p["key_ms"]["p50"], "peer key-to-suggestion p50");
    positive(&p["cold_ttft_ms"]["p50"], "peer cold TTFT");
    positive(&p["peak_rss_mb"], "peer peak RSS");
    positive(&t["ratios"]["key_p50"], "key-to-suggestion ratio");
    positive(&t["ratios"]["request_p50"], "request-to-answer ratio");
    positive(&t["ratios"]["cold_ttft"], "cold TTFT ratio");
    if !t["floor"].is_null() {
        assert_eq!(t["floor"]["from"], "llama-server", "the floor comes from the peer's decode rate");
    }
    let measured = t["targets"].as_array().unwrap().iter().filter(|x| !x["met"].is_null()).count();
    assert!(measured >= 4, "{}", t["targets"]);
}

/// `--cold-sizes`: cold prompts of stated sizes on the model thread, each sample with no KV entry
/// to reuse, a fixed number of decoded tokens, and llama-server given the same prompt ids.
#[test]
fn cold_sizes_time_prompts_of_each_size_against_llama_server() {
    let bin = std::env::var("GHOSTLINE_LLAMA_SERVER")
        .expect("GHOSTLINE_LLAMA_SERVER must name llama-server: run scripts/test.sh (scripts/llama-server.sh builds it)");
    let root = fixture("").parent().unwrap().to_path_buf();
    let out = Command::new(binary())
        .current_dir(&root)
        .args(["bench", "--json", "--cold-sizes", "64,160", "--runs", "1", "--threads", "2", "--model"])
        .arg(model())
        .args(["--peer", "llama-server", "--peer-bin", &bin])
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["backend"], "CPU");
    let sizes = report["sizes"].as_array().unwrap();
    assert_eq!(sizes.iter().map(|s| s["size"].as_u64().unwrap()).collect::<Vec<_>>(), [64, 160]);
    for s in sizes {
        let size = s["size"].as_u64().unwrap();
        let samples = s["samples"].as_array().unwrap();
        assert_eq!(samples.len(), 1, "the discarded first sample is not reported: {s}");
        for x in samples {
            let prompt = x["prompt_tokens"].as_u64().unwrap();
            assert!(prompt <= size && prompt >= size / 2, "prompt of {prompt} tokens for size {size}");
            assert!(x["reused_tokens"].as_u64().unwrap() <= 8, "a cold prompt reuses nothing but BOS: {x}");
            assert_eq!(x["generated_tokens"], 32, "the text never stops a sample: {x}");
            positive(&x["ttft_ms"], "ttft_ms");
            positive(&x["peer_prompt_ms"], "peer_prompt_ms");
            positive(&x["peer_decode_tokens_per_s"], "peer decode rate");
        }
        positive(&s["floor_ms"], "floor");
        positive(&s["cold_ttft_ratio"], "cold TTFT ratio");
        positive(&s["decode_ratio"], "decode ratio");
    }
}
