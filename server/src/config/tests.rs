//! Settings: parsing, layering and resolving, checked on JSON as editors send it.

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
fn model_memory_and_keep_alive_settings() {
    use std::time::Duration;
    let c = parse(&json!({"model": {"gpuLayers": 0, "memoryBudgetMb": 2048, "keepAlive": 90}}))
        .unwrap()
        .options
        .resolve(None);
    assert_eq!((c.model.gpu_layers, c.model.memory_budget_mb), (Some(0), Some(2048)));
    assert_eq!(c.model.keep_alive, Some(Duration::from_secs(90)));
    let keep = |v: Value| parse(&json!({"model": {"keepAlive": v}})).map(|p| p.options.resolve(None).model.keep_alive);
    assert_eq!(keep(json!("10m")), Ok(Some(Duration::from_secs(600))));
    assert_eq!(keep(json!("1h30m")), Ok(Some(Duration::from_secs(5400))));
    assert_eq!(keep(json!("250ms")), Ok(Some(Duration::from_millis(250))));
    assert_eq!(keep(json!(0.5)), Ok(Some(Duration::from_millis(500))));
    assert_eq!(keep(json!(0)), Ok(None));
    assert_eq!(keep(json!(-1)), Ok(None));
    assert_eq!(keep(json!("never")), Ok(None));
    assert_eq!(keep(Value::Null), Ok(None));
    let e = keep(json!("soon")).unwrap_err();
    assert!(e.contains("model.keepAlive") && e.contains("duration"), "{e}");
    let e = keep(json!(true)).unwrap_err();
    assert!(e.contains("model.keepAlive"), "{e}");
    let e = parse(&json!({"model": {"memoryBudgetMb": "lots"}})).unwrap_err();
    assert!(e.contains("model.memoryBudgetMb"), "{e}");
    let e = parse(&json!({"model": {"gpuLayers": -1}})).unwrap_err();
    assert!(e.contains("model.gpuLayers"), "{e}");
    let p = parse(&json!({"model": {"keepAlive": "5m", "gpuLayer": 3}})).unwrap();
    assert_eq!(p.unknown_keys, vec!["model.gpuLayer".to_string()]);
}

#[test]
fn defaults() {
    let c = parse(&Value::Null).unwrap().options.resolve(None);
    assert_eq!(c.model.path, None);
    assert!(c.model.threads >= 1);
    assert_eq!((c.model.context_size, c.model.gpu_layers, c.model.memory_budget_mb, c.model.keep_alive), (4096, None, None, None));
    assert_eq!(c.completion.max_tokens, 64);
    assert_eq!(c.completion.repeat_penalty, 1.1);
    assert_eq!(c.privacy, Privacy::LocalOnly);
    assert_eq!(c.cloud.endpoint, None);
    assert_eq!(c.cloud.max_retries, 2);
    assert!(c.cloud.exclude.iter().any(|g| g == ".env"));
    assert!(c.actions.enabled);
}

