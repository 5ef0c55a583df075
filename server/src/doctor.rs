//! `ghostline doctor` and `ghostline models`: what this build and machine will do with the
//! configured (or discovered) model, checked without an editor; and which models were found.
//!
//! Doctor reports the backend, threads, the model (path, architecture, size, FIM format), the
//! KV cache's bytes per token and the memory plan against available memory, loads the model
//! once for real, and shows the cloud and offline settings. It sends nothing anywhere. Its exit
//! status is non-zero when a check fails; each failure says how to fix it.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{json, Value};

use crate::config::{self, Config, Options};
use crate::model::discover::{self, Candidate, Roots};
use crate::model::gguf::Gguf;
use crate::model::{backend, check_model_file, memory, ModelHandle, ModelStatus, Sampling};

/// What `doctor` is asked to check.
#[derive(Debug, Clone, Default)]
pub struct DoctorOptions {
    pub model: Option<PathBuf>,
    /// A JSON file of editor settings (as sent in `initializationOptions`).
    pub settings: Option<PathBuf>,
    pub memory_budget_mb: Option<u64>,
    pub context_size: Option<u32>,
    pub threads: Option<u32>,
    /// Skip loading the model (header checks only).
    pub no_load: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    pub detail: String,
    /// What to do about a warning or failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The whole report: the checks, and the figures behind them for `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ok: bool,
    pub checks: Vec<Check>,
    pub facts: Value,
}

impl Report {
    pub fn print_text(&self) {
        println!("ghostline doctor");
        for c in &self.checks {
            let level = match c.level {
                Level::Ok => "ok  ",
                Level::Warn => "warn",
                Level::Fail => "FAIL",
            };
            println!("  {level}  {:<9} {}", c.name, c.detail);
            if let Some(fix) = &c.fix {
                println!("        {:<9} fix: {fix}", "");
            }
        }
        let failed = self.checks.iter().filter(|c| c.level == Level::Fail).count();
        let warned = self.checks.iter().filter(|c| c.level == Level::Warn).count();
        if failed == 0 {
            println!("all checks passed ({warned} warning{})", if warned == 1 { "" } else { "s" });
        } else {
            println!("{failed} check{} failed", if failed == 1 { "" } else { "s" });
        }
    }
}

struct Checks(Vec<Check>);

impl Checks {
    fn add(&mut self, name: &'static str, level: Level, detail: impl Into<String>, fix: Option<String>) {
        self.0.push(Check { name, level, detail: detail.into(), fix });
    }
    fn ok(&mut self, name: &'static str, detail: impl Into<String>) {
        self.add(name, Level::Ok, detail, None);
    }
    fn warn(&mut self, name: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.add(name, Level::Warn, detail, Some(fix.into()));
    }
    fn fail(&mut self, name: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.add(name, Level::Fail, detail, Some(fix.into()));
    }
}

const MIB: f64 = 1024.0 * 1024.0;

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB)
}

/// Resolves the configuration doctor checks: settings file, then command-line overrides, then
/// `GHOSTLINE_MODEL`, then discovery.
fn resolve(opts: &DoctorOptions, checks: &mut Checks) -> Config {
    let mut options = Options::default();
    if let Some(file) = &opts.settings {
        match config::parse_file(file) {
            Ok(p) if p.unknown_keys.is_empty() => {
                checks.ok("settings", format!("{} read", file.display()));
                options = p.options;
            }
            Ok(p) => {
                checks.warn(
                    "settings",
                    format!("{}: unknown keys {} are ignored", file.display(), p.unknown_keys.join(", ")),
                    "check their spelling against the README's configuration table",
                );
                options = p.options;
            }
            Err(e) => checks.fail("settings", e, "fix the settings file; an editor would keep its previous settings"),
        }
    }
    if opts.model.is_some() {
        options.model.path = opts.model.clone();
    }
    options.model.memory_budget_mb = opts.memory_budget_mb.or(options.model.memory_budget_mb);
    options.model.context_size = opts.context_size.or(options.model.context_size);
    options.model.threads = opts.threads.or(options.model.threads);
    let mut config = options.resolve(config::env_model());
    discover::fill_in(&mut config.model);
    config
}

