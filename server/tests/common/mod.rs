//! Helpers for end-to-end tests: the real `ghostline` binary over stdio with the real test model.
#![allow(dead_code)]

pub mod hub;
/// [`TempDir`]: the unit tests' folder guard, shared with them. A folder handed to a server must
/// outlive it: bind the guard to a variable declared before the client.
#[path = "../../src/testing.rs"]
mod testing;
pub use testing::TempDir;

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The test model. CI (scripts/test.sh) always provides it: a missing model fails the test.
pub fn model() -> PathBuf {
    let path = std::env::var_os("GHOSTLINE_MODEL")
        .map(PathBuf::from)
        .expect("GHOSTLINE_MODEL must name the test model: run scripts/test.sh");
    assert!(path.is_file(), "GHOSTLINE_MODEL={} is not a file", path.display());
    path
}

/// The second test model (Gemma 3 270M, scripts/fetch-model.sh gemma3; provided by CI).
pub fn second_model() -> PathBuf {
    let path = std::env::var_os("GHOSTLINE_SECOND_MODEL")
        .map(PathBuf::from)
        .expect("GHOSTLINE_SECOND_MODEL must name the second test model: run scripts/test.sh");
    assert!(path.is_file(), "GHOSTLINE_SECOND_MODEL={} is not a file", path.display());
    path
}

/// The FIM test model, a real FIM model (StarCoder-style markers, `<file_sep>` between files):
/// `$GHOSTLINE_FIM_MODEL` (scripts/test.sh sets it from `scripts/fetch-model.sh fim`), else
/// `../shared/models/` beside the repository. Missing, the test fails saying where it looked.
pub fn fim_model() -> PathBuf {
    const NAME: &str = "ghostline-test-fim-135m.Q4_1.gguf";
    let path = match std::env::var_os("GHOSTLINE_FIM_MODEL").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/models").join(NAME),
    };
    assert!(
        path.is_file(),
        "the FIM test model is missing: expected at {} (set GHOSTLINE_FIM_MODEL, or put shared/models/{NAME} beside the repository; scripts/fetch-model.sh fim checks it)",
        path.display()
    );
    path
}

/// The FIM wiring model made by scripts/make-fim-wiring-model.py (also provided by CI): the
/// plain test model with Qwen-style FIM markers declared in its metadata, never trained on
/// them. Only for what the FIM test model cannot show (another family's markers and layout).
pub fn fim_wiring_model() -> PathBuf {
    let path = std::env::var_os("GHOSTLINE_FIM_WIRING_MODEL")
        .map(PathBuf::from)
        .expect("GHOSTLINE_FIM_WIRING_MODEL must name the FIM wiring model: run scripts/test.sh");
    assert!(path.is_file(), "GHOSTLINE_FIM_WIRING_MODEL={} is not a file", path.display());
    path
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(name)
}

/// A fixture's text with its `<CURSOR>` marker removed, and the marker's (line, UTF-16 column).
pub fn fixture_with_cursor(name: &str) -> (String, u32, u32) {
    let source = std::fs::read_to_string(fixture(name)).unwrap();
    let at = source.find("<CURSOR>").expect("cursor marker");
    let text = source.replacen("<CURSOR>", "", 1);
    let before = &text[..at];
    let line = before.matches('\n').count() as u32;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..].encode_utf16().count() as u32;
    (text, line, col)
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ghostline"))
}

/// A server started by [`spawn`] and its data folder: dropped (or shut down), the process ends
/// first, then the folder goes. Used as the [`StdioClient`] it holds.
pub struct TestServer {
    client: StdioClient,
    _data: TempDir,
}

impl TestServer {
    /// [`StdioClient::shutdown`], then the data folder is removed.
    pub fn shutdown(self, timeout: Duration) -> Result<ExitStatus, String> {
        self.client.shutdown(timeout)
    }
}

impl Deref for TestServer {
    type Target = StdioClient;

    fn deref(&self) -> &StdioClient {
        &self.client
    }
}

impl DerefMut for TestServer {
    fn deref_mut(&mut self) -> &mut StdioClient {
        &mut self.client
    }
}

/// Starts the server with no `GHOSTLINE_MODEL` in its environment (tests pass the path in
/// `initializationOptions`, as editors do) and logs on our stderr. Its data directory (the
/// acceptance statistics' default place) is a temporary folder of its own, not the user's.
pub fn spawn() -> TestServer {
    spawn_with(&[], Stdio::inherit())
}

