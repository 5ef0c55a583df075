//! Where generated tests go, following what the workspace already does: the test file's path,
//! the framework, the header a new file needs and the import of the code under test.
//!
//! Python → pytest in `tests/test_<module>.py` (or `test/`, or beside the module when that is
//! where the workspace keeps its tests), importing the module by its dotted path from the
//! workspace root — or, below a folder that is not a Python name (`my dir/`, `my-pkg/`), by
//! putting that folder on `sys.path` first; a file outside every workspace folder gets its
//! tests next to it (the plan says so, and the user is told); Rust → a `#[cfg(test)] mod tests` in the same file;
//! Go → `<file>_test.go`; JavaScript/TypeScript → `<name>.test.<ext>` (in `__tests__/` when the
//! folder has one), with Vitest, Jest or `node:test` as `package.json` says.

use std::path::{Path, PathBuf};

use super::{Source, Target};

/// Where and how tests for one function are written.
#[derive(Debug, Clone, PartialEq)]
pub struct TestPlan {
    /// `None`: in the source file itself (Rust).
    pub path: Option<PathBuf>,
    pub framework: &'static str,
    /// The text a new test file starts with (imports, package line).
    pub header: String,
    /// The line importing the code under test (lines, when its folder must go on `sys.path`
    /// first); each one an existing file lacks is added.
    pub import: Option<String>,
    /// The source file is in no workspace folder: its tests go next to it.
    pub outside_workspace: bool,
}

/// Python's keywords: not usable as module or package names.
const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or",
    "pass", "raise", "return", "try", "while", "with", "yield",
];

/// Whether `name` can be written in an import statement (`my_pkg` can, `my-pkg` and `my dir`
/// cannot).
pub fn is_python_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
        && !PYTHON_KEYWORDS.contains(&name)
}

/// A Python string literal for `text`.
fn python_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The name to import: the top-level definition holding the target (its class for a method).
pub fn import_name(source: &Source<'_>, target: &Target) -> String {
    let root = source.tree.root_node();
    let mut node = root.descendant_for_byte_range(target.node.start, target.node.start).unwrap_or(root);
    while let Some(parent) = node.parent() {
        if parent.id() == root.id() {
            break;
        }
        node = parent;
    }
    let def = match node.kind() {
        "decorated_definition" => node.child_by_field_name("definition").unwrap_or(node),
        "export_statement" => node.child_by_field_name("declaration").unwrap_or(node),
        _ => node,
    };
    def.child_by_field_name("name").map(|n| source.text[n.byte_range()].to_owned()).unwrap_or_else(|| target.name.clone())
}

