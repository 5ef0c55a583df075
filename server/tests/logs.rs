//! Logs hold no code unless `debug.logCode` says so: the real binary at the most verbose log
//! level completes in a file full of a distinctive identifier; that identifier must not reach
//! stderr by default, and does with `debug.logCode: true` (the control).

mod common;

use std::process::Stdio;

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::json;

fn stderr_after_completing(log_code: bool) -> String {
    let dir = TempDir::new(&format!("logs-{log_code}"));
    let log = dir.join("stderr.log");
    let mut client = StdioClient::spawn(
        &binary(),
        &["lsp"],
        &[("GHOSTLINE_MODEL", ""), ("GHOSTLINE_LOG", "trace")],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    )
    .unwrap();
    initialize(&mut client, json!({}), json!({"model": {"path": model()}, "debug": {"logCode": log_code}}));
    wait_ready(&mut client);
    let text = "def zqxSecretHelper(zqx_value):\n    zqx_total = zqx_value * 2\n    return zqx_\n";
    open(&mut client, "file:///p/secret.py", text);
    let r = inline_completion(&mut client, "file:///p/secret.py", 2, 15);
    assert!(r.get("error").is_none(), "{r}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn code_reaches_logs_only_with_debug_log_code() {
    let quiet = stderr_after_completing(false);
    assert!(quiet.contains("model ready"), "the log is not being written: {quiet}");
    assert!(!quiet.contains("zqx"), "code in the log without debug.logCode:\n{quiet}");
    let verbose = stderr_after_completing(true);
    assert!(verbose.contains("zqx"), "debug.logCode did not log the prompt");
}

/// The grammars' queries compile at start, on a thread of their own beside the model's loading,
/// not on the first `didOpen` (which the first completion request then waited behind): the log
/// says they were compiled although no document was ever opened.
#[test]
fn language_queries_compile_at_start_before_any_document() {
    let dir = TempDir::new("logs-warm");
    let log = dir.join("stderr.log");
    let mut client = spawn_with(&[("GHOSTLINE_LOG", "ghostline=debug")], Stdio::from(std::fs::File::create(&log).unwrap()));
    initialize(&mut client, json!({}), json!({"model": {"path": model()}}));
    wait_ready(&mut client);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let compiled = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.contains("language queries compiled") || std::time::Instant::now() > deadline {
            break text.contains("language queries compiled");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(client.shutdown(TIMEOUT).unwrap().success());
    assert!(compiled, "the queries were not compiled before the first document:\n{}", std::fs::read_to_string(&log).unwrap());
}
