//! `ghostline eval --next-edit`: are the next edits ghostline proposes after an edit the ones
//! the code needs?
//!
//! In real third-party Python projects (folders given with `--source`), synthesizes an edit
//! at one site and the truth of what else must change, found by tokens (not by the syntax
//! tree the rules use): a parameter, local or module function renamed at its definition (the
//! truth: its other uses), a parameter removed or added (the truth: the calls in the file
//! updated), a call on one of several same-shaped lines given an extra argument or another
//! method (the truth: the other lines), a module function renamed where other files of the
//! project import it (the truth, by tokens: its uses in those files; proposed through the
//! workspace index built over the project) — and no-edit cases, after which nothing else should
//! change (a string or number changed, a parameter added with a default, a use pointed at
//! another parameter). Each edit goes through the edit history and the planner as the server
//! runs them, with the FIM model for the holes; scored by line: location precision and
//! recall, exact match of the proposed lines (ignoring whitespace), no-edit precision,
//! reversals (a proposal that changes the user's edited line) and the latency from the edit
//! to the proposals.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ropey::Rope;
use serde::Serialize;
use tree_sitter::Node;

use super::{percentile, source_files, Rng};
use crate::config::Config;
use crate::model::CancelFlag;
use crate::nextedit::lex::{lex, Tok, TokKind};
use crate::nextedit::{self, history::Change, Doc, History};
use crate::syntax::{self, Spec};
use crate::workspace::{Index, IndexOptions};

/// The kinds of task, in the report's order.
pub const KINDS: &[&str] = &["rename-param", "rename-local", "rename-function", "rename-cross-file", "remove-param", "add-param", "repeat-argument", "repeat-method", "no-edit-string", "no-edit-number", "no-edit-default-param", "no-edit-use"];

/// One synthesized edit: the file before and after the user's edit, and the file as it should
/// be once the next edits are made (`expected == after` for no-edit cases).
#[derive(Debug, Clone)]
pub struct Task {
    pub kind: &'static str,
    pub file: PathBuf,
    pub before: String,
    pub after: String,
    pub expected: String,
    /// `rename-cross-file`: the other files that use the renamed function (path, text,
    /// text once the next edits are made) — what is scored — and the index over the project.
    pub others: Vec<(PathBuf, String, String)>,
    pub index: Option<Index>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct KindReport {
    pub kind: &'static str,
    pub tasks: usize,
    pub proposed_lines: usize,
    pub true_lines: usize,
    pub matched_lines: usize,
    pub exact_lines: usize,
    pub precision: f64,
    pub recall: f64,
    /// Of the lines that needed an edit, those proposed exactly (whitespace aside).
    pub exact: f64,
    /// No-edit kinds: the share of tasks with nothing proposed.
    pub no_edit_precision: Option<f64>,
    pub reversals: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

/// Runs the kinds named in `only` (all when empty).
pub fn run(config: &Config, projects: &[PathBuf], per_kind: usize, seed: u64, only: &[String], as_json: bool) -> Result<(), String> {
    if projects.is_empty() {
        return Err("--next-edit needs project folders: --source DIR (repeatable), e.g. packages unpacked from their sdists".into());
    }
    if let Some(unknown) = only.iter().find(|k| !KINDS.contains(&k.as_str())) {
        return Err(format!("no kind `{unknown}`: the kinds are {}", KINDS.join(", ")));
    }
    let kinds: Vec<&'static str> = KINDS.iter().copied().filter(|k| only.is_empty() || only.iter().any(|o| o == k)).collect();
    let spec = syntax::by_language_id("python").ok_or("no Python grammar")?;
    let (runtime, engine, _) = super::load_engine(config, config.completion.clone())?;
    let mut rng = Rng::new(seed);
    let mut tasks = Vec::new();
    for root in projects {
        let mut files = Vec::new();
        source_files(root, spec, &mut files, 0);
        let texts: Vec<(PathBuf, String)> = files.into_iter().filter_map(|f| std::fs::read_to_string(&f).ok().filter(|t| t.len() < 200_000 && !t.contains('\r')).map(|t| (f, t))).collect();
        let index = Index::new(IndexOptions { roots: vec![root.clone()], ..Default::default() });
        if kinds.contains(&"rename-cross-file") {
            index.build(&|_, _| {});
        }
        for &kind in &kinds {
            let mut candidates: Vec<Task> = if kind == "rename-cross-file" {
                synthesize_cross(spec, &texts, &index)
            } else {
                texts.iter().flat_map(|(f, t)| synthesize(kind, spec, f, t)).collect()
            };
            let mut picked = 0;
            while picked < per_kind && !candidates.is_empty() {
                tasks.push(candidates.swap_remove(rng.below(candidates.len())));
                picked += 1;
            }
        }
        eprintln!("{}: {} files, {} tasks so far", root.display(), texts.len(), tasks.len());
    }
    let mut reports: Vec<KindReport> = kinds.iter().map(|&kind| KindReport { kind, ..Default::default() }).collect();
    let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for task in &tasks {
        let k = kinds.iter().position(|&n| n == task.kind).expect("a known kind");
        let (proposed, elsewhere, ms) = runtime.block_on(propose(&engine, spec, task))?;
        latencies[k].push(ms);
        let r = &mut reports[k];
        r.tasks += 1;
        if task.others.is_empty() {
            score(r, task, &proposed);
        } else {
            score_others(r, task, &elsewhere);
        }
    }
    for (r, ms) in reports.iter_mut().zip(&mut latencies) {
        r.precision = ratio(r.matched_lines, r.proposed_lines);
        r.recall = ratio(r.matched_lines, r.true_lines);
        r.exact = ratio(r.exact_lines, r.true_lines);
        r.p50_ms = percentile(ms, 0.5);
        r.p95_ms = percentile(ms, 0.95);
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?);
        return Ok(());
    }
    println!("| kind | tasks | precision | recall | exact | no-edit precision | reversals | p50 ms | p95 ms |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &reports {
        let no_edit = r.no_edit_precision.map_or("–".to_owned(), |p| format!("{p:.2}"));
        let (p, rc, ex) = if r.no_edit_precision.is_some() { ("–".to_owned(), "–".to_owned(), "–".to_owned()) } else { (format!("{:.2}", r.precision), format!("{:.2}", r.recall), format!("{:.0} %", r.exact * 100.0)) };
        println!("| {} | {} | {p} | {rc} | {ex} | {no_edit} | {} | {:.1} | {:.1} |", r.kind, r.tasks, r.reversals, r.p50_ms, r.p95_ms);
    }
    Ok(())
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        return 1.0;
    }
    a as f64 / b as f64
}

