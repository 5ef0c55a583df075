//! The cross-file section end to end over stdio: a real workspace folder indexed in the
//! background, the definitions the code at the cursor uses from sibling files in the prompt,
//! excluded files never read, the section stable while typing in a scope and current when
//! another file changes on disk; the index's filters on watcher events and opened files,
//! deleted files, a settings change that rebuilds the index, and no indexed code in the log.
//! The real binary and the real test model.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

/// The bench's `shop` package copied into a fresh workspace, with a file under `secrets/` and
/// one matching a `context.exclude` glob that the cart imports and calls.
fn workspace(name: &str) -> TempDir {
    let root = TempDir::new(name);
    let pkg = root.join("shop");
    std::fs::create_dir_all(pkg.join("secrets")).unwrap();
    for f in ["__init__.py", "money.py", "catalog.py", "discounts.py"] {
        std::fs::copy(fixture(&format!("traces/shop/shop/{f}")), pkg.join(f)).unwrap();
    }
    std::fs::write(pkg.join("secrets/__init__.py"), "").unwrap();
    std::fs::write(pkg.join("secrets/keys.py"), "def signing_key_zq7(user: str) -> str:\n    return 'sk-live-zq7'\n").unwrap();
    std::fs::write(pkg.join("private_rates.py"), "def margin_rate_zq7(sku: str) -> float:\n    return 0.42\n").unwrap();
    root
}

/// cart.py with the cursor after `typed` in `total_text`'s body: (text, line, character).
fn cart(typed: &str) -> (String, u32, u32) {
    let source = std::fs::read_to_string(fixture("traces/shop/shop/cart.py")).unwrap();
    let source = source.replace(
        "from .money import format_price, split_evenly\n",
        "from .money import format_price, split_evenly\nfrom .secrets.keys import signing_key_zq7\nfrom .private_rates import margin_rate_zq7\n",
    );
    let at = source.find("<CURSOR>").unwrap();
    let text = source.replacen("<CURSOR>", typed, 1);
    let end = at + typed.len();
    let line = text[..end].matches('\n').count() as u32;
    let character = (end - text[..end].rfind('\n').map_or(0, |i| i + 1)) as u32;
    (text, line, character)
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A server on `root` whose index has been built (the `$/progress` of indexing ended).
fn server(root: &Path, options: Value) -> TestServer {
    server_on(spawn(), &model(), root, options)
}

/// [`server`] for a client already spawned, on the model at `model`.
fn server_on(mut client: TestServer, model: &Path, root: &Path, options: Value) -> TestServer {
    let capabilities = json!({"window": {"workDoneProgress": true}, "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": true}}});
    let mut options = options;
    options["model"] = json!({"path": model});
    let r = client
        .request("initialize", json!({"processId": null, "rootUri": uri(root), "capabilities": capabilities, "initializationOptions": options}), TIMEOUT)
        .unwrap();
    assert!(r.get("error").is_none(), "{r}");
    client.notify("initialized", json!({}));
    wait_ready(&mut client);
    indexed(&mut client);
    client
}

/// Waits for the end of an indexing progress begun after the first `after` notifications.
fn indexed_after(client: &mut StdioClient, after: usize) -> String {
    let started = Instant::now();
    loop {
        let begun = client.notifications[after..]
            .iter()
            .find(|n| n["method"] == "$/progress" && n["params"]["value"]["title"].as_str().is_some_and(|t| t.contains("indexing")))
            .map(|n| n["params"]["token"].clone());
        if let Some(token) = begun {
            let end = client
                .wait_notification("$/progress", TIMEOUT, |p| p["token"] == token && p["value"]["kind"] == "end")
                .unwrap_or_else(|e| panic!("indexing did not end: {e}"));
            return end["params"]["value"]["message"].as_str().unwrap_or("").to_owned();
        }
        assert!(started.elapsed() < TIMEOUT, "no new indexing progress");
        let _ = client.request("ghostline/lastTimings", Value::Null, TIMEOUT);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How many times the server asked the client to watch files.
fn watcher_registrations(client: &StdioClient) -> usize {
    client.notifications.iter().filter(|n| n["method"] == "client/registerCapability" && n.to_string().contains("workspace/didChangeWatchedFiles")).count()
}

fn last_completion(client: &mut StdioClient) -> Value {
    let r = client.request("ghostline/lastTimings", Value::Null, TIMEOUT).unwrap();
    r["result"].clone()
}

fn change(client: &mut StdioClient, uri: &str, version: i32, text: &str) {
    client.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}));
}

