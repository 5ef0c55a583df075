//! *Generate tests* (and the other code actions' edits) in ordinary project layouts, end to end:
//! the real binary over stdio, the real test model on the local route. Empty and blank test
//! files, an edit the editor refuses, folders that are not Python names, two actions at once,
//! nested functions, unsaved documents, CRLF files and files outside the workspace.

mod common;

use std::path::Path;

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

const GEOMETRY: &str = "import math\n\n\ndef hypotenuse(a, b):\n    return math.sqrt(a * a + b * b)\n";

fn uri(path: &Path) -> String {
    ghostline::lsp::actions::path_to_uri(path)
}

/// A fresh workspace folder holding `files` (relative path, text).
fn workspace(name: &str, files: &[(&str, &str)]) -> TempDir {
    let root = TempDir::new(&format!("testgen-{name}"));
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    root
}

/// A server for the workspace `root`; `create`: the client can create files itself.
fn start(root: &Path, create: bool) -> TestServer {
    let mut client = spawn();
    let operations = if create { json!(["create"]) } else { json!([]) };
    let r = client
        .request(
            "initialize",
            json!({"processId": null, "rootUri": uri(root), "workspaceFolders": [{"uri": uri(root), "name": "ws"}],
                   "capabilities": {"workspace": {"workspaceEdit": {"documentChanges": true, "resourceOperations": operations}}},
                   "initializationOptions": {"model": {"path": model(), "threads": 1}}}),
            TIMEOUT,
        )
        .unwrap();
    assert!(r.get("error").is_none(), "{r}");
    client.notify("initialized", json!({}));
    wait_ready(&mut client);
    client
}

fn open_text(client: &mut StdioClient, uri: &str, text: &str) {
    client.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}));
}

fn actions_at(client: &mut StdioClient, uri: &str, line: u32, character: u32) -> Vec<Value> {
    let at = json!({"line": line, "character": character});
    let r = client
        .request("textDocument/codeAction", json!({"textDocument": {"uri": uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}), TIMEOUT)
        .unwrap();
    assert!(r.get("error").is_none(), "{r}");
    r["result"].as_array().cloned().unwrap_or_default()
}

fn find<'a>(actions: &'a [Value], prefix: &str) -> &'a Value {
    actions
        .iter()
        .find(|a| a["title"].as_str().unwrap_or("").starts_with(prefix))
        .unwrap_or_else(|| panic!("no action {prefix:?} in {actions:?}"))
}

fn execute_params(action: &Value) -> Value {
    json!({"command": action["command"]["command"], "arguments": action["command"]["arguments"]})
}

/// Runs the action whose title starts with `prefix`; its `executeCommand` result.
fn run(client: &mut StdioClient, actions: &[Value], prefix: &str) -> Value {
    let r = client.request("workspace/executeCommand", execute_params(find(actions, prefix)), TIMEOUT).unwrap();
    assert!(r.get("error").is_none(), "{r}");
    r["result"].clone()
}

/// The last `workspace/applyEdit` the server sent.
fn last_edit(client: &StdioClient) -> Value {
    client.notifications.iter().rev().find(|n| n["method"] == "workspace/applyEdit").map(|n| n["params"]["edit"].clone()).expect("an edit was sent")
}

fn edits_sent(client: &StdioClient) -> usize {
    client.notifications.iter().filter(|n| n["method"] == "workspace/applyEdit").count()
}

