//! `ghostline eval --cross-file`: does the prompt's cross-file section help where the code
//! calls something defined in another file of the same project?
//!
//! In real third-party projects (folders given with `--source`, e.g. packages unpacked from
//! their source distributions), cuts whole-line holes at statements that call a function or
//! class the file imports from another file of the project; only the file with the hole is
//! "open" (the index reads the rest from disk, as in an editor). Each hole is asked twice of
//! the same engine and budget, with the section and without, and scored: next-line exact
//! match, edit similarity, whether the true callee is named, and whether it is called with
//! the right number of arguments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;
use tree_sitter::{Node, QueryCursor, StreamingIterator};

use super::{edit_similarity, percentile, source_files, Rng};
use crate::config::Config;
use crate::context::cross_file::Workspace;
use crate::engine::Input;
use crate::syntax::{self, Spec};
use crate::workspace::IndexOptions;

/// A hole at a line that calls `callee`, defined in another file.
#[derive(Debug, Clone)]
pub struct CallHole {
    pub file: PathBuf,
    pub line: usize,
    /// The file without the line's code (its indentation kept), and the cursor after it.
    pub text: String,
    pub cursor: usize,
    /// The line's code.
    pub target: String,
    pub callee: String,
    /// Arguments of the call in the true line.
    pub arity: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallResult {
    pub mode: &'static str,
    pub file: String,
    pub line: usize,
    pub callee: String,
    pub target: String,
    pub suggestion: String,
    pub exact: bool,
    pub edit_similarity: f64,
    /// The suggestion calls the callee.
    pub named: bool,
    /// … with as many arguments as the true line.
    pub arity: bool,
    /// The prompt's cross-file section defines the callee.
    pub section_defines: bool,
    /// The index offered the callee's definition (before the budget chose what went in).
    pub index_found: bool,
    /// Prompt tokens from the start of the callee's definition in the section to the end of
    /// the prompt (where the answer begins), when the section holds it.
    pub callee_distance: Option<usize>,
    /// Tokens of the cross-file section.
    pub section_tokens: usize,
    pub prompt_tokens: usize,
    pub ttft_ms: f64,
}

/// Names a Python file imports (`from m import a, b as c` → a, c; `import pkg.m as m` → m):
/// each with the module it comes from.
pub fn python_imports(text: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let joined = text.replace("\\\n", " ");
    let mut lines = joined.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("from ") {
            let Some((module, imported)) = rest.split_once(" import ") else { continue };
            let mut imported = imported.trim().to_owned();
            if imported.starts_with('(') {
                while !imported.contains(')') {
                    match lines.next() {
                        Some(more) => imported.push_str(more),
                        None => break,
                    }
                }
            }
            for item in imported.trim_matches(|c| c == '(' || c == ')').split(',') {
                let item = item.split('#').next().unwrap_or("").trim();
                let name = item.rsplit(" as ").next().unwrap_or(item).trim();
                if !name.is_empty() && name != "*" && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    names.insert(name.to_owned(), module.trim().to_owned());
                }
            }
        } else if let Some(rest) = line.strip_prefix("import ") {
            for item in rest.split(',') {
                let item = item.trim();
                let (module, alias) = match item.split_once(" as ") {
                    Some((m, a)) => (m.trim(), a.trim()),
                    None => (item, item.split('.').next().unwrap_or(item)),
                };
                if !alias.is_empty() {
                    names.insert(alias.to_owned(), module.to_owned());
                }
            }
        }
    }
    names
}

/// Arguments of a call's argument list (top-level commas; `f()` has none).
fn count_args(args: &str) -> usize {
    let inner = args.trim().trim_start_matches('(').trim_end_matches(')').trim();
    if inner.is_empty() {
        return 0;
    }
    let mut depth = 0i32;
    let mut count = 1;
    for c in inner.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => count += 1,
            _ => {}
        }
    }
    // A trailing comma is not an argument.
    count - usize::from(inner.ends_with(','))
}

/// The arguments of the first call of `callee` in `code` (`callee(` or `.callee(`), if any.
pub fn call_arity(code: &str, callee: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find(callee).map(|i| i + from) {
        let before_ok = at == 0 || !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let after = &code[at + callee.len()..];
        if before_ok && after.starts_with('(') {
            let mut depth = 0;
            for (i, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(count_args(&after[..=i]));
                        }
                    }
                    _ => {}
                }
            }
            // The call is not closed on this line: count what is there.
            return Some(count_args(after));
        }
        from = at + callee.len();
    }
    None
}

