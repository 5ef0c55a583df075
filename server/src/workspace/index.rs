//! The index itself: files and their definitions behind one read-write lock, the name table,
//! the parallel build over the walk, and the editor's updates (which a build in flight never
//! overwrites with older text from disk).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::defs::{self, Def};
use super::walk::{self, Filter};
use super::{IndexOptions, IndexStats, Snippet};
use crate::syntax::Spec;

/// Bytes of bookkeeping counted per file besides its definitions.
const FILE_OVERHEAD: usize = 160;
/// Bytes counted per entry of the name table.
const NAME_OVERHEAD: usize = 48;

/// Shared handle to the workspace index (an `Arc` inside): `Send + Sync`, cheap to clone.
#[derive(Clone)]
pub struct Index {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

struct Inner {
    options: IndexOptions,
    /// Per root, what its files' paths are shown under: nothing with one root; with several,
    /// the root's folder name (its whole path where two roots share a name), so that the same
    /// relative path in two roots gets two `# path:` headers.
    labels: Vec<String>,
    filter: Filter,
    state: RwLock<State>,
    /// Counts `update`s and `remove`s, so that a build does not overwrite a newer entry.
    seq: AtomicU64,
    /// The identifiers of the rest of the file at the last `related`.
    tokens: super::resolve::TokenCache,
}

/// One indexed file.
pub(super) struct FileEntry {
    pub path: PathBuf,
    /// Relative to its root, `/`-separated (absolute when under no root).
    pub rel: String,
    pub lang: &'static str,
    pub defs: Vec<Def>,
    /// [`super::uses::text_hash`] of the text the entry was read from: a file on disk is
    /// the one indexed only while its text hashes the same.
    pub hash: u64,
    /// Python: the names its imports mention (`from m import a as b`: `m`, `a`; `import p.q`:
    /// `p`, `q`), so that the files that may use a definition are found without reading
    /// every file.
    pub imported: Vec<String>,
    bytes: usize,
    /// Sent by the editor (`update`): a build never replaces it with the text on disk.
    from_editor: bool,
}

/// Everything the index holds.
#[derive(Default)]
pub(super) struct State {
    files: Vec<Option<FileEntry>>,
    ids: HashMap<PathBuf, u32>,
    free: Vec<u32>,
    /// Definition name → the files that define it (one entry per definition).
    names: HashMap<String, Vec<u32>>,
    /// Python module name (a file's stem, a package's folder for `__init__`) → its files:
    /// import resolution looks a module up without scanning every file.
    modules: HashMap<String, Vec<u32>>,
    /// Go file's folder → the Go files there (its package): found without scanning every file.
    go_folders: HashMap<PathBuf, Vec<u32>>,
    /// Paths the editor updated or removed, with the `seq` of that change.
    touched: HashMap<PathBuf, u64>,
    /// Bumped by every insertion and removal: what was resolved against an older generation
    /// may have changed.
    generation: u64,
    bytes: usize,
    definitions: usize,
    truncated: bool,
}

impl State {
    pub fn id(&self, path: &Path) -> Option<u32> {
        self.ids.get(path).copied()
    }

    pub fn file(&self, id: u32) -> &FileEntry {
        self.files[id as usize].as_ref().expect("a live file id")
    }

    /// All indexed files.
    pub fn entries(&self) -> impl Iterator<Item = (u32, &FileEntry)> {
        self.files.iter().enumerate().filter_map(|(i, f)| f.as_ref().map(|f| (i as u32, f)))
    }

    /// The Python files that can be the module `name` (`name.py`, `name/__init__.py`).
    pub fn modules_named(&self, name: &str) -> &[u32] {
        self.modules.get(name).map_or(&[], Vec::as_slice)
    }

