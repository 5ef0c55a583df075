//! Containment with injected faults (`GHOSTLINE_FAULTS`, see server/src/fault.rs) in the real
//! binary: a panicking request handler answers an error and the server keeps completing; a
//! panicking model job fails alone; a dead model thread is restarted and the user told.

mod common;

use std::process::Stdio;

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::json;

const URI: &str = "file:///project/shapes.py";

fn server_with_faults(faults: &str) -> StdioClient {
    let mut client =
        StdioClient::spawn(&binary(), &["lsp"], &[("GHOSTLINE_MODEL", ""), ("GHOSTLINE_FAULTS", faults)], Stdio::inherit()).unwrap();
    // The request below is mid-line: completion.maxRightChars must not skip it.
    initialize(&mut client, json!({}), json!({"model": {"path": model()}, "completion": {"maxRightChars": 1000}}));
    wait_ready(&mut client);
    let (text, _, _) = fixture_with_cursor("e2e/shapes.py");
    open(&mut client, URI, &text);
    client
}

fn ask(client: &mut StdioClient) -> serde_json::Value {
    let (_, line, _) = fixture_with_cursor("e2e/shapes.py");
    // Mid-line, so that the answer comes from the model (not a cache) each time.
    let r = inline_completion(client, URI, line - 3, 30);
    assert!(client.is_running(), "the server died: {r}");
    r
}

#[test]
fn a_panicking_request_handler_answers_an_error_and_the_server_lives() {
    let mut client = server_with_faults("completion");
    let r = ask(&mut client);
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("injected fault"), "{r}");
    let r = ask(&mut client);
    assert!(r.get("error").is_none(), "{r}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn a_panicking_model_job_fails_alone() {
    let mut client = server_with_faults("job");
    let r = ask(&mut client);
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("recovered"), "{r}");
    let r = ask(&mut client);
    assert!(r.get("error").is_none(), "{r}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn a_dead_model_thread_is_restarted_and_the_user_told() {
    let mut client = server_with_faults("thread");
    client.notifications.clear();
    let first = ask(&mut client);
    assert!(first.get("error").is_none() && first["result"].is_null(), "{first}");
    let told = client.wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == 2).unwrap();
    let message = told["params"]["message"].as_str().unwrap();
    assert!(message.contains("stopped unexpectedly") && message.contains("reloading"), "{message}");
    // The reloaded model completes.
    let (_, line, col) = fixture_with_cursor("e2e/shapes.py");
    let r = inline_completion(&mut client, URI, line, col);
    assert!(!inline_text(&r).is_empty(), "{r}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}