#[test]
fn cloud_and_action_settings_parse_and_name_bad_keys() {
    let p = parse(&json!({
        "cloud": {"endpoint": "http://127.0.0.1:8080/v1", "model": "m", "apiKeyEnv": "TEAM_KEY",
                  "timeoutMs": 900, "connectTimeoutMs": 100, "maxRetries": 0, "dailyTokenBudget": 5000,
                  "breakerFailures": 1, "breakerCooldownS": 9, "cacheDir": "/tmp/c", "cacheEntries": 3,
                  "exclude": ["*.secret"]},
        "actions": {"maxTokens": 200, "prefer": {"tests": "cloud", "docstring": "local", "fix": "auto"}},
        "privacy": "redact"
    }))
    .unwrap();
    assert!(p.unknown_keys.is_empty(), "{:?}", p.unknown_keys);
    let c = p.options.resolve(None);
    assert_eq!(c.cloud.endpoint.as_deref(), Some("http://127.0.0.1:8080/v1"));
    assert_eq!(c.cloud.api_key_env.as_deref(), Some("TEAM_KEY"));
    assert_eq!((c.cloud.timeout_ms, c.cloud.connect_timeout_ms, c.cloud.max_retries), (900, 100, 0));
    assert_eq!(c.cloud.exclude, vec!["*.secret".to_string()]);
    assert_eq!(c.actions.prefer.tests, Some(Prefer::Cloud));
    assert_eq!(c.actions.max_tokens, 200);
    assert_eq!(c.privacy, Privacy::Redact);
    let e = parse(&json!({"actions": {"prefer": {"tests": "moon"}}})).unwrap_err();
    assert!(e.contains("actions.prefer.tests"), "{e}");
    let e = parse(&json!({"cloud": {"timeoutMs": "soon"}})).unwrap_err();
    assert!(e.contains("cloud.timeoutMs"), "{e}");
    let p = parse(&json!({"cloud": {"apiKey": "sk-nope"}})).unwrap();
    assert_eq!(p.unknown_keys, vec!["cloud.apiKey".to_string()]);
}
#[test]
fn changes_layer_key_by_key_over_what_is_in_force() {
    let init = json!({"model": {"path": "/m.gguf", "threads": 2}, "completion": {"maxTokens": 16}, "cloud": {"exclude": ["a", "b"]}});
    // A change names only what changes: the model stays.
    let after = layer(&init, &json!({"ghostline": {"completion": {"maxTokens": 1}}}));
    assert_eq!(after, json!({"model": {"path": "/m.gguf", "threads": 2}, "completion": {"maxTokens": 1}, "cloud": {"exclude": ["a", "b"]}}));
    let c = parse(&after).unwrap().options.resolve(None);
    assert_eq!((c.model.path.as_deref(), c.completion.max_tokens), (Some(std::path::Path::new("/m.gguf")), 1));
    // Nothing, or an empty object: nothing changes.
    assert_eq!(layer(&init, &Value::Null), init);
    assert_eq!(layer(&init, &json!({})), init);
    assert_eq!(layer(&init, &json!({"ghostline": {}})), init);
    assert_eq!(layer(&json!({"ghostline": init.clone()}), &json!({})), init);
    // Arrays and scalars replace; `null` takes a key back to its default.
    let after = layer(&init, &json!({"cloud": {"exclude": ["c"]}, "model": {"threads": null}, "privacy": "redact"}));
    assert_eq!(after, json!({"model": {"path": "/m.gguf"}, "completion": {"maxTokens": 16}, "cloud": {"exclude": ["c"]}, "privacy": "redact"}));
    assert_eq!(layer(&init, &json!({"model": null}))["model"], Value::Null);
    // Over nothing (no initializationOptions).
    assert_eq!(layer(&Value::Null, &json!({"offline": true})), json!({"offline": true}));
}

#[test]
fn stats_settings() {
    use std::time::Duration;
    let c = parse(&Value::Null).unwrap().options.resolve(None);
    assert_eq!((c.stats.enabled, c.stats.path.clone()), (true, None));
    assert_eq!(c.stats.retention, [Duration::from_secs(30), Duration::from_secs(300)]);
    let c = parse(&json!({"stats": {"enabled": false, "path": "/t/s.sqlite", "retentionSeconds": [0.5, 2]}})).unwrap().options.resolve(None);
    assert_eq!((c.stats.enabled, c.stats.path.as_deref()), (false, Some(std::path::Path::new("/t/s.sqlite"))));
    assert_eq!(c.stats.retention, [Duration::from_millis(500), Duration::from_secs(2)]);
    for bad in [json!([300, 30]), json!([0, 1]), json!([1]), json!("30s")] {
        let e = parse(&json!({"stats": {"retentionSeconds": bad}})).unwrap_err();
        assert!(e.contains("stats.retentionSeconds"), "{e}");
    }
}

#[test]
fn settings_that_are_not_an_object_say_so() {
    for (value, what) in [(json!([1, 2, 3]), "an array"), (json!("x"), "a string"), (json!(3), "a number"), (json!({"ghostline": [1]}), "an array")] {
        let e = parse(&value).unwrap_err();
        assert!(e.contains("settings must be an object") && e.contains(what), "{e}");
    }
    let e = parse(&json!({"model": [1]})).unwrap_err();
    assert!(e.contains("`model`") && e.contains("expected an object") && !e.contains("struct"), "{e}");
}

