//! The remote backend (`model.endpoint`), end to end over stdio: the real binary, a real
//! llama-server on loopback started here (or, for cancellation and privacy, a scripted endpoint
//! that records what reaches it), the FIM test model.
//!
//! - over the inventory trace, every answer through the endpoint equals the in-process one;
//! - without a GGUF, prompts tokenized with the server's `/tokenize` are token for token the
//!   GGUF's, and the answers the same;
//! - an untrusted endpoint with `privacy: "redact"` gets the prompt with its secrets replaced
//!   (the server's own cache and detokenizer show the key never reached it), a trusted one
//!   as it is;
//! - a request the next key supersedes drops its connection, and the next answer arrives;
//! - an endpoint that is down falls back to the local model, or says why there is none;
//! - an untrusted endpoint never sees a file privacy keeps local;
//! - offline, nothing connects (strace);
//! - plain http to a host that is not loopback is refused, the other settings kept.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ghostline::bench::{http, peer, trace};
use ghostline::stdio_client::StdioClient;
use ghostline::typing::{self, TypedDoc};
use serde_json::{json, Value};

/// The settings both sides share: the bench's (greedy without the repetition penalty, which
/// servers apply to prompt tokens too: see `model/remote.rs`), every request a generation of
/// its own.
fn settings(endpoint: Option<&str>) -> Value {
    let mut model = json!({"path": fim_model(), "threads": 1, "contextSize": 4096});
    if let Some(url) = endpoint {
        model["endpoint"] = json!(url);
    }
    json!({
        "model": model,
        "completion": {"repeatPenalty": 1.0, "typedAhead": false, "generateAhead": false},
        "stats": {"enabled": false}
    })
}

fn last_timings(client: &mut StdioClient) -> Value {
    client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap()["result"].clone()
}

/// Types the trace with no pauses and asks where it asks: each request's suggestion, where it
/// was generated (`timings.backend`), its prompt, and the word begun that the prompt left out
/// for the model to write first (`Prompt::lead`; empty where none).
fn replay(options: Value, name: &str) -> Vec<(String, Option<String>, Value, String)> {
    let path = fixture(&format!("traces/{name}.json"));
    let (trace, file, text, at) = trace::load_trace(&path).unwrap();
    // Without `model.path`, the settings name no GGUF: `start_with` clears `$GHOSTLINE_MODEL`.
    let mut session = start_with(options);
    let client = &mut session;
    let mut doc = TypedDoc::open(client, typing::file_uri(&file), &trace.language_id, text, at);
    let mut out = Vec::new();
    for event in &trace.events {
        match event.key.as_deref() {
            Some("\u{8}") => doc.backspace(client),
            Some(k) => doc.insert(client, k),
            None => {}
        }
        if event.complete {
            let r = doc.inline_completion(client, TIMEOUT).unwrap();
            assert!(r.get("error").is_none(), "{r}");
            let text = r["result"]["items"][0]["insertText"].as_str().unwrap_or("").to_owned();
            let last = last_timings(client);
            let line_start = doc.text[..doc.at].rfind('\n').map_or(0, |i| i + 1);
            let lead = ghostline::engine::lead_start(&doc.text, line_start, doc.at).map(|s| &doc.text[s..doc.at]).filter(|l| !l.trim().is_empty());
            out.push((text, last["timings"]["backend"].as_str().map(str::to_owned), last["prompt"].clone(), lead.unwrap_or_default().to_owned()));
        }
    }
    assert!(session.shutdown(TIMEOUT).unwrap().success());
    out
}

/// A real llama-server on loopback with the FIM test model (one slot, one thread).
fn llama_server(args: &[String]) -> peer::LlamaServer {
    let bin = std::env::var("GHOSTLINE_LLAMA_SERVER")
        .expect("GHOSTLINE_LLAMA_SERVER must name llama-server: run scripts/test.sh (scripts/llama-server.sh builds it)");
    let model = fim_model();
    let launch = peer::Launch {
        bin: Path::new(&bin),
        model: &model,
        threads: 1,
        context: 4096,
        batch: None,
        args,
        log: None,
        ready_within: Duration::from_secs(60),
    };
    peer::LlamaServer::start(&launch).unwrap_or_else(|e| panic!("starting llama-server: {e}"))
}

