//! Settings: the camelCase options an editor sends, and the resolved internal `Config`.
//!
//! Editors send `initializationOptions` (and `workspace/didChangeConfiguration`) shaped like
//! [`Options`]. Unknown keys are reported as warnings; a value of the wrong type (or out of
//! range) is an error naming the key path, and that key alone keeps its previous value (its
//! default at `initialize`) while every other key applies ([`parse_lenient`]).

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

/// Environment variable naming the model file when no `model.path` is configured.
pub const MODEL_ENV: &str = "GHOSTLINE_MODEL";

/// Client-facing settings, mirroring the editor JSON.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Options {
    pub model: ModelOptions,
    pub completion: CompletionOptions,
    pub cloud: CloudOptions,
    pub actions: ActionsOptions,
    pub context: ContextOptions,
    pub privacy: Option<Privacy>,
    pub offline: Option<bool>,
    pub debug: DebugOptions,
    pub stats: StatsOptions,
    pub next_edit: NextEditOptions,
}

/// Next edits (`ghostline/nextEdit`, `textDocument/copilotInlineEdit`, the "Apply next edit"
/// code action): on by default.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NextEditOptions {
    pub enabled: Option<bool>,
    pub format: Option<NextEditFormat>,
}

/// `nextEdit.format`: how the model takes part in next edits.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NextEditFormat {
    /// A next-edit model's format when the GGUF's name says it is one, else `fim`.
    #[default]
    Auto,
    /// The FIM model fills the holes a changed signature leaves.
    Fim,
    /// The model is a next-edit model of Sweep's format (`nextedit::sweep`).
    Sweep,
}

/// Local acceptance statistics (`stats/`): on by default, stored only on this machine.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct StatsOptions {
    pub enabled: Option<bool>,
    /// The database file (default: `stats.sqlite` in the user's data directory).
    pub path: Option<PathBuf>,
    /// When retention is measured after an accept, in seconds (default `[30, 300]`); for tests.
    pub retention_seconds: Option<[f64; 2]>,
}

/// Diagnostics for developers. Off by default: logs then never hold code, prompts or
/// suggestions, only sizes and timings.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct DebugOptions {
    /// Write prompts, generated text and dropped suggestions to the log (at debug/trace level).
    pub log_code: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelOptions {
    pub path: Option<PathBuf>,
    pub threads: Option<u32>,
    pub context_size: Option<u32>,
    pub batch_size: Option<u32>,
    /// Layers offloaded to the GPU (default: all when a GPU backend is built in, else 0).
    pub gpu_layers: Option<u32>,
    /// Memory for weights + KV cache + compute buffers, in MiB (default: half of physical memory).
    pub memory_budget_mb: Option<u64>,
    /// Unload the model after this much inactivity (seconds, or a duration string like "10m").
    pub keep_alive: Option<KeepAlive>,
    /// Prompt tokens decoded per batch, in chunks aligned to position 0 (0: off).
    pub prefill_chunk: Option<u32>,
    /// Decode with fewer than `threads` while other processes keep cores busy (default on).
    pub adaptive_threads: Option<bool>,
    /// Prompt-lookup drafting while generating: unset, where it pays by measurement; `true`
    /// always; `false` never. Only where the kernels are batch-invariant (the text is then the
    /// same as without it).
    pub draft: Option<bool>,
    /// A llama-server (or vLLM) that generates completions in place of the local model
    /// (`https://…`, or `http://` on a loopback address). `model.path` then names the GGUF whose
    /// vocabulary ghostline tokenizes with (its weights are loaded only to fall back on).
    pub endpoint: Option<String>,
    /// The environment variable holding the endpoint's bearer key.
    pub api_key_env: Option<String>,
    /// Whether the endpoint may see every file this machine's model would (a team box run by
    /// the team). Default: trusted on a loopback address, untrusted elsewhere — an untrusted
    /// endpoint gets what the cloud route would (privacy, `cloud.exclude`, redaction).
    pub endpoint_trusted: Option<bool>,
    /// The endpoint's API: `"llama-server"` (`/completion`, the default) or `"vllm"`
    /// (OpenAI-compatible `/v1/completions` with token ids).
    pub endpoint_api: Option<EndpointApi>,
    /// Generate on this machine (with `model.path`'s weights) when a file may not go to the
    /// endpoint, or the endpoint cannot be reached (default on).
    pub local_fallback: Option<bool>,
    /// One resident model for this user's editor windows (`model/host/`): default on for Unix
    /// when the model's layers go to a GPU (unless `GHOSTLINE_SHARED` is `0`/`off`), off on
    /// the CPU; not available elsewhere.
    pub shared: Option<bool>,
}