/// `initialize` with a valid model and one wrong-typed key: that key is reported and takes its
/// default; every other key is kept (the model path above all).
#[test]
fn a_bad_key_is_reported_and_the_others_kept() {
    let bad_keys = [
        json!({"context": {"exclude": "x"}}),
        json!({"context": {"maxFiles": -1}}),
        json!({"context": {"maxFileKb": "big"}}),
        json!({"stats": {"enabled": "yes"}}),
        json!({"stats": {"path": 5}}),
        json!({"stats": {"retentionSeconds": [0, 0]}}),
        json!({"context": {"maxFiles": 0}}),
        json!({"context": {"memoryMb": 17592186044416u64}}),
        json!({"context": {"maxFileKb": 18014398509481984u64}}),
        json!({"stats": []}),
        json!({"nextEdit": {"enabled": "sometimes"}}),
    ];
    for bad in bad_keys {
        let mut settings = json!({"model": {"path": "/m.gguf", "threads": 3}, "completion": {"maxTokens": 9}});
        let (section, value) = bad.as_object().unwrap().iter().next().unwrap();
        settings[section] = value.clone();
        let key = match value {
            Value::Object(m) => format!("{section}.{}", m.keys().next().unwrap()),
            _ => section.clone(),
        };
        let read = parse_lenient(&settings, &Value::Null).unwrap_or_else(|e| panic!("{bad}: {e}"));
        assert_eq!(read.errors.len(), 1, "{bad}: {:?}", read.errors);
        assert!(read.errors[0].contains(&format!("`{key}")), "{bad}: {:?}", read.errors);
        let c = read.parsed.options.resolve(None);
        assert_eq!(c.model.path.as_deref(), Some(std::path::Path::new("/m.gguf")), "{bad}");
        assert_eq!((c.model.threads, c.completion.max_tokens), (3, 9), "{bad}");
        assert_eq!(c.context, Options::default().resolve(None).context, "{bad}");
        assert_eq!(c.stats, Options::default().resolve(None).stats, "{bad}");
        assert!(c.next_edit.enabled, "{bad}: a bad `nextEdit.enabled` keeps its default");
        assert!(pointer(&read.kept, &key.split('.').map(String::from).collect::<Vec<_>>()).is_none(), "{bad}: {}", read.kept);
        // The strict parse (settings files, the CLI) still refuses it.
        assert!(parse(&settings).is_err(), "{bad}");
    }
}

/// A bad value in a change keeps that key's previous value; the rest of the change applies.
#[test]
fn a_bad_key_in_a_change_keeps_its_previous_value() {
    let base = json!({"model": {"path": "/m.gguf"}, "context": {"maxFiles": 10}});
    let change = layer(&base, &json!({"context": {"maxFiles": "many"}, "completion": {"maxTokens": 7}}));
    let read = parse_lenient(&change, &base).unwrap();
    assert_eq!(read.errors.len(), 1, "{:?}", read.errors);
    let c = read.parsed.options.resolve(None);
    assert_eq!((c.context.max_files, c.completion.max_tokens), (10, 7));
    assert_eq!(read.kept["context"]["maxFiles"], 10);
    // Several bad keys: each named once.
    let read = parse_lenient(&json!({"stats": {"enabled": 1, "path": 2}, "offline": "no", "model": {"path": "/m.gguf"}}), &Value::Null).unwrap();
    assert_eq!(read.errors.len(), 3, "{:?}", read.errors);
    assert_eq!(read.parsed.options.model.path.as_deref(), Some(std::path::Path::new("/m.gguf")));
    // Not an object at all: refused as a whole.
    assert!(parse_lenient(&json!([1]), &base).is_err());
    assert!(parse_lenient(&json!({"ghostline": "fast"}), &base).is_err());
}

#[test]
fn path_settings_expand_the_home_folder() {
    let home = std::env::var("HOME").unwrap();
    let c = parse(&json!({"stats": {"path": "~/gl-stats.sqlite"}, "model": {"path": "$HOME/m.gguf"}, "cloud": {"cacheDir": "${HOME}/c"}}))
        .unwrap()
        .options
        .resolve(None);
    assert_eq!(c.stats.path, Some(std::path::Path::new(&home).join("gl-stats.sqlite")));
    assert_eq!(c.model.path, Some(std::path::Path::new(&home).join("m.gguf")));
    assert_eq!(c.cloud.cache_dir, Some(std::path::Path::new(&home).join("c")));
    assert_eq!(expand_home(std::path::Path::new("~")), std::path::PathBuf::from(&home));
    for unchanged in ["~user/x", "/abs/~/x", "rel/$HOME", "$HOMER/x"] {
        assert_eq!(expand_home(std::path::Path::new(unchanged)), std::path::PathBuf::from(unchanged));
    }
}