/// Runs the user's edit through the history and the planner (and the model for holes, the
/// index for other files), as the server does: the proposed text, other files' proposed
/// texts, and the milliseconds from the edit to the proposals.
async fn propose(engine: &crate::engine::Engine, spec: &'static Spec, task: &Task) -> Result<(String, Vec<(PathBuf, String)>, f64), String> {
    let started = Instant::now();
    let (old, new) = (Rope::from_str(&task.before), Rope::from_str(&task.after));
    let prefix = task.before.chars().zip(task.after.chars()).take_while(|(a, b)| a == b).count();
    let room = old.len_chars().min(new.len_chars()) - prefix;
    let suffix = task.before.chars().rev().zip(task.after.chars().rev()).take(room).take_while(|(a, b)| a == b).count();
    let mut history = History::default();
    history.record("file:///eval.py", &old, &new, Some(Change { start: prefix, old_end: old.len_chars() - suffix, new_end: new.len_chars() - suffix }), started);
    let Some(event) = history.last_of("file:///eval.py") else { return Ok((task.after.clone(), Vec::new(), 0.0)) };
    let tree = spec.parse(&task.after);
    let doc = Doc { text: &task.after, spec, tree: &tree };
    let plan = nextedit::plan(event, doc);
    let mut edits = plan.edits;
    let name = task.file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    for hole in &plan.holes {
        if let Some(p) = nextedit::fill::fill(engine, doc, hole, &name, CancelFlag::new()).await.map_err(|e| e.to_string())? {
            edits.push(p);
        }
    }
    let mut elsewhere = Vec::new();
    if let (Some(renamed), Some(index)) = (&plan.exported, &task.index) {
        let read = |p: &Path| std::fs::read_to_string(p).ok().map(|t| (t, None));
        for f in nextedit::across::plan(index, &task.file, renamed, &read) {
            elsewhere.push((f.path.clone(), apply(&f.text, &f.edits)));
        }
    }
    let ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((apply(&task.after, &edits), elsewhere, ms))
}

fn apply(text: &str, edits: &[nextedit::Proposal]) -> String {
    let mut sorted = edits.to_vec();
    sorted.sort_by_key(|p| std::cmp::Reverse(p.range.start));
    let mut out = text.to_owned();
    let mut floor = usize::MAX;
    for p in sorted {
        if p.range.end <= floor {
            out.replace_range(p.range.clone(), &p.new_text);
            floor = p.range.start;
        }
    }
    out
}

