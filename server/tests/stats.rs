//! Acceptance statistics end to end over stdio: the real binary and the real test model show a
//! suggestion whose item carries the accept command; the client inserts it and runs the
//! command; part of it is edited away; after the (shortened) retention checks the database,
//! read back with `ghostline stats --json`, holds the counts, the accepted length and the
//! retained shares — and neither the document's code nor its file name.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ghostline::stats::retained_share;
use serde_json::{json, Value};

const URI: &str = "file:///project/confidential_shapes_module.py";

/// The LSP position (line, UTF-16 column) of byte `at` in `text`.
fn position(text: &str, at: usize) -> Value {
    let before = &text[..at];
    let line = before.matches('\n').count();
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..].encode_utf16().count();
    json!({"line": line, "character": col})
}

/// The byte offset of character `chars` of `text` from byte `from`.
fn byte_at(text: &str, from: usize, chars: usize) -> usize {
    from + text[from..].char_indices().nth(chars).map_or(text.len() - from, |(b, _)| b)
}

/// Replaces bytes `start..end` of `doc` with `new`, in the document and in the server.
fn edit(client: &mut ghostline::stdio_client::StdioClient, doc: &mut String, version: &mut i32, start: usize, end: usize, new: &str) {
    *version += 1;
    let range = json!({"start": position(doc, start), "end": position(doc, end)});
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": *version}, "contentChanges": [{"range": range, "text": new}]}),
    );
    doc.replace_range(start..end, new);
}

