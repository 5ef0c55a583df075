//! The workspace index on small multi-file projects (`fixtures/workspace/<language>/`, one
//! file with a `<CURSOR>` marker each): snapshots of what `Index::related` resolves for the
//! cursor, exclusions, stability while typing, updates, the bounds, a build that does not
//! block its caller, the walk's filters on every update, several roots, symlinked roots,
//! Latin-1 files and a parse bounded on a long run of comments. No model.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::TempDir;
use ghostline::syntax;
use ghostline::workspace::{Index, IndexOptions, Snippet};

fn fixtures(lang: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/workspace").join(lang)
}

fn options(root: &Path, extra_exclude: &[&str]) -> IndexOptions {
    let mut o = IndexOptions { roots: vec![root.to_path_buf()], ..IndexOptions::default() };
    o.exclude.extend(extra_exclude.iter().map(|s| s.to_string()));
    o
}

fn index(lang: &str, extra_exclude: &[&str]) -> Index {
    let index = Index::new(options(&fixtures(lang), extra_exclude));
    index.build(&|_, _| {});
    index
}

/// The file's text without the marker, and the marker's byte offset.
fn cursor_file(lang: &str, rel: &str) -> (PathBuf, String, usize) {
    let path = fixtures(lang).join(rel);
    let source = std::fs::read_to_string(&path).unwrap();
    let cursor = source.find("<CURSOR>").expect("cursor marker");
    (path, source.replacen("<CURSOR>", "", 1), cursor)
}

fn related(index: &Index, path: &Path, text: &str, cursor: usize) -> Vec<Snippet> {
    let spec = syntax::by_path(&path.to_string_lossy()).unwrap();
    let tree = spec.parse(text);
    index.related(path, text, &tree, spec, cursor, 4096)
}

fn render(snippets: &[Snippet]) -> String {
    snippets.iter().map(|s| format!("# path: {} (line {})\n{}\n", s.path, s.start_line, s.text)).collect()
}

fn snapshot(lang: &str, rel: &str) -> String {
    let index = index(lang, &["generated/**"]);
    let (path, text, cursor) = cursor_file(lang, rel);
    render(&related(&index, &path, &text, cursor))
}

macro_rules! case {
    ($test:ident, $lang:literal, $file:literal) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!(snapshot($lang, $file));
        }
    };
}

case!(python_imports_aliases_modules_and_bases, "python", "shop/cart.py");
case!(rust_use_crate_super_and_mod, "rust", "src/shapes/circle.rs");
case!(javascript_relative_index_namespace_and_require, "javascript", "src/app.js");
case!(typescript_imports_and_bases, "typescript", "src/services/userService.ts");
case!(go_package_and_module_imports, "go", "store/report.go");

/// `id_rsa*`, `secrets/**` (defaults) and a `context.exclude` glob are never read: their
/// definitions never appear, though the cursor's code imports and calls them (and they do
/// appear when the globs are lifted).
#[test]
fn excluded_files_never_appear() {
    let dir = TempDir::new("workspace-excluded");
    copy_dir(&fixtures("python"), &dir);
    std::fs::write(dir.join("shop/id_rsa_sign.py"), "def sign_payload(data: bytes) -> bytes:\n    return data\n").unwrap();
    let path = dir.join("shop/cart.py");
    let source = std::fs::read_to_string(&path).unwrap();
    let source = source.replace("from . import base\n", "from . import base\nfrom .id_rsa_sign import sign_payload\n").replace("validate(api_key())", "validate(api_key(), sign_payload(b''))");
    let cursor = source.find("<CURSOR>").unwrap();
    let text = source.replacen("<CURSOR>", "", 1);
    let shown = |index: &Index| render(&related(index, &path, &text, cursor));
    let guarded = Index::new(options(&dir, &["generated/**"]));
    guarded.build(&|_, _| {});
    let out = shown(&guarded);
    for secret in ["api_key", "validate", "secrets/", "generated/", "sign_payload", "id_rsa"] {
        assert!(!out.contains(secret), "{secret} in:\n{out}");
    }
    assert_eq!(guarded.stats().files, 7, "{:?}", guarded.stats());
    let open = Index::new(IndexOptions { exclude: Vec::new(), ..options(&dir, &[]) });
    open.build(&|_, _| {});
    let out = shown(&open);
    assert!(out.contains("def api_key() -> str") && out.contains("def validate(data: dict) -> bool"), "{out}");
    assert!(out.contains("# path: shop/id_rsa_sign.py (line 0)\ndef sign_payload(data: bytes) -> bytes"), "{out}");
    // An editor update of an excluded file is ignored too.
    guarded.update(&dir.join("secrets/more.py"), "def leaked(): ...\n");
    guarded.update(&dir.join("shop/id_rsa_more.py"), "def leaked(): ...\n");
    assert_eq!(guarded.stats().files, 7);
}

