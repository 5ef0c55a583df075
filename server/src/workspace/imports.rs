//! A file's imports, resolved to indexed files: which local name stands for which module
//! (files) or which item of a module, per language (Python, JS/TS, Go, Rust).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tree_sitter::{Node, Tree};

use super::index::{normalize, State};
use crate::syntax::Spec;

/// What a local name stands for.
#[derive(Debug, Clone)]
pub enum Binding {
    /// A module: its files (a Go package has several). `segs`: a Rust module's path from the
    /// crate root.
    Module { files: Vec<u32>, segs: Vec<String> },
    /// An item `name` defined (or re-exported) by a module's files.
    Item { files: Vec<u32>, name: String },
    /// Imported from outside the workspace.
    External,
}

/// The names a file's imports bind, and where else its bare names come from.
#[derive(Debug, Default)]
pub struct Bindings {
    pub names: HashMap<String, Binding>,
    /// Modules imported whole (`from m import *`, `use m::*`, Go's `import . "p"`).
    pub globs: Vec<Vec<u32>>,
    /// Go: the other files of the file's package (its folder).
    pub same_package: Vec<u32>,
    rust: Option<RustCrate>,
}

/// Where a Rust file sits: its crate's `src` folder and its module path.
#[derive(Debug)]
struct RustCrate {
    src: PathBuf,
    module: Vec<String>,
}

/// The bindings of the file `path` (normalized) with tree `tree`.
pub fn bindings(state: &State, spec: &Spec, tree: &Tree, text: &str, path: &Path) -> Bindings {
    let mut b = Bindings::default();
    let dir = path.parent().unwrap_or(Path::new("/"));
    let root = tree.root_node();
    let mut cursor = root.walk();
    let top: Vec<Node<'_>> = root.named_children(&mut cursor).collect();
    match spec.name {
        "python" => top.iter().for_each(|n| python(state, *n, text, dir, &mut b)),
        "javascript" | "typescript" | "tsx" => top.iter().for_each(|n| js(state, *n, text, dir, &mut b)),
        "go" => go(state, &top, text, path, &mut b),
        "rust" => {
            b.rust = rust_crate(state, path);
            top.iter().for_each(|n| rust(state, *n, text, &mut b));
        }
        _ => {}
    }
    b
}

/// The names one Python import statement binds, as if it were at the top of the file `path`
/// (an import inside a function binds them in the function).
pub fn python_statement(state: &State, stmt: Node<'_>, text: &str, path: &Path) -> Bindings {
    let mut b = Bindings::default();
    python(state, stmt, text, path.parent().unwrap_or(Path::new("/")), &mut b);
    b
}

/// The files of the module a qualifier (`m`, `pkg.m`, `crate::a`, `super::b`) names.
pub fn module_of(state: &State, b: &Bindings, qualifier: &str) -> Option<Vec<u32>> {
    if let Some(Binding::Module { files, .. }) = b.names.get(qualifier) {
        return (!files.is_empty()).then(|| files.clone());
    }
    let ctx = b.rust.as_ref()?;
    let segs: Vec<String> = qualifier.split("::").map(str::to_owned).collect();
    let segs = rust_path(state, b, ctx, segs)?;
    let files = rust_mod_file(state, &ctx.src, &segs);
    (!files.is_empty()).then_some(files)
}

fn unquote(s: &str) -> &str {
    s.trim_matches(|c| c == '"' || c == '\'' || c == '`')
}

// ----- Python

