//! The first run over stdio: the real server with no model configured and an empty Hugging Face
//! cache asks with `window/showMessageRequest` (download the recommended model, choose a file,
//! not now); *Download* pulls the real test model from the loopback Hub of `common/hub.rs`
//! (served under the catalog's Qwen coder repository names) with `$/progress`, then the model
//! loads with no setting edited and completes; a corrupt download is refused with a message and
//! nothing kept. *Not now* downloads nothing and asks no more; *Choose a file…* opens the VS Code
//! extension's dialog or names the setting; offline asks nothing, says how to configure a path
//! and opens no socket. A client that never answers the question, or answers it with an error,
//! is told with `showMessage` what is missing and the command that fixes it; so is a download
//! refused by an unreachable Hub, the disk or the memory budget. Without `workDoneProgress` the
//! download is followed in log lines. `offer()` itself is tested against the loopback Hub.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::hub::FakeHub;
use common::*;
use ghostline::pull::catalog::KNOWN;
use ghostline::pull::first_run;
use ghostline::pull::hub::Hub;
use ghostline::stdio_client::{MessageRequests, StdioClient};
use serde_json::{json, Value};

/// The test model under every catalog name (the offer is whatever this machine's budget picks).
fn hub() -> FakeHub {
    let files: Vec<(&str, &str)> = KNOWN.iter().map(|k| (k.repo, k.file)).collect();
    FakeHub::start(&files)
}

