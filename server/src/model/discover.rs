//! Model discovery: when no model is configured, look where users already keep GGUF models and
//! pick the best fit for code completion.
//!
//! Places (each root can be moved by the environment variable in brackets, as the tools
//! themselves do):
//! - the Hugging Face hub cache (`$HF_HUB_CACHE`, `$HF_HOME/hub`, `~/.cache/huggingface/hub`):
//!   `models--ORG--REPO/snapshots/REVISION/**.gguf`, symlinks into `blobs/`;
//! - LM Studio (`$GHOSTLINE_LMSTUDIO_MODELS`, `~/.lmstudio/models`, `~/.cache/lm-studio/models`):
//!   `PUBLISHER/REPO/*.gguf`;
//! - llama.cpp's download cache (`$LLAMA_CACHE`, `~/.cache/llama.cpp`, and on macOS
//!   `~/Library/Caches/llama.cpp`);
//! - Ollama (`$OLLAMA_MODELS`, `~/.ollama/models`): `manifests/HOST/NAMESPACE/MODEL/TAG` JSON,
//!   whose layer of media type `application/vnd.ollama.image.model` names the GGUF blob
//!   `blobs/sha256-…`.
//!
//! Ranking, best first: fits the memory budget, has FIM tokens (real fill-in-the-middle
//! completions), has "coder" in its name, then the smallest file (suggestions have to arrive
//! before the next keystroke), then the path.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::gguf::Gguf;
use super::memory;
use crate::config::ModelConfig;

/// Where a model was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    HuggingFace,
    LmStudio,
    LlamaCpp,
    Ollama,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::HuggingFace => "Hugging Face cache",
            Source::LmStudio => "LM Studio",
            Source::LlamaCpp => "llama.cpp cache",
            Source::Ollama => "Ollama",
        }
    }
}

/// The folders searched, per source.
#[derive(Debug, Clone, Default)]
pub struct Roots {
    pub hugging_face: Vec<PathBuf>,
    pub lm_studio: Vec<PathBuf>,
    pub llama_cpp: Vec<PathBuf>,
    pub ollama: Vec<PathBuf>,
}

impl Roots {
    /// The usual places, from this process's environment.
    pub fn from_env() -> Roots {
        Roots::from_vars(|k| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from))
    }

    /// The usual places, from environment variables given by `var` (`HOME` among them).
    pub fn from_vars(var: impl Fn(&str) -> Option<PathBuf>) -> Roots {
        let home = var("HOME");
        let under_home = |rel: &str| home.as_ref().map(|h| h.join(rel));
        let cache = var("XDG_CACHE_HOME").or_else(|| under_home(".cache"));
        let hugging_face = var("HF_HUB_CACHE")
            .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
            .or_else(|| cache.as_ref().map(|c| c.join("huggingface/hub")));
        let lm_studio = match var("GHOSTLINE_LMSTUDIO_MODELS") {
            Some(p) => vec![p],
            None => [under_home(".lmstudio/models"), cache.as_ref().map(|c| c.join("lm-studio/models"))]
                .into_iter()
                .flatten()
                .collect(),
        };
        let llama_cpp = match var("LLAMA_CACHE") {
            Some(p) => vec![p],
            None => {
                let mut v: Vec<PathBuf> = cache.iter().map(|c| c.join("llama.cpp")).collect();
                if cfg!(target_os = "macos") {
                    v.extend(under_home("Library/Caches/llama.cpp"));
                }
                v
            }
        };
        let ollama = var("OLLAMA_MODELS").or_else(|| under_home(".ollama/models")).into_iter().collect();
        Roots { hugging_face: hugging_face.into_iter().collect(), lm_studio, llama_cpp, ollama }
    }
}

/// A GGUF file found on disk, before it is examined.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    pub path: PathBuf,
    pub source: Source,
    /// A readable name: `ORG/REPO/FILE` for Hugging Face, `MODEL:TAG` for Ollama, the file
    /// name otherwise.
    pub name: String,
}

/// A found model, examined and judged.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    #[serde(flatten)]
    pub found: Found,
    pub size_bytes: u64,
    pub arch: Option<String>,
    /// The prompt format ghostline would use (from the GGUF vocabulary).
    pub format: Option<String>,
    pub fim: bool,
    pub coder: bool,
    /// Fits the memory budget with at least the minimum context.
    pub fits: bool,
    /// The context the budget allows, when it fits.
    pub n_ctx: Option<u32>,
    /// Why it ranks where it does, in words.
    pub reasons: Vec<String>,
    /// Why it cannot be used at all (unreadable, not a language model).
    pub error: Option<String>,
}

