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

/// The route (`ahead`, `typed-ahead`, `model`) the last suggestion was answered by, as the
/// server's `ghostline/lastTimings` tells it.
fn last_route(client: &mut ghostline::stdio_client::StdioClient) -> &'static str {
    let last = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
    match last["result"]["timings"]["cache"].as_str() {
        Some("ahead") => "share_ahead",
        Some("typed-ahead") => "share_typed_ahead",
        _ => "share_model",
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
    let dir = TempDir::new("stats-e2e");
    let db = dir.join("stats.sqlite");
    // The second check comes 17 s after the first: the edit made between them (one
    // notification, sent 1.5 s after the first check) has that long even on 2 loaded cores.
    let retention = [3.0, 20.0];
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
    let mut routes = vec![last_route(&mut client)];
    // Asked again at the same cursor: a second suggestion shown, the one accepted.
    let again = inline_completion(&mut client, URI, position(&doc, cursor)["line"].as_u64().unwrap() as u32, position(&doc, cursor)["character"].as_u64().unwrap() as u32);
    routes.push(last_route(&mut client));
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
    assert!(t0.elapsed() < Duration::from_secs_f64(retention[1] - 1.0), "the edit between the checks came after the second one");
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
    // Each suggestion's route, as the server answered it, is the one recorded.
    for key in ["share_ahead", "share_typed_ahead", "share_model"] {
        let want = routes.iter().filter(|&&r| r == key).count() as f64 / routes.len() as f64;
        assert!((row[key].as_f64().unwrap() - want).abs() < 1e-9, "{key}: {row}, routes {routes:?}");
    }
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
}

/// A server whose data directory (`XDG_DATA_HOME`, the statistics' default place) is `data`.
fn spawn_with_data(data: &Path) -> ghostline::stdio_client::StdioClient {
    let env = [("GHOSTLINE_MODEL", ""), ("XDG_DATA_HOME", data.to_str().unwrap())];
    ghostline::stdio_client::StdioClient::spawn(&binary(), &["lsp"], &env, std::process::Stdio::inherit()).unwrap()
}