/// Where `text` (a cross-file section or a snippet) defines `name`: `def name(` or
/// `class name` followed by `(` or `:`.
pub fn definition_at(text: &str, name: &str) -> Option<usize> {
    let def = [format!("def {name}("), format!("class {name}("), format!("class {name}:")];
    def.iter().filter_map(|d| text.match_indices(d.as_str()).find(|(at, _)| *at == 0 || !text[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_')).map(|(at, _)| at)).min()
}

/// What the prompt plan of one hole held, seen on the model thread.
#[derive(Debug, Default, Clone, Copy)]
struct Probe {
    defines: bool,
    distance: Option<usize>,
    section_tokens: usize,
}

/// Top-level and class-level names `text` defines itself.
fn own_definitions(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let rest = t.strip_prefix("def ").or_else(|| t.strip_prefix("async def ")).or_else(|| t.strip_prefix("class "))?;
            Some(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
        })
        .collect()
}

/// The function a call node calls: `f` for `f(…)`, `g` for `m.g(…)` (with `m` as qualifier).
fn callee_of<'a>(call: Node<'_>, text: &'a str) -> Option<(Option<&'a str>, &'a str)> {
    let function = call.child_by_field_name("function")?;
    match function.kind() {
        "identifier" => Some((None, &text[function.byte_range()])),
        "attribute" => {
            let object = function.child_by_field_name("object")?;
            let attr = function.child_by_field_name("attribute")?;
            let qualifier = (object.kind() == "identifier").then(|| &text[object.byte_range()]);
            Some((qualifier, &text[attr.byte_range()]))
        }
        _ => None,
    }
}

/// Candidate holes of one Python file: statements inside function bodies whose first call is
/// to a name imported from the project (or `module.name` of a project module the file
/// imports) and not defined in this file. `project` holds the names some other file of the
/// project defines, `modules` the project's module names (file stems): a qualifier that is
/// not one (`_cv_app.get(…)` on an imported variable, `pickle.load(…)`) is no project call.
pub fn call_holes(spec: &Spec, file: &Path, text: &str, project: &BTreeSet<String>, modules: &BTreeSet<String>) -> Vec<CallHole> {
    let tree = spec.parse(text);
    let imports = python_imports(text);
    let own = own_definitions(text);
    let scope_idx = spec.scopes.capture_index_for_name("scope");
    let mut qc = QueryCursor::new();
    let mut matches = qc.matches(&spec.scopes, tree.root_node(), text.as_bytes());
    let mut body_lines = BTreeSet::new();
    while let Some(m) = matches.next() {
        for c in m.captures.iter().filter(|c| Some(c.index) == scope_idx) {
            body_lines.extend(c.node.start_position().row + 1..=c.node.end_position().row);
        }
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let mut starts = Vec::with_capacity(lines.len());
    let mut at = 0;
    for l in &lines {
        starts.push(at);
        at += l.len() + 1;
    }
    let mut holes = Vec::new();
    for line in body_lines {
        let Some(content) = lines.get(line) else { continue };
        let code = content.trim();
        if !(6..=120).contains(&code.len()) || code.starts_with('#') || !code.is_ascii() || code.ends_with(['(', ',', '\\']) {
            continue;
        }
        let indent = content.len() - content.trim_start().len();
        let start = starts[line] + indent;
        let Some(node) = tree.root_node().descendant_for_byte_range(start, start + code.len()) else { continue };
        // The first call on the line, in source order.
        let mut first_call = None;
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if n.kind() == "call" && n.start_position().row == line && first_call.is_none_or(|c: Node<'_>| n.start_byte() < c.start_byte()) {
                first_call = Some(n);
            }
            let mut cursor = n.walk();
            stack.extend(n.children(&mut cursor).filter(|c| c.start_position().row <= line));
        }
        let Some(call) = first_call else { continue };
        let Some((qualifier, name)) = callee_of(call, text) else { continue };
        let from_project = match qualifier {
            None => imports.contains_key(name) && !own.contains(name),
            Some(q) => imports.contains_key(q) && modules.contains(q) && !own.contains(name),
        };
        if !from_project || !project.contains(name) || name.len() < 3 {
            continue;
        }
        let Some(arity) = call_arity(code, name) else { continue };
        let line_end = starts[line] + content.len();
        let doc = format!("{}{}", &text[..start], &text[line_end..]);
        holes.push(CallHole { file: file.to_owned(), line, text: doc, cursor: start, target: code.to_owned(), callee: name.to_owned(), arity });
    }
    holes
}

/// Names defined at top level or in classes anywhere in `files` (the project's own), and the
/// project's module names (`from pkg import utils` then `utils.f()`).
fn project_names(files: &[PathBuf]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut names, mut modules) = (BTreeSet::new(), BTreeSet::new());
    for f in files {
        if let Ok(text) = std::fs::read_to_string(f) {
            names.extend(own_definitions(&text));
            if let Some(stem) = f.file_stem().and_then(|s| s.to_str()).filter(|s| *s != "__init__") {
                modules.insert(stem.to_owned());
            }
        }
    }
    (names, modules)
}

