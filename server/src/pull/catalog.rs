//! The short names `ghostline pull` knows: the Qwen2.5-Coder base models in GGUF form that
//! llama.cpp's own FIM presets download (`llama-server --fim-qwen-1.5b-default` and the others,
//! `common/arg.cpp`: repositories `ggml-org/Qwen2.5-Coder-{N}B-Q8_0-GGUF`, files
//! `qwen2.5-coder-{n}b-q8_0.gguf`; the 0.5B is the presets' speculative draft model), with
//! their shapes (from each model's `config.json`) so that `doctor --recommend` can plan their
//! memory before anything is downloaded.

use crate::model::gguf::Shape;

/// A model `ghostline pull NAME` fetches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Known {
    /// The short name (`qwen2.5-coder-1.5b`).
    pub name: &'static str,
    pub repo: &'static str,
    pub file: &'static str,
    /// The llama.cpp preset that uses the same file.
    pub preset: &'static str,
    pub quant: &'static str,
    /// Parameters, billions (the model card's count).
    pub params_b: f64,
    /// The file's size in bytes, about (Q8_0 is 8.5 bits a weight): for planning only; the
    /// Hub's `X-Linked-Size` is what the download checks.
    pub approx_bytes: u64,
    layers: u32,
    embd: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    vocab: u32,
    trained_ctx: u32,
}

impl Known {
    /// The model's shape, as the GGUF header would give it.
    pub fn shape(&self) -> Shape {
        Shape {
            arch: "qwen2".into(),
            n_layer: self.layers,
            n_head: self.heads,
            n_head_kv: vec![self.kv_heads; self.layers as usize],
            n_embd: self.embd,
            head_dim_k: self.head_dim,
            head_dim_v: self.head_dim,
            n_ctx_train: self.trained_ctx,
            n_vocab: self.vocab,
        }
    }
}

const fn q8_0_bytes(params_millions: u64) -> u64 {
    // 34 bytes for every block of 32 weights.
    params_millions * 1_000_000 * 34 / 32
}

/// Smallest first.
pub const KNOWN: &[Known] = &[
    Known {
        name: "qwen2.5-coder-0.5b",
        repo: "ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF",
        file: "qwen2.5-coder-0.5b-q8_0.gguf",
        preset: "draft model of --fim-qwen-7b-spec",
        quant: "Q8_0",
        params_b: 0.49,
        approx_bytes: q8_0_bytes(494),
        layers: 24,
        embd: 896,
        heads: 14,
        kv_heads: 2,
        head_dim: 64,
        vocab: 151_936,
        trained_ctx: 32_768,
    },
    Known {
        name: "qwen2.5-coder-1.5b",
        repo: "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF",
        file: "qwen2.5-coder-1.5b-q8_0.gguf",
        preset: "--fim-qwen-1.5b-default",
        quant: "Q8_0",
        params_b: 1.54,
        approx_bytes: q8_0_bytes(1_544),
        layers: 28,
        embd: 1536,
        heads: 12,
        kv_heads: 2,
        head_dim: 128,
        vocab: 151_936,
        trained_ctx: 32_768,
    },
    Known {
        name: "qwen2.5-coder-3b",
        repo: "ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF",
        file: "qwen2.5-coder-3b-q8_0.gguf",
        preset: "--fim-qwen-3b-default",
        quant: "Q8_0",
        params_b: 3.09,
        approx_bytes: q8_0_bytes(3_086),
        layers: 36,
        embd: 2048,
        heads: 16,
        kv_heads: 2,
        head_dim: 128,
        vocab: 151_936,
        trained_ctx: 32_768,
    },
    Known {
        name: "qwen2.5-coder-7b",
        repo: "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF",
        file: "qwen2.5-coder-7b-q8_0.gguf",
        preset: "--fim-qwen-7b-default",
        quant: "Q8_0",
        params_b: 7.62,
        approx_bytes: q8_0_bytes(7_616),
        layers: 28,
        embd: 3584,
        heads: 28,
        kv_heads: 4,
        head_dim: 128,
        vocab: 152_064,
        trained_ctx: 32_768,
    },
];

/// The model a short name stands for (case-insensitive; `qwen2.5-coder-1.5b-q8_0` too).
pub fn lookup(name: &str) -> Option<&'static Known> {
    let n = name.trim().to_ascii_lowercase();
    let n = n.strip_suffix("-q8_0").unwrap_or(&n);
    KNOWN.iter().find(|k| k.name == n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_shapes() {
        let k = lookup("Qwen2.5-Coder-1.5B").unwrap();
        assert_eq!((k.repo, k.file), ("ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF", "qwen2.5-coder-1.5b-q8_0.gguf"));
        assert_eq!(lookup("qwen2.5-coder-3b-q8_0").unwrap().name, "qwen2.5-coder-3b");
        assert!(lookup("org/repo").is_none());
        // 2 × 28 layers × 2 KV heads × 128 × 2 bytes: 112 MiB for 4096 tokens.
        assert_eq!(crate::model::memory::kv_bytes_per_token(&k.shape()) * 4096, 112 << 20);
        // The Hub lists the 1.5B file at 1.65 GB.
        assert!((1_600_000_000..1_700_000_000).contains(&k.approx_bytes));
        assert!(KNOWN.windows(2).all(|w| w[0].approx_bytes < w[1].approx_bytes));
    }
}
