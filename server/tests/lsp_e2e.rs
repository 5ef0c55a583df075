//! End to end over stdio: the real binary, the real test model, driven as editors drive it.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const URI: &str = "file:///project/shapes.py";

/// VS Code: UTF-16 only, ghost text through `textDocument/inlineCompletion`, `$/progress`.
#[test]
fn vscode_style_inline_completion_is_non_empty_and_deterministic() {
    let (mut client, init) = ready_server(json!({"window": {"workDoneProgress": true}}));
    assert_eq!(init["capabilities"]["positionEncoding"], "utf-16");
    assert!(init["capabilities"]["inlineCompletionProvider"].as_bool().unwrap_or(false) || init["capabilities"]["inlineCompletionProvider"].is_object());
    assert_eq!(init["capabilities"]["textDocumentSync"]["change"], 2, "incremental sync");

    // The model load was reported as $/progress: begin … end.
    let kinds = progress_kinds(&client);
    assert_eq!(kinds.first().map(String::as_str), Some("begin"), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("end"), "{kinds:?}");

    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, URI, &text);
    // The cursor's line is empty: type the indentation like a person, then ask.
    for (i, ch) in "        ".chars().enumerate() {
        let at = json!({"line": line, "character": col + i as u32});
        client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": 2 + i}, "contentChanges": [{"range": {"start": at, "end": at}, "text": ch.to_string()}]}),
        );
    }
    let first = inline_completion(&mut client, URI, line, col + 8);
    let suggestion = inline_text(&first);
    assert!(!suggestion.trim().is_empty(), "empty suggestion: {first}");
    let range = &first["result"]["items"][0]["range"];
    assert_eq!(range["start"], json!({"line": line, "character": col + 8}));
    assert!(!suggestion.starts_with(' ') && !suggestion.starts_with('\n'), "typed indentation repeated: {suggestion:?}");

    // Same document, same cursor → byte-identical suggestion, again and again.
    for _ in 0..2 {
        assert_eq!(inline_text(&inline_completion(&mut client, URI, line, col + 8)), suggestion);
    }
    let status = client.shutdown(TIMEOUT).unwrap();
    assert!(status.success());
}

