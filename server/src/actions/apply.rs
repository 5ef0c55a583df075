//! From a complete answer to file changes: the model's content is extracted (code blocks,
//! test functions, one sentence) and placed by ghostline; every changed file is parsed with
//! tree-sitter and the change is refused when it would parse worse than before. Inserted text
//! takes the line ending of the file it goes into (a new file: the source's).

use std::ops::Range;
use std::path::PathBuf;

use tree_sitter::Node;

use super::layout::TestPlan;
use super::{answer_code, dedent, indent, Source, Target};
use crate::syntax::{self, Spec};

/// Which file a change is for.
#[derive(Debug, Clone, PartialEq)]
pub enum FileRef {
    /// The document the action was asked on.
    Source,
    Path(PathBuf),
}

/// Edits to one file: byte ranges of `base` replaced; `base: None` creates the file with the
/// edits' text (a file that exists but is blank has a `base`: it is filled, not created).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub file: FileRef,
    pub base: Option<String>,
    pub edits: Vec<(Range<usize>, String)>,
}

impl Change {
    /// The file's text after the change.
    pub fn result(&self) -> String {
        let mut text = self.base.clone().unwrap_or_default();
        let mut edits = self.edits.clone();
        edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
        for (r, t) in edits {
            text.replace_range(r, &t);
        }
        text
    }
}

/// The changes with their inserted text in the line ending of the file each goes into: its
/// own when it has text, else the source document's.
fn fit_line_endings(mut changes: Vec<Change>, source_text: &str) -> Vec<Change> {
    use crate::text::{line_ending, with_line_ending};
    for change in &mut changes {
        let eol = match (&change.file, change.base.as_deref()) {
            (FileRef::Path(_), Some(base)) if base.contains('\n') => line_ending(base),
            _ => line_ending(source_text),
        };
        for (_, text) in &mut change.edits {
            *text = with_line_ending(text, eol);
        }
    }
    changes
}

fn errors(spec: &Spec, text: &str) -> usize {
    syntax::error_count(&spec.parse(text))
}

/// Refuses a change whose result parses worse than the base did.
fn check(spec: &Spec, change: &Change, what: &str) -> Result<(), String> {
    let before = change.base.as_deref().map_or(0, |b| errors(spec, b));
    let after = errors(spec, &change.result());
    if after > before {
        return Err(format!("the {what} did not parse ({after} syntax errors); nothing was changed"));
    }
    Ok(())
}

/// The first sentence of a docstring answer, cleaned: "This function computes …" → "Compute…"
/// is left to the model; ghostline only drops lead-ins, quotes and fences.
pub fn sentence(answer: &str) -> Option<String> {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("```"))?;
    let mut s = line.trim_matches(|c| matches!(c, '"' | '\'' | '`' | '*' | '#' | '/')).trim().to_owned();
    for lead in ["Docstring:", "Summary:", "Answer:"] {
        if let Some(rest) = s.strip_prefix(lead) {
            s = rest.trim().to_owned();
        }
    }
    let code_like = ["def ", "fn ", "func ", "function ", "return ", "import "];
    if s.is_empty() || code_like.iter().any(|c| s.starts_with(c)) || s.contains("```") {
        return None;
    }
    // "This function calculates …" / "The function `f` calculates …" → "Calculates …".
    let lower = s.to_lowercase();
    for lead in ["this function ", "this method ", "the function ", "the method ", "it "] {
        if lower.starts_with(lead) {
            let rest = &s[lead.len()..];
            let rest = if rest.starts_with('`') { rest.splitn(3, '`').nth(2).unwrap_or("").trim_start() } else { rest };
            if !rest.is_empty() {
                s = upper_first(rest);
            }
            break;
        }
    }
    if let Some(end) = s.find(". ") {
        s.truncate(end + 1);
    }
    if !s.ends_with(['.', '!', '?']) {
        s.push('.');
    }
    (s.len() >= 8).then_some(s)
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_lowercase().chain(c).collect()).unwrap_or_default()
}

fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// The node for the target's definition in `source`'s tree.
fn def_node<'t>(source: &'t Source<'_>, target: &Target) -> Option<Node<'t>> {
    let mut n = source.tree.root_node().descendant_for_byte_range(target.node.start, target.node.end)?;
    while n.byte_range() != target.node {
        n = n.parent()?;
    }
    Some(n)
}