fn python(state: &State, node: Node<'_>, text: &str, dir: &Path, b: &mut Bindings) {
    let t = |n: Node<'_>| text[n.byte_range()].to_owned();
    match node.kind() {
        "import_statement" => {
            let mut c = node.walk();
            for name in node.children_by_field_name("name", &mut c) {
                let Some((dotted, local)) = imported(name, text) else { continue };
                let comps: Vec<&str> = dotted.split('.').collect();
                let files = py_absolute(state, &comps);
                b.names.insert(local, module(files));
            }
        }
        "import_from_statement" => {
            let Some(m) = node.child_by_field_name("module_name") else { return };
            let (anchor, comps): (Option<PathBuf>, Vec<String>) = if m.kind() == "relative_import" {
                let raw = t(m);
                let dots = raw.chars().take_while(|&c| c == '.').count();
                let mut base = dir.to_path_buf();
                for _ in 1..dots {
                    base.pop();
                }
                let rest = raw[dots..].trim();
                (Some(base), rest.split('.').filter(|s| !s.is_empty()).map(str::to_owned).collect())
            } else {
                (None, t(m).split('.').map(str::to_owned).collect())
            };
            let resolve = |comps: &[String]| -> Vec<u32> {
                let comps: Vec<&str> = comps.iter().map(String::as_str).collect();
                match &anchor {
                    Some(base) => py_relative(state, base, &comps),
                    None => py_absolute(state, &comps),
                }
            };
            let files = resolve(&comps);
            let mut c = node.walk();
            if node.named_children(&mut c).any(|n| n.kind() == "wildcard_import") {
                b.globs.push(files.clone());
            }
            let mut c = node.walk();
            for name in node.children_by_field_name("name", &mut c) {
                let Some((orig, local)) = imported(name, text) else { continue };
                let mut sub = comps.clone();
                sub.push(orig.clone());
                let sub_files = resolve(&sub);
                let binding = if !sub_files.is_empty() {
                    module(sub_files)
                } else if !files.is_empty() {
                    Binding::Item { files: files.clone(), name: orig }
                } else {
                    Binding::External
                };
                b.names.insert(local, binding);
            }
        }
        // Imports under `if TYPE_CHECKING:`, `try:` … `except ImportError:`.
        "if_statement" | "try_statement" | "block" | "else_clause" | "elif_clause" | "except_clause" | "finally_clause" => {
            let mut c = node.walk();
            let children: Vec<Node<'_>> = node.named_children(&mut c).collect();
            for child in children {
                python(state, child, text, dir, b);
            }
        }
        _ => {}
    }
}

/// A Python import's name and the local name it binds (`a.b as c`: `a.b`, `c`).
fn imported(name: Node<'_>, text: &str) -> Option<(String, String)> {
    let t = |n: Node<'_>| text[n.byte_range()].to_owned();
    match name.kind() {
        "aliased_import" => Some((t(name.child_by_field_name("name")?), t(name.child_by_field_name("alias")?))),
        _ => Some((t(name), t(name))),
    }
}

fn module(files: Vec<u32>) -> Binding {
    if files.is_empty() {
        Binding::External
    } else {
        Binding::Module { files, segs: Vec::new() }
    }
}

/// `a.b` → the indexed `a/b.py` (or `.pyi`, or `a/b/__init__.py`) nearest a root, from any
/// folder (projects keep their packages under `src/` and the like).
fn py_absolute(state: &State, comps: &[&str]) -> Vec<u32> {
    if comps.is_empty() || comps.iter().any(|c| c.is_empty()) {
        return Vec::new();
    }
    let base = comps.join("/");
    let candidates = [format!("{base}.py"), format!("{base}.pyi"), format!("{base}/__init__.py"), format!("{base}/__init__.pyi")];
    let last = comps[comps.len() - 1];
    let hit = state
        .modules_named(last)
        .iter()
        .map(|&id| (id, state.file(id)))
        .filter(|(_, f)| candidates.iter().any(|c| f.rel == *c || (f.rel.ends_with(c.as_str()) && f.rel[..f.rel.len() - c.len()].ends_with('/'))))
        .min_by(|a, b| (a.1.rel.len(), &a.1.rel).cmp(&(b.1.rel.len(), &b.1.rel)));
    hit.map(|(id, _)| id).into_iter().collect()
}

/// `comps` under the folder `base`: `base/a/b.py`, `base/a/b/__init__.py`; none: `base/__init__.py`.
fn py_relative(state: &State, base: &Path, comps: &[&str]) -> Vec<u32> {
    let mut p = base.to_path_buf();
    for c in comps {
        p.push(c);
    }
    let candidates: Vec<PathBuf> = if comps.is_empty() {
        vec![p.join("__init__.py"), p.join("__init__.pyi")]
    } else {
        vec![p.with_extension("py"), p.with_extension("pyi"), p.join("__init__.py"), p.join("__init__.pyi")]
    };
    candidates.iter().find_map(|c| state.id(c)).into_iter().collect()
}

// ----- JavaScript, TypeScript

