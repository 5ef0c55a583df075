//! Next edits end to end: the real binary with the FIM test model, over stdio. A parameter
//! renamed by typing → `ghostline/nextEdit` (and `textDocument/copilotInlineEdit`) returns its
//! other uses, and the "Apply next edit" code action carries them as a `WorkspaceEdit`; a
//! parameter added → the calls get it, by name or from the FIM model; `nextEdit.enabled: false` and an
//! excluded file → nothing; a module function renamed → its uses in the files that import it,
//! through the workspace index (a closed file with version `null`), and the proposal's
//! command clears the history.

mod common;

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

const URI: &str = "file:///tmp/ghostline-next-edit/shapes.py";
const TEXT: &str = "def area(w, h):\n    s = w * h\n    return s + w\n\n\ndef total(items, d):\n    return sum(area(i, 2) for i in items)\n\n\nx = area(3, 4)\n";

fn server(options: Value) -> TestServer {
    let mut client = spawn();
    let mut options = options;
    options["model"] = json!({"path": fim_model(), "threads": 2});
    let capabilities = json!({"workspace": {"workspaceEdit": {"documentChanges": true}}});
    initialize(&mut client, capabilities, options);
    wait_ready(&mut client);
    client
}

/// Types `text` at (line, character) one character at a time after deleting `delete`
/// characters there, as an editor sends it; returns the next version.
fn retype(client: &mut StdioClient, uri: &str, line: u32, character: u32, delete: u32, text: &str, mut version: i32) -> i32 {
    let at = json!({"line": line, "character": character});
    let end = json!({"line": line, "character": character + delete});
    client.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"range": {"start": at, "end": end}, "text": ""}]}));
    version += 1;
    for (i, c) in text.chars().enumerate() {
        let at = json!({"line": line, "character": character + i as u32});
        client.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"range": {"start": at, "end": at}, "text": c.to_string()}]}));
        version += 1;
    }
    version
}

fn next_edit(client: &mut StdioClient, method: &str, uri: &str) -> Vec<Value> {
    let r = client.request(method, json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 10}}), TIMEOUT).unwrap();
    assert!(r.get("error").is_none(), "{r}");
    r["result"]["edits"].as_array().cloned().unwrap_or_else(|| panic!("no edits list: {r}"))
}