/// The editor's updates and the watcher's events (`update_from_disk`) go through the walk's
/// filters: a file under `.venv`'s site-packages (hidden, a dependency folder), one
/// `.gitignore` names, a generated one (by name and by its `DO NOT EDIT` line), one with a NUL
/// byte and one over the size cap stay out; `max_files` stops a new file, not a replaced one.
#[test]
fn updates_and_watcher_events_go_through_the_walks_filters() {
    let dir = TempDir::new("workspace-filters");
    let root = &dir;
    let put = |rel: &str, text: &[u8]| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    };
    put(".gitignore", b"build/\nscratch_*.py\n");
    put("app.py", b"def app_main():\n    return 1\n");
    let big = format!("def big_fn():\n    return 1\n{}", "x = 1\n".repeat(1000));
    let rejected = [
        put(".venv/lib/python3.12/site-packages/requests/api.py", b"def get(url):\n    return url\n"),
        put("vendor/site-packages/x/api.py", b"def vendored():\n    return 1\n"),
        put("build/lib/out.py", b"def built():\n    return 1\n"),
        put("pkg/scratch_notes.py", b"def scratch():\n    return 1\n"),
        put("pkg/api_pb2.py", b"def message():\n    return 1\n"),
        put("pkg/generated.py", b"# Generated by a tool. DO NOT EDIT.\ndef message2():\n    return 1\n"),
        put("pkg/binary.py", b"def nul():\n    return '\0'\n"),
        put("pkg/big.py", big.as_bytes()),
    ];
    let index = Index::new(IndexOptions { max_file_bytes: 4096, ..options(root, &[]) });
    assert_eq!(index.build(&|_, _| {}).files, 1, "the walk");
    for path in &rejected {
        let text = String::from_utf8(std::fs::read(path).unwrap()).unwrap();
        index.update(path, &text);
        index.update_from_disk(path);
        assert_eq!(index.stats().files, 1, "{} got in", path.display());
    }
    // The control: a plain file gets in both ways.
    let ok = put("pkg/helpers.py", b"def helper():\n    return 1\n");
    index.update_from_disk(&ok);
    assert_eq!(index.stats().files, 2);
    // A file that turns generated (or binary) leaves.
    index.update(&ok, "# @generated\ndef helper():\n    return 1\n");
    assert_eq!(index.stats().files, 1);

    let one = Index::new(IndexOptions { max_files: 1, ..options(root, &[]) });
    assert_eq!(one.build(&|_, _| {}).files, 1);
    one.update(&ok, "def helper():\n    return 1\n");
    assert_eq!((one.stats().files, one.stats().truncated), (1, true), "context.maxFiles: 1 let a second file in");
    one.update(&root.join("app.py"), "def app_main():\n    return 2\n\ndef app_more():\n    return 3\n");
    assert_eq!((one.stats().files, one.stats().definitions), (1, 2), "the indexed file is still updated");
}

