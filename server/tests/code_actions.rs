//! Code actions end to end: the real binary over stdio, the real test model locally, and as the
//! "cloud" a real llama-server (llama.cpp's OpenAI-compatible server, scripts/llama-server.sh)
//! on 127.0.0.1 serving the same model. A loopback recorder sits in front of it: it records
//! every request byte (for the privacy canaries and request counts) and injects the faults
//! (500, 429 with Retry-After, a hang past the timeout, a stream cut mid-way); everything it
//! does not inject, it forwards to the real server.

mod common;

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ghostline::bench::{http, peer};
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

const GEOMETRY: &str = "import math\n\n\ndef hypotenuse(a, b):\n    return math.sqrt(a * a + b * b)\n";

/// A real llama-server on a free loopback port (the bench's launcher, one slot, one thread);
/// killed on drop.
struct LlamaServer {
    _server: peer::LlamaServer,
    port: u16,
}

impl LlamaServer {
    fn start() -> LlamaServer {
        let bin = std::env::var("GHOSTLINE_LLAMA_SERVER")
            .expect("GHOSTLINE_LLAMA_SERVER must name llama-server: run scripts/test.sh (scripts/llama-server.sh builds it)");
        let model = model();
        let launch = peer::Launch {
            bin: Path::new(&bin),
            model: &model,
            threads: 1,
            context: 4096,
            batch: None,
            args: &[],
            log: None,
            ready_within: Duration::from_secs(60),
        };
        let server = peer::LlamaServer::start(&launch).unwrap_or_else(|e| panic!("starting llama-server: {e}"));
        LlamaServer { port: server.port(), _server: server }
    }
}

fn free_port() -> u16 {
    http::free_port().unwrap()
}

/// What the recorder does with the next request.
#[derive(Debug, Clone)]
enum Fault {
    /// Answer with this status and headers, without forwarding.
    Status(u16, &'static str),
    /// Read the request, say nothing for this long, then close.
    Hang(Duration),
    /// Forward, but pass on only this many bytes of the answer, then close.
    Cut(usize),
}

/// A loopback recorder in front of the real server (or of nothing, when `upstream` is None).
#[derive(Clone)]
struct Recorder {
    port: u16,
    requests: Arc<Mutex<Vec<(Instant, String)>>>,
    connections: Arc<Mutex<usize>>,
    faults: Arc<Mutex<VecDeque<Fault>>>,
}

impl Recorder {
    fn start(upstream: Option<u16>) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let r = Recorder {
            port: listener.local_addr().unwrap().port(),
            requests: Arc::default(),
            connections: Arc::default(),
            faults: Arc::default(),
        };
        let me = r.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                *me.connections.lock().unwrap() += 1;
                let me = me.clone();
                std::thread::spawn(move || me.serve(stream, upstream));
            }
        });
        r
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn fault(&self, f: Fault) {
        self.faults.lock().unwrap().push_back(f);
    }

    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    fn serve(&self, mut client: TcpStream, upstream: Option<u16>) {
        client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // The request: headers, then Content-Length bytes of body.
        let mut buf = Vec::new();
        let mut byte = [0u8; 4096];
        let header_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match client.read(&mut byte) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&byte[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
        let length = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
            .unwrap_or(0);
        while buf.len() < header_end + length {
            match client.read(&mut byte) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&byte[..n]),
            }
        }
        let request = String::from_utf8_lossy(&buf).to_string();
        self.requests.lock().unwrap().push((Instant::now(), request));
        let fault = self.faults.lock().unwrap().pop_front();
        match fault {
            Some(Fault::Status(code, headers)) => {
                let body = format!("{{\"error\":{{\"message\":\"injected {code}\"}}}}");
                let _ = write!(
                    client,
                    "HTTP/1.1 {code} Injected\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
                    body.len()
                );
            }
            Some(Fault::Hang(d)) => std::thread::sleep(d),
            cut => {
                let Some(port) = upstream else { return };
                let Ok(mut up) = TcpStream::connect(("127.0.0.1", port)) else { return };
                // One request per connection: the server closes after answering.
                let head = head.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
                let _ = up.write_all(head.as_bytes());
                let _ = up.write_all(&buf[header_end..]);
                let limit = match cut {
                    Some(Fault::Cut(n)) => n,
                    _ => usize::MAX,
                };
                let mut sent = 0;
                while sent < limit {
                    match up.read(&mut byte) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let n = n.min(limit - sent);
                            if client.write_all(&byte[..n]).is_err() {
                                break;
                            }
                            sent += n;
                        }
                    }
                }
            }
        }
        let _ = client.shutdown(std::net::Shutdown::Both);
    }
}

