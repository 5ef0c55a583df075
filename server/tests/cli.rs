//! `ghostline complete`: the engine without LSP, on the real test model; and on the FIM test model.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use serde_json::Value;

fn complete_json(model: &std::path::Path, file: &std::path::Path, line: u32, character: u32) -> Value {
    complete_with(file, line, character, &["--model".as_ref(), model.as_os_str()])
}

/// `ghostline complete --json` at `line`:`character` of `file`, with `extra` arguments.
fn complete_with(file: &std::path::Path, line: u32, character: u32, extra: &[&std::ffi::OsStr]) -> Value {
    let out = Command::new(binary())
        .args(["complete", file.to_str().unwrap(), "--line", &line.to_string(), "--character", &character.to_string(), "--json"])
        .args(extra)
        .env_remove("GHOSTLINE_MODEL")
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// `demo/stats.py` without its cursor marker, in a temporary folder (kept while the guard
/// lives): the guard, the file, and the cursor's line and column.
fn fixture_file() -> (TempDir, PathBuf, u32, u32) {
    let (text, line, col) = fixture_with_cursor("demo/stats.py");
    let dir = TempDir::new("cli");
    let path = dir.join("stats.py");
    std::fs::write(&path, text).unwrap();
    (dir, path, line, col)
}

#[test]
fn complete_json_has_the_documented_fields_and_is_deterministic() {
    let (_dir, file, line, _) = fixture_file();
    // After "    return math." on the cursor line: a mid-expression completion.
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let typed = "    return math.sqrt(";
    lines[line as usize] = typed;
    std::fs::write(&file, lines.join("\n")).unwrap();
    let a = complete_json(&model(), &file, line, typed.len() as u32);
    for key in ["text", "prompt_tokens", "ttft_ms", "decode_tokens_per_s"] {
        assert!(a.get(key).is_some(), "missing {key}: {a}");
    }
    assert!(a["prompt_tokens"].as_u64().unwrap() > 20, "{a}");
    assert!(a["ttft_ms"].as_f64().unwrap() > 0.0, "{a}");
    assert!(!a["text"].as_str().unwrap().is_empty(), "{a}");
    assert_eq!(a["format"], "prefix-only (no FIM tokens)");
    let b = complete_json(&model(), &file, line, typed.len() as u32);
    assert_eq!(a["text"], b["text"], "same file, same cursor, same suggestion");
}

/// `complete --json` with settings from a file.
fn complete_with_settings(file: &std::path::Path, line: u32, character: u32, settings: Value) -> Value {
    let dir = TempDir::new("cli-settings");
    let path = dir.join("settings.json");
    std::fs::write(&path, settings.to_string()).unwrap();
    complete_with(file, line, character, &["--settings".as_ref(), path.as_os_str()])
}

/// With other processes busy on every core, the model thread decodes with one thread instead of
/// `model.threads` (two threads that wait for each other at llama.cpp's barriers, each sharing a
/// core with a busy process, are several times slower) — and the suggestion is the one two
/// threads give (`model.adaptiveThreads: false`): a position's result does not depend on the
/// thread count. Drafting is off on one side and on on the other: the same text again.
#[test]
fn a_busy_machine_gets_fewer_threads_and_the_same_suggestion() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (_dir, file, line, col) = fixture_file();
    let model = model();
    let fixed = complete_with_settings(&file, line, col, serde_json::json!({"model": {"path": model, "threads": 2, "adaptiveThreads": false, "draft": false}}));
    assert_eq!((fixed["threads"].as_u64(), fixed["max_threads"].as_u64()), (Some(2), Some(2)), "{fixed}");
    // One busy thread per CPU, in this (other) process, for as long as the next run takes.
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..std::thread::available_parallelism().map_or(2, |n| n.get()).max(2))
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let loaded = complete_with_settings(&file, line, col, serde_json::json!({"model": {"path": model, "threads": 2}}));
    stop.store(true, Ordering::Relaxed);
    busy.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!((loaded["threads"].as_u64(), loaded["max_threads"].as_u64()), (Some(1), Some(2)), "{loaded}");
    assert!(!fixed["text"].as_str().unwrap().is_empty(), "{fixed}");
    assert_eq!(loaded["text"], fixed["text"], "one thread and two give one suggestion");
    assert_eq!(loaded["generated_tokens"], fixed["generated_tokens"]);
    assert_eq!(fixed["drafted_tokens"], 0, "{fixed}");
}