/// Scores one task by lines: the lines the user's edit left as they should be (`after` vs
/// `expected`), those the proposals changed (`after` vs `proposed`).
fn score(r: &mut KindReport, task: &Task, proposed: &str) {
    let lines = |t: &str| t.lines().map(str::to_owned).collect::<Vec<_>>();
    let (after, expected, got) = (lines(&task.after), lines(&task.expected), lines(proposed));
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let diff = |a: &[String], b: &[String]| -> BTreeSet<usize> { (0..a.len().max(b.len())).filter(|&i| a.get(i) != b.get(i)).collect() };
    let (truth, touched) = (diff(&after, &expected), diff(&after, &got));
    let edited: BTreeSet<usize> = diff(&lines(&task.before), &after);
    r.reversals += touched.intersection(&edited).count();
    if task.kind.starts_with("no-edit") {
        let hits = r.no_edit_precision.unwrap_or(0.0) * (r.tasks - 1) as f64 + f64::from(u8::from(touched.is_empty()));
        r.no_edit_precision = Some(hits / r.tasks as f64);
    }
    r.proposed_lines += touched.len();
    r.true_lines += truth.len();
    r.matched_lines += touched.intersection(&truth).count();
    if show() && (touched != truth || truth.iter().any(|&i| got.get(i) != expected.get(i))) {
        show_lines(&task.kind, &task.file, truth.union(&touched).map(|&i| (i, after.get(i), expected.get(i), got.get(i))));
    }
    r.exact_lines += truth.iter().filter(|&&i| touched.contains(&i) && got.get(i).map(|l| squash(l)) == expected.get(i).map(|l| squash(l))).count();
}

/// Whether `GHOSTLINE_EVAL_SHOW` asks for the lines a task got wrong.
fn show() -> bool {
    std::env::var_os("GHOSTLINE_EVAL_SHOW").is_some()
}

/// Prints a task's lines in `file` (number, after the user's edit, expected, proposed) to
/// stderr: third-party code, on the developer's request only.
fn show_lines<'a>(kind: &str, file: &Path, lines: impl Iterator<Item = (usize, Option<&'a String>, Option<&'a String>, Option<&'a String>)>) {
    eprintln!("--- {kind} {}", file.display());
    for (i, after, expected, got) in lines {
        let text = |s: Option<&String>| s.map_or("", |s| s.as_str()).to_owned();
        eprintln!("{i:5} after    {}\n      expected {}\n      got      {}", text(after), text(expected), text(got));
    }
}

