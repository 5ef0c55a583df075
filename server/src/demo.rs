//! `ghostline demo`: the main job, end to end. Starts the real language server as a child
//! process, opens a fixture file, types a scripted session into it key by key (`didChange`),
//! asks for ghost text after each burst (`textDocument/inlineCompletion`) and prints each
//! suggestion with its latency as the editor sees it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;

use crate::config;
use crate::typing;

/// A typing script: a fixture file with a cursor marker, and what is typed at the cursor.
#[derive(Debug, Deserialize)]
pub struct Script {
    pub file: String,
    pub language_id: String,
    pub cursor_marker: String,
    pub steps: Vec<String>,
}

pub use crate::typing::Cursor;

fn find_script(explicit: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return Ok(p);
    }
    let candidates = [
        PathBuf::from("fixtures/demo/typing.json"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/demo/typing.json"),
    ];
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| "cannot find fixtures/demo/typing.json; run from the repository root or pass --script".into())
}

pub fn run(model: Option<PathBuf>, script: Option<PathBuf>) -> Result<(), String> {
    let script_path = find_script(script)?;
    let script: Script = serde_json::from_str(
        &std::fs::read_to_string(&script_path).map_err(|e| format!("cannot read {}: {e}", script_path.display()))?,
    )
    .map_err(|e| format!("bad script {}: {e}", script_path.display()))?;
    let file = script_path.parent().unwrap_or(Path::new(".")).join(&script.file);
    let source = std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let at = source
        .find(&script.cursor_marker)
        .ok_or_else(|| format!("{} has no cursor marker {}", file.display(), script.cursor_marker))?;
    let text = source.replacen(&script.cursor_marker, "", 1);
    let model = model
        .or_else(config::env_model)
        .ok_or_else(|| format!("no model: pass --model or set {}", config::MODEL_ENV))?;

    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let timeout = Duration::from_secs(120);
    let session = typing::start(&exe, json!({"model": {"path": model}}), Stdio::inherit(), timeout)?;
    let mut client = session.client;
    println!("ghostline demo: {} loaded in {:.0} ms", model.display(), session.load_ms);

    let uri = typing::file_uri(&file);
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": script.language_id, "version": 1, "text": text}}),
    );
    let mut version = 1;
    let mut cursor = Cursor::at(&text, at);
    let mut latencies = Vec::new();
    for (i, step) in script.steps.iter().enumerate() {
        for ch in step.chars() {
            cursor.type_char(&mut client, &uri, &mut version, ch);
        }
        let started = Instant::now();
        let response = client.request(
            "textDocument/inlineCompletion",
            json!({
                "textDocument": {"uri": uri},
                "position": cursor.json(),
                "context": {"triggerKind": 2}
            }),
            timeout,
        )?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        latencies.push(ms);
        let suggestion = response["result"]["items"][0]["insertText"].as_str().unwrap_or("").to_owned();
        println!("\n[{}] typed {:?}  ({ms:.0} ms)", i + 1, step);
        println!("    ghost text: {suggestion:?}");
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "\n{} suggestions; latency median {:.0} ms, max {:.0} ms (keystroke-to-suggestion, this machine)",
        latencies.len(),
        latencies[latencies.len() / 2],
        latencies.last().copied().unwrap_or(0.0)
    );
    client.shutdown(timeout).map(|_| ())
}