/// An empty home, caches and Hub cache for one server; the Hub is the loopback one.
fn environment(dir: &Path, hub: &FakeHub) -> Vec<(String, String)> {
    let p = |rel: &str| dir.join(rel).to_string_lossy().into_owned();
    [
        ("HF_ENDPOINT", hub.endpoint.clone()),
        ("HF_HOME", p("hf-home")),
        ("HF_HUB_CACHE", p("hf-home/hub")),
        ("HF_TOKEN", String::new()),
        ("HF_HUB_OFFLINE", String::new()),
        ("HOME", p("home")),
        ("XDG_CACHE_HOME", p("xdg-cache")),
        ("LLAMA_CACHE", String::new()),
        ("OLLAMA_MODELS", String::new()),
        ("GHOSTLINE_LMSTUDIO_MODELS", String::new()),
        ("GHOSTLINE_MODEL", String::new()),
        ("GHOSTLINE_QUESTION_WAIT_MS", QUESTION_WAIT_MS.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The question's wait before the fallback message, shortened (the server's default is 30 s).
const QUESTION_WAIT_MS: &str = "1500";

fn spawn_in(program: &Path, args: &[&str], env: &[(String, String)]) -> StdioClient {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    StdioClient::spawn(program, args, &env, Stdio::inherit()).unwrap()
}

/// A budget that fits the 1.5B (CPU) or the 3B (GPU backend), whatever this machine has.
fn options() -> Value {
    json!({"model": {"memoryBudgetMb": 4096}})
}

/// A server in `dir`'s empty environment, initialized with `capabilities` and [`options`],
/// that answers the first-run question with the choice starting with `answer`; returns it once
/// the question came, and the question.
fn asked(dir: &Path, hub: &FakeHub, answer: &str, capabilities: Value) -> (StdioClient, Value) {
    let mut client = spawn_in(&binary(), &["lsp"], &environment(dir, hub));
    client.answer_message_requests(Some(answer));
    initialize(&mut client, capabilities, options());
    let question = question(&mut client);
    (client, question)
}

fn question(client: &mut StdioClient) -> Value {
    client
        .wait_notification("window/showMessageRequest", TIMEOUT, |_| true)
        .unwrap_or_else(|e| panic!("no first-run question: {e}; {:?}", client.notifications))["params"]
        .clone()
}

fn titles(request: &Value) -> Vec<String> {
    request["actions"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap().to_owned()).collect()
}

fn questions(client: &StdioClient) -> usize {
    client.notifications.iter().filter(|n| n["method"] == "window/showMessageRequest").count()
}

/// The `$/progress` values of the download (not the model load).
fn download_progress(client: &StdioClient) -> Vec<Value> {
    client
        .notifications
        .iter()
        .filter(|n| n["method"] == "$/progress" && n["params"]["token"].as_str().is_some_and(|t| t.starts_with("ghostline/pull/")))
        .map(|n| n["params"]["value"].clone())
        .collect()
}

fn blobs(hf_home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for repo in std::fs::read_dir(hf_home.join("hub")).into_iter().flatten().flatten() {
        out.extend(std::fs::read_dir(repo.path().join("blobs")).into_iter().flatten().flatten().map(|e| e.path()));
    }
    out
}

#[test]
fn download_pulls_with_progress_then_the_model_loads_and_completes() {
    let hub = hub();
    let dir = TempDir::new("first-run-download");
    let (mut client, asked) = asked(&dir, &hub, "Download ", json!({"window": {"workDoneProgress": true}}));
    let titles = titles(&asked);
    assert_eq!(titles.len(), 3, "{asked}");
    // The size is the Hub's (the served file's), not the catalog's estimate.
    let mb = format!("({:.0} MB)", hub.body.len() as f64 / 1e6);
    assert!(titles[0].starts_with("Download qwen2.5-coder-") && titles[0].ends_with(&mb), "{titles:?}, want {mb}");
    assert_eq!(&titles[1..], ["Choose a file…", "Not now"]);
    assert!(asked["message"].as_str().unwrap().contains("no model configured"), "{asked}");
    // The one request made before the answer (the size) is said in the question.
    assert!(asked["message"].as_str().unwrap().contains("one HEAD request"), "{asked}");

    // The download's progress: begin, reports with a percentage and a rate, end.
    client
        .wait_notification("$/progress", TIMEOUT, |p| {
            p["token"].as_str().is_some_and(|t| t.starts_with("ghostline/pull/")) && p["value"]["kind"] == "end"
        })
        .unwrap_or_else(|e| panic!("the download did not end: {e}; {:?}", log_messages(&client)));
    let steps = download_progress(&client);
    assert_eq!(steps[0]["kind"], "begin", "{steps:?}");
    assert!(steps[0]["title"].as_str().unwrap().contains("downloading qwen2.5-coder-"), "{steps:?}");
    let reports: Vec<&Value> = steps.iter().filter(|s| s["kind"] == "report").collect();
    assert!(!reports.is_empty(), "{steps:?}");
    let last = reports.last().unwrap();
    assert_eq!(last["percentage"], 100, "{steps:?}");
    assert!(last["message"].as_str().unwrap().contains("MB/s"), "{steps:?}");
    assert_eq!(steps.last().unwrap()["kind"], "end");

    // Then the model loads from the Hub cache, with no setting edited, and completes.
    wait_ready(&mut client);
    client
        .wait_notification("window/showMessage", TIMEOUT, |p| {
            p["message"].as_str().is_some_and(|m| m.contains("found in Hugging Face cache") && m.contains("Qwen2.5-Coder"))
        })
        .unwrap_or_else(|e| panic!("{e}: {:?}", log_messages(&client)));
    let messages = log_messages(&client);
    assert!(!messages.iter().any(|m| m.contains("no model configured, and none found in the")), "warned anyway: {messages:?}");
    // One blob, the model's, under the Qwen coder repository offered.
    let blobs = blobs(&dir.join("hf-home"));
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    assert!(blobs[0].ends_with(&hub.sha256) && blobs[0].to_string_lossy().contains("models--ggml-org--Qwen2.5-Coder-"), "{blobs:?}");
    let uri = "file:///tmp/first_run.py";
    open(&mut client, uri, "def add(a, b):\n    return ");
    let text = inline_text(&inline_completion(&mut client, uri, 1, 11));
    assert!(!text.is_empty(), "no completion after the download");
    assert_eq!(questions(&client), 1);
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn a_corrupt_download_is_refused_with_a_message_and_the_server_stays_up() {
    let hub = hub();
    let mut altered = (*hub.body).clone();
    let mid = altered.len() / 2;
    altered[mid] ^= 0x40;
    hub.behaviour.lock().unwrap().altered = Some(std::sync::Arc::new(altered));
    let dir = TempDir::new("first-run-corrupt");
    let (mut client, _) = asked(&dir, &hub, "Download ", json!({"window": {"workDoneProgress": true}}));
    let failed = client
        .wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == 1 && p["message"].as_str().is_some_and(|m| m.contains("was not downloaded")))
        .unwrap_or_else(|e| panic!("{e}: {:?}", log_messages(&client)));
    assert!(failed["params"]["message"].as_str().unwrap().contains("checksum mismatch"), "{failed}");
    let steps = download_progress(&client);
    assert_eq!(steps.last().map(|s| (s["kind"].clone(), s["message"].clone())), Some((json!("end"), json!("failed"))), "{steps:?}");
    // Nothing half-written is kept or used; the server still answers.
    assert!(blobs(&dir.join("hf-home")).is_empty(), "{:?}", blobs(&dir.join("hf-home")));
    let r = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
    assert!(r.get("error").is_none(), "{r}");
    assert!(!log_messages(&client).iter().any(|m| m.contains("model ready")));
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn not_now_downloads_nothing_and_does_not_ask_again() {
    let hub = hub();
    let dir = TempDir::new("first-run-not-now");
    let (mut client, _) = asked(&dir, &hub, "Not now", json!({"window": {"workDoneProgress": true}}));
    // A log line, not another message box: completions are off this session.
    client
        .wait_notification("window/logMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("none downloaded (not now)")))
        .unwrap();
    // A settings change (which restarts the model) does not ask again.
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"model": {"contextSize": 2048}}}));
    let uri = "file:///tmp/not_now.py";
    open(&mut client, uri, "def add(a, b):\n    return ");
    // No model: the server answers, with no error and nothing to suggest, and stays up.
    let r = inline_completion(&mut client, uri, 1, 11);
    assert_eq!(inline_text(&r), "", "{r}");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let _ = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
    assert_eq!(questions(&client), 1, "asked again: {:?}", client.notifications);
    assert!(hub.seen("cdn", "GET").is_empty(), "downloaded anyway");
    assert!(download_progress(&client).is_empty());
    assert!(blobs(&dir.join("hf-home")).is_empty());
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn choose_a_file_opens_the_extensions_dialog_or_says_which_setting() {
    let hub = hub();
    // A client without the extension's capability: a message naming the setting.
    let dir = TempDir::new("first-run-choose");
    let (mut client, _) = asked(&dir, &hub, "Choose a file", json!({}));
    let shown = client
        .wait_notification("window/showMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("model.path")))
        .unwrap();
    assert!(shown["params"]["message"].as_str().unwrap().contains("languages.toml"), "{shown}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());

    // The VS Code extension declares it opens a dialog: it is told to.
    let (mut client, _) = asked(&dir, &hub, "Choose a file", json!({"experimental": {"ghostline": {"chooseModel": true}}}));
    client.wait_notification("ghostline/chooseModel", TIMEOUT, |_| true).unwrap();
    assert!(hub.seen("cdn", "GET").is_empty());
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn offline_asks_nothing_says_how_to_configure_and_opens_no_socket() {
    let hub = hub();
    let dir = TempDir::new("first-run-offline");
    let trace = dir.join("strace.log");
    let strace = strace_args(&trace, &binary(), &["lsp"]);
    let strace: Vec<&str> = strace.iter().map(String::as_str).collect();
    // `offline: true` in the settings, then HF_HUB_OFFLINE=1 in the environment.
    for (options, hub_offline) in [(json!({"offline": true, "model": {"memoryBudgetMb": 4096}}), ""), (options(), "1")] {
        let mut env = environment(&dir, &hub);
        env.push(("HF_HUB_OFFLINE".into(), hub_offline.into()));
        let mut client = spawn_in(Path::new("strace"), &strace, &env);
        client.answer_message_requests(Some("Download "));
        initialize(&mut client, json!({"window": {"workDoneProgress": true}}), options);
        let said = client
            .wait_notification("window/showMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("model.path")))
            .unwrap_or_else(|e| panic!("{e}: {:?}", log_messages(&client)));
        assert!(said["params"]["message"].as_str().unwrap().contains("no model configured"), "{said}");
        let _ = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
        assert_eq!(questions(&client), 0, "asked offline: {:?}", client.notifications);
        assert!(client.shutdown(TIMEOUT).unwrap().success());
        assert_no_network(&trace, "the server with no model");
    }
    assert!(hub.seen.lock().unwrap().is_empty(), "the Hub was contacted");
}

/// A server in the environment `env` whose client answers the question
/// as `how` says; returns it once the question came.
fn asked_with(env: Vec<(String, String)>, how: MessageRequests, answer: Option<&str>, capabilities: Value, options: Value) -> StdioClient {
    let mut client = spawn_in(&binary(), &["lsp"], &env);
    client.message_requests(how);
    client.answer_message_requests(answer);
    initialize(&mut client, capabilities, options);
    let _ = question(&mut client);
    client
}

fn shown(client: &mut StdioClient, kind: u64, contains: &str) -> String {
    client
        .wait_notification("window/showMessage", TIMEOUT, |p| p["type"] == kind && p["message"].as_str().is_some_and(|m| m.contains(contains)))
        .unwrap_or_else(|e| panic!("no showMessage with {contains:?}: {e}; {:?}", client.notifications))["params"]["message"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The fix every fallback message names: the pull command for the model offered.
fn names_the_fix(message: &str) {
    assert!(message.contains("ghostline pull qwen2.5-coder-") && message.contains("model.path"), "{message}");
}

#[test]
fn a_client_that_never_answers_is_told_what_is_missing_and_how_to_get_it() {
    let hub = hub();
    let dir = TempDir::new("first-run-silent");
    let mut client = asked_with(environment(&dir, &hub), MessageRequests::Ignore, None, json!({}), options());
    let message = shown(&mut client, 2, "got no answer");
    names_the_fix(&message);
    // Completions: empty, not an error; nothing was downloaded.
    let uri = "file:///tmp/silent.py";
    open(&mut client, uri, "def add(a, b):\n    return ");
    assert_eq!(inline_text(&inline_completion(&mut client, uri, 1, 11)), "");
    assert!(hub.seen("cdn", "GET").is_empty());
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn a_client_that_answers_with_an_error_gets_a_message_not_only_a_log_line() {
    let hub = hub();
    let dir = TempDir::new("first-run-method-not-found");
    let how = MessageRequests::Fail(-32601, "Method not found: window/showMessageRequest".into());
    let mut client = asked_with(environment(&dir, &hub), how, Some("Download "), json!({}), options());
    let message = shown(&mut client, 2, "could not show the download question");
    assert!(message.contains("Method not found"), "{message}");
    names_the_fix(&message);
    let _ = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
    assert!(hub.seen("cdn", "GET").is_empty());
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn without_work_done_progress_the_download_is_followed_in_log_lines() {
    let hub = hub();
    let dir = TempDir::new("first-run-no-progress");
    let mut client = asked_with(environment(&dir, &hub), MessageRequests::Answer, Some("Download "), json!({}), options());
    client
        .wait_notification("window/logMessage", TIMEOUT, |p| {
            p["message"].as_str().is_some_and(|m| m.contains("downloading qwen2.5-coder-") && m.contains("100%") && m.contains("MB/s"))
        })
        .unwrap_or_else(|e| panic!("no log line of the download: {e}; {:?}", log_messages(&client)));
    wait_ready(&mut client);
    assert!(download_progress(&client).is_empty(), "{:?}", download_progress(&client));
    assert!(!client.notifications.iter().any(|n| n["method"] == "window/workDoneProgress/create"));
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn an_unreachable_hub_is_said_with_the_command_that_retries() {
    let hub = hub();
    let dir = TempDir::new("first-run-unreachable");
    // A port nothing listens on (1: refused at once).
    let mut env = environment(&dir, &hub);
    env.retain(|(k, _)| k != "HF_ENDPOINT");
    env.push(("HF_ENDPOINT".into(), "http://127.0.0.1:1".into()));
    let mut client = spawn_in(&binary(), &["lsp"], &env);
    client.answer_message_requests(Some("Download "));
    initialize(&mut client, json!({"window": {"workDoneProgress": true}}), options());
    let asked = question(&mut client);
    assert!(asked["message"].as_str().unwrap().contains("catalog's estimate"), "{asked}");
    let message = shown(&mut client, 1, "was not downloaded");
    assert!(message.contains("cannot reach http://127.0.0.1:1"), "{message}");
    names_the_fix(&message);
    assert!(blobs(&dir.join("hf-home")).is_empty());
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn the_memory_budget_or_the_disk_refuses_before_anything_is_downloaded() {
    // The Hub announces a file larger than the 4096 MiB budget, then one larger than any disk
    // (with a budget that holds it).
    for (announced, options, says) in [
        (100_000_000_000u64, options(), "the memory budget cannot hold this model"),
        (1u64 << 59, json!({"model": {"memoryBudgetMb": 1u64 << 40}}), "not enough disk space"),
    ] {
        let hub = hub();
        hub.behaviour.lock().unwrap().announced_size = Some(announced);
        let dir = TempDir::new("first-run-refused");
        let mut client = asked_with(environment(&dir, &hub), MessageRequests::Answer, Some("Download "), json!({"window": {"workDoneProgress": true}}), options);
        let message = shown(&mut client, 1, "was not downloaded");
        assert!(message.contains(says), "{message}");
        names_the_fix(&message);
        assert!(hub.seen("cdn", "GET").is_empty(), "downloaded anyway");
        assert!(blobs(&dir.join("hf-home")).is_empty());
        let _ = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
        assert!(client.shutdown(TIMEOUT).unwrap().success());
    }
}

#[test]
fn the_offer_is_the_recommendation_with_the_hubs_size_else_the_catalogs() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut config = ghostline::config::Options::default().resolve(None);
    config.model.memory_budget_mb = Some(4096);
    let known = first_run::recommended(&config).unwrap();
    let hub = hub();
    let at = |endpoint: &str| Hub::new(endpoint, None);

    // The Hub answers: its size, from one HEAD on the recommended file.
    let offer = runtime.block_on(first_run::offer_from(&config, at(&hub.endpoint))).unwrap();
    assert_eq!((offer.known.name, offer.size, offer.size_from_hub), (known.name, hub.body.len() as u64, true));
    let heads: Vec<String> = hub.seen("hub", "HEAD").iter().map(|h| h.path.clone()).collect();
    assert_eq!(heads, [format!("/{}/resolve/main/{}", known.repo, known.file)]);
    assert_eq!(offer.title(), format!("Download {} ({:.0} MB)", known.name, hub.body.len() as f64 / 1e6));

    // It refuses (404) or cannot be reached, or there is no usable endpoint: the catalog's size.
    hub.behaviour.lock().unwrap().hub_status = Some(404);
    for endpoint in [at(&hub.endpoint), at("http://127.0.0.1:1"), Err("no endpoint".to_owned())] {
        let offer = runtime.block_on(first_run::offer_from(&config, endpoint)).unwrap();
        assert_eq!((offer.known.name, offer.size, offer.size_from_hub), (known.name, known.approx_bytes, false));
    }

    // Offline, or nothing fits the budget: no offer, and nothing is sent.
    let fresh = FakeHub::start(&[(known.repo, known.file)]);
    let mut offline = config.clone();
    offline.offline = true;
    let mut small = config.clone();
    small.model.memory_budget_mb = Some(100);
    for c in [offline, small] {
        assert_eq!(runtime.block_on(first_run::offer_from(&c, at(&fresh.endpoint))), None);
    }
    assert!(fresh.seen.lock().unwrap().is_empty(), "{:?}", fresh.seen.lock().unwrap());
}