/// Over the inventory trace, the prompt sent to llama-server is the in-process prompt token for
/// token, and the answer through it is the in-process answer wherever llama-server computes what
/// ghostline's llama.cpp does. This machine's llama-server (`scripts/llama-server.sh`) keeps
/// llama.cpp's default kernels, llamafile's `sgemm` and repacked weights, which ghostline's build
/// turns off (README, "Determinism"): its logits differ in the last bits, and on 4 of the trace's
/// 31 requests a near tie goes the other way. So where the two answers differ, the test asks the
/// server itself, cold, for the identical prompt: its own text must hold the answer that came
/// through ghostline and not the in-process one — the difference is the server's arithmetic,
/// not the remote backend's prompt, stream, stop rule or post-processing. The server runs
/// without flash attention, repacking or its host-memory prompt cache, so that its warm answer
/// is its cold one.
#[test]
fn answers_through_llama_server_equal_the_in_process_answers_over_a_trace() {
    let args: Vec<String> = ["-fa", "off", "--no-repack", "--cache-ram", "0"].iter().map(|s| s.to_string()).collect();
    let server = llama_server(&args);
    let url = format!("http://127.0.0.1:{}", server.port());
    let local = replay(settings(None), "inventory");
    let remote = replay(settings(Some(&url)), "inventory");
    assert_eq!(local.len(), remote.len());
    assert!(local.iter().all(|(_, b, _, _)| b.is_none()), "no endpoint, no backend named: {local:?}");
    assert!(remote.iter().all(|(_, b, _, _)| b.as_deref() == Some("endpoint")), "every answer from the endpoint: {remote:?}");
    assert!(local.iter().any(|(_, _, _, lead)| !lead.is_empty()), "no request with a word begun");
    let shown = local.iter().filter(|(t, _, _, _)| !t.is_empty()).count();
    assert!(shown * 2 > local.len(), "most requests get a suggestion: {local:?}");
    let mut differ = Vec::new();
    for (i, ((l, _, lp, lead), (r, _, rp, _))) in local.iter().zip(&remote).enumerate() {
        assert!(lp.as_array().is_some_and(|p| !p.is_empty()), "request {i}: no prompt in lastTimings");
        assert_eq!(lp, rp, "request {i}: the prompt sent to the endpoint is not the in-process prompt");
        if l == r {
            continue;
        }
        let mut body = json!({"prompt": lp, "n_predict": 64, "cache_prompt": false, "temperature": 0, "top_k": 1, "samplers": ["top_k"]});
        if !lead.is_empty() {
            // The server's own answer under the same rule: the word begun first, then anything.
            body["grammar"] = json!(ghostline::model::lead_grammar(lead));
        }
        let (status, cold) = server.post("/completion", &body, TIMEOUT).unwrap();
        assert_eq!(status, 200, "{cold}");
        let own = cold["content"].as_str().unwrap_or_default().to_owned();
        assert!(
            own.contains(r.trim()) && (l.trim().is_empty() || !own.contains(l.trim())),
            "request {i}: in-process {l:?}, through llama-server {r:?}, and llama-server's own answer to the same prompt {own:?}"
        );
        differ.push(i);
    }
    eprintln!("{} of {} requests: llama-server's kernels broke a near tie the other way: {differ:?}", differ.len(), local.len());
    assert!(differ.len() * 4 <= local.len(), "the answers differ on {differ:?}: more than near ties");
}