/// The API a completion endpoint speaks.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum EndpointApi {
    /// llama.cpp's `llama-server`: `POST /completion` with token ids and `cache_prompt`.
    #[default]
    LlamaServer,
    /// vLLM's OpenAI-compatible `POST /v1/completions`, whose `prompt` takes token ids.
    Vllm,
}

/// `model.keepAlive`: seconds as a number (fractions allowed), or a string of numbers with
/// units `ms`, `s`, `m`, `h` (`"90s"`, `"10m"`, `"1h30m"`); `0`, a negative number, `"never"` or
/// `null` keep the model loaded for good.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeepAlive(pub Option<std::time::Duration>);

impl<'de> Deserialize<'de> for KeepAlive {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Seconds(f64),
            Text(String),
        }
        let raw = Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("expected seconds (a number) or a duration string such as \"10m\"")
        })?;
        match raw {
            Raw::Seconds(s) if s.is_finite() && s > 0.0 => Ok(KeepAlive(Some(std::time::Duration::from_secs_f64(s)))),
            Raw::Seconds(s) if s.is_finite() => Ok(KeepAlive(None)),
            Raw::Seconds(_) => Err(serde::de::Error::custom("expected a finite number of seconds")),
            Raw::Text(t) => parse_duration(&t).map(KeepAlive).map_err(serde::de::Error::custom),
        }
    }
}

/// The environment variable that turns `model.shared`'s default off (`0`, `off`, `false`): the
/// test and benchmark clients (`stdio_client`) set it, so that the servers they start load
/// their own model unless a test asks for the host, and never reach a host of the user's.
pub const SHARED_ENV: &str = "GHOSTLINE_SHARED";

/// `model.shared` when the settings do not say and layers go to a GPU: on, unless
/// [`SHARED_ENV`] turns it off.
fn shared_by_default() -> bool {
    !matches!(std::env::var(SHARED_ENV).map(|v| v.trim().to_ascii_lowercase()).as_deref(), Ok("0" | "off" | "false" | "no"))
}

/// Parses `"90s"`, `"10m"`, `"1h30m"`, `"250ms"`, `"45"` (seconds), `"never"`; zero is `None`.
pub fn parse_duration(text: &str) -> Result<Option<std::time::Duration>, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "never" || t == "off" || t == "forever" {
        return Ok(None);
    }
    let bad = || format!("cannot read {text:?} as a duration: use seconds or e.g. \"90s\", \"10m\", \"1h30m\"");
    let mut total = 0.0f64;
    let mut rest = t.as_str();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let value: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let factor = match rest[..unit_end].trim() {
            "" | "s" | "sec" | "secs" => 1.0,
            "ms" => 0.001,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hrs" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * factor;
        rest = &rest[unit_end..];
    }
    if total <= 0.0 {
        return Ok(None);
    }
    std::time::Duration::try_from_secs_f64(total).map(Some).map_err(|_| format!("{text:?} is out of range as a duration"))
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CompletionOptions {
    pub enabled: Option<bool>,
    pub max_tokens: Option<u32>,
    pub max_prompt_tokens: Option<u32>,
    pub typed_ahead: Option<bool>,
    pub generate_ahead: Option<bool>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<u32>,
    pub lines_before: Option<u32>,
    pub lines_after: Option<u32>,
    /// Globs of files never completed in, added to [`crate::exclude::DEFAULT_EXCLUDE`].
    pub exclude: Option<Vec<String>>,
    /// `false`: `exclude` replaces the default globs instead of adding to them.
    pub exclude_defaults: Option<bool>,
    /// No request when more non-space characters than this follow the cursor on its line.
    pub max_right_chars: Option<u32>,
    /// Put what the code at the cursor uses from other files of the workspace into the prompt.
    pub cross_file: Option<bool>,
    /// Lay the prompt out with the model's fill-in-the-middle markers (the text after the
    /// cursor included) when it has them; `false`: the text before the cursor only.
    pub fim: Option<bool>,
}