/// Scores a task whose truth is in other files, by (file, line): the lines the truth changes
/// in each, those the proposals changed (in any file, the truth's or not).
fn score_others(r: &mut KindReport, task: &Task, proposed: &[(PathBuf, String)]) {
    let lines = |t: &str| t.lines().map(str::to_owned).collect::<Vec<_>>();
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let diff = |a: &[String], b: &[String]| -> BTreeSet<usize> { (0..a.len().max(b.len())).filter(|&i| a.get(i) != b.get(i)).collect() };
    for (path, text, expected) in &task.others {
        let got = proposed.iter().find(|(p, _)| crate::workspace::canonical(p) == crate::workspace::canonical(path)).map_or(text.as_str(), |(_, t)| t.as_str());
        let (after, expected, got) = (lines(text), lines(expected), lines(got));
        let (truth, touched) = (diff(&after, &expected), diff(&after, &got));
        r.proposed_lines += touched.len();
        r.true_lines += truth.len();
        r.matched_lines += touched.intersection(&truth).count();
        r.exact_lines += truth.iter().filter(|&&i| touched.contains(&i) && got.get(i).map(|l| squash(l)) == expected.get(i).map(|l| squash(l))).count();
        if show() && (touched != truth || truth.iter().any(|&i| got.get(i) != expected.get(i))) {
            show_lines(&task.kind, path, truth.union(&touched).map(|&i| (i, after.get(i), expected.get(i), got.get(i))));
        }
    }
    for (path, got) in proposed {
        if task.others.iter().any(|(p, _, _)| crate::workspace::canonical(p) == crate::workspace::canonical(path)) {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let (a, b) = (lines(&text), lines(got));
        let touched: Vec<usize> = (0..a.len().max(b.len())).filter(|&i| a.get(i) != b.get(i)).collect();
        r.proposed_lines += touched.len();
        if show() {
            show_lines(&task.kind, path, touched.iter().map(|&i| (i, a.get(i), a.get(i), b.get(i))));
        }
    }
}

/// `rename-cross-file` tasks: a module-level function of one file renamed at its definition,
/// where other files of the project import it — `from .m import f`, `from pkg.m import f [as
/// g]`, `import pkg.m` / `from pkg import m` then `m.f`, at the top level or in a function's
/// body (then only that function's uses count), and from a package whose `__init__.py`
/// re-exports it (`from .m import f` there, followed from package to package) — the truth
/// found by tokens: the import's name, the file's (or the function's) uses of `f` (unaliased)
/// or `m.f`, and a re-exporting `__init__.py`'s `__all__` strings. Files where the name is
/// bound otherwise too (a parameter, an assignment, a definition) are left out.
fn synthesize_cross(spec: &'static Spec, texts: &[(PathBuf, String)], index: &Index) -> Vec<Task> {
    let mut out = Vec::new();
    for (file, text) in texts {
        let Some(module) = file.file_stem().map(|s| s.to_string_lossy().into_owned()).filter(|m| m != "__init__") else { continue };
        // The project's other files (its package and subpackages), wherever they import it from.
        let siblings: Vec<&(PathBuf, String)> = texts.iter().filter(|(g, _)| g != file).collect();
        if siblings.is_empty() {
            continue;
        }
        for task in synthesize("rename-cross-file", spec, file, text) {
            let (b, a) = (lex(&task.before, "#"), lex(&task.after, "#"));
            let Some((old, new)) = b.iter().zip(&a).find(|(x, y)| x.text != y.text).map(|(x, y)| (x.text.to_owned(), y.text.to_owned())) else { continue };
            if old.starts_with("__") {
                continue;
            }
            // The modules it can be imported from: its own, then the packages re-exporting it.
            let mut modules = vec![module.clone()];
            let mut k = 0;
            while k < modules.len() {
                for (g, t) in &siblings {
                    let package = g.parent().and_then(|p| p.file_name()).map(|p| p.to_string_lossy().into_owned());
                    let Some(package) = package.filter(|p| g.file_name().is_some_and(|n| n == "__init__.py") && !modules.contains(p)) else { continue };
                    if cross_uses(t, &modules[k..=k], &old).is_some_and(|(_, re_exported)| re_exported) {
                        modules.push(package);
                    }
                }
                k += 1;
            }
            let others: Vec<(PathBuf, String, String)> = siblings
                .iter()
                .filter_map(|(g, t)| {
                    let (ranges, _) = cross_uses(t, &modules, &old)?;
                    let edits: Vec<_> = ranges.into_iter().map(|r| (r, new.as_str())).collect();
                    Some((g.clone(), t.clone(), splice(t, &edits)))
                })
                .collect();
            if !others.is_empty() {
                out.push(Task { others, index: Some(index.clone()), ..task });
            }
        }
    }
    out
}

/// By tokens: where `text` uses `name` of one of `modules` (see [`synthesize_cross`]), and
/// whether it imports the name unaliased at its top level (so re-exports it); `None` when it
/// does not import it, or binds `name` itself too.
fn cross_uses(text: &str, modules: &[String], name: &str) -> Option<(Vec<std::ops::Range<usize>>, bool)> {
    let toks = lex(text, "#");
    let first_on_line = |i: usize| text[..toks[i].at].rsplit('\n').next().is_some_and(|before| before.trim().is_empty());
    let mut ranges = Vec::new();
    // Where the name is imported unaliased (the file, or a function's lines), and where a
    // module of it is (its local name's parts, and where).
    let mut direct: Vec<std::ops::Range<usize>> = Vec::new();
    let mut imported_modules: Vec<(Vec<&str>, std::ops::Range<usize>)> = Vec::new();
    let mut re_exported = false;
    let mut i = 0;
    while i < toks.len() {
        if !first_on_line(i) || !matches!(toks[i].text, "from" | "import") {
            i += 1;
            continue;
        }
        // The statement's tokens: to the line's end, or to the closing parenthesis.
        let mut j = i + 1;
        let mut depth = 0;
        while j < toks.len() && (depth > 0 || !first_on_line(j)) {
            match toks[j].text {
                "(" => depth += 1,
                ")" => depth -= 1,
                _ => {}
            }
            j += 1;
        }
        let stmt = &toks[i..j];
        let Some(scope) = import_scope(text, toks[i].at) else {
            i = j;
            continue;
        };
        let top = scope == (0..text.len());
        // (dotted name, alias) pairs after `import`.
        let at = stmt.iter().position(|t| t.text == "import").unwrap_or(0);
        let mut items: Vec<(Vec<&Tok<'_>>, Option<&Tok<'_>>)> = Vec::new();
        for part in stmt[at + 1..].split(|t| t.text == ",") {
            let part: Vec<&Tok<'_>> = part.iter().filter(|t| !matches!(t.text, "(" | ")")).collect();
            let (dotted, alias) = match part.iter().position(|t| t.text == "as") {
                Some(k) => (part[..k].to_vec(), part.get(k + 1).copied()),
                None => (part, None),
            };
            if !dotted.is_empty() {
                items.push((dotted, alias));
            }
        }
        let is_module = |m: &str| modules.iter().any(|x| x == m);
        if toks[i].text == "from" {
            let from: Vec<&str> = stmt[1..at].iter().map(|t| t.text).filter(|t| *t != ".").collect();
            for (dotted, alias) in &items {
                let item = dotted.iter().map(|t| t.text).collect::<Vec<_>>().join("");
                if from.last().is_some_and(|m| is_module(m)) && item == name {
                    ranges.push(dotted[0].at..dotted[0].end());
                    if alias.is_none() {
                        re_exported |= top;
                        direct.push(scope.clone());
                    }
                } else if is_module(&item) {
                    imported_modules.push((vec![alias.map_or(dotted[0].text, |a| a.text)], scope.clone()));
                }
            }
        } else {
            for (dotted, alias) in &items {
                let parts: Vec<&str> = dotted.iter().map(|t| t.text).filter(|t| *t != ".").collect();
                if parts.last().is_some_and(|m| is_module(m)) {
                    imported_modules.push((alias.map_or(parts, |a| vec![a.text]), scope.clone()));
                }
            }
        }
        i = j;
    }
    if !direct.is_empty() {
        let bound = toks.windows(2).any(|w| (matches!(w[0].text, "def" | "class" | "as" | "for" | "global") && w[1].text == name) || (w[0].text == name && w[1].text == "="))
            || toks.windows(3).any(|w| matches!(w[0].text, "(" | ",") && w[1].text == name && matches!(w[2].text, ")" | "," | ":" | "="))
            || toks.iter().any(|t| t.kind == TokKind::Str && t.text.starts_with(['f', 'F']) && t.text.contains(name));
        if bound {
            return None;
        }
        for scope in &direct {
            ranges.extend(variable_uses(text, scope.clone(), name));
        }
    }
    if re_exported {
        // `__all__ = ["name", …]`: the string's contents.
        let quoted = [format!("\"{name}\""), format!("'{name}'")];
        for (k, t) in toks.iter().enumerate() {
            if t.text == "__all__" && first_on_line(k) {
                let end = toks[k..].iter().position(|u| u.text == "]" || u.text == ")").map_or(toks.len(), |e| k + e);
                for u in &toks[k..end] {
                    if u.kind == TokKind::Str && quoted.iter().any(|q| q == u.text) {
                        ranges.push(u.at + 1..u.end() - 1);
                    }
                }
            }
        }
    }
    for (m, scope) in &imported_modules {
        let n = m.len() * 2 + 1;
        for (k, w) in toks.windows(n).enumerate() {
            let prefix_ok = m.iter().enumerate().all(|(q, part)| w[2 * q].text == *part && w[2 * q + 1].text == ".");
            let before_ok = k == 0 || toks[k - 1].text != ".";
            if prefix_ok && before_ok && w[n - 1].text == name && scope.contains(&w[0].at) {
                ranges.push(w[n - 1].at..w[n - 1].end());
            }
        }
    }
    ranges.sort_by_key(|r| r.start);
    ranges.dedup();
    (!ranges.is_empty()).then_some((ranges, re_exported))
}

/// Where an import at byte `at` binds its names, by indentation: the whole file at the top
/// level (or under a top-level `if`/`try`), a function's lines when it is in a function
/// (`def` and its indented block), `None` in a class body.
fn import_scope(text: &str, at: usize) -> Option<std::ops::Range<usize>> {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let mut level = at - line_start;
    let mut end = line_start;
    while level > 0 {
        // The nearest line above, less indented, that is not blank or a comment.
        let above = text[..end.saturating_sub(1)].rfind('\n').map_or(0, |i| i + 1);
        if end == 0 {
            return Some(0..text.len());
        }
        end = above;
        let line = text[above..].split('\n').next().unwrap_or("");
        if line.trim().is_empty() || line.trim_start().starts_with('#') || indent(line) >= level {
            continue;
        }
        level = indent(line);
        let head = line.trim_start();
        if head.starts_with("class ") {
            return None;
        }
        if head.starts_with("def ") || head.starts_with("async def ") {
            // The block: to the next line (not blank, not a comment) indented no deeper.
            let mut stop = text.len();
            let mut pos = above + line.len() + 1;
            while pos < text.len() {
                let l = text[pos..].split('\n').next().unwrap_or("");
                if !l.trim().is_empty() && !l.trim_start().starts_with('#') && indent(l) <= level {
                    stop = pos;
                    break;
                }
                pos += l.len() + 1;
            }
            return Some(above..stop);
        }
    }
    Some(0..text.len())
}

/// The tasks of `kind` that `text` offers.
pub fn synthesize(kind: &'static str, spec: &'static Spec, file: &Path, text: &str) -> Vec<Task> {
    let tree = spec.parse(text);
    if tree.root_node().has_error() {
        return Vec::new();
    }
    let make = |before: String, after: String, expected: String| Task { kind, file: file.to_owned(), before, after, expected, others: Vec::new(), index: None };
    let mut out = Vec::new();
    let root = tree.root_node();
    let functions = nodes(root, "function_definition");
    match kind {
        "rename-param" | "no-edit-use" => {
            for f in functions.iter().filter(|f| plain_function(**f, text)) {
                let params = simple_params(*f, text);
                let body = f.child_by_field_name("body").expect("a function has a body");
                for (i, p) in params.iter().enumerate() {
                    let name = &text[p.byte_range()];
                    if matches!(name, "self" | "cls") || keyword_elsewhere(text, name) {
                        continue;
                    }
                    let uses = variable_uses(text, body.byte_range(), name);
                    if uses.is_empty() {
                        continue;
                    }
                    if kind == "rename-param" {
                        let new = format!("{name}_renamed");
                        let after = splice(text, &[(p.byte_range(), new.as_str())]);
                        let mut all: Vec<_> = uses.iter().map(|r| (r.clone(), new.as_str())).collect();
                        all.push((p.byte_range(), new.as_str()));
                        out.push(make(text.to_owned(), after, splice(text, &all)));
                    } else if assigned(text, uses[0].end) {
                        continue;
                    } else if let Some(other) = params.iter().enumerate().find(|(j, q)| *j != i && !matches!(&text[q.byte_range()], "self" | "cls")).map(|(_, q)| &text[q.byte_range()]) {
                        let after = splice(text, &[(uses[0].clone(), other)]);
                        out.push(make(text.to_owned(), after.clone(), after));
                    }
                }
            }
        }
        "rename-local" => {
            for f in functions.iter().filter(|f| plain_function(**f, text)) {
                let body = f.child_by_field_name("body").expect("a function has a body");
                let header = f.child_by_field_name("parameters").map_or(0..0, |p| p.byte_range());
                let params: Vec<&str> = lex(&text[header], "#").into_iter().filter(|t| t.kind == TokKind::Ident).map(|t| t.text).collect();
                for a in nodes(body, "assignment") {
                    let Some(left) = a.child_by_field_name("left").filter(|l| l.kind() == "identifier") else { continue };
                    let name = &text[left.byte_range()];
                    if params.contains(&name) || keyword_elsewhere(text, name) || a.parent().is_none_or(|s| s.kind() != "expression_statement") {
                        continue;
                    }
                    let uses = variable_uses(text, body.byte_range(), name);
                    // Its first binding, used after it.
                    if uses.first().is_none_or(|u| u.start != left.start_byte()) || uses.len() < 2 {
                        continue;
                    }
                    let new = format!("{name}_renamed");
                    let after = splice(text, &[(left.byte_range(), new.as_str())]);
                    let all: Vec<_> = uses.iter().map(|r| (r.clone(), new.as_str())).collect();
                    out.push(make(text.to_owned(), after, splice(text, &all)));
                }
            }
        }
        // `rename-cross-file`: the same, its uses in the file not needed (`synthesize_cross`).
        "rename-function" | "rename-cross-file" => {
            for f in functions.iter().filter(|f| f.parent().is_some_and(|p| p.kind() == "module")) {
                let Some(id) = f.child_by_field_name("name") else { continue };
                let name = &text[id.byte_range()];
                let in_f_string = lex(text, "#").iter().any(|t| t.kind == TokKind::Str && t.text.starts_with(['f', 'F']) && t.text.contains(name));
                if in_f_string || keyword_elsewhere(text, name) || text.matches(&format!("def {name}(")).count() != 1 || text.contains(&format!("lambda {name}")) {
                    continue;
                }
                let uses = variable_uses(text, 0..text.len(), name);
                // Nothing but the definition and plain uses (no parameter or local of that name).
                if uses.len() < if kind == "rename-function" { 2 } else { 1 } || nodes(root, "parameters").iter().any(|p| !variable_uses(text, p.byte_range(), name).is_empty()) {
                    continue;
                }
                let new = format!("{name}_renamed");
                let after = splice(text, &[(id.byte_range(), new.as_str())]);
                let all: Vec<_> = uses.iter().map(|r| (r.clone(), new.as_str())).collect();
                out.push(make(text.to_owned(), after, splice(text, &all)));
            }
        }
        "remove-param" | "add-param" | "no-edit-default-param" => {
            for f in functions.iter().filter(|f| f.parent().is_some_and(|p| p.kind() == "module")) {
                let (Some(id), Some(params)) = (f.child_by_field_name("name"), f.child_by_field_name("parameters")) else { continue };
                let name = &text[id.byte_range()];
                let list: Vec<Node<'_>> = named(params);
                if list.is_empty() || params.start_position().row != params.end_position().row || list.iter().any(|p| p.kind() != "identifier") {
                    continue;
                }
                let calls: Vec<Node<'_>> = nodes(root, "call")
                    .into_iter()
                    .filter(|c| c.child_by_field_name("function").is_some_and(|f| f.kind() == "identifier" && &text[f.byte_range()] == name))
                    .collect();
                let n = list.len();
                let fits = |c: &Node<'_>| {
                    if c.child_by_field_name("arguments").is_none_or(|a| a.kind() != "argument_list") {
                        return false;
                    }
                    let args = c.child_by_field_name("arguments").map(named).unwrap_or_default();
                    c.start_position().row == c.end_position().row && args.len() == n && args.iter().all(|a| !matches!(a.kind(), "keyword_argument" | "list_splat" | "dictionary_splat" | "generator_expression"))
                };
                if calls.is_empty() || !calls.iter().all(fits) || text.matches(&format!("{name}(")).count() != calls.len() + 1 {
                    continue;
                }
                let names: Vec<&str> = list.iter().map(|p| &text[p.byte_range()]).collect();
                let params_without = |k: usize| format!("({})", names.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, s)| *s).collect::<Vec<_>>().join(", "));
                let args_without = |c: &Node<'_>, k: usize| {
                    let args = c.child_by_field_name("arguments").map(named).unwrap_or_default();
                    args.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, a)| &text[a.byte_range()]).collect::<Vec<_>>().join(", ")
                };
                let args_range = |c: &Node<'_>| {
                    let a = c.child_by_field_name("arguments").expect("a call has arguments");
                    a.start_byte() + 1..a.end_byte() - 1
                };
                let k = n - 1;
                if matches!(names[k], "self" | "cls") {
                    continue;
                }
                match kind {
                    "remove-param" => {
                        let after = splice(text, &[(params.byte_range(), params_without(k).as_str())]);
                        let new_args: Vec<String> = calls.iter().map(|c| args_without(c, k)).collect();
                        let mut all: Vec<_> = calls.iter().zip(&new_args).map(|(c, a)| (args_range(c), a.as_str())).collect();
                        let p = params_without(k);
                        all.push((params.byte_range(), p.as_str()));
                        out.push(make(text.to_owned(), after, splice(text, &all)));
                    }
                    "add-param" => {
                        let new_args: Vec<String> = calls.iter().map(|c| args_without(c, k)).collect();
                        let p = params_without(k);
                        let mut all: Vec<_> = calls.iter().zip(&new_args).map(|(c, a)| (args_range(c), a.as_str())).collect();
                        all.push((params.byte_range(), p.as_str()));
                        let base = splice(text, &all);
                        let after = splice(text, &calls.iter().zip(&new_args).map(|(c, a)| (args_range(c), a.as_str())).collect::<Vec<_>>());
                        out.push(make(base, after, text.to_owned()));
                    }
                    _ => {
                        let with = format!("({}, extra=None)", names.join(", "));
                        let after = splice(text, &[(params.byte_range(), with.as_str())]);
                        out.push(make(text.to_owned(), after.clone(), after));
                    }
                }
            }
        }
        "repeat-argument" | "repeat-method" | "no-edit-string" | "no-edit-number" => {
            for group in same_shape_groups(text) {
                let first = group[0];
                let line_of = |i: usize| line_range(text, i);
                match kind {
                    "repeat-argument" => {
                        let edit = |i: usize| {
                            let r = line_of(i);
                            let close = text[r.clone()].rfind(')').map(|c| r.start + c)?;
                            let empty = text[..close].ends_with('(');
                            Some((close..close, if empty { "flag=True" } else { ", flag=True" }))
                        };
                        if !text[line_of(first)].trim_end().ends_with(')') {
                            continue;
                        }
                        let Some(e) = edit(first) else { continue };
                        let all: Vec<_> = group.iter().filter_map(|&i| edit(i)).collect();
                        out.push(make(text.to_owned(), splice(text, &[e]), splice(text, &all)));
                    }
                    "repeat-method" => {
                        let edit = |i: usize| {
                            let r = line_of(i);
                            let toks = lex(&text[r.clone()], "#");
                            let at = toks.windows(3).position(|w| w[0].text == "." && w[1].kind == TokKind::Ident && w[2].text == "(")?;
                            Some((r.start + toks[at + 1].at..r.start + toks[at + 1].end(), format!("{}_v2", toks[at + 1].text)))
                        };
                        let Some(e) = edit(first) else { continue };
                        let all: Vec<(std::ops::Range<usize>, String)> = group.iter().filter_map(|&i| edit(i)).collect();
                        let refs: Vec<_> = all.iter().map(|(r, s)| (r.clone(), s.as_str())).collect();
                        out.push(make(text.to_owned(), splice(text, &[(e.0, e.1.as_str())]), splice(text, &refs)));
                    }
                    _ => {
                        let want = if kind == "no-edit-string" { TokKind::Str } else { TokKind::Number };
                        let found = group.iter().find_map(|&i| {
                            let r = line_of(i);
                            let toks = lex(&text[r.clone()], "#");
                            let t = toks.into_iter().find(|t| t.kind == want && (want != TokKind::Str || (t.text.len() >= 3 && !t.text.starts_with(['f', 'F', 'r', 'b']))))?;
                            Some((r, t))
                        });
                        let Some((r, t)) = found else { continue };
                        let replacement = if want == TokKind::Str {
                            let q = &t.text[..1];
                            format!("{q}{}_changed{q}", &t.text[1..t.text.len() - 1])
                        } else {
                            "42".to_owned()
                        };
                        if t.text == replacement {
                            continue;
                        }
                        let after = splice(text, &[(r.start + t.at..r.start + t.end(), replacement.as_str())]);
                        out.push(make(text.to_owned(), after.clone(), after));
                    }
                }
            }
        }
        _ => {}
    }
    out
}