/// Typing a word inside the scope, one character at a time (and after a module qualifier),
/// leaves the result byte-identical.
#[test]
fn related_is_identical_while_typing_a_word_in_the_scope() {
    for (lang, rel, typed) in [
        ("python", "shop/cart.py", "apply_discount(s)"),
        // Once complete, `TAX` (defined once, in pricing.py) would come in.
        ("python", "shop/cart.py", "TAX * s"),
        ("python", "shop/cart.py", "text.shout(label)"),
        ("rust", "src/shapes/circle.rs", "u::clamp01(r)"),
        ("javascript", "src/app.js", "money(sum)"),
        ("go", "store/report.go", "util.Slug(out)"),
    ] {
        let index = index(lang, &["generated/**"]);
        let (path, text, cursor) = cursor_file(lang, rel);
        let first = related(&index, &path, &text, cursor);
        assert!(!first.is_empty(), "{lang}");
        // Up to the end of the first word (a qualifier's dot is typed, the member is not done).
        let word_end = typed.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == ':')).unwrap();
        for n in 1..=word_end {
            let mut t = text.clone();
            t.insert_str(cursor, &typed[..n]);
            let now = related(&index, &path, &t, cursor + n);
            let qualified = typed[..n].contains(['.', ':']);
            if qualified {
                // `m.` brings the module's definitions; they stay while its member is typed.
                assert!(now.len() >= first.len(), "{lang} after {:?}", &typed[..n]);
            } else {
                assert_eq!(now, first, "{lang} after {:?}", &typed[..n]);
            }
        }
        let dot = typed.find(['.', ':']).map(|i| i + typed[i..].chars().take_while(|c| *c == '.' || *c == ':').count());
        if let Some(dot) = dot {
            let at = |n: usize| {
                let mut t = text.clone();
                t.insert_str(cursor, &typed[..n]);
                related(&index, &path, &t, cursor + n)
            };
            let after_dot = at(dot);
            for n in dot..word_end {
                assert_eq!(at(n + 1), after_dot, "{lang} after {:?}", &typed[..n + 1]);
            }
        }
    }
}

/// What the rest of the file uses comes after the scope's own names: with room for all of it,
/// every cursor in the file gets the same definitions (the head decoded when the file opens
/// serves every scope); with little room, the scope's names are the ones kept.
#[test]
fn the_whole_file_is_resolved_and_the_scope_comes_first() {
    let index = index("python", &["generated/**"]);
    let (path, text, cursor) = cursor_file("python", "shop/cart.py");
    let text = format!("{text}0.0\n\n\ndef shout_label():\n    return text.shout(\"cart\")\n");
    let other = text.rfind("return text").unwrap() + "return ".len();
    let within = |at: usize, max_bytes: usize| {
        let spec = syntax::by_path(&path.to_string_lossy()).unwrap();
        index.related(&path, &text, &spec.parse(&text), spec, at, max_bytes)
    };
    // The same definitions, each cursor ranking them its own way; the section shows them by
    // path and line, so it is the same text.
    let by_place = |mut s: Vec<Snippet>| {
        s.sort_by(|a, b| (&a.path, a.start_line).cmp(&(&b.path, b.start_line)));
        s
    };
    let everywhere = by_place(within(cursor, 4096));
    assert_eq!(by_place(within(other, 4096)), everywhere);
    assert_eq!(by_place(within(0, 4096)), everywhere, "at module level too");
    let all = render(&everywhere);
    assert!(all.contains("def shout(") && all.contains("def discount(") && all.contains("class Base"), "{all}");
    // Room for `discount` alone (its text, path and 16 bytes of header, as the index counts):
    // the scope calling it keeps it; the one calling `shout` keeps that instead.
    let discount = everywhere.iter().find(|s| s.text.contains("def discount(")).unwrap();
    let room = discount.text.len() + discount.path.len() + 16;
    let one = |at: usize| render(&within(at, room));
    assert!(one(cursor).contains("def discount(") && !one(cursor).contains("def shout("), "{}", one(cursor));
    assert!(one(other).contains("def shout(") && !one(other).contains("def discount("), "{}", one(other));
}

/// The rest of the file's names follow an edit outside the scope (they are walked once while
/// the user types inside it): a call added below the function shows in the function's result,
/// and goes when it is deleted.
#[test]
fn an_edit_outside_the_scope_changes_the_rest_of_the_file() {
    let index = index("python", &["generated/**"]);
    let (path, text, cursor) = cursor_file("python", "shop/cart.py");
    let spec = syntax::by_path(&path.to_string_lossy()).unwrap();
    let at = |text: &str, cursor: usize| render(&index.related(&path, text, &spec.parse(text), spec, cursor, 4096));
    let plain = at(&text, cursor);
    assert!(!plain.contains("def shout("), "{plain}");
    let added = format!("{text}0.0\n\n\ndef shout_label():\n    return text.shout(\"cart\")\n");
    assert!(at(&added, cursor).contains("def shout("), "{}", at(&added, cursor));
    // A key typed inside the scope keeps what the rest of the file named.
    let typed = format!("{}0{}", &added[..cursor], &added[cursor..]);
    assert_eq!(at(&typed, cursor + 1), at(&added, cursor));
    assert_eq!(at(&format!("{text}0.0\n"), cursor), plain, "deleted again");
}