/// What the workspace index may read for the prompt's cross-file section.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ContextOptions {
    /// Globs of files never read into any prompt, added to `cloud.exclude` and
    /// `completion.exclude` (matched against the path relative to the workspace root).
    pub exclude: Option<Vec<String>>,
    /// Files indexed at most.
    pub max_files: Option<u32>,
    /// Files larger than this (KiB) are not indexed.
    pub max_file_kb: Option<u64>,
    /// Memory the index may hold, in MiB.
    pub memory_mb: Option<u64>,
}

/// Cloud endpoint settings (used by code actions; completion never leaves the machine).
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CloudOptions {
    pub endpoint: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub connect_timeout_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub max_retries: Option<u32>,
    pub daily_token_budget: Option<u64>,
    pub breaker_failures: Option<u32>,
    pub breaker_cooldown_s: Option<u64>,
    pub cache_dir: Option<PathBuf>,
    pub cache_entries: Option<u32>,
    /// Globs of files never sent (matched against the path relative to the workspace root).
    pub exclude: Option<Vec<String>>,
}

/// Code actions: where each task prefers to run, and how long an answer may be.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ActionsOptions {
    pub enabled: Option<bool>,
    pub max_tokens: Option<u32>,
    pub prefer: PreferOptions,
}

/// Per-task route preference.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PreferOptions {
    pub tests: Option<Prefer>,
    pub docstring: Option<Prefer>,
    pub refactor: Option<Prefer>,
    pub fix: Option<Prefer>,
}

/// Where a task prefers to run; `auto` is the task's default (tests, refactors and fixes prefer
/// the cloud when privacy allows it, docstrings the local model).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Prefer {
    Auto,
    Local,
    Cloud,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Privacy {
    LocalOnly,
    Redact,
    Allow,
}

/// The resolved configuration the engine runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub model: ModelConfig,
    pub completion: CompletionConfig,
    pub cloud: CloudConfig,
    pub actions: ActionsConfig,
    pub context: ContextConfig,
    pub privacy: Privacy,
    pub offline: bool,
    /// `debug.logCode`: code may appear in logs.
    pub log_code: bool,
    pub stats: StatsConfig,
    pub next_edit: NextEditConfig,
}

/// `nextEdit.*` resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct NextEditConfig {
    /// Edits are recorded and next edits proposed.
    pub enabled: bool,
    pub format: NextEditFormat,
}

impl Default for NextEditConfig {
    fn default() -> Self {
        NextEditConfig { enabled: true, format: NextEditFormat::Auto }
    }
}

/// `stats.*` resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsConfig {
    pub enabled: bool,
    /// `None`: the default file (`stats::Stats::default_path`).
    pub path: Option<PathBuf>,
    /// The two retention checks after an accept (30 s and 5 minutes by default).
    pub retention: [std::time::Duration; 2],
}

/// Files never sent to the cloud unless `cloud.exclude` says otherwise.
pub const DEFAULT_EXCLUDE: &[&str] =
    &[".env", ".env.*", "**/.env", "**/.env.*", "*.pem", "*.key", "**/*.pem", "**/*.key", "secrets/**", "**/secrets/**", "**/id_rsa*", "**/*.p12"];

/// The cloud endpoint for code actions (completion never leaves the machine).
#[derive(Debug, Clone, PartialEq)]
pub struct CloudConfig {
    /// OpenAI-compatible base URL (`…/v1`); `None`: no cloud.
    pub endpoint: Option<String>,
    pub model: String,
    /// Name of the environment variable holding the API key (the key itself is never stored).
    pub api_key_env: Option<String>,
    pub connect_timeout_ms: u64,
    pub timeout_ms: u64,
    pub max_retries: u32,
    pub daily_token_budget: u64,
    pub breaker_failures: u32,
    pub breaker_cooldown_s: u64,
    pub cache_dir: Option<PathBuf>,
    pub cache_entries: u32,
    pub exclude: Vec<String>,
}

