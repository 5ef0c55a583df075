//! Command line: `ghostline` (the language server over stdio), `complete`, `demo`, `bench`,
//! `doctor`, `models`, `pull`, `stats`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::json;

use crate::config::{self, Options};
use crate::engine::{Engine, Input};
use crate::lsp::encoding::{self, Encoding};
use crate::model::{CancelFlag, ModelHandle, ModelStatus, Sampling};

#[derive(Parser)]
#[command(name = "ghostline", version, about = "A local-first AI coding language server")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Accepted and ignored: stdio is the only transport (some clients always pass it).
    #[arg(long, global = true, hide = true)]
    stdio: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run the language server over stdio (the default).
    Lsp,
    /// Complete FILE at a position and print the suggestion: the same engine, no LSP.
    Complete {
        file: PathBuf,
        /// Zero-based line.
        #[arg(long)]
        line: u32,
        /// Zero-based character in the line, in UTF-16 code units (as LSP counts by default).
        #[arg(long)]
        character: u32,
        /// Print one JSON object with the text and its timings.
        #[arg(long)]
        json: bool,
        /// GGUF model file (default: $GHOSTLINE_MODEL).
        #[arg(long)]
        model: Option<PathBuf>,
        #[arg(long)]
        max_tokens: Option<u32>,
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_THREADS))]
        threads: Option<u32>,
        /// Editor settings as JSON (what the editor sends as initializationOptions); the
        /// options above override them.
        #[arg(long)]
        settings: Option<PathBuf>,
        /// The project folder the file belongs to: indexed first, so that the prompt gets the
        /// cross-file section (`completion.crossFile`) as in an editor opened on that folder.
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// Check the set-up without an editor: backend, threads, the model and its FIM format, KV
    /// cache bytes per token and the memory plan against available memory, a real load, the
    /// cloud and offline settings (nothing is sent). Exits non-zero when a check fails.
    Doctor {
        /// GGUF model file (default: the settings' model.path, $GHOSTLINE_MODEL, then discovery).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Editor settings as JSON (what the editor sends as initializationOptions).
        #[arg(long)]
        settings: Option<PathBuf>,
        /// Override model.memoryBudgetMb.
        #[arg(long, value_parser = memory_budget_mb)]
        memory_budget_mb: Option<u64>,
        /// Override model.contextSize.
        #[arg(long)]
        context_size: Option<u32>,
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_THREADS))]
        threads: Option<u32>,
        /// Check the GGUF header only; do not load the model.
        #[arg(long)]
        no_load: bool,
        /// Print one JSON object (checks and figures).
        #[arg(long)]
        json: bool,
        /// Instead of the checks: which FIM coder model and quantisation fit this machine's
        /// memory budget and backend, and why (nothing is loaded or downloaded).
        #[arg(long)]
        recommend: bool,
    },
    /// Download a GGUF model from the Hugging Face Hub into its cache (resumable, sha256
    /// checked), where `ghostline models` finds it. Prints the model's path.
    Pull {
        /// `org/repo` on the Hub, or a short name: qwen2.5-coder-0.5b, -1.5b, -3b, -7b (the
        /// files llama.cpp's FIM presets use).
        model: String,
        /// The GGUF file in the repository (default: the only one, else the Q4_K_M one).
        #[arg(long)]
        file: Option<String>,
        /// Branch, tag or commit (default: main).
        #[arg(long)]
        revision: Option<String>,
        /// Refuse at once, opening no connection (as `offline: true` in the settings does).
        #[arg(long)]
        offline: bool,
        /// Editor settings as JSON: `offline` and `model.memoryBudgetMb` are honoured.
        #[arg(long)]
        settings: Option<PathBuf>,
        /// Override model.memoryBudgetMb.
        #[arg(long, value_parser = memory_budget_mb)]
        memory_budget_mb: Option<u64>,
    },
    /// List the GGUF models found in the Hugging Face cache, LM Studio, llama.cpp's cache and
    /// Ollama, best first, with the reasons; the first is used when no model is configured.
    Models {
        /// The memory budget to judge them by (default: half of physical memory).
        #[arg(long, value_parser = memory_budget_mb)]
        memory_budget_mb: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Local acceptance statistics: per model and language, suggestions shown and accepted,
    /// characters retained after 30 s and 5 min, latency. Read from the local database only.
    Stats {
        /// How far back: 7d, 12h, 30m, or all (at most 36500d).
        #[arg(long, default_value = "7d", value_parser = crate::stats::report::since_arg)]
        since: crate::stats::report::Since,
        #[arg(long)]
        json: bool,
        /// The database (default: the user's data directory).
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// The shared model host (`model.shared`), started by the first language server that finds
    /// none: not for people to run.
    #[command(hide = true)]
    Host {
        /// The host's spec as JSON (`model::host::Spec`).
        #[arg(long)]
        spec: String,
    },
    /// Drive the real language server over stdio through a scripted typing session and print
    /// each suggestion with its latency.
    Demo {
        /// GGUF model file (default: $GHOSTLINE_MODEL).
        #[arg(long)]
        model: Option<PathBuf>,
        /// The typing script (default: fixtures/demo/typing.json).
        #[arg(long)]
        script: Option<PathBuf>,
    },
    /// Measure suggestion quality on real code (holes cut in installed sources), per context
    /// strategy: next-line exact match, edit similarity, prompt tokens, TTFT.
    Eval {
        /// GGUF model file (default: $GHOSTLINE_MODEL).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Holes per language.
        #[arg(long, default_value_t = 40)]
        holes: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Languages (repeatable; default: python and rust).
        #[arg(long = "language")]
        languages: Vec<String>,
        /// Source folders to cut holes in (default: the Python standard library, the cargo
        /// registry's sources).
        #[arg(long = "source")]
        sources: Vec<PathBuf>,
        /// Lines before the cursor in the naive window strategy.
        #[arg(long, default_value_t = 256)]
        window_lines: usize,
        /// Instead: holes at calls of functions defined in another file of the projects given
        /// with `--source` (Python), each asked with the cross-file section and without.
        #[arg(long)]
        cross_file: bool,
        /// Only these modes (or strategies; with `--next-edit`, kinds), by name as the report
        /// prints them (repeatable; default: all).
        #[arg(long = "mode")]
        modes: Vec<String>,
        /// Write each prompt as the model reads it, with the answer and the truth, to a file
        /// per hole and mode in DIR (for looking at what a hole missed).
        #[arg(long)]
        prompts: Option<PathBuf>,
        /// Instead: next edits after synthesized edits in the projects given with `--source`
        /// (Python): renames, signature changes, repeated edits and no-edit cases; `--holes`
        /// tasks of each kind per project.
        #[arg(long)]
        next_edit: bool,
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_THREADS))]
        threads: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// Replay recorded typing traces through the real server and report latency, TTFT,
    /// prefill and decode rates, re-decoded tokens and peak memory (optionally against
    /// llama.cpp's llama-server, side by side).
    Bench {
        /// A trace file (repeatable; default: every fixtures/traces/*.json).
        #[arg(long = "trace")]
        traces: Vec<PathBuf>,
        /// Replay the same requests against this peer too: `llama-server`.
        #[arg(long)]
        peer: Option<String>,
        /// The llama-server binary (default: $GHOSTLINE_LLAMA_SERVER, then PATH).
        #[arg(long)]
        peer_bin: Option<PathBuf>,
        /// An extra llama-server argument (repeatable), e.g. `--peer-arg=--cache-ram --peer-arg=0`.
        #[arg(long = "peer-arg", allow_hyphen_values = true)]
        peer_args: Vec<String>,
        /// Replays of each trace, each on freshly started servers.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Print one JSON object (with every sample) instead of the table.
        #[arg(long)]
        json: bool,
        /// GGUF model file (default: $GHOSTLINE_MODEL).
        #[arg(long)]
        model: Option<PathBuf>,
        /// llama.cpp threads for both sides (default: physical cores).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_THREADS))]
        threads: Option<u32>,
        /// Also write an SVG chart of latency per request.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Also write the JSON report (every sample) to this file, whichever is printed.
        #[arg(long)]
        save: Option<PathBuf>,
        /// Instead of the traces: time cold prompts of these sizes in tokens (e.g. 256,1024,2048),
        /// with their prefill and decode rates and the floor; `--runs` samples per size.
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=MAX_PROMPT_TOKENS))]
        cold_sizes: Vec<u32>,
        /// Replay with ghostline's `completion.generateAhead` off: every request calls the
        /// model itself (the engines compared request for request).
        #[arg(long)]
        no_ahead: bool,
        /// Send a request right after every key instead of the trace's requests after the
        /// editor's debounce (as llama.vim does); both sides are timed from the key either way.
        #[arg(long)]
        no_debounce: bool,
        /// Replay with ghostline's `completion.crossFile` off (traces with a workspace are
        /// opened in it either way): the cross-file section's cost, against a run without.
        #[arg(long)]
        no_cross_file: bool,
        /// Replay with ghostline's `nextEdit.enabled` off (no edit history, no next edits):
        /// what next edits cost a keystroke, against a run with them (the default).
        #[arg(long)]
        no_next_edit: bool,
        /// ghostline decodes with `--threads` always (`model.adaptiveThreads: false`), as the
        /// peer does, instead of fewer while other processes keep cores busy.
        #[arg(long)]
        fixed_threads: bool,
        /// ghostline generates through a llama-server on a loopback port (`model.endpoint`; the
        /// same model, threads, context and batch, started for each run with `--peer-bin` and
        /// `--peer-arg`) instead of in-process: what a key costs through the remote backend.
        #[arg(long, conflicts_with_all = ["peer", "cold_sizes"])]
        remote: bool,
        /// Instead of the latency report: N completions through one server, looping over the
        /// traces, with its memory sampled; reports the growth after a warm-up (target ≤ 1 %).
        #[arg(long, value_name = "N", conflicts_with_all = ["peer", "svg", "cold_sizes"])]
        soak: Option<usize>,
        /// Instead of the latency report: replay one trace (default: inventory) into one server,
        /// typed-ahead off, and check every answer against a fresh process's for the same text
        /// and cursor (exits non-zero when one differs).
        #[arg(long, conflicts_with_all = ["peer", "svg", "cold_sizes", "soak"])]
        warm_cold: bool,
        /// Instead of the latency report: the workspace index on this project folder (build
        /// time and memory, one file's update, `related` in the largest file).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["peer", "svg", "cold_sizes", "soak", "warm_cold"])]
        index: Option<PathBuf>,
        /// `model.prefillChunk` for ghostline (default: its own default).
        #[arg(long)]
        prefill_chunk: Option<u32>,
        /// Instead of the latency report: decode one prompt in several batch schedules and
        /// compare every position's tensors and the logits bit for bit, naming the first
        /// tensor that depends on the batch (exits non-zero when a schedule differs).
        #[arg(long, conflicts_with_all = ["peer", "svg", "cold_sizes", "soak", "warm_cold", "index"])]
        batch_invariance: bool,
        /// With `--batch-invariance`: the prompt's text (default: the inventory trace's file).
        #[arg(long, value_name = "FILE")]
        prompt_file: Option<PathBuf>,
        /// With `--batch-invariance`: prompt tokens (default 300).
        #[arg(long, default_value_t = 300)]
        tokens: usize,
        /// With `--batch-invariance`: flash attention `on` or `off` (default: as completions run).
        #[arg(long, value_name = "on|off")]
        flash_attention: Option<String>,
        /// With `--batch-invariance`: layers on the GPU (default: the backend's).
        #[arg(long)]
        gpu_layers: Option<u32>,
        /// Between `didOpen` and the trace's first event: a code-action request at the trace's
        /// cursor (as VS Code sends when it shows the file and its cursor), then this many ms of
        /// the user reading — time ghostline may use to decode ahead (0: the first request comes
        /// with the `didOpen`).
        #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=MAX_OPEN_PAUSE_MS))]
        open_pause: u64,
    },
}

