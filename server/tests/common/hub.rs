//! A loopback Hugging Face Hub for the tests that download (`tests/pull.rs`,
//! `tests/first_run.rs`): the resolve endpoint answers `HEAD` with a 302 to a second server (the
//! content host) carrying `X-Repo-Commit`, `X-Linked-Etag` and `X-Linked-Size`, as the Hub does;
//! the content host serves the real test model with `Range` support, and can cut or stall a
//! transfer or send altered bytes. It serves the model under whichever repository and file
//! names it is started with (a Qwen coder repository for the first run's offer), lists every
//! file a repository was started with, and can answer the resolve endpoint with an error status,
//! announce another size than it serves, ignore `Range` or send more than it announced.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::model;

/// The commit every served repository resolves to.
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// One request a server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub server: &'static str,
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
}

#[derive(Default)]
pub struct Behaviour {
    /// Close the connection when the body reaches this offset, this many times.
    pub cut_at: Option<(u64, usize)>,
    /// Stop sending at this offset until `release`.
    pub stall_at: Option<u64>,
    pub release: bool,
    /// Serve these bytes instead of the model (same length; the advertised hash stays).
    pub altered: Option<Arc<Vec<u8>>>,
    /// The resolve endpoint answers `HEAD` with this status (401, 403, 404…) and no metadata.
    pub hub_status: Option<u16>,
    /// `X-Linked-Size` says this instead of the model's size.
    pub announced_size: Option<u64>,
    /// Answer every `GET` with 200 and the whole file, whatever its `Range`.
    pub ignore_range: bool,
    /// Send this many bytes more than the model (and than `Content-Length` says).
    pub extra_bytes: u64,
}

pub struct FakeHub {
    pub endpoint: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub behaviour: Arc<Mutex<Behaviour>>,
    pub body: Arc<Vec<u8>>,
    pub sha256: String,
}

impl FakeHub {
    /// Serves the test model as each `(repository, file)` of `files`.
    pub fn start(files: &[(&str, &str)]) -> FakeHub {
        let files: Arc<Vec<(String, String)>> = Arc::new(files.iter().map(|(r, f)| (r.to_string(), f.to_string())).collect());
        let body = Arc::new(std::fs::read(model()).unwrap());
        let sha256: String = Sha256::digest(body.as_slice()).iter().map(|b| format!("{b:02x}")).collect();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let behaviour = Arc::new(Mutex::new(Behaviour::default()));
        let hub = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn_base = format!("http://127.0.0.1:{}", cdn.local_addr().unwrap().port());
        let endpoint = format!("http://127.0.0.1:{}", hub.local_addr().unwrap().port());
        {
            let (seen, sha, size, behaviour) = (seen.clone(), sha256.clone(), body.len(), behaviour.clone());
            std::thread::spawn(move || {
                for stream in hub.incoming().flatten() {
                    let (seen, sha, cdn_base, files, behaviour) = (seen.clone(), sha.clone(), cdn_base.clone(), files.clone(), behaviour.clone());
                    std::thread::spawn(move || serve_hub(stream, &seen, &behaviour, &sha, size, &cdn_base, &files));
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

    pub fn seen(&self, server: &str, method: &str) -> Vec<Seen> {
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

#[allow(clippy::too_many_arguments)]
fn serve_hub(mut stream: TcpStream, seen: &Mutex<Vec<Seen>>, behaviour: &Mutex<Behaviour>, sha: &str, size: usize, cdn_base: &str, files: &[(String, String)]) {
    let Some(req) = read_request(&stream, "hub") else { return };
    seen.lock().unwrap().push(req.clone());
    let (status, size) = {
        let b = behaviour.lock().unwrap();
        (b.hub_status, b.announced_size.unwrap_or(size as u64))
    };
    let resolved = files.iter().any(|(repo, file)| req.path == format!("/{repo}/resolve/main/{file}"));
    let listed = files.iter().find(|(repo, _)| req.path == format!("/api/models/{repo}/revision/main"));
    let answer = if let (Some(status), "HEAD") = (status, req.method.as_str()) {
        format!("HTTP/1.1 {status} Refused\r\nX-Error-Message: refused by the test Hub\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    } else if req.method == "HEAD" && resolved {
        // The Hub's answer for an LFS file: a redirect that carries the metadata itself.
        format!(
            "HTTP/1.1 302 Found\r\nLocation: {cdn_base}/blobs/{sha}?signed=1\r\nX-Repo-Commit: {COMMIT}\r\nX-Linked-Etag: \"{sha}\"\r\nX-Linked-Size: {size}\r\nETag: \"0000pointer\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    } else if let (Some((repo, _)), "GET") = (listed, req.method.as_str()) {
        let siblings: String =
            files.iter().filter(|(r, _)| r == repo).map(|(_, f)| format!(",{{\"rfilename\":\"{f}\"}}")).collect();
        let json = format!("{{\"id\":\"{repo}\",\"sha\":\"{COMMIT}\",\"siblings\":[{{\"rfilename\":\".gitattributes\"}},{{\"rfilename\":\"README.md\"}}{siblings}]}}");
        format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}", json.len())
    } else {
        "HTTP/1.1 404 Not Found\r\nX-Error-Message: Entry not found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
    };
    let _ = stream.write_all(answer.as_bytes());
}

fn serve_cdn(mut stream: TcpStream, seen: &Mutex<Vec<Seen>>, behaviour: &Mutex<Behaviour>, body: &Arc<Vec<u8>>) {
    let Some(req) = read_request(&stream, "cdn") else { return };
    seen.lock().unwrap().push(req.clone());
    let (body, ignore_range, extra) = {
        let b = behaviour.lock().unwrap();
        (b.altered.clone().unwrap_or_else(|| body.clone()), b.ignore_range, b.extra_bytes)
    };
    let body = if extra > 0 {
        let mut more = (*body).clone();
        more.resize(more.len() + extra as usize, 0x5a);
        Arc::new(more)
    } else {
        body
    };
    let size = body.len() as u64;
    let start = req
        .headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|_| !ignore_range);
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

