//! `ghostline pull` against a loopback Hub written here: the resolve endpoint answers `HEAD` with
//! a 302 to a second server (the content host) carrying `X-Repo-Commit`, `X-Linked-Etag` and
//! `X-Linked-Size`, as the Hub does; the content host serves the real test model with `Range`
//! support, and can cut or stall a transfer or send altered bytes. The real binary runs; the
//! model it writes into the cache is then found by `ghostline models` and loaded by `doctor`.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};

const REPO: &str = "test-org/SmolLM2-135M-GGUF";
const FILE: &str = "smollm2-135m-q4_1.gguf";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const TOKEN: &str = "hf_loopback_secret";

/// One request a server saw.
#[derive(Debug, Clone)]
struct Seen {
    server: &'static str,
    method: String,
    path: String,
    headers: HashMap<String, String>,
}

#[derive(Default)]
struct Behaviour {
    /// Close the connection when the body reaches this offset, this many times.
    cut_at: Option<(u64, usize)>,
    /// Stop sending at this offset until `release`.
    stall_at: Option<u64>,
    release: bool,
    /// Serve these bytes instead of the model (same length; the advertised hash stays).
    altered: Option<Arc<Vec<u8>>>,
}

struct FakeHub {
    endpoint: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    body: Arc<Vec<u8>>,
    sha256: String,
}

impl FakeHub {
    fn start() -> FakeHub {
        let body = Arc::new(std::fs::read(model()).unwrap());
        let sha256: String = Sha256::digest(body.as_slice()).iter().map(|b| format!("{b:02x}")).collect();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let behaviour = Arc::new(Mutex::new(Behaviour::default()));
        let hub = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn_base = format!("http://127.0.0.1:{}", cdn.local_addr().unwrap().port());
        let endpoint = format!("http://127.0.0.1:{}", hub.local_addr().unwrap().port());
        {
            let (seen, sha, size) = (seen.clone(), sha256.clone(), body.len());
            std::thread::spawn(move || {
                for stream in hub.incoming().flatten() {
                    let (seen, sha, cdn_base) = (seen.clone(), sha.clone(), cdn_base.clone());
                    std::thread::spawn(move || serve_hub(stream, &seen, &sha, size, &cdn_base));
                }
            });
        }
        {
            let (seen, behaviour, body) = (seen.clone(), behaviour.clone(), body.clone());
            std::thread::spawn(move || {
                for stream in cdn.incoming().flatten() {
                    let (seen, behaviour, body) = (seen.clone(), behaviour.clone(), body.clone());
                    std::thread::spawn(move || serve_cdn(stream, &seen, &behaviour, &body));
                }
            });
        }
        FakeHub { endpoint, seen, behaviour, body, sha256 }
    }

    fn seen(&self, server: &str, method: &str) -> Vec<Seen> {
        self.seen.lock().unwrap().iter().filter(|s| s.server == server && s.method == method).cloned().collect()
    }
}

/// Reads a request's line and headers (names lower-cased).
fn read_request(stream: &TcpStream, server: &'static str) -> Option<Seen> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    Some(Seen { server, method, path, headers })
}

fn serve_hub(mut stream: TcpStream, seen: &Mutex<Vec<Seen>>, sha: &str, size: usize, cdn_base: &str) {
    let Some(req) = read_request(&stream, "hub") else { return };
    seen.lock().unwrap().push(req.clone());
    let resolve = format!("/{REPO}/resolve/main/{FILE}");
    let listing = format!("/api/models/{REPO}/revision/main");
    let answer = if req.method == "HEAD" && req.path == resolve {
        // The Hub's answer for an LFS file: a redirect that carries the metadata itself.
        format!(
            "HTTP/1.1 302 Found\r\nLocation: {cdn_base}/blobs/{sha}?signed=1\r\nX-Repo-Commit: {COMMIT}\r\nX-Linked-Etag: \"{sha}\"\r\nX-Linked-Size: {size}\r\nETag: \"0000pointer\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    } else if req.method == "GET" && req.path == listing {
        let json = format!("{{\"id\":\"{REPO}\",\"sha\":\"{COMMIT}\",\"siblings\":[{{\"rfilename\":\".gitattributes\"}},{{\"rfilename\":\"README.md\"}},{{\"rfilename\":\"{FILE}\"}}]}}");
        format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}", json.len())
    } else {
        "HTTP/1.1 404 Not Found\r\nX-Error-Message: Entry not found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
    };
    let _ = stream.write_all(answer.as_bytes());
}

