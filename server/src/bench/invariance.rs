//! `ghostline bench --batch-invariance`: does a prompt position's result depend on the batch it
//! is decoded in? Decodes one prompt in several schedules — one batch, aligned 32-token batches,
//! a prefix in one batch then the rest token by token, a prefix then uneven small batches (a
//! keystroke's few tokens, drafted tokens checked at once), and two of them with another thread
//! count — each into a fresh context, and
//! compares the last position's logits bit for bit. Through llama.cpp's graph evaluation
//! callback (`cb_eval`, reached through `llama-cpp-sys-2`: `llama-cpp-2` does not expose it) it
//! hashes every position's slice of every tensor the graph computes, and names the first
//! (position, tensor) where a schedule leaves the one-batch reference: the lowest position
//! whose values differ, then the first tensor of the graph there — the kernel that follows
//! the batch (positions before it are equal, and a position depends only on those before it).
//!
//! The callback makes llama.cpp compute the graph one node at a time (no fused operations):
//! what it names is where the batch changes the arithmetic, and the logits it compares are
//! those of that unfused run; `bench --warm-cold` and `tests/determinism.rs` check the real,
//! fused path end to end.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::path::PathBuf;

use llama_cpp_sys_2 as sys;
use serde::Serialize;

pub struct Options {
    pub model: PathBuf,
    /// Text whose first `tokens` tokens are the prompt (default: the `inventory` trace's file).
    pub prompt_file: Option<PathBuf>,
    pub tokens: usize,
    pub threads: u32,
    /// `model.gpuLayers` (default: the backend's).
    pub gpu_layers: Option<u32>,
    /// Flash attention on or off (default: as ghostline's completions decode).
    pub flash_attention: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub model: PathBuf,
    pub backend: String,
    pub kernels: String,
    /// `model::backend::batch_invariance` on this build: `null` when it holds, else why not.
    pub expected_variant: Option<String>,
    pub flash_attention: bool,
    pub gpu_layers: u32,
    pub tokens: usize,
    /// Tensors compared per position (the graph's nodes with a token dimension).
    pub tensors_per_position: usize,
    pub schedules: Vec<Schedule>,
}

#[derive(Debug, Serialize)]
pub struct Schedule {
    pub name: String,
    /// The batch sizes, in order.
    pub batches: Vec<usize>,
    /// The last position's logits equal the one-batch reference's, bit for bit.
    pub logits_equal: bool,
    pub max_abs_logit_diff: f32,
    /// The reference's most likely next token is this schedule's too.
    pub same_argmax: bool,
    /// Positions at which some tensor differs from the reference.
    pub positions_differing: usize,
    /// The first (position, tensor) that differs, if any.
    pub first_difference: Option<Difference>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    pub position: usize,
    pub tensor: String,
    /// The operation that computed it, and its inputs (name and type).
    pub op: String,
    pub inputs: Vec<String>,
}

/// One node as first seen: its graph order, operation and inputs.
struct NodeInfo {
    op: String,
    inputs: Vec<String>,
}

/// What the evaluation callback collects during one schedule.
#[derive(Default)]
struct Recorder {
    /// The positions of the batch being decoded.
    batch_start: usize,
    batch_len: usize,
    /// Node names in graph order (first seen), with their description.
    names: Vec<String>,
    index: HashMap<String, usize>,
    info: Vec<NodeInfo>,
    /// (position, node) → hash of the position's values.
    hashes: HashMap<(usize, usize), u64>,
    /// Times each name was seen in the graph being computed.
    in_graph: HashMap<String, usize>,
    buffer: Vec<u8>,
}

