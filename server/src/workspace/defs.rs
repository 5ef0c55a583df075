//! Definitions of one file: its top-level and class-level functions, classes, types and
//! constants, each with its name and the text the prompt shows (signature, first doc line,
//! body elided as the outline elides it), read from the file's tree-sitter tree.

use tree_sitter::{Node, Tree};

use crate::syntax::scope::line_indent as indent_before;
use crate::syntax::Spec;

/// Lines a class, struct, interface or constant keeps before the rest is cut (`...`).
const MAX_LINES: usize = 30;
/// Characters a line keeps before it is cut (long literals, minified code).
const MAX_LINE_CHARS: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Function,
    /// A class, struct, enum, trait, interface or type alias.
    Type,
    /// An `impl` block (its name is the type's).
    Impl,
    /// A method declared outside its type (Go), with the type in `container`.
    Method,
    Constant,
}

/// One definition, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Def {
    pub name: String,
    pub kind: Kind,
    /// Go methods: the receiver's type.
    pub container: Option<String>,
    /// The names of the classes it extends (Python, JS/TS), as written.
    pub bases: Vec<String>,
    /// What the prompt shows: signature, doc line, elided body.
    pub text: String,
    /// Zero-based line of the definition's first line.
    pub line: u32,
    /// Byte offset of the definition in its file (orders the snippets).
    pub start: usize,
}

impl Def {
    /// Bytes this definition holds, estimated (strings and their headers).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Def>() + self.name.len() + self.text.len() + self.container.as_ref().map_or(0, |c| c.len()) + self.bases.iter().map(|b| b.len() + 24).sum::<usize>()
    }
}

/// The definitions of a parsed file, in file order.
pub fn extract(spec: &Spec, tree: &Tree, text: &str) -> Vec<Def> {
    let mut out = Vec::new();
    let root = tree.root_node();
    let mut cursor = root.walk();
    for node in root.named_children(&mut cursor) {
        match spec.name {
            "python" => python_item(node, text, &mut out),
            "rust" => rust_item(node, text, &mut out),
            "javascript" | "typescript" | "tsx" => js_item(node, node, text, &mut out),
            "go" => go_item(node, text, &mut out),
            _ => {}
        }
    }
    out
}

