//! Renames across files: a module-level function, class or constant renamed at its definition
//! → its uses in the other files the workspace index knows. The index names the files whose
//! imports mention the name or its module; in each, the imports resolved to the defining file
//! say what follows: `from m import old` (the import and the file's uses of `old`), `from m
//! import old as x` (the import's name only: the alias stays), `import m` / `import pkg.m` /
//! `from pkg import m` (each `m.old`). Deterministic, like the rename in the file.

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

/// The edits in other files after `renamed` at its definition in `path`. `read` gives a file's
/// text as the editor has it: an open document's with its version, else the disk's (`None`
/// version), which is used only while it is the text the index read; files `read` cannot
/// give (excluded ones among them) are skipped.
pub fn plan(index: &Index, path: &Path, renamed: &Renamed, read: &dyn Fn(&Path) -> Option<(String, Option<i32>)>) -> Vec<FileEdits> {
    let Some(spec) = crate::syntax::by_language_id("python") else { return Vec::new() };
    let mut out = Vec::new();
    for (file, hash) in index.importers(path, &renamed.old).into_iter().take(MAX_FILES) {
        let Some((text, version)) = read(&file) else { continue };
        if version.is_none() && text_hash(&text) != hash {
            tracing::debug!(path = %file.display(), "next edit: a file changed on disk since it was indexed, not renamed in");
            continue;
        }
        let tree = spec.parse(&text);
        let how = index.imports_of(&file, &text, &tree, spec, path, &renamed.old);
        if how.is_empty() {
            continue;
        }
        let root = tree.root_node();
        let mut ranges: Vec<std::ops::Range<usize>> = how.names.clone();
        let mut taken = false;
        for local in &how.locals {
            // The import's own names are `how.names`: a module path's parts are not uses.
            uses(root, root, local, &text, &mut |n: Node<'_>| {
                if !in_import(n) {
                    ranges.push(n.byte_range());
                }
            });
            // The new name bound here already: two names would become one.
            uses(root, root, &renamed.new, &text, &mut |_| taken = true);
        }
        if taken {
            tracing::debug!(path = %file.display(), "next edit: the new name is taken in an importing file, not renamed in");
            continue;
        }
        for module in &how.modules {
            attributes(root, module, &renamed.old, &text, &mut ranges);
        }
        ranges.sort_by_key(|r| (r.start, r.end));
        ranges.dedup();
        let edits: Vec<Proposal> = ranges.into_iter().filter(|r| text[r.clone()] == renamed.old).map(|range| Proposal { range, new_text: renamed.new.clone(), kind: Kind::Rename }).collect();
        if !edits.is_empty() {
            out.push(FileEdits { path: file, version, text, edits });
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
    fn a_new_name_taken_in_an_importing_file_leaves_it() {
        let taken = "from pkg.geo import area\n\nsurface_area = 3\nx = area(1, 2)\n";
        let (root, index) = scratch("across-taken", &[("pkg/__init__.py", ""), ("pkg/geo.py", GEO), ("t.py", taken)]);
        assert!(plan(&index, &root.join("pkg/geo.py"), &renamed(), &disk).is_empty());
    }
}