/// An edit to another file (the editor's `update`) shows in the next result; a removal too.
#[test]
fn an_update_to_another_file_changes_the_result() {
    let index = index("python", &["generated/**"]);
    let (path, text, cursor) = cursor_file("python", "shop/cart.py");
    let before = render(&related(&index, &path, &text, cursor));
    assert!(before.contains("def discount(price: float, rate: float = 0.1) -> float:"), "{before}");
    let pricing = fixtures("python").join("shop/pricing.py");
    let generation = index.generation();
    index.update(&pricing, "def discount(price: float, *, percent: int) -> float:\n    \"\"\"Percent off.\"\"\"\n    return price\n");
    // Counted work: one file replaced (its old entry out, the new one in), nothing rebuilt.
    assert_eq!(index.generation(), generation + 2, "an update touched more than its own file");
    let after = render(&related(&index, &path, &text, cursor));
    assert!(after.contains("def discount(price: float, *, percent: int) -> float:\n    \"\"\"Percent off.\"\"\""), "{after}");
    assert!(!after.contains("rate: float"), "{after}");
    index.remove(&pricing);
    let removed = render(&related(&index, &path, &text, cursor));
    assert!(!removed.contains("def discount"), "{removed}");
}

/// An update (and a removal) arriving while a build runs — after its walk, before its parsed
/// entries land (from its progress callback) — is never overwritten with the disk's text.
#[test]
fn an_update_during_a_build_is_kept() {
    let dir = TempDir::new("workspace-race");
    copy_dir(&fixtures("python"), &dir);
    for i in 0..300 {
        std::fs::write(dir.join(format!("shop/m{i:03}.py")), format!("def f{i}(x):\n    return x\n")).unwrap();
    }
    let (path, cursor) = (dir.join("shop/cart.py"), 0);
    let text = std::fs::read_to_string(&path).unwrap().replacen("<CURSOR>", "", 1);
    // Both sort after the 300 `m` files: their entries from the disk arrive after the calls.
    let (pricing, util) = (dir.join("shop/pricing.py"), dir.join("shop/util/text.py"));
    let index = Index::new(options(&dir, &["generated/**"]));
    index.build(&|_, _| {});
    let calls = std::sync::atomic::AtomicUsize::new(0);
    index.build(&|done, total| {
        // The first call comes after the walk, before any entry; the next ones mid-build.
        match calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => index.update(&pricing, "def discount(x): ...\n"),
            1 => {
                assert!(done < total, "{done}/{total}: not mid-build");
                index.remove(&util);
            }
            _ => {}
        }
    });
    assert!(calls.into_inner() > 2);
    let out = render(&related(&index, &path, &text, cursor));
    assert!(out.contains("def discount(x): ...") && !out.contains("rate: float"), "the build put the disk's text back: {out}");
    assert!(out.contains("class Base") && !out.contains("def slugify"), "the build put a removed file back: {out}");
}

/// Two roots holding the same relative path: each file's `# path:` header names its root.
#[test]
fn two_roots_with_the_same_relative_path_are_told_apart() {
    let dir = TempDir::new("workspace-roots");
    let (alpha, beta) = (dir.join("alpha"), dir.join("beta"));
    for (root, name) in [(&alpha, "alpha_helper"), (&beta, "beta_helper")] {
        std::fs::create_dir_all(root.join("pkg")).unwrap();
        std::fs::write(root.join("pkg/util.py"), format!("def {name}(x: int) -> int:\n    return x\n")).unwrap();
    }
    let main = alpha.join("main.py");
    let text = "def run():\n    return alpha_helper(1) + beta_helper(2)\n";
    std::fs::write(&main, text).unwrap();
    let index = Index::new(IndexOptions { roots: vec![alpha.clone(), beta.clone()], ..IndexOptions::default() });
    assert_eq!(index.build(&|_, _| {}).files, 3);
    let out = render(&related(&index, &main, text, text.len() - 2));
    assert!(out.contains("# path: alpha/pkg/util.py (line 0)\ndef alpha_helper(") && out.contains("# path: beta/pkg/util.py (line 0)\ndef beta_helper("), "{out}");
    assert_eq!(index.relative(&main).as_deref(), Some("alpha/main.py"));
}