/// The modes each hole is asked in: name, with the cross-file section, with FIM markers.
const MODES: &[(&str, bool, bool)] = &[("single-file", false, true), ("cross-file", true, true), ("single-file prefix-only", false, false), ("cross-file prefix-only", true, false)];

pub fn run(config: &Config, projects: &[PathBuf], holes_per_project: usize, seed: u64, only: &[String], prompts: Option<&Path>, as_json: bool) -> Result<(), String> {
    let dump = super::PromptDump::new(prompts)?;
    let modes: Vec<(&str, bool, bool)> = MODES.iter().copied().filter(|(m, _, _)| only.is_empty() || only.iter().any(|o| o == m)).collect();
    // `--mode index`: what the index offers for each hole, and no model runs.
    let index_only = only.iter().any(|o| o == "index");
    if modes.is_empty() && !index_only {
        return Err(format!("--mode: none of {only:?} is a mode ({})", MODES.iter().map(|m| m.0).collect::<Vec<_>>().join(", ")));
    }
    if projects.is_empty() {
        return Err("--cross-file needs project folders: --source DIR (repeatable), e.g. packages unpacked from their sdists".into());
    }
    let spec = syntax::by_language_id("python").ok_or("no Python grammar")?;
    let mut completion = config.completion.clone();
    completion.cross_file = true;
    let (runtime, engine, info) = super::load_engine(config, completion)?;
    let mut rng = Rng::new(seed);
    let mut results = Vec::new();
    let mut n = 0;
    let (mut found, mut asked) = (0, 0);
    for root in projects {
        let root = root.canonicalize().map_err(|e| format!("{}: {e}", root.display()))?;
        let ws = Workspace::new(IndexOptions {
            roots: vec![root.clone()],
            exclude: config.context.exclude.clone(),
            max_files: config.context.max_files,
            max_file_bytes: config.context.max_file_bytes,
            memory_cap_bytes: config.context.memory_bytes,
        });
        let started = std::time::Instant::now();
        let stats = ws.index.build(&|_, _| {});
        let mut files = Vec::new();
        source_files(&root, spec, &mut files, 0);
        let (names, modules) = project_names(&files);
        let mut candidates: Vec<CallHole> = files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok().filter(|t| t.len() < 200_000 && !t.contains('\r')).map(|t| (f, t)))
            .flat_map(|(f, t)| call_holes(spec, f, &t, &names, &modules))
            .collect();
        // Named by the folder above a `src` layout's `src`.
        let name = root.iter().rev().find(|c| *c != "src").map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        eprintln!(
            "{name}: {} files indexed in {:.1} s, {} candidate holes",
            stats.files,
            started.elapsed().as_secs_f64(),
            candidates.len()
        );
        let mut picked = Vec::new();
        while picked.len() < holes_per_project && !candidates.is_empty() {
            picked.push(candidates.swap_remove(rng.below(candidates.len())));
        }
        for hole in &picked {
            n += 1;
            let tree = spec.parse(&hole.text);
            let cross = ws.cross_file(&hole.file, &hole.text, hole.cursor, Some((spec, &tree)), crate::prompt::budget::cross_file_bytes(config.completion.max_prompt_tokens));
            let index_found = cross.as_ref().is_some_and(|c| c.snippets.iter().any(|r| !r.recent && definition_at(&r.text, &hole.callee).is_some()));
            if index_only {
                let offered = cross.as_ref().map_or(0, |c| c.snippets.len());
                println!("{}:{} {:<28} index {:<3} ({offered} definitions)", hole.file.strip_prefix(&root).unwrap_or(&hole.file).display(), hole.line + 1, hole.callee, if index_found { "yes" } else { "no" });
                found += usize::from(index_found);
                asked += 1;
            }
            for &(mode, with_section, fim) in &modes {
                let cross = if with_section { cross.as_ref() } else { None };
                let input = Input { text: &hole.text, cursor: hole.cursor, syntax: Some((spec, &tree)), cross_file: cross };
                let mut draft = engine.draft(input);
                draft.fim = fim;
                let probe = std::sync::Arc::new(std::sync::Mutex::new(Probe::default()));
                let (seen, callee) = (std::sync::Arc::clone(&probe), hole.callee.clone());
                let inspect = Box::new(move |plan: &crate::prompt::PromptPlan, tokenizer: &dyn crate::model::Tokenize| {
                    let section_tokens = plan.section(crate::prompt::Section::CrossFile).len();
                    let at = definition_at(&plan.cross_file, &callee);
                    let distance = at.map(|at| tokenizer.tokenize(&plan.cross_file[at..]).len() + plan.tokens.len().saturating_sub(section_tokens));
                    *seen.lock().unwrap_or_else(|e| e.into_inner()) = Probe { defines: at.is_some(), distance, section_tokens };
                });
                let inspect = dump.inspector(n, mode, inspect);
                let s = runtime.block_on(engine.run_inspected(input, draft, inspect)).map_err(|e| e.to_string())?;
                let probe = *probe.lock().unwrap_or_else(|e| e.into_inner());
                let got = s.text.split('\n').next().unwrap_or("").trim().to_owned();
                dump.answer(n, mode, &hole.file.display().to_string(), hole.line + 1, &s.raw, &s.text, &hole.target);
                results.push(CallResult {
                    mode,
                    file: hole.file.strip_prefix(&root).unwrap_or(&hole.file).display().to_string(),
                    line: hole.line + 1,
                    callee: hole.callee.clone(),
                    target: hole.target.clone(),
                    exact: got == hole.target,
                    edit_similarity: edit_similarity(&got, &hole.target),
                    named: call_arity(&got, &hole.callee).is_some(),
                    arity: call_arity(&got, &hole.callee) == Some(hole.arity),
                    section_defines: probe.defines,
                    index_found,
                    callee_distance: probe.distance,
                    section_tokens: probe.section_tokens,
                    suggestion: got,
                    prompt_tokens: s.timings.prompt_tokens,
                    ttft_ms: s.timings.ttft_ms,
                });
            }
        }
    }
    if index_only {
        println!("index offered the callee in {found} of {asked} holes ({:.1} %)", found as f64 * 100.0 / asked.max(1) as f64);
        return Ok(());
    }
    report(&results, &info.path, seed, as_json);
    Ok(())
}

