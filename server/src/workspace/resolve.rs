//! Resolution near the cursor: the complete identifiers of the enclosing scope (and of the
//! headers of the classes and impls around it), then those of the rest of the file, resolved
//! through the file's imports to other files' definitions, with a fall-back to names defined in
//! exactly one other file; ranked (the scope's first) and cut to the byte budget, strongest
//! first. When everything found fits, the section made of it is the same for every cursor in
//! the file (it is shown by path and position): the head of its prompts, decoded when it
//! opens, serves every scope.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use tree_sitter::{Node, Tree};

use super::defs::Kind;
use super::imports::{self, Binding, Bindings};
use super::index::State;
use super::Snippet;
use crate::memo::Last;
use crate::syntax::{BlockEnd, Spec};

/// Bytes a snippet costs besides its text and path (the header's punctuation and newlines).
const SNIPPET_OVERHEAD: usize = 16;
/// Text scanned for identifiers at module level, when the file is larger.
const MODULE_LEVEL_BYTES: usize = 64 * 1024;
/// Text scanned for the rest of the file's identifiers: its start (imports, top-level code).
const FILE_BYTES: usize = 128 * 1024;

pub struct Request<'a> {
    pub path: &'a Path,
    pub text: &'a str,
    pub tree: &'a Tree,
    pub spec: &'static Spec,
    pub cursor: usize,
    pub max_bytes: usize,
    pub cache: &'a TokenCache,
}

/// An identifier of the scope: `qual.name` (or `qual::name`), or a bare `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    qual: Option<String>,
    name: String,
    /// Called (`name(`) somewhere in the scope.
    called: bool,
}

/// How strongly a definition is wanted (lower first when the budget is short).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    /// Named through an import, the package, or a qualifier.
    Resolved,
    /// A member of the module qualifying the word at the cursor (`m.|`).
    CursorModule,
    /// A name defined in exactly one other file.
    Unique,
    /// Bases of the classes above, methods of the types above (Go).
    Related,
    /// Imported by the file but not (yet) used in the scope: the line being written is often
    /// where an import is first used, and with them the section changes less while typing.
    Imported,
}

/// Where the names come from, before their rank: the scope around the cursor, the file's
/// imports that nothing uses, or the rest of the file (nearest the scope first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    Scope,
    /// Imported by name and used nowhere in the file's code yet: a name is most often imported
    /// to be used where the user is writing (measured on the cross-file eval, README).
    Unused,
    File,
}

#[derive(Debug, Clone, Copy)]
struct Pick {
    tier: Tier,
    rank: Rank,
    order: usize,
    file: u32,
    def: usize,
}

struct Resolver<'a> {
    state: &'a State,
    me: Option<u32>,
    /// The tier of the picks being added.
    tier: Tier,
    picks: Vec<Pick>,
}

impl Resolver<'_> {
    /// Adds the definitions named `name` in `files` (not Go methods); how many.
    fn named(&mut self, files: &[u32], name: &str, rank: Rank, order: usize) -> usize {
        let before = self.picks.len();
        let state = self.state;
        for &file in files {
            if Some(file) == self.me {
                continue;
            }
            let defs = &state.file(file).defs;
            let mut found = false;
            for (i, d) in defs.iter().enumerate() {
                if d.name == name && d.kind != Kind::Method {
                    self.picks.push(Pick { tier: self.tier, rank, order, file, def: i });
                    found = true;
                }
            }
            // JS/TS default import: the file's `export default` definition.
            if !found && name == "default" {
                if let Some(i) = defs.iter().position(|d| d.text.lines().any(|l| l.starts_with("export default"))) {
                    self.picks.push(Pick { tier: self.tier, rank, order, file, def: i });
                }
            }
        }
        self.picks.len() - before
    }

    /// The definitions of `name` when exactly one other file defines it.
    fn unique(&mut self, name: &str, rank: Rank, order: usize) -> usize {
        let files: Vec<u32> = self.state.defining(name).into_iter().filter(|&f| Some(f) != self.me).collect();
        if files.len() == 1 {
            self.named(&files, name, rank, order)
        } else {
            0
        }
    }

    /// Every definition of `files` (not Go methods, not impl blocks).
    fn all(&mut self, files: &[u32], rank: Rank, order: usize) {
        let state = self.state;
        for &file in files.iter().filter(|&&f| Some(f) != self.me) {
            for (i, d) in state.file(file).defs.iter().enumerate() {
                if !matches!(d.kind, Kind::Method | Kind::Impl) {
                    self.picks.push(Pick { tier: self.tier, rank, order, file, def: i });
                }
            }
        }
    }
}