/// A root opened through a symlinked folder, and documents addressed by their real path (or a
/// real root and documents through the link): the same files, the section found, the file's
/// own definitions not taken for another file's.
#[test]
fn a_symlinked_root_and_real_document_paths_meet() {
    let dir = TempDir::new("workspace-symlink");
    let real = dir.join("real");
    copy_dir(&fixtures("python"), &real);
    let link = dir.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    for (root, doc_root) in [(&link, &real), (&real, &link)] {
        let ws = ghostline::context::cross_file::Workspace::new(options(root, &["generated/**"]));
        ws.index.build(&|_, _| {});
        let path = doc_root.join("shop/cart.py");
        let source = std::fs::read_to_string(&path).unwrap();
        let cursor = source.find("<CURSOR>").unwrap();
        let text = source.replacen("<CURSOR>", "", 1);
        let spec = syntax::by_path("cart.py").unwrap();
        let tree = spec.parse(&text);
        let cross = ws.cross_file(&path, &text, cursor, Some((spec, &tree)), 4096);
        let cross = cross.unwrap_or_else(|| panic!("no section for {} under the root {}", path.display(), root.display()));
        assert_eq!(cross.path, "shop/cart.py");
        let texts: Vec<&str> = cross.snippets.iter().map(|s| s.text.as_str()).collect();
        assert!(texts.iter().any(|t| t.contains("def discount(")), "{texts:?}");
        assert!(cross.snippets.iter().all(|s| s.path != "shop/cart.py"), "the file itself: {texts:?}");
    }
}

/// Latin-1 and CP1252 Python files (PEP 263 coding line) are decoded and indexed; a file in an
/// encoding not decoded is skipped.
#[test]
fn latin_1_files_are_indexed() {
    let dir = TempDir::new("workspace-latin1");
    std::fs::write(dir.join("tarifs.py"), b"# -*- coding: latin-1 -*-\ndef prix_r\xe9duit(prix: float) -> float:\n    \"\"\"Le prix r\xe9duit.\"\"\"\n    return prix\n").unwrap();
    std::fs::write(dir.join("quotes.py"), b"# coding: cp1252\ndef quoted(s: str) -> str:\n    \"\"\"Wraps s in \x93quotes\x94.\"\"\"\n    return s\n").unwrap();
    std::fs::write(dir.join("cyrillic.py"), b"# coding: koi8-r\ndef koi(s):\n    \"\"\"\xc1\xc2\"\"\"\n    return s\n").unwrap();
    let main = dir.join("main.py");
    let text = "def run():\n    return prix_r\u{e9}duit(quoted('a'))\n";
    std::fs::write(&main, text).unwrap();
    let index = Index::new(options(&dir, &[]));
    assert_eq!(index.build(&|_, _| {}).files, 3, "main, tarifs and quotes");
    let out = render(&related(&index, &main, text, text.len() - 2));
    assert!(out.contains("def prix_r\u{e9}duit(prix: float) -> float:\n    \"\"\"Le prix r\u{e9}duit.\"\"\""), "{out}");
    assert!(out.contains("Wraps s in \u{201c}quotes\u{201d}."), "{out}");
}

