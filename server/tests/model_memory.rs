//! Memory budget, model discovery, `doctor`, `models` and keepAlive, with the real test model
//! (and the FIM wiring model): the GGUF reader and the KV-cache arithmetic are checked against
//! the figures the `gguf` Python package computes from the same files.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;
use ghostline::model::gguf::Gguf;
use ghostline::model::memory;
use ghostline::stdio_client::StdioClient;
use serde_json::{json, Value};

/// Python with the `gguf` package (scripts/test.sh provides it).
fn python() -> PathBuf {
    let path = std::env::var_os("GHOSTLINE_PYTHON")
        .map(PathBuf::from)
        .expect("GHOSTLINE_PYTHON must name a Python with the gguf package: run scripts/test.sh");
    assert!(path.exists(), "GHOSTLINE_PYTHON={} does not exist", path.display());
    path
}

/// What the `gguf` package reads from `model`, and the KV bytes per token computed from it.
fn gguf_package_facts(model: &Path) -> Value {
    let script = r#"
import json, os, sys
import gguf
r = gguf.GGUFReader(sys.argv[1])
def get(key, default=None):
    return r.fields[key].contents() if key in r.fields else default
arch = get("general.architecture")
n_layer = get(f"{arch}.block_count")
n_head = get(f"{arch}.attention.head_count")
n_head_kv = get(f"{arch}.attention.head_count_kv", n_head)
n_embd = get(f"{arch}.embedding_length")
k = get(f"{arch}.attention.key_length", n_embd // n_head)
v = get(f"{arch}.attention.value_length", k)
print(json.dumps({
    "arch": arch, "n_layer": n_layer, "n_head": n_head, "n_head_kv": n_head_kv, "n_embd": n_embd,
    "head_dim_k": k, "head_dim_v": v, "n_ctx_train": get(f"{arch}.context_length"),
    "n_vocab": len(get("tokenizer.ggml.tokens")),
    "kv_bytes_per_token": n_layer * n_head_kv * (k + v) * 2,
    "data_offset": int(r.data_offset), "tensor_bytes": sum(int(t.n_bytes) for t in r.tensors),
    "n_tensors": len(r.tensors), "file_size": os.path.getsize(sys.argv[1]),
}))
"#;
    let out = Command::new(python()).arg("-c").arg(script).arg(model).output().unwrap();
    assert!(out.status.success(), "gguf script failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs the binary with `args`, HOME at `home` and the model-location variables cleared.
fn ghostline(args: &[&str], home: &Path, extra_env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(binary());
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in isolated_env(home) {
        cmd.env(k, v);
    }
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// No configured model and every discovery root under `home` only.
fn isolated_env(home: &Path) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&'static str, String)> = [
        "GHOSTLINE_MODEL",
        "HF_HOME",
        "HF_HUB_CACHE",
        "XDG_CACHE_HOME",
        "LLAMA_CACHE",
        "OLLAMA_MODELS",
        "GHOSTLINE_LMSTUDIO_MODELS",
    ]
    .into_iter()
    .map(|k| (k, String::new()))
    .collect();
    env.push(("HOME", home.display().to_string()));
    env
}

/// Hard link (same file system) or copy.
fn place(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    if std::fs::hard_link(src, dst).is_err() {
        std::fs::copy(src, dst).unwrap();
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn doctor_json(args: &[&str], home: &Path) -> (bool, Value) {
    let mut all = vec!["doctor", "--json"];
    all.extend_from_slice(args);
    let out = ghostline(&all, home, &[]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.success(), report["ok"].as_bool().unwrap(), "exit status and report disagree: {report}");
    (out.status.success(), report)
}

fn check<'a>(report: &'a Value, name: &str, level: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name && c["level"] == level)
        .unwrap_or_else(|| panic!("no {level} check {name:?} in {report:#}"))
}

#[test]
fn gguf_reader_agrees_with_the_gguf_package() {
    for path in [model(), fim_wiring_model()] {
        let py = gguf_package_facts(&path);
        let g = Gguf::open(&path).unwrap();
        let s = g.shape().unwrap();
        assert_eq!(s.arch, py["arch"]);
        assert_eq!(s.n_layer as u64, py["n_layer"].as_u64().unwrap());
        assert_eq!(s.n_head as u64, py["n_head"].as_u64().unwrap());
        assert!(s.n_head_kv.iter().all(|&h| h as u64 == py["n_head_kv"].as_u64().unwrap()));
        assert_eq!(s.n_head_kv.len() as u64, py["n_layer"].as_u64().unwrap());
        assert_eq!(s.n_embd as u64, py["n_embd"].as_u64().unwrap());
        assert_eq!(s.head_dim_k as u64, py["head_dim_k"].as_u64().unwrap());
        assert_eq!(s.head_dim_v as u64, py["head_dim_v"].as_u64().unwrap());
        assert_eq!(s.n_ctx_train as u64, py["n_ctx_train"].as_u64().unwrap());
        assert_eq!(s.n_vocab as u64, py["n_vocab"].as_u64().unwrap());
        assert_eq!(g.tensor_count, py["n_tensors"].as_u64().unwrap());
        assert_eq!(g.data_offset, py["data_offset"].as_u64().unwrap());
        assert_eq!(g.file_size, py["file_size"].as_u64().unwrap());
        // The tensors are laid end to end: the data section is exactly their bytes.
        assert_eq!(g.weights_bytes(), py["tensor_bytes"].as_u64().unwrap());
        assert_eq!(memory::kv_bytes_per_token(&s), py["kv_bytes_per_token"].as_u64().unwrap());
        // SmolLM2-135M: 30 layers, 3 KV heads, head dim 64 (576 / 9), f16: 2·30·3·64·2 bytes.
        assert_eq!((s.n_layer, s.n_head_kv[0], s.head_dim_k), (30, 3, 64));
        assert_eq!(memory::kv_bytes_per_token(&s), 23_040);
    }
    assert_eq!(Gguf::open(&model()).unwrap().fim_format().to_string(), "prefix-only (no FIM tokens)");
    assert_eq!(Gguf::open(&fim_wiring_model()).unwrap().fim_format().to_string(), "FIM Qwen (PSM)");
}

#[test]
fn doctor_reports_the_exact_kv_bytes_and_the_plan_for_a_good_setup() {
    let home = TempDir::new("doctor-good");
    let model = model();
    let py = gguf_package_facts(&model);
    let (ok, report) = doctor_json(&["--model", model.to_str().unwrap()], &home);
    assert!(ok, "{report:#}");
    let facts = &report["facts"];
    let per_token = py["kv_bytes_per_token"].as_u64().unwrap();
    assert_eq!(facts["kv_bytes_per_token"], per_token);
    assert_eq!(facts["backend"], if cfg!(target_os = "macos") { "Metal" } else { "CPU" });
    assert_eq!(facts["format"], "prefix-only (no FIM tokens)");
    assert_eq!(facts["arch"], "llama");
    let plan = &facts["plan"];
    assert_eq!(plan["n_ctx"], 4096);
    assert_eq!(plan["limited_by"], "context-size");
    assert_eq!(plan["kv_bytes_per_token"], per_token);
    assert_eq!(plan["kv_bytes"].as_u64().unwrap(), 4096 * per_token);
    assert_eq!(plan["weights_bytes"], py["tensor_bytes"]);
    let sum = plan["weights_bytes"].as_u64().unwrap() + plan["kv_bytes"].as_u64().unwrap() + plan["compute_bytes"].as_u64().unwrap();
    assert_eq!(plan["total_bytes"].as_u64().unwrap(), sum);
    assert!(facts["system_memory"]["total_bytes"].as_u64().unwrap() > 0);
    // The load really happened with the planned context, decoding the micro-batch the plan
    // sized its compute buffers for: 128 tokens on the CPU (the logits of 512 would take 96 MiB).
    assert_eq!(facts["n_ctx"], 4096);
    assert_eq!(facts["n_ubatch"], plan["n_ubatch"], "{report:#}");
    if facts["backend"] == "CPU" {
        assert_eq!(facts["n_ubatch"], 128, "{report:#}");
    }
    check(&report, "load", "ok");
    check(&report, "cloud", "ok");
    check(&report, "offline", "ok");
    // ghostline's own CPU build runs batch-invariant kernels: no aligned prefill.
    assert_eq!(facts["batch_invariant"], true, "{report:#}");
    check(&report, "determinism", "ok");

    // The text form says the same, with the formula.
    let out = ghostline(&["doctor", "--model", model.to_str().unwrap(), "--no-load"], &home, &[]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("23040 bytes per token = 2 × 30 layers × 3 KV heads × 64 head dim × 2 bytes (f16)"), "{text}");
    assert!(text.contains("context 4096 tokens"), "{text}");
    assert!(text.contains("all checks passed"), "{text}");
}

#[test]
fn the_budget_chooses_the_context_and_llama_cpp_gets_it() {
    let home = TempDir::new("doctor-budget");
    let model = model();
    let per_token = 23_040u64;
    let g = Gguf::open(&model).unwrap();
    let shape = g.shape().unwrap();
    let mut previous = 0;
    // weights 96,576,768 B + compute buffers ~29 MiB (a micro-batch of 128 tokens on the CPU)
    // leave 19.3, 49.0 and 78.7 MiB for the KV cache: 768, 2048 and 3328 tokens in steps of 256.
    let micro_batch = ghostline::model::backend::micro_batch(512, ghostline::model::backend::gpu_layers(None));
    for (budget_mb, expected) in [(140u64, 768u64), (170, 2048), (200, 3328)] {
        let (ok, report) = doctor_json(&["--model", model.to_str().unwrap(), "--memory-budget-mb", &budget_mb.to_string()], &home);
        assert!(ok, "{report:#}");
        let plan = &report["facts"]["plan"];
        let n_ctx = plan["n_ctx"].as_u64().unwrap();
        assert_eq!(n_ctx, expected, "{plan}");
        assert_eq!(plan["limited_by"], "budget", "{plan}");
        assert_eq!(n_ctx % 256, 0);
        assert!(n_ctx > previous, "a bigger budget gives a bigger context");
        previous = n_ctx;
        assert!(plan["total_bytes"].as_u64().unwrap() <= budget_mb << 20);
        assert_eq!(plan["kv_bytes"].as_u64().unwrap(), n_ctx * per_token);
        // 256 more tokens would not fit.
        let unlimited = (1u64 << 40, memory::BudgetSource::Configured);
        let bigger = memory::plan(&shape, g.weights_bytes(), unlimited, n_ctx as u32 + 256, micro_batch).unwrap();
        assert!(bigger.total_bytes > budget_mb << 20);
        assert_eq!(report["facts"]["n_ctx"].as_u64().unwrap(), n_ctx, "llama.cpp's context is the planned one");
    }
}

#[test]
fn doctor_fails_with_the_fix_in_words() {
    let home = TempDir::new("doctor-bad");
    let model = model();
    // A budget that cannot hold the model: an error naming the setting, no load attempted.
    let out = ghostline(&["doctor", "--model", model.to_str().unwrap(), "--memory-budget-mb", "120"], &home, &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("FAIL  memory") && text.contains("cannot hold this model"), "{text}");
    assert!(text.contains("Raise model.memoryBudgetMb to at least"), "{text}");
    assert!(text.contains("fix: "), "{text}");
    assert!(!text.contains("loaded in"), "no load after a failed plan: {text}");

    // A missing file.
    let (ok, report) = doctor_json(&["--model", "/nonexistent/model.gguf"], &home);
    assert!(!ok);
    assert!(check(&report, "model", "fail")["detail"].as_str().unwrap().contains("not found"));

    // No model anywhere.
    let (ok, report) = doctor_json(&[], &home);
    assert!(!ok);
    let c = check(&report, "model", "fail");
    assert!(c["detail"].as_str().unwrap().contains("no model configured"), "{c}");
    assert!(c["fix"].as_str().unwrap().contains("GHOSTLINE_MODEL"), "{c}");

    // A cloud endpoint whose key variable is missing (and nothing is sent to it).
    let settings = home.join("settings.json");
    let var = format!("GHOSTLINE_TEST_ABSENT_KEY_{}", std::process::id());
    std::fs::write(&settings, json!({"cloud": {"endpoint": "http://127.0.0.1:9/v1", "apiKeyEnv": var}}).to_string()).unwrap();
    let args = ["--model", model.to_str().unwrap(), "--settings", settings.to_str().unwrap(), "--no-load"];
    let (ok, report) = doctor_json(&args, &home);
    assert!(!ok);
    let c = check(&report, "cloud", "fail");
    assert!(c["fix"].as_str().unwrap().contains(&var), "{c}");
    assert_eq!(report["facts"]["cloud_api_key_present"], false);
    // With the variable set the same settings pass.
    let mut all = vec!["doctor", "--json"];
    all.extend_from_slice(&args);
    let out = ghostline(&all, &home, &[(var.as_str(), "secret")]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(!stdout(&out).contains("secret"), "the key itself is never printed");

    // Settings with a value of the wrong type fail; unknown keys only warn.
    std::fs::write(&settings, json!({"model": {"keepAlive": true}}).to_string()).unwrap();
    let (ok, report) = doctor_json(&["--model", model.to_str().unwrap(), "--settings", settings.to_str().unwrap(), "--no-load"], &home);
    assert!(!ok);
    assert!(check(&report, "settings", "fail")["detail"].as_str().unwrap().contains("model.keepAlive"));
    std::fs::write(&settings, json!({"model": {"keepAlive": "5m", "colour": 1}}).to_string()).unwrap();
    let (ok, report) = doctor_json(&["--model", model.to_str().unwrap(), "--settings", settings.to_str().unwrap(), "--no-load"], &home);
    assert!(ok, "{report:#}");
    check(&report, "settings", "warn");
}

/// A home folder with models where users keep them: the Hugging Face cache (symlink into
/// blobs), LM Studio (a "coder"-named copy of the non-FIM model), llama.cpp's cache, and
/// Ollama (manifest → blob: the FIM wiring model).
fn fake_home(name: &str) -> TempDir {
    let home = TempDir::new(name);
    let plain = model();
    let fim = fim_wiring_model();
    let hub = home.join(".cache/huggingface/hub/models--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF");
    place(&plain, &hub.join("blobs/0123abcd"));
    let snapshot = hub.join("snapshots/5f0e1c2d");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::os::unix::fs::symlink("../../blobs/0123abcd", snapshot.join("smollm2-135m-instruct-q4_1.gguf")).unwrap();
    std::fs::write(hub.join("refs/main").tap_parent(), "5f0e1c2d").unwrap();
    place(&plain, &home.join(".lmstudio/models/lmstudio-community/SmolCoder-GGUF/smolcoder-q4_1.gguf"));
    place(&plain, &home.join(".cache/llama.cpp/HuggingFaceTB_SmolLM2-135M-Instruct-GGUF_smollm2.gguf"));
    let digest = "sha256-6a1f0b7e6f3b2c2a9d1e4c5b8a7f6e5d4c3b2a1908f7e6d5c4b3a29180706050";
    place(&fim, &home.join(".ollama/models/blobs").join(digest));
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256-00", "size": 1},
        "layers": [
            {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:ffff", "size": 10},
            {"mediaType": "application/vnd.ollama.image.model", "digest": digest.replacen('-', ":", 1), "size": 98362656},
        ],
    });
    let manifests = home.join(".ollama/models/manifests/registry.example/library/smollm2-fim");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::write(manifests.join("latest"), manifest.to_string()).unwrap();
    home
}

trait TapParent {
    fn tap_parent(self) -> Self;
}

impl TapParent for PathBuf {
    /// Creates the parent folder; returns the path.
    fn tap_parent(self) -> Self {
        std::fs::create_dir_all(self.parent().unwrap()).unwrap();
        self
    }
}

#[test]
fn discovery_finds_every_layout_and_prefers_the_fim_model() {
    let home = fake_home("discover");
    let out = ghostline(&["models", "--json"], &home, &[]);
    assert!(out.status.success());
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let models = listed["models"].as_array().unwrap();
    let names: Vec<(&str, &str)> = models.iter().map(|m| (m["source"].as_str().unwrap(), m["name"].as_str().unwrap())).collect();
    assert_eq!(models.len(), 4, "{names:?}");
    // Best first: the FIM model (from Ollama), then the "coder"-named one, then the rest.
    assert_eq!(names[0], ("ollama", "smollm2-fim:latest"));
    assert_eq!(names[1], ("lm-studio", "lmstudio-community/SmolCoder-GGUF/smolcoder-q4_1.gguf"));
    assert!(names.contains(&("hugging-face", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/smollm2-135m-instruct-q4_1.gguf")), "{names:?}");
    assert!(names.contains(&("llama-cpp", "HuggingFaceTB_SmolLM2-135M-Instruct-GGUF_smollm2.gguf")), "{names:?}");
    let best = &models[0];
    assert_eq!(best["fim"], true);
    assert_eq!(best["format"], "FIM Qwen (PSM)");
    assert_eq!(best["fits"], true);
    assert!(best["path"].as_str().unwrap().ends_with(".ollama/models/blobs/sha256-6a1f0b7e6f3b2c2a9d1e4c5b8a7f6e5d4c3b2a1908f7e6d5c4b3a29180706050"));
    assert!(best["reasons"][0].as_str().unwrap().starts_with("FIM tokens"));
    assert_eq!(models[1]["coder"], true);
    assert_eq!(models[1]["fim"], false);

    // The text listing marks the choice and says why.
    let text = stdout(&ghostline(&["models"], &home, &[]));
    assert!(text.contains("* smollm2-fim:latest  [Ollama]"), "{text}");
    assert!(text.contains("no FIM tokens: prefix-only completions"), "{text}");

    // A budget the models cannot fit: still listed, ranked as not fitting.
    let tight: Value = serde_json::from_slice(&ghostline(&["models", "--json", "--memory-budget-mb", "100"], &home, &[]).stdout).unwrap();
    assert!(tight["models"].as_array().unwrap().iter().all(|m| m["fits"] == false));

    // Each root can be moved by its variable: only Ollama's, elsewhere.
    let other = TempDir::new("discover-env");
    std::fs::rename(home.join(".ollama/models"), other.join("ollama")).unwrap();
    let moved = other.join("ollama");
    let out = ghostline(&["models", "--json"], &home, &[("OLLAMA_MODELS", moved.to_str().unwrap()), ("HF_HUB_CACHE", "/nonexistent")]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sources: Vec<&str> = listed["models"].as_array().unwrap().iter().map(|m| m["source"].as_str().unwrap()).collect();
    assert_eq!(sources, vec!["ollama", "lm-studio", "llama-cpp"]);

    // doctor with no model configured uses the same choice.
    let (ok, report) = doctor_json(&["--no-load"], &home);
    assert!(ok, "{report:#}");
    assert_eq!(report["facts"]["model_source"], "discovered");
    assert!(report["facts"]["model"].as_str().unwrap().contains("lmstudio"), "without Ollama's folder the coder-named model wins");
}

/// Asks for an inline suggestion at the end of `return math.` in a small file; returns it.
fn suggest(client: &mut StdioClient) -> String {
    const URI: &str = "file:///project/circle.py";
    open(client, URI, "import math\n\n\ndef circle_area(radius):\n    return math.\n");
    let response = inline_completion(client, URI, 4, 16);
    client.notify("textDocument/didClose", json!({"textDocument": {"uri": URI}}));
    inline_text(&response)
}

#[test]
fn the_server_discovers_a_model_and_completes_with_a_budget_chosen_context() {
    let home = fake_home("lsp-discover");
    let env = isolated_env(&home);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut client = StdioClient::spawn(&binary(), &["lsp"], &env, Stdio::inherit()).unwrap();
    // No model.path: discovery; a budget that leaves room for a 512-token context only.
    initialize(&mut client, json!({"window": {"workDoneProgress": true}}), json!({"model": {"memoryBudgetMb": 135}}));
    wait_ready(&mut client);
    let why = client
        .wait_notification("window/showMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("no model configured; using")))
        .unwrap();
    let why = why["params"]["message"].as_str().unwrap();
    assert!(why.contains("found in Ollama") && why.contains("FIM tokens"), "{why}");
    let memory = client
        .wait_notification("window/logMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("memory: context")))
        .unwrap();
    let memory = memory["params"]["message"].as_str().unwrap();
    assert!(memory.contains("context 512 tokens (limited by the memory budget)"), "{memory}");
    assert!(memory.contains("512 × 23040 B (f16)"), "{memory}");
    // The engine fits its prompt into what is left of the 512 tokens: a real suggestion.
    let text = suggest(&mut client);
    assert!(!text.trim().is_empty());
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn keep_alive_unloads_the_idle_model_and_the_next_request_reloads_it() {
    let mut client = spawn();
    let options = json!({"model": {"path": model(), "keepAlive": "1s"}});
    initialize(&mut client, json!({"window": {"workDoneProgress": true}}), options);
    wait_ready(&mut client);
    let first = suggest(&mut client);
    assert!(!first.trim().is_empty());
    // Idle for a second: the model is freed and the client told.
    client
        .wait_notification("window/logMessage", Duration::from_secs(30), |p| {
            p["message"].as_str().is_some_and(|m| m.contains("model unloaded after model.keepAlive"))
        })
        .unwrap();
    client.notifications.clear();
    // The next request loads it again, reported like a load, and gets the same answer.
    let again = suggest(&mut client);
    assert_eq!(again, first);
    wait_ready(&mut client);
    let kinds = progress_kinds(&client);
    assert_eq!(kinds.first().map(String::as_str), Some("begin"), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("end"), "{kinds:?}");
    assert!(log_messages(&client).iter().filter(|m| m.contains("model ready")).count() == 1);
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}

#[test]
fn a_budget_too_small_for_the_model_is_a_message_not_an_oom() {
    let mut client = spawn();
    initialize(&mut client, json!({}), json!({"model": {"path": model(), "memoryBudgetMb": 120}}));
    let shown = client
        .wait_notification("window/showMessage", TIMEOUT, |p| p["message"].as_str().is_some_and(|m| m.contains("cannot hold this model")))
        .unwrap();
    let message = shown["params"]["message"].as_str().unwrap();
    assert_eq!(shown["params"]["type"], 1, "an error: {message}");
    assert!(message.contains("memory budget of 120 MiB") && message.contains("Raise model.memoryBudgetMb to at least"), "{message}");
    // The server keeps running and answers completions (empty) at once.
    open(&mut client, "file:///project/a.py", "x = 1\n");
    let response = inline_completion(&mut client, "file:///project/a.py", 1, 0);
    assert_eq!(inline_text(&response), "");
    // A bigger budget through didChangeConfiguration loads it.
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"model": {"path": model(), "memoryBudgetMb": 400}}}));
    wait_ready(&mut client);
    assert!(client.shutdown(TIMEOUT).unwrap().success());
}