/// `ghostline stats --json --db <db>`: the one row (model, language) once `ready` says so.
fn stats_row(db: &Path, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = std::process::Command::new(binary()).args(["stats", "--json", "--since", "all", "--db"]).arg(db).output().unwrap();
        assert!(out.status.success(), "ghostline stats failed: {}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        if let Some(row) = report["rows"].as_array().and_then(|rows| rows.first()).filter(|row| ready(row)) {
            assert_eq!(report["rows"].as_array().unwrap().len(), 1, "{report}");
            return row.clone();
        }
        assert!(Instant::now() < deadline, "the statistics never showed what was expected: {report}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The suggestion at the fixture's cursor (after typing the indentation) and its item.
fn shown_suggestion(client: &mut ghostline::stdio_client::StdioClient) -> (String, usize, Value) {
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(client, URI, &text);
    let mut doc = text.clone();
    let mut version = 1;
    let line_start = text.split_inclusive('\n').take(line as usize).map(str::len).sum::<usize>();
    let cursor = line_start + col as usize;
    edit(client, &mut doc, &mut version, cursor, cursor, "        ");
    let response = inline_completion(client, URI, line, col + 8);
    let item = response["result"]["items"][0].clone();
    assert!(!inline_text(&response).trim().is_empty(), "no suggestion: {response}");
    (doc, cursor + 8, item)
}

#[test]
fn accepts_and_retention_are_recorded_without_code_or_file_names() {
    let dir = temp_dir("stats-e2e");
    let db = dir.join("stats.sqlite");
    let retention = [3.0, 8.0];
    let mut client = spawn();
    let init = initialize(
        &mut client,
        json!({}),
        json!({"model": {"path": model()}, "stats": {"path": db, "retentionSeconds": retention}}),
    );
    let commands = init["capabilities"]["executeCommandProvider"]["commands"].as_array().unwrap();
    assert!(commands.contains(&json!("ghostline.accepted")), "{commands:?}");
    wait_ready(&mut client);

    let (mut doc, cursor, first) = shown_suggestion(&mut client);
    // Asked again at the same cursor: a second suggestion shown, the one accepted.
    let again = inline_completion(&mut client, URI, position(&doc, cursor)["line"].as_u64().unwrap() as u32, position(&doc, cursor)["character"].as_u64().unwrap() as u32);
    let item = again["result"]["items"][0].clone();
    let suggestion = item["insertText"].as_str().unwrap().to_owned();
    for item in [&first, &item] {
        assert_eq!(item["command"]["command"], "ghostline.accepted", "{item}");
    }
    let id = item["command"]["arguments"][0].clone();
    assert!(id.is_u64() && id != first["command"]["arguments"][0], "ids: {id} {first}");

    // The client inserts the item and runs its command.
    let mut version = 10;
    edit(&mut client, &mut doc, &mut version, cursor, cursor, &suggestion);
    let t0 = Instant::now();
    let answer = client.request("workspace/executeCommand", json!({"command": "ghostline.accepted", "arguments": [id]}), TIMEOUT).unwrap();
    assert!(answer.get("error").is_none(), "{answer}");

    // Before the first check: a line above (the region moves), text typed right after the
    // accepted text (not part of it), and a third of the suggestion deleted from its middle.
    edit(&mut client, &mut doc, &mut version, 0, 0, "# a line above\n");
    let start = cursor + "# a line above\n".len();
    let end = start + suggestion.len();
    edit(&mut client, &mut doc, &mut version, end, end, "  # typed after it");
    let n = suggestion.chars().count();
    let (cut_from, cut_to) = (byte_at(&doc, start, n / 3), byte_at(&doc, start, 2 * n / 3));
    edit(&mut client, &mut doc, &mut version, cut_from, cut_to, "");
    let after_first: String = suggestion.chars().take(n / 3).chain(suggestion.chars().skip(2 * n / 3)).collect();
    assert_eq!(&doc[start..start + after_first.len()], after_first);
    // A bad accept (no id) is refused; the server stays up.
    let bad = client.request("workspace/executeCommand", json!({"command": "ghostline.accepted", "arguments": ["x"]}), TIMEOUT).unwrap();
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    // Between the checks: the start of what is left is replaced too.
    std::thread::sleep(Duration::from_secs_f64(retention[0] + 1.5).saturating_sub(t0.elapsed()));
    assert!(t0.elapsed() < Duration::from_secs_f64(retention[1] - 1.0), "too slow to edit between the checks");
    let k = after_first.chars().count() / 2;
    let cut_to = byte_at(&doc, start, k);
    edit(&mut client, &mut doc, &mut version, start, cut_to, "zz");
    let after_second: String = "zz".chars().chain(after_first.chars().skip(k)).collect();

    let row = stats_row(&db, |row| !row["retained_5m"].is_null());
    let (want_30s, want_5m) = (retained_share(&suggestion, &after_first), retained_share(&suggestion, &after_second));
    assert!(want_30s < 1.0 && want_5m < want_30s, "the edits must cost retention: {want_30s} {want_5m}");
    assert_eq!((row["language"].as_str(), row["shown"].as_u64(), row["accepted"].as_u64()), (Some("python"), Some(2), Some(1)), "{row}");
    assert_eq!(row["accepted_chars"].as_u64(), Some(n as u64), "{row}");
    assert!((row["retained_30s"].as_f64().unwrap() - want_30s).abs() < 1e-9, "30 s: {row}, want {want_30s}");
    assert!((row["retained_5m"].as_f64().unwrap() - want_5m).abs() < 1e-9, "5 min: {row}, want {want_5m}");
    let model_stem = model().file_stem().unwrap().to_string_lossy().into_owned();
    assert_eq!(row["model"].as_str(), Some(model_stem.as_str()));
    assert!(row["latency_p50_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{row}");
    let shares = ["share_ahead", "share_typed_ahead", "share_model"].iter().map(|k| row[k].as_f64().unwrap()).sum::<f64>();
    assert!((shares - 1.0).abs() < 1e-9, "{row}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());

    // No code and no file name anywhere in the database's files.
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    let contains = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(contains("python"), "the control: text columns are readable in the file");
    let long_line = |text: &str| text.lines().map(str::trim).filter(|l| l.len() >= 8).map(str::to_owned).collect::<Vec<_>>();
    for needle in ["confidential_shapes_module", "/project/", "Circle", "self.radius", "# a line above"]
        .into_iter()
        .map(str::to_owned)
        .chain(long_line(&doc))
        .chain(long_line(&suggestion))
    {
        assert!(!contains(&needle), "the database holds {needle:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn statistics_off_write_nothing_and_items_carry_no_command() {
    let dir = temp_dir("stats-off");
    let db = dir.join("stats.sqlite");
    let mut client = spawn();
    initialize(&mut client, json!({}), json!({"model": {"path": model()}, "stats": {"enabled": false, "path": db}}));
    wait_ready(&mut client);
    let (_, _, item) = shown_suggestion(&mut client);
    assert!(item.get("command").is_none_or(Value::is_null), "{item}");
    // An accept the server cannot know (statistics off) is answered, and nothing is written.
    let answer = client.request("workspace/executeCommand", json!({"command": "ghostline.accepted", "arguments": [1]}), TIMEOUT).unwrap();
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files written with statistics off");
    std::fs::remove_dir_all(&dir).unwrap();
}