/// 12,000 comment lines after an indented `def`: tree-sitter-python's scanner made that
/// quadratic (1,750 lines took 0.9 s, 3,500 2.8 s, so this ~40 s); the index parses it in
/// linear time now. The bound is generous for 2 loaded cores (the parse takes ~0.1 s) and
/// still far below the quadratic cost; the definitions after the comments are all there.
#[test]
fn a_long_run_of_comments_after_an_indented_def_parses_quickly() {
    let dir = TempDir::new("workspace-comments");
    let mut text = String::from("class Notes:\n    def first(self):\n        return 1\n");
    for i in 0..12_000 {
        text.push_str(&format!("# note {i}: nothing here\n"));
    }
    text.push_str("    def second(self) -> int:\n        \"\"\"The # second.\"\"\"\n        return 2\n\n\ndef after_notes(n: int) -> int:\n    return n\n");
    let path = dir.join("notes.py");
    std::fs::write(&path, &text).unwrap();
    let index = Index::new(options(&dir, &[]));
    let started = Instant::now();
    index.update(&path, &text);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(8), "the update took {took:?}");
    let main = dir.join("main.py");
    let call = "def run():\n    return after_notes(Notes().second())\n";
    let out = render(&related(&index, &main, call, call.len() - 2));
    assert!(out.contains("def after_notes(n: int) -> int:") && out.contains("def second(self) -> int"), "{out}");
}