fn report(results: &[CallResult], model: &Path, seed: u64, as_json: bool) {
    let mut summary = Vec::new();
    for &(mode, _, _) in MODES {
        let rs: Vec<&CallResult> = results.iter().filter(|r| r.mode == mode).collect();
        if rs.is_empty() {
            continue;
        }
        let n = rs.len().max(1) as f64;
        let share = |f: &dyn Fn(&CallResult) -> bool| rs.iter().filter(|r| f(r)).count() as f64 / n;
        let mut tokens: Vec<f64> = rs.iter().map(|r| r.prompt_tokens as f64).collect();
        let mut ttft: Vec<f64> = rs.iter().map(|r| r.ttft_ms).collect();
        let mut distance: Vec<f64> = rs.iter().filter_map(|r| r.callee_distance).map(|d| d as f64).collect();
        summary.push(json!({
            "mode": mode,
            "index_found_callee": share(&|r| r.index_found),
            "callee_distance_median": percentile(&mut distance, 0.5),
            "holes": rs.len(),
            "exact_match": share(&|r| r.exact),
            "edit_similarity": rs.iter().map(|r| r.edit_similarity).sum::<f64>() / n,
            "callee_named": share(&|r| r.named),
            "callee_arity": share(&|r| r.arity),
            "section_defines_callee": share(&|r| r.section_defines),
            "prompt_tokens_median": percentile(&mut tokens, 0.5),
            "ttft_ms_median": percentile(&mut ttft, 0.5),
        }));
    }
    if as_json {
        println!("{}", json!({"model": model, "seed": seed, "summary": summary, "holes": results}));
        return;
    }
    println!("model: {}  seed: {}  (holes at calls of a function defined in another file of the project)", model.display(), seed);
    println!("per hole (cross-file mode): callee in the index's candidates / in the section, tokens from its definition to the answer");
    for r in results.iter().filter(|r| r.mode == "cross-file") {
        let distance = r.callee_distance.map_or("-".to_owned(), |d| d.to_string());
        println!(
            "  {}:{} {:<24} index {:<3} section {:<3} distance {:>5}  named {:<3} arity {:<3} sim {:.2}",
            r.file,
            r.line,
            r.callee,
            if r.index_found { "yes" } else { "no" },
            if r.section_defines { "yes" } else { "no" },
            distance,
            if r.named { "yes" } else { "no" },
            if r.arity { "yes" } else { "no" },
            r.edit_similarity,
        );
    }
    println!(
        "{:<24} {:>5} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8} {:>8} {:>7} {:>9}",
        "mode", "holes", "exact", "editsim", "named", "arity", "index", "section", "distance", "tokens", "ttft p50"
    );
    for s in &summary {
        let pct = |k: &str| s[k].as_f64().unwrap_or(0.0) * 100.0;
        println!(
            "{:<24} {:>5} {:>6.1}% {:>8.3} {:>6.1}% {:>6.1}% {:>6.1}% {:>7.1}% {:>8.0} {:>7.0} {:>7.0}ms",
            s["mode"].as_str().unwrap_or(""),
            s["holes"],
            pct("exact_match"),
            s["edit_similarity"].as_f64().unwrap_or(0.0),
            pct("callee_named"),
            pct("callee_arity"),
            pct("index_found_callee"),
            pct("section_defines_callee"),
            s["callee_distance_median"].as_f64().unwrap_or(0.0),
            s["prompt_tokens_median"].as_f64().unwrap_or(0.0),
            s["ttft_ms_median"].as_f64().unwrap_or(0.0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_and_arity() {
        let text = "from .utils import slug, clean as c\nfrom pkg.models import (\n    User,\n    Group,  # groups\n)\nimport pkg.db as db\nimport os, json\n";
        let names = python_imports(text);
        let keys: Vec<&str> = names.keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, vec!["Group", "User", "c", "db", "json", "os", "slug"]);
        assert_eq!(names["db"], "pkg.db");
        assert_eq!(call_arity("x = slug(a, f(b, c), [d, e])", "slug"), Some(3));
        assert_eq!(call_arity("return db.fetch()", "fetch"), Some(0));
        assert_eq!(call_arity("unslug(a)", "slug"), None);
        assert_eq!(call_arity("slug(a,", "slug"), Some(1));
        assert_eq!(call_arity("User(name=n, group=g,)", "User"), Some(2));
    }

    #[test]
    fn definitions_are_found_by_name_not_by_suffix() {
        let section = "<file_sep>a.py\ndef unslug(x): ...\nclass Slug:\n    def slug(self, x): ...\n";
        assert_eq!(definition_at(section, "slug"), section.find("def slug("));
        assert_eq!(definition_at(section, "Slug"), section.find("class Slug:"));
        assert_eq!(definition_at(section, "lug"), None);
        assert_eq!(definition_at("class Cart(Base):\n", "Cart"), Some(0));
    }

    #[test]
    fn holes_at_calls_of_imported_project_names() {
        let spec = syntax::by_language_id("python").unwrap();
        let text = "from .utils import slug\nfrom .globals import _ctx\nfrom . import nodes\nimport os\n\ndef local(x):\n    return x\n\ndef page(title):\n    name = slug(title, '-')\n    base = os.path.join('a', name)\n    c = _ctx.get(None)\n    return local(name)\n";
        let project: BTreeSet<String> = ["slug", "local", "get", "Node"].iter().map(|s| s.to_string()).collect();
        let modules: BTreeSet<String> = ["utils", "globals", "nodes"].iter().map(|s| s.to_string()).collect();
        let holes = call_holes(spec, Path::new("pkg/views.py"), text, &project, &modules);
        assert_eq!(holes.len(), 1, "{holes:?}");
        let h = &holes[0];
        assert_eq!((h.callee.as_str(), h.arity, h.target.as_str(), h.line), ("slug", 2, "name = slug(title, '-')", 9));
        // `_ctx` is a variable the file imports, not a module: `_ctx.get` is no project call.
        let with_module = text.replace("    c = _ctx.get(None)\n", "    n = nodes.Node(name)\n");
        let holes = call_holes(spec, Path::new("pkg/views.py"), &with_module, &project, &modules);
        assert_eq!(holes.iter().map(|h| h.callee.as_str()).collect::<Vec<_>>(), ["slug", "Node"]);
        assert_eq!(&h.text[h.cursor - 4..h.cursor + 1], "    \n");
    }
}
