//! The memory budget: how many tokens of context fit beside the model's weights.
//!
//! llama.cpp allocates the whole KV cache when the context is created, so its size is chosen
//! up front. Per token it holds one key and one value vector per layer and KV head:
//!
//! ```text
//! KV bytes per token = Σ over layers of kv_heads × (key dim + value dim) × bytes per element
//!                    = 2 × layers × kv_heads × head_dim × 2      (f16 cache, equal dims)
//! ```
//!
//! SmolLM2-135M: 2 × 30 × 3 × 64 × 2 = 23,040 bytes per token, 90 MiB for 4096 tokens. The plan
//! is weights (the GGUF's tensor data) + KV cache + llama.cpp's compute buffers (an estimate,
//! see [`compute_bytes`]) ≤ budget, with the context never above the trained context or the
//! configured `contextSize`.

use serde::Serialize;

use super::gguf::Shape;

/// ghostline leaves llama.cpp's KV cache type at its default, f16.
pub const KV_TYPE: &str = "f16";
pub const KV_ELEMENT_BYTES: u64 = 2;
/// The smallest context worth running: a completion needs a prompt and room to generate.
pub const MIN_CONTEXT: u32 = 256;
const MIB: f64 = 1024.0 * 1024.0;

/// Key and value cache bytes for one token of context.
pub fn kv_bytes_per_token(shape: &Shape) -> u64 {
    shape.n_head_kv.iter().map(|&h| h as u64 * (shape.head_dim_k + shape.head_dim_v) as u64).sum::<u64>()
        * KV_ELEMENT_BYTES
}

/// llama.cpp's compute buffers for a context of `n_ctx` tokens decoded `n_ubatch` at a time.
///
/// Dominated by the logits of a micro-batch (n_ubatch × n_vocab f32) and its activations
/// (a few n_ubatch × n_embd f32 tensors), plus the f16 attention mask (n_ubatch × n_ctx), the
/// output buffer (one row of logits) and 2 MiB of slack. Calibrated against llama.cpp's own
/// "compute buffer size" for the test model at n_ubatch 512 — 102.1, 104.8, 106.8 and
/// 109.6 MiB at n_ctx 512, 2048, 4096 and 8192 — and at 128 (the CPU's micro-batch), 26.7 MiB
/// at n_ctx 4096; 4-10 % above it.
pub fn compute_bytes(shape: &Shape, n_ctx: u32, n_ubatch: u32) -> u64 {
    let (ub, ctx) = (n_ubatch as u64, n_ctx as u64);
    let per_row = 4 * (shape.n_vocab as u64 + 8 * shape.n_embd as u64);
    ub * per_row + 2 * ub * ctx + 4 * shape.n_vocab as u64 + 2 * 1024 * 1024
}

/// Where the budget came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetSource {
    /// `model.memoryBudgetMb`.
    Configured,
    /// Half of the physical memory.
    HalfOfPhysical { physical_bytes: u64 },
    /// Physical memory unknown: a fixed 4 GiB.
    Fallback,
}

/// What limited the context size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// `model.contextSize` (default 4096).
    ContextSize,
    /// The model's trained context.
    Trained,
    /// The memory budget.
    Budget,
}

/// The chosen context and the arithmetic behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub budget_bytes: u64,
    pub budget_source: BudgetSource,
    pub weights_bytes: u64,
    pub kv_type: &'static str,
    pub kv_bytes_per_token: u64,
    pub n_ctx: u32,
    pub n_ubatch: u32,
    pub kv_bytes: u64,
    pub compute_bytes: u64,
    pub total_bytes: u64,
    pub limited_by: Limit,
}

/// The budget in bytes: `memoryBudgetMb` when set, else half of the physical memory.
pub fn budget(configured_mb: Option<u64>) -> (u64, BudgetSource) {
    match configured_mb {
        Some(mb) => (mb.saturating_mul(1024 * 1024), BudgetSource::Configured),
        None => match system_memory() {
            Some(m) if m.total_bytes > 0 => {
                (m.total_bytes / 2, BudgetSource::HalfOfPhysical { physical_bytes: m.total_bytes })
            }
            _ => (4 << 30, BudgetSource::Fallback),
        },
    }
}

