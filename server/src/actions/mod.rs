//! Code actions without LSP: find the function under the cursor (tree-sitter), build the
//! instruction prompt for a task, decide where the answer ends, and turn a complete answer into
//! file changes that parse — or an error, so that nothing half-made is ever applied.
//!
//! Tasks: generate tests ([`layout`] decides where they go), add a docstring / doc comment,
//! simplify a function, fix a diagnostic. The model writes the content; ghostline places it
//! (indentation, comment syntax, imports, test module wrappers), so a small model's answer
//! still lands as valid code or not at all.

pub mod apply;
pub mod layout;
pub mod service;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use tree_sitter::{Node, QueryCursor, StreamingIterator, Tree};

use crate::model::ChatStop;
use crate::route::Task;
use crate::syntax::Spec;

/// What the user picked.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Tests,
    Docstring,
    Refactor,
    /// A diagnostic from any language server: its message, source and byte range.
    Fix { message: String, source: Option<String>, range: Range<usize> },
}

/// A kind's name in an action's data: the one table between [`Kind`] and its strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KindName {
    Tests,
    Docstring,
    Refactor,
    Fix,
}

impl Kind {
    pub fn name(&self) -> KindName {
        match self {
            Kind::Tests => KindName::Tests,
            Kind::Docstring => KindName::Docstring,
            Kind::Refactor => KindName::Refactor,
            Kind::Fix { .. } => KindName::Fix,
        }
    }

    pub fn task(&self) -> Task {
        match self {
            Kind::Tests => Task::Tests,
            Kind::Docstring => Task::Docstring,
            Kind::Refactor => Task::Refactor,
            Kind::Fix { .. } => Task::Fix,
        }
    }
}

/// A function or method, as found in the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    /// From the start of its first line (decorators and attributes included) to its end.
    pub range: Range<usize>,
    /// The definition node itself (without decorators).
    pub node: Range<usize>,
    /// The indentation of its first line.
    pub indent: String,
}

/// The source file an action works on.
pub struct Source<'a> {
    pub spec: &'static Spec,
    pub text: &'a str,
    pub tree: &'a Tree,
    /// The file on disk, when the document is a `file:` URI.
    pub path: Option<PathBuf>,
    /// The workspace root, when known.
    pub root: Option<PathBuf>,
}

/// The innermost named function or method around `offset`.
pub fn function_at(spec: &Spec, tree: &Tree, text: &str, offset: usize) -> Option<Target> {
    named_function_at(spec, tree, text, offset, false)
}

/// The function tests are written for at `offset`: the outermost named function around it. A
/// function nested in another cannot be imported or called from a test file, so its tests are
/// the enclosing function's (a method's: its class is what the test imports).
pub fn tests_target(spec: &Spec, tree: &Tree, text: &str, offset: usize) -> Option<Target> {
    named_function_at(spec, tree, text, offset, true)
}

/// The target for an action of `kind` at `offset`: [`tests_target`] for tests, else
/// [`function_at`].
pub fn target_for(kind: &Kind, spec: &Spec, tree: &Tree, text: &str, offset: usize) -> Option<Target> {
    named_function_at(spec, tree, text, offset, *kind == Kind::Tests)
}