#[test]
fn max_files_and_the_memory_cap_bound_the_index() {
    let root = fixtures("python");
    let few = Index::new(IndexOptions { max_files: 2, ..options(&root, &[]) });
    let stats = few.build(&|_, _| {});
    assert_eq!((stats.files, stats.truncated), (2, true), "{stats:?}");
    let all = Index::new(options(&root, &[]));
    let full = all.build(&|_, _| {});
    assert!(!full.truncated && full.files == 8 && full.bytes > 0, "{full:?}");
    let cap = full.bytes / 2;
    let small = Index::new(IndexOptions { memory_cap_bytes: cap, ..options(&root, &[]) });
    let stats = small.build(&|_, _| {});
    assert!(stats.truncated && stats.bytes <= cap && stats.files < full.files && stats.files > 0, "{stats:?} (cap {cap})");
    assert_eq!(small.stats(), stats);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// 10,000 small files: the build runs on its own thread, and `related` answers meanwhile.
#[test]
fn a_large_workspace_builds_without_blocking_the_caller() {
    let dir = TempDir::new("workspace");
    for i in 0..10_000 {
        let sub = dir.join(format!("pkg{}", i / 500));
        if i % 500 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        std::fs::write(sub.join(format!("m{i}.py")), format!("def f{i}(x: int) -> int:\n    \"\"\"Number {i}.\"\"\"\n    return x + {i}\n\n\nclass C{i}:\n    def g(self):\n        return f{i}(1)\n")).unwrap();
    }
    let me = dir.join("pkg0/main.py");
    let text = "from pkg3.m1500 import f1500\n\ndef main():\n    return f1500(2) + f42(1)\n".to_owned();
    std::fs::write(&me, &text).unwrap();
    let index = Index::new(IndexOptions { max_files: 20_000, ..options(&dir, &[]) });
    let builder = {
        let index = index.clone();
        let progress = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = progress.clone();
        let handle = std::thread::spawn(move || index.build(&|done, total| seen.lock().unwrap().push((done, total))));
        (handle, progress)
    };
    let mut during = 0;
    let mut slowest = Duration::ZERO;
    let build_started = Instant::now();
    let cursor = text.len() - 1;
    while !builder.0.is_finished() {
        let started = Instant::now();
        let _ = related(&index, &me, &text, cursor);
        slowest = slowest.max(started.elapsed());
        during += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let build_took = build_started.elapsed();
    let stats = builder.0.join().unwrap();
    assert_eq!((stats.files, stats.truncated), (10_001, false), "{stats:?}");
    // Counted, not timed: calls kept being answered while the build ran (one that waited for
    // the whole build would make a single call), and none took a sizeable share of it.
    assert!(during >= 3, "{during} calls answered during a {build_took:?} build");
    assert!(slowest < build_took / 3, "related took {slowest:?} during a {build_took:?} build");
    let progress = builder.1.lock().unwrap().clone();
    assert!(progress.len() > 2 && progress.last() == Some(&(10_001, 10_001)), "{:?}", &progress[progress.len().saturating_sub(3)..]);
    let out = render(&related(&index, &me, &text, cursor));
    assert!(out.contains("# path: pkg3/m1500.py (line 0)\ndef f1500(x: int) -> int:"), "{out}");
    assert!(out.contains("def f42(x: int) -> int:"), "a name defined once: {out}");
    eprintln!("10,001 files: {during} calls during the build, slowest {slowest:?}");
}

/// A file over 128 KiB dense with multi-byte text: the module-level window (cursor ± 32 KiB)
/// and the rest-of-file window (128 KiB) cut on character boundaries, wherever the cursor is —
/// at module level, in a scope, at the end. The cut used to panic inside a character.
#[test]
fn a_large_multi_byte_file_resolves_at_every_cursor() {
    let index = index("python", &["generated/**"]);
    let path = fixtures("python").join("shop/rapport.py");
    let mut text = String::from("from .pricing import discount\n\n");
    for i in 0..1500 {
        text.push_str(&format!("# Résumé {i}: données élevées, coût réduit — é à ç ü ß 漢字 😀\n"));
    }
    text.push_str("def prix_réduit(prix):\n    total = discount(prix)\n    return total\n\n");
    for i in 0..1500 {
        text.push_str(&format!("# Annexe {i}: révisée, ‘citée’ — ê ô œ\n"));
    }
    text.push_str("valeur = discount(");
    assert!(text.len() > 160 * 1024, "{} bytes", text.len());
    let spec = syntax::by_path(&path.to_string_lossy()).unwrap();
    let tree = spec.parse(&text);
    let mut cursors: Vec<usize> = (0..text.len()).step_by(997).map(|i| text.floor_char_boundary(i)).collect();
    let in_scope = text.find("total = discount").unwrap() + "total = ".len();
    cursors.extend([in_scope, text.len()]);
    for &cursor in &cursors {
        let snippets = index.related(&path, &text, &tree, spec, cursor, 4096);
        if cursor == in_scope || cursor == text.len() {
            assert!(render(&snippets).contains("def discount("), "at {cursor}: {}", render(&snippets));
        }
    }
}

/// With a short budget, the definitions kept are, after the scope's own: the names the file
/// imports and uses nowhere yet (a name is most often imported to be used where the user is
/// writing), then the rest of the file's, nearest the scope first. The first name of a
/// `from m import a, b` is imported, not one of the file's own definitions.
#[test]
fn an_import_not_yet_used_comes_first_then_the_names_nearest_the_scope() {
    let root = TempDir::new("ws-rank");
    std::fs::create_dir_all(root.join("pkg")).unwrap();
    std::fs::write(root.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(
        root.join("pkg/helpers.py"),
        "def fresh(x, y):\n    return x + y\n\n\ndef used_far(z):\n    return z\n\n\ndef used_near(w):\n    return w\n",
    )
    .unwrap();
    let filler: String = (0..40).map(|i| format!("VALUE_{i} = {i}\n")).collect();
    let text = format!(
        "from .helpers import fresh, used_far, used_near\n\n\ndef far():\n    return used_far(1)\n\n\n{filler}\n\ndef near():\n    return used_near(2)\n\n\ndef writing(a, b):\n    total = a\n    \n"
    );
    let path = root.join("pkg/main.py");
    std::fs::write(&path, &text).unwrap();
    let index = Index::new(options(&root, &[]));
    index.build(&|_, _| {});
    let cursor = text.len() - 1;
    let spec = syntax::by_path(&path.to_string_lossy()).unwrap();
    let names = |max_bytes: usize| -> Vec<String> {
        let kept = index.related(&path, &text, &spec.parse(&text), spec, cursor, max_bytes);
        kept.iter().map(|s| s.text.lines().next().unwrap_or_default().to_owned()).collect()
    };
    let all = names(4096);
    assert_eq!(all.len(), 3, "{all:?}");
    let cost = |name: &str| {
        let s = index.related(&path, &text, &spec.parse(&text), spec, cursor, 4096).into_iter().find(|s| s.text.contains(name)).unwrap();
        s.text.len() + s.path.len() + 16
    };
    let one = cost("def fresh(");
    let kept = names(one);
    assert!(kept.len() == 1 && kept[0].starts_with("def fresh(x, y)"), "the import nothing uses yet comes first: {kept:?}");
    let two = one + cost("def used_near(");
    let kept = names(two);
    assert!(kept.iter().any(|l| l.starts_with("def used_near(")) && !kept.iter().any(|l| l.starts_with("def used_far(")), "nearest the scope next: {kept:?}");
}
