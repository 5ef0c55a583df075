//! Bad input over stdio against the real binary: each gets the right JSON-RPC/LSP error (or a
//! harmless empty answer), and the server stays up and still completes afterwards.

mod common;

use std::time::Duration;

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

const URI: &str = "file:///project/bad.py";

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// The server still answers a real completion with the model's text.
fn still_completes(client: &mut StdioClient) {
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///project/ok.py", "languageId": "python", "version": 1, "text": text}}),
    );
    let r = inline_completion(client, "file:///project/ok.py", line, col);
    assert!(!inline_text(&r).is_empty(), "no suggestion after bad input: {r}");
    assert!(client.is_running());
}

/// The prompt (token ids) the server built for a completion at `line`, `character` of `uri`: the
/// test model's prompt is the text before the cursor, so two documents give the same prompt at
/// their ends when their texts are the same.
fn prompt_at(client: &mut StdioClient, uri: &str, line: u32, character: u32) -> Value {
    let r = inline_completion(client, uri, line, character);
    assert!(r.get("error").is_none(), "{r}");
    let t = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
    assert_eq!(t["result"]["uri"], uri, "{t}");
    let prompt = t["result"]["prompt"].clone();
    assert!(prompt.as_array().is_some_and(|p| !p.is_empty()), "{t}");
    prompt
}

fn error_code(r: &Value) -> i64 {
    r["error"]["code"].as_i64().unwrap_or_else(|| panic!("expected an error: {r}"))
}

