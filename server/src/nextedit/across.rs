//! Renames across files: a module-level function, class or constant renamed at its definition
//! → its uses in the other files the workspace index knows. The index names the files whose
//! imports mention the name or its module; in each, the imports resolved to the defining file
//! say what follows: `from m import old` (the import and the file's uses of `old`, or the
//! function's where the import is in a function), `from m import old as x` (the import's name
//! only: the alias stays), `import m` / `import pkg.m` / `from pkg import m` (each `m.old`). A
//! file that imports `old` under its own name at its top level re-exports it (`from .m import
//! old` in a package's `__init__.py`; its `__all__` strings follow), so the files importing it
//! from there follow too, up to [`MAX_DEPTH`] re-exports away. Deterministic, like the rename
//! in the file.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};

use tree_sitter::Node;

use super::rename::uses;
use super::{Kind, Proposal, Renamed};
use crate::workspace::{text_hash, Index};

/// The edits of one other file: bytes of `text` (its text as read) and the version of the
/// open document it was read from (`None`: read from the disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdits {
    pub path: PathBuf,
    pub version: Option<i32>,
    pub text: String,
    pub edits: Vec<Proposal>,
}

/// Files looked at for one rename at most (the index's candidates, by path).
pub const MAX_FILES: usize = 200;

/// Re-exports followed at most (`pkg/__init__.py` re-exporting `pkg/m.py`'s name is one).
pub const MAX_DEPTH: usize = 3;

/// The edits in other files after `renamed` at its definition in `path`. `read` gives a file's
/// text as the editor has it: an open document's with its version, else the disk's (`None`
/// version), which is used only while it is the text the index read; files `read` cannot
/// give (excluded ones among them) are skipped.
pub fn plan(index: &Index, path: &Path, renamed: &Renamed, read: &dyn Fn(&Path) -> Option<(String, Option<i32>)>) -> Vec<FileEdits> {
    let Some(spec) = crate::syntax::by_language_id("python") else { return Vec::new() };
    let path = &crate::workspace::canonical(path);
    // Per file: its text, version and the byte ranges to rename.
    let mut found: BTreeMap<PathBuf, (String, Option<i32>, Vec<Range<usize>>)> = BTreeMap::new();
    let mut skipped: HashSet<PathBuf> = HashSet::new();
    // The files the name is exported from: the definition's, then those re-exporting it.
    let mut sources = VecDeque::from([(path.to_path_buf(), 0)]);
    let mut seen: HashSet<PathBuf> = HashSet::from([path.to_path_buf()]);
    let mut looked = 0;
    while let Some((source, depth)) = sources.pop_front() {
        for (file, hash) in index.importers(&source, &renamed.old) {
            if file == *path || skipped.contains(&file) {
                continue;
            }
            if looked == MAX_FILES {
                break;
            }
            looked += 1;
            let (text, version) = match found.get(&file) {
                Some((text, version, _)) => (text.clone(), *version),
                None => match read(&file) {
                    Some(read) => read,
                    None => continue,
                },
            };
            if version.is_none() && text_hash(&text) != hash {
                tracing::debug!(path = %file.display(), "next edit: a file changed on disk since it was indexed, not renamed in");
                skipped.insert(file);
                continue;
            }
            let tree = spec.parse(&text);
            let how = index.imports_of(&file, &text, &tree, spec, &source, &renamed.old);
            if how.is_empty() {
                continue;
            }
            let Some(ranges) = ranges(tree.root_node(), &text, &how, renamed) else {
                tracing::debug!(path = %file.display(), "next edit: the new name is taken in an importing file, not renamed in");
                skipped.insert(file.clone());
                found.remove(&file);
                continue;
            };
            // Imported under its own name at the top: whoever imports it from here gets it.
            if !how.locals.is_empty() && depth < MAX_DEPTH && seen.insert(file.clone()) {
                sources.push_back((file.clone(), depth + 1));
            }
            found.entry(file).or_insert((text, version, Vec::new())).2.extend(ranges);
        }
    }
    found
        .into_iter()
        .filter_map(|(path, (text, version, mut ranges))| {
            ranges.sort_by_key(|r| (r.start, r.end));
            ranges.dedup();
            let edits: Vec<Proposal> = ranges.into_iter().filter(|r| text[r.clone()] == renamed.old).map(|range| Proposal { range, new_text: renamed.new.clone(), kind: Kind::Rename }).collect();
            (!edits.is_empty()).then_some(FileEdits { path, version, text, edits })
        })
        .collect()
}