impl Candidate {
    /// One line: name, where, and the reasons.
    pub fn summary(&self) -> String {
        format!("{} ({}: {})", self.found.name, self.found.source.label(), self.reasons.join("; "))
    }
}

/// Every GGUF model under `roots`, deduplicated by the file they resolve to.
pub fn scan(roots: &Roots) -> Vec<Found> {
    let mut found = Vec::new();
    for root in &roots.hugging_face {
        for repo in read_dir_sorted(root) {
            let Some(dir) = repo.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix("models--")) else {
                continue;
            };
            let repo_name = dir.replace("--", "/");
            for snapshot in read_dir_sorted(&repo.join("snapshots")) {
                for path in gguf_files(&snapshot, 3) {
                    let rel = path.strip_prefix(&snapshot).unwrap_or(&path).to_string_lossy().into_owned();
                    found.push(Found { name: format!("{repo_name}/{rel}"), path, source: Source::HuggingFace });
                }
            }
        }
    }
    for (roots, source) in [(&roots.lm_studio, Source::LmStudio), (&roots.llama_cpp, Source::LlamaCpp)] {
        for root in roots {
            for path in gguf_files(root, 4) {
                let name = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
                found.push(Found { name, path, source });
            }
        }
    }
    for root in &roots.ollama {
        found.extend(ollama_models(root));
    }
    let mut seen = HashSet::new();
    found.retain(|f| seen.insert(f.path.canonicalize().unwrap_or_else(|_| f.path.clone())));
    found
}

/// Ollama: every `manifests/HOST/NAMESPACE/MODEL/TAG` whose model layer is a GGUF blob.
fn ollama_models(root: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    for host in read_dir_sorted(&root.join("manifests")) {
        for namespace in read_dir_sorted(&host) {
            for model in read_dir_sorted(&namespace) {
                for tag in read_dir_sorted(&model) {
                    let Ok(text) = std::fs::read_to_string(&tag) else { continue };
                    let Ok(manifest) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
                    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
                    let Some(digest) = layers
                        .iter()
                        .find(|l| l["mediaType"] == "application/vnd.ollama.image.model")
                        .and_then(|l| l["digest"].as_str())
                    else {
                        continue;
                    };
                    let blob = root.join("blobs").join(digest.replace(':', "-"));
                    if !blob.is_file() {
                        continue;
                    }
                    let file_name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    let ns = file_name(&namespace);
                    let model_name = file_name(&model);
                    let name = if ns == "library" { model_name } else { format!("{ns}/{model_name}") };
                    out.push(Found { name: format!("{name}:{}", file_name(&tag)), path: blob, source: Source::Ollama });
                }
            }
        }
    }
    out
}

fn read_dir_sorted(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
    v.sort();
    v
}