pub fn related(state: &State, req: &Request<'_>) -> Vec<Snippet> {
    let b = imports::bindings(state, req.spec, req.tree, req.text, req.path);
    let (tokens, cursor_qual, file_tokens) = tokens(req);
    let locals: HashSet<String> = super::defs::local_names(req.tree, req.text).into_iter().collect();
    let mut r = Resolver { state, me: state.id(req.path), tier: Tier::Scope, picks: Vec::new() };
    let resolve = |r: &mut Resolver<'_>, tokens: &[Token]| {
        for (order, t) in tokens.iter().enumerate() {
            match &t.qual {
                Some(q) => {
                    if let Some(files) = imports::module_of(state, &b, q) {
                        r.named(&files, &t.name, Rank::Resolved, order);
                    }
                }
                None => bare(r, &b, &locals, t, order),
            }
        }
    };
    resolve(&mut r, &tokens);
    if let Some(files) = cursor_qual.and_then(|q| imports::module_of(state, &b, &q)) {
        r.all(&files, Rank::CursorModule, tokens.len());
    }
    // Then what the rest of the file uses, in the order it appears: what does not fit is what
    // the scope does not use.
    r.tier = Tier::File;
    resolve(&mut r, &file_tokens[..]);
    // One level more: the bases of the classes found, the methods of Go types found.
    let found: Vec<Pick> = r.picks.clone();
    for p in found {
        let d = &state.file(p.file).defs[p.def];
        if d.kind != Kind::Type {
            continue;
        }
        r.tier = p.tier;
        for base in d.bases.clone() {
            let name = base.rsplit('.').next().unwrap_or(&base).to_owned();
            r.unique(&name, Rank::Related, p.order);
        }
        if state.file(p.file).lang == "go" {
            let name = d.name.clone();
            let files = b.same_package.iter().copied().chain([p.file]).collect::<Vec<_>>();
            for file in files {
                for (i, m) in state.file(file).defs.iter().enumerate() {
                    if m.kind == Kind::Method && m.container.as_deref() == Some(&name) {
                        r.picks.push(Pick { tier: p.tier, rank: Rank::Related, order: p.order, file, def: i });
                    }
                }
            }
        }
    }
    // Last, what the file imports by name and nothing uses yet, in name order.
    r.tier = Tier::Unused;
    let mut imported: Vec<(&String, &Binding)> = b.names.iter().filter(|(_, binding)| matches!(binding, Binding::Item { .. })).collect();
    imported.sort_by(|a, b| a.0.cmp(b.0));
    let used: HashSet<&str> = tokens.iter().chain(file_tokens.iter()).filter(|t| t.qual.is_none()).map(|t| t.name.as_str()).collect();
    for (k, (local, binding)) in imported.into_iter().enumerate() {
        if let Binding::Item { files, name } = binding {
            if !locals.contains(local.as_str()) && !used.contains(local.as_str()) {
                r.named(files, name, Rank::Imported, tokens.len() + 1 + k);
            }
        }
    }
    select(state, r.picks, req.max_bytes)
}

/// A bare name: through its import, else this file's own definitions (nothing to add), the
/// Go package, glob imports, and a name defined in exactly one other file.
fn bare(r: &mut Resolver<'_>, b: &Bindings, locals: &HashSet<String>, t: &Token, order: usize) {
    match b.names.get(&t.name) {
        Some(Binding::Item { files, name }) => {
            if r.named(files, name, Rank::Resolved, order) == 0 {
                // Re-exported there (`from .a import x` in `__init__.py`, `pub use`).
                r.unique(name, Rank::Unique, order);
            }
            return;
        }
        Some(Binding::Module { .. } | Binding::External) => return,
        None => {}
    }
    if locals.contains(&t.name) {
        return;
    }
    if r.named(&b.same_package.clone(), &t.name, Rank::Resolved, order) > 0 {
        return;
    }
    for g in b.globs.clone() {
        if r.named(&g, &t.name, Rank::Resolved, order) > 0 {
            return;
        }
    }
    if t.called || t.name.starts_with(|c: char| c.is_uppercase()) {
        r.unique(&t.name, Rank::Unique, order);
    }
}

