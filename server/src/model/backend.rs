//! Which llama.cpp backend this build carries: Metal (on by default on macOS), CUDA or Vulkan
//! (cargo features `cuda`, `vulkan`), else the CPU; and how many layers go to the GPU by default.
//! A `dynamic-link` build runs on whatever llama.cpp libraries sit beside it, so it asks them.

use std::sync::OnceLock;

use llama_cpp_2::LlamaBackendDeviceType;
use serde::Serialize;

/// The GPU backend compiled in, if any (for a `dynamic-link` build: the first GPU the loaded
/// llama.cpp libraries registered).
pub fn gpu_backend() -> Option<&'static str> {
    if cfg!(feature = "cuda") {
        Some("CUDA")
    } else if cfg!(feature = "vulkan") {
        Some("Vulkan")
    } else if cfg!(target_os = "macos") {
        Some("Metal")
    } else if cfg!(feature = "dynamic-link") {
        runtime_gpu()
    } else {
        None
    }
}

/// The backend of the first GPU the loaded libraries registered, found without asking any
/// device its memory: that question ([`devices`]) opens a CUDA context, ~0.5 GiB of the GPU's
/// memory for as long as the process lives, and an editor window that sends its jobs to the
/// shared host asks this too (measured on an H100: 518 MiB a window).
fn runtime_gpu() -> Option<&'static str> {
    static GPU: OnceLock<Option<String>> = OnceLock::new();
    GPU.get_or_init(|| {
        super::llama::init_backend().ok()?;
        (0..unsafe { llama_cpp_sys_2::ggml_backend_dev_count() }).find_map(|i| {
            // SAFETY: indices below the count name registered devices, which live as long as the
            // process; a device's type and its registry's name are plain reads (no device work).
            unsafe {
                let dev = llama_cpp_sys_2::ggml_backend_dev_get(i);
                let kind = llama_cpp_sys_2::ggml_backend_dev_type(dev);
                if kind != llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_GPU && kind != llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_IGPU {
                    return None;
                }
                let name = llama_cpp_sys_2::ggml_backend_reg_name(llama_cpp_sys_2::ggml_backend_dev_backend_reg(dev));
                (!name.is_null()).then(|| std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned())
            }
        })
    })
    .as_deref()
}

/// The backend's name as reported at start-up and by `doctor`.
pub fn name() -> &'static str {
    gpu_backend().unwrap_or("CPU")
}

/// `model.gpuLayers` when set; else every layer when a GPU backend is built in, none otherwise.
/// (llama.cpp caps the count at the model's layers + 1, the output layer.)
pub fn gpu_layers(configured: Option<u32>) -> u32 {
    configured.unwrap_or(if gpu_backend().is_some() { i32::MAX as u32 } else { 0 })
}

/// Prompt tokens a context decodes at once on the CPU (`n_ubatch`, and the model thread's
/// prompt batches). A cancelled job holds the model thread until its batch is done: 512 tokens
/// took 1.7-2.7 s on two cores (a key that moved the prompt's head, then six more keys
/// waiting), 128 take 0.3-0.5 s. Prefill is as fast (`llama-bench`, SmolLM2 Q4_1, 2 threads,
/// 512 tokens: 290 tokens/s in ubatches of 128 or 256, 275 in one of 512). And llama.cpp sizes
/// a context's compute buffers for its micro-batch, mostly its logits (n_ubatch × n_vocab f32:
/// 96 MiB at 512 for a 49k vocabulary, 24 MiB at 128).
pub const CPU_MICRO_BATCH: u32 = 128;

/// A context's micro-batch (`n_ubatch`) for `model.batchSize`: all of it where layers are on a
/// GPU, at most [`CPU_MICRO_BATCH`] on the CPU. On the batch-invariant kernels a position's
/// result does not depend on it.
pub fn micro_batch(batch_size: u32, gpu_layers: u32) -> u32 {
    if gpu_layers > 0 {
        batch_size
    } else {
        batch_size.min(CPU_MICRO_BATCH)
    }
}

/// [`micro_batch`] for a model's settings (`model.batchSize`, `model.gpuLayers`): what the memory
/// plans size compute buffers for.
pub fn micro_batch_of(config: &crate::config::ModelConfig) -> u32 {
    micro_batch(config.batch_size, gpu_layers(config.gpu_layers))
}

