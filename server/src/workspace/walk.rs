//! Which files the index reads: the walk over the roots (`.gitignore`, hidden files, the size
//! cap), the exclusion globs, and the checks that skip binary and generated files.

use std::path::{Path, PathBuf};

use crate::cloud::redact::Exclusions;

/// Folders never walked into: installed dependencies and caches, even where no `.gitignore`
/// names them.
const SKIP_DIRS: &[&str] = &["node_modules", "__pycache__", "site-packages", "bower_components"];

/// The exclusion globs, matched on a path relative to its root (and on every tail of it, so
/// that `secrets/**` matches `app/secrets/x.py`, as `completion.exclude` does).
pub struct Filter {
    exclusions: Exclusions,
}

impl Filter {
    pub fn new(globs: &[String]) -> Filter {
        let (exclusions, bad) = Exclusions::new(globs);
        for e in bad {
            tracing::warn!("workspace index: {e}");
        }
        Filter { exclusions }
    }

    pub fn excluded(&self, relative: &str) -> bool {
        let mut tail = relative.trim_start_matches('/');
        loop {
            if self.exclusions.matching(tail).is_some() {
                return true;
            }
            match tail.split_once('/') {
                Some((_, rest)) if !rest.is_empty() => tail = rest,
                _ => return false,
            }
        }
    }
}

/// `path` relative to `root`, `/`-separated.
pub fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    Some(parts.join("/"))
}

/// A file found by the walk: its path and the index of its root.
pub struct Found {
    pub path: PathBuf,
    pub root: usize,
}

/// The files of a supported language under `roots` that `.gitignore` (and `.ignore`, the
/// parents' ignore files) and `filter` let through, hidden files and folders skipped, none
/// larger than `max_bytes`; sorted by path.
pub fn walk(roots: &[PathBuf], filter: &Filter, max_bytes: u64) -> Vec<Found> {
    let mut found = Vec::new();
    for (i, root) in roots.iter().enumerate() {
        let walker = ignore::WalkBuilder::new(root)
            .hidden(true)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(false)
            .require_git(false)
            .follow_links(false)
            .max_filesize(Some(max_bytes))
            .filter_entry(|e| !(e.file_type().is_some_and(|t| t.is_dir()) && SKIP_DIRS.iter().any(|d| e.file_name() == *d)))
            .build();
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    tracing::debug!("workspace index: {e}");
                    continue;
                }
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.into_path();
            let Some(rel) = relative(root, &path) else { continue };
            if crate::syntax::by_path(&rel).is_none() || filter.excluded(&rel) || generated_name(&rel) {
                continue;
            }
            found.push(Found { path, root: i });
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found.dedup_by(|a, b| a.path == b.path);
    found
}

/// Names that say a tool wrote the file: minified bundles, protobuf and similar output.
fn generated_name(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    [".min.js", ".bundle.js", "_pb2.py", "_pb2_grpc.py", ".pb.go", ".d.ts"].iter().any(|s| name.ends_with(s))
}

/// Whether the text says it was generated (`@generated`, `DO NOT EDIT` near the top) or looks
/// minified (very long lines).
pub fn generated_text(text: &str) -> bool {
    let head: String = text.lines().take(5).collect::<Vec<_>>().join("\n");
    if head.contains("@generated") || head.contains("DO NOT EDIT") || head.contains("do not edit") {
        return true;
    }
    let lines = text.lines().count().max(1);
    text.len() / lines > 400
}

/// The file's text, unless it cannot be read, is binary (a NUL byte in its first 8 KiB), is not
/// UTF-8, or is generated.
pub fn read_source(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    (!generated_text(&text)).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_any_tail_of_the_relative_path() {
        let f = Filter::new(&crate::exclude::globs(Some(&["gen/**".to_string()]), true));
        for p in [".env", "app/.env.local", "secrets/x.py", "app/secrets/y/z.py", "gen/a.py", "k/server.key"] {
            assert!(f.excluded(p), "{p}");
        }
        for p in ["app/main.py", "environment.py", "secretsauce.py", "agen/a.py"] {
            assert!(!f.excluded(p), "{p}");
        }
    }

    #[test]
    fn generated_and_minified_text() {
        assert!(generated_text("// Code generated by protoc-gen-go. DO NOT EDIT.\npackage x\n"));
        assert!(generated_text("# @generated by a tool\nx = 1\n"));
        assert!(generated_text(&format!("var a={};\n", "x".repeat(2000))));
        assert!(!generated_text("def f():\n    return 1\n"));
        assert!(generated_name("dist/app.min.js") && generated_name("api/x_pb2.py") && !generated_name("src/app.js"));
    }
}
