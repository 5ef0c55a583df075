//! Snapshot tests of the built prompt parts and the post-processed suggestion, one
//! cursor-marked fixture per case under `fixtures/context/`, per language. No model: the token
//! budget counts with a stand-in tokenizer (one token per 4 bytes), and a `.raw` file beside a
//! fixture stands for the model's output (`.fim.raw`: the FIM test model's, whose prompt has the
//! text after the cursor).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use ghostline::config::Options;
use ghostline::context;
use ghostline::engine::{Engine, Input};
use ghostline::model::{ModelHandle, Sampling};
use ghostline::postprocess::syntax::keep_if_parse_not_worse;
use ghostline::prompt::budget::{fit, PromptParts};
use ghostline::syntax;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/context")
}

fn count(s: &str) -> usize {
    s.len().div_ceil(4)
}

fn render(name: &str, budget: usize) -> String {
    let path = fixtures().join(name);
    let source = std::fs::read_to_string(&path).unwrap();
    let cursor = source.find("<CURSOR>").expect("cursor marker");
    let text = source.replacen("<CURSOR>", "", 1);
    let spec = syntax::by_path(name).expect("a registered language");
    let tree = spec.parse(&text);
    let config = Options::default().resolve(None);
    // No model is needed to make a draft.
    let engine = Engine::new(ModelHandle::spawn(&config.model, Sampling::from(&config.completion)), config.completion);
    let input = Input { cross_file: None, text: &text, cursor, syntax: Some((spec, &tree)) };
    let request = engine.draft(input);
    let parts = fit(&request.context, budget, &count);

    let mut out = String::new();
    writeln!(out, "strategy: {:?}", request.context.strategy).unwrap();
    writeln!(out, "stop: {:?}", request.stop.mode).unwrap();
    if !request.stop.lead().is_empty() {
        // Left out of the prompt, written by the model (`Engine::draft`).
        writeln!(out, "lead: {:?}", request.stop.lead()).unwrap();
    }
    writeln!(out, "tokens (stand-in): outline {}, prefix {}, suffix {}", count(&parts.outline), count(&parts.prefix), count(&parts.suffix)).unwrap();
    writeln!(out, "----- outline\n{}----- prefix\n{}\n----- suffix\n{}\n-----", parts.outline, parts.prefix, parts.suffix).unwrap();
    let raw_path = path.with_extension("raw");
    if let Ok(raw) = std::fs::read_to_string(&raw_path) {
        let finished = request.stop.finish(&raw);
        let guarded = keep_if_parse_not_worse(spec, &tree, &text, cursor, &finished);
        writeln!(out, "----- raw model output\n{raw}----- suggestion\n{guarded}\n-----").unwrap();
    }
    out
}

macro_rules! case {
    ($test:ident, $file:literal) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!(render($file, 1024));
        }
    };
}

case!(python_method, "python_method.py");
case!(python_mid_expression, "python_mid_expression.py");
case!(python_mid_word, "python_mid_word.py");
case!(python_module_level, "python_module_level.py");
case!(python_block_opener, "python_block_opener.py");
case!(rust_impl_method, "rust_impl_method.rs");
case!(javascript_class_method, "javascript_class_method.js");
case!(typescript_function, "typescript_function.ts");
case!(go_method, "go_method.go");

/// The FIM test model's stored output at a fixture's cursor (`NAME.fim.raw`, checked against
/// the model by tests/raw_outputs.rs) through the same stop rule and syntax guard. The model saw
/// the suffix, and the suggestion must not type it again: no line of it is a line the suffix
/// already has, and it does not end with what follows the cursor on its line.
fn render_fim(name: &str) -> String {
    let path = fixtures().join(name);
    let source = std::fs::read_to_string(&path).unwrap();
    let cursor = source.find("<CURSOR>").expect("cursor marker");
    let text = source.replacen("<CURSOR>", "", 1);
    let spec = syntax::by_path(name).expect("a registered language");
    let tree = spec.parse(&text);
    let config = Options::default().resolve(None);
    let engine = Engine::new(ModelHandle::spawn(&config.model, Sampling::from(&config.completion)), config.completion);
    let request = engine.draft(Input { cross_file: None, text: &text, cursor, syntax: Some((spec, &tree)) });
    let parts = fit(&request.context, 1024, &count);
    let raw = std::fs::read_to_string(path.with_extension("fim.raw")).unwrap();
    let suggestion = keep_if_parse_not_worse(spec, &tree, &text, cursor, &request.stop.finish(&raw));
    let suffix = &parts.suffix;
    assert!(!suffix.trim().is_empty(), "{name}: no suffix for the FIM prompt");
    let line_after = suffix.split('\n').next().unwrap().trim();
    assert!(line_after.is_empty() || !suggestion.trim_end().ends_with(line_after), "{name}: {suggestion:?} repeats {line_after:?}");
    for line in suffix.lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(!suggestion.lines().any(|s| s.trim() == line), "{name}: {suggestion:?} repeats the suffix's {line:?}");
    }
    format!("stop: {:?}\n----- suffix\n{suffix}\n----- FIM test model raw output\n{raw}----- suggestion\n{suggestion}\n-----\n", request.stop.mode)
}