/// The workspace index's limits and the files it never reads (`context.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct ContextConfig {
    /// `context.exclude`, `cloud.exclude` and `completion.exclude` together: a file that may not
    /// be sent or completed in is not read into a prompt either.
    pub exclude: Vec<String>,
    pub max_files: usize,
    pub max_file_bytes: u64,
    pub memory_bytes: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ActionsConfig {
    pub enabled: bool,
    pub max_tokens: u32,
    pub prefer: PreferOptions,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `None` when neither `model.path` nor `GHOSTLINE_MODEL` names a file.
    pub path: Option<PathBuf>,
    pub threads: u32,
    /// The context size at most: the memory budget and the trained context may lower it.
    pub context_size: u32,
    pub batch_size: u32,
    /// `None`: the backend's default (all layers on a GPU backend, none on the CPU).
    pub gpu_layers: Option<u32>,
    /// `None`: half of the physical memory.
    pub memory_budget_mb: Option<u64>,
    /// `None`: never unload.
    pub keep_alive: Option<std::time::Duration>,
    /// Prompt positions are decoded in batches of this many tokens aligned to position 0, so
    /// that each position is computed in the same batch whatever was cached: warm and cold
    /// answers are identical. 0: off (a warm request decodes only what changed). `None`: the
    /// backend's default (`model::backend::default_prefill_chunk`).
    pub prefill_chunk: Option<u32>,
    /// `threads` is the most a job gets: fewer while other processes keep cores busy
    /// (`model::threads`). Off: always `threads`.
    pub adaptive_threads: bool,
    /// Draft tokens from the prompt and check them in one batch (`model::llama`'s generation
    /// loop), where the kernels are batch-invariant: `None` where it pays (measured as it
    /// runs), `Some(true)` always, `Some(false)` never (one token per decode).
    pub draft: Option<bool>,
    /// Set when no model was configured and one was discovered: which, and why.
    pub discovered: Option<String>,
    /// `model.endpoint`: completions generated by a server (`model/remote.rs`).
    pub endpoint: Option<EndpointConfig>,
    /// `model.shared`: the language server sends its jobs to the user's resident model host
    /// (`model/host/`) instead of loading the model itself. Always false off Unix.
    pub shared: bool,
}

/// `model.endpoint` resolved (checked by `check_values`: `https`, or `http` on loopback).
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointConfig {
    /// The base URL, without a trailing `/`.
    pub url: String,
    pub api: EndpointApi,
    pub api_key_env: Option<String>,
    /// May see every file (see `ModelOptions::endpoint_trusted`).
    pub trusted: bool,
    pub local_fallback: bool,
    /// `offline: true`: never connect; every completion stays on this machine.
    pub offline: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CompletionConfig {
    pub enabled: bool,
    pub max_tokens: u32,
    pub max_prompt_tokens: u32,
    /// Answer from the previous suggestion when the user types its start.
    pub typed_ahead: bool,
    /// Start generating for the cursor as soon as a keystroke arrives (`didChange`), so that
    /// the editor's request after its debounce finds the suggestion made or under way.
    pub generate_ahead: bool,
    pub repeat_penalty: f32,
    pub repeat_last_n: u32,
    pub lines_before: u32,
    pub lines_after: u32,
    /// The globs of files never completed in: `completion.exclude` (its defaults included unless
    /// turned off), then `context.exclude`.
    pub exclude: Vec<String>,
    pub max_right_chars: u32,
    /// `completion.crossFile`: the prompt's cross-file section (the workspace index).
    pub cross_file: bool,
    /// `completion.fim`: FIM markers and the suffix when the model has them.
    pub fim: bool,
}

impl Default for Config {
    fn default() -> Self {
        Options::default().resolve(None)
    }
}

/// Settings parsed from JSON, plus the keys that were not understood.
#[derive(Debug)]
pub struct Parsed {
    pub options: Options,
    pub unknown_keys: Vec<String>,
}

/// Editors that namespace their settings (`{"ghostline": {...}}`, as VS Code does) send them
/// one level down: the settings themselves.
pub fn unwrap_namespace(value: &Value) -> &Value {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key("ghostline") => &map["ghostline"],
        other => other,
    }
}

/// Settings must be an object (or `null`, no settings); anything else is named in the error.
pub fn check_shape(value: &Value) -> Result<(), String> {
    let value = unwrap_namespace(value);
    if value.is_null() || value.is_object() {
        return Ok(());
    }
    let what = json_kind(value);
    Err(format!("ghostline settings must be an object such as {{\"model\": {{\"path\": \"…\"}}}}, not {what}"))
}

/// What a JSON value is, for messages ("an array").
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
    }
}