/// [`spawn`] with `extra` added to the server's environment and its log sent to `stderr`.
pub fn spawn_with(extra: &[(&str, &str)], stderr: Stdio) -> TestServer {
    let data = TempDir::new("data");
    let mut env = vec![("GHOSTLINE_MODEL", ""), ("XDG_DATA_HOME", data.to_str().unwrap())];
    env.extend_from_slice(extra);
    let mut client = StdioClient::spawn(&binary(), &["lsp"], &env, stderr).unwrap();
    assert!(client.is_running());
    TestServer { client, _data: data }
}

/// `initialize` + `initialized`; returns the initialize result.
pub fn initialize(client: &mut StdioClient, capabilities: Value, options: Value) -> Value {
    let r = client
        .request(
            "initialize",
            json!({"processId": null, "rootUri": null, "capabilities": capabilities, "initializationOptions": options}),
            TIMEOUT,
        )
        .unwrap();
    assert!(r.get("error").is_none(), "initialize failed: {r}");
    client.notify("initialized", json!({}));
    r["result"].clone()
}

/// Waits for the server's "model ready" log line.
pub fn wait_ready(client: &mut StdioClient) {
    client
        .wait_notification("window/logMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("model ready")))
        .unwrap_or_else(|e| panic!("model did not become ready: {e}; notifications: {:?}", client.notifications));
}

/// A server with the test model loaded, initialized with `capabilities`.
pub fn ready_server(capabilities: Value) -> (TestServer, Value) {
    let mut client = spawn();
    let init = initialize(&mut client, capabilities, json!({"model": {"path": model()}}));
    wait_ready(&mut client);
    (client, init)
}

pub fn open(client: &mut StdioClient, uri: &str, text: &str) {
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}),
    );
}

pub fn inline_completion(client: &mut StdioClient, uri: &str, line: u32, character: u32) -> Value {
    client
        .request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}, "context": {"triggerKind": 1}}),
            TIMEOUT,
        )
        .unwrap()
}

pub fn completion(client: &mut StdioClient, uri: &str, line: u32, character: u32) -> Value {
    client
        .request(
            "textDocument/completion",
            json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}),
            TIMEOUT,
        )
        .unwrap()
}

/// The inline suggestion's text ("" when none).
pub fn inline_text(response: &Value) -> String {
    assert!(response.get("error").is_none(), "request failed: {response}");
    response["result"]["items"][0]["insertText"].as_str().unwrap_or("").to_owned()
}

/// The kinds (`begin`, `report`, `end`) of the `$/progress` notifications received so far.
pub fn progress_kinds(client: &StdioClient) -> Vec<String> {
    client
        .notifications
        .iter()
        .filter(|n| n["method"] == "$/progress")
        .map(|n| n["params"]["value"]["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The texts of the `window/logMessage` and `window/showMessage` notifications received so far.
pub fn log_messages(client: &StdioClient) -> Vec<String> {
    client
        .notifications
        .iter()
        .filter(|n| n["method"] == "window/logMessage" || n["method"] == "window/showMessage")
        .map(|n| n["params"]["message"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The `strace` arguments that record process starts and socket use into `trace`, then run
/// `program args…` (see [`assert_no_network`]).
pub fn strace_args(trace: &std::path::Path, program: &std::path::Path, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["-f", "-qq", "-e", "trace=socket,connect,execve", "-o"].iter().map(|s| s.to_string()).collect();
    v.push(trace.to_string_lossy().into_owned());
    v.push(program.to_string_lossy().into_owned());
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// The trace `strace_args` wrote shows the process start and no internet socket or connect.
pub fn assert_no_network(trace: &std::path::Path, what: &str) {
    let log = std::fs::read_to_string(trace).unwrap();
    assert!(log.contains("execve("), "strace recorded nothing: {log}");
    let offending: Vec<&str> =
        log.lines().filter(|l| l.contains("socket(AF_INET") || l.contains("socket(AF_INET6") || l.contains("connect(")).collect();
    assert!(offending.is_empty(), "offline, yet {what} used the network:\n{}", offending.join("\n"));
}

/// Waits for the end of the workspace's indexing progress; returns its message.
pub fn indexed(client: &mut StdioClient) -> String {
    let token = client
        .wait_notification("$/progress", TIMEOUT, |p| p["value"]["title"].as_str().is_some_and(|t| t.contains("indexing")))
        .map(|n| n["params"]["token"].clone())
        .unwrap_or_else(|e| panic!("no indexing progress: {e}"));
    let end = client
        .wait_notification("$/progress", TIMEOUT, |p| p["token"] == token && p["value"]["kind"] == "end")
        .unwrap_or_else(|e| panic!("indexing did not end: {e}"));
    end["params"]["value"]["message"].as_str().unwrap_or("").to_owned()
}