/// (line, start character, end character, new text) of each edit.
fn places(edits: &[Value]) -> Vec<(u64, u64, u64, String)> {
    let mut out: Vec<_> = edits
        .iter()
        .map(|e| {
            let r = &e["range"];
            (r["start"]["line"].as_u64().unwrap(), r["start"]["character"].as_u64().unwrap(), r["end"]["character"].as_u64().unwrap(), e["newText"].as_str().unwrap().to_owned())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_renamed_parameter_s_uses_are_the_next_edits() {
    let mut client = server(json!({}));
    open(&mut client, URI, TEXT);
    let version = retype(&mut client, URI, 0, 9, 1, "width", 2);
    let edits = next_edit(&mut client, "ghostline/nextEdit", URI);
    let want = vec![(1, 8, 9, "width".to_owned()), (2, 15, 16, "width".to_owned())];
    assert_eq!(places(&edits), want, "{edits:?}");
    assert_eq!(edits[0]["textDocument"], json!({"uri": URI, "version": version - 1}));
    // Copilot's request: the same edits, with `text`.
    let copilot = next_edit(&mut client, "textDocument/copilotInlineEdit", URI);
    assert_eq!(places(&copilot), want);
    assert!(copilot.iter().all(|e| e["text"] == "width"), "{copilot:?}");
    // Helix: a code action with the edit.
    let at = json!({"line": 0, "character": 10});
    let r = client.request("textDocument/codeAction", json!({"textDocument": {"uri": URI}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}), TIMEOUT).unwrap();
    let actions = r["result"].as_array().cloned().unwrap_or_default();
    let action = actions.iter().find(|a| a["title"].as_str().is_some_and(|t| t.starts_with("Apply next edit:"))).unwrap_or_else(|| panic!("no next-edit action: {r}"));
    assert_eq!(action["title"], "Apply next edit: rename `w` to `width` (2 places)");
    let change = &action["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], version - 1);
    assert_eq!(change["edits"].as_array().map(Vec::len), Some(2), "{action}");
    // No document text in the log.
    assert!(log_messages(&client).iter().all(|m| !m.contains("return s")), "{:?}", log_messages(&client));
    client.shutdown(TIMEOUT).unwrap();
}

#[test]
fn an_added_parameter_has_the_model_write_the_calls_again() {
    let mut client = server(json!({}));
    open(&mut client, URI, TEXT);
    // `def area(w, h, d):`
    retype(&mut client, URI, 0, 13, 0, ", d", 2);
    let edits = next_edit(&mut client, "ghostline/nextEdit", URI);
    let found = places(&edits);
    // In `total`, a `d` is there to pass: passed by name; at the module's call, the model's.
    assert_eq!(found.first(), Some(&(6, 24, 24, ", d".to_owned())), "{edits:?}");
    let model = found.get(1).unwrap_or_else(|| panic!("the model wrote nothing for the module's call: {edits:?}"));
    assert_eq!((model.0, model.1, model.2), (9, 13, 13), "the new argument goes after the last one");
    assert!(model.3.starts_with(", ") && model.3.len() > 2, "{model:?}");
    // One argument, ending where the call does: no comma or closer of the call's own.
    let (mut depth, arg) = (0i32, &model.3[2..]);
    for c in arg.chars() {
        depth += match c {
            '(' | '[' | '{' => 1,
            ')' | ']' | '}' => -1,
            _ => 0,
        };
        assert!(depth >= 0 && !(depth == 0 && c == ','), "the argument runs past itself: {model:?}");
    }
    // The same again: deterministic.
    assert_eq!(places(&next_edit(&mut client, "ghostline/nextEdit", URI)), found);
    client.shutdown(TIMEOUT).unwrap();
}

#[test]
fn turned_off_or_excluded_there_are_none() {
    let mut client = server(json!({"nextEdit": {"enabled": false}, "completion": {"exclude": ["secret_*.py"]}}));
    open(&mut client, URI, TEXT);
    retype(&mut client, URI, 0, 9, 1, "width", 2);
    assert!(next_edit(&mut client, "ghostline/nextEdit", URI).is_empty());
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"nextEdit": {"enabled": true}, "completion": {"exclude": ["secret_*.py"]}}}));
    let secret = "file:///tmp/ghostline-next-edit/secret_keys.py";
    open(&mut client, secret, TEXT);
    retype(&mut client, secret, 0, 9, 1, "width", 2);
    assert!(next_edit(&mut client, "ghostline/nextEdit", secret).is_empty(), "an excluded file is never recorded");
    // Turned on: the edit made while off was not recorded; a new one is (`h` → `height`).
    assert!(next_edit(&mut client, "ghostline/nextEdit", URI).is_empty());
    retype(&mut client, URI, 0, 16, 1, "height", 8);
    assert_eq!(places(&next_edit(&mut client, "ghostline/nextEdit", URI)), vec![(1, 12, 13, "height".to_owned())]);
    client.shutdown(TIMEOUT).unwrap();
}