#[test]
fn the_section_holds_what_the_scope_uses_from_sibling_files_and_never_excluded_ones() {
    let root = workspace("cross-file-section");
    let mut client = server(&root, json!({"context": {"exclude": ["private_*.py"]}}));
    // The server asked to be told of file changes.
    let registered = client.notifications.iter().any(|n| n["method"] == "client/registerCapability" && n.to_string().contains("workspace/didChangeWatchedFiles"));
    assert!(registered, "no watcher registration");

    let cart_uri = uri(&root.join("shop/cart.py"));
    let typed = "cents = sum(product.price_cents * quantity for product, quantity in self.lines)\n        \
                 key = signing_key_zq7('me') + str(margin_rate_zq7('x'))\n        \
                 if coupon is not None and coupon.is_valid(date.today()):\n            cents = apply_discount(cents, coupon.percent)\n        \
                 return ";
    let (text, line, character) = cart(typed);
    open(&mut client, &cart_uri, &text);
    let first = inline_completion(&mut client, &cart_uri, line, character);
    assert!(first.get("error").is_none(), "{first}");
    let last = last_completion(&mut client);
    let section = last["cross_file"].as_str().unwrap_or("");
    // The coupon parameter's class and the function the scope calls, with their signatures.
    assert!(section.contains("# path: shop/discounts.py\n"), "{section}");
    assert!(section.contains("def apply_discount(price_cents: int, percent: float) -> int"), "{section}");
    assert!(section.contains("class Coupon"), "{section}");
    assert!(section.ends_with("# path: shop/cart.py\n"), "{section}");
    // Excluded files (secrets/**, a context.exclude glob), imported and called, are never read.
    for secret in ["zq7", "signing_key", "margin_rate"] {
        assert!(!section.contains(secret), "{secret} in the section: {section}");
    }
    // The section went into the prompt: more tokens than the same request without it.
    let with_tokens = last["timings"]["prompt_tokens"].as_u64().unwrap();
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"completion": {"crossFile": false}}}));
    change(&mut client, &cart_uri, 2, &text);
    inline_completion(&mut client, &cart_uri, line, character);
    let without = last_completion(&mut client);
    assert_eq!(without["cross_file"], "", "crossFile: false still has a section");
    let without_tokens = without["timings"]["prompt_tokens"].as_u64().unwrap();
    assert!(with_tokens > without_tokens + 20, "{with_tokens} vs {without_tokens}");
    // The control: with the context.exclude glob lifted, the file it kept out comes in.
    let first_build = client.notifications.len();
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"completion": {"crossFile": true}, "context": {"exclude": []}}}));
    indexed_after(&mut client, first_build);
    change(&mut client, &cart_uri, 3, &text);
    inline_completion(&mut client, &cart_uri, line, character);
    let lifted = last_completion(&mut client)["cross_file"].as_str().unwrap_or("").to_owned();
    assert!(lifted.contains("def margin_rate_zq7(sku: str) -> float") && !lifted.contains("signing_key"), "{lifted}");
    assert_eq!(watcher_registrations(&client), 1, "the watcher was registered again by the rebuild");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// On the FIM test model (a vocabulary with a file separator, id 5): the prompt's section has
