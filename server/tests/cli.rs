//! `ghostline complete`: the engine without LSP, on the real test model; and on the FIM test model.

mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

fn complete_json(model: &std::path::Path, file: &std::path::Path, line: u32, character: u32) -> Value {
    let out = Command::new(binary())
        .args(["complete", file.to_str().unwrap(), "--line", &line.to_string(), "--character", &character.to_string(), "--json"])
        .arg("--model")
        .arg(model)
        .env_remove("GHOSTLINE_MODEL")
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn fixture_file() -> (tempfile_path::TempFile, u32, u32) {
    let (text, line, col) = fixture_with_cursor("demo/stats.py");
    (tempfile_path::TempFile::new("stats.py", &text), line, col)
}

/// A file in the temp folder, removed on drop.
mod tempfile_path {
    pub struct TempFile(pub std::path::PathBuf);
    impl TempFile {
        pub fn new(name: &str, text: &str) -> Self {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("ghostline-cli-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            TempFile(path)
        }
    }
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
        }
    }
}

#[test]
fn complete_json_has_the_documented_fields_and_is_deterministic() {
    let (file, line, _) = fixture_file();
    // After "    return math." on the cursor line: a mid-expression completion.
    let text = std::fs::read_to_string(&file.0).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let typed = "    return math.sqrt(";
    lines[line as usize] = typed;
    std::fs::write(&file.0, lines.join("\n")).unwrap();
    let a = complete_json(&model(), &file.0, line, typed.len() as u32);
    for key in ["text", "prompt_tokens", "ttft_ms", "decode_tokens_per_s"] {
        assert!(a.get(key).is_some(), "missing {key}: {a}");
    }
    assert!(a["prompt_tokens"].as_u64().unwrap() > 20, "{a}");
    assert!(a["ttft_ms"].as_f64().unwrap() > 0.0, "{a}");
    assert!(!a["text"].as_str().unwrap().is_empty(), "{a}");
    assert_eq!(a["format"], "prefix-only (no FIM tokens)");
    let b = complete_json(&model(), &file.0, line, typed.len() as u32);
    assert_eq!(a["text"], b["text"], "same file, same cursor, same suggestion");
}

#[test]
fn complete_reports_a_bad_model_and_fails() {
    let (file, line, col) = fixture_file();
    let out = Command::new(binary())
        .args(["complete", file.0.to_str().unwrap(), "--line", &line.to_string(), "--character", &col.to_string()])
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
    let (file, line, col) = fixture_file();
    let plain = complete_json(&model(), &file.0, line, col);
    let fim = complete_json(&fim_model(), &file.0, line, col);
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

/// `ghostline eval` cuts holes in real files and reports both strategies (structure only: the
/// quality figures come from full runs, see the README).
#[test]
fn eval_reports_scope_and_window_strategies() {
    let out = Command::new(binary())
        .args(["eval", "--holes", "2", "--language", "python", "--json", "--source"])
        .arg(fixture("e2e"))
        .arg("--model")
        .arg(model())
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = report["summary"].as_array().unwrap();
    let strategies: Vec<&str> = summary.iter().map(|s| s["strategy"].as_str().unwrap()).collect();
    assert_eq!(strategies, ["scope", "window256"], "{report}");
    for s in summary {
        assert_eq!(s["holes"], 2, "{s}");
        assert!(s["prompt_tokens_mean"].as_f64().unwrap() > 0.0, "{s}");
        assert!((0.0..=1.0).contains(&s["edit_similarity"].as_f64().unwrap()), "{s}");
    }
    let holes = report["holes"].as_array().unwrap();
    assert!(holes.iter().all(|h| !h["target"].as_str().unwrap().is_empty()), "{report}");
}