fn file_uri(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

#[test]
fn a_renamed_module_function_s_uses_in_importing_files_follow_and_the_command_clears_the_history() {
    let root = TempDir::new("next-edit-across");
    std::fs::create_dir_all(root.join("pkg")).unwrap();
    std::fs::write(root.join("pkg/__init__.py"), "").unwrap();
    let geo = "def area(w, h):\n    return w * h\n";
    std::fs::write(root.join("pkg/geo.py"), geo).unwrap();
    let user = "from pkg.geo import area\nfrom pkg.geo import area as surface\n\nx = area(1, 2) + surface(3, 4)\n";
    std::fs::write(root.join("user.py"), user).unwrap();
    let module = "from pkg import geo\n\ny = geo.area(5, 6)\n";
    std::fs::write(root.join("module.py"), module).unwrap();
    std::fs::write(root.join("secret_user.py"), user).unwrap();
    let mut client = spawn();
    let capabilities = json!({"window": {"workDoneProgress": true}, "workspace": {"workspaceEdit": {"documentChanges": true}}});
    let options = json!({"model": {"path": fim_model(), "threads": 2}, "completion": {"exclude": ["secret_*.py"]}});
    let r = client.request("initialize", json!({"processId": null, "rootUri": file_uri(&root), "capabilities": capabilities, "initializationOptions": options}), TIMEOUT).unwrap();
    assert!(r["result"]["capabilities"]["executeCommandProvider"]["commands"].as_array().is_some_and(|c| c.contains(&json!("ghostline.nextEditAccepted"))), "{r}");
    client.notify("initialized", json!({}));
    wait_ready(&mut client);
    indexed(&mut client);
    let geo_uri = file_uri(&root.join("pkg/geo.py"));
    let module_uri = file_uri(&root.join("module.py"));
    // `module.py` is open (version 5); `user.py` is not.
    open(&mut client, &geo_uri, geo);
    client.notify("textDocument/didOpen", json!({"textDocument": {"uri": module_uri, "languageId": "python", "version": 5, "text": module}}));
    retype(&mut client, &geo_uri, 0, 4, 4, "surface_area", 2);
    let edits = next_edit(&mut client, "ghostline/nextEdit", &geo_uri);
    let of = |uri: &str| edits.iter().filter(|e| e["textDocument"]["uri"] == uri).cloned().collect::<Vec<_>>();
    let user_uri = file_uri(&root.join("user.py"));
    let in_user = places(&of(&user_uri));
    // The import's name (twice: the alias keeps its name) and the unaliased use.
    assert_eq!(in_user, vec![(0, 20, 24, "surface_area".to_owned()), (1, 20, 24, "surface_area".to_owned()), (3, 4, 8, "surface_area".to_owned())], "{edits:?}");
    assert!(of(&user_uri).iter().all(|e| e["textDocument"]["version"].is_null()), "a closed file: version null");
    assert_eq!(places(&of(&module_uri)), vec![(2, 8, 12, "surface_area".to_owned())]);
    assert!(of(&module_uri).iter().all(|e| e["textDocument"]["version"] == 5), "an open document: its version");
    assert!(of(&file_uri(&root.join("secret_user.py"))).is_empty(), "an excluded file is never edited");
    // Helix: one code action, a document change per file.
    let at = json!({"line": 0, "character": 6});
    let r = client.request("textDocument/codeAction", json!({"textDocument": {"uri": geo_uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}), TIMEOUT).unwrap();
    let actions = r["result"].as_array().cloned().unwrap_or_default();
    let action = actions.iter().find(|a| a["title"].as_str().is_some_and(|t| t.starts_with("Apply next edit:"))).unwrap_or_else(|| panic!("no next-edit action: {r}"));
    assert_eq!(action["title"], "Apply next edit: rename `area` to `surface_area` (4 places in 2 files)");
    assert_eq!(action["edit"]["documentChanges"].as_array().map(Vec::len), Some(2), "{action}");
    assert_eq!(action["command"]["command"], "ghostline.nextEditAccepted");
    // Accepted: the command (as the clients run it) clears the history: nothing more to propose.
    let command = edits[0]["command"].clone();
    assert_eq!(command["command"], "ghostline.nextEditAccepted", "{edits:?}");
    let r = client.request("workspace/executeCommand", json!({"command": command["command"], "arguments": command["arguments"]}), TIMEOUT).unwrap();
    assert!(r.get("error").is_none(), "{r}");
    assert!(next_edit(&mut client, "ghostline/nextEdit", &geo_uri).is_empty());
    client.shutdown(TIMEOUT).unwrap();
}