/// Adds (or replaces) the docstring / doc comment of `target` with the answer's sentence.
pub fn docstring(source: &Source<'_>, target: &Target, answer: &str) -> Result<Vec<Change>, String> {
    let text = sentence(answer).ok_or("the answer held no usable sentence; nothing was changed")?;
    let node = def_node(source, target).ok_or("the function moved")?;
    let src = source.text;
    let mut edits = Vec::new();
    match source.spec.name {
        "python" => {
            let body = node.child_by_field_name("body").ok_or("the function has no body")?;
            let body_line = line_start(src, body.start_byte());
            if body_line <= node.start_byte() {
                return Err("a one-line function has no room for a docstring".into());
            }
            let body_indent: String = src[body_line..body.start_byte()].to_owned();
            let escaped = text.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"");
            let doc = format!("\"\"\"{escaped}\"\"\"");
            let first = body.named_child(0);
            match first.filter(|f| f.kind() == "expression_statement" && f.named_child(0).is_some_and(|s| s.kind() == "string")) {
                Some(existing) => edits.push((existing.byte_range(), doc)),
                None => edits.push((body_line..body_line, format!("{body_indent}{doc}\n"))),
            }
        }
        lang => {
            // The statement the comment goes above: `export …`, `const f = () => …`, the item.
            let mut anchor = node;
            while let Some(p) = anchor.parent() {
                if matches!(p.kind(), "export_statement" | "variable_declarator" | "lexical_declaration" | "variable_declaration") {
                    anchor = p;
                } else {
                    break;
                }
            }
            // Attributes and existing doc comments directly above.
            let mut top = anchor;
            let mut old_docs = Vec::new();
            while let Some(prev) = top.prev_sibling() {
                let t = &src[prev.byte_range()];
                let is_doc = match lang {
                    "rust" => prev.kind() == "line_comment" && t.starts_with("///"),
                    "go" => prev.kind() == "comment" && t.starts_with("//"),
                    _ => prev.kind() == "comment" && t.starts_with("/**"),
                };
                let adjacent = src[prev.end_byte()..top.start_byte()].matches('\n').count() <= 1;
                if !adjacent || !(is_doc || prev.kind() == "attribute_item") {
                    break;
                }
                if is_doc {
                    // A line comment node may hold its line break already.
                    let end = if src[..prev.end_byte()].ends_with('\n') {
                        prev.end_byte()
                    } else {
                        src[prev.end_byte()..].find('\n').map_or(src.len(), |i| prev.end_byte() + i + 1)
                    };
                    old_docs.push(line_start(src, prev.start_byte())..end);
                }
                top = prev;
            }
            let at = line_start(src, top.start_byte());
            let ind = &target.indent;
            let comment = match lang {
                "rust" => format!("{ind}/// {text}\n"),
                "go" => format!("{ind}// {} {}\n", target.name, lower_first(&text)),
                _ => format!("{ind}/** {} */\n", text.replace("*/", "* /")),
            };
            for r in old_docs {
                edits.push((r, String::new()));
            }
            edits.push((at..at, comment));
        }
    }
    let change = Change { file: FileRef::Source, base: Some(src.to_owned()), edits };
    check(source.spec, &change, "documented function")?;
    Ok(fit_line_endings(vec![change], src))
}

/// Replaces `region` of the source with the answer's first code block (re-indented). For a
/// refactor the result must still define `name` there.
pub fn replace(source: &Source<'_>, region: Range<usize>, answer: &str, name: Option<&str>) -> Result<Vec<Change>, String> {
    let code = answer_code(answer).into_iter().next().filter(|c| !c.trim().is_empty()).ok_or("the answer held no code block; nothing was changed")?;
    let src = source.text;
    let region_indent: String = src[region.clone()].chars().take_while(|c| *c == ' ' || *c == '\t').collect();
    let new_code = indent(&dedent(&code), &region_indent);
    if new_code.trim() == src[region.clone()].trim() {
        return Err("the answer is the code as it was; nothing to change".into());
    }
    if let Some(name) = name {
        if !new_code.contains(name) {
            return Err(format!("the answer does not define `{name}`; nothing was changed"));
        }
    }
    let change = Change { file: FileRef::Source, base: Some(src.to_owned()), edits: vec![(region.clone(), new_code)] };
    check(source.spec, &change, "rewritten code")?;
    if let Some(name) = name {
        let result = change.result();
        let tree = source.spec.parse(&result);
        let found = super::function_at(source.spec, &tree, &result, region.start + region_indent.len() + 1);
        if found.as_ref().map(|t| t.name.as_str()) != Some(name) {
            return Err(format!("the rewritten code is not a function named `{name}`; nothing was changed"));
        }
    }
    Ok(fit_line_endings(vec![change], src))
}

