//! `ghostline bench --soak N`: N completions through ONE long-lived language server over stdio,
//! replaying the typing traces in a loop, with the server's resident memory sampled from
//! `/proc/<pid>/status` as it goes; reports the growth after a warm-up against the target
//! (growth ≤ 1 %), the crashes (the server exiting) and the errors.
//!
//! Each loop re-opens every trace's document under a new URI (and closes it afterwards) with a
//! comment line naming the loop just above the cursor, so the prompts of one loop differ from
//! those of the last and the requests reach the model instead of the suggestion cache. Edits are
//! sent without the recorded gaps: the soak measures memory, not latency.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::json;

use super::system::{load_average, machine, proc_status_kb};
use super::trace::{load_trace, trace_paths, LoadedTrace};
use super::{BATCH_SIZE, CONTEXT_SIZE, MAX_TOKENS, TIMEOUT};
use crate::model::CacheHit;
use crate::stdio_client::StdioClient;
use crate::typing::{self, TypedDoc};

/// The target of issue #8: resident memory after the warm-up grows by at most this much.
pub const TARGET_GROWTH_PCT: f64 = 1.0;
/// Memory samples taken over the soak, about (one every N / SAMPLES completions).
const SAMPLES: usize = 200;

pub struct Options {
    pub traces: Vec<PathBuf>,
    pub completions: usize,
    pub model: Option<PathBuf>,
    pub threads: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Conditions {
    pub model: PathBuf,
    pub prompt_format: String,
    pub threads: u32,
    pub context_size: u32,
    pub batch_size: u32,
    pub max_tokens: u32,
    pub settings: String,
    pub machine: String,
    pub ghostline_version: String,
    /// Trace names and their completion requests per loop.
    pub traces: Vec<(String, usize)>,
    pub replay: String,
    /// Completions counted as warm-up: max(200, N / 10), at most N / 2.
    pub warmup: usize,
    pub sample_every: usize,
    /// The 1-minute load average at the start and at the end.
    pub load_average: (f64, f64),
    pub started: String,
}

/// Memory of the server process after `completions` completions.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MemorySample {
    pub completions: usize,
    pub elapsed_s: f64,
    /// VmRSS, KiB.
    pub rss_kb: u64,
    /// VmHWM (peak VmRSS so far), KiB.
    pub hwm_kb: u64,
    /// RssAnon (heap and other anonymous memory; VmRSS also holds the mapped model file), KiB.
    pub rss_anon_kb: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Answers {
    /// The engine ran the model for the request.
    pub model: usize,
    /// The model ran ahead, on the keystroke before the request (`completion.generateAhead`).
    pub ahead: usize,
    /// Answered from the suggestion cache (the same prompt as an earlier request).
    pub prompt_cache: usize,
    /// Answered from the previous suggestion (typed-ahead; off in the soak).
    pub typed_ahead: usize,
    /// `ghostline/lastTimings` did not describe this request (no engine answer for it).
    pub unmatched: usize,
    /// Requests answered with no suggestion (any of the above).
    pub empty: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub conditions: Conditions,
    pub requested: usize,
    pub completions: usize,
    pub loops: usize,
    pub elapsed_s: f64,
    pub completions_per_s: f64,
    pub answers: Answers,
    /// Requests answered with a JSON-RPC error.
    pub errors: usize,
    /// The first few errors.
    pub error_messages: Vec<String>,
    /// The server exited (or stopped answering) during the soak.
    pub crashes: usize,
    pub crash: Option<String>,
    /// The server's log, kept when it crashed.
    pub server_log: Option<PathBuf>,
    pub rss_after_load_kb: u64,
    pub rss_warmup_kb: u64,
    pub rss_final_kb: u64,
    pub max_rss_kb: u64,
    pub peak_hwm_kb: u64,
    pub rss_anon_warmup_kb: u64,
    pub rss_anon_final_kb: u64,
    /// (final − end of warm-up) / end of warm-up, VmRSS.
    pub growth_pct: Option<f64>,
    /// Least squares over the samples after the warm-up, VmRSS, KiB per 1,000 completions.
    pub slope_kb_per_1000: Option<f64>,
    pub target: String,
    /// Every completion done, no crash, growth within the target.
    pub pass: bool,
    pub samples: Vec<MemorySample>,
}

pub fn run(opts: Options) -> Result<Report, String> {
    let (model, threads) = super::model_and_threads(opts.model.clone(), opts.threads)?;
    let n = opts.completions.max(1);
    let traces: Vec<LoadedTrace> = trace_paths(&opts.traces)?.iter().map(|p| load_trace(p)).collect::<Result<_, _>>()?;
    if traces.iter().all(|t| !t.0.events.iter().any(|e| e.complete)) {
        return Err("the traces ask for no completion".into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let log_path = std::env::temp_dir().join(format!("ghostline-soak-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;

    let warmup = 200.max(n / 10).min(n / 2);
    let sample_every = (n / SAMPLES).max(1);
    let mut conditions = Conditions {
        model: model.clone(),
        prompt_format: String::new(),
        threads,
        context_size: CONTEXT_SIZE,
        batch_size: BATCH_SIZE,
        max_tokens: MAX_TOKENS,
        settings: "greedy, no repetition penalty, typed-ahead off; otherwise ghostline's defaults".into(),
        machine: machine(),
        ghostline_version: format!("ghostline {}", env!("CARGO_PKG_VERSION")),
        traces: traces.iter().map(|t| (t.0.name.clone(), t.0.events.iter().filter(|e| e.complete).count())).collect(),
        replay: "one server for the whole soak; each loop opens every trace's document under a new URI with a \
                 comment line naming the loop above the cursor, types the trace's keys (no gaps), asks for \
                 every completion it asks for, waits for each answer, then closes the document"
            .into(),
        warmup,
        sample_every,
        load_average: (load_average(), 0.0),
        started: httpdate::fmt_http_date(SystemTime::now()),
    };

    let options = json!({
        "model": {"path": model, "threads": threads, "contextSize": CONTEXT_SIZE, "batchSize": BATCH_SIZE},
        "completion": {"maxTokens": MAX_TOKENS, "repeatPenalty": 1.0, "typedAhead": false}
    });
    let session = typing::start(&exe, options, Stdio::from(log), TIMEOUT)?;
    conditions.prompt_format = session.format.clone();
    let mut client = session.client;
    let pid = client.pid();
    let started = Instant::now();
    let mut samples = vec![memory(pid, 0, 0.0)];
    let mut soak = Soak { done: 0, answers: Answers::default(), errors: 0, error_messages: Vec::new(), crash: None };
    let mut loops = 0;
    'soak: while soak.done < n {
        for trace in &traces {
            if soak.done >= n {
                break 'soak;
            }
            let step = catch_unwind(AssertUnwindSafe(|| {
                soak.replay(&mut client, trace, loops, n, |done| {
                    if done % sample_every == 0 || done == warmup || done == n {
                        let sample = memory(pid, done, started.elapsed().as_secs_f64());
                        tracing::info!(done, n, rss_kb = sample.rss_kb, per_s = done as f64 / sample.elapsed_s, "soak");
                        samples.push(sample);
                    }
                })
            }));
            let stopped = match step {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("the client panicked (the server's input closed?)".to_owned()),
            };
            if let Some(why) = stopped.or_else(|| soak.crash.clone()) {
                soak.crash = Some(if exited(&mut client) { format!("the server exited: {why}") } else { why });
                break 'soak;
            }
        }
        loops += 1;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    if samples.last().is_some_and(|s| s.completions != soak.done) && soak.crash.is_none() {
        samples.push(memory(pid, soak.done, elapsed_s));
    }
    let crashed = soak.crash.is_some();
    if !crashed {
        if let Err(e) = client.shutdown(Duration::from_secs(10)) {
            eprintln!("ghostline bench: the server did not shut down cleanly after the soak ({e}); it was killed");
        }
        let _ = std::fs::remove_file(&log_path);
    }
    conditions.load_average.1 = load_average();
    Ok(summarize(conditions, n, soak, loops, elapsed_s, samples, crashed.then_some(log_path)))
}

struct Soak {
    done: usize,
    answers: Answers,
    errors: usize,
    error_messages: Vec<String>,
    /// Why the soak stopped early.
    crash: Option<String>,
}

impl Soak {
    /// One trace once, under a URI of its own; stops at `n` completions in all. Returns an error
    /// when the server stopped answering.
    fn replay(
        &mut self,
        client: &mut StdioClient,
        (trace, file, text, at): &LoadedTrace,
        loop_no: usize,
        n: usize,
        mut after: impl FnMut(usize),
    ) -> Result<(), String> {
        let (text, at) = vary(text, *at, loop_no, &trace.language_id);
        let base = typing::file_uri(file);
        let uri = match base.rsplit_once('/') {
            Some((dir, name)) => format!("{dir}/ghostline-soak-{loop_no}/{name}"),
            None => format!("{base}-soak-{loop_no}"),
        };
        let mut doc = TypedDoc::open(client, uri.clone(), &trace.language_id, text, at);
        for event in &trace.events {
            if self.done >= n {
                break;
            }
            if !client.is_running() {
                return Err("the server is not running".into());
            }
            match event.key.as_deref() {
                Some("\u{8}") => doc.backspace(client),
                Some(k) => doc.insert(client, k),
                None => {}
            }
            if !event.complete {
                continue;
            }
            let response = doc.inline_completion(client, TIMEOUT)?;
            self.done += 1;
            if let Some(e) = response.get("error") {
                self.errors += 1;
                if self.error_messages.len() < 5 {
                    self.error_messages.push(format!("completion {}: {e}", self.done));
                }
            }
            let empty = response["result"]["items"][0]["insertText"].as_str().is_none_or(|s| s.is_empty());
            self.answers.empty += usize::from(empty);
            let last = super::last_completion(client)?;
            let timings = last
                .filter(|l| l.uri == uri && l.version == doc.version && l.position == super::position(doc.cursor()))
                .map(|l| l.timings);
            match timings.map(|t| t.cache) {
                None => self.answers.unmatched += 1,
                Some(None) => self.answers.model += 1,
                Some(Some(CacheHit::Prompt)) => self.answers.prompt_cache += 1,
                Some(Some(CacheHit::GeneratedAhead)) => self.answers.ahead += 1,
                Some(Some(CacheHit::ShownSuggestion)) => self.answers.typed_ahead += 1,
            }
            after(self.done);
        }
        client.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}));
        Ok(())
    }
}

/// The document with `# ghostline soak, loop N` (in the language's comment syntax, indented like
/// the cursor's line) on a line of its own just above the cursor's line, and the cursor after it.
fn vary(text: &str, at: usize, loop_no: usize, language: &str) -> (String, usize) {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let indent: String = text[line_start..at].chars().take_while(|c| *c == ' ' || *c == '\t').collect();
    let comment = match language {
        "python" | "ruby" | "shellscript" | "perl" | "r" | "toml" | "yaml" => "#",
        "lua" | "sql" | "haskell" => "--",
        _ => "//",
    };
    let line = format!("{indent}{comment} ghostline soak, loop {loop_no}\n");
    let mut out = text.to_owned();
    out.insert_str(line_start, &line);
    (out, at + line.len())
}

/// Whether the server process has exited (waiting up to 2 s for it to go).
fn exited(client: &mut StdioClient) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if !client.is_running() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn memory(pid: u32, completions: usize, elapsed_s: f64) -> MemorySample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| proc_status_kb(&status, name);
    MemorySample { completions, elapsed_s, rss_kb: field("VmRSS"), hwm_kb: field("VmHWM"), rss_anon_kb: field("RssAnon") }
}

/// Least-squares slope of y over x.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let k = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / k, points.iter().map(|p| p.1).sum::<f64>() / k);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

fn summarize(
    conditions: Conditions,
    n: usize,
    soak: Soak,
    loops: usize,
    elapsed_s: f64,
    samples: Vec<MemorySample>,
    server_log: Option<PathBuf>,
) -> Report {
    let warmup = conditions.warmup;
    let at_warmup = samples.iter().find(|s| s.completions >= warmup && s.completions > 0).copied();
    let last = samples.last().copied();
    let rss_final_kb = last.map_or(0, |s| s.rss_kb);
    let growth_pct = match (at_warmup, last) {
        (Some(w), Some(l)) if w.rss_kb > 0 && l.completions > w.completions => {
            Some((l.rss_kb as f64 - w.rss_kb as f64) / w.rss_kb as f64 * 100.0)
        }
        _ => None,
    };
    let after: Vec<(f64, f64)> =
        samples.iter().filter(|s| s.completions >= warmup && s.completions > 0).map(|s| (s.completions as f64, s.rss_kb as f64)).collect();
    let crashes = usize::from(soak.crash.is_some());
    let pass = soak.done == n && crashes == 0 && growth_pct.is_some_and(|g| g <= TARGET_GROWTH_PCT);
    Report {
        requested: n,
        completions: soak.done,
        loops,
        elapsed_s,
        completions_per_s: if elapsed_s > 0.0 { soak.done as f64 / elapsed_s } else { 0.0 },
        answers: soak.answers,
        errors: soak.errors,
        error_messages: soak.error_messages,
        crashes,
        crash: soak.crash,
        server_log,
        rss_after_load_kb: samples.first().map_or(0, |s| s.rss_kb),
        rss_warmup_kb: at_warmup.map_or(0, |s| s.rss_kb),
        rss_final_kb,
        max_rss_kb: samples.iter().map(|s| s.rss_kb).max().unwrap_or(0),
        peak_hwm_kb: samples.iter().map(|s| s.hwm_kb).max().unwrap_or(0),
        rss_anon_warmup_kb: at_warmup.map_or(0, |s| s.rss_anon_kb),
        rss_anon_final_kb: last.map_or(0, |s| s.rss_anon_kb),
        growth_pct,
        slope_kb_per_1000: slope(&after).map(|s| s * 1000.0),
        target: format!("VmRSS growth after the warm-up ≤ {TARGET_GROWTH_PCT} %, 0 crashes"),
        pass,
        conditions,
        samples,
    }
}

pub fn print_text(r: &Report) {
    let c = &r.conditions;
    let mb = |kb: u64| format!("{:.1}", kb as f64 / 1024.0);
    println!("ghostline bench --soak {}", r.requested);
    println!(
        "  {}; {}",
        super::report::model_line(&c.model, &c.prompt_format, c.threads, (c.context_size, c.batch_size, c.max_tokens)),
        c.settings
    );
    println!("  machine: {}", c.machine);
    println!("  {}; started {}", c.ghostline_version, c.started);
    let traces: Vec<String> = c.traces.iter().map(|(name, k)| format!("{name} ({k} requests)")).collect();
    println!("  traces: {}", traces.join(", "));
    println!("  replay: {}", c.replay);
    println!("  load average (1 min) at start {:.2}, at end {:.2}", c.load_average.0, c.load_average.1);
    println!();
    println!(
        "completions        {} of {} in {:.0} s ({:.2}/s), {} loops over the traces",
        r.completions, r.requested, r.elapsed_s, r.completions_per_s, r.loops
    );
    let a = &r.answers;
    println!(
        "answered by        the model {} on the request, {} ahead on the keystroke, the suggestion cache {}, typed-ahead {}, not matched {} ({} empty)",
        a.model, a.ahead, a.prompt_cache, a.typed_ahead, a.unmatched, a.empty
    );
    println!("errors             {}", r.errors);
    for e in &r.error_messages {
        println!("                   {e}");
    }
    println!("crashes            {}{}", r.crashes, r.crash.as_deref().map_or(String::new(), |c| format!(" ({c})")));
    if let Some(log) = &r.server_log {
        println!("server log         {}", log.display());
    }
    println!(
        "VmRSS MB           after load {}, end of warm-up ({} completions) {}, final {}, max {}; VmHWM {}",
        mb(r.rss_after_load_kb),
        c.warmup,
        mb(r.rss_warmup_kb),
        mb(r.rss_final_kb),
        mb(r.max_rss_kb),
        mb(r.peak_hwm_kb)
    );
    println!("RssAnon MB         end of warm-up {}, final {}", mb(r.rss_anon_warmup_kb), mb(r.rss_anon_final_kb));
    println!(
        "growth after warm-up {}, slope {} KB per 1,000 completions",
        r.growth_pct.map_or("-".into(), |g| format!("{g:+.2} %")),
        r.slope_kb_per_1000.map_or("-".into(), |s| format!("{s:+.1}"))
    );
    println!("target             {}: {}", r.target, if r.pass { "PASS" } else { "FAIL" });
    println!();
    println!("  {:>11} {:>9} {:>10} {:>10} {:>11}", "completions", "seconds", "VmRSS MB", "VmHWM MB", "RssAnon MB");
    let step = r.samples.len().div_ceil(12).max(1);
    for (i, s) in r.samples.iter().enumerate() {
        if i % step == 0 || i + 1 == r.samples.len() {
            println!(
                "  {:>11} {:>9.0} {:>10} {:>10} {:>11}",
                s.completions,
                s.elapsed_s,
                mb(s.rss_kb),
                mb(s.hwm_kb),
                mb(s.rss_anon_kb)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_comment_goes_above_the_cursor_line_with_its_indentation() {
        let text = "def f():\n    x = 1\n    ret\n";
        let at = text.find("ret").unwrap() + 3;
        let (out, cursor) = vary(text, at, 7, "python");
        assert_eq!(out, "def f():\n    x = 1\n    # ghostline soak, loop 7\n    ret\n");
        assert_eq!(&out[..cursor], "def f():\n    x = 1\n    # ghostline soak, loop 7\n    ret");
        let (out, cursor) = vary("fn main() {", 11, 0, "rust");
        assert_eq!((out.as_str(), cursor), ("// ghostline soak, loop 0\nfn main() {", 37));
    }

    #[test]
    fn the_slope_is_least_squares() {
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]), Some(2.0));
        assert_eq!(slope(&[(1.0, 1.0)]), None);
    }
}
