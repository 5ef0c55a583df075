//! Helix as the client: the `initialize` request Helix sends (capabilities as built in
//! helix-editor/helix, helix-lsp/src/client.rs, `Client::initialize`), the configuration
//! notification it sends after `initialized` (helix-term/src/application.rs), one
//! `didChange` per typed character in UTF-8 positions, completion requests with the contexts
//! Helix uses (helix-term/src/handlers/completion/request.rs: INVOKED while typing,
//! TRIGGER_FOR_INCOMPLETE_COMPLETIONS when its open list is incomplete), its fuzzy filter on
//! `filterText`, and the accepted item's `textEdit` applied to the text.

mod common;

use common::*;
use serde_json::{json, Value};

const URI: &str = "file:///project/src/stats.py";

/// `ClientCapabilities` as Helix fills them in (snippets on, its default).
fn helix_capabilities() -> Value {
    json!({
        "workspace": {
            "configuration": true,
            "didChangeConfiguration": {"dynamicRegistration": false},
            "workspaceFolders": true,
            "applyEdit": true,
            "symbol": {"dynamicRegistration": false},
            "executeCommand": {"dynamicRegistration": false},
            "inlayHint": {"refreshSupport": false},
            "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"],
                "failureHandling": "abort",
                "normalizesLineEndings": false
            },
            "didChangeWatchedFiles": {"dynamicRegistration": true, "relativePatternSupport": false},
            "fileOperations": {"willRename": true, "didRename": true}
        },
        "textDocument": {
            "completion": {
                "completionItem": {
                    "snippetSupport": true,
                    "resolveSupport": {"properties": ["documentation", "detail", "additionalTextEdits"]},
                    "insertReplaceSupport": true,
                    "deprecatedSupport": true,
                    "tagSupport": {"valueSet": [1]}
                },
                "completionItemKind": {}
            },
            "hover": {"contentFormat": ["markdown"]},
            "signatureHelp": {
                "signatureInformation": {
                    "documentationFormat": ["markdown"],
                    "parameterInformation": {"labelOffsetSupport": true},
                    "activeParameterSupport": true
                }
            },
            "rename": {"dynamicRegistration": false, "prepareSupport": true, "honorsChangeAnnotations": false},
            "formatting": {"dynamicRegistration": false},
            "codeAction": {
                "codeActionLiteralSupport": {"codeActionKind": {"valueSet": [
                    "", "quickfix", "refactor", "refactor.extract", "refactor.inline", "refactor.rewrite",
                    "source", "source.organizeImports"
                ]}},
                "isPreferredSupport": true,
                "disabledSupport": true,
                "dataSupport": true,
                "resolveSupport": {"properties": ["edit", "command"]}
            },
            "publishDiagnostics": {"versionSupport": true, "tagSupport": {"valueSet": [1, 2]}},
            "inlayHint": {"dynamicRegistration": false}
        },
        "window": {"workDoneProgress": true},
        "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]}
    })
}

/// A Helix session on one document: the text as Helix holds it, and its version.
struct Session {
    client: TestServer,
    text: String,
    version: i64,
    init: Value,
}

/// (line, UTF-8 column) of a byte offset, as Helix sends positions once UTF-8 is negotiated.
fn position(text: &str, offset: usize) -> Value {
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let col = offset - before.rfind('\n').map_or(0, |i| i + 1);
    json!({"line": line, "character": col})
}

/// The byte offset of an LSP position (UTF-8 columns).
fn offset(text: &str, pos: &Value) -> usize {
    let line = pos["line"].as_u64().unwrap() as usize;
    let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
    start + pos["character"].as_u64().unwrap() as usize
}

impl Session {
    /// Starts ghostline as Helix does for a `languages.toml` entry with `config = {…}`.
    fn start(config: Value) -> Session {
        let mut client = spawn();
        let init = client
            .request(
                "initialize",
                json!({
                    "processId": std::process::id(),
                    "workspaceFolders": [{"uri": "file:///project", "name": "project"}],
                    "rootPath": "/project",
                    "rootUri": "file:///project",
                    "initializationOptions": config,
                    "capabilities": helix_capabilities(),
                    "clientInfo": {"name": "helix", "version": "25.07.1"}
                }),
                TIMEOUT,
            )
            .unwrap();
        assert!(init.get("error").is_none(), "initialize failed: {init}");
        client.notify("initialized", json!({}));
        // Helix sends its `config` again right after `initialized`, bare (no section key).
        client.notify("workspace/didChangeConfiguration", json!({"settings": config}));
        Session { client, text: String::new(), version: 0, init: init["result"].clone() }
    }