/// Test items found in an answer: `(name, text)`, plus import lines.
#[derive(Debug, Default)]
struct Found {
    tests: Vec<(String, String)>,
    imports: Vec<String>,
}

fn collect_tests(spec: &Spec, answer: &str, target: &Target, import_name: &str) -> Found {
    let mut found = Found::default();
    for block in answer_code(answer) {
        let code = dedent(&block);
        let tree = spec.parse(&code);
        if syntax::error_count(&tree) > 0 {
            continue; // a block that does not parse contributes nothing
        }
        let text = |n: Node<'_>| code[n.byte_range()].to_owned();
        let name = |n: Node<'_>| n.child_by_field_name("name").map(|x| code[x.byte_range()].to_owned()).unwrap_or_default();
        let mut stack = vec![tree.root_node()];
        while let Some(parent) = stack.pop() {
            let mut cursor = parent.walk();
            for n in parent.named_children(&mut cursor) {
                match (spec.name, n.kind()) {
                    ("python", "function_definition") if name(n).starts_with("test") => found.tests.push((name(n), text(n))),
                    ("python", "class_definition") if name(n).starts_with("Test") => found.tests.push((name(n), text(n))),
                    ("python", "decorated_definition") => {
                        if let Some(d) = n.child_by_field_name("definition").filter(|d| name(*d).starts_with("test")) {
                            found.tests.push((name(d), text(n)));
                        }
                    }
                    ("python", "import_statement" | "import_from_statement") => {
                        let line = text(n);
                        if !line.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == import_name || w == target.name) {
                            found.imports.push(line);
                        }
                    }
                    ("rust", "mod_item") => {
                        if let Some(body) = n.child_by_field_name("body") {
                            stack.push(body);
                        }
                    }
                    ("rust", "function_item") => {
                        let mut attrs = Vec::new();
                        let mut prev = n.prev_named_sibling();
                        while let Some(p) = prev.filter(|p| p.kind() == "attribute_item") {
                            attrs.push(p);
                            prev = p.prev_named_sibling();
                        }
                        let is_test = attrs.iter().any(|a| code[a.byte_range()].contains("test"));
                        let no_params = n.child_by_field_name("parameters").is_some_and(|p| p.named_child_count() == 0);
                        if is_test && no_params {
                            let start = attrs.last().map_or(n.start_byte(), |a| a.start_byte());
                            let mut item = code[start..n.end_byte()].to_owned();
                            let mut fname = name(n);
                            if fname == target.name {
                                let renamed = format!("test_{fname}");
                                item = item.replacen(&format!("fn {fname}"), &format!("fn {renamed}"), 1);
                                fname = renamed;
                            }
                            found.tests.push((fname, item));
                        }
                    }
                    ("go", "function_declaration") if name(n).starts_with("Test") && text(n).contains("testing.T") => {
                        found.tests.push((name(n), text(n)))
                    }
                    (_, "expression_statement") if matches!(spec.name, "javascript" | "typescript" | "tsx") => {
                        let call = n.named_child(0).filter(|c| c.kind() == "call_expression");
                        let callee = call.and_then(|c| c.child_by_field_name("function")).map(text).unwrap_or_default();
                        if ["test", "it", "describe"].contains(&callee.as_str()) {
                            found.tests.push((String::new(), text(n)));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    // The same test twice (an answer repeating itself): keep the first.
    let mut seen = std::collections::HashSet::new();
    found.tests.retain(|(_, t)| seen.insert(t.clone()));
    found
}

/// Renames a test whose name the file already uses (`test_x` → `test_x_2`).
fn unique(name: &str, item: &str, existing: &str, spec: &Spec) -> String {
    if name.is_empty() {
        return item.to_owned();
    }
    let keyword = match spec.name {
        "python" => "def ",
        "rust" => "fn ",
        _ => "func ",
    };
    let taken = |n: &str| existing.contains(&format!("{keyword}{n}("));
    if !taken(name) {
        return item.to_owned();
    }
    let mut i = 2;
    while taken(&format!("{name}_{i}")) {
        i += 1;
    }
    item.replacen(&format!("{keyword}{name}("), &format!("{keyword}{name}_{i}("), 1)
}

/// Writes the answer's tests where `plan` says: a new test file, the end of an existing one
/// (with the import added when it lacks it), or the source's own `mod tests` (Rust).
pub fn tests(source: &Source<'_>, target: &Target, plan: &TestPlan, existing: Option<String>, answer: &str) -> Result<Vec<Change>, String> {
    let spec = source.spec;
    let import_name = plan.import.as_deref().map(|_| super::layout::import_name(source, target)).unwrap_or_else(|| target.name.clone());
    let found = collect_tests(spec, answer, target, &import_name);
    if found.tests.is_empty() {
        return Err("the answer held no test that parses; nothing was changed".into());
    }
    if spec.name == "rust" {
        return rust_tests(source, &found);
    }
    let path = plan.path.clone().ok_or("no test file")?;
    let base = existing.clone().unwrap_or_default();
    let mut items: Vec<String> = Vec::new();
    for (name, item) in &found.tests {
        let all = format!("{base}\n{}", items.join("\n"));
        items.push(unique(name, item, &all, spec));
    }
    let gap = if spec.name == "python" { "\n\n\n" } else { "\n\n" };
    let body = items.join(gap);
    let change = if base.trim().is_empty() {
        let mut header = plan.header.clone();
        for import in &found.imports {
            if !header.contains(import.as_str()) {
                header = format!("{import}\n{header}");
            }
        }
        let content = format!("{header}{}{body}\n", &gap[1..]);
        match existing {
            // There but blank (`touch`ed, or made by an edit the editor then refused): filled.
            Some(blank) => Change { file: FileRef::Path(path), edits: vec![(0..blank.len(), content)], base: Some(blank) },
            None => Change { file: FileRef::Path(path), base: None, edits: vec![(0..0, content)] },
        }
    } else {
        let mut edits = Vec::new();
        // Missing imports go after the existing ones (or at the top).
        let mut imports: Vec<String> = found.imports.iter().filter(|i| !base.contains(i.as_str())).cloned().collect();
        // The plan's import may be several lines (`sys.path` first): each missing one is added.
        for line in plan.import.iter().flat_map(|i| i.lines()) {
            if !base.lines().any(|l| l.trim_end() == line) {
                imports.push(line.to_owned());
            }
        }
        if !imports.is_empty() {
            let after = base
                .split_inclusive('\n')
                .scan(0, |pos, l| {
                    let start = *pos;
                    *pos += l.len();
                    Some((start, l.trim_end_matches(['\r', '\n'])))
                })
                .filter(|(_, l)| l.starts_with("import ") || l.starts_with("from ") || l.starts_with("const ") && l.contains("require("))
                .last()
                .map_or(0, |(start, l)| {
                    let end = start + l.len();
                    // After the line's own break (`\n` or `\r\n`), when it has one.
                    (end + base[end..].find('\n').map_or(0, |i| i + 1)).min(base.len())
                });
            edits.push((after..after, imports.iter().map(|i| format!("{i}\n")).collect::<String>()));
        }
        let end = base.trim_end().len();
        edits.push((end..base.len(), format!("{gap}{body}\n")));
        Change { file: FileRef::Path(path), base: Some(base), edits }
    };
    check(spec, &change, "test file")?;
    Ok(fit_line_endings(vec![change], source.text))
}

fn rust_tests(source: &Source<'_>, found: &Found) -> Result<Vec<Change>, String> {
    let src = source.text;
    // An existing `mod tests { … }`: the new tests go before its closing brace.
    let root = source.tree.root_node();
    let mut cursor = root.walk();
    let existing = root.named_children(&mut cursor).find(|n| {
        n.kind() == "mod_item" && n.child_by_field_name("name").is_some_and(|x| &src[x.byte_range()] == "tests") && n.child_by_field_name("body").is_some()
    });
    let mut items = Vec::new();
    for (name, item) in &found.tests {
        let all = format!("{src}\n{}", items.join("\n"));
        items.push(unique(name, &dedent(item), &all, source.spec));
    }
    let edit = match existing {
        Some(m) => {
            let body = m.child_by_field_name("body").expect("checked");
            let close = body.end_byte() - 1;
            let at = line_start(src, close);
            let inner = indent(&items.join("\n\n"), "    ");
            (at..at, format!("\n{inner}\n"))
        }
        None => {
            let end = src.trim_end().len();
            let inner = indent(&items.join("\n\n"), "    ");
            (end..src.len(), format!("\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n{inner}\n}}\n"))
        }
    };
    let change = Change { file: FileRef::Source, base: Some(src.to_owned()), edits: vec![edit] };
    check(source.spec, &change, "test module")?;
    Ok(fit_line_endings(vec![change], src))
}

#[cfg(test)]
mod tests {
    use super::super::{function_at, layout};
    use super::*;

    fn source<'a>(lang: &str, text: &'a str, tree: &'a tree_sitter::Tree, path: &str) -> Source<'a> {
        Source { spec: syntax::by_language_id(lang).unwrap(), text, tree, path: Some(path.into()), root: Some("/ws".into()) }
    }

    const GEOMETRY: &str = "import math\n\n\ndef hypotenuse(a, b):\n    return math.sqrt(a * a + b * b)\n";

    #[test]
    fn python_docstring_is_placed_by_ghostline() {
        let spec = syntax::by_language_id("python").unwrap();
        let tree = spec.parse(GEOMETRY);
        let s = source("python", GEOMETRY, &tree, "/ws/geometry.py");
        let t = function_at(spec, &tree, GEOMETRY, 20).unwrap();
        let c = docstring(&s, &t, "This function calculates the hypotenuse of a triangle using the Pythagorean theorem.").unwrap();
        assert_eq!(
            c[0].result(),
            "import math\n\n\ndef hypotenuse(a, b):\n    \"\"\"Calculates the hypotenuse of a triangle using the Pythagorean theorem.\"\"\"\n    return math.sqrt(a * a + b * b)\n"
        );
        assert!(docstring(&s, &t, "```python\ndef hypotenuse(a, b):\n```").is_err());
    }

    #[test]
    fn doc_comments_in_rust_go_and_typescript() {
        for (lang, text, want) in [
            ("rust", "/// old\n#[inline]\nfn clamp(x: i32) -> i32 {\n    x\n}\n", "/// Clamps x.\n#[inline]\nfn clamp(x: i32) -> i32 {\n    x\n}\n"),
            ("go", "package p\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n", "package p\n\n// Add clamps x.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"),
            ("typescript", "export const slug = (s: string) => s.trim();\n", "/** Clamps x. */\nexport const slug = (s: string) => s.trim();\n"),
        ] {
            let spec = syntax::by_language_id(lang).unwrap();
            let tree = spec.parse(text);
            let at = text.find("x\n").or(text.find("a + b")).or(text.find("s.trim")).unwrap();
            let t = function_at(spec, &tree, text, at).unwrap();
            let c = docstring(&source(lang, text, &tree, "/ws/f"), &t, "This function clamps x.").unwrap();
            assert_eq!(c[0].result(), want, "{lang}");
        }
    }

    #[test]
    fn refactor_replaces_the_function_only_when_the_answer_parses() {
        let text = "class A:\n    def total(self, xs):\n        result = 0\n        for x in xs:\n            result += x\n        return result\n";
        let spec = syntax::by_language_id("python").unwrap();
        let tree = spec.parse(text);
        let s = source("python", text, &tree, "/ws/a.py");
        let t = function_at(spec, &tree, text, 30).unwrap();
        let c = replace(&s, t.range.clone(), "```python\ndef total(self, xs):\n    return sum(xs)\n```", Some("total")).unwrap();
        assert_eq!(c[0].result(), "class A:\n    def total(self, xs):\n        return sum(xs)\n");
        assert!(replace(&s, t.range.clone(), "```python\ndef total(self, xs:\n    return sum(xs\n```", Some("total")).unwrap_err().contains("did not parse"));
        assert!(replace(&s, t.range.clone(), "```python\ndef other():\n    pass\n```", Some("total")).is_err());
        assert!(replace(&s, t.range.clone(), "Sure! I can help.", Some("total")).is_err());
    }

    #[test]
    fn python_tests_create_or_append_without_clobbering() {
        let spec = syntax::by_language_id("python").unwrap();
        let tree = spec.parse(GEOMETRY);
        let s = source("python", GEOMETRY, &tree, "/ws/geometry.py");
        let t = function_at(spec, &tree, GEOMETRY, 20).unwrap();
        let plan = layout::plan(&s, &t, &|_| false, &|_| None).unwrap();
        let answer = "```python\nimport math\nfrom geometry import hypotenuse\n\ndef hypotenuse(a, b):\n    return 0\n\ndef test_hypotenuse():\n    assert hypotenuse(3, 4) == 5\n```";
        let c = tests(&s, &t, &plan, None, answer).unwrap();
        assert_eq!(c[0].file, FileRef::Path("/ws/tests/test_geometry.py".into()));
        assert_eq!(c[0].result(), "import math\nfrom geometry import hypotenuse\n\n\ndef test_hypotenuse():\n    assert hypotenuse(3, 4) == 5\n");
        // Appending: what is there stays, the import is added, a taken name gets a suffix.
        let existing = "import pytest\n\n\ndef test_hypotenuse():\n    assert True\n";
        let c = tests(&s, &t, &plan, Some(existing.into()), answer).unwrap();
        let out = c[0].result();
        assert!(out.starts_with("import pytest\nimport math\nfrom geometry import hypotenuse\n\n\ndef test_hypotenuse():\n    assert True\n"), "{out}");
        assert!(out.ends_with("\n\n\ndef test_hypotenuse_2():\n    assert hypotenuse(3, 4) == 5\n"), "{out}");
        assert!(tests(&s, &t, &plan, None, "I cannot write tests.").is_err());
    }

    #[test]
    fn rust_tests_go_in_a_test_module() {
        let text = "fn clamp(x: i32, lo: i32, hi: i32) -> i32 {\n    x.max(lo).min(hi)\n}\n";
        let spec = syntax::by_language_id("rust").unwrap();
        let tree = spec.parse(text);
        let s = source("rust", text, &tree, "/ws/src/lib.rs");
        let t = function_at(spec, &tree, text, 50).unwrap();
        let plan = layout::plan(&s, &t, &|_| false, &|_| None).unwrap();
        let answer = "```rust\n#[test]\nfn clamp(x: i32) {\n    assert_eq!(x, 1)\n}\n\n#[test]\nfn clamp() {\n    assert_eq!(clamp(5, 0, 3), 3);\n}\n```";
        let c = tests(&s, &t, &plan, None, answer).unwrap();
        assert_eq!(
            c[0].result(),
            format!("{text}\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    #[test]\n    fn test_clamp() {{\n        assert_eq!(clamp(5, 0, 3), 3);\n    }}\n}}\n")
        );
    }
    const ANSWER: &str = "```python\ndef test_hypotenuse():\n    assert hypotenuse(3, 4) == 5\n```";

    #[test]
    fn a_blank_test_file_that_exists_is_filled_not_created() {
        let spec = syntax::by_language_id("python").unwrap();
        let tree = spec.parse(GEOMETRY);
        let s = source("python", GEOMETRY, &tree, "/ws/geometry.py");
        let t = function_at(spec, &tree, GEOMETRY, 20).unwrap();
        let plan = layout::plan(&s, &t, &|_| false, &|_| None).unwrap();
        let new = tests(&s, &t, &plan, None, ANSWER).unwrap();
        assert_eq!(new[0].base, None, "no file: created");
        let want = "from geometry import hypotenuse\n\n\ndef test_hypotenuse():\n    assert hypotenuse(3, 4) == 5\n";
        assert_eq!(new[0].result(), want);
        // Empty, or only whitespace: the file is there, so it is edited (a versioned edit over
        // its whole text), never created again.
        for blank in ["", "\n", "  \n\t\n"] {
            let c = tests(&s, &t, &plan, Some(blank.into()), ANSWER).unwrap();
            assert_eq!(c[0].base.as_deref(), Some(blank), "{blank:?}");
            assert_eq!(c[0].edits, vec![(0..blank.len(), want.to_owned())], "{blank:?}");
            assert_eq!(c[0].result(), want);
        }
        // A file with other tests: appended to, with the import it lacks.
        let other = "def test_other():\n    assert True\n";
        let c = tests(&s, &t, &plan, Some(other.into()), ANSWER).unwrap();
        assert_eq!(c[0].base.as_deref(), Some(other));
        assert_eq!(c[0].result(), format!("from geometry import hypotenuse\n{other}\n\ndef test_hypotenuse():\n    assert hypotenuse(3, 4) == 5\n"));
    }

    #[test]
    fn inserted_text_takes_the_files_line_ending() {
        let crlf = GEOMETRY.replace('\n', "\r\n");
        let spec = syntax::by_language_id("python").unwrap();
        let tree = spec.parse(&crlf);
        let s = source("python", &crlf, &tree, "/ws/geometry.py");
        let t = function_at(spec, &tree, &crlf, 22).unwrap();
        let lone_lf = |text: &str| text.replace("\r\n", "").contains('\n');
        let doc = docstring(&s, &t, "Returns the hypotenuse.").unwrap();
        assert_eq!(doc[0].result(), "import math\r\n\r\n\r\ndef hypotenuse(a, b):\r\n    \"\"\"Returns the hypotenuse.\"\"\"\r\n    return math.sqrt(a * a + b * b)\r\n");
        let refactor = replace(&s, t.range.clone(), "```python\ndef hypotenuse(a, b):\n    return math.hypot(a, b)\n```", Some("hypotenuse")).unwrap();
        assert!(!lone_lf(&refactor[0].result()), "{:?}", refactor[0].result());
        let plan = layout::plan(&s, &t, &|_| false, &|_| None).unwrap();
        // A new test file: the source's line ending.
        let new = tests(&s, &t, &plan, None, ANSWER).unwrap();
        assert_eq!(new[0].result(), "from geometry import hypotenuse\r\n\r\n\r\ndef test_hypotenuse():\r\n    assert hypotenuse(3, 4) == 5\r\n");
        // An existing CRLF test file: its own, and the import goes after its imports.
        let existing = "import pytest\r\n\r\n\r\ndef test_other():\r\n    assert True\r\n";
        let c = tests(&s, &t, &plan, Some(existing.into()), ANSWER).unwrap();
        assert_eq!(
            c[0].result(),
            "import pytest\r\nfrom geometry import hypotenuse\r\n\r\n\r\ndef test_other():\r\n    assert True\r\n\r\n\r\ndef test_hypotenuse():\r\n    assert hypotenuse(3, 4) == 5\r\n"
        );
        // An existing LF test file next to a CRLF source keeps LF.
        let c = tests(&s, &t, &plan, Some("import pytest\n".into()), ANSWER).unwrap();
        assert!(!c[0].result().contains('\r'), "{:?}", c[0].result());
    }

    #[test]
    fn a_sys_path_import_is_added_line_by_line_to_an_existing_file() {
        let spec = syntax::by_language_id("python").unwrap();
        let tree = spec.parse(GEOMETRY);
        let s = source("python", GEOMETRY, &tree, "/ws/my dir/geometry.py");
        let t = function_at(spec, &tree, GEOMETRY, 20).unwrap();
        let plan = layout::plan(&s, &t, &|_| false, &|_| None).unwrap();
        let existing = "import sys\n\n\ndef test_other():\n    assert True\n";
        let out = tests(&s, &t, &plan, Some(existing.into()), ANSWER).unwrap()[0].result();
        assert!(
            out.starts_with("import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).resolve().parents[1] / \"my dir\"))\nfrom geometry import hypotenuse\n\n\ndef test_other"),
            "{out}"
        );
        assert_eq!(out.matches("import sys").count(), 1, "{out}");
    }
}
