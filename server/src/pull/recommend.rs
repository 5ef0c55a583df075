//! `ghostline doctor --recommend`: which FIM coder model and quantisation to pull for this
//! machine, and why, from the same memory formula the loader uses ([`memory::plan`]: weights +
//! KV cache for the configured context + compute buffers within `model.memoryBudgetMb`).
//!
//! The backend sets the largest model worth suggesting: on the CPU a 3B model decodes too
//! slowly for a suggestion to arrive between keystrokes (llama.vscode's CPU-only settings use
//! the 1.5B and 0.5B), so the CPU stops at 1.5B; with a GPU backend (Metal, CUDA, Vulkan) the
//! pick goes up to the 7B that llama.vscode recommends for 16 GB of GPU memory. Of the models
//! allowed, the largest whose plan keeps the full configured context wins; when none does, the
//! smallest that fits at all, with the context the budget leaves.

use serde::Serialize;

use super::catalog::{Known, KNOWN};
use crate::model::memory::{self, BudgetSource, Limit, Plan};

/// The largest model worth running without a GPU, in billions of parameters.
const CPU_MAX_PARAMS_B: f64 = 2.0;
const MIB: f64 = 1024.0 * 1024.0;

/// The pick and the reasons.
#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    /// The short name to pull (`None`: nothing fits the budget).
    pub name: Option<&'static str>,
    pub repo: Option<&'static str>,
    pub file: Option<&'static str>,
    pub quant: Option<&'static str>,
    pub plan: Option<Plan>,
    pub backend: String,
    pub budget_bytes: u64,
    /// The reasons, one line each: the pick's arithmetic, then why not the next larger one.
    pub why: Vec<String>,
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / MIB)
}

fn plan_of(k: &Known, budget: &(u64, BudgetSource), context_size: u32, batch_size: u32) -> Result<Plan, String> {
    memory::plan(&k.shape(), k.approx_bytes, budget.clone(), context_size, batch_size)
}

fn arithmetic(k: &Known, p: &Plan) -> String {
    format!(
        "{} {}: {} weights + {} KV for {} tokens + {} compute buffers = {} of the {} budget",
        k.name,
        k.quant,
        gb(p.weights_bytes),
        mib(p.kv_bytes),
        p.n_ctx,
        mib(p.compute_bytes),
        mib(p.total_bytes),
        mib(p.budget_bytes)
    )
}