    fn open(&mut self, text: &str) {
        self.text = text.to_owned();
        self.client.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": URI, "languageId": "python", "version": 0, "text": text}}),
        );
    }

    /// Replaces bytes `start..end` and sends the change as Helix does (one event, UTF-8 range).
    fn edit(&mut self, start: usize, end: usize, new: &str) {
        let range = json!({"start": position(&self.text, start), "end": position(&self.text, end)});
        self.text.replace_range(start..end, new);
        self.version += 1;
        self.client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": self.version}, "contentChanges": [{"range": range, "text": new}]}),
        );
    }

    /// Types `keys` at byte `at`, one `didChange` per character; returns the cursor after them.
    fn type_at(&mut self, mut at: usize, keys: &str) -> usize {
        for ch in keys.chars() {
            self.edit(at, at, ch.encode_utf8(&mut [0; 4]));
            at += ch.len_utf8();
        }
        at
    }

    fn completion(&mut self, cursor: usize, trigger_kind: u8) -> Value {
        let response = self
            .client
            .request(
                "textDocument/completion",
                json!({
                    "textDocument": {"uri": URI},
                    "position": position(&self.text, cursor),
                    "context": {"triggerKind": trigger_kind}
                }),
                TIMEOUT,
            )
            .unwrap();
        assert!(response.get("error").is_none(), "completion failed: {response}");
        response["result"].clone()
    }
}

/// Helix's word before the cursor (what its completion filter matches against).
fn word_before(text: &str, cursor: usize) -> &str {
    let start = text[..cursor]
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || *c == '_')
        .last()
        .map_or(cursor, |(i, _)| i);
    &text[start..cursor]
}

/// Helix keeps an item when its filter text fuzzy-matches the typed word (characters in order).
fn fuzzy_matches(filter: &str, pattern: &str) -> bool {
    let mut chars = filter.chars();
    pattern.chars().all(|p| chars.any(|c| c.eq_ignore_ascii_case(&p)))
}

/// The one ghostline item of a completion response, checked the way Helix uses it.
fn ghostline_item<'a>(list: &'a Value, text: &str, cursor: usize) -> &'a Value {
    assert_eq!(list["isIncomplete"], true, "Helix must ask again as the user types: {list}");
    let items = list["items"].as_array().expect("a CompletionList");
    assert_eq!(items.len(), 1, "{list}");
    let item = &items[0];
    let word = word_before(text, cursor);
    let filter = item["filterText"].as_str().or(item["label"].as_str()).unwrap();
    assert!(fuzzy_matches(filter, word), "Helix's filter would drop {filter:?} for {word:?}");
    let edit = &item["textEdit"];
    assert_eq!(offset(text, &edit["range"]["end"]), cursor, "{item}");
    assert_eq!(offset(text, &edit["range"]["start"]), cursor - word.len(), "the edit replaces the typed word: {item}");
    let new_text = edit["newText"].as_str().unwrap();
    assert!(new_text.starts_with(word) && new_text.len() > word.len(), "{item}");
    item
}