#[test]
fn statistics_off_write_nothing_and_items_carry_no_command() {
    let dir = TempDir::new("stats-off");
    let (db, data) = (dir.join("db").join("stats.sqlite"), dir.join("data"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    // Off with a stats.path, and off with the default place (this test's own data directory).
    for stats in [json!({"enabled": false, "path": db}), json!({"enabled": false})] {
        let mut client = spawn_with_data(&data);
        initialize(&mut client, json!({}), json!({"model": {"path": model()}, "stats": stats}));
        wait_ready(&mut client);
        let (_, _, item) = shown_suggestion(&mut client);
        assert!(item.get("command").is_none_or(Value::is_null), "{item}");
        // An accept the server cannot know (statistics off) is answered, and nothing is written.
        let answer = client.request("workspace/executeCommand", json!({"command": "ghostline.accepted", "arguments": [1]}), TIMEOUT).unwrap();
        assert!(answer.get("error").is_none(), "{answer}");
        assert!(client.shutdown(TIMEOUT).unwrap().success());
        assert_eq!(std::fs::read_dir(db.parent().unwrap()).unwrap().count(), 0, "files written with statistics off ({stats})");
        assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0, "the data directory written with statistics off ({stats})");
    }
    // The control: on, the same server writes the default place.
    let mut client = spawn_with_data(&data);
    initialize(&mut client, json!({}), json!({"model": {"path": model()}}));
    wait_ready(&mut client);
    shown_suggestion(&mut client);
    stats_row(&data.join("ghostline").join("stats.sqlite"), |row| row["shown"].as_u64() == Some(1));
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// `ghostline ARGS…` with its data directory in `data`: (exit code, stdout, stderr).
fn ghostline(args: &[&str], data: &Path) -> (i32, String, String) {
    let out = std::process::Command::new(binary()).args(args).env("XDG_DATA_HOME", data).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `doctor --no-load` with the test model and `stats.path`: (exit code, the stats check).
fn doctor_stats(db: &Path, dir: &Path) -> (i32, Value) {
    let settings = dir.join("settings.json");
    std::fs::write(&settings, json!({"stats": {"path": db}}).to_string()).unwrap();
    let model = model();
    let (code, out, err) = ghostline(&["doctor", "--no-load", "--json", "--model", model.to_str().unwrap(), "--settings", settings.to_str().unwrap()], dir);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    let check = report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "stats").unwrap().clone();
    (code, check)
}

/// A database made by hand as an earlier version left it (the table, no index): a reader that
/// "only" created what is missing would write to it.
fn old_database(path: &Path) {
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch(
        "CREATE TABLE suggestions (id INTEGER PRIMARY KEY, at_s INTEGER NOT NULL, model TEXT NOT NULL, language TEXT NOT NULL,
             route TEXT NOT NULL, latency_ms REAL NOT NULL, shown_chars INTEGER NOT NULL, accepted_chars INTEGER,
             retained_30s REAL, retained_5m REAL);
         INSERT INTO suggestions (at_s, model, language, route, latency_ms, shown_chars) VALUES (strftime('%s', 'now'), 'm', 'python', 'model', 5, 3);",
    )
    .unwrap();
}

/// `stats` and `doctor` only read: a missing file is not made, an empty one stays empty, a
/// read-only one keeps its mode and bytes and reads for a user who cannot write it; a file that
/// is not a database fails both (doctor non-zero, with what to do); a locked one is said to be.
#[test]
fn stats_and_doctor_read_only_and_fail_a_broken_database() {
    let dir = TempDir::new("stats-read");
    let missing = dir.join("missing.sqlite");
    let (code, out, _) = ghostline(&["stats", "--db", missing.to_str().unwrap()], &dir);
    assert_eq!((code, out.trim()), (0, "no statistics yet"));
    let (code, check) = doctor_stats(&missing, &dir);
    assert_eq!((code, check["level"].as_str()), (0, Some("ok")), "{check}");
    assert!(!missing.exists(), "reading made the file");

    let empty = dir.join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let (code, out, _) = ghostline(&["stats", "--json", "--db", empty.to_str().unwrap()], &dir);
    assert_eq!(code, 0, "{out}");
    doctor_stats(&empty, &dir);
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "reading gave an empty file a schema");

    use std::os::unix::fs::PermissionsExt;
    let old = dir.join("old.sqlite");
    old_database(&old);
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o444)).unwrap();
    let bytes = std::fs::read(&old).unwrap();
    let (code, out, err) = ghostline(&["stats", "--json", "--since", "all", "--db", old.to_str().unwrap()], &dir);
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["rows"][0]["shown"], 1, "{out}");
    let (code, check) = doctor_stats(&old, &dir);
    assert_ne!(check["level"], "fail", "{check}");
    assert_eq!(code, 0, "{check}");
    // A user who may read the file and not write it (root may write anything: run as nobody).
    let as_reader: Vec<&str> = if is_root() { vec!["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] } else { vec![] };
    let bin = binary();
    let mut cmd = std::process::Command::new(as_reader.first().copied().unwrap_or(bin.to_str().unwrap()));
    if !as_reader.is_empty() {
        cmd.args(&as_reader[1..]).arg(&bin);
    }
    let out = cmd.args(["stats", "--since", "all", "--db"]).arg(&old).output().unwrap();
    assert!(out.status.success(), "a read-only reader: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::metadata(&old).unwrap().permissions().mode() & 0o777, 0o444, "reading changed the mode");
    assert_eq!(std::fs::read(&old).unwrap(), bytes, "reading changed the file");

    let bad = dir.join("bad.sqlite");
    std::fs::write(&bad, "not a database, only text filling a page: ".repeat(100)).unwrap();
    let (code, _, err) = ghostline(&["stats", "--db", bad.to_str().unwrap()], &dir);
    assert!(code == 1 && err.contains("not a database") && err.contains("fix:"), "{code} {err}");
    let (code, check) = doctor_stats(&bad, &dir);
    assert_eq!((code, check["level"].as_str()), (1, Some("fail")), "{check}");
    assert!(check["fix"].as_str().is_some_and(|f| f.contains("delete it")), "{check}");

    // Locked by another connection: said, not waited on forever.
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    let holder = rusqlite::Connection::open(&old).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE; DELETE FROM suggestions WHERE id < 0;").unwrap();
    let (code, _, err) = ghostline(&["stats", "--db", old.to_str().unwrap()], &dir);
    assert!(code == 1 && err.contains("locked"), "{code} {err}");
    let (_, check) = doctor_stats(&old, &dir);
    assert_eq!(check["level"], "warn", "{check}");
    holder.execute_batch("COMMIT").unwrap();
}

fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// A statistics file that is not a database: the server says so once (a `showMessage`
/// warning naming the file and what to do), keeps completing, and leaves the file alone.
#[test]
fn a_broken_database_is_told_to_the_user() {
    let dir = TempDir::new("stats-broken");
    let db = dir.join("stats.sqlite");
    let junk = "not a database, only text filling a page: ".repeat(100);
    std::fs::write(&db, &junk).unwrap();
    let mut client = spawn_with_data(&dir);
    initialize(&mut client, json!({}), json!({"model": {"path": model()}, "stats": {"path": db}}));
    wait_ready(&mut client);
    shown_suggestion(&mut client);
    let told = client
        .wait_notification("window/showMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("statistics are off")))
        .unwrap_or_else(|e| panic!("not told: {e}; {:?}", log_messages(&client)));
    let message = told["params"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains(db.to_str().unwrap()) && message.contains("delete it"), "{told}");
    assert_eq!(told["params"]["type"], 2, "a warning: {told}");
    // Asked again: answered, and not told twice.
    let response = inline_completion(&mut client, URI, 0, 0);
    assert!(response.get("error").is_none(), "{response}");
    let told_again = log_messages(&client).iter().filter(|m| m.contains("statistics are off")).count();
    assert_eq!(told_again, 1, "{:?}", log_messages(&client));
    assert!(client.shutdown(TIMEOUT).unwrap().success());
    assert_eq!(std::fs::read_to_string(&db).unwrap(), junk, "the broken file was changed");
}

/// Two servers write one database while a third connection holds `BEGIN EXCLUSIVE` over their
/// first suggestions: once it commits, every suggestion both showed is recorded.
#[test]
fn two_servers_share_one_database_through_a_lock() {
    let dir = TempDir::new("stats-shared");
    let db = dir.join("stats.sqlite");
    let mut servers: Vec<_> = (0..2)
        .map(|_| {
            let mut client = spawn_with_data(&dir);
            initialize(&mut client, json!({}), json!({"model": {"path": model()}, "stats": {"path": db}}));
            client
        })
        .collect();
    for client in &mut servers {
        wait_ready(client);
    }
    // The database exists (an earlier session made it); another program locks it.
    drop(ghostline::stats::Stats::open(&db).unwrap());
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let mut places = Vec::new();
    for client in &mut servers {
        let (doc, cursor, _) = shown_suggestion(client);
        places.push(position(&doc, cursor));
    }
    // Held past the writers' busy timeout many times over, and past rusqlite's default 5 s.
    std::thread::sleep(Duration::from_secs(8));
    holder.execute_batch("COMMIT").unwrap();
    drop(holder);
    // Every suggestion shown by either server.
    let mut want = servers.len() as u64;
    for (client, at) in servers.iter_mut().zip(&places) {
        let again = inline_completion(client, URI, at["line"].as_u64().unwrap() as u32, at["character"].as_u64().unwrap() as u32);
        want += u64::from(!inline_text(&again).is_empty());
    }
    stats_row(&db, |row| row["shown"].as_u64() == Some(want));
    for client in servers {
        let messages = log_messages(&client);
        assert!(!messages.iter().any(|m| m.contains("statistics")), "nothing lost, nothing to tell: {messages:?}");
        assert!(client.shutdown(TIMEOUT).unwrap().success());
    }
}

/// Out-of-range numbers and durations on the command line: a usage error that says so.
#[test]
fn out_of_range_numbers_are_usage_errors() {
    let dir = TempDir::new("stats-range");
    for args in [
        &["stats", "--since", "1e18d"][..],
        &["stats", "--since", "18446744073709551615s"],
        &["doctor", "--no-load", "--memory-budget-mb", "18446744073709551615"],
        &["models", "--memory-budget-mb", "18446744073709551615"],
        &["complete", "x.py", "--line", "0", "--character", "0", "--threads", "4294967295"],
        &["bench", "--open-pause", "18446744073709551615"],
    ] {
        let (code, _, err) = ghostline(args, &dir);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("panicked") && (err.contains("out of range") || err.contains("is not in")), "{args:?}: {err}");
    }
}