impl Recorder {
    /// Hashes each position's slice of tensor `t` (floating-point nodes with a token dimension).
    ///
    /// # Safety
    /// `t` is a tensor llama.cpp just computed (its data readable through its buffer).
    unsafe fn observe(&mut self, t: &sys::ggml_tensor) {
        let elem = match t.type_ {
            sys::GGML_TYPE_F32 => 4,
            sys::GGML_TYPE_F16 | sys::GGML_TYPE_BF16 => 2,
            _ => return,
        };
        if t.buffer.is_null() || self.batch_len == 0 {
            return;
        }
        let name = CStr::from_ptr(t.name.as_ptr()).to_string_lossy().into_owned();
        // Unnamed nodes are named by their place in the graph, which differs between graphs of
        // different batch sizes: not comparable across schedules (the first named tensor after
        // one that differs is reported, with its inputs).
        if name.starts_with("node_") || name.is_empty() {
            return;
        }
        // A write into the KV cache is a view of the cache's cells, not a position's result
        // (the positions' keys and values are the nodes before it).
        if t.op == sys::GGML_OP_SET_ROWS {
            return;
        }
        // A name can come back within a graph (`norm-3` for the attention's and the feed-forward's
        // normalisation): its n-th time is its own node.
        let seen = self.in_graph.entry(name.clone()).or_insert(0);
        *seen += 1;
        let name = if *seen == 1 { name } else { format!("{name}#{seen}") };
        // The token dimension: the first of ne[1], ne[2] that is the batch's size (the schedules'
        // batch sizes avoid the test models' head counts, 3, 4 and 9, which would be read as it).
        let Some(dim) = [1usize, 2].into_iter().find(|&d| t.ne[d] as usize == self.batch_len) else { return };
        let node = match self.index.get(&name) {
            Some(&i) => i,
            None => {
                let op = CStr::from_ptr(sys::ggml_op_desc(t)).to_string_lossy().into_owned();
                let inputs = t
                    .src
                    .iter()
                    .filter(|s| !s.is_null())
                    .map(|&s| {
                        let s = &*s;
                        let type_name = CStr::from_ptr(sys::ggml_type_name(s.type_)).to_string_lossy();
                        format!("{} ({type_name})", CStr::from_ptr(s.name.as_ptr()).to_string_lossy())
                    })
                    .collect();
                self.names.push(name.clone());
                self.info.push(NodeInfo { op, inputs });
                self.index.insert(name.clone(), self.names.len() - 1);
                self.names.len() - 1
            }
        };
        let bytes = sys::ggml_nbytes(t);
        self.buffer.resize(bytes, 0);
        sys::ggml_backend_tensor_get(t, self.buffer.as_mut_ptr().cast(), 0, bytes);
        // Attention scores hold a column per KV cell: only the cells up to the position are
        // its own (the rest are masked, and hold other positions' keys or nothing).
        let per_cell = name.starts_with("kq");
        let ne = t.ne.map(|n| n as usize);
        for j in 0..self.batch_len {
            let position = self.batch_start + j;
            let mut hash = 0xcbf2_9ce4_8422_2325u64;
            let mut index = [0usize; 4];
            index[dim] = j;
            let outer: Vec<usize> = (1..4).filter(|&d| d != dim).collect();
            for a in 0..ne[outer[0]] {
                for b in 0..ne[outer[1]] {
                    index[outer[0]] = a;
                    index[outer[1]] = b;
                    let cols = if per_cell { ne[0].min(position + 1) } else { ne[0] };
                    for i0 in 0..cols {
                        index[0] = i0;
                        let at = (0..4).map(|d| index[d] * t.nb[d]).sum::<usize>();
                        for &byte in &self.buffer[at..at + elem] {
                            hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
                        }
                    }
                }
            }
            self.hashes.insert((position, node), hash);
        }
    }
}

unsafe extern "C" fn evaluated(t: *mut sys::ggml_tensor, ask: bool, user: *mut std::ffi::c_void) -> bool {
    if !ask {
        // SAFETY: `user` is the `Recorder` of the running schedule (set in `decode_schedule`,
        // alive for the context's life), and llama.cpp hands a computed tensor.
        let recorder = unsafe { &mut *(user as *mut Recorder) };
        unsafe { recorder.observe(&*t) };
    }
    true
}

struct Outcome {
    logits: Vec<f32>,
    recorder: Box<Recorder>,
}

/// Decodes `tokens` in batches of `batches` (summing to its length) into a fresh context.
fn decode_schedule(model: *mut sys::llama_model, tokens: &[sys::llama_token], batches: &[usize], threads: u32, flash: bool) -> Result<Outcome, String> {
    let mut recorder = Box::<Recorder>::default();
    let largest = batches.iter().copied().max().unwrap_or(1);
    // SAFETY: plain llama.cpp calls on a loaded model; the context is freed before returning,
    // and the recorder it points to outlives it.
    unsafe {
        let mut params = sys::llama_context_default_params();
        params.n_ctx = (tokens.len() as u32 + 255) / 256 * 256 + 256;
        params.n_batch = largest as u32;
        params.n_ubatch = largest as u32;
        params.n_seq_max = 1;
        params.n_threads = threads as i32;
        params.n_threads_batch = threads as i32;
        params.flash_attn_type = if flash { sys::LLAMA_FLASH_ATTN_TYPE_ENABLED } else { sys::LLAMA_FLASH_ATTN_TYPE_DISABLED };
        params.cb_eval = Some(evaluated);
        params.cb_eval_user_data = (&mut *recorder as *mut Recorder).cast();
        let ctx = sys::llama_init_from_model(model, params);
        if ctx.is_null() {
            return Err("llama.cpp could not create a context".into());
        }
        let batch = sys::llama_batch_init(largest as i32, 0, 1);
        let mut at = 0usize;
        let mut result = Ok(());
        for &n in batches {
            let b = &batch;
            for i in 0..n {
                *b.token.add(i) = tokens[at + i];
                *b.pos.add(i) = (at + i) as i32;
                *b.n_seq_id.add(i) = 1;
                **b.seq_id.add(i) = 0;
                *b.logits.add(i) = i8::from(at + i + 1 == tokens.len());
            }
            let mut b = batch;
            b.n_tokens = n as i32;
            recorder.batch_start = at;
            recorder.batch_len = n;
            recorder.in_graph.clear();
            let rc = sys::llama_decode(ctx, b);
            if rc != 0 {
                result = Err(format!("llama_decode failed ({rc}) on the batch at {at}"));
                break;
            }
            at += n;
        }
        recorder.batch_len = 0;
        let logits = if result.is_ok() {
            let vocab = sys::llama_model_get_vocab(model);
            let n_vocab = sys::llama_vocab_n_tokens(vocab) as usize;
            let ptr = sys::llama_get_logits_ith(ctx, -1);
            if ptr.is_null() { Vec::new() } else { std::slice::from_raw_parts(ptr, n_vocab).to_vec() }
        } else {
            Vec::new()
        };
        sys::llama_batch_free(batch);
        sys::llama_free(ctx);
        result.map(|()| Outcome { logits, recorder })
    }
}