    /// The Go files in the folder `dir` (a package), in id order.
    pub fn go_files_in(&self, dir: &Path) -> &[u32] {
        self.go_folders.get(dir).map_or(&[], Vec::as_slice)
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The files defining `name` (each once, in id order).
    pub fn defining(&self, name: &str) -> Vec<u32> {
        let mut ids = self.names.get(name).cloned().unwrap_or_default();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn insert(&mut self, entry: FileEntry) {
        self.remove(&entry.path);
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.files.push(None);
                (self.files.len() - 1) as u32
            }
        };
        for d in &entry.defs {
            self.names.entry(d.name.clone()).or_default().push(id);
        }
        if let Some(module) = python_module(&entry) {
            self.modules.entry(module.to_owned()).or_default().push(id);
        }
        if let Some(dir) = go_folder(&entry) {
            self.go_folders.entry(dir.to_owned()).or_default().push(id);
        }
        self.generation += 1;
        self.bytes += entry.bytes;
        self.definitions += entry.defs.len();
        self.ids.insert(entry.path.clone(), id);
        self.files[id as usize] = Some(entry);
    }

    fn remove(&mut self, path: &Path) {
        let Some(id) = self.ids.remove(path) else { return };
        let Some(entry) = self.files[id as usize].take() else { return };
        for d in &entry.defs {
            if let Some(list) = self.names.get_mut(&d.name) {
                if let Some(at) = list.iter().position(|&i| i == id) {
                    list.swap_remove(at);
                }
                if list.is_empty() {
                    self.names.remove(&d.name);
                }
            }
        }
        if let Some(list) = python_module(&entry).and_then(|m| self.modules.get_mut(m)) {
            list.retain(|&i| i != id);
        }
        if let Some(dir) = go_folder(&entry) {
            if let Some(list) = self.go_folders.get_mut(dir) {
                list.retain(|&i| i != id);
                if list.is_empty() {
                    self.go_folders.remove(dir);
                }
            }
        }
        self.generation += 1;
        self.bytes -= entry.bytes;
        self.definitions -= entry.defs.len();
        self.free.push(id);
    }

    fn stats(&self) -> IndexStats {
        IndexStats { files: self.ids.len(), definitions: self.definitions, bytes: self.bytes, truncated: self.truncated }
    }
}

/// The folder of a Go file (its package).
fn go_folder(entry: &FileEntry) -> Option<&Path> {
    (entry.lang == "go").then(|| entry.path.parent()).flatten()
}

/// The module name a Python file is imported by (its last component): `c` for `a/c.py`, `b`
/// for `a/b/__init__.py`.
pub(super) fn python_module(entry: &FileEntry) -> Option<&str> {
    if entry.lang != "python" {
        return None;
    }
    let mut parts = entry.rel.rsplit('/');
    let file = parts.next()?;
    let stem = file.strip_suffix(".pyi").or_else(|| file.strip_suffix(".py"))?;
    if stem == "__init__" {
        parts.next()
    } else {
        Some(stem)
    }
}

/// `path` as the index keys it: absolute, rid of `.` and `..`, and with symlinks resolved
/// (through its nearest existing folder when the file itself is gone or not yet written), so
/// that a root opened through a symlink and a document addressed by its real path (or the
/// other way round) meet. Roots, walked files, the editor's documents and the watcher's paths
/// all go through it.
pub fn canonical(path: &Path) -> PathBuf {
    let path = normalize(path);
    let mut tail = Vec::new();
    let mut at = path.as_path();
    loop {
        if let Ok(mut real) = std::fs::canonicalize(at) {
            real.extend(tail.iter().rev());
            return real;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_owned());
                at = parent;
            }
            _ => return path,
        }
    }
}

/// Each root's label (see `Inner::labels`).
fn labels(roots: &[PathBuf]) -> Vec<String> {
    if roots.len() < 2 {
        return vec![String::new(); roots.len()];
    }
    let name = |r: &PathBuf| r.file_name().map_or_else(|| r.to_string_lossy().into_owned(), |n| n.to_string_lossy().into_owned());
    roots
        .iter()
        .map(|r| {
            if roots.iter().filter(|o| name(o) == name(r)).count() == 1 {
                name(r)
            } else {
                r.to_string_lossy().trim_start_matches('/').replace('\\', "/")
            }
        })
        .collect()
}

