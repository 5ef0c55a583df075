//! Offline means no socket is ever opened: the real binary runs under `strace`, configured
//! with a cloud endpoint, privacy `allow` and `offline: true`, completes and runs a code action;
//! the trace must show no `socket()` of an internet family and no `connect()`. scripts/test.sh
//! also runs this file (and the LSP end-to-end tests) inside a network namespace with no
//! interfaces (`unshare -n`).

mod common;

use std::process::Stdio;

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

#[test]
fn offline_mode_opens_no_socket() {
    let dir = TempDir::new("offline");
    let trace = dir.join("strace.log");
    let file = dir.join("geometry.py");
    let text = "import math\n\n\ndef area(r):\n    return math.pi * r * r\n";
    std::fs::write(&file, text).unwrap();
    let uri = format!("file://{}", file.display());
    let bin = binary();
    let args = ["-f", "-qq", "-e", "trace=socket,connect,execve", "-o", trace.to_str().unwrap(), bin.to_str().unwrap(), "lsp"];
    let mut client: StdioClient =
        StdioClient::spawn(std::path::Path::new("strace"), &args, &[("GHOSTLINE_MODEL", ""), ("CLOUD_KEY", "sk-test")], Stdio::inherit())
            .expect("strace (apt package strace, installed by .ci/run)");
    initialize(
        &mut client,
        json!({"workspace": {"applyEdit": true}}),
        json!({
            "model": {"path": model()},
            "cloud": {"endpoint": "http://127.0.0.1:9/v1", "model": "any", "apiKeyEnv": "CLOUD_KEY"},
            "privacy": "allow",
            "offline": true
        }),
    );
    wait_ready(&mut client);
    client.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}));
    let r = inline_completion(&mut client, &uri, 4, 20);
    assert!(r.get("error").is_none(), "{r}");

    // Every code action offered at the function, run through executeCommand.
    let actions = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 3, "character": 4}, "end": {"line": 3, "character": 4}}, "context": {"diagnostics": []}}),
            TIMEOUT,
        )
        .unwrap();
    let actions = actions["result"].as_array().cloned().unwrap_or_default();
    assert!(!actions.is_empty(), "no code actions offered");
    let action = actions.iter().find(|a| a["title"].as_str().is_some_and(|t| t.to_lowercase().contains("docstring"))).unwrap_or(&actions[0]);
    let action = if action.get("command").is_some() {
        action.clone()
    } else {
        client.request("codeAction/resolve", action.clone(), TIMEOUT).unwrap()["result"].clone()
    };
    let command: &Value = if action["command"].is_object() { &action["command"] } else { &action };
    let executed = client
        .request("workspace/executeCommand", json!({"command": command["command"], "arguments": command["arguments"]}), TIMEOUT)
        .unwrap();
    assert!(executed.get("error").is_none(), "{executed}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());

    let log = std::fs::read_to_string(&trace).unwrap();
    let offending: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("socket(AF_INET") || l.contains("socket(AF_INET6") || l.contains("connect("))
        .collect();
    assert!(offending.is_empty(), "offline, yet the process used the network:\n{}", offending.join("\n"));
    // The control: strace did see the server start.
    assert!(log.contains("execve("), "strace recorded nothing: {log}");
}
