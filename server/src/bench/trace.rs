//! Typing traces (`fixtures/traces/*.json`, format in `fixtures/traces/README.md`): their schema,
//! where they are found, and loading one with its starting document.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::typing;

/// A recorded typing session (see fixtures/traces/README.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The starting document, relative to the trace file.
    pub file: String,
    pub language_id: String,
    pub cursor_marker: String,
    /// The project folder `file` belongs to, relative to the trace file: the bench opens it as
    /// the workspace (its other files feed the cross-file section).
    #[serde(default)]
    pub workspace: Option<String>,
    pub events: Vec<Event>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Milliseconds since the previous event, as recorded.
    #[serde(default)]
    pub gap_ms: u64,
    /// Text typed at the cursor as one edit (a key, or an editor's auto-indentation);
    /// `"\b"` is Backspace.
    #[serde(default)]
    pub key: Option<String>,
    /// The editor asks for ghost text at the cursor.
    #[serde(default)]
    pub complete: bool,
}

/// The trace, its document (marker removed) and the cursor's byte offset in it.
pub type LoadedTrace = (Trace, PathBuf, String, usize);

/// `--trace` files, or every `fixtures/traces/*.json`.
pub fn trace_paths(given: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    let dir = typing::find_fixture("fixtures/traces")
        .ok_or("cannot find fixtures/traces; run from the repository root or pass --trace")?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(format!("no traces in {}", dir.display()));
    }
    Ok(paths)
}

pub fn load_trace(path: &Path) -> Result<LoadedTrace, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let trace: Trace = serde_json::from_str(&text).map_err(|e| format!("bad trace {}: {e}", path.display()))?;
    for (i, e) in trace.events.iter().enumerate() {
        if e.key.is_none() && !e.complete {
            return Err(format!("{}: event {i} neither types a key nor asks for a completion", path.display()));
        }
    }
    let file = path.parent().unwrap_or(Path::new(".")).join(&trace.file);
    let (doc, at) = typing::load_with_cursor(&file, &trace.cursor_marker)?;
    Ok((trace, file, doc, at))
}
