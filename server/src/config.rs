//! Settings: the camelCase options an editor sends, and the resolved internal `Config`.
//!
//! Editors send `initializationOptions` (and `workspace/didChangeConfiguration`) shaped like
//! [`Options`]. Unknown keys are reported as warnings; a value of the wrong type is an error
//! naming the key path, and the previous configuration stays in force.

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
    pub privacy: Option<Privacy>,
    pub offline: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelOptions {
    pub path: Option<PathBuf>,
    pub threads: Option<u32>,
    pub context_size: Option<u32>,
    pub batch_size: Option<u32>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CompletionOptions {
    pub enabled: Option<bool>,
    pub max_tokens: Option<u32>,
    pub max_prompt_tokens: Option<u32>,
    pub typed_ahead: Option<bool>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<u32>,
    pub lines_before: Option<u32>,
    pub lines_after: Option<u32>,
}

/// Cloud endpoint settings (used by code actions; completion never leaves the machine).
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CloudOptions {
    pub endpoint: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
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
    pub cloud: CloudOptions,
    pub privacy: Privacy,
    pub offline: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `None` when neither `model.path` nor `GHOSTLINE_MODEL` names a file.
    pub path: Option<PathBuf>,
    pub threads: u32,
    pub context_size: u32,
    pub batch_size: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CompletionConfig {
    pub enabled: bool,
    pub max_tokens: u32,
    pub max_prompt_tokens: u32,
    /// Answer from the previous suggestion when the user types its start.
    pub typed_ahead: bool,
    pub repeat_penalty: f32,
    pub repeat_last_n: u32,
    pub lines_before: u32,
    pub lines_after: u32,
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

/// Parses editor settings. `null` means "no settings". Editors that namespace their settings
/// (`{"ghostline": {...}}`, as VS Code does) are accepted too.
pub fn parse(value: &Value) -> Result<Parsed, String> {
    let value = match value {
        Value::Null => return Ok(Parsed { options: Options::default(), unknown_keys: vec![] }),
        Value::Object(map) if map.len() == 1 && map.contains_key("ghostline") => &map["ghostline"],
        other => other,
    };
    let mut unknown_keys = Vec::new();
    let mut record = |path: serde_ignored::Path<'_>| unknown_keys.push(path.to_string());
    let de = serde_ignored::Deserializer::new(value, &mut record);
    let options: Options = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            format!("invalid ghostline settings: {}", e.inner())
        } else {
            format!("invalid ghostline setting `{path}`: {}", e.inner())
        }
    })?;
    Ok(Parsed { options, unknown_keys })
}

impl Options {
    /// Fills defaults. `env_model` is the value of `GHOSTLINE_MODEL`, if set.
    pub fn resolve(&self, env_model: Option<PathBuf>) -> Config {
        let m = &self.model;
        let c = &self.completion;
        Config {
            model: ModelConfig {
                path: m.path.clone().or(env_model).filter(|p| !p.as_os_str().is_empty()),
                threads: m.threads.filter(|&t| t > 0).unwrap_or_else(default_threads),
                context_size: m.context_size.filter(|&n| n >= 256).unwrap_or(4096),
                batch_size: m.batch_size.filter(|&n| n >= 16).unwrap_or(512),
            },
            completion: CompletionConfig {
                enabled: c.enabled.unwrap_or(true),
                max_tokens: c.max_tokens.filter(|&n| n > 0).unwrap_or(64),
                max_prompt_tokens: c.max_prompt_tokens.filter(|&n| n >= 64).unwrap_or(1024),
                typed_ahead: c.typed_ahead.unwrap_or(true),
                repeat_penalty: c.repeat_penalty.filter(|p| p.is_finite() && *p > 0.0).unwrap_or(1.1),
                repeat_last_n: c.repeat_last_n.unwrap_or(64),
                lines_before: c.lines_before.unwrap_or(64),
                lines_after: c.lines_after.unwrap_or(16),
            },
            cloud: self.cloud.clone(),
            privacy: self.privacy.unwrap_or(Privacy::LocalOnly),
            offline: self.offline.unwrap_or(false),
        }
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn camel_case_sections_parse() {
        let p = parse(&json!({
            "model": {"path": "/m.gguf", "threads": 3, "contextSize": 2048},
            "completion": {"maxTokens": 32, "repeatPenalty": 1.2},
            "privacy": "local-only",
            "offline": true
        }))
        .unwrap();
        assert!(p.unknown_keys.is_empty());
        let c = p.options.resolve(None);
        assert_eq!(c.model.path.as_deref(), Some(std::path::Path::new("/m.gguf")));
        assert_eq!(c.model.threads, 3);
        assert_eq!(c.model.context_size, 2048);
        assert_eq!(c.completion.max_tokens, 32);
        assert_eq!(c.completion.repeat_penalty, 1.2);
        assert!(c.offline);
    }

    #[test]
    fn unknown_keys_are_reported_not_fatal() {
        let p = parse(&json!({"model": {"pth": "x"}, "colour": 1})).unwrap();
        let mut keys = p.unknown_keys.clone();
        keys.sort();
        assert_eq!(keys, vec!["colour".to_string(), "model.pth".to_string()]);
    }

    #[test]
    fn wrong_types_name_the_key() {
        let e = parse(&json!({"completion": {"maxTokens": "many"}})).unwrap_err();
        assert!(e.contains("completion.maxTokens"), "{e}");
        let e = parse(&json!({"privacy": "public"})).unwrap_err();
        assert!(e.contains("privacy"), "{e}");
    }

    #[test]
    fn vscode_namespace_and_env_fallback() {
        let p = parse(&json!({"ghostline": {"completion": {"maxTokens": 8}}})).unwrap();
        assert_eq!(p.options.completion.max_tokens, Some(8));
        let c = p.options.resolve(Some("/env.gguf".into()));
        assert_eq!(c.model.path.as_deref(), Some(std::path::Path::new("/env.gguf")));
        let c = parse(&json!({"model": {"path": "/cfg.gguf"}})).unwrap().options.resolve(Some("/env.gguf".into()));
        assert_eq!(c.model.path.as_deref(), Some(std::path::Path::new("/cfg.gguf")));
    }

    #[test]
    fn defaults() {
        let c = parse(&Value::Null).unwrap().options.resolve(None);
        assert_eq!(c.model.path, None);
        assert!(c.model.threads >= 1);
        assert_eq!(c.completion.max_tokens, 64);
        assert_eq!(c.completion.repeat_penalty, 1.1);
        assert_eq!(c.privacy, Privacy::LocalOnly);
    }
}