/// Descendants of `node` of `kind`, in order.
fn nodes<'t>(node: Node<'t>, kind: &str) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == kind {
            out.push(n);
        }
        let mut c = n.walk();
        let children: Vec<_> = n.children(&mut c).collect();
        stack.extend(children.into_iter().rev());
    }
    out
}

fn named(node: Node<'_>) -> Vec<Node<'_>> {
    let mut c = node.walk();
    node.named_children(&mut c).filter(|n| n.kind() != "comment").collect()
}

/// A function with no nested function, lambda or class, no `global`/`nonlocal`, no f-string:
/// its names are its own and its uses are all tokens.
fn plain_function(f: Node<'_>, text: &str) -> bool {
    let Some(body) = f.child_by_field_name("body") else { return false };
    let src = &text[body.byte_range()];
    !src.contains("def ") && !src.contains("lambda") && !src.contains("class ") && !src.contains("global ") && !src.contains("nonlocal ") && !lex(src, "#").iter().any(|t| t.kind == TokKind::Str && t.text.starts_with(['f', 'F']))
}

/// The plain identifier parameters of `f` (no defaults, annotations or stars).
fn simple_params<'t>(f: Node<'t>, _text: &str) -> Vec<Node<'t>> {
    f.child_by_field_name("parameters").map(named).unwrap_or_default().into_iter().filter(|p| p.kind() == "identifier").collect()
}