/// Lays a settings change over the settings in force, key by key (JSON merge patch, RFC 7386):
/// an object merges into the object under the same key, any other value replaces it (arrays
/// included), and `null` removes the key, which then takes its default. A change therefore
/// names only what changes; `null` or `{}` changes nothing. Both sides may be namespaced.
pub fn layer(base: &Value, change: &Value) -> Value {
    fn merge(base: &mut Value, patch: &Value) {
        let Value::Object(patch) = patch else {
            *base = patch.clone();
            return;
        };
        if !base.is_object() {
            *base = Value::Object(Default::default());
        }
        let map = base.as_object_mut().expect("made an object above");
        for (key, value) in patch {
            match value {
                Value::Null => {
                    map.remove(key);
                }
                Value::Object(_) => merge(map.entry(key.clone()).or_insert(Value::Null), value),
                other => {
                    map.insert(key.clone(), other.clone());
                }
            }
        }
    }
    let mut out = unwrap_namespace(base).clone();
    match unwrap_namespace(change) {
        Value::Null => {}
        change => merge(&mut out, change),
    }
    out
}

/// Parses editor settings. `null` means "no settings". Editors that namespace their settings
/// (`{"ghostline": {...}}`, as VS Code does) are accepted too. Strict: the first bad value is
/// the error (for a settings file and the CLI; the server reads with [`parse_lenient`]).
pub fn parse(value: &Value) -> Result<Parsed, String> {
    check_shape(value)?;
    parse_object(unwrap_namespace(value)).map_err(|bad| bad.message)
}

/// A value that cannot be read: the key path it sits at (`["context", "maxFiles"]`; empty for
/// the settings as a whole) and the message naming it.
struct BadValue {
    key: Vec<String>,
    message: String,
}

impl BadValue {
    fn at(key: &str, message: String) -> Self {
        BadValue { key: key.split('.').map(String::from).collect(), message }
    }
}

fn parse_object(value: &Value) -> Result<Parsed, BadValue> {
    if value.is_null() {
        return Ok(Parsed { options: Options::default(), unknown_keys: vec![] });
    }
    // A section given as an array would be read field by field (`model[0]`): name it instead.
    for section in ["/model", "/completion", "/cloud", "/actions", "/actions/prefer", "/context", "/debug", "/stats"] {
        if let Some(v) = value.pointer(section).filter(|v| !v.is_object() && !v.is_null()) {
            let kind = json_kind(v);
            let key = section[1..].replace('/', ".");
            return Err(BadValue::at(&key, format!("invalid ghostline setting `{key}`: expected an object, found {kind}")));
        }
    }
    let mut unknown_keys = Vec::new();
    let mut record = |path: serde_ignored::Path<'_>| unknown_keys.push(path.to_string());
    let de = serde_ignored::Deserializer::new(value, &mut record);
    let options: Options = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        // The object keys leading to the value; an index into an array names the array's key.
        let key = e
            .path()
            .iter()
            .map_while(|segment| match segment {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                _ => None,
            })
            .collect();
        // "expected struct CompletionOptions" names a Rust type; the editor's user sees JSON.
        let mut inner = e.inner().to_string();
        if let Some(at) = inner.find("expected struct ") {
            inner.replace_range(at.., "expected an object");
        }
        let message = if path == "." {
            format!("invalid ghostline settings: {inner}")
        } else {
            format!("invalid ghostline setting `{path}`: {inner}")
        };
        BadValue { key, message }
    })?;
    check_values(&options)?;
    Ok(Parsed { options, unknown_keys })
}

/// Values of the right type that still cannot be used: said, never silently replaced.
fn check_values(options: &Options) -> Result<(), BadValue> {
    if let Some([a, b]) = options.stats.retention_seconds {
        if !(a.is_finite() && b.is_finite() && a > 0.0 && b >= a) {
            return Err(BadValue::at(
                "stats.retentionSeconds",
                format!("invalid ghostline setting `stats.retentionSeconds`: expected two positive numbers of seconds, the second not below the first (got [{a}, {b}])"),
            ));
        }
    }
    if let Some(url) = options.model.endpoint.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        endpoint_loopback(url).map_err(|why| BadValue::at("model.endpoint", format!("invalid ghostline setting `model.endpoint`: {why}")))?;
    }
    let c = &options.context;
    let limit = |key: &str, value: Option<u64>, max: u64, unit: &str| match value {
        Some(0) => Err(BadValue::at(key, format!("invalid ghostline setting `{key}`: 0 would index nothing; use `completion.crossFile: false` to turn the cross-file section off"))),
        Some(n) if n > max => Err(BadValue::at(key, format!("invalid ghostline setting `{key}`: {n} is more than the largest allowed, {max}{unit}"))),
        _ => Ok(()),
    };
    limit("context.maxFiles", c.max_files.map(u64::from), MAX_INDEX_FILES, " files")?;
    limit("context.maxFileKb", c.max_file_kb, MAX_INDEX_FILE_KB, " KiB")?;
    limit("context.memoryMb", c.memory_mb, MAX_INDEX_MEMORY_MB, " MiB")?;
    Ok(())
}