#[test]
fn a_completion_endpoint_is_https_unless_loopback_and_a_bad_one_keeps_the_rest() {
    let endpoint = |url: &str| parse(&json!({"model": {"endpoint": url}})).map(|p| p.options.resolve(None).model.endpoint);
    let local = endpoint("http://127.0.0.1:8080/").unwrap().unwrap();
    assert_eq!(local.url, "http://127.0.0.1:8080");
    assert!(local.trusted && local.local_fallback && !local.offline, "{local:?}");
    assert_eq!(local.api, EndpointApi::LlamaServer);
    assert!(endpoint("http://localhost:8080").unwrap().unwrap().trusted);
    assert!(endpoint("http://[::1]:8080").unwrap().unwrap().trusted);
    let team = endpoint("https://gpu.team.example:8443").unwrap().unwrap();
    assert!(!team.trusted, "a remote endpoint is untrusted unless said so");
    for bad in ["http://gpu.team.example:8080", "http://10.0.0.5:8080", "ftp://127.0.0.1/", "not a url"] {
        let e = endpoint(bad).unwrap_err();
        assert!(e.contains("model.endpoint"), "{bad}: {e}");
    }
    assert!(endpoint("http://10.0.0.5:8080").unwrap_err().contains("unencrypted"));
    // Trust, key, API and offline carried through.
    let c = parse(&json!({"model": {"endpoint": "https://box:1", "endpointTrusted": true, "apiKeyEnv": "TEAM_KEY", "endpointApi": "vllm", "localFallback": false}, "offline": true}))
        .unwrap()
        .options
        .resolve(None);
    let e = c.model.endpoint.unwrap();
    assert!(e.trusted && e.offline && !e.local_fallback);
    assert_eq!((e.api, e.api_key_env.as_deref()), (EndpointApi::Vllm, Some("TEAM_KEY")));
    // Read leniently, a bad endpoint is reported and every other key applies.
    let l = parse_lenient(&json!({"model": {"endpoint": "http://gpu.team.example:8080", "threads": 3}, "completion": {"maxTokens": 12}}), &Value::Null).unwrap();
    assert_eq!(l.errors.len(), 1, "{:?}", l.errors);
    assert!(l.errors[0].contains("model.endpoint") && l.errors[0].contains("https"), "{:?}", l.errors);
    let c = l.parsed.options.resolve(None);
    assert_eq!((c.model.endpoint, c.model.threads, c.completion.max_tokens), (None, 3, 12));
}

#[test]
fn next_edits_are_on_by_default_and_can_be_turned_off() {
    assert!(Options::default().resolve(None).next_edit.enabled);
    let read = parse_lenient(&json!({"nextEdit": {"enabled": false}, "completion": {"maxTokens": 9}}), &Value::Null).unwrap();
    assert!(read.errors.is_empty(), "{:?}", read.errors);
    let c = read.parsed.options.resolve(None);
    assert!(!c.next_edit.enabled);
    assert_eq!(c.completion.max_tokens, 9);
    // A bad value later keeps the one in force (off), and the other keys apply.
    let read = parse_lenient(&json!({"nextEdit": {"enabled": 3}, "completion": {"maxTokens": 7}}), &read.kept).unwrap();
    assert_eq!(read.errors.len(), 1, "{:?}", read.errors);
    assert!(read.errors[0].contains("`nextEdit.enabled"), "{:?}", read.errors);
    let c = read.parsed.options.resolve(None);
    assert!(!c.next_edit.enabled);
    assert_eq!(c.completion.max_tokens, 7);
}

#[test]
fn the_next_edit_format_is_auto_unless_chosen() {
    assert_eq!(Options::default().resolve(None).next_edit.format, NextEditFormat::Auto);
    let read = parse_lenient(&json!({"nextEdit": {"format": "sweep"}}), &Value::Null).unwrap();
    assert_eq!(read.parsed.options.resolve(None).next_edit.format, NextEditFormat::Sweep);
    let read = parse_lenient(&json!({"nextEdit": {"format": "zeta"}}), &read.kept).unwrap();
    assert_eq!(read.errors.len(), 1, "{:?}", read.errors);
    assert_eq!(read.parsed.options.resolve(None).next_edit.format, NextEditFormat::Sweep, "a bad value keeps the one in force");
}