fn js(state: &State, node: Node<'_>, text: &str, dir: &Path, b: &mut Bindings) {
    let t = |n: Node<'_>| text[n.byte_range()].to_owned();
    match node.kind() {
        "import_statement" => {
            let Some(source) = node.child_by_field_name("source") else { return };
            let source = t(source);
            let files = js_files(state, dir, unquote(&source));
            // A path alias of the project's own (`@/components/x`, `~/lib`): not resolved here,
            // its names fall back to the ones defined once in the workspace.
            let alias = ["@/", "~/", "#"].iter().any(|p| unquote(&source).starts_with(p));
            let item = |files: &[u32], name: &str| {
                if alias {
                    Binding::Item { files: files.to_vec(), name: name.to_owned() }
                } else {
                    item(files, name)
                }
            };
            let mut c = node.walk();
            let Some(clause) = node.named_children(&mut c).find(|n| n.kind() == "import_clause") else { return };
            let mut c = clause.walk();
            for part in clause.named_children(&mut c) {
                match part.kind() {
                    "identifier" => {
                        b.names.insert(t(part), item(&files, "default"));
                    }
                    "namespace_import" => {
                        let mut c = part.walk();
                        let id = part.named_children(&mut c).find(|n| n.kind() == "identifier");
                        if let Some(id) = id {
                            b.names.insert(t(id), module(files.clone()));
                        }
                    }
                    "named_imports" => {
                        let mut c = part.walk();
                        for spec in part.named_children(&mut c).filter(|n| n.kind() == "import_specifier") {
                            let Some(name) = spec.child_by_field_name("name") else { continue };
                            let local = spec.child_by_field_name("alias").unwrap_or(name);
                            b.names.insert(t(local), item(&files, &unquote(&t(name))));
                        }
                    }
                    _ => {}
                }
            }
        }
        "lexical_declaration" | "variable_declaration" => {
            let mut c = node.walk();
            for decl in node.named_children(&mut c).filter(|d| d.kind() == "variable_declarator") {
                let (Some(name), Some(value)) = (decl.child_by_field_name("name"), decl.child_by_field_name("value")) else { continue };
                // `require('./m')`
                if value.kind() != "call_expression" || value.child_by_field_name("function").is_none_or(|f| &text[f.byte_range()] != "require") {
                    continue;
                }
                let Some(arg) = value.child_by_field_name("arguments").and_then(|a| a.named_child(0)).filter(|a| a.kind() == "string") else { continue };
                let files = js_files(state, dir, unquote(&t(arg)));
                match name.kind() {
                    "identifier" => {
                        b.names.insert(t(name), module(files));
                    }
                    "object_pattern" => {
                        let mut c = name.walk();
                        for p in name.named_children(&mut c) {
                            match p.kind() {
                                "shorthand_property_identifier_pattern" => {
                                    b.names.insert(t(p), item(&files, &t(p)));
                                }
                                "pair_pattern" => {
                                    if let (Some(k), Some(v)) = (p.child_by_field_name("key"), p.child_by_field_name("value")) {
                                        b.names.insert(t(v), item(&files, &t(k)));
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

fn item(files: &[u32], name: &str) -> Binding {
    if files.is_empty() {
        Binding::External
    } else {
        Binding::Item { files: files.to_vec(), name: name.to_owned() }
    }
}

/// A relative specifier (`./m`, `../lib/x.js`) → the indexed file: as written, with a
/// JS/TS extension added (or `.js` read as `.ts`), or the folder's `index` file.
fn js_files(state: &State, dir: &Path, spec: &str) -> Vec<u32> {
    if !spec.starts_with('.') {
        return Vec::new();
    }
    let base = normalize(&dir.join(spec));
    const EXTS: &[&str] = &["ts", "tsx", "js", "jsx", "mjs", "cjs", "mts", "cts"];
    let mut candidates = vec![base.clone()];
    let s = base.to_string_lossy().into_owned();
    if let Some(stem) = s.strip_suffix(".js").or_else(|| s.strip_suffix(".jsx")).or_else(|| s.strip_suffix(".mjs")) {
        candidates.extend(["ts", "tsx", "mts"].iter().map(|e| PathBuf::from(format!("{stem}.{e}"))));
    }
    candidates.extend(EXTS.iter().map(|e| PathBuf::from(format!("{s}.{e}"))));
    candidates.extend(EXTS.iter().map(|e| base.join(format!("index.{e}"))));
    candidates.iter().find_map(|c| state.id(c)).into_iter().collect()
}

// ----- Go

fn go(state: &State, top: &[Node<'_>], text: &str, path: &Path, b: &mut Bindings) {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let is_test = path.to_string_lossy().ends_with("_test.go");
    let package = |d: &Path, with_tests: bool| -> Vec<u32> {
        let mut ids: Vec<(u32, &PathBuf)> = state
            .go_files_in(d)
            .iter()
            .map(|&id| (id, state.file(id)))
            .filter(|(_, f)| f.path != path && (with_tests || !f.rel.ends_with("_test.go")))
            .map(|(id, f)| (id, &f.path))
            .collect();
        ids.sort_by(|a, b| a.1.cmp(b.1));
        ids.into_iter().map(|(id, _)| id).collect()
    };
    b.same_package = package(dir, is_test);
    let go_mod = go_module(dir);
    for node in top.iter().filter(|n| n.kind() == "import_declaration") {
        let mut specs = Vec::new();
        let mut c = node.walk();
        for child in node.named_children(&mut c) {
            match child.kind() {
                "import_spec" => specs.push(child),
                "import_spec_list" => {
                    let mut c = child.walk();
                    specs.extend(child.named_children(&mut c).filter(|s| s.kind() == "import_spec"));
                }
                _ => {}
            }
        }
        for spec in specs {
            let Some(p) = spec.child_by_field_name("path") else { continue };
            let import = unquote(&text[p.byte_range()]).to_owned();
            let files = match &go_mod {
                Some((root, name)) if import == *name || import.starts_with(&format!("{name}/")) => {
                    package(&root.join(import[name.len()..].trim_start_matches('/')), false)
                }
                _ => Vec::new(),
            };
            let local = match spec.child_by_field_name("name") {
                Some(n) => text[n.byte_range()].to_owned(),
                None => import.rsplit('/').next().unwrap_or(&import).to_owned(),
            };
            match local.as_str() {
                "." => b.globs.push(files),
                "_" => {}
                _ => {
                    b.names.insert(local, module(files));
                }
            }
        }
    }
}

/// The nearest `go.mod` at or above `dir`: its folder and module path.
fn go_module(dir: &Path) -> Option<(PathBuf, String)> {
    for d in dir.ancestors() {
        if let Ok(text) = std::fs::read_to_string(d.join("go.mod")) {
            let name = text.lines().find_map(|l| l.trim().strip_prefix("module "))?.trim().trim_matches('"').to_owned();
            return Some((d.to_path_buf(), name));
        }
    }
    None
}

// ----- Rust

/// The crate `src` folder holding `path` (the nearest folder above it with an indexed
/// `lib.rs` or `main.rs`) and the file's module path under it.
fn rust_crate(state: &State, path: &Path) -> Option<RustCrate> {
    let src = path.ancestors().skip(1).find(|d| state.id(&d.join("lib.rs")).is_some() || state.id(&d.join("main.rs")).is_some())?;
    let rel = path.strip_prefix(src).ok()?;
    let mut module: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if let Some(last) = module.pop() {
        let stem = last.strip_suffix(".rs").unwrap_or(&last).to_owned();
        let root_file = module.is_empty() && (stem == "lib" || stem == "main");
        if stem != "mod" && !root_file {
            module.push(stem);
        }
    }
    Some(RustCrate { src: src.to_path_buf(), module })
}

/// The indexed file of the module `segs` (from the crate root): `src/a/b.rs` or
/// `src/a/b/mod.rs`; the crate root for none.
fn rust_mod_file(state: &State, src: &Path, segs: &[String]) -> Vec<u32> {
    if segs.is_empty() {
        return [src.join("lib.rs"), src.join("main.rs")].iter().find_map(|p| state.id(p)).into_iter().collect();
    }
    let mut p = src.to_path_buf();
    for s in segs {
        p.push(s);
    }
    [p.with_extension("rs"), p.join("mod.rs")].iter().find_map(|c| state.id(c)).into_iter().collect()
}

/// A path as written (`crate::a::b`, `super::x`, `m::y`) → from the crate root.
fn rust_path(state: &State, b: &Bindings, ctx: &RustCrate, segs: Vec<String>) -> Option<Vec<String>> {
    let first = segs.first()?.as_str();
    let mut rest = segs[1..].to_vec();
    let mut base = match first {
        "crate" => Vec::new(),
        "self" => ctx.module.clone(),
        "super" => {
            let mut m = ctx.module.clone();
            m.pop();
            while rest.first().is_some_and(|s| s == "super") {
                rest.remove(0);
                m.pop();
            }
            m
        }
        _ => match b.names.get(first) {
            Some(Binding::Module { segs, .. }) if !segs.is_empty() => segs.clone(),
            _ => {
                // A child module of this one, or of the crate root (edition 2018 paths).
                let mut child = ctx.module.clone();
                child.push(first.to_owned());
                if !rust_mod_file(state, &ctx.src, &child).is_empty() {
                    child
                } else if !rust_mod_file(state, &ctx.src, &[first.to_owned()]).is_empty() {
                    vec![first.to_owned()]
                } else {
                    return None;
                }
            }
        },
    };
    base.extend(rest);
    Some(base)
}

fn rust(state: &State, node: Node<'_>, text: &str, b: &mut Bindings) {
    let Some(ctx) = b.rust.take() else { return };
    match node.kind() {
        "mod_item" if node.child_by_field_name("body").is_none() => {
            if let Some(name) = node.child_by_field_name("name") {
                let name = text[name.byte_range()].to_owned();
                let mut segs = ctx.module.clone();
                segs.push(name.clone());
                let files = rust_mod_file(state, &ctx.src, &segs);
                if !files.is_empty() {
                    b.names.insert(name, Binding::Module { files, segs });
                }
            }
        }
        "use_declaration" => {
            if let Some(arg) = node.child_by_field_name("argument") {
                let mut uses = Vec::new();
                use_paths(arg, text, &[], &mut uses);
                for (path, alias, glob) in uses {
                    let Some(segs) = rust_path(state, b, &ctx, path) else { continue };
                    let files = rust_mod_file(state, &ctx.src, &segs);
                    if glob {
                        if !files.is_empty() {
                            b.globs.push(files);
                        }
                        continue;
                    }
                    let Some(last) = segs.last().cloned() else { continue };
                    let local = alias.unwrap_or_else(|| last.clone());
                    let binding = if !files.is_empty() {
                        Binding::Module { files, segs }
                    } else {
                        let parent = rust_mod_file(state, &ctx.src, &segs[..segs.len() - 1]);
                        item(&parent, &last)
                    };
                    b.names.insert(local, binding);
                }
            }
        }
        _ => {}
    }
    b.rust = Some(ctx);
}

/// The paths a `use` tree names: (segments, alias, glob).
fn use_paths(node: Node<'_>, text: &str, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>, bool)>) {
    let split = |n: Node<'_>| -> Vec<String> {
        let mut v = prefix.to_vec();
        v.extend(text[n.byte_range()].split("::").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()));
        v
    };
    match node.kind() {
        "identifier" | "scoped_identifier" | "crate" | "super" | "self" => {
            let mut segs = split(node);
            // `use a::b::{self}` names `b`.
            if segs.len() > 1 && segs.last().is_some_and(|s| s == "self") {
                segs.pop();
            }
            out.push((segs, None, false));
        }
        "use_as_clause" => {
            if let (Some(p), Some(a)) = (node.child_by_field_name("path"), node.child_by_field_name("alias")) {
                out.push((split(p), Some(text[a.byte_range()].to_owned()), false));
            }
        }
        "use_list" => {
            let mut c = node.walk();
            for child in node.named_children(&mut c) {
                use_paths(child, text, prefix, out);
            }
        }
        "scoped_use_list" => {
            let inner = node.child_by_field_name("path").map_or_else(|| prefix.to_vec(), split);
            if let Some(list) = node.child_by_field_name("list") {
                use_paths(list, text, &inner, out);
            }
        }
        "use_wildcard" => {
            let mut segs = prefix.to_vec();
            segs.extend(text[node.byte_range()].trim_end_matches('*').split("::").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()));
            out.push((segs, None, true));
        }
        _ => {}
    }
}
