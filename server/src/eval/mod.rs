//! `ghostline eval`: suggestion quality on real code nobody here wrote.
//!
//! Cuts holes (the rest of a line inside a function body, at deterministic pseudo-random
//! places) in source files that installed packages ship — the Python standard library, crates
//! in the cargo registry — asks the real engine with each context strategy on the same model,
//! and reports next-line exact match, edit similarity, prompt tokens and TTFT.

pub mod cross_file;
pub mod next_edit;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;
use tree_sitter::{QueryCursor, StreamingIterator};

use crate::config::Config;
use crate::context;
use crate::engine::{Engine, Input};
use crate::model::{ModelHandle, ModelStatus, Sampling};
use crate::syntax::{self, Spec};

/// Settings of one evaluation run.
pub struct EvalOptions {
    pub holes_per_language: usize,
    pub seed: u64,
    pub languages: Vec<String>,
    /// Extra source folders; by default the Python standard library and the cargo registry.
    pub sources: Vec<PathBuf>,
    /// Lines before the cursor in the naive window strategy.
    pub window_lines: usize,
    /// Only the strategies of these names (`{n}` written out); empty: all.
    pub modes: Vec<String>,
    /// Where to write each prompt, answer and truth (`--prompts`).
    pub prompts: Option<PathBuf>,
}

/// A folder of prompts as the model read them (`eval --prompts DIR`): one file per hole and
/// mode, the prompt's tokens written out (markers included), then the answer and the truth.
pub(crate) struct PromptDump(Option<PathBuf>);

impl PromptDump {
    pub(crate) fn new(dir: Option<&Path>) -> Result<PromptDump, String> {
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir).map_err(|e| format!("--prompts {}: {e}", dir.display()))?;
        }
        Ok(PromptDump(dir.map(Path::to_owned)))
    }

    fn path(&self, hole: usize, mode: &str) -> Option<PathBuf> {
        self.0.as_ref().map(|d| d.join(format!("{hole:03}-{}.txt", mode.replace(' ', "_"))))
    }

    /// What the model thread calls with the plan: writes the prompt.
    pub(crate) fn inspector(&self, hole: usize, mode: &str, then: Box<dyn Fn(&crate::prompt::PromptPlan, &dyn crate::model::Tokenize) + Send>) -> Box<dyn Fn(&crate::prompt::PromptPlan, &dyn crate::model::Tokenize) + Send> {
        let path = self.path(hole, mode);
        Box::new(move |plan, tokenizer| {
            if let Some(path) = &path {
                let mut text = String::new();
                for (section, range) in &plan.sections {
                    let run: String = plan.tokens[range.clone()].iter().map(|&t| tokenizer.token_text(t)).collect();
                    match section {
                        crate::prompt::Section::Marker | crate::prompt::Section::Bos => text.push_str(&format!("<<{}>>", plan.tokens[range.clone()].iter().map(|t| t.to_string()).collect::<Vec<_>>().join(","))),
                        _ => text.push_str(&format!("<<{section:?}>>{run}")),
                    }
                }
                let _ = std::fs::write(path, text);
            }
            then(plan, tokenizer);
        })
    }

    /// Adds the answer and the truth under the prompt.
    pub(crate) fn answer(&self, hole: usize, mode: &str, file: &str, line: usize, raw: &str, answer: &str, truth: &str) {
        if let Some(path) = self.path(hole, mode) {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(path) {
                let _ = write!(f, "\n\n===== {file}:{line}\n===== raw {raw:?}\n===== answer\n{answer}\n===== truth\n{truth}\n");
            }
        }
    }
}

/// One cut: the document without the rest of a line, and that rest.
#[derive(Debug, Clone)]
pub struct Hole {
    pub file: PathBuf,
    pub line: usize,
    pub text: String,
    pub cursor: usize,
    pub target: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct HoleResult {
    pub language: String,
    pub strategy: String,
    pub file: String,
    pub line: usize,
    pub target: String,
    pub suggestion: String,
    pub exact: bool,
    pub edit_similarity: f64,
    pub prompt_tokens: usize,
    pub ttft_ms: f64,
}

/// A deterministic generator (splitmix64): the same seed cuts the same holes.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// 1 − Levenshtein distance / longer length, over chars.
pub fn edit_similarity(a: &str, b: &str) -> f64 {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    1.0 - prev[b.len()] as f64 / a.len().max(b.len()) as f64
}

/// Source files of a language under `root`, sorted, skipping test and vendored folders.
pub(crate) fn source_files(root: &Path, spec: &Spec, out: &mut Vec<PathBuf>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            let skip = ["test", "tests", "site-packages", "__pycache__", "idlelib", "benches", "examples", "target"];
            if depth < 6 && !skip.contains(&name) && !name.starts_with('.') {
                source_files(&path, spec, out, depth + 1);
            }
        } else if syntax::by_path(name).is_some_and(|s| s == spec) {
            out.push(path);
        }
    }
}

