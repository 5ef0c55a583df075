//! The cross-file section end to end over stdio: a real workspace folder indexed in the
//! background, the definitions the code at the cursor uses from sibling files in the prompt,
//! excluded files never read, the section stable while typing in a scope and current when
//! another file changes on disk. The real binary and the real test model.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

/// The bench's `shop` package copied into a fresh workspace, with a file under `secrets/` and
/// one matching a `context.exclude` glob that the cart imports and calls.
fn workspace(name: &str) -> PathBuf {
    let root = temp_dir(name);
    let pkg = root.join("shop");
    std::fs::create_dir_all(pkg.join("secrets")).unwrap();
    for f in ["__init__.py", "money.py", "catalog.py", "discounts.py"] {
        std::fs::copy(fixture(&format!("traces/shop/shop/{f}")), pkg.join(f)).unwrap();
    }
    std::fs::write(pkg.join("secrets/__init__.py"), "").unwrap();
    std::fs::write(pkg.join("secrets/keys.py"), "def signing_key_zq7(user: str) -> str:\n    return 'sk-live-zq7'\n").unwrap();
    std::fs::write(pkg.join("private_rates.py"), "def margin_rate_zq7(sku: str) -> float:\n    return 0.42\n").unwrap();
    std::fs::write(root.join(".env"), "API_TOKEN=zq7-env\n").unwrap();
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
fn server(root: &Path, options: Value) -> StdioClient {
    server_on(&model(), root, options)
}

/// [`server`] on the model at `model`.
fn server_on(model: &Path, root: &Path, options: Value) -> StdioClient {
    let mut client = spawn();
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

/// Waits for the end of the indexing progress; returns its message.
fn indexed(client: &mut StdioClient) -> String {
    let token = client
        .wait_notification("$/progress", TIMEOUT, |p| p["value"]["title"].as_str().is_some_and(|t| t.contains("indexing")))
        .map(|n| n["params"]["token"].clone())
        .unwrap_or_else(|e| panic!("no indexing progress: {e}"));
    let end = client
        .wait_notification("$/progress", TIMEOUT, |p| p["token"] == token && p["value"]["kind"] == "end")
        .unwrap_or_else(|e| panic!("indexing did not end: {e}"));
    end["params"]["value"]["message"].as_str().unwrap_or("").to_owned()
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
    // Excluded files (secrets/**, a context.exclude glob, .env) are never read.
    for secret in ["zq7", "signing_key", "margin_rate", "API_TOKEN"] {
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
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

/// On the FIM test model (a vocabulary with a file separator, id 5): the prompt's section has
/// the `<file_sep>` token before each path, first of all, and the callee's definition among
/// its files. (`lastTimings`' `cross_file` is every snippet offered, with comment headers: not
/// the prompt's own text.) What the model does with it, measured: after `cents = apply_` it
/// writes `discount(coupon.code, cents)`. It names the callee and gives it the definition's
/// two arguments, but not the right ones (`cents, coupon.percent`).
#[test]
fn the_fim_test_model_gets_a_file_separated_section_and_names_the_callee() {
    const FILE_SEP: u64 = 5;
    let root = workspace("cross-file-fim");
    let mut client = server_on(&fim_model(), &root, json!({}));
    let cart_uri = uri(&root.join("shop/cart.py"));
    let typed = "cents = sum(product.price_cents * quantity for product, quantity in self.lines)\n        \
                 if coupon is not None:\n            cents = apply_";
    let (text, line, character) = cart(typed);
    open(&mut client, &cart_uri, &text);
    let answer = inline_completion(&mut client, &cart_uri, line, character);
    assert!(answer.get("error").is_none(), "{answer}");
    let last = last_completion(&mut client);
    let offered = last["cross_file"].as_str().unwrap_or("");
    assert!(offered.contains("def apply_discount(price_cents: int, percent: float) -> int"), "{offered}");
    let prompt: Vec<u64> = last["prompt"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
    // <file_sep> first (no BOS), one per file and one for the current file; then
    // <fim_prefix> (11) after the last separator, and <fim_suffix> (12) <fim_middle> (13) last.
    assert_eq!(prompt[0], FILE_SEP, "{last}");
    let seps = prompt.iter().filter(|&&t| t == FILE_SEP).count();
    assert!(seps >= 3, "{seps} separators: discounts.py, another file, cart.py expected: {last}");
    let last_sep = prompt.iter().rposition(|&t| t == FILE_SEP).unwrap();
    let pre = prompt.iter().position(|&t| t == 11).unwrap();
    assert!(last_sep < pre, "{last}");
    assert_eq!(prompt[prompt.len() - 1], 13, "{last}");
    let suggestion = last["text"].as_str().unwrap();
    assert!(suggestion.starts_with("discount("), "the callee not named: {suggestion:?}");
    assert_eq!(suggestion.matches(',').count(), 1, "not the definition's two arguments: {suggestion:?}");
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
    let (text, line, character) = cart(&format!("{base}ice"));
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

/// Indexing runs in the background: 10,000 files do not hold up `initialize` or a completion.
#[test]
fn a_large_workspace_does_not_delay_initialize() {
    let root = workspace("cross-file-large");
    for d in 0..100 {
        let dir = root.join(format!("gen/m{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f:03}.py")), format!("def helper_{d}_{f}(x: int) -> int:\n    return x + {f}\n")).unwrap();
        }
    }
    let mut client = spawn();
    let started = Instant::now();
    let r = client
        .request("initialize", json!({"processId": null, "rootUri": uri(&root), "capabilities": {"window": {"workDoneProgress": true}}, "initializationOptions": {"model": {"path": model()}, "context": {"maxFiles": 20000}}}), TIMEOUT)
        .unwrap();
    let initialize_ms = started.elapsed().as_millis();
    assert!(r.get("error").is_none(), "{r}");
    client.notify("initialized", json!({}));
    wait_ready(&mut client);
    let message = indexed(&mut client);
    // "N files, M definitions, X MB, S s": the walk and parse took S seconds in the background;
    // initialize answered in a small part of that (it does not walk the folder).
    let seconds: f64 = message.split(", ").find_map(|p| p.strip_suffix(" s")).and_then(|s| s.split(' ').next()?.parse().ok()).unwrap_or_else(|| panic!("{message}"));
    assert!(message.starts_with("100") && message.contains(" files"), "not all 10,000 files: {message}");
    assert!((initialize_ms as f64) < seconds * 1e3 / 2.0, "initialize took {initialize_ms} ms, indexing {seconds} s");
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}