/// Checks a completion endpoint's URL: `https`, or `http` on a loopback address (nothing
/// leaves the machine unencrypted). Returns whether it is on loopback.
pub fn endpoint_loopback(url: &str) -> Result<bool, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL ({e}); expected e.g. \"https://gpu.example.com:8080\""))?;
    let host = parsed.host_str().filter(|h| !h.is_empty()).ok_or_else(|| format!("{url:?} names no host"))?;
    let ip = host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>();
    let loopback = host.eq_ignore_ascii_case("localhost") || ip.is_ok_and(|ip| ip.is_loopback());
    match parsed.scheme() {
        "https" => Ok(loopback),
        "http" if loopback => Ok(true),
        "http" => Err(format!("{url:?} is plain http on a host that is not loopback: code would cross the network unencrypted; use https (or an SSH tunnel to 127.0.0.1)")),
        other => Err(format!("{url:?}: the scheme {other:?} is not http or https")),
    }
}

/// The largest `context.maxFiles`, `context.maxFileKb` and `context.memoryMb` taken: far above
/// any workspace ghostline is meant for, and small enough that no size computed from them
/// overflows.
pub const MAX_INDEX_FILES: u64 = 1_000_000;
pub const MAX_INDEX_FILE_KB: u64 = 1024 * 1024;
pub const MAX_INDEX_MEMORY_MB: u64 = 1024 * 1024;

/// Settings read key by key: a value that cannot be read is reported and takes its value in
/// `base` (the settings in force before; `null` at `initialize`), or its default where `base`
/// has none — every other key is kept. Only settings that are not an object at all are refused
/// as a whole.
#[derive(Debug)]
pub struct Lenient {
    pub parsed: Parsed,
    /// The settings as kept: `value` with each bad key replaced by `base`'s (or removed).
    pub kept: Value,
    /// One message per bad key, naming it.
    pub errors: Vec<String>,
}

pub fn parse_lenient(value: &Value, base: &Value) -> Result<Lenient, String> {
    check_shape(value)?;
    let mut kept = unwrap_namespace(value).clone();
    let base = unwrap_namespace(base);
    let mut errors = Vec::new();
    let mut reverted: Vec<Vec<String>> = Vec::new();
    loop {
        let bad = match parse_object(&kept) {
            Ok(parsed) => return Ok(Lenient { parsed, kept, errors }),
            Err(bad) if bad.key.is_empty() => return Err(bad.message),
            Err(bad) => bad,
        };
        // The base's value for the key — unless that was tried already and is bad too: then
        // the key goes (its default).
        let tried = reverted.contains(&bad.key);
        if !tried {
            errors.push(bad.message);
        }
        let previous = if tried { None } else { pointer(base, &bad.key).cloned() };
        replace(&mut kept, &bad.key, previous);
        reverted.push(bad.key);
        if reverted.len() > 512 {
            return Err("invalid ghostline settings: too many bad values".into());
        }
    }
}

fn pointer<'v>(value: &'v Value, key: &[String]) -> Option<&'v Value> {
    key.iter().try_fold(value, |v, k| v.get(k)).filter(|v| !v.is_null())
}

/// Sets (or with `None` removes) the value at `key`, which exists in `value`.
fn replace(value: &mut Value, key: &[String], with: Option<Value>) {
    let Some((last, parents)) = key.split_last() else { return };
    let parent = parents.iter().try_fold(value, |v, k| v.get_mut(k));
    if let Some(Value::Object(map)) = parent {
        match with {
            Some(v) => {
                map.insert(last.clone(), v);
            }
            None => {
                map.remove(last);
            }
        }
    }
}

/// Reads and parses a settings file (the JSON an editor would send as initializationOptions).
pub fn parse_file(file: &std::path::Path) -> Result<Parsed, String> {
    std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))
        .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| format!("{} is not JSON: {e}", file.display())))
        .and_then(|value| parse(&value))
}