/// Whether a prompt position's result is the same whatever batch it is decoded in, on this
/// build and with these layers — measured by `ghostline bench --batch-invariance`, explained in
/// the README's "Determinism" section. On the CPU it is, with these kernels: every matrix
/// product through ggml's `vec_dot` (one dot product per output element, the same for one
/// token or 512) or, for F16 and F32 products (attention), llamafile's tinyBLAS with one column
/// computed in its order where the build wraps it (`model::sgemm`, x86-64 Linux); flash
/// attention only where the build replaces llama.cpp's kernel (`model::flash`: its tiled path
/// for batches and its split-KV path for one token reduce in other orders, so elsewhere
/// [`Worker`](super::llama) turns it off), no tiled K-quant matrix product
/// (`GGML_CPU_TILED_MM=0`, [`pin_kernels`]). Build options that break it: llamafile's
/// `sgemm` where nothing wraps it (batches only), the repacked weights' GEMM/GEMV (`REPACK`, off
/// in `.cargo/config.toml`). On a GPU it is only where the libraries carry ghostline's patch
/// (`server/cuda/batch-invariant.patch`, built in by the `cuda` feature and the device route:
/// CUDA reports `BATCH_INVARIANT` once
/// [`pin_kernels`] asked for it): stock CUDA picks MMVQ for ≤ 8 columns, MMQ or cuBLAS above,
/// and its attention kernel by query count, so there completions keep the aligned prefill. With
/// every layer on the GPU (the default) the CPU's kernels play no part.
pub fn batch_invariance(gpu_layers: u32) -> Result<(), String> {
    if let Some((gpu, all)) = gpu_holding(gpu_layers) {
        if !gpu_invariant(gpu) {
            return Err(format!("layers on the GPU ({gpu}): its matrix kernels are chosen by batch size"));
        }
        if all {
            return Ok(());
        }
    }
    let cpu = cpu_kernels();
    let variant: Vec<&str> = cpu
        .split(' ')
        .filter(|k| match *k {
            // One column goes through llamafile's kernel too where the build wraps it (`model::sgemm`).
            "LLAMAFILE" => !cfg!(ghostline_sgemm_one_column),
            k => matches!(k, "REPACK" | "AMX_INT8" | "KLEIDIAI" | "MATMUL_INT8"),
        })
        .collect();
    if variant.is_empty() {
        Ok(())
    } else {
        Err(format!("llama.cpp was built with batch-only CPU kernels ({})", variant.join(", ")))
    }
}

/// Whether flash attention is batch-invariant with these layers: on the CPU where the build
/// replaces llama.cpp's kernel with one order of arithmetic per query (`model::flash`, x86-64
/// Linux with AVX2, FMA and F16C), once the backend has started; on a GPU where its kernels are
/// ([`gpu_invariant`]: the patched CUDA runs every query through the vector kernel) — and, with
/// some layers left on the CPU, the CPU's too.
pub fn flash_attention_invariant(gpu_layers: u32) -> bool {
    match gpu_holding(gpu_layers) {
        Some((gpu, all)) => gpu_invariant(gpu) && (all || cpu_flash_invariant()),
        None => cpu_flash_invariant(),
    }
}

/// The GPU backend that holds layers, if any, and whether it holds them all (every layer, the
/// default: the CPU's kernels then play no part).
fn gpu_holding(gpu_layers: u32) -> Option<(&'static str, bool)> {
    gpu_backend().filter(|_| gpu_layers > 0).map(|gpu| (gpu, gpu_layers >= i32::MAX as u32))
}

fn cpu_flash_invariant() -> bool {
    #[cfg(ghostline_sgemm_one_column)]
    return super::flash::invariant();
    #[cfg(not(ghostline_sgemm_one_column))]
    false
}

/// Whether the GPU backend `gpu` runs batch-invariant kernels: CUDA libraries built with
/// `server/cuda/batch-invariant.patch` report `BATCH_INVARIANT` among their features while
/// `GGML_CUDA_BATCH_INVARIANT` is on (see [`pin_kernels`]).
pub fn gpu_invariant(gpu: &str) -> bool {
    static INFO: OnceLock<String> = OnceLock::new();
    let info = INFO.get_or_init(|| kernels(&system_info()));
    reports(info, gpu, "BATCH_INVARIANT")
}