/// Python source with every whole-line comment (one holding no quote character) turned into
/// spaces, byte for byte: the same offsets, lines and definitions, but none of the
/// grammar's quadratic cost. tree-sitter-python's external scanner, asked for a NEWLINE/
/// INDENT/DEDENT inside an indented block, skips every comment line that follows to find the
/// next line's indentation, and a comment is a token of its own, so it is asked again after
/// each one: 1,750 comment lines after an indented `def` took 0.9 s, 3,500 took 2.8 s. Blank
/// lines are skipped in the same single pass. (Quote-holding lines are kept: such a line may
/// be inside a string and end it.)
fn without_comment_lines(text: &str) -> std::borrow::Cow<'_, str> {
    let comment = |line: &str| line.trim_start().starts_with('#') && !line.contains(['"', '\'']);
    if !text.lines().any(comment) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if comment(line) {
            let body = line.trim_end_matches(['\n', '\r']);
            out.extend(std::iter::repeat_n(' ', body.len()));
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `path` made absolute (from the current directory) and rid of `.` and `..`, without
/// touching the file system.
pub(super) fn normalize(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Parses `text` and extracts its definitions into an entry.
fn entry(path: PathBuf, rel: String, spec: &'static Spec, parser: &mut tree_sitter::Parser, text: &str) -> Option<FileEntry> {
    let tree = if spec.name == "python" { parser.parse(&*without_comment_lines(text), None)? } else { parser.parse(text, None)? };
    Some(entry_of(path, rel, spec, &tree, text))
}

/// The entry of `text` whose tree is `tree`.
fn entry_of(path: PathBuf, rel: String, spec: &'static Spec, tree: &tree_sitter::Tree, text: &str) -> FileEntry {
    let defs = defs::extract(spec, tree, text);
    let imported = if spec.name == "python" { super::uses::imported_names(tree, text) } else { Vec::new() };
    let bytes = FILE_OVERHEAD
        + 2 * path.as_os_str().len()
        + rel.len()
        + defs.iter().map(|d| d.bytes() + NAME_OVERHEAD + d.name.len()).sum::<usize>()
        + imported.iter().map(|n| n.len() + 24).sum::<usize>();
    FileEntry { path, rel, lang: spec.name, defs, hash: super::uses::text_hash(text), imported, bytes, from_editor: false }
}

impl Index {
    pub fn new(mut options: IndexOptions) -> Index {
        options.roots = options.roots.iter().map(|r| canonical(r)).collect();
        let filter = Filter::new(&options.exclude);
        let labels = labels(&options.roots);
        Index { inner: Arc::new(Inner { options, labels, filter, state: RwLock::new(State::default()), seq: AtomicU64::new(0), tokens: Default::default() }) }
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.inner.state.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.inner.state.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The root holding `path` (a canonical path; the innermost root when roots nest) and the
    /// path relative to it, `/`-separated.
    fn locate(&self, path: &Path) -> Option<(usize, String)> {
        let roots = &self.inner.options.roots;
        let (i, root) = roots.iter().enumerate().filter(|(_, r)| path.starts_with(r)).max_by_key(|(_, r)| r.as_os_str().len())?;
        Some((i, walk::relative(root, path)?))
    }

    /// `rel` (relative to root `root`) as the prompt shows it: behind the root's label when
    /// there are several roots.
    fn shown(&self, root: usize, rel: &str) -> String {
        match self.inner.labels.get(root).filter(|l| !l.is_empty()) {
            Some(label) => format!("{label}/{rel}"),
            None => rel.to_owned(),
        }
    }

    /// `path` as the prompt's `# path:` headers show it (relative to its root, behind the
    /// root's label when there are several); `None` under no root.
    pub fn relative(&self, path: &Path) -> Option<String> {
        let path = canonical(path);
        let (root, rel) = self.locate(&path)?;
        Some(self.shown(root, &rel))
    }

    /// Whether `path`, holding `text`, passes every filter the walk applies (see
    /// [`Index::update`]): what the recent chunks may hold too.
    pub fn admits(&self, path: &Path, text: &str) -> bool {
        self.admitted(&canonical(path), text).is_some()
    }

    /// The root and relative path of `path` (canonical) when it and `text` pass every filter.
    fn admitted(&self, path: &Path, text: &str) -> Option<(usize, String)> {
        let (root, rel) = self.locate(path)?;
        let ok = walk::path_admitted(&rel, path, &self.inner.filter) && text.len() as u64 <= self.inner.options.max_file_bytes && walk::text_admitted(text);
        if !ok {
            tracing::debug!(path = %path.display(), "workspace index: not indexed (ignored, hidden, excluded, generated, binary or too large)");
        }
        ok.then_some((root, rel))
    }

    /// Walks the roots and parses every file of a supported language, in parallel (one worker
    /// per core); blocking. `progress(done, total)` is called from the calling thread now and
    /// then and at the end. Files the editor sent (`update`) keep the editor's text, and files
    /// it removed while the build ran stay removed.
    pub fn build(&self, progress: &dyn Fn(usize, usize)) -> IndexStats {
        let started = self.inner.seq.load(Ordering::SeqCst);
        let options = &self.inner.options;
        let mut found = walk::walk(&options.roots, &self.inner.filter, options.max_file_bytes);
        {
            let mut state = self.write();
            state.truncated = found.len() > options.max_files;
            found.truncate(options.max_files);
            // A file gone from the disk since the last build goes from the index (unless the
            // editor holds it).
            let walked: std::collections::HashSet<&Path> = found.iter().map(|f| f.path.as_path()).collect();
            let gone: Vec<PathBuf> = state.entries().filter(|(_, f)| !f.from_editor && !walked.contains(f.path.as_path())).map(|(_, f)| f.path.clone()).collect();
            for path in gone {
                state.remove(&path);
            }
        }
        let total = found.len();
        progress(0, total);
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8).min(total.max(1));
        let (tx, rx) = std::sync::mpsc::sync_channel::<Option<FileEntry>>(256);
        std::thread::scope(|s| {
            for _ in 0..workers {
                let tx = tx.clone();
                let (next, stop, found) = (&next, &stop, &found);
                s.spawn(move || {
                    let mut parsers: HashMap<&'static str, tree_sitter::Parser> = HashMap::new();
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = found.get(i) else { break };
                        let rel = walk::relative(&options.roots[f.root], &f.path).unwrap_or_default();
                        let result = crate::syntax::by_path(&rel).and_then(|spec| {
                            let text = walk::read_source(&f.path)?;
                            let parser = parsers.entry(spec.name).or_insert_with(|| spec.parser());
                            let shown = match self.locate(&f.path) {
                                Some((root, rel)) => self.shown(root, &rel),
                                None => self.shown(f.root, &rel),
                            };
                            entry(f.path.clone(), shown, spec, parser, &text)
                        });
                        if tx.send(result).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let mut done = 0;
            for result in rx {
                done += 1;
                if let Some(entry) = result {
                    let mut state = self.write();
                    // The editor's text (sent before or during the build) is newer than the
                    // disk's; a file removed during the build stays removed.
                    let newer = state.touched.get(&entry.path).is_some_and(|&at| at > started)
                        || state.id(&entry.path).is_some_and(|id| state.file(id).from_editor);
                    if !newer {
                        if state.bytes + entry.bytes > options.memory_cap_bytes {
                            state.truncated = true;
                            stop.store(true, Ordering::Relaxed);
                        } else {
                            state.insert(entry);
                        }
                    }
                }
                if done % 64 == 0 {
                    progress(done, total);
                }
                if done == total / 2 {
                    crate::fault::hold("index");
                }
            }
            progress(done, total);
        });
        let stats = self.stats();
        tracing::info!(files = stats.files, definitions = stats.definitions, bytes = stats.bytes, truncated = stats.truncated, "workspace indexed");
        stats
    }

    /// An open, changed or saved file's text: its entry replaced. Goes through the walk's
    /// filters (the watcher's events and the editor's documents alike): a file under no root,
    /// of an unsupported language, hidden or under a hidden folder, ignored by `.gitignore`,
    /// in a dependency folder, excluded, generated (by name or text), binary or too large is
    /// not indexed (and an entry it had goes); a new file beyond `max_files` or the memory cap
    /// is not added (`IndexStats::truncated`). Quick (one parse).
    pub fn update(&self, path: &Path, text: &str) {
        self.update_parsed(path, text, None);
    }

    /// [`Index::update`] with the tree the editor's document keeps for `text` (made edit by
    /// edit as the user typed): no parse then, only the definitions read from it. A tree of
    /// another language than the path's is not used.
    pub fn update_parsed(&self, path: &Path, text: &str, tree: Option<(&'static Spec, &tree_sitter::Tree)>) {
        let path = canonical(path);
        let Some((root, rel)) = self.admitted(&path, text) else {
            if self.read().id(&path).is_some() {
                self.remove(&path);
            }
            return;
        };
        let Some(spec) = crate::syntax::by_path(&rel) else { return };
        let shown = self.shown(root, &rel);
        let entry = match tree.filter(|(s, _)| s.name == spec.name) {
            Some((_, tree)) => Some(entry_of(path.clone(), shown, spec, tree, text)),
            None => entry(path.clone(), shown, spec, &mut spec.parser(), text),
        };
        let Some(mut entry) = entry else { return };
        entry.from_editor = true;
        let seq = self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let mut state = self.write();
        let old = state.id(&path).map(|id| state.file(id).bytes);
        let options = &self.inner.options;
        if old.is_none() && state.ids.len() >= options.max_files || state.bytes - old.unwrap_or(0) + entry.bytes > options.memory_cap_bytes {
            tracing::debug!(path = %path.display(), "workspace index: not indexed, context.maxFiles or the memory cap reached");
            state.truncated = true;
            return;
        }
        state.touched.insert(path, seq);
        state.insert(entry);
    }

    /// The watcher says `path` was created or changed on disk: its text read again, through
    /// the walk's filters, the path's first (so that thousands of events for files under
    /// `.venv` or `node_modules` read nothing); a file that is gone, unreadable or no longer
    /// admitted leaves the index.
    pub fn update_from_disk(&self, path: &Path) {
        let path = canonical(path);
        let admitted = self.locate(&path).is_some_and(|(_, rel)| walk::path_admitted(&rel, &path, &self.inner.filter))
            && std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() <= self.inner.options.max_file_bytes);
        match admitted.then(|| walk::read_source(&path)).flatten() {
            Some(text) => self.update(&path, &text),
            None if self.read().id(&path).is_some() => self.remove(&path),
            None => {}
        }
    }

    /// A deleted file: its entry dropped (and kept out by a build in flight).
    pub fn remove(&self, path: &Path) {
        let path = canonical(path);
        let seq = self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let mut state = self.write();
        state.touched.insert(path.clone(), seq);
        state.remove(&path);
    }

    pub fn stats(&self) -> IndexStats {
        self.read().stats()
    }

    /// Changes with every file added, replaced or removed: what `related` found is still
    /// what it would find while this stays the same (for the same file text and cursor).
    pub fn generation(&self) -> u64 {
        self.read().generation()
    }

    /// The definitions the code at `cursor` in `path` uses from OTHER files, resolved through
    /// the file's imports (Python `from .m import x`, `from pkg.m import x as y`, `import pkg.m
    /// as m` then `m.x`; JS/TS relative imports and `index` files, `require`; Go the same
    /// package's other files and module-local imports; Rust `use crate::…`/`super::…`/`mod`),
    /// with a fall-back to names defined in exactly one other file; plus the definitions of
    /// the types in the enclosing function's signature and the enclosing class's bases.
    ///
    /// Stable: the result depends only on the index (other files), the file's imports and the
    /// complete identifiers of the enclosing scope (the word at the cursor does not count,
    /// except as the `module.` qualifier before it), then of the rest of the file, so it stays
    /// byte-identical while the user types inside one scope (the rest of the file's identifiers
    /// are walked once then: `TokenCache`). Strongest first (the prompt's budget keeps the start of the
    /// list; the section shows them by path and position); at most `max_bytes` of text (each
    /// snippet's text and path).
    pub fn related(&self, path: &Path, text: &str, tree: &tree_sitter::Tree, spec: &'static Spec, cursor: usize, max_bytes: usize) -> Vec<Snippet> {
        let path = canonical(path);
        let state = self.read();
        let request = super::resolve::Request { path: &path, text, tree, spec, cursor: cursor.min(text.len()), max_bytes, cache: &self.inner.tokens };
        super::resolve::related(&state, &request)
    }
}