/// Without `model.path`, the prompts are tokenized with the server's `/tokenize` (and its FIM
/// markers, BOS and end tokens found by tokenizing their text): over the inventory trace they
/// are the GGUF's prompts token for token, and the answers the same.
#[test]
fn without_a_gguf_the_servers_tokenize_builds_the_same_prompts_and_answers() {
    let args: Vec<String> = ["-fa", "off", "--no-repack", "--cache-ram", "0"].iter().map(|s| s.to_string()).collect();
    let server = llama_server(&args);
    let url = format!("http://127.0.0.1:{}", server.port());
    let with_gguf = replay(settings(Some(&url)), "inventory");
    let mut options = settings(Some(&url));
    options["model"].as_object_mut().unwrap().remove("path");
    let without = replay(options, "inventory");
    assert_eq!(with_gguf.len(), without.len());
    assert!(with_gguf.iter().chain(&without).all(|(_, b, _, _)| b.as_deref() == Some("endpoint")), "every answer from the endpoint: {without:?}");
    assert!(with_gguf.iter().filter(|(t, _, _, _)| !t.is_empty()).count() * 2 > with_gguf.len(), "most requests get a suggestion: {with_gguf:?}");
    for (i, ((g, _, gp, _), (s, _, sp, _))) in with_gguf.iter().zip(&without).enumerate() {
        assert!(gp.as_array().is_some_and(|p| !p.is_empty()), "request {i}: no prompt in lastTimings");
        assert_eq!(gp, sp, "request {i}: the prompt tokenized by /tokenize is not the GGUF's");
        assert_eq!(g, s, "request {i}: the answer differs");
    }
}

/// A document holding an API key: the cursor is at the end of its last line.
const KEYED: &str = "import requests\n\nOPENAI_API_KEY = \"sk-proj-Zq8xW3vN5tY7uB2cD4eF6gH8jK0mL1nP\"\n\n\ndef fetch(url):\n    headers = {\"Authorization\": \"Bearer \" + OPENAI_API_KEY}\n    response = requests.get(url, headers=headers)\n    ";
const KEY: &str = "sk-proj-Zq8xW3vN5tY7uB2cD4eF6gH8jK0mL1nP";

/// With `privacy: "redact"`, an untrusted endpoint gets the prompt with the key replaced by a
/// placeholder, and a trusted one gets it as it is. Seen from the server: its own detokenizer
/// reads the prompt ghostline sent, and its KV cache holds what it decoded — asked for the
/// prompt with the key (`cache_prompt`, one slot), it reuses all of it after the trusted
/// request, and after the untrusted one nothing from where the key starts.
#[test]
fn an_untrusted_endpoint_gets_the_prompt_with_its_secrets_redacted_a_trusted_one_as_it_is() {
    let args: Vec<String> = ["-fa", "off", "--cache-ram", "0"].iter().map(|s| s.to_string()).collect();
    let server = llama_server(&args);
    let url = format!("http://127.0.0.1:{}", server.port());
    let uri = "file:///tmp/ghostline-remote/fetch.py";
    let lines: Vec<&str> = KEYED.split('\n').collect();
    let (line, character) = (lines.len() as u32 - 1, lines.last().unwrap().len() as u32);
    let ask = |trusted: bool| {
        let mut options = settings(Some(&url));
        options["model"]["endpointTrusted"] = json!(trusted);
        options["privacy"] = json!("redact");
        let mut client = start_with(options);
        open(&mut client, uri, KEYED);
        let r = inline_completion(&mut client, uri, line, character);
        assert!(r.get("error").is_none(), "{r}");
        let last = last_timings(&mut client);
        assert_eq!(last["timings"]["backend"], "endpoint", "{last}");
        assert!(client.shutdown(TIMEOUT).unwrap().success());
        (inline_text(&r), last["prompt"].as_array().unwrap().clone())
    };
    let text_of = |tokens: &[Value]| {
        let (status, r) = server.post("/detokenize", &json!({"tokens": tokens}), TIMEOUT).unwrap();
        assert_eq!(status, 200, "{r}");
        r["content"].as_str().unwrap().to_owned()
    };
    // How much of `prompt` the server's one slot holds decoded already.
    let cached = |prompt: &[Value]| {
        let body = json!({"prompt": prompt, "n_predict": 1, "cache_prompt": true, "temperature": 0, "top_k": 1, "samplers": ["top_k"]});
        let (status, r) = server.post("/completion", &body, TIMEOUT).unwrap();
        assert_eq!(status, 200, "{r}");
        r["timings"]["cache_n"].as_u64().unwrap() as usize
    };

    let (_, plain) = ask(true);
    assert!(text_of(&plain).contains(KEY), "trusted: the prompt as it is");
    assert!(cached(&plain) + 1 >= plain.len(), "trusted: the server decoded the whole prompt, key included");

    let (answer, redacted) = ask(false);
    let sent = text_of(&redacted);
    assert!(!sent.contains(KEY) && !sent.contains("Zq8xW3vN5tY7"), "untrusted: the key went to the server: {sent:?}");
    assert!(sent.contains("OPENAI_API_KEY = \"REDACTED_TOKEN_1\""), "untrusted: a placeholder in its place: {sent:?}");
    assert!(!answer.contains("REDACTED_"), "a placeholder in the answer is put back: {answer:?}");
    // The prompts are the same up to the key; the server's cache holds nothing of the key.
    let key_at = plain.iter().zip(&redacted).position(|(a, b)| a != b).expect("the prompts differ where the key is");
    assert!(key_at + 10 < plain.len(), "the key is inside the prompt, not at its end");
    let reused = cached(&plain);
    assert!(reused <= key_at, "the server held {reused} tokens of the prompt with the key: the key (from token {key_at}) reached it");
}