/// The top-level names a file defines (cheaper than [`extract`]: no text is rendered).
pub fn local_names(tree: &Tree, text: &str) -> Vec<String> {
    let root = tree.root_node();
    let mut cursor = root.walk();
    let mut names = Vec::new();
    for node in root.named_children(&mut cursor) {
        let node = unwrap_decl(node);
        // `from m import a` has `a` as its `name` field: imported, not defined here.
        if matches!(node.kind(), "import_statement" | "import_from_statement" | "future_import_statement") {
            continue;
        }
        if let Some(n) = node.child_by_field_name("name") {
            names.push(text[n.byte_range()].to_owned());
        }
        // Assignments, declarators, specs: one level down.
        let mut c = node.walk();
        for child in node.named_children(&mut c) {
            if let Some(n) = child.child_by_field_name("name").or_else(|| child.child_by_field_name("left")) {
                if n.kind().contains("identifier") {
                    names.push(text[n.byte_range()].to_owned());
                }
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// `export …`, `decorated_definition`: the declaration inside.
fn unwrap_decl(node: Node<'_>) -> Node<'_> {
    match node.kind() {
        "export_statement" => node.child_by_field_name("declaration").unwrap_or(node),
        "decorated_definition" => node.child_by_field_name("definition").unwrap_or(node),
        _ => node,
    }
}

fn name_of(node: Node<'_>, text: &str) -> Option<String> {
    node.child_by_field_name("name").map(|n| text[n.byte_range()].to_owned())
}

/// Each line cut to [`MAX_LINE_CHARS`] characters, at most [`MAX_LINES`] lines (then `…`).
fn clip(s: &str, indent_of_rest: &str) -> String {
    let mut out = String::new();
    for (i, line) in s.lines().enumerate() {
        if i == MAX_LINES {
            out.push_str(indent_of_rest);
            out.push_str("...\n");
            break;
        }
        let line = line.trim_end();
        match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((at, _)) => {
                out.push_str(&line[..at]);
                out.push_str(" ...");
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out.pop();
    out
}

fn def(name: String, kind: Kind, node: Node<'_>, text: String) -> Def {
    Def { name, kind, container: None, bases: Vec::new(), text, line: node.start_position().row as u32, start: node.start_byte() }
}

// ----- Python

fn python_item(node: Node<'_>, text: &str, out: &mut Vec<Def>) {
    let inner = unwrap_decl(node);
    match inner.kind() {
        "function_definition" => {
            if let Some(name) = name_of(inner, text) {
                out.push(def(name, Kind::Function, node, python_function(node, inner, text, true)));
            }
        }
        "class_definition" => {
            let Some(name) = name_of(inner, text) else { return };
            let Some(body) = inner.child_by_field_name("body") else { return };
            let mut lines = vec![text[node.start_byte()..body.start_byte()].trim_end().to_owned()];
            if let Some(doc) = python_docstring(body, text) {
                lines.push(doc);
            }
            let mut c = body.walk();
            for member in body.named_children(&mut c) {
                let m = unwrap_decl(member);
                let indent = indent_before(text, member.start_byte());
                match m.kind() {
                    "function_definition" => lines.push(format!("{indent}{}", python_function(member, m, text, false))),
                    "expression_statement" if m.named_child(0).is_some_and(|a| a.kind() == "assignment") => {
                        lines.push(format!("{indent}{}", first_line(&text[m.byte_range()])));
                    }
                    _ => {}
                }
            }
            if lines.len() == 1 {
                lines.push(format!("{}...", body_indent(text, body)));
            }
            let mut d = def(name, Kind::Type, node, clip(&lines.join("\n"), &body_indent(text, body)));
            if let Some(supers) = inner.child_by_field_name("superclasses") {
                let mut c = supers.walk();
                d.bases = supers
                    .named_children(&mut c)
                    .filter(|b| matches!(b.kind(), "identifier" | "attribute"))
                    .map(|b| text[b.byte_range()].to_owned())
                    .collect();
            }
            out.push(d);
        }
        "expression_statement" => {
            let Some(assign) = inner.named_child(0).filter(|a| a.kind() == "assignment") else { return };
            let Some(left) = assign.child_by_field_name("left").filter(|l| l.kind() == "identifier") else { return };
            out.push(def(text[left.byte_range()].to_owned(), Kind::Constant, node, clip(&text[node.byte_range()], "")));
        }
        _ => {}
    }
}

/// `def f(x: int) -> str:` with its decorators, then the first docstring line (top-level
/// functions only) and `...`, or ` ...` on the header line.
fn python_function(outer: Node<'_>, func: Node<'_>, text: &str, with_doc: bool) -> String {
    let Some(body) = func.child_by_field_name("body") else { return first_line(&text[outer.byte_range()]).to_owned() };
    let header = text[outer.start_byte()..body.start_byte()].trim_end();
    match python_docstring(body, text).filter(|_| with_doc) {
        Some(doc) => format!("{header}\n{doc}\n{}...", body_indent(text, body)),
        None => format!("{header} ..."),
    }
}

/// The block's first statement, when it is a string: its first non-blank line, re-quoted and
/// indented as the body.
fn python_docstring(body: Node<'_>, text: &str) -> Option<String> {
    let first = body.named_child(0)?;
    if first.kind() != "expression_statement" {
        return None;
    }
    let s = first.named_child(0).filter(|s| s.kind() == "string")?;
    let raw = &text[s.byte_range()];
    let unquoted = raw.trim_start_matches(|c: char| c.is_ascii_alphabetic()).trim_matches(|c| c == '"' || c == '\'');
    let line = unquoted.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(format!("{}\"\"\"{}\"\"\"", body_indent(text, body), clip_line(line)))
}

fn body_indent(text: &str, body: Node<'_>) -> String {
    let indent = indent_before(text, body.start_byte());
    if indent.is_empty() {
        "    ".to_owned()
    } else {
        indent.to_owned()
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("").trim_end()
}

fn clip_line(s: &str) -> &str {
    match s.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

// ----- Brace languages: doc comments and elided bodies

/// The first line of the doc comment right above `node` (over attributes and decorators), as
/// a one-line comment in the file's style.
fn doc_above(node: Node<'_>, text: &str, rust: bool) -> Option<String> {
    let mut at = node;
    let mut first: Option<Node<'_>> = None;
    while let Some(prev) = at.prev_named_sibling() {
        // A line comment's node can end at the start of the next line.
        let end = prev.end_position();
        let last_row = if end.column == 0 && end.row > prev.start_position().row { end.row - 1 } else { end.row };
        if last_row + 1 < at.start_position().row {
            break;
        }
        let doc = &text[prev.byte_range()];
        match prev.kind() {
            "attribute_item" | "decorator" if first.is_none() => at = prev,
            // Rust: only outer doc comments (`///`, `/**`) document the item.
            "line_comment" | "block_comment" if rust && !(doc.starts_with("///") || doc.starts_with("/**")) => break,
            "comment" | "line_comment" | "block_comment" => {
                first = Some(prev);
                at = prev;
            }
            _ => break,
        }
    }
    let c = &text[first?.byte_range()];
    if let Some(block) = c.strip_prefix("/*") {
        let line = block
            .trim_end_matches("*/")
            .lines()
            .map(|l| l.trim().trim_start_matches('*').trim())
            .find(|l| !l.is_empty())?;
        return Some(format!("/** {} */", clip_line(line)));
    }
    if rust && !c.starts_with("///") {
        return None;
    }
    Some(clip_line(first_line(c)).to_owned())
}

/// `signature { ... }`: the node's text up to its body, the body elided.
fn braced(node: Node<'_>, body: Option<Node<'_>>, text: &str) -> String {
    match body {
        Some(b) => format!("{} {{ ... }}", text[node.start_byte()..b.start_byte()].trim_end()),
        None => clip(&text[node.byte_range()], ""),
    }
}

fn with_doc(doc: Option<String>, indent: &str, s: String) -> String {
    match doc {
        Some(d) => format!("{d}\n{indent}{s}"),
        None => s,
    }
}

/// A container's header, its members (each rendered by `member`), and its closing brace.
fn container(node: Node<'_>, body: Node<'_>, text: &str, member: &dyn Fn(Node<'_>) -> Option<String>) -> String {
    let mut lines = vec![format!("{} {{", text[node.start_byte()..body.start_byte()].trim_end())];
    let mut c = body.walk();
    for m in body.named_children(&mut c) {
        if let Some(s) = member(m) {
            lines.push(format!("{}{s}", indent_before(text, m.start_byte())));
        }
    }
    let close = format!("{}}}", indent_before(text, node.start_byte()));
    let mut s = clip(&lines.join("\n"), "    ");
    s.push('\n');
    s.push_str(&close);
    s
}

// ----- Rust

fn rust_item(node: Node<'_>, text: &str, out: &mut Vec<Def>) {
    let doc = || doc_above(node, text, true);
    let name = || name_of(node, text);
    // Attributes (`#[derive(…)]`) above the item belong to it.
    let mut start = node.start_byte();
    let mut at = node;
    while let Some(prev) = at.prev_named_sibling().filter(|p| p.kind() == "attribute_item" && p.end_position().row + 1 >= at.start_position().row) {
        start = prev.start_byte();
        at = prev;
    }
    match node.kind() {
        "function_item" => {
            if let Some(n) = name() {
                let s = match node.child_by_field_name("body") {
                    Some(b) => format!("{} {{ ... }}", text[start..b.start_byte()].trim_end()),
                    None => clip(&text[start..node.end_byte()], ""),
                };
                out.push(def(n, Kind::Function, node, with_doc(doc(), "", s)));
            }
        }
        "struct_item" | "enum_item" | "union_item" | "type_item" | "const_item" | "static_item" => {
            if let Some(n) = name() {
                let kind = if matches!(node.kind(), "const_item" | "static_item") { Kind::Constant } else { Kind::Type };
                out.push(def(n, kind, node, with_doc(doc(), "", clip(&text[start..node.end_byte()], "    "))));
            }
        }
        "function_signature_item" => {
            if let Some(n) = name() {
                out.push(def(n, Kind::Function, node, with_doc(doc(), "", clip(&text[node.byte_range()], ""))));
            }
        }
        "trait_item" | "impl_item" => {
            let Some(body) = node.child_by_field_name("body") else { return };
            let n = if node.kind() == "trait_item" {
                name()
            } else {
                node.child_by_field_name("type").map(|t| type_name(&text[t.byte_range()]))
            };
            let Some(n) = n else { return };
            let member = |m: Node<'_>| match m.kind() {
                "function_item" => Some(braced(m, m.child_by_field_name("body"), text)),
                "function_signature_item" | "const_item" | "associated_type" | "type_item" => Some(first_line(&text[m.byte_range()]).to_owned()),
                _ => None,
            };
            let kind = if node.kind() == "trait_item" { Kind::Type } else { Kind::Impl };
            out.push(def(n, kind, node, with_doc(doc(), "", container(node, body, text, &member))));
        }
        _ => {}
    }
}

/// `Foo<T>` → `Foo`, `crate::a::Foo` → `Foo`, `&mut Foo` → `Foo`.
fn type_name(t: &str) -> String {
    let t = t.split('<').next().unwrap_or(t);
    let t = t.rsplit("::").next().unwrap_or(t);
    t.trim_start_matches(['&', '*', '[', '(']).trim_start_matches("mut ").trim().to_owned()
}

// ----- JavaScript, TypeScript

fn js_item(outer: Node<'_>, node: Node<'_>, text: &str, out: &mut Vec<Def>) {
    let doc = || doc_above(outer, text, false);
    match node.kind() {
        "export_statement" => {
            if let Some(d) = node.child_by_field_name("declaration") {
                js_item(outer, d, text, out);
            }
        }
        "function_declaration" | "generator_function_declaration" | "function_signature" => {
            if let Some(n) = name_of(node, text) {
                let s = braced_from(outer, node.child_by_field_name("body"), text);
                out.push(def(n, Kind::Function, outer, with_doc(doc(), "", s)));
            }
        }
        "class_declaration" | "abstract_class_declaration" => {
            let (Some(n), Some(body)) = (name_of(node, text), node.child_by_field_name("body")) else { return };
            let member = |m: Node<'_>| match m.kind() {
                "method_definition" => Some(braced(m, m.child_by_field_name("body"), text)),
                // To the end of its line: the `;` is not the node's.
                "method_signature" | "abstract_method_signature" | "public_field_definition" | "field_definition" => {
                    Some(first_line(&text[m.start_byte()..]).to_owned())
                }
                _ => None,
            };
            let mut d = def(n, Kind::Type, outer, with_doc(doc(), "", container_from(outer, body, text, &member)));
            let mut c = node.walk();
            for h in node.named_children(&mut c).filter(|h| h.kind() == "class_heritage") {
                // JS: `extends X`; TS: `extends_clause` (value) and `implements_clause`.
                let mut hc = h.walk();
                for part in h.named_children(&mut hc) {
                    match part.kind() {
                        "identifier" | "member_expression" => d.bases.push(text[part.byte_range()].to_owned()),
                        "extends_clause" => {
                            if let Some(v) = part.child_by_field_name("value") {
                                d.bases.push(text[v.byte_range()].to_owned());
                            }
                        }
                        _ => {}
                    }
                }
            }
            out.push(d);
        }
        "interface_declaration" | "type_alias_declaration" | "enum_declaration" => {
            if let Some(n) = name_of(node, text) {
                out.push(def(n, Kind::Type, outer, with_doc(doc(), "", clip(&text[outer.byte_range()], "  "))));
            }
        }
        "lexical_declaration" | "variable_declaration" => {
            let mut c = node.walk();
            for decl in node.named_children(&mut c).filter(|d| d.kind() == "variable_declarator") {
                let Some(name) = decl.child_by_field_name("name").filter(|n| n.kind() == "identifier") else { continue };
                let name = text[name.byte_range()].to_owned();
                let value = decl.child_by_field_name("value");
                let body = value.filter(|v| matches!(v.kind(), "arrow_function" | "function_expression" | "function")).and_then(|v| v.child_by_field_name("body"));
                let s = match body {
                    Some(b) if b.kind() == "statement_block" => braced_from(outer, Some(b), text),
                    _ => clip(&text[outer.byte_range()], "  "),
                };
                let kind = if body.is_some() { Kind::Function } else { Kind::Constant };
                out.push(def(name, kind, outer, with_doc(doc(), "", s)));
            }
        }
        _ => {}
    }
}

/// [`braced`] from `outer`'s start (an `export` keeps its keyword).
fn braced_from(outer: Node<'_>, body: Option<Node<'_>>, text: &str) -> String {
    match body {
        Some(b) => format!("{} {{ ... }}", text[outer.start_byte()..b.start_byte()].trim_end()),
        None => clip(&text[outer.byte_range()], ""),
    }
}

fn container_from(outer: Node<'_>, body: Node<'_>, text: &str, member: &dyn Fn(Node<'_>) -> Option<String>) -> String {
    container(outer, body, text, member)
}

// ----- Go

fn go_item(node: Node<'_>, text: &str, out: &mut Vec<Def>) {
    let doc = || doc_above(node, text, false);
    match node.kind() {
        "function_declaration" => {
            if let Some(n) = name_of(node, text) {
                out.push(def(n, Kind::Function, node, with_doc(doc(), "", braced(node, node.child_by_field_name("body"), text))));
            }
        }
        "method_declaration" => {
            let Some(n) = name_of(node, text) else { return };
            let mut d = def(n, Kind::Method, node, with_doc(doc(), "", braced(node, node.child_by_field_name("body"), text)));
            d.container = node.child_by_field_name("receiver").and_then(|r| {
                let mut c = r.walk();
                let p = r.named_children(&mut c).find(|p| p.kind() == "parameter_declaration")?;
                p.child_by_field_name("type").map(|t| type_name(&text[t.byte_range()]))
            });
            out.push(d);
        }
        "type_declaration" | "const_declaration" | "var_declaration" => {
            let kind = if node.kind() == "type_declaration" { Kind::Type } else { Kind::Constant };
            let mut c = node.walk();
            let specs: Vec<Node<'_>> = node.named_children(&mut c).filter(|s| s.kind().ends_with("_spec") || s.kind() == "type_alias").collect();
            let single = specs.len() == 1;
            for spec in specs {
                let Some(n) = name_of(spec, text) else { continue };
                // One spec: the whole declaration (with its keyword); in a group: the spec with
                // the keyword put back.
                let s = if single {
                    clip(&text[node.byte_range()], "\t")
                } else {
                    let keyword = first_line(&text[node.byte_range()]).split_whitespace().next().unwrap_or("");
                    format!("{keyword} {}", clip(&text[spec.byte_range()], "\t"))
                };
                let at = if single { node } else { spec };
                let doc = if single { doc() } else { doc_above(spec, text, false) };
                out.push(def(n, kind, at, with_doc(doc, "", s)));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::by_path;

    fn defs(path: &str, src: &str) -> Vec<Def> {
        let spec = by_path(path).unwrap();
        extract(spec, &spec.parse(src), src)
    }

    #[test]
    fn python_functions_classes_constants() {
        let src = "import os\n\nLIMIT: int = 3\n\n@cache\ndef load(path: str, *, strict=False) -> dict:\n    \"\"\"Load a file.\n\n    More.\"\"\"\n    return {}\n\nclass Store(Base, mixins.Saved):\n    '''A store.'''\n    size: int = 0\n\n    def get(self, key: str) -> bytes:\n        \"\"\"Doc.\"\"\"\n        return b''\n\n    @property\n    def empty(self):\n        return True\n";
        let d = defs("m.py", src);
        let names: Vec<_> = d.iter().map(|d| (d.name.as_str(), d.kind, d.line)).collect();
        assert_eq!(names, [("LIMIT", Kind::Constant, 2), ("load", Kind::Function, 4), ("Store", Kind::Type, 11)]);
        assert_eq!(d[1].text, "@cache\ndef load(path: str, *, strict=False) -> dict:\n    \"\"\"Load a file.\"\"\"\n    ...");
        assert_eq!(
            d[2].text,
            "class Store(Base, mixins.Saved):\n    \"\"\"A store.\"\"\"\n    size: int = 0\n    def get(self, key: str) -> bytes: ...\n    @property\n    def empty(self): ..."
        );
        assert_eq!(d[2].bases, ["Base", "mixins.Saved"]);
    }

    #[test]
    fn rust_items_with_doc_lines() {
        let src = "//! Points.\n\n/// A point.\n/// More.\n#[derive(Debug)]\npub struct Point {\n    pub x: i32,\n}\n\n/// Makes one.\npub fn make(x: i32) -> Point {\n    Point { x }\n}\n\nimpl Point {\n    pub fn norm(&self) -> i32 {\n        self.x\n    }\n}\n\npub const ORIGIN: i32 = 0;\n";
        let d = defs("a.rs", src);
        let names: Vec<_> = d.iter().map(|d| (d.name.as_str(), d.kind)).collect();
        assert_eq!(names, [("Point", Kind::Type), ("make", Kind::Function), ("Point", Kind::Impl), ("ORIGIN", Kind::Constant)]);
        assert_eq!(d[0].text, "/// A point.\n#[derive(Debug)]\npub struct Point {\n    pub x: i32,\n}");
        assert_eq!(d[1].text, "/// Makes one.\npub fn make(x: i32) -> Point { ... }");
        assert_eq!(d[2].text, "impl Point {\n    pub fn norm(&self) -> i32 { ... }\n}");
    }

    #[test]
    fn javascript_and_typescript() {
        let src = "import { x } from './x';\n\n/**\n * Adds.\n */\nexport function add(a, b = 1) {\n  return a + b;\n}\n\nexport const twice = (n) => {\n  return n * 2;\n};\n\nexport class Cart extends Base {\n  items = [];\n  total(tax) {\n    return 0;\n  }\n}\n";
        let d = defs("a.js", src);
        let names: Vec<_> = d.iter().map(|d| (d.name.as_str(), d.kind)).collect();
        assert_eq!(names, [("add", Kind::Function), ("twice", Kind::Function), ("Cart", Kind::Type)]);
        assert_eq!(d[0].text, "/** Adds. */\nexport function add(a, b = 1) { ... }");
        assert_eq!(d[1].text, "export const twice = (n) => { ... }");
        assert_eq!(d[2].text, "export class Cart extends Base {\n  items = [];\n  total(tax) { ... }\n}");
        assert_eq!(d[2].bases, ["Base"]);
        let ts = "export interface Shape {\n  area(): number;\n}\nexport type Id = string;\nexport class Sq extends Base implements Shape {\n  constructor(private side: number) {}\n  area(): number { return 1; }\n}\n";
        let d = defs("a.ts", ts);
        let names: Vec<_> = d.iter().map(|d| (d.name.as_str(), d.kind)).collect();
        assert_eq!(names, [("Shape", Kind::Type), ("Id", Kind::Type), ("Sq", Kind::Type)]);
        assert_eq!(d[2].bases, ["Base"]);
        assert_eq!(d[2].text, "export class Sq extends Base implements Shape {\n  constructor(private side: number) { ... }\n  area(): number { ... }\n}");
    }

    #[test]
    fn go_functions_methods_types() {
        let src = "package store\n\n// Store keeps items.\ntype Store struct {\n\titems []string\n}\n\n// Add adds.\nfunc (s *Store) Add(item string) error {\n\treturn nil\n}\n\nfunc New() *Store {\n\treturn &Store{}\n}\n\nconst (\n\tA = 1\n\tB = 2\n)\n";
        let d = defs("s.go", src);
        let names: Vec<_> = d.iter().map(|d| (d.name.as_str(), d.kind, d.container.as_deref())).collect();
        assert_eq!(names, [("Store", Kind::Type, None), ("Add", Kind::Method, Some("Store")), ("New", Kind::Function, None), ("A", Kind::Constant, None), ("B", Kind::Constant, None)]);
        assert_eq!(d[0].text, "// Store keeps items.\ntype Store struct {\n\titems []string\n}");
        assert_eq!(d[1].text, "// Add adds.\nfunc (s *Store) Add(item string) error { ... }");
        assert_eq!(d[3].text, "const A = 1");
    }
}
