//! Typing into the real language server over stdio, as an editor does: shared by
//! `ghostline demo` and `ghostline bench`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::stdio_client::StdioClient;

/// Cursor position tracked in UTF-16 code units, as the client negotiates by default.
#[derive(Debug, Clone, Copy)]
pub struct Cursor {
    pub line: u32,
    pub character: u32,
}

impl Cursor {
    /// The position of byte offset `at` in `text`.
    pub fn at(text: &str, at: usize) -> Cursor {
        let before = &text[..at];
        let line = before.matches('\n').count() as u32;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let character = before[line_start..].encode_utf16().count() as u32;
        Cursor { line, character }
    }

    pub fn json(self) -> Value {
        json!({"line": self.line, "character": self.character})
    }

    /// Sends `ch` typed at the cursor as an incremental change and moves past it.
    pub fn type_char(&mut self, client: &mut StdioClient, uri: &str, version: &mut i32, ch: char) {
        *version += 1;
        let here = self.json();
        client.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": uri, "version": *version},
                "contentChanges": [{"range": {"start": here, "end": here}, "text": ch.to_string()}]
            }),
        );
        if ch == '\n' {
            self.line += 1;
            self.character = 0;
        } else {
            self.character += ch.len_utf16() as u32;
        }
    }
}

/// An open document whose text the client keeps, edited at a cursor with incremental changes.
pub struct TypedDoc {
    pub uri: String,
    pub text: String,
    /// Byte offset of the cursor in `text`.
    pub at: usize,
    pub version: i32,
}

impl TypedDoc {
    /// Opens `text` (version 1) with the cursor at byte offset `at`.
    pub fn open(client: &mut StdioClient, uri: String, language_id: &str, text: String, at: usize) -> TypedDoc {
        client.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": language_id, "version": 1, "text": text}}),
        );
        TypedDoc { uri, text, at, version: 1 }
    }

    pub fn cursor(&self) -> Cursor {
        Cursor::at(&self.text, self.at)
    }

    fn change(&mut self, client: &mut StdioClient, start: usize, end: usize, new_text: &str) {
        let (s, e) = (Cursor::at(&self.text, start).json(), Cursor::at(&self.text, end).json());
        self.text.replace_range(start..end, new_text);
        self.at = start + new_text.len();
        self.version += 1;
        client.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": self.uri, "version": self.version},
                "contentChanges": [{"range": {"start": s, "end": e}, "text": new_text}]
            }),
        );
    }

    /// Inserts `s` at the cursor as one edit (a key, or an editor's auto-indentation).
    pub fn insert(&mut self, client: &mut StdioClient, s: &str) {
        self.change(client, self.at, self.at, s);
    }

    /// Backspace: deletes the character before the cursor (nothing at the start).
    pub fn backspace(&mut self, client: &mut StdioClient) {
        if let Some(c) = self.text[..self.at].chars().next_back() {
            self.change(client, self.at - c.len_utf8(), self.at, "");
        }
    }

    /// Asks for the code actions at the cursor (an empty range), as VS Code does whenever the
    /// cursor moves; returns the whole response object.
    pub fn code_actions(&self, client: &mut StdioClient, timeout: Duration) -> Result<Value, String> {
        let at = self.cursor().json();
        client.request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": self.uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}),
            timeout,
        )
    }

    /// Asks for ghost text at the cursor; returns the whole response object.
    pub fn inline_completion(&self, client: &mut StdioClient, timeout: Duration) -> Result<Value, String> {
        client.request(
            "textDocument/inlineCompletion",
            json!({
                "textDocument": {"uri": self.uri},
                "position": self.cursor().json(),
                "context": {"triggerKind": 2}
            }),
            timeout,
        )
    }
}

/// A fixture file with a cursor marker: the text without the marker, and the marker's offset.
pub fn load_with_cursor(file: &Path, marker: &str) -> Result<(String, usize), String> {
    let source = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let at = source.find(marker).ok_or_else(|| format!("{} has no cursor marker {marker}", file.display()))?;
    Ok((source.replacen(marker, "", 1), at))
}

pub fn file_uri(file: &Path) -> String {
    format!("file://{}", file.canonicalize().unwrap_or(file.to_path_buf()).display())
}

/// A running server with its model loaded.
pub struct Session {
    pub client: StdioClient,
    /// From `initialize` to the model-ready message.
    pub load_ms: f64,
    /// The prompt format the server reported (`prefix-only`, or a FIM family).
    pub format: String,
}

/// Starts the language server (`exe lsp`), initializes it with `options` as
/// initializationOptions and waits for its model to load. The harness's suggestions are not the
/// user's: acceptance statistics are off unless `options` names `stats`.
pub fn start(exe: &Path, options: Value, stderr: Stdio, timeout: Duration) -> Result<Session, String> {
    start_in(exe, options, None, stderr, timeout)
}

/// [`start`] with `root` as the workspace folder (its other files feed the cross-file section).
pub fn start_in(exe: &Path, mut options: Value, root: Option<&Path>, stderr: Stdio, timeout: Duration) -> Result<Session, String> {
    if let Value::Object(map) = &mut options {
        map.entry("stats").or_insert_with(|| json!({"enabled": false}));
    }
    let mut client = StdioClient::spawn(exe, &["lsp"], &[], stderr).map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let started = Instant::now();
    client.request(
        "initialize",
        json!({
            "processId": std::process::id(),
            "capabilities": {"window": {"workDoneProgress": true}},
            "rootUri": root.map(file_uri),
            "initializationOptions": options
        }),
        timeout,
    )?;
    client.notify("initialized", json!({}));
    let ready = client.wait_notification("window/logMessage", timeout, |p| {
        p["message"].as_str().is_some_and(|m| m.contains("model ready"))
    });
    let ready = match ready {
        Ok(r) => r,
        Err(_) => {
            let shown: Vec<_> = client.notifications.iter().filter(|n| n["method"] == "window/showMessage").collect();
            return Err(format!("the model did not load: {shown:?}"));
        }
    };
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    // "ghostline: model ready (PATH, FORMAT, N ms)"
    let message = ready["params"]["message"].as_str().unwrap_or_default();
    let inner = message.split_once("model ready (").map_or("", |(_, r)| r.strip_suffix(')').unwrap_or(r));
    let format = inner.rsplitn(3, ", ").nth(1).unwrap_or("unknown").to_owned();
    Ok(Session { client, load_ms, format })
}

/// Waits for the end of the server's workspace indexing (its `$/progress` titled "indexing").
pub fn wait_indexed(client: &mut StdioClient, timeout: Duration) -> Result<(), String> {
    let begun = client
        .wait_notification("$/progress", timeout, |p| p["value"]["title"].as_str().is_some_and(|t| t.contains("indexing")))
        .map_err(|e| format!("the workspace was not indexed: {e}"))?;
    let token = begun["params"]["token"].clone();
    client
        .wait_notification("$/progress", timeout, |p| p["token"] == token && p["value"]["kind"] == "end")
        .map(drop)
        .map_err(|e| format!("the workspace indexing did not end: {e}"))
}

/// `name` as given when it exists, else relative to the repository (for runs outside it).
pub fn find_fixture(name: &str) -> Option<PathBuf> {
    [PathBuf::from(name), Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)].into_iter().find(|p| p.exists())
}