/// Helix: offers UTF-8 first, has no ghost text, filters completion items by the typed word.
#[test]
fn helix_style_completion_with_utf8_and_non_ascii_text() {
    // Helix's offered encodings and completion capabilities (helix-lsp/src/client.rs).
    let capabilities = json!({
        "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]},
        "textDocument": {"completion": {"completionItem": {"snippetSupport": true, "insertReplaceSupport": true}}},
        "window": {"workDoneProgress": true}
    });
    let (mut client, init) = ready_server(capabilities);
    assert_eq!(init["capabilities"]["positionEncoding"], "utf-8");

    let text = "import math\n\nlabel = \"🦀 naïve\"\nradius_total = 0.0\nfor r in range(3):\n    print(label, radius_t\n";
    open(&mut client, URI, text);
    // Type more non-ASCII text before the cursor on its line, in UTF-8 positions.
    let line = 5;
    let before = "    print(label, radius_t";
    let col = before.len() as u32;
    let at = json!({"line": line, "character": 10});
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"range": {"start": at, "end": at}, "text": "\"é🦀\", "}]}),
    );
    let col = col + "\"é🦀\", ".len() as u32;
    let response = completion(&mut client, URI, line, col);
    assert!(response.get("error").is_none(), "{response}");
    let items = response["result"]["items"].as_array().expect("a completion list");
    assert_eq!(response["result"]["isIncomplete"], true);
    let item = &items[0];
    let edit = &item["textEdit"];
    // The word before the cursor is replaced by itself plus the suggestion, so Helix's fuzzy
    // filter (which matches filterText against that word) keeps the item.
    let new_text = edit["newText"].as_str().unwrap();
    assert!(new_text.starts_with("radius_t") && new_text.len() > "radius_t".len(), "{item}");
    assert!(item["filterText"].as_str().unwrap().starts_with("radius_t"), "{item}");
    let word_start = col - "radius_t".len() as u32;
    assert_eq!(edit["range"]["start"], json!({"line": line, "character": word_start}));
    assert_eq!(edit["range"]["end"], json!({"line": line, "character": col}));
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// UTF-16 positions across emoji (surrogate pairs): the server's text must match ours exactly,
/// which the word it finds before the cursor shows.
#[test]
fn utf16_edits_with_emoji_keep_positions_right() {
    let (mut client, _) = ready_server(json!({}));
    let text = "s = \"🦀🦀\"\ncount_total = 1\n";
    open(&mut client, URI, text);
    // Insert after the two crabs (UTF-16 column 6), then type a new line that uses them.
    let at = json!({"line": 0, "character": 7});
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"range": {"start": at, "end": at}, "text": " + \"👩‍💻\""}]}),
    );
    let end = json!({"line": 2, "character": 0});
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 3}, "contentChanges": [{"range": {"start": end, "end": end}, "text": "t = \"😀\" + s; print(count_to"}]}),
    );
    let col = "t = \"😀\" + s; print(count_to".encode_utf16().count() as u32;
    let response = completion(&mut client, URI, 2, col);
    let item = &response["result"]["items"][0];
    assert!(item["textEdit"]["newText"].as_str().unwrap_or("").starts_with("count_to"), "{response}");
    assert_eq!(item["textEdit"]["range"]["start"]["character"], col - 8);
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// `$/cancelRequest` is answered with `RequestCancelled` (the request, sent with it, cannot
/// have finished first), its model work stops before the end (the next request at the same
/// place is not answered from the suggestion cache, where a finished generation would be),
/// and the server keeps serving.
#[test]
fn cancel_request_is_answered() {
    let (mut client, _) = ready_server(json!({}));
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, URI, &text);
    let id = client.send_request(
        "textDocument/inlineCompletion",
        json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": col}, "context": {"triggerKind": 1}}),
    );
    client.notify("$/cancelRequest", json!({"id": id}));
    let response = client.wait_response(id, TIMEOUT).unwrap();
    assert_eq!(response["error"]["code"], -32800, "{response}");
    let after = inline_completion(&mut client, URI, line, col);
    assert!(!inline_text(&after).is_empty(), "{after}");
    let timings = last_timings(&mut client);
    assert_eq!(timings["timings"]["cache"], Value::Null, "the cancelled generation ran to its end: {timings}");
    assert!(timings["timings"]["generated_tokens"].as_u64().unwrap() > 0, "{timings}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// A newer request on the same document supersedes the older one, which answers empty.
#[test]
fn newer_request_supersedes_older() {
    let (mut client, _) = ready_server(json!({}));
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, URI, &text);
    let params = json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": col}, "context": {"triggerKind": 1}});
    let a = client.send_request("textDocument/inlineCompletion", params.clone());
    let b = client.send_request("textDocument/inlineCompletion", params);
    let ra = client.wait_response(a, TIMEOUT).unwrap();
    let rb = client.wait_response(b, TIMEOUT).unwrap();
    // Empty: no result (null) or no items, or the request cancelled.
    let superseded = ra["result"].is_null() || ra["result"]["items"].as_array().is_some_and(Vec::is_empty) || ra["error"]["code"] == -32800;
    assert!(superseded, "the older request still answered: {ra}");
    assert!(!inline_text(&rb).is_empty(), "the newest request gets the suggestion: {rb}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// A missing model is told to the user; completions answer empty at once; the server lives.
#[test]
fn bad_model_path_is_reported_and_server_stays_up() {
    for (path, expect) in [
        ("/nonexistent/dir/model.gguf", "not found"),
        (env!("CARGO_MANIFEST_DIR"), "not a file"),
        (concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"), "not a GGUF file"),
    ] {
        let mut client = spawn();
        initialize(&mut client, json!({}), json!({"model": {"path": path}}));
        let shown = client
            .wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == 1)
            .unwrap();
        let message = shown["params"]["message"].as_str().unwrap();
        assert!(message.contains(path) && message.contains(expect), "{message}");
        open(&mut client, URI, "def f():\n    ");
        let started = Instant::now();
        let r = inline_completion(&mut client, URI, 1, 4);
        assert!(r.get("error").is_none() && r["result"].is_null(), "{r}");
        assert!(started.elapsed() < Duration::from_secs(5), "empty answer should be prompt");
        assert!(client.shutdown(TIMEOUT).unwrap().success());
    }
}

/// A truncated GGUF reaches llama.cpp, which refuses it; the user hears why.
#[test]
fn truncated_model_is_reported() {
    let dir = TempDir::new("e2e-trunc");
    let truncated = dir.join("truncated.gguf");
    let bytes = std::fs::read(model()).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let mut client = spawn();
    initialize(&mut client, json!({}), json!({"model": {"path": truncated}}));
    let shown = client.wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == 1).unwrap();
    let message = shown["params"]["message"].as_str().unwrap();
    assert!(message.contains("truncated.gguf") && message.contains("could not load"), "{message}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// Unknown documents, positions past the end, wrong settings: errors, never a crash.
#[test]
fn bad_requests_get_errors_and_the_server_keeps_completing() {
    let (mut client, _) = ready_server(json!({}));
    let r = inline_completion(&mut client, "file:///never/opened.py", 0, 0);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    open(&mut client, URI, "x = 1\n");
    let r = completion(&mut client, URI, 99, 0);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("out of range"), "{r}");
    // Past the end of a line clamps to the line's end (as the specification says).
    let r = inline_completion(&mut client, URI, 0, 500);
    assert!(r.get("error").is_none(), "{r}");

    client.notify("workspace/didChangeConfiguration", json!({"settings": {"completion": {"maxTokens": "lots"}}}));
    let shown = client.wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == 1).unwrap();
    assert!(shown["params"]["message"].as_str().unwrap().contains("completion.maxTokens"), "{shown}");

    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, "file:///project/b.py", &text);
    let r = inline_completion(&mut client, "file:///project/b.py", line, col);
    assert!(r.get("error").is_none(), "{r}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// Settings changes reach the server: a new maxTokens applies to the next suggestion, without
/// loading the model again.
#[test]
fn configuration_change_applies() {
    let (mut client, _) = ready_server(json!({}));
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, URI, &text);
    let full = inline_text(&inline_completion(&mut client, URI, line, col));
    let before = last_timings(&mut client);
    assert!(before["timings"]["generated_tokens"].as_u64().unwrap() > 2, "{before}");
    client.notifications.clear();
    client.notify(
        "workspace/didChangeConfiguration",
        json!({"settings": {"ghostline": {"model": {"path": model()}, "completion": {"maxTokens": 2}}}}),
    );
    let r = inline_completion(&mut client, URI, line, col);
    assert!(r.get("error").is_none(), "{r}");
    let after = last_timings(&mut client);
    // Answered, by the model (the suggestion cache keys on the token cap), with two tokens: the
    // start of the longer suggestion (or nothing, when two tokens hold only the line break and
    // indentation the suggestion leaves out).
    assert_eq!(after["timings"]["cache"], Value::Null, "{after}");
    assert_eq!(after["timings"]["generated_tokens"], 2, "{after}");
    assert!(full.starts_with(&inline_text(&r)), "{r} vs {full:?}");
    // The same model, its KV cache kept. On batch-invariant kernels the whole prompt is reused
    // and both tokens are picked from the logits kept with the cache (the first answer decoded
    // them); where model.prefillChunk is on (a backend whose kernels follow the batch), all of
    // the prompt but its last token, in whole aligned chunks. A model loaded again starts with
    // an empty cache and reports itself ready again.
    let prompt = after["timings"]["prompt_tokens"].as_u64().unwrap();
    let chunk = u64::from(ghostline::model::backend::default_prefill_chunk(ghostline::model::backend::gpu_layers(None)));
    let reused = after["timings"]["reused_tokens"].as_u64().unwrap();
    if chunk == 0 {
        assert_eq!(reused, prompt, "the model was loaded again: {after}");
        assert_eq!(after["timings"]["replayed_tokens"], 2, "{after}");
    } else {
        assert!(prompt > chunk, "a prompt of {prompt} tokens keeps no whole chunk: {after}");
        assert_eq!(reused, (prompt - 1) / chunk * chunk, "the model was loaded again: {after}");
    }
    let late = client.wait_notification("window/logMessage", Duration::from_secs(2), |p| {
        p["message"].as_str().is_some_and(|m| m.contains("model ready"))
    });
    assert!(late.is_err(), "model loaded again: {late:?}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

fn last_timings(client: &mut ghostline::stdio_client::StdioClient) -> Value {
    let r = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
    r["result"].clone()
}

/// `completion.*` settings other than sampling swap in place: toggling `completion.enabled`
/// (VS Code's status bar does) or changing the line window keeps the loaded model, its KV cache
/// and its suggestion cache. A new `model.path` loads the model again.
#[test]
fn completion_settings_change_without_reloading_the_model() {
    // Before the server, so dropped after it: the server reads the model linked from here.
    let dir = TempDir::new("e2e-reload");
    let (mut client, _) = ready_server(json!({"window": {"workDoneProgress": true}}));
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, URI, &text);
    let first = inline_text(&inline_completion(&mut client, URI, line, col));
    assert!(!first.is_empty());
    client.notifications.clear();
    let settings = |completion: Value| json!({"settings": {"ghostline": {"model": {"path": model()}, "completion": completion}}});

    client.notify("workspace/didChangeConfiguration", settings(json!({"enabled": false})));
    let off = inline_completion(&mut client, URI, line, col);
    assert!(off.get("error").is_none() && off["result"].is_null(), "disabled, yet: {off}");

    client.notify("workspace/didChangeConfiguration", settings(json!({"enabled": true})));
    assert_eq!(inline_text(&inline_completion(&mut client, URI, line, col)), first);
    // Answered from the model thread's suggestion cache: the same thread, not a reloaded one.
    assert_eq!(last_timings(&mut client)["timings"]["cache"], "prompt", "the model was reloaded");

    client.notify("workspace/didChangeConfiguration", settings(json!({"linesBefore": 4, "linesAfter": 2, "typedAhead": false})));
    assert!(!inline_text(&inline_completion(&mut client, URI, line, col)).is_empty());

    // A reload would have reported itself by now (the completions above waited for it).
    let late = client.wait_notification("window/logMessage", Duration::from_secs(2), |p| {
        p["message"].as_str().is_some_and(|m| m.contains("model ready"))
    });
    assert!(late.is_err(), "model reloaded: {late:?}");
    assert_eq!(progress_kinds(&client), Vec::<String>::new(), "model reloaded");
    assert!(!log_messages(&client).iter().any(|m| m.contains("model ready")), "model reloaded");

    // A different model file (the same bytes behind another name) is a reload, reported.
    let other = dir.join("other.gguf");
    std::os::unix::fs::symlink(model(), &other).unwrap();
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"model": {"path": other}}}));
    wait_ready(&mut client);
    let kinds = progress_kinds(&client);
    assert!(kinds.iter().any(|k| k == "begin"), "{kinds:?}");
    let ready = client.wait_notification("window/logMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("model ready"))).unwrap();
    assert!(ready["params"]["message"].as_str().unwrap().contains("other.gguf"), "{ready}");
    assert!(!inline_text(&inline_completion(&mut client, URI, line, col)).is_empty());
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// An editor that auto-closes brackets and quotes leaves `print("|")`; the test model writes
/// the closers again (`…".format(name))`, `row) for row in rows]`). The suggestion comes without
/// them, and the line it makes parses.
#[test]
fn auto_closed_brackets_get_a_suggestion_without_the_closers() {
    let (mut client, _) = ready_server(json!({}));
    let spec = ghostline::syntax::by_language_id("python").unwrap();
    for (n, (doc, line, col)) in [
        ("def f(name):\n    print(\"\")\n", 1, 11),
        ("def f(rows):\n    out = [str()]\n    return out\n", 1, 15),
    ]
    .into_iter()
    .enumerate()
    {
        let uri = format!("file:///project/closers{n}.py");
        open(&mut client, &uri, doc);
        let suggestion = inline_text(&inline_completion(&mut client, &uri, line, col));
        assert!(!suggestion.is_empty(), "no suggestion in {doc:?}");
        let lines: Vec<&str> = doc.split('\n').collect();
        let (before, after) = lines[line as usize].split_at(col as usize);
        let edited = doc.replacen(lines[line as usize], &format!("{before}{suggestion}{after}"), 1);
        assert_eq!(ghostline::syntax::error_count(&spec.parse(&edited)), 0, "{edited}");
    }
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// `completion.generateAhead` (on by default): each keystroke starts the suggestion for the
/// cursor after it, and the editor's request that follows is answered by that generation, with
/// the very text a server that generates only when asked gives. Backspace and an auto-closed
/// pair (cursor inside it) are followed too; a request at another cursor is not answered ahead.
/// (Typed-ahead reuse is off here: it would answer the second key from the first suggestion,
/// and a key it answers starts nothing ahead.)
#[test]
fn keystrokes_generate_ahead_and_the_request_gets_the_same_suggestion() {
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    let start = |ahead: bool| {
        let mut client = spawn();
        initialize(&mut client, json!({}), json!({"model": {"path": model()}, "completion": {"generateAhead": ahead, "typedAhead": false}}));
        wait_ready(&mut client);
        open(&mut client, URI, &text);
        client
    };
    let (mut ahead, mut asked) = (start(true), start(false));
    let mut version = 1;
    // Each step: an edit (range, text), then a request at (line, character) after the debounce,
    // answered by the generation ahead, or by the suggestion cache when Backspace brings back
    // a text already completed.
    let steps: [((u32, u32, u32, u32), &str, (u32, u32), &str); 4] = [
        ((line, col, line, col), "        ", (line, col + 8), "ahead"),
        ((line, col + 8, line, col + 8), "r", (line, col + 9), "ahead"),
        ((line, col + 8, line, col + 9), "", (line, col + 8), "prompt"), // Backspace
        ((line, col + 8, line, col + 8), "print()", (line, col + 15), "ahead"),
    ];
    for (i, ((l0, c0, l1, c1), typed, (l, c), answered)) in steps.into_iter().enumerate() {
        version += 1;
        for client in [&mut ahead, &mut asked] {
            let range = json!({"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}});
            client.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": URI, "version": version}, "contentChanges": [{"range": range, "text": typed}]}),
            );
        }
        std::thread::sleep(Duration::from_millis(150)); // the editor's debounce
        let mine = inline_completion(&mut ahead, URI, l, c);
        let timings = last_timings(&mut ahead);
        assert_eq!(timings["timings"]["cache"], answered, "step {i}: {timings}");
        assert!(timings["timings"]["prompt_tokens"].as_u64().unwrap() > 0, "{timings}");
        assert_eq!(inline_text(&mine), inline_text(&inline_completion(&mut asked, URI, l, c)), "step {i}");
        let theirs = last_timings(&mut asked);
        assert_ne!(theirs["timings"]["cache"], "ahead", "nothing generated ahead when off: {theirs}");
        assert_eq!(theirs["ahead"]["started"], 0);
    }
    // An auto-closed pair: the cursor is inside it.
    version += 1;
    let at = json!({"line": line, "character": col + 14});
    ahead.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": version}, "contentChanges": [{"range": {"start": at, "end": at}, "text": "\"\""}]}),
    );
    inline_completion(&mut ahead, URI, line, col + 15);
    assert_eq!(last_timings(&mut ahead)["timings"]["cache"], "ahead");
    // A keystroke, then a request somewhere else: that one calls the model itself. (At the end
    // of line 0: a cursor with more than `completion.maxRightChars` characters after it on its
    // line gets no request at all.)
    version += 1;
    let at = json!({"line": line, "character": col + 15});
    ahead.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": version}, "contentChanges": [{"range": {"start": at, "end": at}, "text": "x"}]}),
    );
    let elsewhere = inline_completion(&mut ahead, URI, 0, 11);
    assert!(elsewhere.get("error").is_none(), "{elsewhere}");
    let t = last_timings(&mut ahead);
    assert_ne!(t["timings"]["cache"], "ahead", "{t}");
    let stats = &t["ahead"];
    assert_eq!(stats["started"], 6, "{stats}");
    assert_eq!(stats["used"], 5, "every request but the last was answered by its keystroke's: {stats}");
    assert!(ahead.shutdown(TIMEOUT).unwrap().success());
    assert!(asked.shutdown(TIMEOUT).unwrap().success());
}