fn named_function_at(spec: &Spec, tree: &Tree, text: &str, offset: usize, outermost: bool) -> Option<Target> {
    let scope = spec.scopes.capture_index_for_name("scope")?;
    let mut best: Option<(Node<'_>, String)> = None;
    let mut qc = QueryCursor::new();
    qc.set_byte_range(offset.saturating_sub(1)..offset + 1);
    let mut matches = qc.matches(&spec.scopes, tree.root_node(), text.as_bytes());
    while let Some(m) = matches.next() {
        for c in m.captures.iter().filter(|c| c.index == scope) {
            let n = c.node;
            if !(n.start_byte() <= offset && offset <= n.end_byte()) {
                continue;
            }
            let Some(name) = name_of(n, text) else { continue };
            let better = |b: &Node<'_>| if outermost { n.byte_range().len() > b.byte_range().len() } else { n.byte_range().len() < b.byte_range().len() };
            if best.as_ref().is_none_or(|(b, _)| better(b)) {
                best = Some((n, name));
            }
        }
    }
    let (node, name) = best?;
    // Decorators (Python) belong to the function; doc comments and attributes stay where they are.
    let outer = match node.parent() {
        Some(p) if p.kind() == "decorated_definition" => p,
        _ => node,
    };
    let line_start = text[..outer.start_byte()].rfind('\n').map_or(0, |i| i + 1);
    let indent: String = text[line_start..outer.start_byte()].chars().take_while(|c| c.is_whitespace()).collect();
    Some(Target { name, range: line_start..outer.end_byte(), node: node.byte_range(), indent })
}

/// A function's name: its `name` field, or the variable an arrow function / function
/// expression is assigned to.
fn name_of(node: Node<'_>, text: &str) -> Option<String> {
    if let Some(n) = node.child_by_field_name("name") {
        return Some(text[n.byte_range()].to_owned());
    }
    let parent = node.parent()?;
    if matches!(parent.kind(), "variable_declarator" | "assignment_expression" | "pair" | "public_field_definition") {
        let n = parent.child_by_field_name("name").or_else(|| parent.child_by_field_name("left")).or_else(|| parent.child_by_field_name("key"))?;
        return Some(text[n.byte_range()].to_owned());
    }
    None
}

/// The fenced-code language tag for a spec.
pub fn fence(spec: &Spec) -> &'static str {
    match spec.name {
        "tsx" => "tsx",
        name => name,
    }
}

fn display_language(spec: &Spec) -> &'static str {
    match spec.name {
        "python" => "Python",
        "rust" => "Rust",
        "go" => "Go",
        "javascript" => "JavaScript",
        "typescript" | "tsx" => "TypeScript",
        other => other,
    }
}

/// The chat messages for a task: a system line and one user message holding the code.
pub fn messages(kind: &Kind, source: &Source<'_>, target: Option<&Target>, framework: &str) -> Vec<(String, String)> {
    let lang = display_language(source.spec);
    let tag = fence(source.spec);
    let code = |r: &Range<usize>| dedent(&source.text[r.clone()]);
    let system = format!("You are an expert {lang} developer. Answer briefly.");
    let user = match (kind, target) {
        (Kind::Tests, Some(t)) => {
            let start = match source.spec.name {
                "python" => format!("def test_{}():", t.name),
                "rust" => format!("#[test]\nfn test_{}() {{", snake(&t.name)),
                "go" => format!("func Test{}(t *testing.T) {{", upper_first(&t.name)),
                _ => format!("test('{}', () => {{", t.name),
            };
            format!(
                "Write {framework} unit tests for this {lang} function.\n```{tag}\n{}\n```\nAnswer with one ```{tag} code block. Start with `{start}` and check results with assertions.",
                code(&t.range)
            )
        }
        (Kind::Docstring, Some(t)) => {
            format!("Summarize in one sentence what this {lang} function does.\n```{tag}\n{}\n```", code(&t.range))
        }
        (Kind::Refactor, Some(t)) => format!(
            "Simplify this {lang} function without changing its behaviour.\n```{tag}\n{}\n```\nAnswer with the whole function in one ```{tag} code block.",
            code(&t.range)
        ),
        (Kind::Fix { message, source: from, range }, t) => {
            let region = fix_region(source.text, range, t);
            let from = from.as_deref().map(|s| format!(" (reported by {s})")).unwrap_or_default();
            format!(
                "Fix this problem{from}: {message}\n```{tag}\n{}\n```\nAnswer with the whole corrected code in one ```{tag} code block.",
                code(&region)
            )
        }
        (_, None) => String::new(),
    };
    vec![("system".into(), system), ("user".into(), user)]
}