/// Whether [`kernels`]' answer has `feature` on in `backend`'s group.
fn reports(kernels: &str, backend: &str, feature: &str) -> bool {
    kernels
        .split("; ")
        .filter_map(|g| g.split_once(": "))
        .any(|(b, on)| b == backend && on.split(' ').any(|f| f == feature))
}

/// What [`pin_kernels`] sets where the environment does not say: the CPU's tiled K-quant matrix
/// product off (`GGML_CPU_TILED_MM`, chosen by batch size at run time) and the patched CUDA's
/// batch-invariant kernels on (`GGML_CUDA_BATCH_INVARIANT`; stock libraries ignore it).
const PINNED: [(&str, &str); 2] = [("GGML_CPU_TILED_MM", "0"), ("GGML_CUDA_BATCH_INVARIANT", "1")];

/// Asks llama.cpp for the kernels that keep a position's result independent of its batch
/// ([`PINNED`]), unless the environment already says: read once by llama.cpp (at its first matrix
/// product, at the CUDA backend's start), so this runs before the backend starts.
pub fn pin_kernels() {
    let mut set = Vec::new();
    for (name, value) in PINNED {
        if std::env::var_os(name).is_none() {
            // Called once, from the backend's initialisation, before llama.cpp runs anything.
            std::env::set_var(name, value);
            set.push(name);
        }
    }
    let _ = PINNED_HERE.set(set);
}

static PINNED_HERE: OnceLock<Vec<&'static str>> = OnceLock::new();

/// The variables [`pin_kernels`] set in this process (not those the user set): a llama-server
/// the benchmark starts as its peer must run llama.cpp's own kernels, so they are taken out of
/// its environment.
pub fn pinned_here() -> &'static [&'static str] {
    PINNED_HERE.get().map_or(&[], Vec::as_slice)
}

/// `model.prefillChunk` when not set: 0 (off: a keystroke decodes only what changed, in one
/// batch, and a cold prompt goes in batches of up to `n_batch`) where [`batch_invariance`] holds;
/// elsewhere the aligned prefill's batch, chosen per backend from the measurements in the
/// README's "Determinism" section. On a GPU each batch costs a launch time whatever its size:
/// 8 keeps cold prompts as fast as 32 (60 ms at 224 tokens) and re-decodes fewer tokens per
/// key (17 ms from the key instead of 21). On a CPU without invariant kernels, 32.
pub fn default_prefill_chunk(gpu_layers: u32) -> u32 {
    match batch_invariance(gpu_layers) {
        Ok(()) => 0,
        Err(_) if gpu_layers > 0 => PREFILL_CHUNK_GPU,
        Err(_) => PREFILL_CHUNK_CPU,
    }
}

/// [`default_prefill_chunk`] on a CPU whose kernels are not batch-invariant.
pub const PREFILL_CHUNK_CPU: u32 = 32;
/// [`default_prefill_chunk`] with layers on a GPU.
pub const PREFILL_CHUNK_GPU: u32 = 8;

/// Human form of a layer count: "all", "none" or the number.
pub fn describe_layers(n: u32) -> String {
    match n {
        0 => "none".into(),
        n if n >= i32::MAX as u32 => "all".into(),
        n => n.to_string(),
    }
}

/// A compute device llama.cpp sees.
#[derive(Debug, Clone, Serialize)]
pub struct Device {
    pub name: String,
    pub description: String,
    pub backend: String,
    pub memory_total: u64,
    pub memory_free: u64,
    /// A discrete or integrated GPU (layers can be offloaded to it).
    #[serde(skip)]
    pub gpu: bool,
}

/// The devices llama.cpp's backends registered, with their memory (initialises llama.cpp's
/// backend; on CUDA, asking a device its memory opens a context there: see [`runtime_gpu`]).
pub fn devices() -> Vec<Device> {
    if super::llama::init_backend().is_err() {
        return Vec::new();
    }
    llama_cpp_2::list_llama_ggml_backend_devices()
        .into_iter()
        .map(|d| Device {
            name: d.name,
            description: d.description,
            backend: d.backend,
            memory_total: d.memory_total as u64,
            memory_free: d.memory_free as u64,
            gpu: matches!(d.device_type, LlamaBackendDeviceType::Gpu | LlamaBackendDeviceType::IntegratedGpu),
        })
        .collect()
}

