//! End to end over stdio: how settings changes layer over what is in force, what the server
//! says about settings that are not an object, how it exits, and what completions insert next
//! to the text already there (a space before the cursor, CRLF line endings).

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const URI: &str = "file:///project/shapes.py";

fn last_timings(client: &mut ghostline::stdio_client::StdioClient) -> Value {
    client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap()["result"].clone()
}

/// Neovim keeps the model in `init_options` and sends `settings` on every change: a change
/// that does not repeat `model.path` — or is empty, or `null` — keeps the model loaded and
/// changes only what it names.
#[test]
fn a_settings_change_without_the_model_keeps_the_model() {
    let (mut client, _) = ready_server(json!({"window": {"workDoneProgress": true}}));
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, URI, &text);
    let first = inline_text(&inline_completion(&mut client, URI, line, col));
    assert!(!first.is_empty(), "no first suggestion");
    client.notifications.clear();

    for payload in [json!({"settings": {}}), json!({"settings": null}), json!({"settings": {"ghostline": {}}})] {
        client.notify("workspace/didChangeConfiguration", payload.clone());
        let r = inline_completion(&mut client, URI, line, col);
        assert_eq!(inline_text(&r), first, "after {payload}: {r}");
        // From the model thread's suggestion cache: the same model, not a reloaded one.
        assert_eq!(last_timings(&mut client)["timings"]["cache"], "prompt", "after {payload}: the model was reloaded");
    }

    // A change naming one key (the issue's `maxTokens: 1`): that key changes, the model stays
    // and answers (one token: too little for a suggestion that parses here, so none is shown).
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"ghostline": {"completion": {"maxTokens": 1}}}}));
    let r = inline_completion(&mut client, URI, line, col);
    assert!(r.get("error").is_none(), "{r}");
    let t = last_timings(&mut client);
    assert_eq!((t["timings"]["generated_tokens"].as_u64(), t["timings"]["cache"].as_str()), (Some(1), None), "the loaded model answered with maxTokens 1: {t}");
    assert_eq!(t["position"]["line"], line, "{t}");

    // The next change lays over that one: maxTokens stays 1 while linesBefore changes.
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"completion": {"linesBefore": 32}}}));
    let r = inline_completion(&mut client, URI, line, col);
    assert!(r.get("error").is_none(), "{r}");
    let t = last_timings(&mut client);
    assert_eq!(t["timings"]["generated_tokens"], 1, "maxTokens kept from the change before: {t}");

    // Nothing was reloaded, nothing was reported missing.
    let late = client.wait_notification("window/logMessage", Duration::from_secs(2), |p| {
        p["message"].as_str().is_some_and(|m| m.contains("model ready"))
    });
    assert!(late.is_err(), "model reloaded: {late:?}");
    assert_eq!(progress_kinds(&client), Vec::<String>::new(), "model reloaded");
    let shown: Vec<&Value> = client.notifications.iter().filter(|n| n["method"] == "window/showMessage").collect();
    assert!(shown.is_empty(), "{shown:?}");

    // `null` for a key takes it back to its default (64 tokens): the first suggestion again,
    // from the suggestion cache of the model loaded at the start.
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"completion": {"maxTokens": null, "linesBefore": null}}}));
    let r = inline_completion(&mut client, URI, line, col);
    assert_eq!(inline_text(&r), first, "{r}");
    assert_eq!(last_timings(&mut client)["timings"]["cache"], "prompt", "the model was reloaded");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// Settings that are not an object are refused with that reason; the previous ones stay.