/// The schedules compared, for a prompt of `n` tokens decoded with `threads` threads: the first
/// is the reference. The last two use another thread count (1, or 2 when `threads` is 1): the
/// model thread changes its count with the machine's load (`model::threads`), which must not
/// change a result either.
fn schedules(n: usize, threads: u32) -> Vec<(String, Vec<usize>, u32)> {
    let tail = 24.min(n - 1);
    let mut uneven = Vec::new();
    let mut left = (n - 1).min(40);
    for size in [5usize, 2, 7, 1, 11, 6, 13].iter().cycle() {
        if left == 0 {
            break;
        }
        let s = (*size).min(left);
        uneven.push(s);
        left -= s;
    }
    let prefix_uneven: usize = n - uneven.iter().sum::<usize>();
    let other = if threads == 1 { 2 } else { 1 };
    let s = |t: u32| if t == 1 { "" } else { "s" };
    let one_at_a_time: Vec<usize> = std::iter::once(n - tail).chain(std::iter::repeat_n(1, tail)).collect();
    vec![
        (format!("one batch of {n}"), vec![n], threads),
        ("aligned batches of 32".into(), (0..n).step_by(32).map(|s| 32.min(n - s)).collect(), threads),
        (format!("{} in one batch, then {tail} one at a time", n - tail), one_at_a_time.clone(), threads),
        (format!("{prefix_uneven} in one batch, then batches of 5, 2, 7, 1, 11, 6, 13"), std::iter::once(prefix_uneven).chain(uneven).collect(), threads),
        (format!("one batch of {n}, {other} thread{}", s(other)), vec![n], other),
        (format!("{} in one batch, then {tail} one at a time, {other} thread{}", n - tail, s(other)), one_at_a_time, other),
    ]
}

pub fn run(options: &Options) -> Result<Report, String> {
    crate::model::backend::devices(); // starts llama.cpp's backend (and pins its CPU kernels)
    let default_path = crate::typing::find_fixture("fixtures/traces/inventory.py");
    let file = options.prompt_file.clone().or(default_path).ok_or("no prompt: pass --prompt-file")?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let gpu_layers = crate::model::backend::gpu_layers(options.gpu_layers);
    let expected = crate::model::backend::batch_invariance(gpu_layers).err();
    // As completions run: on where the rest is variant, or where the build's own kernel makes it
    // invariant too (`model::flash`).
    let flash = options.flash_attention.unwrap_or(expected.is_some() || crate::model::backend::flash_attention_invariant(gpu_layers));
    let path = CString::new(options.model.to_string_lossy().as_bytes()).map_err(|_| "the model path holds a NUL byte")?;
    // SAFETY: llama.cpp's loader on a path it copies; the model is freed below.
    let model = unsafe {
        let mut params = sys::llama_model_default_params();
        params.n_gpu_layers = gpu_layers.min(i32::MAX as u32) as i32;
        sys::llama_model_load_from_file(path.as_ptr(), params)
    };
    if model.is_null() {
        return Err(format!("llama.cpp could not load {}", options.model.display()));
    }
    let result = compare(model, &text, options, flash);
    // SAFETY: every context made from it is freed.
    unsafe { sys::llama_model_free(model) };
    let (tokens, per_position, schedules) = result?;
    Ok(Report {
        model: options.model.clone(),
        backend: crate::model::backend::name().to_owned(),
        kernels: crate::model::backend::cpu_kernels(),
        expected_variant: expected,
        flash_attention: flash,
        gpu_layers,
        tokens,
        tensors_per_position: per_position,
        schedules,
    })
}