/// The plan for `target` in `source`. `exists` says whether a path is a file or folder.
pub fn plan(source: &Source<'_>, target: &Target, exists: &dyn Fn(&Path) -> bool, read: &dyn Fn(&Path) -> Option<String>) -> Result<TestPlan, String> {
    let spec = source.spec;
    if spec.name == "rust" {
        return Ok(TestPlan { path: None, framework: "Rust #[test]", header: String::new(), import: None, outside_workspace: false });
    }
    let file = source.path.as_ref().ok_or("the document is not a file on disk, so there is nowhere to put its tests")?;
    let dir = file.parent().unwrap_or(Path::new("."));
    let inside = source.root.clone().filter(|r| file.starts_with(r));
    let outside_workspace = inside.is_none();
    let root = inside.unwrap_or_else(|| dir.to_owned());
    let stem = file.file_stem().and_then(|s| s.to_str()).ok_or("the file has no name")?;
    let ext = file.extension().and_then(|s| s.to_str()).unwrap_or("");
    let name = import_name(source, target);
    match spec.name {
        "python" => {
            let siblings_have_tests = std::fs::read_dir(dir)
                .map(|d| d.filter_map(Result::ok).any(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.starts_with("test_") && n.ends_with(".py")
                }))
                .unwrap_or(false);
            let folder = if exists(&root.join("tests")) {
                root.join("tests")
            } else if exists(&root.join("test")) {
                root.join("test")
            } else if siblings_have_tests {
                dir.to_owned()
            } else {
                root.join("tests")
            };
            let file_name = file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            if !is_python_name(stem) {
                return Err(format!(
                    "`{file_name}` is not a Python module name (an import can only name letters, digits and `_`), so no test could import it; rename the file to generate its tests"
                ));
            }
            let relative = file.strip_prefix(&root).unwrap_or(file).with_extension("");
            let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            // Below a folder that is not a Python name, the import starts after that folder,
            // which the test file puts on `sys.path` (found from its own place, so the tests run
            // from any working directory).
            let unnamable = parts[..parts.len() - 1].iter().rposition(|p| !is_python_name(p));
            let path_entry = unnamable.map(|i| parts.drain(..=i).collect::<Vec<_>>());
            if path_entry.is_none() && parts.len() > 1 && parts[0] == "src" {
                parts.remove(0);
            }
            if parts.last().is_some_and(|p| p == "__init__") {
                parts.pop();
            }
            if parts.is_empty() {
                let folder_name = path_entry.as_ref().and_then(|p| p.last()).cloned().unwrap_or_default();
                return Err(format!(
                    "the package folder `{folder_name}` is not a Python name (an import can only name letters, digits and `_`), so no test could import it; rename the folder to generate its tests"
                ));
            }
            let module = parts.join(".");
            let mut import = format!("from {module} import {name}");
            if let Some(entry) = path_entry {
                let depth = folder.strip_prefix(&root).map_or(0, |f| f.iter().count());
                let entry: String = entry.iter().map(|p| format!(" / {}", python_string(p))).collect();
                import = format!(
                    "import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).resolve().parents[{depth}]{entry}))\n{import}"
                );
            }
            Ok(TestPlan {
                path: Some(folder.join(format!("test_{stem}.py"))),
                framework: "pytest",
                header: format!("{import}\n"),
                import: Some(import),
                outside_workspace,
            })
        }
        "go" => {
            let package = source
                .text
                .lines()
                .find_map(|l| l.trim().strip_prefix("package ").map(|p| p.trim().to_owned()))
                .ok_or("the Go file has no package clause")?;
            Ok(TestPlan {
                path: Some(dir.join(format!("{stem}_test.go"))),
                framework: "Go testing",
                header: format!("package {package}\n\nimport \"testing\"\n"),
                import: None,
                outside_workspace,
            })
        }
        _ => {
            let package = find_package_json(dir, &root, read);
            let deps = package.as_deref().unwrap_or("");
            let esm = matches!(ext, "ts" | "tsx" | "mts" | "mjs") || deps.contains("\"type\": \"module\"") || deps.contains("\"type\":\"module\"");
            let (folder, up) = if exists(&dir.join("__tests__")) { (dir.join("__tests__"), "..") } else { (dir.to_owned(), ".") };
            let (framework, runner) = if deps.contains("\"vitest\"") {
                ("Vitest", if esm { "import { describe, expect, it, test } from 'vitest';\n".to_owned() } else { "const { describe, expect, it, test } = require('vitest');\n".to_owned() })
            } else if deps.contains("\"jest\"") {
                ("Jest", String::new())
            } else if esm {
                ("node:test", "import test from 'node:test';\nimport assert from 'node:assert/strict';\n".to_owned())
            } else {
                ("node:test", "const test = require('node:test');\nconst assert = require('node:assert/strict');\n".to_owned())
            };
            let module = match ext {
                "ts" | "tsx" | "mts" | "cts" => format!("{up}/{stem}"),
                _ if esm => format!("{up}/{stem}.{ext}"),
                _ => format!("{up}/{stem}"),
            };
            let import = if esm { format!("import {{ {name} }} from '{module}';") } else { format!("const {{ {name} }} = require('{module}');") };
            let test_ext = if ext.is_empty() { "js" } else { ext };
            Ok(TestPlan {
                path: Some(folder.join(format!("{stem}.test.{test_ext}"))),
                framework,
                header: format!("{runner}{import}\n"),
                import: Some(import),
                outside_workspace,
            })
        }
    }
}