/// The bytes to rename in one importing file (`root`, `text`) that imports the definition as
/// `how` says; `None` where the new name is bound there already (two names would become one).
fn ranges(root: Node<'_>, text: &str, how: &crate::workspace::Imports, renamed: &Renamed) -> Option<Vec<Range<usize>>> {
    let mut out: Vec<Range<usize>> = how.names.clone();
    let mut taken = false;
    let mut scopes: Vec<(Node<'_>, &[String], &[String])> = Vec::new();
    if !how.locals.is_empty() || !how.modules.is_empty() {
        scopes.push((root, &how.locals, &how.modules));
    }
    for s in &how.scoped {
        if let Some(f) = root.descendant_for_byte_range(s.range.start, s.range.end).filter(|f| f.byte_range() == s.range) {
            scopes.push((f, &s.locals, &s.modules));
        }
    }
    for (scope, locals, modules) in scopes {
        for local in locals {
            // The import's own names are `how.names`: a module path's parts are not uses.
            uses(scope, scope, local, text, &mut |n: Node<'_>| {
                if !in_import(n) {
                    out.push(n.byte_range());
                }
            });
            uses(scope, scope, &renamed.new, text, &mut |_| taken = true);
        }
        for module in modules {
            attributes(scope, module, &renamed.old, text, &mut out);
        }
    }
    // Where a name is renamed, the new one already used in the file (every function sees the
    // top level's names).
    if !how.locals.is_empty() || how.scoped.iter().any(|s| !s.locals.is_empty()) {
        uses(root, root, &renamed.new, text, &mut |_| taken = true);
    }
    if taken {
        return None;
    }
    if !how.locals.is_empty() {
        out.extend(all_strings(root, text, &renamed.old));
    }
    Some(out)
}

/// The contents of the strings equal to `name` in the file's `__all__ = […]` (or `+=`).
fn all_strings(root: Node<'_>, text: &str, name: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut c = root.walk();
    for stmt in root.named_children(&mut c) {
        let Some(e) = stmt.named_child(0).filter(|_| stmt.kind() == "expression_statement") else { continue };
        let is_all = matches!(e.kind(), "assignment" | "augmented_assignment") && e.child_by_field_name("left").is_some_and(|l| &text[l.byte_range()] == "__all__");
        let Some(value) = e.child_by_field_name("right").filter(|_| is_all) else { continue };
        let mut stack = vec![value];
        while let Some(n) = stack.pop() {
            if n.kind() == "string_content" && &text[n.byte_range()] == name {
                out.push(n.byte_range());
            }
            let mut c = n.walk();
            stack.extend(n.named_children(&mut c));
        }
    }
    out
}

/// The `name` of each `module.name` in `root` (`module` as written: `m`, `pkg.m`).
fn attributes(root: Node<'_>, module: &str, name: &str, text: &str, out: &mut Vec<std::ops::Range<usize>>) {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind() == "attribute" {
            let (Some(object), Some(attr)) = (n.child_by_field_name("object"), n.child_by_field_name("attribute")) else { continue };
            if &text[attr.byte_range()] == name && squash(&text[object.byte_range()]) == module {
                out.push(attr.byte_range());
            }
        }
        let mut c = n.walk();
        stack.extend(n.children(&mut c));
    }
}

fn in_import(node: Node<'_>) -> bool {
    let mut up = node.parent();
    while let Some(n) = up {
        if matches!(n.kind(), "import_statement" | "import_from_statement") {
            return true;
        }
        up = n.parent();
    }
    false
}