fn compare(model: *mut sys::llama_model, text: &str, options: &Options, flash: bool) -> Result<(usize, usize, Vec<Schedule>), String> {
    let tokens = tokenize(model, text)?;
    if tokens.len() < 8 {
        return Err("the prompt is shorter than 8 tokens".into());
    }
    let tokens = &tokens[..options.tokens.clamp(8, tokens.len())];
    let mut outcomes = Vec::new();
    for (name, batches, threads) in schedules(tokens.len(), options.threads) {
        let outcome = decode_schedule(model, tokens, &batches, threads, flash)?;
        outcomes.push((name, batches, outcome));
    }
    let reference = &outcomes[0].2;
    let argmax = |l: &[f32]| l.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i);
    let per_position = reference.recorder.names.len();
    let mut out = Vec::new();
    for (name, batches, outcome) in &outcomes {
        let r = &reference.recorder;
        let o = &outcome.recorder;
        let mut differing = std::collections::BTreeSet::new();
        let mut first: Option<(usize, usize)> = None;
        for (&(position, node), &hash) in &r.hashes {
            let Some(&other) = o.index.get(&r.names[node]).and_then(|&i| o.hashes.get(&(position, i))) else { continue };
            if other != hash {
                differing.insert(position);
                if first.is_none_or(|(p, n)| (position, node) < (p, n)) {
                    first = Some((position, node));
                }
            }
        }
        let max_abs = reference.logits.iter().zip(&outcome.logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        out.push(Schedule {
            name: name.clone(),
            batches: batches.clone(),
            logits_equal: reference.logits.iter().map(|x| x.to_bits()).eq(outcome.logits.iter().map(|x| x.to_bits())),
            max_abs_logit_diff: max_abs,
            same_argmax: argmax(&reference.logits) == argmax(&outcome.logits),
            positions_differing: differing.len(),
            first_difference: first.map(|(position, node)| Difference {
                position,
                tensor: r.names[node].clone(),
                op: r.info[node].op.clone(),
                inputs: r.info[node].inputs.clone(),
            }),
        });
    }
    Ok((tokens.len(), per_position, out))
}

fn tokenize(model: *mut sys::llama_model, text: &str) -> Result<Vec<sys::llama_token>, String> {
    let bytes = text.as_bytes();
    let len = i32::try_from(bytes.len()).map_err(|_| "the prompt file is too large")?;
    // SAFETY: llama.cpp writes at most `capacity` tokens into the buffer given.
    unsafe {
        let vocab = sys::llama_model_get_vocab(model);
        let capacity = bytes.len() + 8;
        let mut tokens = vec![0 as sys::llama_token; capacity];
        let n = sys::llama_tokenize(vocab, bytes.as_ptr().cast(), len, tokens.as_mut_ptr(), capacity as i32, true, false);
        if n < 0 {
            return Err("llama.cpp could not tokenize the prompt".into());
        }
        tokens.truncate(n as usize);
        Ok(tokens)
    }
}

pub fn print_text(r: &Report) {
    println!(
        "batch invariance on {} ({}, {} layers on the GPU; kernels {}; flash attention {}): {} prompt tokens, {} tensors per position",
        r.model.display(),
        r.backend,
        crate::model::backend::describe_layers(r.gpu_layers),
        r.kernels,
        if r.flash_attention { "on" } else { "off" },
        r.tokens,
        r.tensors_per_position
    );
    match &r.expected_variant {
        None => println!("expected: invariant (ghostline decodes completions without aligned batches here)"),
        Some(why) => println!("expected: not invariant ({why}; ghostline keeps the aligned prefill)"),
    }
    for s in &r.schedules {
        let verdict = match (s.logits_equal, s.positions_differing) {
            (true, 0) => "equal".to_owned(),
            (true, n) => format!("logits equal, tensors differ at {n} positions"),
            (false, _) => format!("DIFFERS (max |Δlogit| {:.3e}, same next token: {})", s.max_abs_logit_diff, s.same_argmax),
        };
        println!("  {:<58} {verdict}", s.name);
        if let Some(d) = &s.first_difference {
            println!("    first at position {}: {} = {}({}); {} positions differ", d.position, d.tensor, d.op, d.inputs.join(", "), s.positions_differing);
        }
    }
}

/// Whether every schedule agreed with the reference.
pub fn all_equal(r: &Report) -> bool {
    r.schedules.iter().all(|s| s.logits_equal && s.positions_differing == 0)
}