impl Options {
    /// Fills defaults. `env_model` is the value of `GHOSTLINE_MODEL`, if set.
    pub fn resolve(&self, env_model: Option<PathBuf>) -> Config {
        let m = &self.model;
        let c = &self.completion;
        Config {
            model: ModelConfig {
                path: m.path.as_deref().map(expand_home).or(env_model).filter(|p| !p.as_os_str().is_empty()),
                threads: m.threads.filter(|&t| t > 0).unwrap_or_else(default_threads),
                context_size: m.context_size.filter(|&n| n >= 256).unwrap_or(4096),
                batch_size: m.batch_size.filter(|&n| n >= 16).unwrap_or(512),
                gpu_layers: m.gpu_layers,
                memory_budget_mb: m.memory_budget_mb.filter(|&mb| mb > 0),
                keep_alive: m.keep_alive.and_then(|k| k.0),
                prefill_chunk: m.prefill_chunk,
                adaptive_threads: m.adaptive_threads.unwrap_or(true),
                draft: m.draft,
                discovered: None,
                // On by default only where the weights go to a GPU: on the CPU the OS already
                // shares the mapped weights between windows' processes, and one host serves
                // one job at a time (README, "One model for every window").
                shared: cfg!(unix) && m.shared.unwrap_or_else(|| shared_by_default() && crate::model::backend::gpu_layers(m.gpu_layers) > 0),
                endpoint: m.endpoint.as_deref().map(str::trim).filter(|e| !e.is_empty()).and_then(|url| {
                    let loopback = endpoint_loopback(url).ok()?;
                    Some(EndpointConfig {
                        url: url.trim_end_matches('/').to_owned(),
                        api: m.endpoint_api.unwrap_or_default(),
                        api_key_env: m.api_key_env.clone().filter(|e| !e.trim().is_empty()),
                        trusted: m.endpoint_trusted.unwrap_or(loopback),
                        local_fallback: m.local_fallback.unwrap_or(true),
                        offline: self.offline.unwrap_or(false),
                    })
                }),
            },
            completion: CompletionConfig {
                enabled: c.enabled.unwrap_or(true),
                max_tokens: c.max_tokens.filter(|&n| n > 0).unwrap_or(64),
                max_prompt_tokens: c.max_prompt_tokens.filter(|&n| n >= 64).unwrap_or(1024),
                typed_ahead: c.typed_ahead.unwrap_or(true),
                generate_ahead: c.generate_ahead.unwrap_or(true),
                repeat_penalty: c.repeat_penalty.filter(|p| p.is_finite() && *p > 0.0).unwrap_or(1.1),
                repeat_last_n: c.repeat_last_n.unwrap_or(64),
                lines_before: c.lines_before.unwrap_or(64),
                lines_after: c.lines_after.unwrap_or(16),
                // A file `context.exclude` names is never put into any prompt, its own
                // completions' included.
                exclude: {
                    let mut globs = crate::exclude::globs(c.exclude.as_deref(), c.exclude_defaults.unwrap_or(true));
                    for glob in self.context.exclude.iter().flatten() {
                        if !globs.contains(glob) {
                            globs.push(glob.clone());
                        }
                    }
                    globs
                },
                max_right_chars: c.max_right_chars.unwrap_or(crate::exclude::DEFAULT_MAX_RIGHT_CHARS),
                cross_file: c.cross_file.unwrap_or(true),
                fim: c.fim.unwrap_or(true),
            },
            cloud: {
                let o = &self.cloud;
                CloudConfig {
                    endpoint: o.endpoint.clone().filter(|e| !e.trim().is_empty()),
                    model: o.model.clone().unwrap_or_else(|| "default".into()),
                    api_key_env: o.api_key_env.clone().filter(|e| !e.trim().is_empty()),
                    connect_timeout_ms: o.connect_timeout_ms.filter(|&n| n > 0).unwrap_or(5_000),
                    timeout_ms: o.timeout_ms.filter(|&n| n > 0).unwrap_or(120_000),
                    max_retries: o.max_retries.unwrap_or(2),
                    daily_token_budget: o.daily_token_budget.unwrap_or(200_000),
                    breaker_failures: o.breaker_failures.filter(|&n| n > 0).unwrap_or(3),
                    breaker_cooldown_s: o.breaker_cooldown_s.unwrap_or(300),
                    cache_dir: o.cache_dir.as_deref().map(expand_home).filter(|p| !p.as_os_str().is_empty()),
                    cache_entries: o.cache_entries.unwrap_or(256),
                    exclude: o.exclude.clone().unwrap_or_else(|| DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect()),
                }
            },
            actions: ActionsConfig {
                enabled: self.actions.enabled.unwrap_or(true),
                max_tokens: self.actions.max_tokens.filter(|&n| n >= 16).unwrap_or(384),
                prefer: self.actions.prefer.clone(),
            },
            context: {
                let o = &self.context;
                let cloud = self.cloud.exclude.clone().unwrap_or_else(|| DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect());
                let completion = crate::exclude::globs(c.exclude.as_deref(), c.exclude_defaults.unwrap_or(true));
                let mut exclude: Vec<String> = o.exclude.clone().unwrap_or_default();
                for glob in cloud.into_iter().chain(completion) {
                    if !exclude.contains(&glob) {
                        exclude.push(glob);
                    }
                }
                ContextConfig {
                    exclude,
                    // Bounded by `check_values` (0 and overflowing sizes are refused there).
                    max_files: o.max_files.filter(|&n| n > 0).map_or(5_000, |n| (n as u64).min(MAX_INDEX_FILES) as usize),
                    max_file_bytes: o.max_file_kb.filter(|&n| n > 0).unwrap_or(512).min(MAX_INDEX_FILE_KB) * 1024,
                    memory_bytes: (o.memory_mb.filter(|&n| n > 0).unwrap_or(64).min(MAX_INDEX_MEMORY_MB) * 1024 * 1024) as usize,
                }
            },
            privacy: self.privacy.unwrap_or(Privacy::LocalOnly),
            offline: self.offline.unwrap_or(false),
            log_code: self.debug.log_code.unwrap_or(false),
            stats: StatsConfig {
                enabled: self.stats.enabled.unwrap_or(true),
                path: self.stats.path.as_deref().map(expand_home).filter(|p| !p.as_os_str().is_empty()),
                retention: match self.stats.retention_seconds {
                    Some([a, b]) if a.is_finite() && b.is_finite() && a > 0.0 && b >= a => {
                        [std::time::Duration::from_secs_f64(a), std::time::Duration::from_secs_f64(b)]
                    }
                    _ => [std::time::Duration::from_secs(30), std::time::Duration::from_secs(300)],
                },
            },
            next_edit: NextEditConfig { enabled: self.next_edit.enabled.unwrap_or(true), format: self.next_edit.format.unwrap_or_default() },
        }
    }
}