/// The CPU variant in use: the kernels llama.cpp was built with, and what this CPU has that
/// the build leaves unused (or lacks, which would crash the first decode).
fn cpu_kernels(checks: &mut Checks, facts: &mut serde_json::Map<String, serde_json::Value>) {
    let kernels = backend::cpu_kernels();
    facts.insert("cpu_kernels".into(), json!(kernels));
    let built: Vec<&str> = kernels.split(' ').collect();
    let (mut missing, mut unused) = (Vec::new(), Vec::new());
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! cpu {
            ($($name:literal => $feature:tt),*) => {
                [$(($name, std::arch::is_x86_feature_detected!($feature))),*]
            };
        }
        for (name, has) in cpu!("AVX" => "avx", "AVX2" => "avx2", "FMA" => "fma", "F16C" => "f16c", "AVX512" => "avx512f", "AVX512_VNNI" => "avx512vnni", "AVX512_BF16" => "avx512bf16") {
            match (built.contains(&name), has) {
                (true, false) => missing.push(name),
                (false, true) => unused.push(name),
                _ => {}
            }
        }
    }
    if !missing.is_empty() {
        checks.fail(
            "kernels",
            format!("{kernels}: this CPU lacks {}", missing.join(", ")),
            "build ghostline on this machine (cargo build --release): llama.cpp would stop on an illegal instruction",
        );
    } else if unused.is_empty() {
        checks.ok("kernels", kernels);
    } else {
        checks.ok("kernels", format!("{kernels} (this CPU also has {}, which this portable build does not use)", unused.join(", ")));
    }
}

/// How warm answers are kept equal to cold ones with these kernels and layers: batch-invariant
/// kernels (a key decodes only what changed), or the aligned prefill and why.
fn determinism(checks: &mut Checks, facts: &mut serde_json::Map<String, serde_json::Value>, gpu_layers: u32, chunk: Option<u32>) {
    let invariant = backend::batch_invariance(gpu_layers);
    facts.insert("batch_invariant".into(), json!(invariant.is_ok()));
    let chunk = chunk.unwrap_or_else(|| backend::default_prefill_chunk(gpu_layers));
    let detail = match (&invariant, chunk) {
        (Ok(()), 0) => "batch-invariant kernels: a key decodes only the tokens that changed".to_owned(),
        (Ok(()), c) => format!("batch-invariant kernels, but model.prefillChunk {c} decodes in aligned batches"),
        (Err(why), 0) => format!("{why}, and model.prefillChunk 0: a warm answer may differ from a cold one"),
        (Err(why), c) => format!("{why}: prompts are decoded in aligned batches of {c} (model.prefillChunk), so warm answers equal cold ones"),
    };
    if invariant.is_err() && chunk == 0 {
        checks.warn("determinism", detail, "leave model.prefillChunk unset (the backend's default)");
    } else {
        checks.ok("determinism", detail);
    }
}