macro_rules! fim_case {
    ($test:ident, $file:literal) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!(render_fim($file));
        }
    };
}

fim_case!(fim_python_mid_expression, "python_mid_expression.py");
fim_case!(fim_python_mid_word, "python_mid_word.py");
fim_case!(fim_python_block_opener, "python_block_opener.py");
fim_case!(fim_rust_impl_method, "rust_impl_method.rs");

/// A tight budget drops the outline items farthest from the scope first.
#[test]
fn python_method_tight_budget() {
    insta::assert_snapshot!(render("python_method.py", 60));
}

/// The Python context when `typed` stands at `source`'s cursor marker, and the prompt parts
/// fitted to 1,024 (stand-in) tokens.
fn python_context(source: &str, typed: &str) -> (context::ContextParts, PromptParts) {
    let cursor = source.find("<CURSOR>").unwrap() + typed.len();
    let text = source.replacen("<CURSOR>", typed, 1);
    let spec = syntax::by_language_id("python").unwrap();
    let tree = spec.parse(&text);
    let parts = context::build(&text, cursor, Some((spec, &tree)), 64, 16);
    let fitted = fit(&parts, 1024, &count);
    (parts, fitted)
}

/// The outline is byte-identical while the user types inside one scope.
#[test]
fn outline_is_stable_while_typing_in_a_scope() {
    let source = std::fs::read_to_string(fixtures().join("python_method.py")).unwrap();
    let mut outlines = Vec::new();
    let typed = "return TAU * self.radius";
    for n in 0..=typed.len() {
        let (parts, fitted) = python_context(&source, &typed[..n]);
        assert_eq!(parts.strategy, context::Strategy::Scope);
        outlines.push(fitted.outline);
    }
    for (n, w) in outlines.windows(2).enumerate() {
        assert_eq!(w[0], w[1], "outline changed after typing {:?}", &typed[..n + 1]);
    }
    assert!(outlines[0].contains("class Circle:\n    radius: float\n    def area(self):"), "{}", outlines[0]);
}

/// Half-typed lines break the parse around the cursor; the scope (and so the prompt's layout
/// and its KV cache entries) must not flip to another strategy while typing in one function.
#[test]
fn layout_is_stable_while_a_line_is_half_typed() {
    let source = "import math\n\n\nclass Cart:\n    @staticmethod\n    def total(items, tax):\n        subtotal = 0\n        <CURSOR>\n        return subtotal\n\n\ndef main():\n    print(Cart.total([], 0))\n";
    let typed = "subtotal += sum(item.price * item.quantity for item in items) * (1 + tax)";
    let mut layouts = Vec::new();
    for n in 0..=typed.len() {
        let (parts, fitted) = python_context(source, &typed[..n]);
        layouts.push((parts.strategy, parts.prefix_start, fitted.outline));
    }
    for (n, w) in layouts.windows(2).enumerate() {
        assert_eq!(w[0], w[1], "layout changed after typing {:?}", &typed[..n + 1]);
    }
    assert_eq!(layouts[0].0, context::Strategy::Scope);
}

/// A new method typed from its `def` keyword on: the scope is that method from the first
/// keystroke of its header, and the outline (which must still show the function after the
/// class, not lose it to the half-typed header's parse error) never changes.
#[test]
fn layout_is_stable_while_a_def_header_is_typed() {
    let source = "from dataclasses import dataclass\n\n\n@dataclass\nclass Store:\n    items: dict\n\n    def total(self):\n        return sum(self.items.values())\n\n<CURSOR>\n\n\ndef report(store):\n    print(store.total())\n";
    let cursor = source.find("<CURSOR>").unwrap();
    let typed = "    def restock(self, sku, quantity):\n        self.items[sku] += quantity";
    let from = "    def".len();
    // Typed key by key, the line break with its auto-indentation as one edit (as editors do).
    let body = typed.find('\n').unwrap();
    let ends = (from..=typed.len()).filter(|&n| !(body < n && n < body + "\n        ".len()));
    let mut layouts = Vec::new();
    for n in ends {
        let (parts, fitted) = python_context(source, &typed[..n]);
        assert_eq!(fitted.prefix, typed[..n], "the prompt ends with the method");
        layouts.push((parts.strategy, parts.prefix_start, fitted.outline));
    }
    for (n, w) in layouts.windows(2).enumerate() {
        assert_eq!(w[0], w[1], "layout changed after key {}", n + 1);
    }
    assert_eq!((layouts[0].0, layouts[0].1), (context::Strategy::Scope, cursor));
    assert!(layouts[0].2.contains("def report(store):"), "{}", layouts[0].2);
    assert!(layouts[0].2.contains("    def total(self):"), "{}", layouts[0].2);
}