/// An existing test file that is empty, or holds only whitespace, is filled with a versioned
/// edit; one with other tests is appended to. A file ghostline created itself for a client
/// that cannot create files is removed again when the editor refuses the edit, and a second
/// run on the same folder (the file now there, still empty) works.
#[test]
fn tests_into_an_existing_empty_or_blank_test_file() {
    let root = workspace("blank", &[("geometry.py", GEOMETRY)]);
    let file = root.join("geometry.py");
    let tests_dir = root.join("tests");
    let test_file = tests_dir.join("test_geometry.py");
    let mut client = start(&root, false);
    open_text(&mut client, &uri(&file), GEOMETRY);
    let actions = actions_at(&mut client, &uri(&file), 3, 6);

    // No test file: ghostline creates it (the client cannot); the editor refuses the edit:
    // neither the file nor the folder made for it stays behind.
    client.accept_edits(false);
    let r = run(&mut client, &actions, "Generate tests");
    assert_eq!(r["applied"], false, "{r}");
    assert!(!test_file.exists() && !tests_dir.exists(), "a refused edit left {} behind", test_file.display());

    // Accepted: created (empty, by ghostline) and filled by the edit. This test client does
    // not write edits to disk, so the file stays empty, as after an edit an editor dropped.
    client.accept_edits(true);
    let r = run(&mut client, &actions, "Generate tests");
    assert_eq!(r["applied"], true, "{r}");
    assert_eq!(std::fs::read_to_string(&test_file).unwrap(), "");

    // Again on the same folder: the empty file is there, and it is filled, not refused.
    for blank in ["", "\n  \n\t\n"] {
        std::fs::write(&test_file, blank).unwrap();
        let r = run(&mut client, &actions, "Generate tests");
        assert_eq!(r["applied"], true, "{blank:?}: {r}");
        let edit = last_edit(&client);
        let changes = edit["documentChanges"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "no create for a file that exists: {edit}");
        assert_eq!(changes[0]["textDocument"], json!({"uri": uri(&test_file), "version": null}), "{edit}");
        let e = &changes[0]["edits"][0];
        let lines = blank.matches('\n').count();
        assert_eq!(e["range"], json!({"start": {"line": 0, "character": 0}, "end": {"line": lines, "character": 0}}), "the whole blank text is replaced: {edit}");
        let new_text = e["newText"].as_str().unwrap();
        assert!(new_text.starts_with("from geometry import hypotenuse\n") && new_text.contains("def test_"), "{new_text}");
    }

    // A test file with other tests: appended to, what is there untouched.
    let other = "import pytest\n\n\ndef test_other():\n    assert True\n";
    std::fs::write(&test_file, other).unwrap();
    let r = run(&mut client, &actions, "Generate tests");
    assert_eq!(r["applied"], true, "{r}");
    let edit = last_edit(&client);
    let edits = edit["documentChanges"][0]["edits"].as_array().unwrap().clone();
    assert_eq!(edits[0]["range"]["start"], json!({"line": 1, "character": 0}), "the import after the imports: {edit}");
    assert_eq!(edits[0]["newText"], "from geometry import hypotenuse\n");
    assert_eq!(edits[1]["range"]["start"], json!({"line": 4, "character": 15}), "the tests after the last line: {edit}");
    client.shutdown(TIMEOUT).unwrap();
}

/// The generated test file's import block, run by Python from the test file's own place:
/// it must import the function.
fn python_imports(test_file: &Path, new_text: &str, name: &str) {
    let python = std::env::var("GHOSTLINE_PYTHON").unwrap_or_else(|_| "python3".into());
    std::fs::create_dir_all(test_file.parent().unwrap()).unwrap();
    let header: String = new_text.lines().take_while(|l| !l.starts_with("def ") && !l.starts_with("class ")).map(|l| format!("{l}\n")).collect();
    std::fs::write(test_file, format!("{header}\nprint({name}(3, 4))\n")).unwrap();
    // From another folder: the import must not depend on the working directory (a missing
    // pytest is stubbed: only the import of the code under test is checked).
    let out = std::process::Command::new(python)
        .args(["-c", "import sys, types, runpy; sys.modules.setdefault('pytest', types.ModuleType('pytest')); runpy.run_path(sys.argv[1])"])
        .arg(test_file)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{header}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "5.0");
}

