//! `ghostline pull` on the command line: a progress bar with rate and ETA on a terminal (plain
//! lines otherwise), then where the model is and what it will take in memory.

use std::path::Path;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Progress, PullOptions, Pulled};
use crate::config;
use crate::model::gguf::Gguf;
use crate::model::memory;

/// indicatif's bar on stderr; hidden when stderr is not a terminal (a start and an end line
/// are printed instead).
struct Bar(ProgressBar);

impl Progress for Bar {
    fn start(&self, file: &str, total: u64, from: u64) {
        self.0.set_length(total);
        self.0.set_position(from);
        self.0.reset_eta();
        self.0.set_message(file.to_owned());
        if self.0.is_hidden() {
            let resumed = if from > 0 { format!(", resuming at {} MiB", from >> 20) } else { String::new() };
            eprintln!("downloading {file}: {} MiB{resumed}", total >> 20);
        }
    }
    fn set(&self, done: u64) {
        self.0.set_position(done);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// Runs `ghostline pull` and prints its outcome: the path on stdout, the rest on stderr.
pub fn run(runtime: &tokio::runtime::Runtime, mut opts: PullOptions, settings: Option<&Path>) -> ExitCode {
    let fail = |m: String| {
        eprintln!("ghostline pull: {m}");
        ExitCode::FAILURE
    };
    let mut context_size = None;
    if let Some(file) = settings {
        match config::parse_file(file) {
            Ok(p) => {
                let c = p.options.resolve(None);
                opts.offline |= c.offline;
                opts.memory_budget_mb = opts.memory_budget_mb.or(c.model.memory_budget_mb);
                context_size = p.options.model.context_size;
            }
            Err(e) => return fail(e),
        }
    }
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let pulled = match runtime.block_on(super::pull(&opts, &Bar(bar))) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    report(&pulled, &opts, context_size.unwrap_or(4096));
    println!("{}", pulled.path.display());
    ExitCode::SUCCESS
}

fn report(p: &Pulled, opts: &PullOptions, context_size: u32) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let how = if p.fetched == 0 {
        "already in the cache".to_string()
    } else if p.replaced_damaged {
        format!("the cached copy was damaged (its sha256 did not match): deleted and downloaded again, {:.1} MiB", mib(p.fetched))
    } else if p.resumed_from > 0 {
        format!("downloaded {:.1} MiB, resumed after {:.1} MiB", mib(p.fetched), mib(p.resumed_from))
    } else {
        format!("downloaded {:.1} MiB", mib(p.fetched))
    };
    eprintln!("{}/{} @ {}: {how}; sha256 {} checked", p.repo, p.file, &p.commit[..p.commit.len().min(12)], p.sha256);
    match Gguf::open(&p.path) {
        Err(e) => eprintln!("warning: {} is not a usable GGUF model: {e}", p.path.display()),
        Ok(g) => {
            let format = g.fim_format();
            let plan = g.shape().and_then(|s| memory::plan(&s, g.weights_bytes(), memory::budget(opts.memory_budget_mb), context_size, crate::model::backend::micro_batch(512, crate::model::backend::gpu_layers(None))));
            match plan {
                Ok(plan) => eprintln!("{}; {}", format, plan.describe()),
                Err(e) => eprintln!("{format}; warning: {e}"),
            }
        }
    }
    eprintln!(
        "ghostline uses it when no model.path is set and it ranks first in `ghostline models`; or set model.path (or {}) to the path below",
        config::MODEL_ENV
    );
}