/// The code a fix rewrites: the function around the diagnostic, else its lines and three more
/// on each side.
pub fn fix_region(text: &str, diagnostic: &Range<usize>, target: Option<&Target>) -> Range<usize> {
    if let Some(t) = target {
        if t.range.start <= diagnostic.start && diagnostic.end <= t.range.end {
            return t.range.clone();
        }
    }
    let mut start = text[..diagnostic.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    for _ in 0..3 {
        if start == 0 {
            break;
        }
        start = text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
    }
    let mut end = diagnostic.end.min(text.len());
    for _ in 0..4 {
        match text[end..].find('\n') {
            Some(i) => end += i + 1,
            None => {
                end = text.len();
                break;
            }
        }
    }
    // Whole lines, without the last line break.
    let end = if end > start && text[..end].ends_with('\n') { end - 1 } else { end };
    start..end
}

/// Where an answer is complete, per task: a docstring at the end of its first line; code at
/// the end of the first closed code block (for tests: the first one holding a test).
pub fn stop_rule(kind: &Kind, spec: &Spec) -> ChatStop {
    match kind {
        Kind::Docstring => Arc::new(|text: &str| {
            let trimmed = text.trim_start();
            let lead = text.len() - trimmed.len();
            trimmed.find('\n').filter(|&i| i > 0).map(|i| lead + i)
        }),
        Kind::Tests => {
            let marker = match spec.name {
                "python" => "def test",
                "rust" => "#[test]",
                "go" => "func Test",
                _ => "(",
            };
            Arc::new(move |text: &str| closed_blocks(text).into_iter().find(|(_, code)| code.contains(marker)).map(|(end, _)| end))
        }
        Kind::Refactor | Kind::Fix { .. } => Arc::new(|text: &str| closed_blocks(text).first().map(|(end, _)| *end)),
    }
}

/// Fenced code blocks that are closed: `(end offset after the closing fence, code)`.
pub fn closed_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(open) = text[pos..].find("```") {
        let open = pos + open;
        let Some(nl) = text[open..].find('\n') else { break };
        let body_start = open + nl + 1;
        let Some(close) = find_fence_line(text, body_start) else { break };
        out.push((close + 3, text[body_start..close].trim_end_matches('\n').to_owned()));
        pos = close + 3;
    }
    out
}

/// A closing fence: three backticks at the start of a line (after optional indentation).
fn find_fence_line(text: &str, from: usize) -> Option<usize> {
    let mut line_start = from;
    loop {
        let rest = &text[line_start..];
        let trimmed = rest.trim_start_matches([' ', '\t']);
        if trimmed.starts_with("```") {
            return Some(line_start + (rest.len() - trimmed.len()));
        }
        line_start += rest.find('\n')? + 1;
    }
}

/// The code of an answer: its closed code blocks; an answer with no fence at all is taken as
/// code as it is.
pub fn answer_code(answer: &str) -> Vec<String> {
    let blocks: Vec<String> = closed_blocks(answer).into_iter().map(|(_, c)| c).collect();
    if blocks.is_empty() && !answer.contains("```") {
        vec![answer.trim_matches('\n').to_owned()]
    } else {
        blocks
    }
}

/// Removes the indentation common to all non-blank lines.
pub fn dedent(text: &str) -> String {
    let common = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    text.lines().map(|l| if l.len() >= common { &l[common..] } else { l.trim_start() }).collect::<Vec<_>>().join("\n")
}

