//! The raw model outputs that post-processing tests use in place of the model
//! (`fixtures/context/*.raw`, `fixtures/postprocess/auto_closed.json`) are the test model's: each
//! is generated again at its cursor, as the engine asks the model thread for it (its prompt, stop
//! rule and token limit, default settings), and must be exactly the text that comes back.
//!
//! The FIM test model's raw outputs (`fixtures/context/NAME.fim.raw`, beside the same fixtures)
//! are checked the same way: there the prompt is the FIM one, with the text after the cursor.
//!
//! `GHOSTLINE_UPDATE_RAW=1` writes what the model writes into the fixtures instead of failing
//! (then review the snapshot tests' and `postprocess::syntax`'s expected suggestions: the
//! `suggestion` of each guard case is written by hand, never updated here).

mod common;

use common::*;
use ghostline::config::Options;
use ghostline::engine::{Engine, Input};
use ghostline::model::{ModelStatus, ModelHandle, Sampling};
use ghostline::syntax::{self, Spec};
use serde_json::Value;

/// The model thread's raw text for a completion at `cursor` (before post-processing).
fn generate(engine: &Engine, rt: &tokio::runtime::Runtime, spec: &'static Spec, text: &str, cursor: usize) -> String {
    let tree = spec.parse(text);
    rt.block_on(engine.generate_raw(Input { cross_file: None, text, cursor, syntax: Some((spec, &tree)) })).unwrap().text
}

/// An engine on `path` with default settings, loaded.
fn engine(path: std::path::PathBuf) -> (Engine, tokio::runtime::Runtime) {
    let mut options = Options::default();
    options.model.path = Some(path);
    let config = options.resolve(None);
    let engine = Engine::new(ModelHandle::spawn(&config.model, Sampling::from(&config.completion)), config.completion);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    assert!(matches!(rt.block_on(engine.model.wait_loaded()), ModelStatus::Ready(_)));
    (engine, rt)
}

/// `fixtures/context/NAME.fim.raw`: the FIM test model's output at NAME's cursor.
fn is_fim_raw(path: &std::path::Path) -> bool {
    path.to_str().is_some_and(|p| p.ends_with(".fim.raw"))
}

#[test]
fn stored_fim_raw_outputs_are_what_the_fim_test_model_writes() {
    let (engine, rt) = engine(fim_model());
    let update = std::env::var_os("GHOSTLINE_UPDATE_RAW").is_some();
    let dir = fixture("context");
    let mut raws: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| is_fim_raw(p)).collect();
    raws.sort();
    let mut drifted = Vec::new();
    for raw in &raws {
        let stem = raw.file_name().unwrap().to_str().unwrap().trim_end_matches(".fim.raw");
        let source = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_stem().is_some_and(|s| s == stem) && !p.to_str().unwrap().ends_with(".raw"))
            .unwrap_or_else(|| panic!("no fixture beside {}", raw.display()));
        let name = source.file_name().unwrap().to_str().unwrap();
        let marked = std::fs::read_to_string(&source).unwrap();
        let cursor = marked.find("<CURSOR>").expect("cursor marker");
        let text = marked.replacen("<CURSOR>", "", 1);
        let spec = syntax::by_path(name).expect("a registered language");
        let stored = std::fs::read_to_string(raw).unwrap();
        let generated = generate(&engine, &rt, spec, &text, cursor);
        if stored != generated {
            drifted.push(format!("fixtures/context/{stem}.fim.raw\n  stored:            {stored:?}\n  the model writes:  {generated:?}"));
        }
        if update {
            std::fs::write(raw, &generated).unwrap();
        }
    }
    if update {
        eprintln!("updated {} stored FIM outputs of {}", drifted.len(), raws.len());
        return;
    }
    assert!(raws.len() >= 3, "only {} stored FIM outputs found", raws.len());
    assert!(drifted.is_empty(), "stored raw outputs that are not the FIM test model's ({} of {}):\n{}", drifted.len(), raws.len(), drifted.join("\n"));
}

#[test]
fn stored_raw_outputs_are_what_the_test_model_writes() {
    let (engine, rt) = engine(model());
    let update = std::env::var_os("GHOSTLINE_UPDATE_RAW").is_some();
    let mut drifted = Vec::new();
    let mut checked = 0;
    let mut check = |what: String, stored: &str, generated: &str| {
        if stored != generated {
            drifted.push(format!("{what}\n  stored:            {stored:?}\n  the model writes:  {generated:?}"));
        }
        checked += 1;
    };

    // Context snapshots: NAME.raw beside a NAME.<ext> marked with <CURSOR>.
    let dir = fixture("context");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for raw in files.iter().filter(|p| p.extension().is_some_and(|e| e == "raw") && !is_fim_raw(p)) {
        let source = files
            .iter()
            .find(|p| p.file_stem() == raw.file_stem() && *p != raw)
            .unwrap_or_else(|| panic!("no fixture beside {}", raw.display()));
        let name = source.file_name().unwrap().to_str().unwrap();
        let marked = std::fs::read_to_string(source).unwrap();
        let cursor = marked.find("<CURSOR>").expect("cursor marker");
        let text = marked.replacen("<CURSOR>", "", 1);
        let spec = syntax::by_path(name).expect("a registered language");
        let stored = std::fs::read_to_string(raw).unwrap();
        let generated = generate(&engine, &rt, spec, &text, cursor);
        check(format!("fixtures/context/{}", raw.file_name().unwrap().to_str().unwrap()), &stored, &generated);
        if update {
            std::fs::write(raw, &generated).unwrap();
        }
    }

    // The syntax guard's cases (postprocess::syntax's unit tests): `|` marks the cursor.
    let guard_cases = fixture("postprocess/auto_closed.json");
    let mut cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&guard_cases).unwrap()).unwrap();
    for (i, case) in cases.iter_mut().enumerate() {
        let marked = case["text"].as_str().unwrap();
        let cursor = marked.find('|').unwrap();
        let text = marked.replacen('|', "", 1);
        let spec = syntax::by_language_id(case["language"].as_str().unwrap()).unwrap();
        let what = format!("fixtures/postprocess/auto_closed.json case {i} ({marked:?})");
        let generated = generate(&engine, &rt, spec, &text, cursor);
        check(what, case["raw"].as_str().unwrap(), &generated);
        case["raw"] = Value::String(generated);
    }
    if update {
        let field = |c: &Value, k: &str| serde_json::to_string(&c[k]).unwrap();
        let lines: Vec<String> = cases
            .iter()
            .map(|c| {
                let (l, t, r, s) = (field(c, "language"), field(c, "text"), field(c, "raw"), field(c, "suggestion"));
                format!("  {{\"language\": {l}, \"text\": {t}, \"raw\": {r}, \"suggestion\": {s}}}")
            })
            .collect();
        std::fs::write(&guard_cases, format!("[\n{}\n]\n", lines.join(",\n"))).unwrap();
        eprintln!("updated {} stored outputs of {checked}", drifted.len());
        return;
    }
    assert!(checked >= 10, "only {checked} stored outputs found");
    assert!(drifted.is_empty(), "stored raw outputs that are not the test model's ({} of {checked}):\n{}", drifted.len(), drifted.join("\n"));
}