/// Picks the model for a budget, a context size, a micro-batch (`backend::micro_batch`) and a GPU
/// backend (`None`: CPU).
pub fn recommend(budget: (u64, BudgetSource), context_size: u32, batch_size: u32, gpu: Option<&str>) -> Recommendation {
    let allowed: Vec<&Known> = KNOWN.iter().filter(|k| gpu.is_some() || k.params_b <= CPU_MAX_PARAMS_B).collect();
    let plans: Vec<(&Known, Result<Plan, String>)> =
        allowed.iter().map(|k| (*k, plan_of(k, &budget, context_size, batch_size))).collect();
    // Largest with the whole context; else smallest that fits at all.
    let full = plans.iter().rev().find(|(_, p)| p.as_ref().is_ok_and(|p| p.limited_by != Limit::Budget));
    let pick = full.or_else(|| plans.iter().find(|(_, p)| p.is_ok()));
    let backend = gpu.unwrap_or("CPU").to_owned();
    let mut r = Recommendation {
        name: None,
        repo: None,
        file: None,
        quant: None,
        plan: None,
        backend: backend.clone(),
        budget_bytes: budget.0,
        why: Vec::new(),
    };
    r.why.push(format!("memory budget {} ({}); backend {backend}", mib(budget.0), super::describe_budget(&budget.1)));
    let Some((k, Ok(plan))) = pick else {
        let smallest = &KNOWN[0];
        let need = memory::plan(&smallest.shape(), smallest.approx_bytes, (u64::MAX, BudgetSource::Configured), memory::MIN_CONTEXT, batch_size)
            .map(|p| p.total_bytes)
            .unwrap_or(smallest.approx_bytes);
        r.why.push(format!(
            "no FIM coder model fits: even {} needs {} with a {}-token context; raise model.memoryBudgetMb",
            smallest.name,
            mib(need),
            memory::MIN_CONTEXT
        ));
        return r;
    };
    r.name = Some(k.name);
    r.repo = Some(k.repo);
    r.file = Some(k.file);
    r.quant = Some(k.quant);
    let mut line = arithmetic(k, plan);
    match plan.limited_by {
        Limit::Budget => line.push_str(&format!(" (the budget cuts the context from {context_size} to {} tokens)", plan.n_ctx)),
        Limit::Trained => line.push_str(&format!(
            " (the context asked for, {context_size} tokens, is capped to the {} tokens the model was trained on)",
            plan.n_ctx
        )),
        Limit::ContextSize => {}
    }
    r.why.push(line);
    r.why.push(format!("the same file as llama.cpp's {} preset", k.preset));
    // Why not the next larger one.
    if let Some(next) = KNOWN.iter().find(|n| n.params_b > k.params_b) {
        let why_not = if gpu.is_none() && next.params_b > CPU_MAX_PARAMS_B {
            format!(
                "{} is held back on the CPU: it decodes too slowly for a suggestion between keystrokes (a GPU backend — Metal, CUDA, Vulkan — allows it)",
                next.name
            )
        } else {
            match plan_of(next, &budget, context_size, batch_size) {
                Ok(p) if p.limited_by == Limit::Budget => format!(
                    "{} would leave room for only {} tokens of context ({} weights)",
                    next.name,
                    p.n_ctx,
                    gb(next.approx_bytes)
                ),
                Ok(p) => format!("{} would fit too ({}), but this pick keeps the whole context with less memory", next.name, mib(p.total_bytes)),
                Err(_) => {
                    let need = plan_of(next, &(u64::MAX, BudgetSource::Configured), context_size, batch_size).map(|p| p.total_bytes).unwrap_or(0);
                    format!(
                        "{} would need {} ({} weights), {} over the budget",
                        next.name,
                        mib(need),
                        gb(next.approx_bytes),
                        mib(need.saturating_sub(budget.0))
                    )
                }
            }
        };
        r.why.push(why_not);
    }
    r.plan = Some(plan.clone());
    r
}

/// Prints a recommendation: the pick, the reasons, and the command to pull it.
pub fn print_text(r: &Recommendation) {
    match (r.name, r.repo, r.file) {
        (Some(name), Some(repo), Some(file)) => {
            println!("recommended: {name} ({repo}, {file})");
            for w in &r.why {
                println!("  {w}");
            }
            println!("pull it with: ghostline pull {name}");
        }
        _ => {
            println!("recommended: none");
            for w in &r.why {
                println!("  {w}");
            }
        }
    }
}

/// A context size below [`memory::MIN_CONTEXT`] is refused, not quietly replaced by the
/// default (which the settings' resolution would do).
fn check_context_size(flag: Option<u32>, setting: Option<u32>) -> Result<(), String> {
    let (n, source) = match (flag, setting) {
        (Some(n), _) => (n, "--context-size"),
        (None, Some(n)) => (n, "model.contextSize in --settings"),
        (None, None) => return Ok(()),
    };
    if n < memory::MIN_CONTEXT {
        return Err(format!(
            "{source} {n} is below the smallest context ghostline runs with ({} tokens); give at least {}, or leave it out for the default (4096)",
            memory::MIN_CONTEXT,
            memory::MIN_CONTEXT
        ));
    }
    Ok(())
}