/// The picks that fit in `max_bytes`, strongest first. They stay in that order: the prompt's
/// token budget keeps the start of the list (`prompt::budget::fit_cross_file`), and the
/// section shows what it kept by path and position (`prompt::cross_file::render`), so the
/// order of the list never reaches the prompt.
fn select(state: &State, mut picks: Vec<Pick>, max_bytes: usize) -> Vec<Snippet> {
    let key = |p: &Pick| {
        let f = state.file(p.file);
        (p.tier, p.rank, p.order, f.rel.clone(), f.defs[p.def].start)
    };
    picks.sort_by_cached_key(key);
    let mut seen = HashSet::new();
    let mut used = 0;
    let mut chosen = Vec::new();
    for p in picks {
        if !seen.insert((p.file, p.def)) {
            continue;
        }
        let f = state.file(p.file);
        let d = &f.defs[p.def];
        let cost = d.text.len() + f.rel.len() + SNIPPET_OVERHEAD;
        if used + cost > max_bytes {
            continue;
        }
        used += cost;
        chosen.push(Snippet { path: f.rel.clone(), text: d.text.clone(), start_line: d.line });
    }
    chosen
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The identifier characters that end `s`.
fn trailing_word(s: &str) -> &str {
    let start = s.char_indices().rev().take_while(|&(_, c)| is_ident(c)).last().map_or(s.len(), |(i, _)| i);
    &s[start..]
}

/// `a.b` for the identifier at `at` in `a.b.at` (with `sep` between): the chain before it.
fn chain_before(text: &str, mut at: usize, sep: &str) -> Option<String> {
    let mut parts = Vec::new();
    while text[..at].ends_with(sep) {
        let p = at - sep.len();
        let w = trailing_word(&text[..p]);
        if w.is_empty() {
            break;
        }
        parts.push(w);
        at = p - w.len();
    }
    parts.reverse();
    (!parts.is_empty()).then(|| parts.join(sep))
}

/// The identifiers to resolve, in order of appearance (the headers of the containers around
/// the cursor, then the scope), without the word at the cursor; the qualifier before the
/// word at the cursor (`m` in `m.|` or `m.fo|`); and the identifiers of the rest of the file
/// (its first [`FILE_BYTES`] outside the scope), from `cache` when that text is unchanged.
fn tokens(req: &Request<'_>) -> (Vec<Token>, Option<String>, Arc<Vec<Token>>) {
    let (text, cursor) = (req.text, req.cursor);
    let sep = if req.spec.name == "rust" { "::" } else { "." };
    let word_start = cursor - trailing_word(&text[..cursor]).len();
    let word_end = cursor + text[cursor..].find(|c: char| !is_ident(c)).unwrap_or(text.len() - cursor);
    let scope = crate::syntax::scope::enclosing_scope(req.spec, req.tree, text, cursor);
    let mut ranges = match (req.spec.block_end, &scope) {
        // By indentation, as the scope is found: a half-typed line can put the tree in error
        // around the class, never the lines above.
        (BlockEnd::Indent, Some(scope)) => class_lines_above(text, scope.start),
        (BlockEnd::Indent, None) => Vec::new(),
        (BlockEnd::Braces, _) => headers(req.tree, cursor),
    };
    let scope = match scope {
        Some(scope) => scope,
        None if text.len() <= MODULE_LEVEL_BYTES => 0..text.len(),
        // Cut on character boundaries: a byte offset inside a multi-byte character panics.
        None => text.floor_char_boundary(cursor.saturating_sub(MODULE_LEVEL_BYTES / 2))..text.ceil_char_boundary(cursor + MODULE_LEVEL_BYTES / 2),
    };
    ranges.push(scope.clone());
    // The identifiers of `ranges` in order of appearance, each with the least `distance` of
    // its occurrences.
    let collect_at = |ranges: &[Range<usize>], skip_imports: bool, distance: &dyn Fn(usize) -> usize| {
        let mut out: Vec<(Token, usize)> = Vec::new();
        let mut seen: HashMap<(Option<String>, &str), usize> = HashMap::new();
        for range in ranges {
            for leaf in leaves(req.tree.root_node(), range, skip_imports) {
                let (s, e) = (leaf.start_byte(), leaf.end_byte());
                if word_start < word_end && s < word_end && word_start < e {
                    continue; // the word being typed
                }
                let name = &text[s..e];
                let qual = chain_before(text, s, sep);
                let called = text[e..].trim_start().starts_with('(');
                let d = distance(s);
                match seen.entry((qual, name)) {
                    std::collections::hash_map::Entry::Occupied(at) => {
                        let (t, least) = &mut out[*at.get()];
                        t.called |= called;
                        *least = (*least).min(d);
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        let qual = v.key().0.clone();
                        v.insert(out.len());
                        out.push((Token { qual, name: name.to_owned(), called }, d));
                    }
                }
            }
        }
        out
    };
    // The scope's own imports are uses: a function that imports a name is about to use it.
    let collect = |ranges: &[Range<usize>]| collect_at(ranges, false, &|_| 0).into_iter().map(|(t, _)| t).collect::<Vec<_>>();
    let cursor_qual = chain_before(text, word_start, sep);
    // The rest of the file: the text before the scope, then after it, [`FILE_BYTES`] in all —
    // what typing inside the scope leaves alone, so its identifiers are walked once.
    let before = 0..text.floor_char_boundary(scope.start.min(FILE_BYTES));
    let after = scope.end..text.floor_char_boundary(scope.end + FILE_BYTES - before.len());
    let file_tokens = req.cache.0.get_or((req.path, req.spec.name, &text[before.clone()], &text[after.clone()]), || {
        // Nearest the scope first: the lines around it are the likeliest to be echoed, and the
        // order only decides what a short budget keeps (the section shows what it kept in file
        // order, so a budget that keeps everything gives the same section at every cursor).
        let (near_before, near_after) = (before.end, after.start);
        let distance = |at: usize| if at < near_before { near_before - at } else { at.saturating_sub(near_after) };
        let mut by_distance = collect_at(&[before.clone(), after.clone()], true, &distance);
        by_distance.sort_by_key(|(_, d)| *d);
        Arc::new(by_distance.into_iter().map(|(t, _)| t).collect())
    });
    (collect(&ranges), cursor_qual, file_tokens)
}

/// The identifiers of the rest of the file at the last request (keyed on that text): typing
/// inside a scope walks only the scope.
#[derive(Default)]
pub(super) struct TokenCache(Last<Arc<Vec<Token>>>);

/// Import statements of the languages indexed (Python, JS/TS, Rust, Go).
const IMPORTS: [&str; 5] = ["import_statement", "import_from_statement", "future_import_statement", "use_declaration", "import_declaration"];

/// Identifier leaves of the tree inside `range`, in order (one cursor walk, skipping the
/// subtrees outside it, and import statements with `skip_imports`).
fn leaves<'t>(root: Node<'t>, range: &Range<usize>, skip_imports: bool) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    if root.end_byte() <= range.start || root.start_byte() >= range.end {
        return out;
    }
    let mut c = root.walk();
    'walk: loop {
        let node = c.node();
        if node.child_count() == 0 {
            if node.kind().ends_with("identifier") && !node.is_missing() && node.start_byte() >= range.start && node.end_byte() <= range.end {
                out.push(node);
            }
        } else if skip_imports && IMPORTS.contains(&node.kind()) {
            // An import at module level names what the file may use, not a use: its names are
            // found through the bindings (`Tier::Unused` when nothing else uses them).
        } else if c.goto_first_child_for_byte(range.start).is_some() {
            if c.node().start_byte() < range.end {
                continue;
            }
            c.goto_parent();
        }
        // The next sibling that starts inside the range, else the parent's.
        loop {
            if c.goto_next_sibling() && c.node().start_byte() < range.end {
                continue 'walk;
            }
            if !c.goto_parent() {
                return out;
            }
        }
    }
}