/// `pkg . m` as `pkg.m`.
fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nextedit::fixture::apply;
    use crate::workspace::scratch;

    const GEO: &str = "def area(w, h):\n    return w * h\n";
    const USER: &str = "from pkg.geo import area\nfrom pkg.geo import area as surface\n\n\ndef f(area):\n    return area\n\nx = area(1, 2) + surface(3, 4)\n";
    const MODULE: &str = "import pkg.geo\nfrom pkg import geo as g\nfrom pkg import geo\n\ny = pkg.geo.area(1, 2) + g.area(3, 4) + geo.area(5, 6) + other.area(7, 8)\n";

    fn files() -> Vec<(&'static str, &'static str)> {
        vec![("pkg/__init__.py", ""), ("pkg/geo.py", GEO), ("user.py", USER), ("module.py", MODULE), ("unrelated.py", "from elsewhere import area\n\narea(1)\n")]
    }

    fn disk(p: &Path) -> Option<(String, Option<i32>)> {
        std::fs::read_to_string(p).ok().map(|t| (t, None))
    }

    fn renamed() -> Renamed {
        Renamed { old: "area".into(), new: "surface_area".into() }
    }

    #[test]
    fn uses_in_the_importing_files_follow_and_an_alias_keeps_its_name() {
        let (root, index) = scratch("across", &files());
        let found = plan(&index, &root.join("pkg/geo.py"), &renamed(), &disk);
        let by_name: Vec<(String, String)> = found.iter().map(|f| (f.path.file_name().unwrap().to_string_lossy().into_owned(), apply(&f.text, &f.edits))).collect();
        assert_eq!(by_name.len(), 2, "unrelated.py imports another `area`: {by_name:?}");
        assert_eq!(by_name[0], ("module.py".into(), MODULE.replace("geo.area(", "geo.surface_area(").replace("g.area(", "g.surface_area(")));
        let user = "from pkg.geo import surface_area\nfrom pkg.geo import surface_area as surface\n\n\ndef f(area):\n    return area\n\nx = surface_area(1, 2) + surface(3, 4)\n";
        assert_eq!(by_name[1], ("user.py".into(), user.into()));
        assert!(found.iter().all(|f| f.version.is_none()));
    }

    #[test]
    fn an_open_document_is_read_with_its_version_and_a_changed_disk_is_skipped() {
        let (root, index) = scratch("across-open", &files());
        let user = root.join("user.py");
        // The disk changed after the index read it: not the file the index knows.
        std::fs::write(&user, format!("{USER}\nz = area(0, 0)\n")).unwrap();
        let found = plan(&index, &root.join("pkg/geo.py"), &renamed(), &disk);
        assert!(found.iter().all(|f| !f.path.ends_with("user.py")), "{found:?}");
        // Open in the editor: its text and version, whatever the disk holds.
        let open = |p: &Path| if p.ends_with("user.py") { Some((USER.to_owned(), Some(7))) } else { disk(p) };
        let found = plan(&index, &root.join("pkg/geo.py"), &renamed(), &open);
        let user = found.iter().find(|f| f.path.ends_with("user.py")).expect("the open document");
        assert_eq!((user.version, user.edits.len()), (Some(7), 3));
        // What `read` refuses (an excluded file) is skipped.
        let none = plan(&index, &root.join("pkg/geo.py"), &renamed(), &|_| None);
        assert!(none.is_empty());
    }

    #[test]
    fn re_exports_are_followed_and_their_all_strings_renamed() {
        let init = "from .geo import area\n\n__all__ = [\"area\", \"other\"]\n";
        let files = [
            ("pkg/__init__.py", init),
            ("pkg/geo.py", GEO),
            // Imports it from the package, which re-exports it.
            ("app.py", "from pkg import area\nimport pkg\n\nx = area(1, 2) + pkg.area(3, 4)\n"),
            // Two re-exports away.
            ("lib/__init__.py", "from pkg import area\n"),
            ("client.py", "from lib import area\n\narea(0, 0)\n"),
            // Re-exported under another name: what imports that name keeps it.
            ("other/__init__.py", "from pkg.geo import area as region\n"),
            ("far.py", "from other import region\n\nregion(5, 6)\n"),
        ];
        let (root, index) = scratch("across-reexport", &files);
        let found = plan(&index, &root.join("pkg/geo.py"), &renamed(), &disk);
        let got: Vec<(String, String)> = found.iter().map(|f| (f.path.strip_prefix(crate::workspace::canonical(&root)).unwrap().to_string_lossy().into_owned(), apply(&f.text, &f.edits))).collect();
        let want = [
            ("app.py", "from pkg import surface_area\nimport pkg\n\nx = surface_area(1, 2) + pkg.surface_area(3, 4)\n"),
            ("client.py", "from lib import surface_area\n\nsurface_area(0, 0)\n"),
            ("lib/__init__.py", "from pkg import surface_area\n"),
            ("other/__init__.py", "from pkg.geo import surface_area as region\n"),
            ("pkg/__init__.py", "from .geo import surface_area\n\n__all__ = [\"surface_area\", \"other\"]\n"),
        ];
        let want: Vec<(String, String)> = want.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn an_import_inside_a_function_renames_in_that_function() {
        let late = "def f():\n    from pkg.geo import area\n    return area(1, 2)\n\n\ndef g(area):\n    return area\n\n\nclass K:\n    def m(self):\n        import pkg.geo\n        return pkg.geo.area(3, 4)\n\n    def n(self):\n        return area\n";
        let taken = "def f():\n    from pkg.geo import area\n    surface_area = 1\n    return area(surface_area)\n";
        let (root, index) = scratch("across-nested", &[("pkg/__init__.py", ""), ("pkg/geo.py", GEO), ("late.py", late), ("taken.py", taken)]);
        let found = plan(&index, &root.join("pkg/geo.py"), &renamed(), &disk);
        assert_eq!(found.len(), 1, "taken.py binds the new name in the function: {found:?}");
        assert!(found[0].path.ends_with("late.py"));
        let want = late.replacen("import area\n    return area(", "import surface_area\n    return surface_area(", 1).replace("pkg.geo.area(", "pkg.geo.surface_area(");
        assert_eq!(apply(&found[0].text, &found[0].edits), want, "g's parameter and n's free name are not the import's");
    }

    #[test]
    fn a_new_name_taken_in_an_importing_file_leaves_it() {
        let taken = "from pkg.geo import area\n\nsurface_area = 3\nx = area(1, 2)\n";
        let (root, index) = scratch("across-taken", &[("pkg/__init__.py", ""), ("pkg/geo.py", GEO), ("t.py", taken)]);
        assert!(plan(&index, &root.join("pkg/geo.py"), &renamed(), &disk).is_empty());
    }
}