/// A workspace folder with `geometry.py` (and whatever else a test writes).
fn workspace(name: &str) -> TempDir {
    let dir = TempDir::new(&format!("actions-{name}"));
    std::fs::write(dir.join("geometry.py"), GEOMETRY).unwrap();
    dir
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// Capabilities of an editor with progress, versioned edits and file creation.
fn capabilities(resolve_command: bool) -> Value {
    let mut c = json!({
        "window": {"workDoneProgress": true},
        "workspace": {"workspaceEdit": {"documentChanges": true, "resourceOperations": ["create"]}},
        "textDocument": {"codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix", "refactor"]}}}}
    });
    if resolve_command {
        c["textDocument"]["codeAction"]["resolveSupport"] = json!({"properties": ["edit", "command"]});
    }
    c
}

fn start(root: &Path, settings: Value, resolve_command: bool) -> TestServer {
    let mut client = spawn();
    let mut options = settings;
    options["model"] = json!({"path": model(), "threads": 1});
    let r = client
        .request(
            "initialize",
            json!({"processId": null, "rootUri": uri(root), "workspaceFolders": [{"uri": uri(root), "name": "ws"}],
                   "capabilities": capabilities(resolve_command), "initializationOptions": options}),
            TIMEOUT,
        )
        .unwrap();
    assert!(r.get("error").is_none(), "{r}");
    let caps = &r["result"]["capabilities"];
    assert_eq!(caps["codeActionProvider"]["resolveProvider"], true, "{caps}");
    assert!(caps["executeCommandProvider"]["commands"].as_array().unwrap().iter().any(|c| c == "ghostline.runAction"));
    client.notify("initialized", json!({}));
    wait_ready(&mut client);
    client
}

fn open_file(client: &mut StdioClient, path: &Path, language: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    client.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri(path), "languageId": language, "version": 1, "text": text}}));
}

/// The code actions at a position, as returned.
fn actions_at(client: &mut StdioClient, path: &Path, line: u32, character: u32, diagnostics: Value) -> Vec<Value> {
    let at = json!({"line": line, "character": character});
    let r = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri(path)}, "range": {"start": at, "end": at}, "context": {"diagnostics": diagnostics}}),
            TIMEOUT,
        )
        .unwrap();
    assert!(r.get("error").is_none(), "{r}");
    r["result"].as_array().cloned().unwrap_or_default()
}

/// Runs the action whose title starts with `prefix` through `workspace/executeCommand`.
fn run(client: &mut StdioClient, actions: &[Value], prefix: &str) -> Value {
    let action = actions
        .iter()
        .find(|a| a["title"].as_str().unwrap_or("").starts_with(prefix))
        .unwrap_or_else(|| panic!("no action {prefix:?} in {actions:?}"));
    let command = if action["command"].is_object() {
        action["command"].clone()
    } else {
        let r = client.request("codeAction/resolve", action.clone(), TIMEOUT).unwrap();
        r["result"]["command"].clone()
    };
    let r = client
        .request("workspace/executeCommand", json!({"command": command["command"], "arguments": command["arguments"]}), TIMEOUT)
        .unwrap();
    assert!(r.get("error").is_none(), "{r}");
    r["result"].clone()
}

/// The `workspace/applyEdit` requests received so far.
fn applied_edits(client: &StdioClient) -> Vec<Value> {
    client.notifications.iter().filter(|n| n["method"] == "workspace/applyEdit").map(|n| n["params"]["edit"].clone()).collect()
}

/// `$/progress` begin titles.
fn progress_titles(client: &StdioClient) -> Vec<String> {
    client
        .notifications
        .iter()
        .filter(|n| n["method"] == "$/progress" && n["params"]["value"]["kind"] == "begin")
        .filter_map(|n| n["params"]["value"]["title"].as_str().map(str::to_owned))
        .collect()
}