/// For indentation languages: the `class …:` lines enclosing the line at `start`, outermost
/// first.
fn class_lines_above(text: &str, start: usize) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = crate::syntax::scope::enclosing_headers(text, start)
        .into_iter()
        .filter(|&at| text[at..].trim_start().starts_with("class "))
        .map(|at| at..text[at..].find('\n').map_or(text.len(), |i| at + i))
        .collect();
    out.reverse();
    out
}

/// The headers (up to their bodies) of the classes, impls and traits around the cursor,
/// outermost first: `self`'s class and its bases, the impl's trait and type.
fn headers(tree: &Tree, cursor: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut node = tree.root_node().descendant_for_byte_range(cursor, cursor);
    while let Some(n) = node {
        if matches!(n.kind(), "class_definition" | "class_declaration" | "abstract_class_declaration" | "impl_item" | "trait_item" | "class") {
            if let Some(body) = n.child_by_field_name("body").filter(|b| b.start_byte() <= cursor) {
                out.push(n.start_byte()..body.start_byte());
            }
        }
        node = n.parent();
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_and_words() {
        assert_eq!(chain_before("x = pkg.mod.f", 12, "."), Some("pkg.mod".to_owned()));
        assert_eq!(chain_before("crate::a::b", 10, "::"), Some("crate::a".to_owned()));
        assert_eq!(chain_before("f(x)", 2, "."), None);
        assert_eq!(trailing_word("a + foo_1"), "foo_1");
        assert_eq!(trailing_word("a."), "");
    }
}