#[test]
fn settings_that_are_not_an_object_are_refused_with_the_reason() {
    let (mut client, _) = ready_server(json!({}));
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, URI, &text);
    for (settings, what) in [(json!([1, 2, 3]), "an array"), (json!({"ghostline": "fast"}), "a string")] {
        client.notifications.clear();
        client.notify("workspace/didChangeConfiguration", json!({"settings": settings}));
        let shown = client.wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == 1).unwrap();
        let message = shown["params"]["message"].as_str().unwrap();
        assert!(message.contains("settings must be an object") && message.contains(what), "{message}");
        assert!(!message.contains("struct") && !message.contains("[0]"), "{message}");
        assert!(message.contains("keeping the previous settings"), "{message}");
        assert!(!inline_text(&inline_completion(&mut client, URI, line, col)).is_empty(), "the model was lost");
    }
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// `initialize` with a valid model and one wrong-typed key: the key is named in an error, the
/// model still loads and answers (it used to be "using defaults": no model, a download offer).
/// A later change with a bad key keeps that key's previous value and applies the rest.
#[test]
fn a_bad_key_at_initialize_is_reported_and_the_other_settings_apply() {
    let (text, line, col) = fixture_with_cursor("e2e/shapes.py");
    for (bad, key) in [
        (json!({"context": {"exclude": "x"}}), "context.exclude"),
        (json!({"context": {"maxFiles": -1}}), "context.maxFiles"),
        (json!({"stats": {"enabled": "yes"}}), "stats.enabled"),
        (json!({"stats": {"retentionSeconds": [0, 0]}}), "stats.retentionSeconds"),
    ] {
        let mut client = spawn();
        let mut options = bad.clone();
        options["model"] = json!({"path": model()});
        options["completion"] = json!({"maxTokens": 3});
        initialize(&mut client, json!({}), options);
        let shown = client.wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == 1).unwrap();
        let message = shown["params"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{key}`")) && !message.contains("using defaults"), "{bad}: {message}");
        wait_ready(&mut client);
        open(&mut client, URI, &text);
        let r = inline_completion(&mut client, URI, line, col);
        assert!(r.get("error").is_none(), "{bad}: {r}");
        // The other keys applied: completion.maxTokens 3.
        let t = last_timings(&mut client);
        assert!(t["timings"]["generated_tokens"].as_u64().is_some_and(|n| n <= 3), "{bad}: {t}");
        assert!(client.shutdown(TIMEOUT).unwrap().success());
    }

    let (mut client, _) = ready_server(json!({}));
    open(&mut client, URI, &text);
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"completion": {"maxTokens": 2, "linesBefore": "all"}}}));
    let shown = client.wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == 1).unwrap();
    let message = shown["params"]["message"].as_str().unwrap();
    assert!(message.contains("`completion.linesBefore`") && message.contains("keeping its previous value"), "{message}");
    let r = inline_completion(&mut client, URI, line, col);
    assert!(r.get("error").is_none(), "{r}");
    let t = last_timings(&mut client);
    assert!(t["timings"]["generated_tokens"].as_u64().is_some_and(|n| n <= 2), "maxTokens of the same change not applied: {t}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// LSP: `exit` after `shutdown` ends the process with 0; `exit` without it with 1.
#[test]
fn exit_without_shutdown_exits_with_1() {
    let mut client = spawn();
    initialize(&mut client, json!({}), json!({"model": {"path": model()}}));
    client.notify("exit", Value::Null);
    let status = client.wait_exit(TIMEOUT).unwrap();
    assert_eq!(status.code(), Some(1), "{status:?}");

    let mut client = spawn();
    initialize(&mut client, json!({}), json!({"model": {"path": model()}}));
    assert_eq!(client.shutdown(TIMEOUT).unwrap().code(), Some(0));
}

/// `return "Hello, " + |`: the line has its space before the cursor; the test model's answer
/// starts with one too (` name + "!"`), which the suggestion leaves out.
#[test]
fn a_space_before_the_cursor_is_not_suggested_again() {
    let (mut client, _) = ready_server(json!({}));
    let doc = "def greet(name):\n    return \"Hello, \" + \n";
    let uri = "file:///project/greet.py";
    open(&mut client, uri, doc);
    let col = "    return \"Hello, \" + ".len() as u32;
    let r = inline_completion(&mut client, uri, 1, col);
    let suggestion = inline_text(&r);
    assert!(!suggestion.is_empty(), "no suggestion: {r}");
    assert!(!suggestion.starts_with([' ', '\t']), "the space before the cursor repeated: {suggestion:?}");
    let raw = last_timings(&mut client);
    eprintln!("suggestion {suggestion:?} ({raw})");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// A CRLF document: a multi-line suggestion breaks its lines with CRLF too.
#[test]
fn completions_in_a_crlf_document_use_crlf() {
    let (mut client, _) = ready_server(json!({}));
    let (text, _, _) = fixture_with_cursor("e2e/shapes.py");
    let crlf = text.replace('\n', "\r\n");
    let uri = "file:///project/crlf.py";
    open(&mut client, uri, &crlf);
    // At the end of `def perimeter(self):` the suggestion is the method's body, on new lines.
    let line = text.lines().position(|l| l.contains("def perimeter")).unwrap() as u32;
    let col = "    def perimeter(self):".len() as u32;
    let suggestion = inline_text(&inline_completion(&mut client, uri, line, col));
    eprintln!("suggestion {suggestion:?}");
    assert!(suggestion.contains('\n'), "a multi-line suggestion was expected: {suggestion:?}");
    assert!(!suggestion.replace("\r\n", "").contains('\n'), "a lone LF in a CRLF document: {suggestion:?}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}