/// Whether `name` is written as a keyword (`name=`, not `==`) anywhere in the file: a keyword
/// argument that a rename of the variable might or might not concern.
fn keyword_elsewhere(text: &str, name: &str) -> bool {
    let toks = lex(text, "#");
    toks.windows(4).any(|w| matches!(w[0].text, "(" | ",") && w[1].text == name && w[1].kind == TokKind::Ident && w[2].text == "=" && w[3].text != "=")
}

/// Whether the token after byte `end` assigns (`=`, `+=`…, not `==`).
fn assigned(text: &str, end: usize) -> bool {
    let toks = lex(&text[end..text.len().min(end + 8)], "#");
    match toks.as_slice() {
        [a, b, ..] if a.text == "=" => b.text != "=",
        [a] if a.text == "=" => true,
        [a, b, ..] => a.kind == TokKind::Punct && a.text != "=" && b.text == "=" && b.at == a.end() && !matches!(a.text, "=" | "!" | "<" | ">"),
        _ => false,
    }
}

/// The byte ranges of `name` as a variable in `range` of `text`: identifier tokens not after
/// a `.`, by tokens alone (strings and comments skipped).
fn variable_uses(text: &str, range: std::ops::Range<usize>, name: &str) -> Vec<std::ops::Range<usize>> {
    let toks = lex(&text[range.clone()], "#");
    toks.iter()
        .enumerate()
        .filter(|(i, t)| t.kind == TokKind::Ident && t.text == name && (*i == 0 || toks[i - 1].text != "."))
        .map(|(_, t)| range.start + t.at..range.start + t.end())
        .collect()
}

