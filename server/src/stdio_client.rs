//! A minimal LSP client over a child process's stdio, with real `Content-Length` framing.
//!
//! Used by `ghostline demo` and by the end-to-end tests to drive the real binary the way an
//! editor does. Server-to-client requests (`window/workDoneProgress/create`, …) are answered
//! with `null` (`workspace/applyEdit` with `{"applied": true}`; `window/showMessageRequest` with
//! the action chosen by [`StdioClient::answer_message_requests`], if any, unless
//! [`StdioClient::message_requests`] says to ignore them or fail them) so the server never
//! waits on us.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub struct StdioClient {
    child: Child,
    stdin: Arc<Mutex<ChildStdin>>,
    incoming: mpsc::Receiver<Value>,
    next_id: i64,
    /// Responses that arrived while waiting for something else, by id.
    responses: Vec<Value>,
    /// Every notification the server sent, in order.
    pub notifications: Vec<Value>,
    /// Whether `workspace/applyEdit` is answered `applied: true` (the default) or refused.
    accept_edits: Arc<std::sync::atomic::AtomicBool>,
    /// The start of the action title `window/showMessageRequest` is answered with (`None`: the
    /// user dismissed it).
    message_answer: Arc<Mutex<Option<String>>>,
    /// Whether `window/showMessageRequest` is answered at all, and how.
    message_requests: Arc<Mutex<MessageRequests>>,
}

/// How `window/showMessageRequest` is answered ([`StdioClient::message_requests`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum MessageRequests {
    /// With the action [`StdioClient::answer_message_requests`] chose (the default).
    #[default]
    Answer,
    /// Never: a client that does not show the question, or shows it and never replies.
    Ignore,
    /// With this JSON-RPC error (`-32601`: MethodNotFound, a client that cannot ask).
    Fail(i64, String),
}

fn write_message(out: &mut impl Write, message: &Value) -> std::io::Result<()> {
    let body = serde_json::to_vec(message)?;
    write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
    out.write_all(&body)?;
    out.flush()
}