fn settings(endpoint: &str, cache: &Path, extra: Value) -> Value {
    let mut s = json!({
        "privacy": "allow",
        "cloud": {"endpoint": endpoint, "model": "smollm2", "timeoutMs": 60000, "connectTimeoutMs": 2000,
                  "cacheDir": cache, "cacheEntries": 0, "breakerFailures": 100},
        "actions": {"prefer": {"docstring": "cloud"}}
    });
    merge(&mut s, extra);
    s
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

/// Tests routed to the cloud: llama-server writes them, ghostline creates
/// `tests/test_geometry.py` with the import; the same request again comes from the disk cache.
#[test]
fn cloud_generated_tests_are_applied_and_cached() {
    let server = LlamaServer::start();
    let recorder = Recorder::start(Some(server.port));
    let root = workspace("cloud");
    let cache = root.join(".cache");
    let mut client = start(&root, settings(&recorder.endpoint(), &cache, json!({"cloud": {"cacheEntries": 16}})), false);
    let file = root.join("geometry.py");
    open_file(&mut client, &file, "python");

    let actions = actions_at(&mut client, &file, 3, 6, json!([]));
    let titles: Vec<&str> = actions.iter().filter_map(|a| a["title"].as_str()).collect();
    assert_eq!(titles, ["Generate tests for `hypotenuse`", "Add docstring to `hypotenuse`", "Refactor: simplify `hypotenuse`"]);

    let result = run(&mut client, &actions, "Generate tests");
    eprintln!("cloud tests: {result}");
    assert_eq!(result["route"], "cloud", "{result}");
    assert_eq!(result["applied"], true, "{result}");
    assert!(progress_titles(&client).iter().any(|t| t.starts_with("Generate tests for `hypotenuse` — cloud: tests prefer the cloud")));
    let edit = applied_edits(&client).pop().unwrap();
    let changes = edit["documentChanges"].as_array().unwrap();
    let test_uri = uri(&root.join("tests/test_geometry.py"));
    assert_eq!(changes[0], json!({"kind": "create", "uri": test_uri, "options": {"overwrite": false, "ignoreIfExists": true}}));
    let new_text = changes[1]["edits"][0]["newText"].as_str().unwrap();
    assert!(new_text.starts_with("from geometry import hypotenuse\n"), "{new_text}");
    assert!(new_text.contains("def test_"), "{new_text}");
    assert_eq!(recorder.count(), 1);
    let body = recorder.requests.lock().unwrap()[0].1.clone();
    assert!(body.starts_with("POST /v1/chat/completions") && body.contains("\"stream\":true"), "{body}");

    // Cached: the same action again is answered from disk, with no request.
    let again = run(&mut client, &actions, "Generate tests");
    assert_eq!((again["route"].as_str(), again["cached"].as_bool()), (Some("cloud"), Some(true)), "{again}");
    assert_eq!(recorder.count(), 1);
    eprintln!("cloud {:.0} ms, cached {:.0} ms", result["ms"].as_f64().unwrap(), again["ms"].as_f64().unwrap());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777, 0o700);
    for e in std::fs::read_dir(&cache).unwrap() {
        assert_eq!(e.unwrap().metadata().unwrap().permissions().mode() & 0o777, 0o600);
    }
    let route = client.request("workspace/executeCommand", json!({"command": "ghostline.lastRoute"}), TIMEOUT).unwrap();
    assert!(route["result"].as_str().unwrap().contains("— cloud:"), "{route}");
    client.shutdown(TIMEOUT).unwrap();
}

/// A file full of fake secrets goes through a cloud action under `privacy: redact`: the
/// recorder proves no canary left the machine, only placeholders.
#[test]
fn redacted_canaries_never_reach_the_cloud() {
    let server = LlamaServer::start();
    let recorder = Recorder::start(Some(server.port));
    let root = workspace("canary");
    let file = root.join("settings.py");
    std::fs::write(&file, CANARY_FILE).unwrap();
    let mut client = start(&root, settings(&recorder.endpoint(), &root.join(".cache"), json!({"privacy": "redact"})), true);
    open_file(&mut client, &file, "python");
    let actions = actions_at(&mut client, &file, 3, 6, json!([]));
    assert!(actions.iter().all(|a| a.get("command").is_none()), "resolve-capable clients get the command on resolve");
    let result = run(&mut client, &actions, "Add docstring to `connect`");
    eprintln!("canary: {result}");
    assert_eq!(result["route"], "cloud", "{result}");
    assert!(recorder.count() >= 1);
    let sent: String = recorder.requests.lock().unwrap().iter().map(|(_, r)| r.clone()).collect();
    for canary in CANARIES {
        assert!(!sent.contains(canary), "{canary} was sent:\n{sent}");
    }
    assert!(sent.contains("REDACTED_"), "{sent}");

    // An excluded file is never put into a prompt at all: no action is offered on it (the same
    // function in settings.py was), and nothing is sent.
    let env = root.join(".env");
    std::fs::write(&env, "def f():\n    return 'x'\n").unwrap();
    open_file(&mut client, &env, "python");
    let before = recorder.count();
    let actions = actions_at(&mut client, &env, 0, 5, json!([]));
    assert!(actions.is_empty(), "actions offered on an excluded file: {actions:?}");
    assert_eq!(recorder.count(), before);
    client.shutdown(TIMEOUT).unwrap();
}