/// `text` with each (range, replacement) made; ranges do not overlap.
fn splice(text: &str, edits: &[(std::ops::Range<usize>, &str)]) -> String {
    let mut sorted: Vec<_> = edits.to_vec();
    sorted.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    let mut out = text.to_owned();
    for (r, s) in sorted {
        out.replace_range(r, s);
    }
    out
}

fn line_range(text: &str, line: usize) -> std::ops::Range<usize> {
    let start = nextedit::line_start(text, line).unwrap_or(text.len());
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    start..end
}

/// Groups of three or more lines within [`crate::nextedit::repeat::NEAR`] lines of the first
/// with the same indentation, the same tokens bar identifiers and literals that vary, the same
/// first two tokens and the same function called (the identifier before the first `(`): line
/// numbers, the first first.
fn same_shape_groups(text: &str) -> Vec<Vec<usize>> {
    let near = crate::nextedit::repeat::NEAR;
    let lines: Vec<&str> = text.split('\n').collect();
    let key = |l: &str| -> Option<String> {
        let toks: Vec<Tok<'_>> = lex(l, "#");
        if toks.len() < 4 || l.trim_start().starts_with(['#', '@']) || matches!(toks[0].text, "def" | "class" | "return" | "if" | "elif" | "else" | "for" | "while" | "import" | "from") {
            return None;
        }
        let indent = l.len() - l.trim_start().len();
        let callee = toks.windows(2).find(|w| w[1].text == "(" && w[0].kind == TokKind::Ident).map_or("", |w| w[0].text);
        let shape: String = toks
            .iter()
            .map(|t| match t.kind {
                TokKind::Ident => "i".to_owned(),
                TokKind::Number => "n".to_owned(),
                TokKind::Str => "s".to_owned(),
                TokKind::Punct => t.text.to_owned(),
            })
            .collect();
        Some(format!("{indent}|{}{}|{callee}|{shape}", toks[0].text, toks[1].text))
    };
    let keys: Vec<Option<String>> = lines.iter().map(|l| key(l)).collect();
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let Some(k) = k else { continue };
        // The first line of its kind in a stretch.
        if (i.saturating_sub(near)..i).any(|j| keys[j].as_ref() == Some(k)) {
            continue;
        }
        let group: Vec<usize> = std::iter::once(i).chain((i + 1..(i + near + 1).min(lines.len())).filter(|&j| keys[j].as_ref() == Some(k))).collect();
        if group.len() >= 3 {
            out.push(group);
        }
    }
    out
}