/// Reads one framed message; `None` at end of stream.
fn read_message(input: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if input.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    input.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

impl StdioClient {
    /// Starts `program args…` with the given extra environment; its stderr goes to `stderr`.
    pub fn spawn(program: &Path, args: &[&str], envs: &[(&str, &str)], stderr: Stdio) -> std::io::Result<Self> {
        let mut command = Command::new(program);
        command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr);
        // The servers started here (tests, `bench`, `demo`) load their own model unless the
        // caller asks for the shared host: they must neither start one that outlives them nor
        // reach a host of the user's.
        command.env(crate::config::SHARED_ENV, "off");
        for (k, v) in envs {
            command.env(k, v);
        }
        let mut child = command.spawn()?;
        let stdin = Arc::new(Mutex::new(child.stdin.take().expect("piped stdin")));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, incoming) = mpsc::channel();
        let answer = Arc::clone(&stdin);
        let accept_edits = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let accept = Arc::clone(&accept_edits);
        let message_answer: Arc<Mutex<Option<String>>> = Arc::default();
        let pick = Arc::clone(&message_answer);
        let message_requests: Arc<Mutex<MessageRequests>> = Arc::default();
        let how = Arc::clone(&message_requests);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                let how = if message["method"] == "window/showMessageRequest" { how.lock().unwrap().clone() } else { MessageRequests::Answer };
                if let (MessageRequests::Fail(code, text), Some(id)) = (&how, message.get("id")) {
                    let reply = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}});
                    let _ = write_message(&mut *answer.lock().unwrap(), &reply);
                } else if how != MessageRequests::Ignore && message.get("method").is_some() && message.get("id").is_some() {
                    // An edit is accepted (the request stays in `notifications` for tests to read).
                    let result = match message["method"].as_str() {
                        Some("workspace/applyEdit") if accept.load(std::sync::atomic::Ordering::SeqCst) => json!({"applied": true}),
                        Some("workspace/applyEdit") => json!({"applied": false, "failureReason": "refused by the test client"}),
                        Some("window/showMessageRequest") => {
                            let pick = pick.lock().unwrap().clone();
                            let actions = message["params"]["actions"].as_array().cloned().unwrap_or_default();
                            pick.and_then(|p| actions.into_iter().find(|a| a["title"].as_str().is_some_and(|t| t.starts_with(&p))))
                                .unwrap_or(Value::Null)
                        }
                        _ => Value::Null,
                    };
                    let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
                    let _ = write_message(&mut *answer.lock().unwrap(), &reply);
                }
                if tx.send(message).is_err() {
                    break;
                }
            }
        });
        Ok(StdioClient { child, stdin, incoming, next_id: 0, responses: Vec::new(), notifications: Vec::new(), accept_edits, message_answer, message_requests })
    }

    /// From now on, answer `workspace/applyEdit` with `applied: accept` (an editor that refuses
    /// an edit answers `false`).
    pub fn accept_edits(&self, accept: bool) {
        self.accept_edits.store(accept, std::sync::atomic::Ordering::SeqCst);
    }

    /// From now on, answer `window/showMessageRequest` with the first action whose title starts
    /// with `prefix` (`None`, the default: dismissed, as an editor's closed notification).
    pub fn answer_message_requests(&self, prefix: Option<&str>) {
        *self.message_answer.lock().unwrap() = prefix.map(str::to_owned);
    }

    /// From now on, answer `window/showMessageRequest` as `how` says.
    pub fn message_requests(&self, how: MessageRequests) {
        *self.message_requests.lock().unwrap() = how;
    }

    /// Waits for the server process to end on its own (after `exit`, or when its input closes).
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err("the server did not exit".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Writes bytes as they are (for malformed-input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().unwrap();
        stdin.write_all(bytes)?;
        stdin.flush()
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        write_message(&mut *self.stdin.lock().unwrap(), &message).expect("server stdin closed");
    }

    /// Sends a request and returns its id without waiting.
    pub fn send_request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        write_message(&mut *self.stdin.lock().unwrap(), &message).expect("server stdin closed");
        id
    }

    /// Sends a request and waits for its whole response object (`result` or `error`).
    pub fn request(&mut self, method: &str, params: Value, timeout: Duration) -> Result<Value, String> {
        let id = self.send_request(method, params);
        self.wait_response(id, timeout)
    }

    fn pump(&mut self, deadline: Instant) -> Result<(), String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.incoming.recv_timeout(left) {
            Ok(m) if m.get("method").is_some() => {
                self.notifications.push(m);
                Ok(())
            }
            Ok(m) => {
                self.responses.push(m);
                Ok(())
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err("timed out waiting for the server".into()),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err("the server closed its output".into()),
        }
    }

    pub fn wait_response(&mut self, id: i64, timeout: Duration) -> Result<Value, String> {
        self.wait_response_with_id(json!(id), timeout)
    }

    /// Like [`StdioClient::wait_response`] for any id, `null` included (the answer to a message
    /// the server could not read).
    pub fn wait_response_with_id(&mut self, id: Value, timeout: Duration) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.responses.iter().position(|r| r.get("id") == Some(&id)) {
                return Ok(self.responses.remove(i));
            }
            self.pump(deadline).map_err(|e| format!("{e} (response to request {id})"))?;
        }
    }

    /// Waits for a notification with `method` that satisfies `accept`, looking at those already
    /// received first. Returns it.
    pub fn wait_notification(
        &mut self,
        method: &str,
        timeout: Duration,
        accept: impl Fn(&Value) -> bool,
    ) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        let mut seen = 0;
        loop {
            if let Some(n) = self.notifications[seen..].iter().find(|n| n["method"] == method && accept(&n["params"])) {
                return Ok(n.clone());
            }
            seen = self.notifications.len();
            self.pump(deadline).map_err(|e| format!("{e} (notification {method})"))?;
        }
    }

    /// `shutdown` then `exit`; returns the process's exit status.
    pub fn shutdown(mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let r = self.request("shutdown", Value::Null, timeout)?;
        if r.get("error").is_some() {
            return Err(format!("shutdown failed: {r}"));
        }
        self.notify("exit", Value::Null);
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Err("the server did not exit after `exit`".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