#[test]
fn helix_session_types_gets_completion_and_accepts_it() {
    let config = json!({"model": {"path": model()}, "completion": {"maxTokens": 24}});
    let mut s = Session::start(config);
    let caps = &s.init["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-8", "Helix offers UTF-8 first");
    // Helix sends completion requests only to servers that declare it, and incremental changes
    // only when the server asks for them.
    assert!(caps["completionProvider"].is_object(), "{caps}");
    assert_eq!(caps["textDocumentSync"]["change"], 2, "{caps}");
    wait_ready(&mut s.client);

    let source = "\"\"\"Geometry — naïve helpers.\"\"\"\nimport math\n\n\ndef area(radius):\n    \"\"\"Area of a circle (π r²).\"\"\"\n    return math.pi * radius ** 2\n\n\ndef circumference(radius):\n    ";
    s.open(source);
    let mut cursor = s.text.len();
    // Type the start of the body; Helix's auto trigger asks after a pause (INVOKED).
    cursor = s.type_at(cursor, "\"\"\"Périmètre.\"\"\"\n    return 2 * math.p");
    let first = s.completion(cursor, 1);
    let item = ghostline_item(&first, &s.text, cursor).clone();
    let new_text = item["textEdit"]["newText"].as_str().unwrap().to_owned();
    assert!(new_text.starts_with('p'), "{new_text:?}");

    // One more character that agrees with the suggestion (a word character or not): Helix asks
    // again, now for the incomplete list, and the new item still passes its filter.
    let next: String = new_text[1..].chars().take(1).collect();
    cursor = s.type_at(cursor, &next);
    let again = s.completion(cursor, 3);
    let item = ghostline_item(&again, &s.text, cursor).clone();

    // Accept: Helix replaces the edit's range (the typed word) with newText.
    let edit = &item["textEdit"];
    let (start, end) = (offset(&s.text, &edit["range"]["start"]), offset(&s.text, &edit["range"]["end"]));
    let new_text = edit["newText"].as_str().unwrap().to_owned();
    let typed = format!("    return 2 * math.p{next}");
    let word = word_before(&s.text, end).to_owned();
    s.edit(start, end, &new_text);
    cursor = start + new_text.len();
    let line = s.text[..cursor].rsplit('\n').next().unwrap();
    assert_eq!(line, format!("{}{new_text}", &typed[..typed.len() - word.len()]));

    // The server's copy followed every edit: a new word typed after the accepted text is the
    // word its next item replaces.
    cursor = s.type_at(cursor, " + rad");
    let after = s.completion(cursor, 1);
    let item = ghostline_item(&after, &s.text, cursor);
    assert!(item["textEdit"]["newText"].as_str().unwrap().starts_with("rad"), "{item}");

    // No error was shown along the way (the configuration notification included).
    let errors: Vec<&Value> = s
        .client
        .notifications
        .iter()
        .filter(|n| n["method"] == "window/showMessage" && n["params"]["type"] == 1)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(s.client.shutdown(TIMEOUT).unwrap().success());
}

/// Helix lists ghostline's code actions beside other servers' and applies one.
#[test]
fn helix_code_action_adds_a_docstring() {
    let mut s = Session::start(json!({"model": {"path": model()}, "offline": true}));
    let caps = s.init["capabilities"].clone();
    assert!(!caps["codeActionProvider"].is_null(), "{caps}");
    wait_ready(&mut s.client);
    s.open("import math\n\n\ndef hypotenuse(a, b):\n    return math.sqrt(a * a + b * b)\n");
    let on_name = s.text.find("hypotenuse").unwrap() + 3;
    let range = json!({"start": position(&s.text, on_name), "end": position(&s.text, on_name)});
    let listed = s
        .client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": range, "context": {"diagnostics": [], "triggerKind": 1}}),
            TIMEOUT,
        )
        .unwrap();
    let actions = listed["result"].as_array().cloned().unwrap_or_default();
    let titles: Vec<&str> = actions.iter().filter_map(|a| a["title"].as_str()).collect();
    assert!(titles.iter().any(|t| t.contains("hypotenuse")), "{titles:?}");
    let mut action = actions.iter().find(|a| a["title"].as_str().is_some_and(|t| t.starts_with("Add docstring"))).cloned().expect("Add docstring");
    if caps["codeActionProvider"]["resolveProvider"] == true && action.get("edit").is_none() {
        action = s.client.request("codeAction/resolve", action, TIMEOUT).unwrap()["result"].clone();
    }
    let edit = if let Some(edit) = action.get("edit") {
        edit.clone()
    } else {
        let command = &action["command"];
        let seen = s.client.notifications.len();
        let done = s
            .client
            .request("workspace/executeCommand", json!({"command": command["command"], "arguments": command["arguments"]}), TIMEOUT)
            .unwrap();
        assert!(done.get("error").is_none(), "{done}");
        let apply = s.client.notifications[seen..]
            .iter()
            .find(|n| n["method"] == "workspace/applyEdit")
            .cloned()
            .expect("the server sends workspace/applyEdit");
        apply["params"]["edit"].clone()
    };
    let mut edits: Vec<Value> = edit["changes"][URI]
        .as_array()
        .cloned()
        .or_else(|| edit["documentChanges"].as_array().map(|d| d.iter().flat_map(|c| c["edits"].as_array().cloned().unwrap_or_default()).collect()))
        .expect("edits for the document");
    // Apply from the end so earlier offsets stay valid.
    edits.sort_by_key(|e| std::cmp::Reverse(offset(&s.text, &e["range"]["start"])));
    let before = s.text.clone();
    for e in edits {
        let (a, b) = (offset(&s.text, &e["range"]["start"]), offset(&s.text, &e["range"]["end"]));
        s.edit(a, b, e["newText"].as_str().unwrap());
    }
    assert_ne!(s.text, before);
    assert!(s.text.contains("def hypotenuse(a, b):\n    \"\"\""), "{}", s.text);
    assert!(s.client.shutdown(TIMEOUT).unwrap().success());
}