/// `ghostline doctor --recommend`: the budget and context from the settings file and the
/// overrides, the backend this build runs on.
pub fn run(settings: Option<&std::path::Path>, memory_budget_mb: Option<u64>, context_size: Option<u32>, json: bool) -> std::process::ExitCode {
    let mut options = crate::config::Options::default();
    if let Some(file) = settings {
        match crate::config::parse_file(file) {
            Ok(p) => options = p.options,
            Err(e) => {
                eprintln!("ghostline doctor: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    options.model.memory_budget_mb = memory_budget_mb.or(options.model.memory_budget_mb);
    if let Err(e) = check_context_size(context_size, options.model.context_size) {
        eprintln!("ghostline doctor: {e}");
        return std::process::ExitCode::FAILURE;
    }
    options.model.context_size = context_size.or(options.model.context_size);
    let model = options.resolve(None).model;
    let gpu = crate::model::backend::gpu_backend();
    let n_ubatch = crate::model::backend::micro_batch_of(&model);
    let r = recommend(memory::budget(model.memory_budget_mb), model.context_size, n_ubatch, gpu);
    if json {
        println!("{}", serde_json::to_string_pretty(&r).expect("serializable recommendation"));
    } else {
        print_text(&r);
    }
    if r.name.is_some() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(mb: u64, gpu: Option<&str>) -> Recommendation {
        recommend((mb << 20, BudgetSource::Configured), 4096, 512, gpu)
    }

    #[test]
    fn the_pick_grows_with_memory_and_the_backend() {
        assert_eq!(pick(1024, None).name, Some("qwen2.5-coder-0.5b"));
        assert_eq!(pick(4096, None).name, Some("qwen2.5-coder-1.5b"));
        // The CPU stops at 1.5B however much memory there is, and says why.
        let r = pick(64 << 10, None);
        assert_eq!(r.name, Some("qwen2.5-coder-1.5b"));
        assert!(r.why.iter().any(|w| w.contains("qwen2.5-coder-3b is held back on the CPU")), "{:?}", r.why);
        // A GPU backend allows more.
        assert_eq!(pick(4096, Some("CUDA")).name, Some("qwen2.5-coder-3b"));
        assert_eq!(pick(16 << 10, Some("Metal")).name, Some("qwen2.5-coder-7b"));
        assert_eq!(pick(64 << 10, Some("CUDA")).name, Some("qwen2.5-coder-7b"));
    }

    #[test]
    fn the_reasons_carry_the_arithmetic() {
        let r = pick(4096, None);
        let why = r.why.join("\n");
        assert!(why.contains("qwen2.5-coder-1.5b Q8_0: 1.6 GB weights + 112 MiB KV for 4096 tokens"), "{why}");
        let plan = r.plan.unwrap();
        assert!(plan.total_bytes <= 4096 << 20 && plan.n_ctx == 4096);
        // At 3 GiB on a GPU the 3B does not fit: the 1.5B is picked and the 3B's need named.
        let r = pick(3072, Some("CUDA"));
        assert_eq!(r.name, Some("qwen2.5-coder-1.5b"));
        assert!(r.why.iter().any(|w| w.starts_with("qwen2.5-coder-3b would") && w.contains("MiB")), "{:?}", r.why);
    }

    #[test]
    fn a_context_over_the_trained_one_is_capped_and_said_and_one_too_small_is_refused() {
        let r = recommend((4096 << 20, BudgetSource::Configured), 100_000, 512, None);
        assert_eq!(r.plan.as_ref().map(|p| p.n_ctx), Some(32_768));
        assert!(r.why[1].contains("100000 tokens, is capped to the 32768 tokens the model was trained on"), "{:?}", r.why);
        assert!(!pick(4096, None).why[1].contains("capped"));
        let e = check_context_size(Some(0), Some(8192)).unwrap_err();
        assert!(e.starts_with("--context-size 0 is below") && e.contains("256"), "{e}");
        assert!(check_context_size(None, Some(100)).unwrap_err().starts_with("model.contextSize in --settings 100"));
        assert!(check_context_size(Some(256), None).is_ok() && check_context_size(None, None).is_ok());
    }

    #[test]
    fn too_little_memory_recommends_nothing_and_says_how_much() {
        let r = pick(200, None);
        assert_eq!(r.name, None);
        assert!(r.why.iter().any(|w| w.contains("no FIM coder model fits") && w.contains("memoryBudgetMb")), "{:?}", r.why);
        // Just enough for the 0.5B at a shorter context: it is picked, and the cut is said.
        let r = pick(850, None);
        assert_eq!(r.name, Some("qwen2.5-coder-0.5b"));
        assert!(r.why[1].contains("the budget cuts the context"), "{:?}", r.why);
    }
}