static LOG_CODE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether code, prompts and suggestions may be logged (`debug.logCode`), process-wide.
pub fn log_code() -> bool {
    LOG_CODE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Applies `debug.logCode` from the configuration now in force.
pub fn set_log_code(enabled: bool) {
    LOG_CODE.store(enabled, std::sync::atomic::Ordering::Relaxed);
}

/// A path setting with a leading `~`, `$HOME` or `${HOME}` taken to the user's home folder,
/// as a shell would: editors other than VS Code send the setting as the user wrote it. Other
/// paths are unchanged (`~user` too).
pub fn expand_home(path: &std::path::Path) -> PathBuf {
    let Some(text) = path.to_str() else { return path.to_path_buf() };
    let rest = ["~", "${HOME}", "$HOME"].iter().find_map(|prefix| {
        text.strip_prefix(prefix).filter(|rest| rest.is_empty() || rest.starts_with('/') || rest.starts_with(std::path::MAIN_SEPARATOR))
    });
    match (rest, std::env::var_os("HOME").filter(|h| !h.is_empty())) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest.trim_start_matches(['/', std::path::MAIN_SEPARATOR])),
        _ => path.to_path_buf(),
    }
}

/// Reads `GHOSTLINE_MODEL` from the environment.
pub fn env_model() -> Option<PathBuf> {
    std::env::var_os(MODEL_ENV).map(PathBuf::from).filter(|p| !p.as_os_str().is_empty())
}

/// Physical cores: hyper-threads share a core's arithmetic units and only add contention.
pub fn default_threads() -> u32 {
    num_cpus::get_physical().max(1) as u32
}

#[cfg(test)]
mod tests;