const CANARY_FILE: &str = r#"import psycopg


def connect():
    password = "hunter2pass"
    url = "postgres://app:s3cr3t-db-pw@db.internal:5432/orders"
    aws_key = "AKIAIOSFODNN7EXAMPLE"
    aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    github = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
    owner = "jane.doe@example.com"
    conn = psycopg.connect(url, password=password)
    return conn
"#;

const CANARIES: &[&str] = &[
    "hunter2pass",
    "s3cr3t-db-pw",
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB",
    "jane.doe@example.com",
];

/// Refused, 500, timeout, a cut stream: each falls back to the local model and says why;
/// 429 with Retry-After is waited out and retried; the circuit breaker then stops trying.
#[test]
fn cloud_faults_fall_back_to_local_with_the_reason() {
    let server = LlamaServer::start();
    let recorder = Recorder::start(Some(server.port));
    let root = workspace("faults");
    let cache = root.join(".cache");
    let nothing = format!("http://127.0.0.1:{}/v1", free_port());
    let mut client = start(&root, settings(&nothing, &cache, json!({})), false);
    let file = root.join("geometry.py");
    open_file(&mut client, &file, "python");
    let actions = actions_at(&mut client, &file, 3, 6, json!([]));
    // Editors send the whole settings again (the model's included).
    let configure = |client: &mut StdioClient, mut s: Value| {
        s["model"] = json!({"path": model(), "threads": 1});
        client.notify("workspace/didChangeConfiguration", json!({"settings": s}));
    };
    let docstring = |client: &mut StdioClient| run(client, &actions, "Add docstring");

    // Refused: nothing listens there.
    let r = docstring(&mut client);
    assert_eq!((r["planned"].as_str(), r["route"].as_str()), (Some("cloud"), Some("local")), "{r}");
    assert!(r["fallback"].as_str().unwrap().contains("cannot connect"), "{r}");
    assert_eq!(r["applied"], true, "{r}");
    assert!(client
        .notifications
        .iter()
        .any(|n| n["method"] == "window/showMessage" && n["params"]["message"].as_str().unwrap_or("").contains("ran locally instead")));

    // 500 on every try: one retry (maxRetries 1), then local.
    configure(&mut client, settings(&recorder.endpoint(), &cache, json!({"cloud": {"maxRetries": 1}})));
    recorder.fault(Fault::Status(500, ""));
    recorder.fault(Fault::Status(500, ""));
    let r = docstring(&mut client);
    assert_eq!(r["route"], "local", "{r}");
    assert!(r["fallback"].as_str().unwrap().contains("HTTP 500 (2 attempts)"), "{r}");
    assert_eq!(recorder.count(), 2);

    // 429 with Retry-After: 1 → waited out, then the real server answers.
    recorder.fault(Fault::Status(429, "Retry-After: 1\r\n"));
    let r = docstring(&mut client);
    assert_eq!(r["route"], "cloud", "{r}");
    let times: Vec<Instant> = recorder.requests.lock().unwrap()[2..].iter().map(|(t, _)| *t).collect();
    assert_eq!(times.len(), 2);
    assert!(times[1] - times[0] >= Duration::from_millis(950), "Retry-After honoured: {:?}", times[1] - times[0]);

    // No answer within the total timeout.
    configure(&mut client, settings(&recorder.endpoint(), &cache, json!({"cloud": {"timeoutMs": 1500, "maxRetries": 0}})));
    recorder.fault(Fault::Hang(Duration::from_secs(4)));
    let r = docstring(&mut client);
    assert_eq!(r["route"], "local", "{r}");
    assert!(r["fallback"].as_str().unwrap().contains("did not answer within 1.5 s"), "{r}");

    // The stream is cut mid-way: never a partial answer.
    configure(&mut client, settings(&recorder.endpoint(), &cache, json!({"cloud": {"maxRetries": 0}})));
    recorder.fault(Fault::Cut(700));
    let r = docstring(&mut client);
    assert_eq!(r["route"], "local", "{r}");
    assert!(r["fallback"].as_str().unwrap().contains("malformed"), "{r}");

    // Circuit breaker: after one failure (threshold 1) the cloud is not even tried.
    configure(&mut client, settings(&nothing, &cache, json!({"cloud": {"breakerFailures": 1, "breakerCooldownS": 600}})));
    let r = docstring(&mut client);
    assert!(r["fallback"].as_str().unwrap().contains("cannot connect"), "{r}");
    configure(&mut client, settings(&recorder.endpoint(), &cache, json!({"cloud": {"breakerFailures": 1, "breakerCooldownS": 600}})));
    let before = recorder.count();
    let r = docstring(&mut client);
    assert_eq!(r["planned"], "local", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("failed 1 times in a row"), "{r}");
    assert_eq!(recorder.count(), before);
    client.shutdown(TIMEOUT).unwrap();
}

