//! Where not to suggest, over stdio with the real binary and model: files matching
//! `completion.exclude` (the defaults plus the user's globs) and cursors with more than
//! `completion.maxRightChars` characters after them get no request at all — the model is never
//! asked, so `ghostline/lastTimings` still names the last file that was completed — while
//! other files and short line tails complete as before.

mod common;

use common::*;
use serde_json::{json, Value};

/// The document of the last request that reached the model.
fn last_uri(client: &mut ghostline::stdio_client::StdioClient) -> Value {
    client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap()["result"]["uri"].clone()
}

fn server(options: Value) -> TestServer {
    let mut client = spawn();
    initialize(&mut client, json!({}), options);
    wait_ready(&mut client);
    client
}

#[test]
fn excluded_files_and_long_line_tails_get_no_request() {
    let mut client = server(json!({"model": {"path": model()}, "completion": {"exclude": ["*.sql"]}}));
    // The control: an ordinary file is completed.
    let main = "file:///project/main.py";
    open(&mut client, main, "def add(a, b):\n    return ");
    inline_completion(&mut client, main, 1, 11);
    assert_eq!(last_uri(&mut client), main);

    // The defaults, and the user's glob added to them.
    for (uri, text) in [
        ("file:///project/.env", "API_KEY = "),
        ("file:///project/config/.env.production", "DATABASE_URL = "),
        ("file:///project/tls/server.pem", "-----BEGIN "),
        ("file:///project/secrets/tokens.py", "TOKEN = "),
        ("file:///home/dev/.ssh/id_rsa", "-----BEGIN "),
        ("file:///project/schema.sql", "SELECT "),
    ] {
        open(&mut client, uri, text);
        let r = inline_completion(&mut client, uri, 0, text.len() as u32);
        assert_eq!(inline_text(&r), "", "{uri}: {r}");
        let r = completion(&mut client, uri, 0, text.len() as u32);
        assert!(r.get("error").is_none() && r["result"].as_array().is_none_or(|a| a.is_empty()) && r["result"]["items"].as_array().is_none_or(|a| a.is_empty()), "{uri}: {r}");
        assert_eq!(last_uri(&mut client), main, "{uri} reached the model");
    }

    // More than 8 non-space characters right of the cursor: no request; 8 or fewer: as before.
    let tail = "file:///project/tail.py";
    open(&mut client, tail, "value = compute(first, second)\n");
    inline_completion(&mut client, tail, 0, 8);
    assert_eq!(last_uri(&mut client), main, "a cursor with 21 characters after it reached the model");
    inline_completion(&mut client, tail, 0, 23);
    assert_eq!(last_uri(&mut client), tail, "a cursor before `second)` was not completed");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn exclude_defaults_off_keeps_only_the_users_globs_and_the_tail_limit_is_a_setting() {
    let mut client = server(json!({
        "model": {"path": model()},
        "completion": {"exclude": ["*.sql"], "excludeDefaults": false, "maxRightChars": 64}
    }));
    let env = "file:///project/.env";
    open(&mut client, env, "API_KEY = ");
    inline_completion(&mut client, env, 0, 10);
    assert_eq!(last_uri(&mut client), env, "with the defaults off, .env is completed");
    let sql = "file:///project/schema.sql";
    open(&mut client, sql, "SELECT ");
    inline_completion(&mut client, sql, 0, 7);
    assert_eq!(last_uri(&mut client), env, "the user's own glob still applies");
    let tail = "file:///project/tail.py";
    open(&mut client, tail, "value = compute(first, second)\n");
    inline_completion(&mut client, tail, 0, 8);
    assert_eq!(last_uri(&mut client), tail, "maxRightChars 64 allows 21 characters after the cursor");

    // A settings change applies at once: the defaults come back.
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"completion": {"excludeDefaults": true}}}));
    let env2 = "file:///project/app/.env";
    open(&mut client, env2, "SECRET = ");
    inline_completion(&mut client, env2, 0, 9);
    assert_eq!(last_uri(&mut client), tail, ".env completed after the defaults were turned back on");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// A file matching `context.exclude` is never put into any prompt (the README's promise): no
/// completion request in it, no code action offered on it — while the same file is completed
/// and offered actions once the glob is lifted (the control).
#[test]
fn a_file_matching_context_exclude_gets_no_request_and_no_action() {
    let mut client = server(json!({"model": {"path": model()}, "context": {"exclude": ["private_*.py"]}}));
    let main = "file:///project/main.py";
    open(&mut client, main, "def add(a, b):\n    return ");
    inline_completion(&mut client, main, 1, 11);
    assert_eq!(last_uri(&mut client), main);
    let private = "file:///project/pkg/private_cfg.py";
    let text = "def secret_rate(sku):\n    return ";
    open(&mut client, private, text);
    let actions = |client: &mut ghostline::stdio_client::StdioClient| {
        let r = client
            .request("textDocument/codeAction", json!({"textDocument": {"uri": private}, "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 4}}, "context": {"diagnostics": []}}), TIMEOUT)
            .unwrap();
        assert!(r.get("error").is_none(), "{r}");
        r["result"].as_array().map_or(0, Vec::len)
    };
    let r = inline_completion(&mut client, private, 1, 11);
    assert_eq!(inline_text(&r), "", "{r}");
    assert_eq!(last_uri(&mut client), main, "a context.exclude file reached the model");
    assert_eq!(actions(&mut client), 0, "actions offered on an excluded file");

    client.notify("workspace/didChangeConfiguration", json!({"settings": {"context": {"exclude": null}}}));
    inline_completion(&mut client, private, 1, 11);
    assert_eq!(last_uri(&mut client), private, "the control: without the glob the file is completed");
    assert!(actions(&mut client) > 0, "the control: without the glob actions are offered");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}