/// Indents every non-blank line.
pub fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| if l.trim().is_empty() { String::new() } else { format!("{by}{l}") }).collect::<Vec<_>>().join("\n")
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn snake(s: &str) -> String {
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if ch.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(ch.to_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

/// A short title for an action ("Generate tests for `parse`").
pub fn title(kind: &Kind, spec: &Spec, name: Option<&str>) -> String {
    let name = name.unwrap_or("this code");
    match kind {
        Kind::Tests => format!("Generate tests for `{name}`"),
        Kind::Docstring if spec.name == "python" => format!("Add docstring to `{name}`"),
        Kind::Docstring => format!("Add doc comment to `{name}`"),
        Kind::Refactor => format!("Refactor: simplify `{name}`"),
        Kind::Fix { message, .. } => {
            let first = message.lines().next().unwrap_or("");
            let short: String = first.chars().take(60).collect();
            let more = if first.chars().count() > 60 { "…" } else { "" };
            format!("Fix with AI: {short}{more}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax;

    fn at(lang: &str, src: &str) -> Option<Target> {
        let spec = syntax::by_language_id(lang).unwrap();
        let offset = src.find('|').unwrap();
        let text = src.replacen('|', "", 1);
        function_at(spec, &spec.parse(&text), &text, offset)
    }

    #[test]
    fn the_function_under_the_cursor_in_each_language() {
        let t = at("python", "import math\n\n\n@cache\ndef hyp|otenuse(a, b):\n    return math.sqrt(a * a + b * b)\n").unwrap();
        assert_eq!(t.name, "hypotenuse");
        assert_eq!(t.range.start, 14, "the decorator belongs to it");
        let t = at("python", "class A:\n    def m(self):\n        return [x for x in self.|xs]\n").unwrap();
        assert_eq!((t.name.as_str(), t.indent.as_str()), ("m", "    "));
        assert_eq!(at("python", "x = |1\n"), None);
        assert_eq!(at("rust", "impl S {\n    fn area(&self) -> f64 { self.|w * self.h }\n}\n").unwrap().name, "area");
        assert_eq!(at("go", "package p\n\nfunc Add(a, b int) int {\n\treturn a |+ b\n}\n").unwrap().name, "Add");
        assert_eq!(at("javascript", "const slug = (s) => s.|trim();\n").unwrap().name, "slug");
        assert_eq!(at("typescript", "export function parse(s: string): number {\n  return Number(|s);\n}\n").unwrap().name, "parse");
    }

    #[test]
    fn tests_aim_at_the_function_a_test_can_import() {
        let spec = syntax::by_language_id("python").unwrap();
        let src = "def outer(x):\n    def inner(y):\n        return y * 2\n    return inner(x)\n\n\nclass A:\n    def m(self):\n        def helper():\n            return 1\n        return helper()\n";
        let tree = spec.parse(src);
        let at = src.find("y * 2").unwrap();
        assert_eq!(function_at(spec, &tree, src, at).unwrap().name, "inner", "docstrings and refactors: the function itself");
        assert_eq!(tests_target(spec, &tree, src, at).unwrap().name, "outer", "tests: the importable one around it");
        assert_eq!(target_for(&Kind::Tests, spec, &tree, src, at).unwrap().name, "outer");
        assert_eq!(target_for(&Kind::Docstring, spec, &tree, src, at).unwrap().name, "inner");
        let at = src.find("return 1").unwrap();
        assert_eq!(tests_target(spec, &tree, src, at).unwrap().name, "m", "a method (imported through its class)");
        let at = src.find("return inner").unwrap();
        assert_eq!(tests_target(spec, &tree, src, at).unwrap().name, "outer");
    }

    #[test]
    fn stop_rules_end_answers_where_they_are_complete() {
        let py = syntax::by_language_id("python").unwrap();
        let doc = stop_rule(&Kind::Docstring, py);
        assert_eq!(doc("Returns the"), None);
        assert_eq!(doc("\nReturns the sum.\nMore"), Some(17));
        let tests = stop_rule(&Kind::Tests, py);
        let answer = "Here:\n```python\ndef f(): pass\n```\nand\n```python\ndef test_f():\n    assert f() is None\n```\ntrailing";
        assert_eq!(tests(answer).map(|i| &answer[..i]), Some(&answer[..answer.find("\ntrailing").unwrap()]));
        assert_eq!(tests("```python\ndef test_f():\n"), None);
        let refactor = stop_rule(&Kind::Refactor, py);
        assert_eq!(refactor("```python\ndef f():\n    return 1\n```\nThis"), Some(35));
        assert_eq!(answer_code("def f():\n    return 1\n"), vec!["def f():\n    return 1".to_string()]);
        assert_eq!(answer_code("```py\nunclosed"), Vec::<String>::new());
    }

    #[test]
    fn fix_region_is_the_function_or_the_lines_around() {
        let text = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
        let d = text.find('e').unwrap();
        assert_eq!(&text[fix_region(text, &(d..d + 1), None)], "b\nc\nd\ne\nf\ng\nh");
        assert_eq!(dedent("    def f():\n        x\n\n    y"), "def f():\n    x\n\ny");
        assert_eq!(indent("a\n\nb", "  "), "  a\n\n  b");
        assert_eq!(snake("parseURL"), "parse_u_r_l");
    }
}