/// The ordering rule (ARCHITECTURE.md, `lsp/state.rs`): a `didChange` is applied before the next
/// request on that document is looked at. Each round writes a change and a request in one
/// write; the request (code actions, which need no model) must see the changed text: its
/// function, at its line.
#[test]
fn a_request_right_after_a_change_sees_the_changed_text() {
    let mut client = spawn();
    initialize(&mut client, json!({}), json!({}));
    open(&mut client, URI, "x = 1\n");
    let frame = |message: Value| {
        let body = message.to_string();
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    };
    for round in 0..20u32 {
        // The function moves down a line each round, and is renamed.
        let line = 3 + round;
        let text = format!("{}def f{round}(a):\n    return a\n", "\n".repeat(line as usize));
        let at = json!({"line": line + 1, "character": 4});
        let id = 10_000 + round as i64;
        let mut bytes = frame(json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": URI, "version": 2 + round}, "contentChanges": [{"text": text}]}}));
        bytes += &frame(json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/codeAction", "params": {
            "textDocument": {"uri": URI}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}}));
        client.send_raw(bytes.as_bytes()).unwrap();
        let r = client.wait_response(id, TIMEOUT).unwrap();
        assert!(r.get("error").is_none(), "round {round}: the request saw the old text: {r}");
        let titles: Vec<&str> = r["result"].as_array().into_iter().flatten().filter_map(|a| a["title"].as_str()).collect();
        assert!(titles.iter().any(|t| t.contains(&format!("f{round}"))), "round {round}: the request saw the old text: {r}");
    }
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}