/// llama.cpp's system info: each registered backend and its features as compiled and detected
/// (`CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | …`); empty when llama.cpp cannot start.
pub fn system_info() -> String {
    if super::llama::init_backend().is_err() {
        return String::new();
    }
    raw_system_info()
}

/// [`cpu_kernels`] for the backend's own initialisation, once llama.cpp's backend is up.
#[cfg_attr(not(ghostline_sgemm_one_column), allow(dead_code))]
pub(super) fn cpu_kernels_of_this_build() -> String {
    cpu_of(&kernels(&raw_system_info())).to_owned()
}

fn raw_system_info() -> String {
    // SAFETY: llama.cpp returns a NUL-terminated string it owns (a static buffer), valid until
    // the next call; it is copied at once.
    unsafe { std::ffi::CStr::from_ptr(llama_cpp_sys_2::llama_print_system_info()) }.to_string_lossy().into_owned()
}

/// The CPU kernels llama.cpp was built with and runs (the features its CPU backend reports as
/// on, e.g. "SSE3 SSSE3 AVX AVX2 F16C FMA BMI2"): ghostline's own build uses AVX2-level
/// kernels on x86-64 (`GGML_NATIVE=OFF`), and the bench's peer is built with the same.
pub fn cpu_kernels() -> String {
    cpu_of(&kernels(&system_info())).to_owned()
}

/// The CPU group of [`kernels`]' answer.
fn cpu_of(kernels: &str) -> &str {
    kernels.split("; ").find_map(|g| g.strip_prefix("CPU: ")).unwrap_or("")
}

/// The kernels named in llama.cpp's system info (`CPU : SSE3 = 1 | AVX = 1 | AVX2 = 0 | …`, as
/// `llama_print_system_info` returns it and llama-server logs it after `system_info:`): per
/// backend, the features that are on (`CPU: SSE3 AVX`), and those with a value other than 0/1 as
/// `NAME=VALUE`. Empty when the text names none.
pub fn kernels(system_info: &str) -> String {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for part in system_info.split('|') {
        let part = part.trim();
        let feature = match part.split_once(" : ") {
            Some((backend, feature)) => {
                let backend = backend.rsplit(' ').next().unwrap_or(backend);
                groups.push((backend.to_owned(), Vec::new()));
                feature
            }
            None => part,
        };
        let (Some(group), Some((name, value))) = (groups.last_mut(), feature.split_once(" = ")) else { continue };
        match value.trim() {
            "0" => {}
            "1" => group.1.push(name.trim().to_owned()),
            other => group.1.push(format!("{}={other}", name.trim())),
        }
    }
    groups.iter().map(|(backend, on)| format!("{backend}: {}", on.join(" "))).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_kernels_from_system_info() {
        let info = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 0 | LLAMAFILE = 1 | ";
        assert_eq!(cpu_of(&kernels(info)), "SSE3 SSSE3 AVX AVX2 F16C FMA BMI2 LLAMAFILE");
        assert_eq!(cpu_of(&kernels("CUDA : ARCHS = 900 | USE_GRAPHS = 1 | CPU : AVX = 1 | AVX2 = 0 | ")), "AVX");
        assert_eq!(cpu_of(&kernels("nothing")), "");
    }

    #[test]
    fn a_patched_cuda_says_its_kernels_are_batch_invariant() {
        let patched = kernels("CUDA : ARCHS = 900 | USE_GRAPHS = 1 | BATCH_INVARIANT = 1 | CPU : AVX = 1 | ");
        assert!(reports(&patched, "CUDA", "BATCH_INVARIANT"));
        assert!(!reports(&patched, "CPU", "BATCH_INVARIANT"));
        let stock = kernels("CUDA : ARCHS = 900 | USE_GRAPHS = 1 | CPU : AVX = 1 | BATCH_INVARIANT = 1 | ");
        assert!(!reports(&stock, "CUDA", "BATCH_INVARIANT"));
    }

    #[test]
    fn default_layers_follow_the_backend() {
        assert_eq!(gpu_layers(Some(7)), 7);
        if cfg!(any(feature = "cuda", feature = "vulkan", target_os = "macos")) {
            assert_eq!(describe_layers(gpu_layers(None)), "all");
        } else {
            assert_eq!((name(), gpu_layers(None)), ("CPU", 0));
        }
    }
}