/// Chooses the context size: the largest that fits the budget, at most `context_size` and the
/// trained context, a multiple of 256 when the budget limits it. Fails when even
/// [`MIN_CONTEXT`] tokens do not fit, saying what would.
pub fn plan(
    shape: &Shape,
    weights_bytes: u64,
    (budget_bytes, budget_source): (u64, BudgetSource),
    context_size: u32,
    micro_batch: u32,
) -> Result<Plan, String> {
    let kv_per_token = kv_bytes_per_token(shape);
    let trained = shape.n_ctx_train.max(MIN_CONTEXT);
    let (cap, mut limited_by) =
        if context_size <= trained { (context_size, Limit::ContextSize) } else { (trained, Limit::Trained) };
    let cap = cap.max(MIN_CONTEXT);
    let n_ubatch = micro_batch.min(cap);
    let total = |n: u32| weights_bytes + kv_per_token * n as u64 + compute_bytes(shape, n, n_ubatch.min(n));
    let mut n_ctx = cap;
    if total(cap) > budget_bytes {
        limited_by = Limit::Budget;
        // total(n) is linear in n: solve, then step down to a multiple of 256 that fits.
        // (With the micro-batch held at n_ubatch; a context smaller than it only shrinks the
        // compute buffers, so this errs on the safe side.)
        let at = |n: u64| weights_bytes + kv_per_token * n + compute_bytes(shape, n as u32, n_ubatch);
        let fixed = at(0);
        let per_token = at(1) - fixed;
        let fit = budget_bytes.saturating_sub(fixed) / per_token.max(1);
        n_ctx = ((fit.min(cap as u64) as u32) / 256) * 256;
        while n_ctx >= MIN_CONTEXT && total(n_ctx) > budget_bytes {
            n_ctx -= 256;
        }
        if n_ctx < MIN_CONTEXT {
            let need = total(MIN_CONTEXT);
            return Err(format!(
                "the memory budget of {:.0} MiB{} cannot hold this model: weights {:.1} MiB + KV cache {:.1} MiB for {MIN_CONTEXT} tokens + compute buffers {:.1} MiB = {:.1} MiB. Raise model.memoryBudgetMb to at least {} or choose a smaller model",
                budget_bytes as f64 / MIB,
                match budget_source {
                    BudgetSource::Configured => " (model.memoryBudgetMb)".to_string(),
                    BudgetSource::HalfOfPhysical { physical_bytes } =>
                        format!(" (half of {:.1} GiB of physical memory)", physical_bytes as f64 / MIB / 1024.0),
                    BudgetSource::Fallback => " (default)".to_string(),
                },
                weights_bytes as f64 / MIB,
                (kv_per_token * MIN_CONTEXT as u64) as f64 / MIB,
                compute_bytes(shape, MIN_CONTEXT, n_ubatch.min(MIN_CONTEXT)) as f64 / MIB,
                need as f64 / MIB,
                need.div_ceil(1024 * 1024),
            ));
        }
    }
    let n_ubatch = n_ubatch.min(n_ctx);
    let kv_bytes = kv_per_token * n_ctx as u64;
    let compute = compute_bytes(shape, n_ctx, n_ubatch);
    Ok(Plan {
        budget_bytes,
        budget_source,
        weights_bytes,
        kv_type: KV_TYPE,
        kv_bytes_per_token: kv_per_token,
        n_ctx,
        n_ubatch,
        kv_bytes,
        compute_bytes: compute,
        total_bytes: weights_bytes + kv_bytes + compute,
        limited_by,
    })
}

impl Plan {
    /// The arithmetic in one line, for logs and `doctor`.
    pub fn describe(&self) -> String {
        let limit = match self.limited_by {
            Limit::ContextSize => "model.contextSize",
            Limit::Trained => "the model's trained context",
            Limit::Budget => "the memory budget",
        };
        let source = match &self.budget_source {
            BudgetSource::Configured => "model.memoryBudgetMb".to_string(),
            BudgetSource::HalfOfPhysical { physical_bytes } => {
                format!("half of {:.1} GiB physical memory", *physical_bytes as f64 / MIB / 1024.0)
            }
            BudgetSource::Fallback => "default, physical memory unknown".to_string(),
        };
        format!(
            "context {} tokens (limited by {limit}); weights {:.1} MiB + KV cache {} × {} B ({}) = {:.1} MiB + compute buffers ~{:.1} MiB = {:.1} MiB of a {:.0} MiB budget ({source})",
            self.n_ctx,
            self.weights_bytes as f64 / MIB,
            self.n_ctx,
            self.kv_bytes_per_token,
            self.kv_type,
            self.kv_bytes as f64 / MIB,
            self.compute_bytes as f64 / MIB,
            self.total_bytes as f64 / MIB,
            self.budget_bytes as f64 / MIB,
        )
    }
}

/// Physical and available memory of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SystemMemory {
    pub total_bytes: u64,
    pub available_bytes: u64,
}

