//! `ghostline pull` against the loopback Hub of `common/hub.rs` (a resolve endpoint answering
//! `HEAD` with the Hub's redirect and metadata headers; a content host with `Range` support that
//! can cut or stall a transfer or send altered bytes). The real binary runs; the model it
//! writes into the cache is then found by `ghostline models` and loaded by `doctor`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hub::{FakeHub, COMMIT};
use common::*;
use serde_json::Value;

const REPO: &str = "test-org/SmolLM2-135M-GGUF";
const FILE: &str = "smollm2-135m-q4_1.gguf";
const TOKEN: &str = "hf_loopback_secret";

/// A cache, home and environment of its own for each test.
struct Env {
    dir: TempDir,
    cache: PathBuf,
    endpoint: String,
}

impl Env {
    fn new(name: &str, hub: &FakeHub) -> Env {
        let dir = TempDir::new(name);
        let cache = dir.join("hub-cache");
        Env { dir, cache, endpoint: hub.endpoint.clone() }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(binary());
        c.args(args);
        self.environment(&mut c);
        c
    }

    fn environment(&self, c: &mut Command) {
        c.env("HF_ENDPOINT", &self.endpoint)
            .env("HF_HUB_CACHE", &self.cache)
            .env("HF_HOME", self.dir.join("hf-home"))
            .env("HF_TOKEN", TOKEN)
            .env("HOME", self.dir.join("home"))
            .env("XDG_CACHE_HOME", self.dir.join("xdg-cache"))
            .env("GHOSTLINE_MODEL", "")
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("LLAMA_CACHE")
            .env_remove("OLLAMA_MODELS")
            .env_remove("GHOSTLINE_LMSTUDIO_MODELS");
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn repo_dir(&self) -> PathBuf {
        self.cache.join("models--test-org--SmolLM2-135M-GGUF")
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn blobs(env: &Env) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(env.repo_dir().join("blobs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The pull's result in the cache: snapshot → blob with the right content, refs/main.
fn assert_in_cache(env: &Env, hub: &FakeHub, stdout: &str) -> PathBuf {
    let snapshot = env.repo_dir().join("snapshots").join(COMMIT).join(FILE);
    assert_eq!(stdout.trim(), snapshot.to_string_lossy(), "the printed path");
    assert_eq!(std::fs::read_link(&snapshot).unwrap(), PathBuf::from(format!("../../blobs/{}", hub.sha256)));
    assert_eq!(std::fs::read_to_string(env.repo_dir().join("refs/main")).unwrap(), COMMIT);
    assert_eq!(blobs(env), vec![hub.sha256.clone()], "one blob, no .incomplete left");
    assert!(std::fs::read(&snapshot).unwrap() == *hub.body, "the blob is the model");
    snapshot
}

#[test]
fn clean_pull_lands_in_the_hub_cache_and_is_found_and_loaded() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    let env = Env::new("pull-clean", &hub);
    // No --file: the repository's one GGUF file is chosen from the Hub's listing.
    let out = env.run(&["pull", REPO]);
    assert!(out.status.success(), "pull failed: {}", text(&out.stderr));
    let snapshot = assert_in_cache(&env, &hub, &text(&out.stdout));
    assert!(text(&out.stderr).contains("sha256"), "{}", text(&out.stderr));

    // The token went to the Hub and never to the content host.
    let heads = hub.seen("hub", "HEAD");
    assert_eq!(heads.len(), 1);
    assert_eq!(heads[0].headers.get("authorization").map(String::as_str), Some(format!("Bearer {TOKEN}").as_str()));
    let gets = hub.seen("cdn", "GET");
    assert_eq!(gets.len(), 1);
    assert!(gets.iter().all(|g| !g.headers.contains_key("authorization")), "token sent to the content host: {gets:?}");
    assert!(gets[0].path.contains("signed=1"), "the content came from the redirect's Location: {}", gets[0].path);

    // A second pull finds it in the cache and checks its sha256: no download.
    let again = env.run(&["pull", REPO, "--file", FILE]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let said = text(&again.stderr);
    assert!(said.contains("already in the cache") && said.contains(&format!("sha256 {} checked", hub.sha256)), "{said}");
    assert_eq!(hub.seen("cdn", "GET").len(), 1);

    // One byte of the cached blob flipped (its size unchanged): the next pull sees the damage,
    // deletes the blob and downloads it again.
    let blob = env.repo_dir().join("blobs").join(&hub.sha256);
    let mut bytes = std::fs::read(&blob).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&blob, &bytes).unwrap();
    let repaired = env.run(&["pull", REPO, "--file", FILE]);
    assert!(repaired.status.success(), "{}", text(&repaired.stderr));
    let said = text(&repaired.stderr);
    assert!(!said.contains("already in the cache") && said.contains("damaged") && said.contains("downloaded again"), "{said}");
    assert_eq!(hub.seen("cdn", "GET").len(), 2, "the damaged blob was not downloaded again");
    assert_in_cache(&env, &hub, &text(&repaired.stdout));

    // `ghostline models` lists it first, and with no model configured doctor discovers and
    // loads it.
    let models = env.run(&["models", "--json"]);
    assert!(models.status.success());
    let listed: Value = serde_json::from_slice(&models.stdout).unwrap();
    assert_eq!(listed["models"][0]["path"], snapshot.to_str().unwrap(), "{listed}");
    assert_eq!(listed["models"][0]["name"], format!("{REPO}/{FILE}"));
    assert!(listed["models"][0]["error"].is_null(), "{listed}");
    let doctor = env.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap_or_else(|_| panic!("{}", text(&doctor.stderr)));
    assert_eq!(report["facts"]["model_source"], "discovered", "{report}");
    assert!(report["facts"]["load_ms"].is_number(), "the pulled model did not load: {report}");
}

#[test]
fn a_transfer_cut_mid_way_is_resumed_with_range() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    let half = hub.body.len() as u64 / 2;
    hub.behaviour.lock().unwrap().cut_at = Some((half, 1));
    let env = Env::new("pull-cut", &hub);
    let out = env.run(&["pull", REPO, "--file", FILE]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_in_cache(&env, &hub, &text(&out.stdout));
    let gets = hub.seen("cdn", "GET");
    assert_eq!(gets.len(), 2, "{gets:?}");
    assert!(!gets[0].headers.contains_key("range"));
    let range = gets[1].headers.get("range").cloned().unwrap_or_default();
    let from: u64 = range.strip_prefix("bytes=").and_then(|r| r.strip_suffix('-')).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(from > 0 && from <= half, "resumed with {range:?}, cut at {half}");
}

#[test]
fn a_pull_killed_mid_way_is_resumed_by_the_next_run() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    let half = hub.body.len() as u64 / 2;
    hub.behaviour.lock().unwrap().stall_at = Some(half);
    let env = Env::new("pull-killed", &hub);
    let mut child = env.command(&["pull", REPO, "--file", FILE]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let incomplete = env.repo_dir().join("blobs").join(format!("{}.incomplete", hub.sha256));
    let started = Instant::now();
    while std::fs::metadata(&incomplete).map(|m| m.len()).unwrap_or(0) < half {
        assert!(started.elapsed() < Duration::from_secs(60), "the download never reached half");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(std::fs::metadata(&incomplete).unwrap().len(), half, "the interrupted download is kept");
    hub.behaviour.lock().unwrap().release = true;

    let out = env.run(&["pull", REPO, "--file", FILE]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("resumed after"), "{}", text(&out.stderr));
    assert_in_cache(&env, &hub, &text(&out.stdout));
    let gets = hub.seen("cdn", "GET");
    assert_eq!(gets.last().unwrap().headers.get("range").map(String::as_str), Some(format!("bytes={half}-").as_str()));
}

#[test]
fn a_corrupt_body_is_refused_and_nothing_is_kept() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    let mut altered = (*hub.body).clone();
    let mid = altered.len() / 2;
    altered[mid] ^= 0x40;
    hub.behaviour.lock().unwrap().altered = Some(Arc::new(altered));
    let env = Env::new("pull-corrupt", &hub);
    let out = env.run(&["pull", REPO, "--file", FILE]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("checksum mismatch") && err.contains(&hub.sha256) && err.contains("Nothing was kept"), "{err}");
    assert_eq!(blobs(&env), Vec::<String>::new(), "nothing may be left behind");
    assert!(!env.repo_dir().join("snapshots").exists());
}

#[test]
fn a_model_over_the_memory_budget_is_refused_before_downloading() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    let env = Env::new("pull-budget", &hub);
    let out = env.run(&["pull", REPO, "--file", FILE, "--memory-budget-mb", "16"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("memory budget") && err.contains("16 MiB") && err.contains("model.memoryBudgetMb"), "{err}");
    assert!(hub.seen("cdn", "GET").is_empty(), "downloaded anyway");
}

#[test]
fn offline_mode_refuses_and_opens_no_socket() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    let env = Env::new("pull-offline", &hub);
    let settings = env.dir.join("settings.json");
    std::fs::create_dir_all(&env.dir).unwrap();
    std::fs::write(&settings, r#"{"offline": true}"#).unwrap();
    let trace = env.dir.join("strace.log");
    for args in [vec!["pull", "qwen2.5-coder-1.5b", "--offline"], vec!["pull", REPO, "--settings", settings.to_str().unwrap()]] {
        let mut c = Command::new("strace");
        c.args(strace_args(&trace, &binary(), &args));
        env.environment(&mut c);
        let out = c.output().expect("strace (apt package strace, installed by .ci/run)");
        assert!(!out.status.success(), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("offline mode is on") && err.contains("model.path"), "{err}");
        assert_no_network(&trace, "the pull");
    }
    assert!(hub.seen.lock().unwrap().is_empty(), "the Hub was contacted");
    assert!(!Path::new(&env.cache).exists(), "offline pull wrote to the cache");
}

#[test]
fn refusals_of_the_hub_fail_clearly_and_download_nothing() {
    for (status, says) in [(401, "access denied"), (403, "access denied"), (404, "no file")] {
        let hub = FakeHub::start(&[(REPO, FILE)]);
        hub.behaviour.lock().unwrap().hub_status = Some(status);
        let env = Env::new(&format!("pull-{status}"), &hub);
        let out = env.run(&["pull", REPO, "--file", FILE]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{status}: {err}");
        assert!(err.contains(says) && err.contains(&status.to_string()) && !err.contains("panicked"), "{status}: {err}");
        if status != 404 {
            assert!(err.contains("HF_TOKEN"), "{status}: {err}");
        }
        assert!(hub.seen("cdn", "GET").is_empty(), "{status}: downloaded anyway");
        assert_eq!(blobs(&env), Vec::<String>::new(), "{status}");
    }
}

#[test]
fn of_several_gguf_files_the_q4_k_m_one_is_chosen_else_the_user_is_asked_to_name_one() {
    let hub = FakeHub::start(&[(REPO, "m-Q8_0.gguf"), (REPO, "m-Q4_K_M.gguf"), (REPO, "mmproj-m-f16.gguf")]);
    let env = Env::new("pull-several", &hub);
    let out = env.run(&["pull", REPO]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).trim().ends_with(&format!("snapshots/{COMMIT}/m-Q4_K_M.gguf")), "{}", text(&out.stdout));
    assert_eq!(hub.seen("hub", "HEAD").iter().map(|h| h.path.clone()).collect::<Vec<_>>(), [format!("/{REPO}/resolve/main/m-Q4_K_M.gguf")]);

    let hub = FakeHub::start(&[(REPO, "m-Q8_0.gguf"), (REPO, "m-Q6_K.gguf")]);
    let env = Env::new("pull-several-ask", &hub);
    let out = env.run(&["pull", REPO]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("2 GGUF files") && err.contains("--file") && err.contains("m-Q8_0.gguf") && err.contains("m-Q6_K.gguf"), "{err}");
    assert!(hub.seen("hub", "HEAD").is_empty() && hub.seen("cdn", "GET").is_empty());
}

#[test]
fn a_content_host_that_ignores_range_is_read_again_from_the_start() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    let half = hub.body.len() as u64 / 2;
    {
        let mut b = hub.behaviour.lock().unwrap();
        b.cut_at = Some((half, 1));
        b.ignore_range = true;
    }
    let env = Env::new("pull-no-range", &hub);
    let out = env.run(&["pull", REPO, "--file", FILE]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The resume asked for a range, got the whole file, and kept it whole and right.
    let gets = hub.seen("cdn", "GET");
    assert_eq!(gets.len(), 2, "{gets:?}");
    assert!(gets[1].headers.get("range").is_some_and(|r| r.starts_with("bytes=")), "{gets:?}");
    assert_in_cache(&env, &hub, &text(&out.stdout));
}

#[test]
fn a_content_host_that_sends_more_than_announced_is_refused_and_nothing_is_kept() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    hub.behaviour.lock().unwrap().extra_bytes = 4096;
    let env = Env::new("pull-too-long", &hub);
    let out = env.run(&["pull", REPO, "--file", FILE]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("sent more than the") && err.contains("nothing was kept"), "{err}");
    assert_eq!(blobs(&env), Vec::<String>::new(), "nothing may be left behind");
    assert!(!env.repo_dir().join("snapshots").exists());
}

#[test]
fn doctor_names_the_model_recommend_picks_and_says_what_it_does_to_the_context() {
    let hub = FakeHub::start(&[(REPO, FILE)]);
    let env = Env::new("pull-doctor", &hub);
    // No model anywhere: the failing check names the model `--recommend` picks, quantisation
    // and all (one source: the catalog's pick).
    let rec = env.run(&["doctor", "--recommend", "--json", "--memory-budget-mb", "4096"]);
    assert!(rec.status.success(), "{}", text(&rec.stderr));
    let rec: Value = serde_json::from_slice(&rec.stdout).unwrap();
    let (name, quant) = (rec["name"].as_str().unwrap(), rec["quant"].as_str().unwrap());
    let doctor = env.run(&["doctor", "--json", "--no-load", "--memory-budget-mb", "4096"]);
    assert!(!doctor.status.success());
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap_or_else(|_| panic!("{}", text(&doctor.stderr)));
    let model = report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "model").unwrap();
    assert_eq!(model["level"], "fail", "{model}");
    let fix = model["fix"].as_str().unwrap();
    assert!(fix.contains(&format!("ghostline pull {name}")) && fix.contains(quant) && !fix.contains("Q4_K_M"), "{fix} (recommended {name} {quant})");

    // A context over the models' trained 32768 tokens is capped, and the reasons say so.
    let capped = env.run(&["doctor", "--recommend", "--context-size", "100000", "--memory-budget-mb", "65536"]);
    let said = text(&capped.stdout);
    assert!(capped.status.success(), "{}", text(&capped.stderr));
    assert!(said.contains("100000 tokens, is capped to the 32768 tokens the model was trained on"), "{said}");
    // One too small is refused (it used to become 4096 without a word).
    for args in [vec!["--context-size", "0"], vec!["--context-size", "100"]] {
        let mut all = vec!["doctor", "--recommend"];
        all.extend(args.iter().copied());
        let out = env.run(&all);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(&format!("--context-size {} is below the smallest context", args[1])) && err.contains("256"), "{err}");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }
    assert!(hub.seen.lock().unwrap().is_empty(), "doctor contacted the Hub");
}