/// Where installed packages keep code of `language`.
fn default_roots(language: &str) -> Vec<PathBuf> {
    match language {
        "python" => std::process::Command::new("python3")
            .args(["-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| vec![PathBuf::from(s.trim())])
            .unwrap_or_default(),
        "rust" => {
            let home = std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
            home.map(|h| vec![h.join("registry/src")]).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// Cuts `count` holes in files of `spec`, deterministically from `rng`.
pub fn cut_holes(spec: &Spec, files: &[PathBuf], count: usize, rng: &mut Rng) -> Vec<Hole> {
    let mut holes = Vec::new();
    let mut attempts = 0;
    while holes.len() < count && attempts < count * 50 && !files.is_empty() {
        attempts += 1;
        let file = &files[rng.below(files.len())];
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        if text.len() > 200_000 || text.contains('\r') {
            continue;
        }
        if let Some(hole) = cut_hole(spec, file, &text, rng) {
            holes.push(hole);
        }
    }
    holes
}

/// One hole in a line inside a function body of `text`, or `None` if it has no good line.
pub fn cut_hole(spec: &Spec, file: &Path, text: &str, rng: &mut Rng) -> Option<Hole> {
    let tree = spec.parse(text);
    let scope_idx = spec.scopes.capture_index_for_name("scope");
    let mut qc = QueryCursor::new();
    let mut matches = qc.matches(&spec.scopes, tree.root_node(), text.as_bytes());
    let mut body_lines = std::collections::BTreeSet::new();
    while let Some(m) = matches.next() {
        for c in m.captures.iter().filter(|c| Some(c.index) == scope_idx) {
            let (first, last) = (c.node.start_position().row, c.node.end_position().row);
            body_lines.extend(first + 1..=last);
        }
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let candidates: Vec<usize> = body_lines
        .into_iter()
        .filter(|&i| {
            let l = lines.get(i).map_or("", |l| l.trim());
            (8..=120).contains(&l.len()) && !l.starts_with('#') && !l.starts_with("//") && l.is_ascii()
        })
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let line = candidates[rng.below(candidates.len())];
    let content = lines[line];
    let indent = content.len() - content.trim_start().len();
    let body = content.trim_end();
    // Cut after at least one character of code, leaving at least three to guess.
    let span = body.len().checked_sub(indent + 4)?;
    let cut_col = indent + 1 + rng.below(span + 1);
    let line_start: usize = lines[..line].iter().map(|l| l.len() + 1).sum();
    let cursor = line_start + cut_col;
    let target = body[cut_col..].to_owned();
    let line_end = line_start + content.len();
    let doc = format!("{}{}", &text[..cursor], &text[line_end..]);
    Some(Hole { file: file.to_owned(), line, text: doc, cursor, target })
}

pub(crate) fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * p).round() as usize]
}

/// A runtime and the engine of `config`'s model with `completion` settings, once it is loaded.
pub(crate) fn load_engine(config: &Config, completion: crate::config::CompletionConfig) -> Result<(tokio::runtime::Runtime, Engine, crate::model::ModelInfo), String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let model = ModelHandle::spawn(&config.model, Sampling::from(&config.completion));
    let info = match runtime.block_on(model.wait_loaded()) {
        ModelStatus::Ready(info) => info,
        ModelStatus::Failed(m) => return Err(m),
        _ => return Err(format!("no model: pass --model or set {}", crate::config::MODEL_ENV)),
    };
    Ok((runtime, Engine::new(model, completion), info))
}

/// The context strategies each hole is asked with: name (`{n}`: the window's lines), the
/// naive window instead of ghostline's context, FIM markers and the suffix.
const STRATEGIES: &[(&str, bool, bool)] = &[("scope fim", false, true), ("scope prefix-only", false, false), ("window{n} prefix-only", true, false), ("window{n} fim", true, true)];

pub fn run(config: &Config, options: &EvalOptions, as_json: bool) -> Result<(), String> {
    let (runtime, engine, info) = load_engine(config, config.completion.clone())?;
    let dump = PromptDump::new(options.prompts.as_deref())?;
    let mut rng = Rng::new(options.seed);
    let mut results = Vec::new();
    for language in &options.languages {
        let spec = syntax::by_language_id(language).ok_or_else(|| format!("unknown language {language}"))?;
        let mut files = Vec::new();
        let roots = if options.sources.is_empty() { default_roots(language) } else { options.sources.clone() };
        for root in &roots {
            source_files(root, spec, &mut files, 0);
        }
        let holes = cut_holes(spec, &files, options.holes_per_language, &mut rng);
        if !as_json {
            eprintln!("{language}: {} holes in {} files", holes.len(), files.len());
        }
        for (n, hole) in holes.iter().enumerate() {
            let tree = spec.parse(&hole.text);
            let input = Input { cross_file: None, text: &hole.text, cursor: hole.cursor, syntax: Some((spec, &tree)) };
            for &(strategy, window, fim) in STRATEGIES {
                let name = strategy.replace("{n}", &options.window_lines.to_string());
                if !options.modes.is_empty() && !options.modes.contains(&name) {
                    continue;
                }
                let mut draft = engine.draft(input);
                draft.fim = fim;
                if window {
                    // The naive peer: whole lines before the cursor (and with FIM the rest of
                    // the cursor's line after it), in the context's whole room.
                    draft.context = context::line_window(&hole.text, hole.cursor, options.window_lines, 0);
                    // The peer's prompt ends at the cursor (ghostline's ends before a word part
                    // or a line's indentation: `Engine::draft`).
                    draft.stop = draft.stop.with_lead("");
                    draft.max_prompt_tokens = info.n_ctx;
                }
                let inspect = dump.inspector(n, &format!("{language}-{name}"), Box::new(|_, _| {}));
                let s = runtime.block_on(engine.run_inspected(input, draft, inspect)).map_err(|e| e.to_string())?;
                let got = s.text.split('\n').next().unwrap_or("").trim_end().to_owned();
                let want = hole.target.trim_end();
                dump.answer(n, &format!("{language}-{name}"), &hole.file.display().to_string(), hole.line + 1, &s.raw, &s.text, want);
                results.push(HoleResult {
                    language: language.clone(),
                    strategy: name,
                    file: hole.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
                    line: hole.line + 1,
                    target: want.to_owned(),
                    exact: got == want,
                    edit_similarity: edit_similarity(&got, want),
                    suggestion: got,
                    prompt_tokens: s.timings.prompt_tokens,
                    ttft_ms: s.timings.ttft_ms,
                });
            }
        }
    }
    report(&results, &info.path, options, as_json);
    Ok(())
}

fn report(results: &[HoleResult], model: &Path, options: &EvalOptions, as_json: bool) {
    let mut groups: Vec<(String, String)> = results.iter().map(|r| (r.language.clone(), r.strategy.clone())).collect();
    groups.dedup();
    groups.sort();
    groups.dedup();
    let mut summary = Vec::new();
    for (language, strategy) in &groups {
        let rs: Vec<&HoleResult> = results.iter().filter(|r| &r.language == language && &r.strategy == strategy).collect();
        let n = rs.len() as f64;
        let mut tokens: Vec<f64> = rs.iter().map(|r| r.prompt_tokens as f64).collect();
        let mut ttft: Vec<f64> = rs.iter().map(|r| r.ttft_ms).collect();
        summary.push(json!({
            "language": language,
            "strategy": strategy,
            "holes": rs.len(),
            "exact_match": rs.iter().filter(|r| r.exact).count() as f64 / n,
            "edit_similarity": rs.iter().map(|r| r.edit_similarity).sum::<f64>() / n,
            "prompt_tokens_mean": tokens.iter().sum::<f64>() / n,
            "prompt_tokens_median": percentile(&mut tokens, 0.5),
            "ttft_ms_median": percentile(&mut ttft, 0.5),
            "ttft_ms_p95": percentile(&mut ttft, 0.95),
        }));
    }
    if as_json {
        let out = json!({
            "model": model,
            "seed": options.seed,
            "holes_per_language": options.holes_per_language,
            "summary": summary,
            "holes": results,
        });
        println!("{out}");
        return;
    }
    println!("model: {}  seed: {}  (TTFT: cold prompt per hole, this machine)", model.display(), options.seed);
    println!("{:<8} {:<22} {:>5} {:>8} {:>8} {:>9} {:>9} {:>9}", "lang", "strategy", "holes", "exact", "editsim", "tokens", "ttft p50", "ttft p95");
    for s in &summary {
        println!(
            "{:<8} {:<22} {:>5} {:>7.1}% {:>8.3} {:>9.0} {:>7.0}ms {:>7.0}ms",
            s["language"].as_str().unwrap_or(""),
            s["strategy"].as_str().unwrap_or(""),
            s["holes"],
            s["exact_match"].as_f64().unwrap_or(0.0) * 100.0,
            s["edit_similarity"].as_f64().unwrap_or(0.0),
            s["prompt_tokens_mean"].as_f64().unwrap_or(0.0),
            s["ttft_ms_median"].as_f64().unwrap_or(0.0),
            s["ttft_ms_p95"].as_f64().unwrap_or(0.0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_similarity_is_one_minus_normalised_distance() {
        assert_eq!(edit_similarity("abc", "abc"), 1.0);
        assert_eq!(edit_similarity("", ""), 1.0);
        assert_eq!(edit_similarity("abcd", "abed"), 0.75);
        assert_eq!(edit_similarity("", "ab"), 0.0);
    }

    #[test]
    fn holes_are_deterministic_and_inside_function_bodies() {
        let spec = syntax::by_language_id("python").unwrap();
        let text = "import os\n\n\ndef walk(root):\n    for name in os.listdir(root):\n        print(os.path.join(root, name))\n";
        let cut = |seed| cut_hole(spec, Path::new("x.py"), text, &mut Rng::new(seed)).unwrap();
        let (a, b) = (cut(7), cut(7));
        assert_eq!((a.cursor, &a.target), (b.cursor, &b.target));
        assert!(a.line == 4 || a.line == 5, "{a:?}");
        let line = text.split('\n').nth(a.line).unwrap();
        assert!(line.trim_end().ends_with(&a.target));
        assert_eq!(a.text.len() + a.target.len(), text.len());
    }
}
