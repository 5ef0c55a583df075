//! The workspace index on small multi-file projects (`fixtures/workspace/<language>/`, one
//! file with a `<CURSOR>` marker each): snapshots of what `Index::related` resolves for the
//! cursor, exclusions, stability while typing, updates, the bounds, and a build that does not
//! block its caller. No model.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// `.env`, `secrets/**` (defaults) and a `context.exclude` glob are never read: their
/// definitions never appear, though the cursor's code calls them (and they do appear when the
/// globs are lifted).
#[test]
fn excluded_files_never_appear() {
    let (path, text, cursor) = cursor_file("python", "shop/cart.py");
    let shown = |index: &Index| render(&related(index, &path, &text, cursor));
    let guarded = index("python", &["generated/**"]);
    let out = shown(&guarded);
    for secret in ["api_key", "validate", "secrets/", "generated/", "hunter2", "sk-not"] {
        assert!(!out.contains(secret), "{secret} in:\n{out}");
    }
    assert_eq!(guarded.stats().files, 7, "{:?}", guarded.stats());
    let open = Index::new(IndexOptions { exclude: Vec::new(), ..options(&fixtures("python"), &[]) });
    open.build(&|_, _| {});
    let out = shown(&open);
    assert!(out.contains("def api_key() -> str") && out.contains("def validate(data: dict) -> bool"), "{out}");
    // An editor update of an excluded file is ignored too.
    guarded.update(&fixtures("python").join("secrets/more.py"), "def leaked(): ...\n");
    guarded.update(&fixtures("python").join(".env.py"), "def leaked(): ...\n");
    assert_eq!(guarded.stats().files, 7);
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
    let everywhere = within(cursor, 4096);
    assert_eq!(within(other, 4096), everywhere);
    assert_eq!(within(0, 4096), everywhere, "at module level too");
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
    let started = Instant::now();
    index.update(&pricing, "def discount(price: float, *, percent: int) -> float:\n    \"\"\"Percent off.\"\"\"\n    return price\n");
    let took = started.elapsed();
    let after = render(&related(&index, &path, &text, cursor));
    assert!(after.contains("def discount(price: float, *, percent: int) -> float:\n    \"\"\"Percent off.\"\"\""), "{after}");
    assert!(!after.contains("rate: float"), "{after}");
    assert!(took < Duration::from_millis(200), "one small file's update took {took:?}");
    index.remove(&pricing);
    let removed = render(&related(&index, &path, &text, cursor));
    assert!(!removed.contains("def discount"), "{removed}");
    // The build result never replaces what the editor sent since.
    index.update(&pricing, "def discount(x): ...\n");
    index.build(&|_, _| {});
    assert!(render(&related(&index, &path, &text, cursor)).contains("def discount(x): ..."));
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

/// A scratch folder under the system's temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 10,000 small files: the build runs on its own thread, and `related` answers meanwhile.
#[test]
fn a_large_workspace_builds_without_blocking_the_caller() {
    let dir = Scratch(std::env::temp_dir().join(format!("ghostline-workspace-{}", std::process::id())));
    for i in 0..10_000 {
        let sub = dir.0.join(format!("pkg{}", i / 500));
        if i % 500 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        std::fs::write(sub.join(format!("m{i}.py")), format!("def f{i}(x: int) -> int:\n    \"\"\"Number {i}.\"\"\"\n    return x + {i}\n\n\nclass C{i}:\n    def g(self):\n        return f{i}(1)\n")).unwrap();
    }
    let me = dir.0.join("pkg0/main.py");
    let text = "from pkg3.m1500 import f1500\n\ndef main():\n    return f1500(2) + f42(1)\n".to_owned();
    std::fs::write(&me, &text).unwrap();
    let index = Index::new(IndexOptions { max_files: 20_000, ..options(&dir.0, &[]) });
    let builder = {
        let index = index.clone();
        let progress = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = progress.clone();
        let handle = std::thread::spawn(move || index.build(&|done, total| seen.lock().unwrap().push((done, total))));
        (handle, progress)
    };
    let mut during = 0;
    let mut slowest = Duration::ZERO;
    let cursor = text.len() - 1;
    while !builder.0.is_finished() {
        let started = Instant::now();
        let _ = related(&index, &me, &text, cursor);
        slowest = slowest.max(started.elapsed());
        during += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = builder.0.join().unwrap();
    assert_eq!((stats.files, stats.truncated), (10_001, false), "{stats:?}");
    assert!(during > 0, "the build finished before a single call");
    assert!(slowest < Duration::from_millis(500), "related took {slowest:?} during the build");
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