/// the `<file_sep>` token before each path, first of all, and the callee's definition among
/// its files; `lastTimings`' `cross_file` is that section as the prompt carried it (a
/// `<file_sep>` for each separator token, no comment headers). What the model does with it,
/// measured: after `cents = apply_` it writes `discount(coupon) * cents`. It names the callee,
/// but with one argument: with the section ranked by import order it wrote
/// `discount(coupon.code, cents)` (two, not the right ones: `cents, coupon.percent`). The
/// ranking that replaced it (imports nothing uses yet first, then the names nearest the scope)
/// names more callees with their arity over the eval's 48 holes (README, "Imports not yet
/// used"); on this one prompt the 135M model's arity went the other way.
#[test]
fn the_fim_test_model_gets_a_file_separated_section_and_names_the_callee() {
    const FILE_SEP: u64 = 5;
    let root = workspace("cross-file-fim");
    let mut client = server_on(spawn(), &fim_model(), &root, json!({}));
    let cart_uri = uri(&root.join("shop/cart.py"));
    let typed = "cents = sum(product.price_cents * quantity for product, quantity in self.lines)\n        \
                 if coupon is not None:\n            cents = apply_";
    let (text, line, character) = cart(typed);
    open(&mut client, &cart_uri, &text);
    let answer = inline_completion(&mut client, &cart_uri, line, character);
    assert!(answer.get("error").is_none(), "{answer}");
    let last = last_completion(&mut client);
    let section = last["cross_file"].as_str().unwrap_or("");
    assert!(section.contains("<file_sep>shop/discounts.py\n"), "{section}");
    assert!(section.contains("def apply_discount(price_cents: int, percent: float) -> int"), "{section}");
    assert!(section.starts_with("<file_sep>") && section.ends_with("<file_sep>shop/cart.py\n"), "{section}");
    assert!(!section.contains("# path:"), "comment headers the prompt does not carry: {section}");
    let prompt: Vec<u64> = last["prompt"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
    // <file_sep> first (no BOS), one per file and one for the current file; then
    // <fim_prefix> (11) after the last separator, and <fim_suffix> (12) <fim_middle> (13) last.
    assert_eq!(prompt[0], FILE_SEP, "{last}");
    let seps = prompt.iter().filter(|&&t| t == FILE_SEP).count();
    assert!(seps >= 3, "{seps} separators: discounts.py, another file, cart.py expected: {last}");
    // The reported section has the prompt's files, no more (what its budget kept), no fewer.
    assert_eq!(section.matches("<file_sep>").count(), seps, "{section}");
    let last_sep = prompt.iter().rposition(|&t| t == FILE_SEP).unwrap();
    let pre = prompt.iter().position(|&t| t == 11).unwrap();
    assert!(last_sep < pre, "{last}");
    assert_eq!(prompt[prompt.len() - 1], 13, "{last}");
    let suggestion = last["text"].as_str().unwrap();
    assert!(suggestion.starts_with("discount("), "the callee not named: {suggestion:?}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn the_section_stays_while_typing_and_follows_a_file_changed_on_disk() {
    let root = workspace("cross-file-stable");
    let mut client = server(&root, json!({}));
    let cart_uri = uri(&root.join("shop/cart.py"));
    let base = "if coupon is not None:\n            cents = apply_discount(cents, coupon.percent)\n        return format_pr";
    let (text, line, character) = cart(base);
    open(&mut client, &cart_uri, &text);
    inline_completion(&mut client, &cart_uri, line, character);
    let section = last_completion(&mut client)["cross_file"].as_str().unwrap_or("").to_owned();
    assert!(section.contains("def apply_discount("), "{section}");
    // What the rest of the file uses comes too, after the scope's own names, as far as the
    // budget goes: here a function this method never calls (another method does).
    assert!(section.contains("def find_product("), "{section}");
    // Typing the rest of a word inside the scope leaves the section byte for byte.
    for (n, more) in ["i", "ic", "ice"].iter().enumerate() {
        let (text, line, character) = cart(&format!("{base}{more}"));
        change(&mut client, &cart_uri, 2 + n as i32, &text);
        inline_completion(&mut client, &cart_uri, line, character);
        assert_eq!(last_completion(&mut client)["cross_file"].as_str().unwrap_or(""), section, "after typing {more:?}");
    }
    // Another file changes on disk: the watcher's notification brings its new signature.
    let discounts = root.join("shop/discounts.py");
    let changed = std::fs::read_to_string(&discounts).unwrap().replace(
        "def apply_discount(price_cents: int, percent: float) -> int:",
        "def apply_discount(price_cents: int, percent: float, floor_cents: int = 0) -> int:",
    );
    std::fs::write(&discounts, changed).unwrap();
    client.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": uri(&discounts), "type": 2}]}));
    let started = Instant::now();
    // Back to where typing started: the suggestion shown after "ice" cannot answer there by
    // typed-ahead reuse (that answer's prompt was built before the change), so each request
    // builds its prompt, with the section as the index has it then.
    let (text, line, character) = cart(base);
    loop {
        change(&mut client, &cart_uri, 10, &text);
        inline_completion(&mut client, &cart_uri, line, character);
        let now = last_completion(&mut client)["cross_file"].as_str().unwrap_or("").to_owned();
        if now.contains("floor_cents: int = 0") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the changed signature never came: {now}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// Where the cursor rests (a code-action request for an empty range, as VS Code sends when it
/// shows a file), the whole prompt is decoded ahead: the first request there re-decodes
/// nothing but the last token or so.
#[test]
fn the_prompt_where_the_cursor_rests_is_decoded_before_the_first_request() {
    let root = workspace("cross-file-rest");
    let mut client = server(&root, json!({}));
    let cart_uri = uri(&root.join("shop/cart.py"));
    let (text, line, character) = cart("cents = ");
    open(&mut client, &cart_uri, &text);
    let at = json!({"line": line, "character": character});
    let r = client
        .request("textDocument/codeAction", json!({"textDocument": {"uri": cart_uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}), TIMEOUT)
        .unwrap();
    assert!(r.get("error").is_none(), "{r}");
    inline_completion(&mut client, &cart_uri, line, character);
    let timings = last_completion(&mut client)["timings"].clone();
    let (prompt, decoded) = (timings["prompt_tokens"].as_u64().unwrap(), timings["prefill_tokens"].as_u64().unwrap());
    assert!(prompt >= 150, "{timings}");
    // Only the last aligned chunk's tokens (fewer than `model.prefillChunk`, 32 on a CPU) are
    // decoded again: every position is decoded in the same aligned batch, warm or cold.
    assert!(decoded < 32, "the request decoded {decoded} of its {prompt} prompt tokens itself: {timings}");
    // (Without it, the request would decode the outline and the scope itself: the head
    // decoded when the file opened is BOS and the cross-file section only.)
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// Indexing runs in the background: a completion is answered while the build of a 10,000-file
/// workspace is still going on. No race with the clock: the build is held halfway through its
/// files (`GHOSTLINE_HOLD=index=…`, released by creating a file) until the answer has come;
/// only then is it let go, and its `$/progress` ends with the count of every file.
#[test]
fn a_large_workspace_is_indexed_in_the_background() {
    let root = workspace("cross-file-large");
    for d in 0..100 {
        let dir = root.join(format!("gen/m{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f:03}.py")), format!("def helper_{d}_{f}(x: int) -> int:\n    return x + {f}\n")).unwrap();
        }
    }
    let held = TempDir::new("cross-file-large-release");
    let release = held.join("release");
    let hold = format!("index={}", release.display());
    let mut client = spawn_with(&[("GHOSTLINE_HOLD", hold.as_str())], std::process::Stdio::inherit());
    let r = client
        .request("initialize", json!({"processId": null, "rootUri": uri(&root), "capabilities": {"window": {"workDoneProgress": true}}, "initializationOptions": {"model": {"path": model()}, "context": {"maxFiles": 20000}}}), TIMEOUT)
        .unwrap();
    assert!(r.get("error").is_none(), "{r}");
    client.notify("initialized", json!({}));
    wait_ready(&mut client);
    let token = client
        .wait_notification("$/progress", TIMEOUT, |p| p["value"]["title"].as_str().is_some_and(|t| t.contains("indexing")))
        .map(|n| n["params"]["token"].clone())
        .unwrap_or_else(|e| panic!("no indexing progress: {e}"));
    let ended = |client: &StdioClient| client.notifications.iter().any(|n| n["method"] == "$/progress" && n["params"]["token"] == token && n["params"]["value"]["kind"] == "end");
    let cart_uri = uri(&root.join("shop/cart.py"));
    let (text, line, character) = cart("cents = ");
    open(&mut client, &cart_uri, &text);
    // Answered by the model (a prompt was decoded, a suggestion made) while the build is held.
    let answer = inline_completion(&mut client, &cart_uri, line, character);
    assert!(answer.get("error").is_none(), "{answer}");
    let last = last_completion(&mut client);
    assert_eq!(last["uri"], cart_uri.as_str(), "{last}");
    assert!(last["timings"]["prompt_tokens"].as_u64().unwrap_or(0) > 0 && !last["text"].as_str().unwrap_or("").is_empty(), "no real answer: {last}");
    let items = answer["result"]["items"].as_array().map_or(0, Vec::len);
    assert_eq!(items, 1, "the suggestion was not sent: {answer}");
    assert!(!ended(&client), "the indexing ended before it was released");
    std::fs::write(&release, "").unwrap();
    let end = client
        .wait_notification("$/progress", TIMEOUT, |p| p["token"] == token && p["value"]["kind"] == "end")
        .unwrap_or_else(|e| panic!("indexing did not end: {e}"));
    let message = end["params"]["value"]["message"].as_str().unwrap_or("").to_owned();
    // "N files, M definitions, X MB, S s": all 10,000 files and the workspace's own (7 at most).
    let files: usize = message.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{message}"));
    assert!(message.contains(" files, ") && (10_000..=10_007).contains(&files), "not all 10,000 files: {message}");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// The index's filters on every way in, deleted files, and a settings change, over stdio,
/// at the most verbose log level:
/// - files a watcher reports under `.venv`, generated (by name, by a `DO NOT EDIT` line), with
///   a NUL byte, and an opened file `.gitignore` names never enter the section (a plain file
///   reported with them does);
/// - an open file deleted on disk leaves the section, the watcher's event before `didClose`
///   or after it;
/// - a `context.*` change rebuilds the index, keeping an open document's unsaved function and
///   the recent chunks, and does not register the watcher again;
/// - no indexed code reaches the log.
#[test]
fn filters_deletions_and_a_settings_change() {
    let root = workspace("cross-file-filters");
    let shop = root.join("shop");
    let put = |path: &Path, text: &[u8]| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    put(&root.join(".gitignore"), b"scratch_*.py\n");
    put(&shop.join("helpers_a.py"), b"def helper_a_zq9(n: int) -> int:\n    return n\n");
    put(&shop.join("helpers_b.py"), b"def helper_b_zq9(n: int) -> int:\n    return n\n");
    put(&shop.join("open_edit.py"), b"def old_fn_zq9():\n    return 0\n");
    put(&shop.join("scratch_notes.py"), b"def scratch_fn_zq9():\n    return 0\n");
    let runner = shop.join("runner.py");
    let code = "def run():\n    return helper_a_zq9(1) + helper_b_zq9(2) + unsaved_fn_zq9(3) + requests_get_zq9() + pb_message_zq9() + gen_notes_zq9() + nul_helper_zq9() + scratch_fn_zq9() + control_zq9() + ";
    put(&runner, code.as_bytes());
    let logs = TempDir::new("cross-file-filters-log");
    let log = logs.join("stderr.log");
    let spawned = spawn_with(&[("GHOSTLINE_LOG", "trace")], std::process::Stdio::from(std::fs::File::create(&log).unwrap()));
    let mut client = server_on(spawned, &model(), &root, json!({}));
    let (line, character) = (1, code.lines().nth(1).unwrap().len() as u32);
    let runner_uri = uri(&runner);
    let mut version = 1;
    let mut section = |client: &mut StdioClient| {
        version += 1;
        change(client, &runner_uri, version, code);
        inline_completion(client, &runner_uri, line, character);
        last_completion(client)["cross_file"].as_str().unwrap_or("").to_owned()
    };
    let until = |client: &mut StdioClient, section: &mut dyn FnMut(&mut StdioClient) -> String, done: &dyn Fn(&str) -> bool, what: &str| -> String {
        let started = Instant::now();
        loop {
            let now = section(client);
            if done(&now) {
                return now;
            }
            // Generous: each round is a completion, slow on 2 loaded cores.
            assert!(started.elapsed() < Duration::from_secs(90), "{what} never came: {now}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    // Opened: a gitignored file, a document with an unsaved function, the two to be deleted.
    open(&mut client, &uri(&shop.join("scratch_notes.py")), "def scratch_fn_zq9():\n    return 0\n");
    let unsaved = "def old_fn_zq9():\n    return 0\n\n\n# recent marker\ndef unsaved_fn_zq9(k: int) -> int:\n    return k\n";
    open(&mut client, &uri(&shop.join("open_edit.py")), unsaved);
    open(&mut client, &uri(&shop.join("helpers_a.py")), "def helper_a_zq9(n: int) -> int:\n    return n\n");
    open(&mut client, &uri(&shop.join("helpers_b.py")), "def helper_b_zq9(n: int) -> int:\n    return n\n");
    open(&mut client, &runner_uri, code);
    // Reported by the watcher: four files to keep out, and the control, last.
    let created = [
        (root.join(".venv/lib/python3.12/site-packages/requests/api.py"), b"def requests_get_zq9():\n    return 0\n".to_vec()),
        (shop.join("api_pb2.py"), b"def pb_message_zq9():\n    return 0\n".to_vec()),
        (shop.join("notes_gen.py"), b"# Code generated by a tool. DO NOT EDIT.\ndef gen_notes_zq9():\n    return 0\n".to_vec()),
        (shop.join("nul_mod.py"), b"def nul_helper_zq9():\n    return '\0'\n".to_vec()),
        (shop.join("control_zq9.py"), b"def control_zq9():\n    return 0\n".to_vec()),
    ];
    for (path, text) in &created {
        put(path, text);
    }
    let events: Vec<Value> = created.iter().map(|(p, _)| json!({"uri": uri(p), "type": 1})).collect();
    client.notify("workspace/didChangeWatchedFiles", json!({"changes": events}));
    let first = until(&mut client, &mut section, &|s| s.contains("def control_zq9(") && s.contains("def unsaved_fn_zq9("), "the control and the unsaved function");
    for kept_out in ["requests_get_zq9", "pb_message_zq9", "gen_notes_zq9", "nul_helper_zq9", "scratch_fn_zq9", "scratch_notes"] {
        assert!(!first.contains(kept_out), "{kept_out} in the section: {first}");
    }
    assert!(first.contains("def helper_a_zq9(") && first.contains("def helper_b_zq9(") && first.contains("# recent marker"), "{first}");

    // Deleted on disk while open: a's event before its didClose, b's after.
    std::fs::remove_file(shop.join("helpers_a.py")).unwrap();
    std::fs::remove_file(shop.join("helpers_b.py")).unwrap();
    client.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": uri(&shop.join("helpers_a.py")), "type": 3}]}));
    client.notify("textDocument/didClose", json!({"textDocument": {"uri": uri(&shop.join("helpers_a.py"))}}));
    client.notify("textDocument/didClose", json!({"textDocument": {"uri": uri(&shop.join("helpers_b.py"))}}));
    client.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": uri(&shop.join("helpers_b.py")), "type": 3}]}));
    until(&mut client, &mut section, &|s| !s.contains("helper_a_zq9") && !s.contains("helper_b_zq9"), "the deleted files' leaving");
    std::thread::sleep(Duration::from_millis(500));
    let after = section(&mut client);
    assert!(!after.contains("helpers_a.py") && !after.contains("helpers_b.py"), "a deleted file came back: {after}");

    // A context.* change: a new index from disk, with the open document's text over it.
    let before_change = client.notifications.len();
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"context": {"maxFileKb": 256}}}));
    let message = indexed_after(&mut client, before_change);
    let rebuilt = section(&mut client);
    assert!(rebuilt.contains("def unsaved_fn_zq9(k: int) -> int") && rebuilt.contains("# recent marker"), "after the rebuild ({message}): {rebuilt}");
    assert!(rebuilt.contains("def control_zq9(") && !rebuilt.contains("helper_a_zq9") && !rebuilt.contains("scratch_fn_zq9"), "{rebuilt}");
    assert_eq!(watcher_registrations(&client), 1, "the watcher was registered again by the rebuild");
    assert!(client.shutdown(TIMEOUT).unwrap().success());

    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("workspace indexed") && logged.contains("TRACE"), "the log is not being written at trace level");
    for code in ["_zq9(", "recent marker", "return n"] {
        assert!(!logged.contains(code), "indexed code ({code:?}) in the log");
    }
}