/// Runs every check. Loading the model (unless `no_load`) is the last one.
pub fn run(opts: &DoctorOptions) -> Report {
    let mut checks = Checks(Vec::new());
    let config = resolve(opts, &mut checks);
    let mut facts = serde_json::Map::new();

    // Backend and threads.
    let gpu_layers = backend::gpu_layers(config.model.gpu_layers);
    let devices = backend::devices();
    let device_names: Vec<String> = devices.iter().map(|d| format!("{} ({})", d.name, d.description)).collect();
    checks.ok(
        "backend",
        format!(
            "{} (GPU layers: {}; llama.cpp devices: {})",
            backend::name(),
            backend::describe_layers(gpu_layers),
            if device_names.is_empty() { "none listed".into() } else { device_names.join(", ") }
        ),
    );
    if backend::gpu_backend().is_some() && !devices.iter().any(|d| d.backend != "CPU") {
        checks.warn(
            "backend",
            format!("{} is built in but llama.cpp found no GPU device", backend::name()),
            "check the GPU driver; or set model.gpuLayers to 0 to run on the CPU",
        );
    }
    facts.insert("backend".into(), json!(backend::name()));
    facts.insert("gpu_layers".into(), json!(backend::describe_layers(gpu_layers)));
    facts.insert("devices".into(), json!(devices));
    cpu_kernels(&mut checks, &mut facts);
    determinism(&mut checks, &mut facts, gpu_layers, config.model.prefill_chunk);
    let physical = config::default_threads();
    let logical = num_cpus::get() as u32;
    checks.ok("threads", format!("{} (physical cores: {physical}, logical: {logical})", config.model.threads));
    facts.insert("threads".into(), json!(config.model.threads));

    // The model file and its header.
    // Worth loading: the header was read and the memory budget holds the model.
    let mut loadable = false;
    match &config.model.path {
        None => checks.fail(
            "model",
            "no model configured, and none found in the usual places (see `ghostline models`)",
            // The model named is `--recommend`'s pick (and the first run's offer), not a
            // second opinion.
            match crate::pull::first_run::recommended(&config) {
                Some(k) => format!(
                    "run `ghostline pull {}` ({} {}, the model `ghostline doctor --recommend` picks for this machine), or set model.path in the editor settings or {} to a GGUF file",
                    k.name,
                    k.repo,
                    k.quant,
                    config::MODEL_ENV
                ),
                None => format!(
                    "set model.path in the editor settings or {} to a GGUF file; no known model fits the memory budget (`ghostline doctor --recommend` says what each needs)",
                    config::MODEL_ENV
                ),
            },
        ),
        Some(path) => {
            let source = if opts.model.is_some() {
                "--model".to_string()
            } else if config.model.discovered.is_some() {
                "discovered".to_string()
            } else if config::env_model().as_deref() == Some(path.as_path()) {
                config::MODEL_ENV.to_string()
            } else {
                "model.path".to_string()
            };
            facts.insert("model".into(), json!(path));
            facts.insert("model_source".into(), json!(source));
            if let Some(why) = &config.model.discovered {
                checks.ok("model", why.clone());
            }
            match check_model_file(path).map_err(|e| e.to_string()).and_then(|()| Gguf::open(path).map_err(|e| e.to_string())) {
                Err(e) => checks.fail("model", e, "point model.path (or GHOSTLINE_MODEL) at a complete GGUF file; re-download it if it was cut short"),
                Ok(gguf) => {
                    loadable = true;
                    let arch = gguf.arch().unwrap_or("?").to_owned();
                    let name = gguf.name().unwrap_or("").to_owned();
                    checks.ok(
                        "model",
                        format!(
                            "{} ({source}): {arch}{}, {} ({} weights, {} tensors)",
                            path.display(),
                            if name.is_empty() { String::new() } else { format!(", \"{name}\"") },
                            mib(gguf.file_size),
                            mib(gguf.weights_bytes()),
                            gguf.tensor_count
                        ),
                    );
                    facts.insert("arch".into(), json!(arch));
                    facts.insert("file_bytes".into(), json!(gguf.file_size));
                    facts.insert("weights_bytes".into(), json!(gguf.weights_bytes()));
                    let format = gguf.fim_format();
                    facts.insert("format".into(), json!(format.to_string()));
                    if format.uses_suffix() {
                        checks.ok("format", format.to_string());
                    } else {
                        checks.warn(
                            "format",
                            format.to_string(),
                            "completions see only the text before the cursor; a FIM coder model (Qwen2.5-Coder, StarCoder2, CodeLlama, DeepSeek-Coder, Codestral) also uses the text after it",
                        );
                    }
                    match gguf.shape() {
                        Err(e) => checks.warn("kv cache", e, "ghostline cannot plan memory for this model; model.contextSize is used as given"),
                        Ok(s) => {
                            let per_token = memory::kv_bytes_per_token(&s);
                            let uniform = s.n_head_kv.iter().all(|&h| h == s.n_head_kv[0]);
                            let formula = if uniform && s.head_dim_k == s.head_dim_v {
                                format!(
                                    "2 × {} layers × {} KV heads × {} head dim × {} bytes ({})",
                                    s.n_layer,
                                    s.n_head_kv.first().copied().unwrap_or(0),
                                    s.head_dim_k,
                                    memory::KV_ELEMENT_BYTES,
                                    memory::KV_TYPE
                                )
                            } else {
                                format!(
                                    "Σ over {} layers of KV heads × ({} + {}) dims × {} bytes ({})",
                                    s.n_layer,
                                    s.head_dim_k,
                                    s.head_dim_v,
                                    memory::KV_ELEMENT_BYTES,
                                    memory::KV_TYPE
                                )
                            };
                            checks.ok("kv cache", format!("{per_token} bytes per token = {formula}"));
                            facts.insert("shape".into(), json!(s));
                            facts.insert("kv_bytes_per_token".into(), json!(per_token));
                            let budget = memory::budget(config.model.memory_budget_mb);
                            match memory::plan(&s, gguf.weights_bytes(), budget, config.model.context_size, crate::model::backend::micro_batch_of(&config.model)) {
                                Err(e) => {
                                    loadable = false;
                                    checks.fail(
                                    "memory",
                                    e,
                                    "set model.memoryBudgetMb higher (or leave it unset: half of physical memory), or use a smaller / more quantized model",
                                    )
                                }
                                Ok(plan) => {
                                    checks.ok("memory", plan.describe());
                                    let system = memory::system_memory();
                                    if let Some(m) = system {
                                        let line = format!(
                                            "needs {} (weights + KV cache + compute); available now {} of {} physical",
                                            mib(plan.total_bytes),
                                            mib(m.available_bytes),
                                            mib(m.total_bytes)
                                        );
                                        if plan.total_bytes > m.available_bytes {
                                            checks.warn(
                                                "available",
                                                line,
                                                "close other programs, or lower model.memoryBudgetMb / model.contextSize, or the system will swap",
                                            );
                                        } else {
                                            checks.ok("available", line);
                                        }
                                    }
                                    facts.insert("plan".into(), json!(plan));
                                    facts.insert("system_memory".into(), json!(system));
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    // Load it for real: the final word on the file, the backend and the context.
    if loadable && !opts.no_load {
        match load(&config) {
            Ok(info) => {
                checks.ok(
                    "load",
                    format!("loaded in {:.0} ms on {}: context {} tokens, {}", info.load_ms, info.backend, info.n_ctx, info.format),
                );
                facts.insert("n_ctx".into(), json!(info.n_ctx));
                facts.insert("n_ubatch".into(), json!(info.n_ubatch));
                facts.insert("load_ms".into(), json!(info.load_ms));
            }
            Err(e) => checks.fail("load", e, "check the model file (re-download it) or the backend; see the log above"),
        }
    }

    // Cloud and offline: configuration only; nothing is sent.
    let cloud = &config.cloud;
    match (&cloud.endpoint, config.offline) {
        (None, _) => checks.ok("cloud", "no endpoint configured: code actions stay on this machine"),
        (Some(endpoint), true) => checks.ok("cloud", format!("endpoint {endpoint} configured but offline is on: it is never contacted")),
        (Some(endpoint), false) => match &cloud.api_key_env {
            None => checks.ok("cloud", format!("endpoint {endpoint}, model {:?}, no API key variable (cloud.apiKeyEnv unset)", cloud.model)),
            Some(var) if std::env::var_os(var).is_some_and(|v| !v.is_empty()) => {
                checks.ok("cloud", format!("endpoint {endpoint}, model {:?}, API key variable {var} is set", cloud.model))
            }
            Some(var) => checks.fail(
                "cloud",
                format!("endpoint {endpoint} configured, but its API key variable {var} is not set"),
                format!("export {var}=… in the environment the editor starts ghostline from, or unset cloud.endpoint"),
            ),
        },
    }
    facts.insert("cloud_endpoint".into(), json!(cloud.endpoint));
    facts.insert("cloud_api_key_env".into(), json!(cloud.api_key_env));
    facts.insert(
        "cloud_api_key_present".into(),
        json!(cloud.api_key_env.as_ref().map(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))),
    );
    checks.ok(
        "offline",
        if config.offline {
            "on: ghostline opens no socket".to_string()
        } else {
            format!("off (privacy: {:?}); completions never leave the machine either way", config.privacy)
        },
    );
    facts.insert("offline".into(), json!(config.offline));
    shared_host(&config, &mut checks, &mut facts);
    match crate::stats::report::doctor_line(&config.stats) {
        crate::stats::report::Health::Ok(detail) => checks.ok("stats", detail),
        crate::stats::report::Health::Warn { detail, fix } => checks.warn("stats", detail, fix),
        crate::stats::report::Health::Fail { detail, fix } => checks.fail("stats", detail, fix),
    }

    let ok = !checks.0.iter().any(|c| c.level == Level::Fail);
    Report { ok, checks: checks.0, facts: Value::Object(facts) }
}

/// `model.shared`: the host of this model and these settings — its pid, model, windows and
/// memory — or that none runs, or why its socket is refused.
fn shared_host(config: &Config, checks: &mut Checks, facts: &mut serde_json::Map<String, serde_json::Value>) {
    if !config.model.shared || config.model.endpoint.is_some() {
        let why = if config.model.endpoint.is_some() { "off: completions go to model.endpoint" } else { "off: each editor window loads its own model" };
        checks.ok("shared host", why);
        return;
    }
    let Some(spec) = crate::model::host::Spec::of(&config.model, Sampling::from(&config.completion)) else {
        return checks.ok("shared host", "no model to share");
    };
    let place = crate::model::host::Place::of(&spec).map(|p| p.socket.display().to_string()).unwrap_or_default();
    match host_status(&spec) {
        Ok(Some(h)) => {
            checks.ok(
                "shared host",
                format!(
                    "pid {}, {} ({}), {} window{} connected, {} resident, socket {place}",
                    h.pid,
                    h.model.path.display(),
                    h.model.format,
                    h.windows,
                    if h.windows == 1 { "" } else { "s" },
                    mib(h.rss_bytes)
                ),
            );
            facts.insert("shared_host".into(), json!(h));
        }
        Ok(None) => checks.ok("shared host", format!("none running for this model and these settings (the first editor window starts one at {place})")),
        Err(e) => checks.warn("shared host", e, "remove the socket (and check who made it): windows load their own model meanwhile"),
    }
}

#[cfg(unix)]
fn host_status(spec: &crate::model::host::Spec) -> Result<Option<crate::model::host::wire::HostInfo>, String> {
    crate::model::host::client_status(spec)
}

#[cfg(not(unix))]
fn host_status(_: &crate::model::host::Spec) -> Result<Option<crate::model::host::wire::HostInfo>, String> {
    Ok(None)
}

fn load(config: &Config) -> Result<crate::model::ModelInfo, String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let handle = ModelHandle::spawn(&config.model, Sampling::from(&config.completion));
    match runtime.block_on(handle.wait_loaded()) {
        ModelStatus::Ready(info) | ModelStatus::Unloaded(info) => Ok(info),
        ModelStatus::Failed(e) => Err(e),
        ModelStatus::NotConfigured => Err("no model configured".into()),
        ModelStatus::Loading { .. } => Err("the model did not finish loading".into()),
    }
}

/// `ghostline models`: every model found in the usual places, ranked, with the reasons.
pub fn models(memory_budget_mb: Option<u64>) -> (Vec<Candidate>, Roots) {
    let roots = Roots::from_env();
    let mut options = Options::default();
    options.model.memory_budget_mb = memory_budget_mb;
    let config = options.resolve(None);
    (discover::rank(discover::scan(&roots), &config.model), roots)
}

pub fn print_models(candidates: &[Candidate], roots: &Roots) {
    let searched = |v: &[PathBuf]| v.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    println!("searched:");
    println!("  Hugging Face cache  {}", searched(&roots.hugging_face));
    println!("  LM Studio           {}", searched(&roots.lm_studio));
    println!("  llama.cpp cache     {}", searched(&roots.llama_cpp));
    println!("  Ollama              {}", searched(&roots.ollama));
    if candidates.is_empty() {
        println!("no GGUF models found");
        return;
    }
    println!("found {} model{} (best first):", candidates.len(), if candidates.len() == 1 { "" } else { "s" });
    for (i, c) in candidates.iter().enumerate() {
        let mark = if i == 0 && c.error.is_none() { "*" } else { " " };
        println!("{mark} {}  [{}]", c.found.name, c.found.source.label());
        println!("    {}", c.found.path.display());
        println!("    {}", c.reasons.join("; "));
    }
    if candidates[0].error.is_none() {
        println!("* used when no model.path or {} is set", config::MODEL_ENV);
    }
}
