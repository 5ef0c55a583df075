//! `ghostline bench --soak N` with a small N on the real test model: the report is complete and
//! sane (every completion done, no crash, memory sampled, growth computed). Memory growth and
//! speed are measured, never asserted here.

mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

#[test]
fn a_short_soak_reports_every_figure() {
    let n = 60;
    let out = Command::new(binary())
        .args(["bench", "--soak", &n.to_string(), "--json", "--trace"])
        .arg(fixture("bench-test/tiny.json"))
        .arg("--model")
        .arg(model())
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));

    assert_eq!(r["requested"], n);
    assert_eq!(r["completions"], n, "every completion was done");
    assert_eq!(r["crashes"], 0, "{}", r["crash"]);
    assert!(r["crash"].is_null());
    assert_eq!(r["errors"], 0, "{}", r["error_messages"]);
    // tiny.json asks for 6 completions: 60 take 10 loops over it, each under a new document.
    assert_eq!(r["loops"], 10);

    // Every request is accounted for, and most reach the model (the loop comment keeps the
    // prompts of one loop from matching the last's in the suggestion cache).
    let a = &r["answers"];
    let count = |k: &str| a[k].as_u64().unwrap_or_else(|| panic!("answers.{k}: {a}"));
    let (model, made_ahead, cached, typed_ahead, unmatched) =
        (count("model"), count("ahead"), count("prompt_cache"), count("typed_ahead"), count("unmatched"));
    assert_eq!(model + made_ahead + cached + typed_ahead + unmatched, n as u64, "{a}");
    assert_eq!(typed_ahead, 0, "typed-ahead is off in the soak: {a}");
    assert!((model + made_ahead) * 2 > n as u64, "most requests reach the model (on the request or ahead of it): {a}");

    let c = &r["conditions"];
    let warmup = c["warmup"].as_u64().unwrap();
    assert_eq!(warmup, n as u64 / 2, "the warm-up is max(200, N/10), at most N/2");
    assert!(c["threads"].as_u64().unwrap() > 0);
    assert!(c["machine"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(c["load_average"].as_array().is_some_and(|l| l.len() == 2));

    let samples = r["samples"].as_array().unwrap();
    assert!(samples.len() >= 3, "{} samples", samples.len());
    assert_eq!(samples[0]["completions"], 0, "a sample right after the model loaded");
    assert_eq!(samples.last().unwrap()["completions"], n);
    assert!(samples.iter().any(|s| s["completions"] == warmup), "a sample at the end of the warm-up");
    let mut previous = -1i64;
    for s in samples {
        let done = s["completions"].as_i64().unwrap();
        assert!(done > previous, "samples in order: {s}");
        previous = done;
        let (rss, hwm) = (s["rss_kb"].as_u64().unwrap(), s["hwm_kb"].as_u64().unwrap());
        assert!(rss > 10 * 1024, "the server holds the model: {s}");
        assert!(hwm >= rss, "{s}");
        assert!(s["rss_anon_kb"].as_u64().unwrap() > 0, "{s}");
    }

    for k in ["rss_after_load_kb", "rss_warmup_kb", "rss_final_kb", "max_rss_kb", "peak_hwm_kb"] {
        assert!(r[k].as_u64().is_some_and(|v| v > 0), "{k} = {}", r[k]);
    }
    assert!(r["max_rss_kb"].as_u64() >= r["rss_final_kb"].as_u64());
    let (warm, last) = (r["rss_warmup_kb"].as_f64().unwrap(), r["rss_final_kb"].as_f64().unwrap());
    let growth = r["growth_pct"].as_f64().expect("growth computed");
    assert!((growth - (last - warm) / warm * 100.0).abs() < 1e-6, "growth {growth} from {warm} to {last}");
    assert!(r["slope_kb_per_1000"].as_f64().is_some_and(f64::is_finite), "{}", r["slope_kb_per_1000"]);
    assert!(r["completions_per_s"].as_f64().is_some_and(|x| x > 0.0));
    assert!(r["target"].as_str().is_some_and(|t| t.contains("1 %")), "{}", r["target"]);
    // The verdict is the target applied to these figures: every completion done, no crash, and
    // growth after the warm-up within 1 %.
    let expected = r["completions"] == n && r["crashes"] == 0 && growth <= 1.0;
    assert_eq!(r["pass"], expected, "pass must be the target's verdict on growth {growth} %");
}