#[test]
fn requests_before_initialize_and_after_shutdown() {
    let mut client = spawn();
    let r = client.request("textDocument/completion", json!({"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}), TIMEOUT).unwrap();
    assert_eq!(error_code(&r), -32002, "server not initialized: {r}");
    initialize(&mut client, json!({}), json!({"model": {"path": model()}}));
    wait_ready(&mut client);
    let r = client.request("initialize", json!({"capabilities": {}}), TIMEOUT).unwrap();
    assert_eq!(error_code(&r), -32600, "initialize twice: {r}");
    let r = client.request("shutdown", Value::Null, TIMEOUT).unwrap();
    assert!(r.get("error").is_none(), "{r}");
    let r = client.request("textDocument/completion", json!({"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}), TIMEOUT).unwrap();
    assert_eq!(error_code(&r), -32600, "after shutdown: {r}");
    client.notify("exit", Value::Null);
    std::thread::sleep(Duration::from_millis(500));
    assert!(!client.is_running(), "exit after shutdown ends the process");
}

#[test]
fn malformed_messages_get_errors_and_the_server_stays_up() {
    let (mut client, _) = ready_server(json!({}));
    let mut tried = 0;

    // Invalid JSON: a parse error with a null id.
    client.send_raw(&frame(b"{\"jsonrpc\": \"2.0\", \"id\": 77, \"method\": ")).unwrap();
    let r = client.wait_response_with_id(Value::Null, Duration::from_secs(30)).unwrap();
    assert_eq!(error_code(&r), -32700, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("invalid JSON"), "{r}");
    tried += 1;
    // Wrong types and missing fields.
    for params in [
        json!({"textDocument": {"uri": 5}, "position": {"line": 0, "character": 0}}),
        json!({"textDocument": {"uri": URI}}),
        json!({"textDocument": {"uri": URI}, "position": {"line": "zero", "character": 0}}),
        json!({"textDocument": {"uri": URI}, "position": {"line": -1, "character": 0}}),
        json!("not an object"),
    ] {
        let r = client.request("textDocument/inlineCompletion", params.clone(), TIMEOUT).unwrap();
        assert_eq!(error_code(&r), -32602, "{params} → {r}");
        tried += 1;
    }
    // Unknown methods: requests get MethodNotFound, notifications are ignored.
    let r = client.request("textDocument/teleport", json!({}), TIMEOUT).unwrap();
    assert_eq!(error_code(&r), -32601, "{r}");
    client.notify("$/somethingOptional", json!({}));
    client.notify("textDocument/didChange", json!({"textDocument": {"uri": "file:///never/opened.py", "version": 3}, "contentChanges": [{"text": "x"}]}));
    client.notify("textDocument/didOpen", json!({"textDocument": {"uri": 42}}));
    tried += 4;
    // Unknown document; positions past the end.
    let r = inline_completion(&mut client, "file:///never/opened.py", 0, 0);
    assert_eq!(error_code(&r), -32602, "{r}");
    open(&mut client, URI, "x = 1\n");
    let r = completion(&mut client, URI, 1000, 0);
    assert_eq!(error_code(&r), -32602, "{r}");
    let r = completion(&mut client, URI, 0, 4_000_000_000);
    assert!(r.get("error").is_none(), "a character past the line's end means its end: {r}");
    tried += 3;
    // A lone surrogate in a JSON string: it becomes U+FFFD, one UTF-16 unit like it, so an
    // edit after it lands where the editor means it (the whole text matches the one expected).
    client.send_raw(&frame(br#"{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///project/s.py","languageId":"python","version":1,"text":"x = '\ud800'\n"}}}"#)).unwrap();
    let r = inline_completion(&mut client, "file:///project/s.py", 0, 5);
    assert!(r.get("error").is_none() || error_code(&r) == -32602, "{r}");
    let at = json!({"line": 0, "character": 7});
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": "file:///project/s.py", "version": 2}, "contentChanges": [{"range": {"start": at, "end": at}, "text": " + y"}]}),
    );
    open(&mut client, "file:///project/s-expected.py", "x = '\u{FFFD}' + y\n");
    assert_eq!(prompt_at(&mut client, "file:///project/s.py", 1, 0), prompt_at(&mut client, "file:///project/s-expected.py", 1, 0));
    tried += 1;
    // Edits with ranges beyond the document clamp to its end.
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"range": {"start": {"line": 90, "character": 0}, "end": {"line": 99, "character": 9}}, "text": "y = 2\n"}]}),
    );
    open(&mut client, "file:///project/bad-expected.py", "x = 1\ny = 2\n");
    assert_eq!(prompt_at(&mut client, URI, 2, 0), prompt_at(&mut client, "file:///project/bad-expected.py", 2, 0), "x = 1 then y = 2");
    tried += 1;

    still_completes(&mut client);
    eprintln!("bad inputs tried: {tried}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn huge_and_binary_documents() {
    let (mut client, _) = ready_server(json!({}));
    // 50 MB of Python.
    let line = "value = compute(1, 2, 3)  # a line of filler text\n";
    let big: String = line.repeat(50 * 1024 * 1024 / line.len());
    let big_lines = big.len() / line.len();
    open(&mut client, "file:///project/big.py", &format!("{big}def f(x):\n    "));
    let r = inline_completion(&mut client, "file:///project/big.py", big_lines as u32 + 1, 4);
    assert!(r.get("error").is_none(), "{}", &r.to_string()[..200.min(r.to_string().len())]);
    // Edit at its start and at its end.
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": "file:///project/big.py", "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}}, "text": "VALUE"},
            {"range": {"start": {"line": big_lines + 1, "character": 4}, "end": {"line": big_lines + 1, "character": 4}}, "text": "return"}
        ]}),
    );
    let r = completion(&mut client, "file:///project/big.py", big_lines as u32 + 1, 10);
    assert!(r.get("error").is_none());

    // Binary content: control characters, NULs, invalid-looking bytes (as JSON escapes).
    let binary: String = (0u32..4096).map(|i| char::from_u32((i * 7919) % 0xD7FF).unwrap_or('\0')).collect();
    open(&mut client, "file:///project/blob.bin", &binary);
    let r = inline_completion(&mut client, "file:///project/blob.bin", 0, 10);
    assert!(r.get("error").is_none(), "{r}");
    assert!(inline_text(&r).is_empty(), "no suggestions in binary files: {r}");

    still_completes(&mut client);
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}