/// `/proc/meminfo` on Linux; `sysctl hw.memsize` and `vm_stat` on macOS.
pub fn system_memory() -> Option<SystemMemory> {
    if cfg!(target_os = "macos") {
        let run = |cmd: &str, args: &[&str]| {
            std::process::Command::new(cmd)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let total: u64 = run("sysctl", &["-n", "hw.memsize"])?.trim().parse().ok()?;
        let available = run("vm_stat", &[]).and_then(|s| parse_vm_stat(&s)).unwrap_or(total);
        Some(SystemMemory { total_bytes: total, available_bytes: available })
    } else {
        parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }
}

fn parse_meminfo(text: &str) -> Option<SystemMemory> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    let total = field("MemTotal")?;
    let available = field("MemAvailable").or_else(|| field("MemFree")).unwrap_or(total);
    Some(SystemMemory { total_bytes: total, available_bytes: available })
}

/// Free + inactive + speculative + purgeable pages, the memory macOS hands out without swapping.
fn parse_vm_stat(text: &str) -> Option<u64> {
    let page: u64 = text.lines().next()?.split("page size of ").nth(1)?.split_whitespace().next()?.parse().ok()?;
    let pages = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches('.').parse::<u64>().ok())
            .unwrap_or(0)
    };
    let free = pages("Pages free:") + pages("Pages inactive:") + pages("Pages speculative:") + pages("Pages purgeable:");
    Some(free * page)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M's dimensions (the test model; the end-to-end tests read them from the GGUF).
    fn smollm2() -> Shape {
        Shape {
            arch: "llama".into(),
            n_layer: 30,
            n_head: 9,
            n_head_kv: vec![3; 30],
            n_embd: 576,
            head_dim_k: 64,
            head_dim_v: 64,
            n_ctx_train: 8192,
            n_vocab: 49152,
        }
    }

    #[test]
    fn kv_formula() {
        assert_eq!(kv_bytes_per_token(&smollm2()), 2 * 30 * 3 * 64 * 2);
        assert_eq!(kv_bytes_per_token(&smollm2()), 23_040);
        // Qwen2.5-Coder-1.5B: 28 layers, 2 KV heads of 128.
        let qwen = Shape { n_layer: 28, n_head: 12, n_head_kv: vec![2; 28], n_embd: 1536, head_dim_k: 128, head_dim_v: 128, ..smollm2() };
        assert_eq!(kv_bytes_per_token(&qwen), 28_672);
    }

    #[test]
    fn compute_estimate_covers_llama_cpp_report() {
        // llama.cpp's reports for the test model (n_ubatch 512, 256 at n_ctx 256, and the CPU's
        // 128 at n_ctx 4096).
        for (n_ctx, ub, reported) in [(256, 256, 50.95), (512, 512, 102.14), (4096, 512, 106.77), (8192, 512, 109.64), (4096, 128, 26.69)] {
            let c = compute_bytes(&smollm2(), n_ctx, ub) as f64 / MIB;
            assert!(c >= reported && c < reported * 1.15, "n_ctx {n_ctx}: estimate {c:.1} MiB vs {reported} MiB");
        }
    }

    #[test]
    fn plan_limits() {
        let weights = 92 * 1024 * 1024;
        let big = (64u64 << 30, BudgetSource::Configured);
        let p = plan(&smollm2(), weights, big.clone(), 4096, 512).unwrap();
        assert_eq!((p.n_ctx, p.limited_by), (4096, Limit::ContextSize));
        assert_eq!(p.kv_bytes, 4096 * 23_040);
        let p = plan(&smollm2(), weights, big, 100_000, 512).unwrap();
        assert_eq!((p.n_ctx, p.limited_by), (8192, Limit::Trained));
        // 300 MiB: weights 92 + compute ~110 leave ~98 MiB of KV → 4096 does not fit with
        // the bigger compute buffer; the plan steps down to a multiple of 256 that fits.
        let p = plan(&smollm2(), weights, (300 << 20, BudgetSource::Configured), 8192, 512).unwrap();
        assert_eq!(p.limited_by, Limit::Budget);
        assert_eq!(p.n_ctx % 256, 0);
        assert!(p.total_bytes <= 300 << 20);
        let next = plan(&smollm2(), weights, (64 << 30, BudgetSource::Configured), p.n_ctx + 256, 512).unwrap();
        assert!(next.total_bytes > 300 << 20, "{} + 256 would fit too", p.n_ctx);
        let e = plan(&smollm2(), weights, (100 << 20, BudgetSource::Configured), 4096, 512).unwrap_err();
        assert!(e.contains("cannot hold this model") && e.contains("memoryBudgetMb"), "{e}");
    }

    #[test]
    fn meminfo_and_vm_stat() {
        let m = parse_meminfo("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   12000000 kB\n").unwrap();
        assert_eq!((m.total_bytes, m.available_bytes), (24_000_000 * 1024, 12_000_000 * 1024));
        let v = "Mach Virtual Memory Statistics: (page size of 16384 bytes)\nPages free:          1000.\nPages active:   5.\nPages inactive:   200.\nPages speculative: 10.\n";
        assert_eq!(parse_vm_stat(v), Some(1210 * 16384));
    }
}