/// `*.gguf` files under `dir` (following symlinks, `depth` levels down), without vision
/// projectors and without the second and later parts of split models.
fn gguf_files(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in read_dir_sorted(dir) {
        if path.is_dir() {
            if depth > 0 {
                out.extend(gguf_files(&path, depth - 1));
            }
            continue;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        if !name.ends_with(".gguf") || name.starts_with("mmproj") {
            continue;
        }
        if let Some(i) = name.find("-of-") {
            // Split models (`-00001-of-00003.gguf`): llama.cpp loads them from the first part.
            if !name[..i].ends_with("-00001") {
                continue;
            }
        }
        if path.is_file() {
            out.push(path);
        }
    }
    out
}

/// Examines each found model and ranks them, best first, against `config`'s memory budget and
/// context size.
pub fn rank(found: Vec<Found>, config: &ModelConfig) -> Vec<Candidate> {
    let budget = memory::budget(config.memory_budget_mb);
    let mut out: Vec<Candidate> = found.into_iter().map(|f| examine(f, config, budget.clone())).collect();
    out.sort_by(|a, b| {
        let key = |c: &Candidate| (c.error.is_some(), !c.fits, !c.fim, !c.coder, c.size_bytes);
        key(a).cmp(&key(b)).then_with(|| a.found.path.cmp(&b.found.path))
    });
    out
}

fn examine(found: Found, config: &ModelConfig, budget: (u64, memory::BudgetSource)) -> Candidate {
    let size_bytes = std::fs::metadata(&found.path).map(|m| m.len()).unwrap_or(0);
    let lower = found.name.to_lowercase();
    let mut c = Candidate {
        coder: lower.contains("coder"),
        found,
        size_bytes,
        arch: None,
        format: None,
        fim: false,
        fits: false,
        n_ctx: None,
        reasons: Vec::new(),
        error: None,
    };
    let gguf = match Gguf::open(&c.found.path) {
        Ok(g) => g,
        Err(e) => {
            c.error = Some(e.to_string());
            c.reasons.push(format!("unusable: {e}"));
            return c;
        }
    };
    c.arch = gguf.arch().map(str::to_owned);
    if gguf.name().is_some_and(|n| n.to_lowercase().contains("coder")) {
        c.coder = true;
    }
    if gguf.tokens.is_empty() || c.arch.as_deref() == Some("clip") {
        c.error = Some("not a language model (no vocabulary)".into());
        c.reasons.push("unusable: not a language model (no vocabulary)".into());
        return c;
    }
    let format = gguf.fim_format();
    c.fim = format.uses_suffix();
    c.format = Some(format.to_string());
    c.reasons.push(if c.fim { format!("FIM tokens: {format}") } else { "no FIM tokens: prefix-only completions".into() });
    if c.coder {
        c.reasons.push("\"coder\" in its name".into());
    }
    match gguf.shape().and_then(|s| memory::plan(&s, gguf.weights_bytes(), budget, config.context_size, super::backend::micro_batch_of(config))) {
        Ok(plan) => {
            c.fits = true;
            c.n_ctx = Some(plan.n_ctx);
            c.reasons.push(format!(
                "fits the memory budget: {:.0} MiB with a {}-token context, of {:.0} MiB",
                plan.total_bytes as f64 / 1048576.0,
                plan.n_ctx,
                plan.budget_bytes as f64 / 1048576.0
            ));
        }
        Err(e) => c.reasons.push(format!("does not fit: {e}")),
    }
    c.reasons.push(format!("{:.0} MiB", size_bytes as f64 / 1048576.0));
    c
}

/// When `config` names no model, picks the best one found in the usual places, sets it as the
/// model path and records why in `config.discovered`. Returns the ranking (empty when a path
/// was configured).
pub fn fill_in(config: &mut ModelConfig) -> Vec<Candidate> {
    // With `model.endpoint`, a GGUF is its vocabulary: only the one named, never a guess (a
    // model found on disk may not be the one the endpoint runs).
    if config.path.is_some() || config.endpoint.is_some() {
        return Vec::new();
    }
    let ranked = rank(scan(&Roots::from_env()), config);
    if let Some(best) = ranked.first().filter(|c| c.error.is_none()) {
        let why = format!("no model configured; using {} found in {}: {}", best.found.path.display(), best.found.source.label(), best.reasons.join("; "));
        tracing::info!("{why}");
        config.path = Some(best.found.path.clone());
        config.discovered = Some(why);
    } else {
        tracing::info!(found = ranked.len(), "no model configured and none usable found in the usual places");
    }
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_follow_the_tools_variables() {
        let vars = |k: &str| match k {
            "HOME" => Some(PathBuf::from("/h")),
            "HF_HOME" => Some(PathBuf::from("/hf")),
            "OLLAMA_MODELS" => Some(PathBuf::from("/o")),
            _ => None,
        };
        let r = Roots::from_vars(vars);
        assert_eq!(r.hugging_face, vec![PathBuf::from("/hf/hub")]);
        assert_eq!(r.lm_studio, vec![PathBuf::from("/h/.lmstudio/models"), PathBuf::from("/h/.cache/lm-studio/models")]);
        assert_eq!(r.llama_cpp[0], PathBuf::from("/h/.cache/llama.cpp"));
        assert_eq!(r.ollama, vec![PathBuf::from("/o")]);
        let r = Roots::from_vars(|k| (k == "HOME").then(|| PathBuf::from("/h")));
        assert_eq!(r.hugging_face, vec![PathBuf::from("/h/.cache/huggingface/hub")]);
        assert_eq!(r.ollama, vec![PathBuf::from("/h/.ollama/models")]);
    }

    #[test]
    fn split_parts_and_projectors_are_skipped() {
        let dir = crate::testing::TempDir::new("discover");
        std::fs::create_dir_all(dir.join("a")).unwrap();
        for name in ["a/m-00001-of-00002.gguf", "a/m-00002-of-00002.gguf", "a/mmproj-f16.gguf", "a/x.GGUF", "a/notes.txt"] {
            std::fs::write(dir.join(name), "GGUF").unwrap();
        }
        let names: Vec<String> =
            gguf_files(&dir, 2).iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, vec!["m-00001-of-00002.gguf", "x.GGUF"]);
    }
}