fn serve_cdn(mut stream: TcpStream, seen: &Mutex<Vec<Seen>>, behaviour: &Mutex<Behaviour>, body: &Arc<Vec<u8>>) {
    let Some(req) = read_request(&stream, "cdn") else { return };
    seen.lock().unwrap().push(req.clone());
    let body = behaviour.lock().unwrap().altered.clone().unwrap_or_else(|| body.clone());
    let size = body.len() as u64;
    let start = req
        .headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<u64>().ok());
    let head = match start {
        Some(s) if s < size => format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {s}-{}/{size}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            size - 1,
            size - s
        ),
        Some(_) => {
            let _ = stream.write_all(format!("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{size}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
            return;
        }
        None => format!("HTTP/1.1 200 OK\r\nAccept-Ranges: bytes\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"),
    };
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let mut at = start.unwrap_or(0);
    while at < size {
        let (cut, stall) = {
            let mut b = behaviour.lock().unwrap();
            let cut = match &mut b.cut_at {
                Some((offset, n)) if *n > 0 && at <= *offset => Some(*offset),
                _ => None,
            };
            (cut, b.stall_at.filter(|s| at <= *s && !b.release))
        };
        let limit = [cut, stall].into_iter().flatten().min().unwrap_or(size);
        let end = (at + 65536).min(limit).min(size);
        if end > at {
            if stream.write_all(&body[at as usize..end as usize]).is_err() {
                return;
            }
            at = end;
            continue;
        }
        if cut == Some(at) {
            if let Some((_, n)) = &mut behaviour.lock().unwrap().cut_at {
                *n -= 1;
            }
            // Cut: the client has fewer bytes than Content-Length promised.
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
        // Stalled: hold the connection until released (or the client is gone).
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A cache, home and environment of its own for each test.
struct Env {
    dir: PathBuf,
    cache: PathBuf,
    endpoint: String,
}

impl Env {
    fn new(name: &str, hub: &FakeHub) -> Env {
        let dir = temp_dir(name);
        let cache = dir.join("hub-cache");
        Env { dir, cache, endpoint: hub.endpoint.clone() }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(binary());
        c.args(args);
        self.environment(&mut c);
        c
    }

    fn environment(&self, c: &mut Command) {
        c.env("HF_ENDPOINT", &self.endpoint)
            .env("HF_HUB_CACHE", &self.cache)
            .env("HF_HOME", self.dir.join("hf-home"))
            .env("HF_TOKEN", TOKEN)
            .env("HOME", self.dir.join("home"))
            .env("XDG_CACHE_HOME", self.dir.join("xdg-cache"))
            .env("GHOSTLINE_MODEL", "")
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("LLAMA_CACHE")
            .env_remove("OLLAMA_MODELS")
            .env_remove("GHOSTLINE_LMSTUDIO_MODELS");
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn repo_dir(&self) -> PathBuf {
        self.cache.join("models--test-org--SmolLM2-135M-GGUF")
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn blobs(env: &Env) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(env.repo_dir().join("blobs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The pull's result in the cache: snapshot → blob with the right content, refs/main.
fn assert_in_cache(env: &Env, hub: &FakeHub, stdout: &str) -> PathBuf {
    let snapshot = env.repo_dir().join("snapshots").join(COMMIT).join(FILE);
    assert_eq!(stdout.trim(), snapshot.to_string_lossy(), "the printed path");
    assert_eq!(std::fs::read_link(&snapshot).unwrap(), PathBuf::from(format!("../../blobs/{}", hub.sha256)));
    assert_eq!(std::fs::read_to_string(env.repo_dir().join("refs/main")).unwrap(), COMMIT);
    assert_eq!(blobs(env), vec![hub.sha256.clone()], "one blob, no .incomplete left");
    assert!(std::fs::read(&snapshot).unwrap() == *hub.body, "the blob is the model");
    snapshot
}

#[test]
fn clean_pull_lands_in_the_hub_cache_and_is_found_and_loaded() {
    let hub = FakeHub::start();
    let env = Env::new("pull-clean", &hub);
    // No --file: the repository's one GGUF file is chosen from the Hub's listing.
    let out = env.run(&["pull", REPO]);
    assert!(out.status.success(), "pull failed: {}", text(&out.stderr));
    let snapshot = assert_in_cache(&env, &hub, &text(&out.stdout));
    assert!(text(&out.stderr).contains("sha256"), "{}", text(&out.stderr));

    // The token went to the Hub and never to the content host.
    let heads = hub.seen("hub", "HEAD");
    assert_eq!(heads.len(), 1);
    assert_eq!(heads[0].headers.get("authorization").map(String::as_str), Some(format!("Bearer {TOKEN}").as_str()));
    let gets = hub.seen("cdn", "GET");
    assert_eq!(gets.len(), 1);
    assert!(gets.iter().all(|g| !g.headers.contains_key("authorization")), "token sent to the content host: {gets:?}");
    assert!(gets[0].path.contains("signed=1"), "the content came from the redirect's Location: {}", gets[0].path);

    // A second pull finds it in the cache: no download.
    let again = env.run(&["pull", REPO, "--file", FILE]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains("already in the cache"), "{}", text(&again.stderr));
    assert_eq!(hub.seen("cdn", "GET").len(), 1);

    // `ghostline models` lists it first, and with no model configured doctor discovers and
    // loads it.
    let models = env.run(&["models", "--json"]);
    assert!(models.status.success());
    let listed: Value = serde_json::from_slice(&models.stdout).unwrap();
    assert_eq!(listed["models"][0]["path"], snapshot.to_str().unwrap(), "{listed}");
    assert_eq!(listed["models"][0]["name"], format!("{REPO}/{FILE}"));
    assert!(listed["models"][0]["error"].is_null(), "{listed}");
    let doctor = env.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap_or_else(|_| panic!("{}", text(&doctor.stderr)));
    assert_eq!(report["facts"]["model_source"], "discovered", "{report}");
    assert!(report["facts"]["load_ms"].is_number(), "the pulled model did not load: {report}");
    std::fs::remove_dir_all(&env.dir).unwrap();
}

#[test]
fn a_transfer_cut_mid_way_is_resumed_with_range() {
    let hub = FakeHub::start();
    let half = hub.body.len() as u64 / 2;
    hub.behaviour.lock().unwrap().cut_at = Some((half, 1));
    let env = Env::new("pull-cut", &hub);
    let out = env.run(&["pull", REPO, "--file", FILE]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_in_cache(&env, &hub, &text(&out.stdout));
    let gets = hub.seen("cdn", "GET");
    assert_eq!(gets.len(), 2, "{gets:?}");
    assert!(!gets[0].headers.contains_key("range"));
    let range = gets[1].headers.get("range").cloned().unwrap_or_default();
    let from: u64 = range.strip_prefix("bytes=").and_then(|r| r.strip_suffix('-')).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(from > 0 && from <= half, "resumed with {range:?}, cut at {half}");
    std::fs::remove_dir_all(&env.dir).unwrap();
}

#[test]
fn a_pull_killed_mid_way_is_resumed_by_the_next_run() {
    let hub = FakeHub::start();
    let half = hub.body.len() as u64 / 2;
    hub.behaviour.lock().unwrap().stall_at = Some(half);
    let env = Env::new("pull-killed", &hub);
    let mut child = env.command(&["pull", REPO, "--file", FILE]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let incomplete = env.repo_dir().join("blobs").join(format!("{}.incomplete", hub.sha256));
    let started = Instant::now();
    while std::fs::metadata(&incomplete).map(|m| m.len()).unwrap_or(0) < half {
        assert!(started.elapsed() < Duration::from_secs(60), "the download never reached half");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(std::fs::metadata(&incomplete).unwrap().len(), half, "the interrupted download is kept");
    hub.behaviour.lock().unwrap().release = true;

    let out = env.run(&["pull", REPO, "--file", FILE]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("resumed after"), "{}", text(&out.stderr));
    assert_in_cache(&env, &hub, &text(&out.stdout));
    let gets = hub.seen("cdn", "GET");
    assert_eq!(gets.last().unwrap().headers.get("range").map(String::as_str), Some(format!("bytes={half}-").as_str()));
    std::fs::remove_dir_all(&env.dir).unwrap();
}

#[test]
fn a_corrupt_body_is_refused_and_nothing_is_kept() {
    let hub = FakeHub::start();
    let mut altered = (*hub.body).clone();
    let mid = altered.len() / 2;
    altered[mid] ^= 0x40;
    hub.behaviour.lock().unwrap().altered = Some(Arc::new(altered));
    let env = Env::new("pull-corrupt", &hub);
    let out = env.run(&["pull", REPO, "--file", FILE]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("checksum mismatch") && err.contains(&hub.sha256) && err.contains("Nothing was kept"), "{err}");
    assert_eq!(blobs(&env), Vec::<String>::new(), "nothing may be left behind");
    assert!(!env.repo_dir().join("snapshots").exists());
    std::fs::remove_dir_all(&env.dir).unwrap();
}

#[test]
fn a_model_over_the_memory_budget_is_refused_before_downloading() {
    let hub = FakeHub::start();
    let env = Env::new("pull-budget", &hub);
    let out = env.run(&["pull", REPO, "--file", FILE, "--memory-budget-mb", "16"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("memory budget") && err.contains("16 MiB") && err.contains("model.memoryBudgetMb"), "{err}");
    assert!(hub.seen("cdn", "GET").is_empty(), "downloaded anyway");
    std::fs::remove_dir_all(&env.dir).unwrap();
}

#[test]
fn offline_mode_refuses_and_opens_no_socket() {
    let hub = FakeHub::start();
    let env = Env::new("pull-offline", &hub);
    let settings = env.dir.join("settings.json");
    std::fs::create_dir_all(&env.dir).unwrap();
    std::fs::write(&settings, r#"{"offline": true}"#).unwrap();
    let trace = env.dir.join("strace.log");
    for args in [vec!["pull", "qwen2.5-coder-1.5b", "--offline"], vec!["pull", REPO, "--settings", settings.to_str().unwrap()]] {
        let bin = binary();
        let mut strace_args = vec!["-f", "-qq", "-e", "trace=socket,connect,execve", "-o", trace.to_str().unwrap(), bin.to_str().unwrap()];
        strace_args.extend(args.iter().copied());
        let mut c = Command::new("strace");
        c.args(&strace_args);
        env.environment(&mut c);
        let out = c.output().expect("strace (apt package strace, installed by .ci/run)");
        assert!(!out.status.success(), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("offline mode is on") && err.contains("model.path"), "{err}");
        let log = std::fs::read_to_string(&trace).unwrap();
        assert!(log.contains("execve("), "strace recorded nothing: {log}");
        let offending: Vec<&str> =
            log.lines().filter(|l| l.contains("socket(AF_INET") || l.contains("socket(AF_INET6") || l.contains("connect(")).collect();
        assert!(offending.is_empty(), "offline, yet the pull used the network:\n{}", offending.join("\n"));
    }
    assert!(hub.seen.lock().unwrap().is_empty(), "the Hub was contacted");
    assert!(!Path::new(&env.cache).exists(), "offline pull wrote to the cache");
    std::fs::remove_dir_all(&env.dir).unwrap();
}