/// What the scripted endpoint saw.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    /// A `/completion` request (the first streams without end until the client leaves).
    Completion,
    /// The client closed the connection of a streaming answer, this long after the request.
    Closed(Duration),
    /// A `/completion` request's body (recorded before its `Completion`).
    Body(String),
}

/// An endpoint on loopback that answers `/completion`: the first request with a stream that
/// never ends on its own (one token each 50 ms), every later one at once; `/props` 404.
struct Scripted {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    fn start() -> Scripted {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let record = Arc::clone(&record);
                std::thread::spawn(move || serve(stream, &record));
            }
        });
        Scripted { port, seen }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn wait_for(&self, what: impl Fn(&[Seen]) -> bool, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if what(&self.seen()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

/// Reads one request (head and `Content-Length` body); returns its path and body.
fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                .unwrap_or(0);
            while data.len() < end + 4 + length {
                let n = stream.read(&mut buf).ok()?;
                if n == 0 {
                    break;
                }
                data.extend_from_slice(&buf[..n]);
            }
            let body = String::from_utf8_lossy(&data[(end + 4).min(data.len())..]).into_owned();
            return head.split_whitespace().nth(1).map(|path| (path.to_owned(), body));
        }
    }
}

fn serve(mut stream: TcpStream, seen: &Mutex<Vec<Seen>>) {
    let Some((path, body)) = read_request(&mut stream) else { return };
    if path != "/completion" {
        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    let first = {
        let mut seen = seen.lock().unwrap();
        seen.push(Seen::Body(body));
        seen.push(Seen::Completion);
        seen.iter().filter(|s| **s == Seen::Completion).count() == 1
    };
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
    if !first {
        let _ = stream.write_all(b"data: {\"content\":\"total = 0\",\"tokens\":[],\"stop\":true}\n\n");
        return;
    }
    let started = Instant::now();
    stream.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    loop {
        if stream.write_all(b"data: {\"content\":\" x\",\"tokens\":[],\"stop\":false}\n\n").is_err() {
            break;
        }
        let mut byte = [0u8; 1];
        match stream.read(&mut byte) {
            Ok(0) => break,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {}
            _ => break,
        }
        if started.elapsed() > Duration::from_secs(30) {
            return;
        }
    }
    seen.lock().unwrap().push(Seen::Closed(started.elapsed()));
}

const DOC: &str = "def invoice(items):\n    total = \n    for item in items:\n        total += item.price\n    return total\n";

fn start_with(options: Value) -> TestServer {
    let mut client = spawn();
    initialize(&mut client, json!({}), options);
    wait_ready(&mut client);
    client
}

#[test]
fn the_next_key_drops_the_connection_and_the_next_answer_arrives() {
    let endpoint = Scripted::start();
    let mut client = start_with(settings(Some(&endpoint.url())));
    let uri = "file:///tmp/ghostline-remote/invoice.py";
    open(&mut client, uri, DOC);
    let first = client.send_request(
        "textDocument/inlineCompletion",
        json!({"textDocument": {"uri": uri}, "position": {"line": 1, "character": 12}, "context": {"triggerKind": 2}}),
    );
    assert!(endpoint.wait_for(|s| s.contains(&Seen::Completion), Duration::from_secs(30)), "the request never reached the endpoint");
    std::thread::sleep(Duration::from_millis(200));
    let typed = Instant::now();
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"range": {"start": {"line": 1, "character": 12}, "end": {"line": 1, "character": 12}}, "text": "0"}]}),
    );
    let answer = client.wait_response(first, TIMEOUT).unwrap();
    assert_eq!(answer["result"]["items"][0]["insertText"].as_str().unwrap_or(""), "", "a superseded request shows nothing: {answer}");
    assert!(
        endpoint.wait_for(|s| s.iter().any(|x| matches!(x, Seen::Closed(_))), Duration::from_secs(2)),
        "the superseded stream was not dropped within 2 s of the key: {:?}",
        endpoint.seen()
    );
    let dropped_after = typed.elapsed();
    let streamed = endpoint.seen().iter().find_map(|s| if let Seen::Closed(d) = s { Some(*d) } else { None }).unwrap();
    // 64 tokens (completion.maxTokens) at one per 50 ms would have taken 3.2 s.
    assert!(streamed < Duration::from_millis(2500), "dropped by the key, not by the token cap: after {streamed:?}");
    // The next request gets the endpoint's answer at once.
    let r = inline_completion(&mut client, uri, 1, 13);
    let last = last_timings(&mut client);
    assert_eq!(last["timings"]["backend"], "endpoint", "{last}");
    assert_eq!(endpoint.seen().iter().filter(|s| **s == Seen::Completion).count(), 2, "{:?}", endpoint.seen());
    assert!(r.get("error").is_none(), "{r}");
    eprintln!("connection dropped {} ms after the key", dropped_after.as_millis());
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// A key being typed at the cursor is a word begun: the prompt leaves it out for the model to
/// write (`Prompt::lead`). An endpoint whose prompts are redacted is never given it — not as a
/// grammar, not as tokens to go on from — since what redaction would have caught in the prompt
/// is now outside it.
#[test]
fn a_redacted_endpoint_is_never_given_the_word_being_typed() {
    let endpoint = Scripted::start();
    let uri = "file:///tmp/ghostline-remote/keyed.py";
    let doc = format!("import requests\n\nOPENAI_API_KEY = \"{KEY}\n\n\ndef fetch(url):\n    return requests.get(url)\n");
    let mut options = settings(Some(&endpoint.url()));
    options["model"]["endpointTrusted"] = json!(false);
    options["privacy"] = json!("redact");
    let mut client = start_with(options);
    open(&mut client, uri, &doc);
    let r = inline_completion(&mut client, uri, 2, (KEY.len() + 18) as u32);
    assert!(r.get("error").is_none(), "{r}");
    let last = last_timings(&mut client);
    assert_eq!(last["timings"]["backend"], "endpoint", "{last}");
    let bodies: Vec<String> = endpoint.seen().into_iter().filter_map(|s| if let Seen::Body(b) = s { Some(b) } else { None }).collect();
    assert!(!bodies.is_empty(), "the endpoint was not asked");
    let tail = &KEY[KEY.rfind('-').unwrap() + 1..];
    for body in &bodies {
        assert!(!body.contains(tail) && !body.contains("grammar"), "the key being typed reached the endpoint: {body}");
    }
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn an_untrusted_endpoint_never_sees_a_file_privacy_keeps_local() {
    let endpoint = Scripted::start();
    let uri = "file:///tmp/ghostline-remote/invoice.py";
    // Loopback is trusted unless said otherwise; privacy is local-only by default.
    let mut options = settings(Some(&endpoint.url()));
    options["model"]["endpointTrusted"] = json!(false);
    let mut client = start_with(options.clone());
    open(&mut client, uri, DOC);
    let r = inline_completion(&mut client, uri, 1, 12);
    assert!(!inline_text(&r).is_empty(), "the local model answers: {r}");
    let last = last_timings(&mut client);
    let backend = last["timings"]["backend"].as_str().unwrap_or_default().to_owned();
    assert!(backend.starts_with("local: privacy is local-only"), "{last}");
    assert!(endpoint.seen().is_empty(), "the endpoint was asked: {:?}", endpoint.seen());
    assert!(client.shutdown(TIMEOUT).unwrap().success());

    // With privacy "allow", the same file goes.
    options["privacy"] = json!("allow");
    let mut client = start_with(options);
    open(&mut client, uri, DOC);
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"range": {"start": {"line": 1, "character": 12}, "end": {"line": 1, "character": 12}}, "text": "0"}]}),
    );
    // The scripted endpoint streams its first answer without end: ask, then supersede it.
    let id = client.send_request(
        "textDocument/inlineCompletion",
        json!({"textDocument": {"uri": uri}, "position": {"line": 1, "character": 13}, "context": {"triggerKind": 2}}),
    );
    assert!(endpoint.wait_for(|s| s.contains(&Seen::Completion), Duration::from_secs(30)), "privacy allow: the endpoint is asked");
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"range": {"start": {"line": 1, "character": 13}, "end": {"line": 1, "character": 13}}, "text": ";"}]}),
    );
    client.wait_response(id, TIMEOUT).unwrap();
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn an_endpoint_that_is_down_falls_back_or_says_why() {
    let port = http::free_port().unwrap();
    let down = format!("http://127.0.0.1:{port}");
    let uri = "file:///tmp/ghostline-remote/invoice.py";
    let mut options = settings(Some(&down));
    let mut client = start_with(options.clone());
    open(&mut client, uri, DOC);
    let r = inline_completion(&mut client, uri, 1, 12);
    assert!(!inline_text(&r).is_empty(), "the local model answers: {r}");
    let last = last_timings(&mut client);
    assert!(last["timings"]["backend"].as_str().unwrap_or_default().starts_with("local: the endpoint could not be reached"), "{last}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());

    options["model"]["localFallback"] = json!(false);
    let mut client = start_with(options);
    open(&mut client, uri, DOC);
    let r = inline_completion(&mut client, uri, 1, 12);
    assert_eq!(inline_text(&r), "", "no local model to fall back on: no suggestion");
    let last = last_timings(&mut client);
    assert!(last["timings"]["backend"].as_str().unwrap_or_default().starts_with("none: the endpoint could not be reached"), "{last}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn offline_the_endpoint_is_never_connected_to() {
    let dir = TempDir::new("remote-offline");
    let trace_file = dir.join("strace.log");
    let args = strace_args(&trace_file, &binary(), &["lsp"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut client = StdioClient::spawn(Path::new("strace"), &args, &[("GHOSTLINE_MODEL", "")], Stdio::inherit())
        .expect("strace (apt package strace, installed by .ci/run)");
    let mut options = settings(Some("http://127.0.0.1:9"));
    options["offline"] = json!(true);
    options["privacy"] = json!("allow");
    initialize(&mut client, json!({}), options);
    wait_ready(&mut client);
    let uri = format!("file://{}", dir.join("invoice.py").display());
    open(&mut client, &uri, DOC);
    let r = inline_completion(&mut client, &uri, 1, 12);
    assert!(!inline_text(&r).is_empty(), "the local model answers: {r}");
    let last = last_timings(&mut client);
    assert!(last["timings"]["backend"].as_str().unwrap_or_default().starts_with("local: offline"), "{last}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
    assert_no_network(&trace_file, "the server with an endpoint");
}

#[test]
fn plain_http_to_a_remote_host_is_refused_and_the_other_settings_kept() {
    let mut options = settings(Some("http://gpu.team.example:8080"));
    options["completion"]["maxTokens"] = json!(3);
    let mut client = start_with(options);
    let said = log_messages(&client);
    assert!(
        said.iter().any(|m| m.contains("model.endpoint") && m.contains("https") && m.contains("gpu.team.example")),
        "the refusal names the key, the host and the fix: {said:?}"
    );
    let uri = "file:///tmp/ghostline-remote/invoice.py";
    open(&mut client, uri, DOC);
    let r = inline_completion(&mut client, uri, 1, 12);
    assert!(r.get("error").is_none(), "{r}");
    let last = last_timings(&mut client);
    assert!(last["timings"].get("backend").is_none(), "no endpoint in force, so generated in-process: {last}");
    let generated = last["timings"]["generated_tokens"].as_u64().unwrap();
    assert!(generated <= 3, "completion.maxTokens kept: {generated} tokens");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}