/// The largest `--memory-budget-mb`: its bytes must fit in 64 bits.
const MAX_MEMORY_BUDGET_MB: u64 = u64::MAX >> 20;
/// The most llama.cpp threads `--threads` takes (it reaches llama.cpp as an `i32`).
const MAX_THREADS: i64 = 1024;
/// The largest `--cold-sizes` prompt, in tokens.
const MAX_PROMPT_TOKENS: i64 = 1 << 20;
/// The longest `--open-pause`: an hour.
const MAX_OPEN_PAUSE_MS: u64 = 3_600_000;

/// `--memory-budget-mb`: 1 MiB up to [`MAX_MEMORY_BUDGET_MB`]; out of range is a usage error.
fn memory_budget_mb(text: &str) -> Result<u64, String> {
    let mb: u64 = text.trim().parse().map_err(|_| format!("cannot read {text:?} as a whole number of MiB"))?;
    if (1..=MAX_MEMORY_BUDGET_MB).contains(&mb) {
        Ok(mb)
    } else {
        Err(format!("{mb} MiB is out of range: from 1 to {MAX_MEMORY_BUDGET_MB}"))
    }
}

/// Prints a bench report as a table or JSON, and saves its JSON when asked.
fn report<R: serde::Serialize>(result: Result<R, String>, json: bool, save: Option<PathBuf>, table: fn(&R)) -> ExitCode {
    let report = match result {
        Ok(report) => report,
        Err(message) => {
            eprintln!("ghostline bench: {message}");
            return ExitCode::FAILURE;
        }
    };
    let text = serde_json::to_string_pretty(&report).expect("serializable report");
    if json {
        println!("{text}");
    } else {
        table(&report);
    }
    if let Some(path) = save {
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("ghostline bench: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    crate::fault::install_panic_hook();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match cli.command.unwrap_or(Command::Lsp) {
        Command::Lsp => {
            let shut_down = runtime.block_on(crate::lsp::serve_stdio());
            // tokio's stdin reader is a blocking thread that may sit in read() until the client
            // closes the pipe; dropping the runtime would wait for it, so `exit` would not exit.
            runtime.shutdown_background();
            // LSP: `exit` after `shutdown` exits with 0, without it with 1.
            if shut_down {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Complete { file, line, character, json, model, max_tokens, threads, settings, workspace } => {
            let mut options = match settings.as_deref().map(config::parse_file).transpose() {
                Ok(parsed) => parsed.map(|p| p.options).unwrap_or_default(),
                Err(message) => {
                    eprintln!("ghostline: {message}");
                    return ExitCode::FAILURE;
                }
            };
            options.model.path = model.or(options.model.path);
            options.model.threads = threads.or(options.model.threads);
            options.completion.max_tokens = max_tokens.or(options.completion.max_tokens);
            let mut config = options.resolve(config::env_model());
            crate::config::set_log_code(config.log_code);
            crate::model::discover::fill_in(&mut config.model);
            match runtime.block_on(complete(&file, line, character, &config, workspace.as_deref())) {
                Ok(out) => {
                    if json {
                        println!("{}", serde_json::to_string(&out).expect("serializable report"));
                    } else {
                        let t = &out.timings;
                        println!("{}", out.text);
                        eprintln!(
                            "prompt {} tokens ({} reused), TTFT {:.1} ms, decode {:.1} tok/s, total {:.1} ms",
                            t.prompt_tokens, t.reused_tokens, t.ttft_ms, t.decode_tokens_per_s, t.total_ms
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("ghostline: {message}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Eval { model, holes, seed, languages, sources, window_lines, cross_file, next_edit, modes, prompts, threads, json } => {
            let mut options = Options::default();
            options.model.path = model;
            options.model.threads = threads;
            let config = options.resolve(config::env_model());
            if next_edit {
                return match crate::eval::next_edit::run(&config, &sources, holes, seed, &modes, json) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(message) => {
                        eprintln!("ghostline eval: {message}");
                        ExitCode::FAILURE
                    }
                };
            }
            if cross_file {
                return match crate::eval::cross_file::run(&config, &sources, holes, seed, &modes, prompts.as_deref(), json) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(message) => {
                        eprintln!("ghostline eval: {message}");
                        ExitCode::FAILURE
                    }
                };
            }
            let languages = if languages.is_empty() { vec!["python".into(), "rust".into()] } else { languages };
            let eval = crate::eval::EvalOptions { holes_per_language: holes, seed, languages, sources, window_lines, modes, prompts };
            match crate::eval::run(&config, &eval, json) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("ghostline eval: {message}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Bench { index: Some(dir), .. } => match crate::bench::index::run(&dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("ghostline bench --index: {message}");
                ExitCode::FAILURE
            }
        },
        Command::Bench { batch_invariance: true, json, model, threads, save, prompt_file, tokens, flash_attention, gpu_layers, .. } => {
            let Some(model) = model.or_else(config::env_model) else {
                eprintln!("ghostline bench: no model: pass --model or set {}", config::MODEL_ENV);
                return ExitCode::FAILURE;
            };
            let flash_attention = match flash_attention.as_deref() {
                None => None,
                Some("on") => Some(true),
                Some("off") => Some(false),
                Some(other) => {
                    eprintln!("ghostline bench: --flash-attention takes `on` or `off`, not {other:?}");
                    return ExitCode::FAILURE;
                }
            };
            let threads = threads.unwrap_or_else(config::default_threads);
            let options = crate::bench::invariance::Options { model, prompt_file, tokens, threads, gpu_layers, flash_attention };
            let result = crate::bench::invariance::run(&options);
            let all_equal = result.as_ref().is_ok_and(crate::bench::invariance::all_equal);
            let reported = report(result, json, save, crate::bench::invariance::print_text);
            if all_equal { reported } else { ExitCode::FAILURE }
        }
        Command::Bench { warm_cold: true, traces, json, model, threads, prefill_chunk, save, .. } => {
            let Some(model) = model.or_else(config::env_model) else {
                eprintln!("ghostline bench: no model: pass --model or set {}", config::MODEL_ENV);
                return ExitCode::FAILURE;
            };
            let trace = traces.into_iter().next().or_else(|| crate::typing::find_fixture("fixtures/traces/inventory.json"));
            let Some(trace) = trace else {
                eprintln!("ghostline bench: no trace: pass --trace");
                return ExitCode::FAILURE;
            };
            let options = crate::bench::warm_cold::Options { trace, model, threads, prefill_chunk };
            let result = crate::bench::warm_cold::run(&options);
            let all_equal = result.as_ref().is_ok_and(|r| r.differ.is_empty());
            let reported = report(result, json, save, crate::bench::warm_cold::print_text);
            if all_equal { reported } else { ExitCode::FAILURE }
        }
        Command::Bench { soak: Some(completions), traces, json, model, threads, .. } => {
            match crate::bench::soak::run(crate::bench::soak::Options { traces, completions, model, threads }) {
                Ok(report) => {
                    if json {
                        println!("{}", serde_json::to_string_pretty(&report).expect("serializable report"));
                    } else {
                        crate::bench::soak::print_text(&report);
                    }
                    // A crash fails the command; the growth is a figure, stated as PASS/FAIL.
                    if report.crashes == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
                }
                Err(message) => {
                    eprintln!("ghostline bench: {message}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Bench { traces, peer, peer_bin, peer_args, runs, json, model, threads, svg, cold_sizes, save, no_ahead, no_debounce, no_cross_file, no_next_edit, fixed_threads, prefill_chunk, open_pause, remote, .. } => {
            let generate_ahead = !no_ahead;
            let options = crate::bench::Options {
                traces,
                peer,
                peer_bin,
                peer_args,
                runs,
                json,
                model,
                threads,
                svg,
                cold_sizes,
                generate_ahead,
                no_debounce,
                cross_file: !no_cross_file,
                next_edit: !no_next_edit,
                adaptive_threads: !fixed_threads,
                prefill_chunk,
                open_pause_ms: open_pause,
                remote,
            };
            if options.cold_sizes.is_empty() {
                report(crate::bench::run(options), json, save, crate::bench::print_text)
            } else {
                report(crate::bench::run_sizes(&options), json, save, crate::bench::sizes::print_text)
            }
        }
        Command::Doctor { settings, memory_budget_mb, context_size, json, recommend: true, .. } => {
            crate::pull::recommend::run(settings.as_deref(), memory_budget_mb, context_size, json)
        }
        Command::Stats { since, json, db } => crate::stats::report::run(&since, json, db),
        Command::Pull { model, file, revision, offline, settings, memory_budget_mb } => {
            let opts = crate::pull::PullOptions { target: model, file, revision, offline, memory_budget_mb };
            crate::pull::bar::run(&runtime, opts, settings.as_deref())
        }
        Command::Doctor { model, settings, memory_budget_mb, context_size, threads, no_load, json, .. } => {
            let opts = crate::doctor::DoctorOptions { model, settings, memory_budget_mb, context_size, threads, no_load };
            let report = crate::doctor::run(&opts);
            if json {
                println!("{}", serde_json::to_string_pretty(&report).expect("serializable report"));
            } else {
                report.print_text();
            }
            if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Models { memory_budget_mb, json } => {
            let (candidates, roots) = crate::doctor::models(memory_budget_mb);
            if json {
                println!("{}", serde_json::to_string_pretty(&json!({ "models": candidates })).expect("serializable list"));
            } else {
                crate::doctor::print_models(&candidates, &roots);
            }
            ExitCode::SUCCESS
        }
        #[cfg(unix)]
        Command::Host { spec } => crate::model::host::serve::main(&spec),
        #[cfg(not(unix))]
        Command::Host { .. } => {
            eprintln!("ghostline host: no shared host on this system");
            ExitCode::FAILURE
        }
        Command::Demo { model, script } => match crate::demo::run(model, script) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("ghostline demo: {message}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Logs go to stderr (stdout carries the protocol). `GHOSTLINE_LOG` takes a tracing filter.
///
/// The protocol layer traces every message it reads and writes (whole documents): those events
/// are dropped unless `debug.logCode` is on, whatever the filter says.
fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_env("GHOSTLINE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,ghostline=info"));
    let no_code = tracing_subscriber::filter::filter_fn(|meta| {
        !meta.target().starts_with("tower_lsp_server::codec") || crate::config::log_code()
    });
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false);
    tracing_subscriber::registry().with(fmt.with_filter(no_code).with_filter(filter)).init();
}

/// `ghostline complete --json`: the suggestion, the engine's timings (the same `Timings` as
/// `ghostline/lastTimings`, flattened) and the model that made it.
#[derive(serde::Serialize)]
struct CompleteReport {
    text: String,
    #[serde(flatten)]
    timings: crate::model::Timings,
    strategy: String,
    model: PathBuf,
    format: String,
    /// `model.threads`: the most a request gets (the timings' `threads` is what this one got).
    max_threads: u32,
    n_ctx: u32,
    /// The cross-file section offered to the prompt (before its budget), as text; empty
    /// without `--workspace` or when the workspace had nothing for this cursor.
    cross_file: String,
}

async fn complete(file: &PathBuf, line: u32, character: u32, config: &config::Config, workspace: Option<&Path>) -> Result<CompleteReport, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", file.display()))?;
    let rope = ropey::Rope::from_str(&text);
    let pos = tower_lsp_server::gen_lsp_types::Position { line, character };
    let cursor_char = encoding::to_char(&rope, pos, Encoding::Utf16).map_err(|e| e.to_string())?;
    let cursor = rope.char_to_byte(cursor_char);

    let model = ModelHandle::spawn(&config.model, Sampling::from(&config.completion));
    let info = match model.wait_loaded().await {
        ModelStatus::Ready(info) | ModelStatus::Unloaded(info) => info,
        ModelStatus::NotConfigured => {
            return Err(format!("no model: pass --model or set {}", config::MODEL_ENV));
        }
        ModelStatus::Failed(message) => return Err(message),
        ModelStatus::Loading { .. } => unreachable!("wait_loaded returns a final status"),
    };
    let engine = Engine::new(model, config.completion.clone());
    let spec = crate::syntax::by_path(&file.to_string_lossy());
    let tree = spec.map(|s| s.parse(&text));
    let cross_file = match workspace {
        Some(root) => {
            let root = root.canonicalize().map_err(|e| format!("cannot open the workspace {}: {e}", root.display()))?;
            let path = file.canonicalize().map_err(|e| e.to_string())?;
            let ws = crate::context::cross_file::Workspace::new(crate::workspace::IndexOptions {
                roots: vec![root],
                exclude: config.context.exclude.clone(),
                max_files: config.context.max_files,
                max_file_bytes: config.context.max_file_bytes,
                memory_cap_bytes: config.context.memory_bytes,
            });
            ws.index.build(&|_, _| {});
            ws.cross_file(&path, &text, cursor, spec.zip(tree.as_ref()), crate::prompt::budget::cross_file_bytes(config.completion.max_prompt_tokens))
        }
        None => None,
    };
    let input = Input { cross_file: cross_file.as_ref(), text: &text, cursor, syntax: spec.zip(tree.as_ref()) };
    let s = engine.complete(input, CancelFlag::new()).await.map_err(|e| e.to_string())?;
    Ok(CompleteReport {
        text: s.text,
        timings: s.timings,
        strategy: format!("{:?}", s.strategy).to_lowercase(),
        model: info.path.clone(),
        format: info.format.to_string(),
        max_threads: info.threads,
        n_ctx: info.n_ctx,
        cross_file: cross_file.as_ref().map(crate::prompt::cross_file::offered).unwrap_or_default(),
    })
}