/// `my dir/geo.py` and `my-pkg/geo.py`: the tests put the folder on `sys.path` and import
/// from there (checked by running the import with Python); `my-geo.py`, which no import can
/// name, is refused before anything is generated, and the error reports no route.
#[test]
fn tests_for_modules_in_folders_that_are_not_python_names() {
    let root = workspace("names", &[("my dir/geo.py", GEOMETRY), ("my-pkg/shapes/geo.py", GEOMETRY), ("my-geo.py", GEOMETRY)]);
    let mut client = start(&root, true);
    for (source, test_file) in [("my dir/geo.py", "tests/test_geo.py"), ("my-pkg/shapes/geo.py", "tests/test_geo.py")] {
        let file = root.join(source);
        open_text(&mut client, &uri(&file), GEOMETRY);
        let actions = actions_at(&mut client, &uri(&file), 3, 6);
        let r = run(&mut client, &actions, "Generate tests");
        assert_eq!(r["applied"], true, "{source}: {r}");
        let edit = last_edit(&client);
        assert_eq!(edit["documentChanges"][0]["uri"], uri(&root.join(test_file)), "{edit}");
        let new_text = edit["documentChanges"][1]["edits"][0]["newText"].as_str().unwrap().to_owned();
        assert!(new_text.contains("sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "), "{new_text}");
        python_imports(&root.join(test_file), &new_text, "hypotenuse");
        std::fs::remove_dir_all(root.join("tests")).unwrap();
    }

    // A docstring first, so that there is an earlier route to (wrongly) report.
    let file = root.join("my-geo.py");
    open_text(&mut client, &uri(&file), GEOMETRY);
    let actions = actions_at(&mut client, &uri(&file), 3, 6);
    let r = run(&mut client, &actions, "Add docstring");
    assert_eq!(r["route"], "local", "{r}");
    let before = edits_sent(&client);
    let r = run(&mut client, &actions, "Generate tests");
    assert_eq!(r["applied"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("`my-geo.py` is not a Python module name"), "{r}");
    assert_eq!(r["lastRoute"], Value::Null, "this action was never routed: {r}");
    assert_eq!(edits_sent(&client), before);
    client.shutdown(TIMEOUT).unwrap();
}

/// Two *Generate tests* at once for the same module: the second is refused with the reason
/// (both would create the file and insert at its start); one edit is sent, one file made.
#[test]
fn two_test_generations_for_one_file_at_once() {
    let root = workspace("twice", &[("geometry.py", GEOMETRY)]);
    let file = root.join("geometry.py");
    let mut client = start(&root, true);
    open_text(&mut client, &uri(&file), GEOMETRY);
    let actions = actions_at(&mut client, &uri(&file), 3, 6);
    let params = execute_params(find(&actions, "Generate tests"));
    let a = client.send_request("workspace/executeCommand", params.clone());
    let b = client.send_request("workspace/executeCommand", params);
    let ra = client.wait_response(a, TIMEOUT).unwrap()["result"].clone();
    let rb = client.wait_response(b, TIMEOUT).unwrap()["result"].clone();
    let (applied, refused): (Vec<&Value>, Vec<&Value>) = [&ra, &rb].into_iter().partition(|r| r["applied"] == true);
    assert_eq!((applied.len(), refused.len()), (1, 1), "{ra} {rb}");
    assert!(refused[0]["error"].as_str().unwrap().contains("another action is writing tests into test_geometry.py"), "{}", refused[0]);
    assert_eq!(edits_sent(&client), 1);
    // Done: the next one runs (and, the file not being there, creates it again).
    let r = run(&mut client, &actions, "Generate tests");
    assert_eq!(r["applied"], true, "{r}");
    client.shutdown(TIMEOUT).unwrap();
}

/// Inside a nested function, *Generate tests* is for the enclosing function (the one a test
/// can import); docstrings are still for the nested one.
#[test]
fn tests_for_a_nested_function_aim_at_the_importable_one() {
    let text = "def outer(x):\n    def inner(y):\n        return y * 2\n    return inner(x) + 1\n";
    let root = workspace("nested", &[("nested.py", text)]);
    let file = root.join("nested.py");
    let mut client = start(&root, true);
    open_text(&mut client, &uri(&file), text);
    let actions = actions_at(&mut client, &uri(&file), 2, 12);
    let titles: Vec<&str> = actions.iter().filter_map(|a| a["title"].as_str()).collect();
    assert_eq!(titles, ["Generate tests for `outer`", "Add docstring to `inner`", "Refactor: simplify `inner`"]);
    let r = run(&mut client, &actions, "Generate tests");
    assert_eq!(r["applied"], true, "{r}");
    let edit = last_edit(&client);
    let new_text = edit["documentChanges"][1]["edits"][0]["newText"].as_str().unwrap();
    assert!(new_text.starts_with("from nested import outer\n"), "{new_text}");
    client.shutdown(TIMEOUT).unwrap();
}

/// An unsaved document (`untitled:`) is offered no *Generate tests*; an action run for it
/// anyway fails and reports no route, not an earlier action's.
#[test]
fn untitled_documents_get_no_test_generation() {
    let root = workspace("untitled", &[("geometry.py", GEOMETRY)]);
    let mut client = start(&root, true);
    let file = root.join("geometry.py");
    open_text(&mut client, &uri(&file), GEOMETRY);
    let on_file = actions_at(&mut client, &uri(&file), 3, 6);
    let r = run(&mut client, &on_file, "Add docstring");
    assert_eq!(r["route"], "local", "{r}");

    let untitled = "untitled:Untitled-1";
    open_text(&mut client, untitled, GEOMETRY);
    let actions = actions_at(&mut client, untitled, 3, 6);
    let titles: Vec<&str> = actions.iter().filter_map(|a| a["title"].as_str()).collect();
    assert_eq!(titles, ["Add docstring to `hypotenuse`", "Refactor: simplify `hypotenuse`"]);
    // The command of a stale listing (made for the file) pointed at the untitled document.
    let mut params = execute_params(find(&on_file, "Generate tests"));
    params["arguments"][0]["uri"] = json!(untitled);
    let r = client.request("workspace/executeCommand", params, TIMEOUT).unwrap()["result"].clone();
    assert_eq!(r["applied"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("not a file on disk"), "{r}");
    assert_eq!(r["lastRoute"], Value::Null, "{r}");
    let last = client.request("workspace/executeCommand", json!({"command": "ghostline.lastRoute"}), TIMEOUT).unwrap();
    let last = last["result"].as_str().unwrap();
    assert!(last.starts_with("Generate tests for `hypotenuse` — not run: "), "{last}");
    client.shutdown(TIMEOUT).unwrap();
}

/// A CRLF document: the docstring and the tests (in a new test file) come with CRLF.
#[test]
fn crlf_documents_get_crlf_edits() {
    let crlf = GEOMETRY.replace('\n', "\r\n");
    let root = workspace("crlf", &[("geometry.py", &crlf)]);
    let file = root.join("geometry.py");
    let mut client = start(&root, true);
    open_text(&mut client, &uri(&file), &crlf);
    let actions = actions_at(&mut client, &uri(&file), 3, 6);
    for (prefix, at) in [("Add docstring", 0), ("Generate tests", 1)] {
        let r = run(&mut client, &actions, prefix);
        assert_eq!(r["applied"], true, "{prefix}: {r}");
        let edit = last_edit(&client);
        let new_text = edit["documentChanges"][at]["edits"][0]["newText"].as_str().unwrap();
        assert!(new_text.contains("\r\n"), "{prefix}: {new_text:?}");
        assert!(!new_text.replace("\r\n", "").contains('\n'), "{prefix}: a lone LF in {new_text:?}");
    }
    client.shutdown(TIMEOUT).unwrap();
}

/// A file in no workspace folder: its tests go next to it, and the user is told where.
#[test]
fn tests_for_a_file_outside_the_workspace_go_next_to_it_and_say_so() {
    let root = workspace("inside", &[]);
    let elsewhere = workspace("outside", &[("geometry.py", GEOMETRY)]);
    let file = elsewhere.join("geometry.py");
    let mut client = start(&root, true);
    open_text(&mut client, &uri(&file), GEOMETRY);
    let actions = actions_at(&mut client, &uri(&file), 3, 6);
    let r = run(&mut client, &actions, "Generate tests");
    assert_eq!(r["applied"], true, "{r}");
    let test_file = elsewhere.join("tests/test_geometry.py");
    assert_eq!(last_edit(&client)["documentChanges"][0]["uri"], uri(&test_file));
    let note = r["note"].as_str().unwrap_or_else(|| panic!("no note: {r}"));
    assert!(note.contains("in no workspace folder") && note.contains(&test_file.display().to_string()), "{note}");
    // Told with a message too (it may arrive just after the command's answer).
    let told = client.wait_notification("window/showMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("in no workspace folder")));
    assert!(told.is_ok(), "{:?}", log_messages(&client));
    client.shutdown(TIMEOUT).unwrap();
}