/// The nearest `package.json` from `dir` up to `root`.
fn find_package_json(dir: &Path, root: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Option<String> {
    let mut d = Some(dir);
    while let Some(here) = d {
        if let Some(text) = read(&here.join("package.json")) {
            return Some(text);
        }
        if here == root {
            break;
        }
        d = here.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax;

    fn plan_for(lang: &str, file: &str, text: &str, dirs: &[&str], files: &[(&str, &str)]) -> TestPlan {
        let spec = syntax::by_language_id(lang).unwrap();
        let tree = spec.parse(text);
        let offset = text.find("BODY").unwrap();
        let target = super::super::function_at(spec, &tree, text, offset).unwrap();
        let source = Source { spec, text, tree: &tree, path: Some(PathBuf::from(file)), root: Some(PathBuf::from("/ws")) };
        let exists = |p: &Path| dirs.iter().any(|d| Path::new(d) == p);
        let read = |p: &Path| files.iter().find(|(f, _)| Path::new(f) == p).map(|(_, t)| t.to_string());
        plan(&source, &target, &exists, &read).unwrap()
    }

    #[test]
    fn python_follows_the_workspace() {
        let src = "class Parser:\n    def parse(self, s):\n        return BODY\n";
        let p = plan_for("python", "/ws/src/pkg/parser.py", src, &[], &[]);
        assert_eq!(p.path, Some(PathBuf::from("/ws/tests/test_parser.py")));
        assert_eq!(p.import.as_deref(), Some("from pkg.parser import Parser"), "a method imports its class");
        let p = plan_for("python", "/ws/geometry.py", "def hyp(a):\n    return BODY\n", &["/ws/test"], &[]);
        assert_eq!(p.path, Some(PathBuf::from("/ws/test/test_geometry.py")));
        assert_eq!(p.header, "from geometry import hyp\n");
    }

    #[test]
    fn go_js_ts_and_rust() {
        let p = plan_for("go", "/ws/mathx/add.go", "package mathx\n\nfunc Add(a, b int) int {\n\treturn BODY\n}\n", &[], &[]);
        assert_eq!(p.path, Some(PathBuf::from("/ws/mathx/add_test.go")));
        assert!(p.header.starts_with("package mathx\n"));
        let p = plan_for("typescript", "/ws/src/slug.ts", "export function slug(s: string) {\n  return BODY;\n}\n", &[], &[("/ws/package.json", "{\"devDependencies\": {\"vitest\": \"1\"}}")]);
        assert_eq!(p.path, Some(PathBuf::from("/ws/src/slug.test.ts")));
        assert_eq!(p.framework, "Vitest");
        assert!(p.header.contains("import { slug } from './slug';"), "{}", p.header);
        let p = plan_for("javascript", "/ws/lib/slug.js", "function slug(s) {\n  return BODY;\n}\n", &["/ws/lib/__tests__"], &[]);
        assert_eq!(p.path, Some(PathBuf::from("/ws/lib/__tests__/slug.test.js")));
        assert!(p.header.contains("require('../slug')") && p.header.contains("node:test"), "{}", p.header);
        let p = plan_for("rust", "/ws/src/lib.rs", "fn clamp() -> i32 {\n    BODY\n}\n", &[], &[]);
        assert_eq!(p.path, None);
    }
    fn python_plan(file: &str, text: &str, dirs: &[&str]) -> Result<TestPlan, String> {
        let spec = syntax::by_language_id("python").unwrap();
        let tree = spec.parse(text);
        let target = super::super::function_at(spec, &tree, text, text.find("BODY").unwrap()).unwrap();
        let source = Source { spec, text, tree: &tree, path: Some(PathBuf::from(file)), root: Some(PathBuf::from("/ws")) };
        plan(&source, &target, &|p: &Path| dirs.iter().any(|d| Path::new(d) == p), &|_| None)
    }

    #[test]
    fn python_folders_that_are_not_names_go_on_sys_path() {
        let src = "def area(r):\n    return BODY\n";
        let p = python_plan("/ws/my dir/geo.py", src, &[]).unwrap();
        assert_eq!(p.path, Some(PathBuf::from("/ws/tests/test_geo.py")));
        assert_eq!(
            p.import.as_deref(),
            Some("import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).resolve().parents[1] / \"my dir\"))\nfrom geo import area")
        );
        // Only the folders below the last unnamable one are the module's dotted path.
        let p = python_plan("/ws/src/my-pkg/shapes/geo.py", src, &["/ws/test"]).unwrap();
        assert_eq!(p.path, Some(PathBuf::from("/ws/test/test_geo.py")));
        assert!(p.header.contains("parents[1] / \"src\" / \"my-pkg\"))\nfrom shapes.geo import area\n"), "{}", p.header);
        let p = python_plan("/ws/class/geo.py", src, &[]).unwrap();
        assert!(p.header.contains("/ \"class\"))\nfrom geo import area"), "a keyword is no package name either: {}", p.header);
        // Names that are fine stay a plain import.
        assert_eq!(python_plan("/ws/pkg_2/geo.py", src, &[]).unwrap().header, "from pkg_2.geo import area\n");
        // A file or package that no import can name: refused before anything runs, with why.
        let e = python_plan("/ws/my-geo.py", src, &[]).unwrap_err();
        assert!(e.contains("`my-geo.py` is not a Python module name"), "{e}");
        let e = python_plan("/ws/my-pkg/__init__.py", src, &[]).unwrap_err();
        assert!(e.contains("`my-pkg`"), "{e}");
        assert!(is_python_name("naïve") && !is_python_name("2d") && !is_python_name("") && !is_python_name("None"));
    }

    #[test]
    fn a_file_outside_the_workspace_gets_its_tests_next_to_it() {
        let src = "def area(r):\n    return BODY\n";
        let p = python_plan("/elsewhere/geo.py", src, &[]).unwrap();
        assert!(p.outside_workspace);
        assert_eq!(p.path, Some(PathBuf::from("/elsewhere/tests/test_geo.py")));
        assert_eq!(p.header, "from geo import area\n");
        assert!(!python_plan("/ws/geo.py", src, &[]).unwrap().outside_workspace);
    }
}
