//! The cross-file part of a completion's context: what the code at the cursor uses from other
//! files of the workspace (the definitions `crate::workspace::Index` resolves) and the code the
//! user recently saw or edited elsewhere (`crate::workspace::Recent`), as a [`CrossFile`] for
//! the prompt plan. One per language server (and per `eval --cross-file` run).

use std::hash::{BuildHasher, BuildHasherDefault};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tree_sitter::Tree;

use super::{CrossFile, Related};
use crate::syntax::Spec;
use crate::workspace::{Index, IndexOptions, Recent, Snippet};

/// Recent chunks kept (llama.vim keeps 16 of 64 lines; ours go into a smaller prompt).
const RECENT_CHUNKS: usize = 8;

/// The workspace as completions see it: its index and the recent chunks.
pub struct Workspace {
    pub index: Index,
    /// The files never read into a prompt (the index applies the same globs to what it reads).
    exclude: globset::GlobSet,
    recent: Mutex<Recent>,
    /// Bumped by every chunk noted.
    recent_generation: AtomicU64,
    /// The last answer of `cross_file` and what it was for: a keystroke asks twice (its
    /// generation ahead, then the request it answers) for the same text and cursor.
    last: Mutex<Option<(Asked, Option<CrossFile>)>>,
}

/// What a `cross_file` answer depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Asked {
    /// The path, text, cursor and budget, hashed.
    request: u64,
    index: u64,
    recent: u64,
}

impl Workspace {
    pub fn new(options: IndexOptions) -> Workspace {
        let mut exclude = globset::GlobSetBuilder::new();
        for glob in &options.exclude {
            match globset::Glob::new(glob) {
                Ok(g) => {
                    exclude.add(g);
                }
                Err(e) => tracing::warn!("context.exclude: {glob:?} is not a glob: {e}"),
            }
        }
        let exclude = exclude.build().unwrap_or_else(|_| globset::GlobSet::empty());
        Workspace {
            index: Index::new(options),
            exclude,
            recent: Mutex::new(Recent::new(RECENT_CHUNKS)),
            recent_generation: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    /// Whether `rel` (relative to its root) may never be read into a prompt.
    pub fn excluded(&self, rel: &str) -> bool {
        self.exclude.is_match(rel) || rel.split('/').any(|part| self.exclude.is_match(part))
    }

    /// `path` relative to the workspace root that holds it (`/`-separated, behind the root's
    /// name when there are several roots), symlinks resolved; `None` outside.
    pub fn relative(&self, path: &Path) -> Option<String> {
        self.index.relative(path)
    }

    /// What the code at `cursor` uses from other files, and the recent chunks of other files:
    /// definitions first (the budget keeps the start of the list), then recent chunks, newest
    /// first. The index ranks the definitions it finds (resolved through imports first) and
    /// keeps `max_bytes` of them (`prompt::budget::cross_file_bytes`). `None` when the file is
    /// outside the workspace or nothing was found.
    pub fn cross_file(&self, path: &Path, text: &str, cursor: usize, syntax: Option<(&'static Spec, &Tree)>, max_bytes: usize) -> Option<CrossFile> {
        let hasher = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        let asked = Asked {
            request: hasher.hash_one((path, text, cursor, max_bytes, syntax.map(|(s, _)| s.name))),
            index: self.index.generation(),
            recent: self.recent_generation.load(Ordering::SeqCst),
        };
        if let Some((at, answer)) = &*self.last.lock().unwrap_or_else(PoisonError::into_inner) {
            if *at == asked {
                return answer.clone();
            }
        }
        let answer = self.find(path, text, cursor, syntax, max_bytes);
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some((asked, answer.clone()));
        answer
    }

    fn find(&self, path: &Path, text: &str, cursor: usize, syntax: Option<(&'static Spec, &Tree)>, max_bytes: usize) -> Option<CrossFile> {
        let rel = self.relative(path)?;
        let mut snippets: Vec<Related> = Vec::new();
        if let Some((spec, tree)) = syntax {
            let defs = self.index.related(path, text, tree, spec, cursor, max_bytes);
            snippets.extend(defs.into_iter().map(|s| related(s, false)));
        }
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner).chunks(&rel);
        snippets.extend(recent.into_iter().rev().map(|s| related(s, true)));
        if snippets.is_empty() {
            return None;
        }
        let comment = syntax.map_or("#", |(spec, _)| spec.line_comment());
        Some(CrossFile { path: rel, comment, snippets, laid_out: Default::default() })
    }

    /// The user saw or edited `path` around `line`: a chunk of it joins the recent ones, when
    /// the index's filters let the file in (an ignored, hidden, excluded, generated or binary
    /// file is in neither).
    pub fn note(&self, path: &Path, text: &str, line: u32) {
        let path = crate::workspace::canonical(path);
        if let Some(rel) = self.relative(&path).filter(|rel| !self.excluded(rel) && self.index.admits(&path, text)) {
            self.recent.lock().unwrap_or_else(PoisonError::into_inner).note(&path, &rel, text, line);
            self.recent_generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A file deleted: it leaves the index and the recent chunks.
    pub fn forget(&self, path: &Path) {
        let path = crate::workspace::canonical(path);
        self.index.remove(&path);
        self.recent.lock().unwrap_or_else(PoisonError::into_inner).retain(|file, _| file != path);
        self.recent_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Takes over `old`'s recent chunks (a settings change made this workspace), those of
    /// files the new filters still let in.
    pub fn keep_recent(&self, old: &Workspace) {
        let mut recent = old.recent.lock().unwrap_or_else(PoisonError::into_inner).clone();
        recent.retain(|file, chunk| !self.excluded(&chunk.path) && self.index.admits(file, &chunk.text));
        *self.recent.lock().unwrap_or_else(PoisonError::into_inner) = recent;
        self.recent_generation.fetch_add(1, Ordering::SeqCst);
    }
}

fn related(s: Snippet, recent: bool) -> Related {
    Related { path: s.path, text: s.text, line: s.start_line, recent }
}
