//! Where a Python file's module-level definition is imported by the other indexed files: the
//! files whose imports mention its name or its module (from the index, without reading every
//! file), and in one such file, the import names and the local names that stand for the
//! definition or its module once the file's imports are resolved to indexed files.

use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::path::{Path, PathBuf};

use tree_sitter::{Node, Tree};

use super::imports::{self, Binding};
use super::index::{canonical, python_module, Index};
use crate::syntax::Spec;

/// A text's hash as the index keeps it for each file (same text, same hash, in one process).
pub fn text_hash(text: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The identifiers in a Python file's imports (at the top level, under `if`/`try`, and in
/// functions' bodies), each once.
pub(super) fn imported_names(tree: &Tree, text: &str) -> Vec<String> {
    fn visit(node: Node<'_>, text: &str, out: &mut Vec<String>) {
        match node.kind() {
            "import_statement" | "import_from_statement" => {
                let mut stack = vec![node];
                while let Some(n) = stack.pop() {
                    if n.kind() == "identifier" {
                        out.push(text[n.byte_range()].to_owned());
                    }
                    let mut c = n.walk();
                    stack.extend(n.named_children(&mut c));
                }
            }
            "module" | "if_statement" | "try_statement" | "block" | "else_clause" | "elif_clause" | "except_clause" | "finally_clause" | "function_definition" | "class_definition" | "decorated_definition" | "with_statement" | "for_statement" | "while_statement" => {
                let mut c = node.walk();
                let children: Vec<Node<'_>> = node.named_children(&mut c).collect();
                for child in children {
                    visit(child, text, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    visit(tree.root_node(), text, &mut out);
    out.sort_unstable();
    out.dedup();
    out
}

/// How one file imports a definition: `from m import name` and `from m import name as x`
/// (the bytes of `name` in each), the local names bound to the definition under its own name
/// (its uses in the file are the definition's), and the local names of its module (`m` in
/// `import m`, `pkg.m` in `import pkg.m`, `x` in `from pkg import m as x`), whose `.name` are
/// the definition's. `names` also holds the names of imports inside functions, whose locals
/// and modules are the function's own (`scoped`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imports {
    pub names: Vec<Range<usize>>,
    pub locals: Vec<String>,
    pub modules: Vec<String>,
    pub scoped: Vec<Scoped>,
}

/// What the imports in one function's body bind to the definition or its module: the names
/// stand for it in that function (`range`: the `function_definition`'s bytes), nested
/// functions that bind them again aside.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scoped {
    pub range: Range<usize>,
    pub locals: Vec<String>,
    pub modules: Vec<String>,
}

impl Imports {
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.locals.is_empty() && self.modules.is_empty() && self.scoped.is_empty()
    }
}

impl Index {
    /// The indexed Python files other than `path` that may use `name` defined there: those
    /// whose imports mention `name` or `path`'s module; each with the hash of the text the
    /// index read. By path.
    pub fn importers(&self, path: &Path, name: &str) -> Vec<(PathBuf, u64)> {
        let path = canonical(path);
        let state = self.read();
        let Some(id) = state.id(&path) else { return Vec::new() };
        let module = python_module(state.file(id)).map(str::to_owned);
        let mut out: Vec<(PathBuf, u64)> = state
            .entries()
            .filter(|(i, f)| *i != id && f.lang == "python")
            .filter(|(_, f)| f.imported.iter().any(|n| n == name || module.as_deref() == Some(n.as_str())))
            .map(|(_, f)| (f.path.clone(), f.hash))
            .collect();
        out.sort();
        out
    }

    /// How the Python file `path` (its text now and tree) imports `name` defined in
    /// `def_path`, through its imports resolved to indexed files.
    pub fn imports_of(&self, path: &Path, text: &str, tree: &Tree, spec: &'static Spec, def_path: &Path, name: &str) -> Imports {
        let mut out = Imports::default();
        if spec.name != "python" {
            return out;
        }
        let state = self.read();
        let Some(def) = state.id(&canonical(def_path)) else { return out };
        let path = canonical(path);
        let b = imports::bindings(&state, spec, tree, text, &path);
        out.modules = modules_of(&b, def);
        let mut stack = vec![tree.root_node()];
        while let Some(n) = stack.pop() {
            if n.kind() == "import_from_statement" {
                from_names(n, text, name, &b, def, &mut out.names, &mut out.locals);
                continue;
            }
            let mut c = n.walk();
            stack.extend(n.named_children(&mut c).filter(|c| !matches!(c.kind(), "function_definition" | "class_definition" | "expression_statement")));
        }
        // Imports inside functions: each function's own (not its nested functions').
        let mut defs = Vec::new();
        functions(tree.root_node(), &mut defs);
        for f in defs {
            let Some(body) = f.child_by_field_name("body") else { continue };
            let mut statements = Vec::new();
            own_imports(body, &mut statements);
            let mut scoped = Scoped { range: f.byte_range(), ..Default::default() };
            for stmt in statements {
                let b = imports::python_statement(&state, stmt, text, &path);
                scoped.modules.extend(modules_of(&b, def));
                if stmt.kind() == "import_from_statement" {
                    from_names(stmt, text, name, &b, def, &mut out.names, &mut scoped.locals);
                }
            }
            if !scoped.locals.is_empty() || !scoped.modules.is_empty() {
                scoped.modules.sort();
                scoped.modules.dedup();
                out.scoped.push(scoped);
            }
        }
        out.names.sort_by_key(|r| r.start);
        out.names.dedup();
        out
    }
}

/// The local names `b` binds to the module file `def`, sorted.
fn modules_of(b: &imports::Bindings, def: u32) -> Vec<String> {
    let mut out: Vec<String> = b.names.iter().filter(|(_, binding)| matches!(binding, Binding::Module { files, .. } if files.contains(&def))).map(|(local, _)| local.clone()).collect();
    out.sort();
    out
}

/// In the `from … import …` statement `stmt`: the bytes of each imported `name` that `b`
/// resolves to the item in `def` (into `names`), and the local names that keep its name (into
/// `locals`).
fn from_names(stmt: Node<'_>, text: &str, name: &str, b: &imports::Bindings, def: u32, names: &mut Vec<Range<usize>>, locals: &mut Vec<String>) {
    let mut c = stmt.walk();
    for imported in stmt.children_by_field_name("name", &mut c) {
        let (orig, local) = match imported.kind() {
            "aliased_import" => match (imported.child_by_field_name("name"), imported.child_by_field_name("alias")) {
                (Some(o), Some(a)) => (o, &text[a.byte_range()]),
                _ => continue,
            },
            _ => (imported, &text[imported.byte_range()]),
        };
        let here = matches!(b.names.get(local), Some(Binding::Item { files, name: n }) if n == name && files.contains(&def));
        if &text[orig.byte_range()] == name && here {
            names.push(orig.byte_range());
            if local == name && !locals.iter().any(|l| l == local) {
                locals.push(local.to_owned());
            }
        }
    }
}

/// Every `function_definition` under `node`: at the top level, methods, nested functions.
fn functions<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    let mut c = node.walk();
    let children: Vec<Node<'t>> = node.named_children(&mut c).collect();
    for child in children {
        if child.kind() == "function_definition" {
            out.push(child);
        }
        functions(child, out);
    }
}

/// The import statements of a function's `body`, not those of functions or classes in it.
fn own_imports<'t>(body: Node<'t>, out: &mut Vec<Node<'t>>) {
    let mut c = body.walk();
    let children: Vec<Node<'t>> = body.named_children(&mut c).collect();
    for child in children {
        match child.kind() {
            "import_statement" | "import_from_statement" => out.push(child),
            "function_definition" | "class_definition" | "decorated_definition" => {}
            _ => own_imports(child, out),
        }
    }
}

/// Test helper: `files` (relative path, text) written under a fresh folder named after
/// `name` (removed when its guard is dropped), and the index built over it.
#[cfg(test)]
pub(crate) fn scratch(name: &str, files: &[(&str, &str)]) -> (crate::testing::TempDir, Index) {
    let root = crate::testing::TempDir::new(&format!("uses-{name}"));
    for (rel, text) in files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("a file's folder")).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let index = Index::new(super::IndexOptions { roots: vec![root.to_path_buf()], ..Default::default() });
    index.build(&|_, _| {});
    (root, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn importers_and_how_they_import() {
        let a = "from pkg.geo import area\nfrom pkg.geo import area as surface\nimport pkg.geo\nfrom pkg import geo as g\n\nx = area(1, 2) + pkg.geo.area(3, 4) + g.area(5, 6)\n";
        let files = [("pkg/__init__.py", ""), ("pkg/geo.py", "def area(w, h):\n    return w * h\n"), ("a.py", a), ("b.py", "from other import area\n"), ("c.py", "import os\n")];
        let (root, index) = scratch("importers", &files);
        let found: Vec<String> = index.importers(&root.join("pkg/geo.py"), "area").into_iter().map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(found, ["a.py", "b.py"], "c.py imports neither the name nor the module");
        assert_eq!(index.importers(&root.join("pkg/geo.py"), "area")[0].1, text_hash(a));
        let spec = crate::syntax::by_language_id("python").unwrap();
        let tree = spec.parse(a);
        let how = index.imports_of(&root.join("a.py"), a, &tree, spec, &root.join("pkg/geo.py"), "area");
        let names: Vec<&str> = how.names.iter().map(|r| &a[r.clone()]).collect();
        assert_eq!((names, how.names.len()), (vec!["area", "area"], 2));
        assert_eq!(how.locals, ["area"], "`surface` keeps its name");
        assert_eq!(how.modules, ["g", "pkg.geo"]);
        let b = "from other import area\n";
        let none = index.imports_of(&root.join("b.py"), b, &spec.parse(b), spec, &root.join("pkg/geo.py"), "area");
        assert!(none.is_empty(), "another module's `area`: {none:?}");
    }
}