/// `privacy: local-only` (the default) and `offline: true` never contact the endpoint: the
/// recorder sees no connection, and offline no HTTP client is even built.
#[test]
fn local_only_and_offline_never_contact_the_cloud() {
    let recorder = Recorder::start(None);
    let root = workspace("private");
    let cache = root.join(".cache");
    for (extra, reason) in [
        (json!({"offline": true}), "offline mode"),
        (json!({"privacy": "local-only", "actions": {"prefer": {"tests": "cloud", "docstring": "cloud", "refactor": "cloud"}}}), "local-only"),
    ] {
        let mut client = start(&root, settings(&recorder.endpoint(), &cache, extra.clone()), false);
        let file = root.join("geometry.py");
        open_file(&mut client, &file, "python");
        let actions = actions_at(&mut client, &file, 3, 6, json!([]));
        let r = run(&mut client, &actions, "Add docstring");
        assert_eq!((r["route"].as_str(), r["planned"].as_str()), (Some("local"), Some("local")), "{r}");
        assert!(r["reason"].as_str().unwrap().contains(reason), "{r}");
        assert_eq!(r["cloudClientsBuilt"], 0, "no HTTP client was built: {r}");
        let edit = applied_edits(&client).pop().unwrap();
        let new_text = edit["documentChanges"][0]["edits"][0]["newText"].as_str().unwrap();
        assert!(new_text.starts_with("    \"\"\""), "{new_text}");
        assert!(progress_titles(&client).iter().any(|t| t.contains("— local: ") && t.contains(reason)));
        // The server process holds no socket at all.
        let sockets = std::fs::read_dir(format!("/proc/{}/fd", client.pid()))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|l| l.to_string_lossy().starts_with("socket:"))
            .count();
        assert_eq!(sockets, 0, "{extra}");
        client.shutdown(TIMEOUT).unwrap();
    }
    assert_eq!(*recorder.connections.lock().unwrap(), 0);
}

/// Local route, Rust: a doc comment above the function; a diagnostic from another server
/// offers "Fix with AI" with its message.
#[test]
fn local_rust_doc_comment_and_fix_action_listing() {
    let root = workspace("rust");
    let file = root.join("lib.rs");
    std::fs::write(&file, "pub fn clamp(x: i32, lo: i32, hi: i32) -> i32 {\n    if x < lo { lo } else if x > hi { hi } else { x }\n}\n").unwrap();
    let mut client = start(&root, json!({}), false);
    open_file(&mut client, &file, "rust");
    let diagnostic = json!({"range": {"start": {"line": 1, "character": 7}, "end": {"line": 1, "character": 9}},
                            "message": "comparison is useless", "source": "rustc", "severity": 2});
    let actions = actions_at(&mut client, &file, 1, 8, json!([diagnostic]));
    let titles: Vec<&str> = actions.iter().filter_map(|a| a["title"].as_str()).collect();
    assert!(titles.contains(&"Add doc comment to `clamp`"), "{titles:?}");
    let fix = actions.iter().find(|a| a["title"] == "Fix with AI: comparison is useless").expect("a fix action");
    assert_eq!(fix["kind"], "quickfix");
    assert_eq!(fix["diagnostics"][0]["message"], "comparison is useless");
    let r = run(&mut client, &actions, "Add doc comment");
    eprintln!("local rust doc: {r}");
    assert_eq!((r["route"].as_str(), r["applied"].as_bool()), (Some("local"), Some(true)), "{r}");
    assert!(r["reason"].as_str().unwrap().contains("local-only"), "{r}");
    let edit = applied_edits(&client).pop().unwrap();
    let e = &edit["documentChanges"][0];
    assert_eq!(e["textDocument"]["version"], 1);
    assert_eq!(e["edits"][0]["range"]["start"], json!({"line": 0, "character": 0}));
    assert!(e["edits"][0]["newText"].as_str().unwrap().starts_with("/// "), "{e}");
    client.shutdown(TIMEOUT).unwrap();
}
