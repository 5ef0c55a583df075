//! Warm answers are cold answers: `ghostline bench --warm-cold` replays a typing session into
//! one server (its KV cache, saved KV states and generation ahead all in play, typed-ahead off
//! so that every answer is the model's) and asks a fresh process for the same text and cursor
//! at every request; every answer must agree token for token. On both test models, over the
//! `inventory` trace (one file) and the `shop` trace (a workspace: the cross-file section, its
//! head decoded on open, in play on both sides). The warm side drafts tokens from the prompt
//! and checks them in one batch, the cold side decodes one token at a time.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use serde_json::Value;

/// Runs the replay with ghostline's default settings and returns its report.
fn warm_cold(model: &Path, trace: &str) -> Value {
    let mut cmd = Command::new(common::binary());
    cmd.args(["bench", "--warm-cold", "--json", "--threads", "2", "--trace"])
        .arg(common::fixture(&format!("traces/{trace}.json")))
        .arg("--model")
        .arg(model)
        .stderr(Stdio::inherit());
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON report ({e})"));
    assert_eq!(out.status.success(), report["differ"].as_array().is_some_and(|d| d.is_empty()), "exit status and report disagree: {report}");
    report
}

/// One replay at a time: each runs a server and a fresh process per request with 2 threads, and
/// two at once on 2 cores would only slow both (llama.cpp's threads spin while they wait).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn assert_warm_equals_cold(model: &Path, trace: &str, requests: u64) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = warm_cold(model, trace);
    assert_eq!(r["requests"].as_u64().unwrap(), requests, "the {trace} trace has {requests} requests: {r}");
    // Real suggestions, not a run of empty answers that agree trivially.
    assert!(r["answered"].as_u64().unwrap() >= requests / 2, "too few suggestions: {r}");
    // With a workspace, the section is really in the prompts compared.
    let with_section = r["with_cross_file"].as_u64().unwrap();
    assert_eq!(with_section == requests, trace == "shop", "{with_section} of {requests} prompts held a cross-file section: {r}");
    // ghostline's own build has batch-invariant CPU kernels (`.cargo/config.toml`): no aligned
    // prefill, the whole common prefix kept at any token boundary.
    assert_eq!(r["batch_variant"], Value::Null, "this build's kernels depend on the batch: {r}");
    assert_eq!(r["prefill_chunk"], 0, "batch-invariant kernels need no aligned prefill: {r}");
    // Warm: the cache is reused, most of each prompt is not decoded.
    let (decoded, prompts) = (r["warm_prefill_tokens"].as_u64().unwrap(), r["warm_prompt_tokens"].as_u64().unwrap());
    assert!(decoded * 3 < prompts, "the warm server decoded {decoded} of {prompts} prompt tokens: the KV cache is not reused");
    // The warm side drafted tokens from the prompt and the model confirmed some (the cold side
    // decodes one token at a time): equal answers then also say drafting changed nothing.
    assert!(r["warm_accepted_tokens"].as_u64().unwrap() > 0, "no drafted token was confirmed: {r}");
    let differ = r["differ"].as_array().unwrap();
    assert!(differ.is_empty(), "{} of {requests} warm answers differ from a cold start: {}", differ.len(), serde_json::to_string_pretty(differ).unwrap());
}

#[test]
fn warm_answers_equal_cold_answers_smollm2() {
    assert_warm_equals_cold(&common::model(), "inventory", 31);
}

#[test]
fn warm_answers_equal_cold_answers_gemma3() {
    assert_warm_equals_cold(&common::second_model(), "inventory", 31);
}

#[test]
fn warm_answers_equal_cold_answers_with_the_cross_file_section_smollm2() {
    assert_warm_equals_cold(&common::model(), "shop", 57);
}

#[test]
fn warm_answers_equal_cold_answers_with_the_cross_file_section_gemma3() {
    assert_warm_equals_cold(&common::second_model(), "shop", 57);
}

/// `bench --batch-invariance`: one prompt decoded in one batch, in aligned batches, as a prefix
/// then one token at a time, and as a prefix then uneven small batches gives the same value at
/// every position of every tensor and the same logits, bit for bit — the property that lets a
/// warm request keep the whole cached prefix (on both test models and the FIM test model).
#[test]
fn a_positions_result_does_not_depend_on_its_batch() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for model in [common::model(), common::second_model()] {
        let out = Command::new(common::binary())
            .args(["bench", "--batch-invariance", "--json", "--threads", "2", "--tokens", "160", "--model"])
            .arg(&model)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON report ({e})"));
        assert_eq!(r["expected_variant"], Value::Null, "{r}");
        let schedules = r["schedules"].as_array().unwrap();
        assert_eq!(schedules.len(), 6, "{r}");
        assert!(r["tensors_per_position"].as_u64().unwrap() > 100, "too few tensors compared: {r}");
        for s in schedules {
            assert_eq!((s["logits_equal"].as_bool(), s["positions_differing"].as_u64()), (Some(true), Some(0)), "{}: {s}", model.display());
        }
        assert!(out.status.success(), "{r}");
    }
}
