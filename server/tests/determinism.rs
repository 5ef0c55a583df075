//! Warm answers are cold answers: `ghostline bench --warm-cold` replays a typing session into
//! one server (its KV cache, saved KV states and generation ahead all in play, typed-ahead off
//! so that every answer is the model's) and asks a fresh process for the same text and cursor
//! at every request; every answer must agree token for token. On both test models.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use serde_json::Value;

/// Runs the replay with ghostline's default settings and returns its report.
fn warm_cold(model: &Path) -> Value {
    let mut cmd = Command::new(common::binary());
    cmd.args(["bench", "--warm-cold", "--json", "--threads", "2", "--trace"])
        .arg(common::fixture("traces/inventory.json"))
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

fn assert_warm_equals_cold(model: &Path) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = warm_cold(model);
    let requests = r["requests"].as_u64().unwrap();
    assert_eq!(requests, 31, "the inventory trace has 31 requests: {r}");
    // Real suggestions, not a run of empty answers that agree trivially.
    assert!(r["answered"].as_u64().unwrap() >= requests / 2, "too few suggestions: {r}");
    assert!(r["prefill_chunk"].as_u64().unwrap() > 0, "the default must be the deterministic prefill: {r}");
    // Still warm: whole aligned chunks of the cache are reused, most of each prompt is not decoded.
    let (decoded, prompts) = (r["warm_prefill_tokens"].as_u64().unwrap(), r["warm_prompt_tokens"].as_u64().unwrap());
    assert!(decoded * 3 < prompts, "the warm server decoded {decoded} of {prompts} prompt tokens: the KV cache is not reused");
    let differ = r["differ"].as_array().unwrap();
    assert!(differ.is_empty(), "{} of {requests} warm answers differ from a cold start: {}", differ.len(), serde_json::to_string_pretty(differ).unwrap());
}

#[test]
fn warm_answers_equal_cold_answers_smollm2() {
    assert_warm_equals_cold(&common::model());
}

#[test]
fn warm_answers_equal_cold_answers_gemma3() {
    assert_warm_equals_cold(&common::second_model());
}