#[test]
fn complete_reports_a_bad_model_and_fails() {
    let (_dir, file, line, col) = fixture_file();
    let out = Command::new(binary())
        .args(["complete", file.to_str().unwrap(), "--line", &line.to_string(), "--character", &col.to_string()])
        .args(["--model", "/no/such/model.gguf"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("model file not found: /no/such/model.gguf"), "{stderr}");
}

/// The FIM test model (StarCoder's markers, trained on ghostline's prompt) gets the FIM prompt:
/// its prompt carries the suffix between the markers, and it fills the middle. At this cursor (a
/// blank line at the end of `variance`, `def main(): ...` below) it writes `    return m`
/// (measured): the body's last line, not the suffix's code again.
#[test]
fn the_fim_test_model_gets_the_fim_prompt_and_fills_the_middle() {
    let (_dir, file, line, col) = fixture_file();
    let plain = complete_json(&model(), &file, line, col);
    let fim = complete_json(&fim_model(), &file, line, col);
    assert_eq!(fim["format"], "FIM StarCoder (PSM)", "{fim}");
    let (p, f) = (plain["prompt_tokens"].as_u64().unwrap(), fim["prompt_tokens"].as_u64().unwrap());
    // prefix-only: the prefix; FIM: <fim_prefix> prefix <fim_suffix> suffix <fim_middle> — the
    // suffix (the lines below the cursor, here "def main(): …") adds well over the three markers.
    assert!(f > p + 3 + 10, "FIM prompt {f} tokens vs prefix-only {p}");
    // Each `complete` is one process and one request: the whole FIM prompt was decoded (nothing
    // to reuse) and generation ran on it. (KV-cache reuse between requests is checked in
    // tests/model_cache.rs.)
    assert_eq!(fim["reused_tokens"], 0, "{fim}");
    assert_eq!(fim["prefill_tokens"], fim["prompt_tokens"], "{fim}");
    let text = fim["text"].as_str().unwrap();
    assert!(text.starts_with("    return ") && !text.contains('\n'), "not one line of variance's body: {fim}");
    for suffix_code in ["def main", "data", "print("] {
        assert!(!text.contains(suffix_code), "the suggestion repeats the suffix's {suffix_code:?}: {fim}");
    }
}

/// `ghostline eval` cuts holes in real files and reports the four strategies (ghostline's scope
/// prompt and the naive window, each with the model's FIM markers and prefix-only) on the FIM test
/// model, where the two layouts really differ (structure only: the quality figures come from full
/// runs, see the README).
#[test]
fn eval_reports_scope_and_window_strategies() {
    let out = Command::new(binary())
        .args(["eval", "--holes", "2", "--language", "python", "--json", "--source"])
        .arg(fixture("e2e"))
        .arg("--model")
        .arg(fim_model())
        .env_remove("GHOSTLINE_MODEL")
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = report["summary"].as_array().unwrap();
    let strategies: Vec<&str> = summary.iter().map(|s| s["strategy"].as_str().unwrap()).collect();
    assert_eq!(strategies, ["scope fim", "scope prefix-only", "window256 fim", "window256 prefix-only"], "{report}");
    for s in summary {
        assert_eq!(s["holes"], 2, "{s}");
        assert!(s["prompt_tokens_mean"].as_f64().unwrap() > 0.0, "{s}");
        assert!((0.0..=1.0).contains(&s["edit_similarity"].as_f64().unwrap()), "{s}");
    }
    // With FIM the prompt carries the text after the cursor and the markers: more tokens than the
    // same context prefix-only, for every hole of the fixture (each has code below it).
    let tokens = |strategy: &str| -> Vec<u64> {
        let holes = report["holes"].as_array().unwrap();
        holes.iter().filter(|h| h["strategy"] == strategy).map(|h| h["prompt_tokens"].as_u64().unwrap()).collect()
    };
    for (fim, plain) in [("scope fim", "scope prefix-only"), ("window256 fim", "window256 prefix-only")] {
        let (f, p) = (tokens(fim), tokens(plain));
        assert_eq!(f.len(), 2, "{report}");
        assert!(f.iter().zip(&p).all(|(f, p)| f > p), "{fim} {f:?} vs {plain} {p:?}: {report}");
    }
    let holes = report["holes"].as_array().unwrap();
    assert!(holes.iter().all(|h| !h["target"].as_str().unwrap().is_empty()), "{report}");
}
