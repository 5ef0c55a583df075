//! The workspace index: the definitions of every file of a supported language under the
//! workspace roots (name, signature, first doc line), kept current from the editor's edits,
//! and the cross-file definitions the code at a cursor uses (`Index::related`), plus a ring of
//! recently seen code from other files (`Recent`).
//!
//! Files matching the exclusion globs (`.env`, keys, `secrets/**`, `context.exclude`) are
//! never read; binary and generated files are skipped; `max_files` and a memory cap bound it.
//! The same filters guard every way in: the walk, the editor's updates, the watcher's events.
//! Paths are canonical (`canonical`: symlinks resolved) everywhere in the index.

mod defs;
mod imports;
mod index;
mod recent;
mod resolve;
mod uses;
mod walk;

use std::path::PathBuf;

pub use defs::Kind;
pub use index::{canonical, Index};
pub use recent::Recent;
pub use uses::{text_hash, Imports};
#[cfg(test)]
pub(crate) use uses::scratch;

/// What the index may read.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// Workspace folders (relative ones are taken from the current directory).
    pub roots: Vec<PathBuf>,
    /// Globs (matched on the path relative to the root, and on every tail of it) never read:
    /// `cloud.exclude` + `context.exclude` + `completion.exclude`.
    pub exclude: Vec<String>,
    /// Files indexed at most (`context.maxFiles`); the walk's first ones by path.
    pub max_files: usize,
    /// Files larger than this are not read.
    pub max_file_bytes: u64,
    /// The index stops growing (`IndexStats::truncated`) when its estimated size reaches this.
    pub memory_cap_bytes: usize,
}

/// `context.maxFiles`'s default.
pub const DEFAULT_MAX_FILES: usize = 5000;
pub const DEFAULT_MAX_FILE_BYTES: u64 = 512 * 1024;
pub const DEFAULT_MEMORY_CAP_BYTES: usize = 64 * 1024 * 1024;

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            roots: Vec::new(),
            exclude: crate::exclude::DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect(),
            max_files: DEFAULT_MAX_FILES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            memory_cap_bytes: DEFAULT_MEMORY_CAP_BYTES,
        }
    }
}

/// How big the index is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    pub files: usize,
    pub definitions: usize,
    /// Bytes held, estimated (paths, names, rendered definitions, the name table).
    pub bytes: usize,
    /// Some files were left out: more than `max_files`, or the memory cap reached.
    pub truncated: bool,
}

/// One definition (or chunk of code) from another file, as the prompt shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// Path relative to its root, with '/' (shown in the prompt's path header).
    pub path: String,
    /// The definition as the prompt shows it: its signature (the header line(s), type
    /// annotations and defaults kept) and the first line of its docstring/doc comment, in the
    /// file's own language, bodies elided the way the outline elides them (`...`/`{ ... }`); a
    /// class: its header, docstring line and method signatures.
    pub text: String,
    /// Zero-based line of its first line in the file.
    pub start_line: u32,
}
