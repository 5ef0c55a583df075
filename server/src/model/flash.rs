//! Flash attention on the CPU with one order of arithmetic per query, whatever its batch.
//! llama.cpp's own kernel tiles 64 queries or more, takes a smaller batch one query at a time
//! with F16 accumulators, and splits a lone query's keys across the threads, so a position's
//! result depended on its batch and flash attention had to stay off. Linked with
//! `--wrap=ggml_compute_forward_flash_attn_ext` (`build.rs`), llama.cpp's calls come here: each
//! query of each head is computed whole by one thread, over the keys in tiles of [`KV_TILE`]
//! counted from the first cell, with F32 accumulators — the same arithmetic for one query or
//! 512, on one thread or many. What it does not cover (ALiBi, a logit soft-cap, attention
//! sinks, quantized or F32 caches) goes to llama.cpp's kernel, and [`warn_on_fallback`] says so.

use std::arch::x86_64::*;
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use llama_cpp_sys_2 as sys;

extern "C" {
    /// llama.cpp's own kernel, under the name the linker's `--wrap` gives it.
    fn __real_ggml_compute_forward_flash_attn_ext(params: *const c_void, dst: *mut sys::ggml_tensor);
}

/// Keys per tile of the online softmax: a query's running maximum and sum are brought up to
/// date once per tile, so the tiles' bounds are part of its arithmetic. They are counted from
/// the first KV cell, never from the batch.
const KV_TILE: usize = 64;
/// Queries of one head computed together against a tile of keys (while the tile is in cache).
/// Each is computed as it would be alone.
const Q_BLOCK: usize = 16;
/// The largest head size taken (Gemma 3: 256).
const MAX_HEAD: usize = 512;

/// Whether the kernel runs (a CPU with AVX2, FMA and F16C, checked by [`init`]).
static ON: AtomicBool = AtomicBool::new(false);
/// Set when a call went to llama.cpp's kernel instead (see the module's doc).
static FELL_BACK: AtomicBool = AtomicBool::new(false);

/// Turns the kernel on where the CPU runs it; whether it is on.
pub(super) fn init() -> bool {
    let on = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("f16c");
    ON.store(on, Ordering::Relaxed);
    // Keeps the wrapper in the link: the references to it come from llama.cpp's archive.
    std::hint::black_box(__wrap_ggml_compute_forward_flash_attn_ext as *const c_void);
    on
}

/// Whether flash attention is batch-invariant here (the kernel is on).
pub(super) fn invariant() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Says once, in the log, that a model's attention went to llama.cpp's own kernel: its
/// suggestions may then depend on how its prompt was batched.
pub(super) fn warn_on_fallback() {
    if FELL_BACK.load(Ordering::Relaxed) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| tracing::warn!("this model's attention (ALiBi, a soft-cap, sinks, or a quantized cache) is not covered by the batch-invariant kernel: warm and cold suggestions may differ"));
    }
}

/// What llama.cpp's graph calls for a `FLASH_ATTN_EXT` node, on every thread of the graph at once.
///
/// # Safety
/// Called by llama.cpp's CPU backend with its compute parameters and the node.
#[no_mangle]
pub unsafe extern "C" fn __wrap_ggml_compute_forward_flash_attn_ext(params: *const c_void, dst: *mut sys::ggml_tensor) {
    if ON.load(Ordering::Relaxed) {
        // SAFETY: the node and its sources are llama.cpp's, valid for the call.
        if let Some(a) = unsafe { Attention::of(dst) } {
            // SAFETY: `params` starts with the thread's index and the thread count (`int ith,
            // nth` in ggml-cpu-impl.h).
            let (ith, nth) = unsafe { (*(params as *const c_int), *(params as *const c_int).add(1)) };
            // SAFETY: the shapes were checked by `Attention::of`; each thread writes its own
            // rows of the output, and llama.cpp makes the threads meet before the next node.
            unsafe { a.run(ith.max(0) as usize, nth.max(1) as usize) };
            return;
        }
        FELL_BACK.store(true, Ordering::Relaxed);
    }
    // SAFETY: the caller's arguments, unchanged.
    unsafe { __real_ggml_compute_forward_flash_attn_ext(params, dst) }
}

/// A `FLASH_ATTN_EXT` node this kernel takes: Q in F32 `[dk, n_q, heads, seqs]`, K and V in
/// F16 `[d, n_kv, kv_heads, seqs]` (V not transposed), an F16 mask `[n_kv, n_q, …]`, the output
/// in F32 `[dv, heads, n_q, seqs]`.
struct Attention {
    q: *const sys::ggml_tensor,
    k: *const sys::ggml_tensor,
    v: *const sys::ggml_tensor,
    mask: *const sys::ggml_tensor,
    dst: *mut sys::ggml_tensor,
    scale: f32,
    dk: usize,
    dv: usize,
    n_q: usize,
    heads: usize,
    n_kv: usize,
    seqs: usize,
}

impl Attention {
    /// The node, where it is one this kernel computes.
    ///
    /// # Safety
    /// `dst` is a valid tensor whose sources are valid or null.
    unsafe fn of(dst: *mut sys::ggml_tensor) -> Option<Attention> {
        // SAFETY: the caller's.
        let d = unsafe { &*dst };
        let [q, k, v, mask, sinks] = [0, 1, 2, 3, 4].map(|i| d.src[i] as *const sys::ggml_tensor);
        if q.is_null() || k.is_null() || v.is_null() || !sinks.is_null() {
            return None;
        }
        // SAFETY: non-null sources of a valid node.
        let (qt, kt, vt) = unsafe { (&*q, &*k, &*v) };
        let param = |i: usize| f32::from_bits(d.op_params[i] as u32);
        let (scale, max_bias, softcap) = (param(0), param(1), param(2));
        let f32_t = sys::GGML_TYPE_F32 as u32;
        let f16_t = sys::GGML_TYPE_F16 as u32;
        let types = qt.type_ as u32 == f32_t && kt.type_ as u32 == f16_t && vt.type_ as u32 == f16_t && d.type_ as u32 == f32_t;
        let rows = qt.nb[0] == 4 && kt.nb[0] == 2 && vt.nb[0] == 2 && d.nb[0] == 4;
        let [dk, n_q, heads, seqs] = qt.ne.map(|n| n as usize);
        let (dv, n_kv) = (vt.ne[0] as usize, kt.ne[1] as usize);
        let shape = kt.ne[0] as usize == dk
            && dk % 8 == 0
            && dv % 8 == 0
            && dk <= MAX_HEAD
            && dv <= MAX_HEAD
            && vt.ne[1] as usize == n_kv
            && kt.ne[2] > 0
            && vt.ne[2] > 0
            && heads % kt.ne[2] as usize == 0
            && heads % vt.ne[2] as usize == 0
            && kt.ne[3] as usize == seqs
            && vt.ne[3] as usize == seqs
            && d.ne.map(|n| n as usize) == [dv, heads, n_q, seqs];
        let mask_ok = mask.is_null() || {
            // SAFETY: non-null source of a valid node.
            let m = unsafe { &*mask };
            m.type_ as u32 == f16_t
                && m.nb[0] == 2
                && m.ne[0] as usize >= n_kv
                && m.ne[1] as usize >= n_q
                && m.ne[2] > 0
                && m.ne[3] > 0
                && heads % m.ne[2] as usize == 0
                && seqs % m.ne[3] as usize == 0
        };
        (types && rows && shape && mask_ok && max_bias == 0.0 && softcap == 0.0).then_some(Attention {
            q,
            k,
            v,
            mask,
            dst,
            scale,
            dk,
            dv,
            n_q,
            heads,
            n_kv,
            seqs,
        })
    }

    /// This thread's share: blocks of [`Q_BLOCK`] queries of one head, every `nth` one.
    ///
    /// # Safety
    /// A node checked by [`Attention::of`], on a CPU with AVX2, FMA and F16C.
    unsafe fn run(&self, ith: usize, nth: usize) {
        thread_local! {
            static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
        }
        let blocks = self.n_q.div_ceil(Q_BLOCK);
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            scratch.resize(Q_BLOCK * (self.dv + 2) + KV_TILE * (1 + self.dk + self.dv), 0.0);
            for unit in (ith..self.seqs * self.heads * blocks).step_by(nth) {
                let (block, head, seq) = (unit % blocks, unit / blocks % self.heads, unit / blocks / self.heads);
                let first = block * Q_BLOCK;
                // SAFETY: the caller's.
                unsafe { self.block(seq, head, first..(first + Q_BLOCK).min(self.n_q), &mut scratch) };
            }
        });
    }

    /// Queries `rows` of head `head`: each one's running maximum, sum and output row, brought up
    /// to date tile by tile.
    ///
    /// # Safety
    /// As [`Attention::run`]; `rows` within `n_q`, `scratch` as `run` sizes it.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn block(&self, seq: usize, head: usize, rows: std::ops::Range<usize>, scratch: &mut [f32]) {
        // SAFETY (whole body): every pointer below is computed from the tensors' own strides and
        // within their shapes, as checked by `Attention::of`.
        let (q, k, v, d) = unsafe { (&*self.q, &*self.k, &*self.v, &*self.dst) };
        let dv = self.dv;
        let n = rows.len();
        let (acc, rest) = scratch.split_at_mut(Q_BLOCK * dv);
        let (state, rest) = rest.split_at_mut(Q_BLOCK * 2);
        let (scores, rest) = rest.split_at_mut(KV_TILE);
        let (keys32, values32) = rest.split_at_mut(KV_TILE * self.dk);
        let (maxes, sums) = state.split_at_mut(Q_BLOCK);
        acc[..n * dv].fill(0.0);
        maxes[..n].fill(f32::NEG_INFINITY);
        sums[..n].fill(0.0);
        let k_head = head / (self.heads / k.ne[2] as usize);
        let v_head = head / (self.heads / v.ne[2] as usize);
        let k_base = (k.data as *const u8).add(k_head * k.nb[2] + seq * k.nb[3]);
        let v_base = (v.data as *const u8).add(v_head * v.nb[2] + seq * v.nb[3]);
        let key = |j: usize| k_base.add(j * k.nb[1]) as *const u16;
        let value = |j: usize| v_base.add(j * v.nb[1]) as *const u16;
        let mask_row = |i: usize| -> Option<*const u16> {
            (!self.mask.is_null()).then(|| {
                let m = &*self.mask;
                (m.data as *const u8).add(i * m.nb[1] + (head % m.ne[2] as usize) * m.nb[2] + (seq % m.ne[3] as usize) * m.nb[3]) as *const u16
            })
        };
        // Several queries read each key and value: converted to F32 once per tile (exactly, so
        // the arithmetic is the one that reads F16 directly for a lone query).
        let convert = n >= 4;
        let mut tile = 0;
        while tile < self.n_kv {
            let end = (tile + KV_TILE).min(self.n_kv);
            let (keys, values) = if convert {
                for j in tile..end {
                    half_to_f32(key(j), &mut keys32[(j - tile) * self.dk..][..self.dk]);
                    half_to_f32(value(j), &mut values32[(j - tile) * dv..][..dv]);
                }
                (Rows::Single(keys32.as_ptr(), self.dk), Rows::Single(values32.as_ptr(), dv))
            } else {
                (Rows::Half(key(tile), k.nb[1] / 2), Rows::Half(value(tile), v.nb[1] / 2))
            };
            for (r, i) in rows.clone().enumerate() {
                let query = (q.data as *const u8).add(i * q.nb[1] + head * q.nb[2] + seq * q.nb[3]) as *const f32;
                let scores = &mut scores[..end - tile];
                let top = self.scores(query, tile, keys, mask_row(i), scores);
                if top == f32::NEG_INFINITY {
                    continue;
                }
                let row = &mut acc[r * dv..(r + 1) * dv];
                let old = maxes[r];
                if top > old {
                    let shrink = (old - top).exp();
                    row.iter_mut().for_each(|a| *a *= shrink);
                    sums[r] *= shrink;
                    maxes[r] = top;
                }
                exp_shifted(scores, maxes[r]);
                for &p in scores.iter() {
                    sums[r] += p;
                }
                match values {
                    Rows::Half(base, stride) => add_weighted_half(row, scores, base, stride),
                    Rows::Single(base, stride) => add_weighted_single(row, scores, base, stride),
                }
            }
            tile = end;
        }
        for (r, i) in rows.enumerate() {
            let inv = if sums[r] == 0.0 { 0.0 } else { 1.0 / sums[r] };
            let out = (d.data as *mut u8).add(((seq * self.n_q + i) * self.heads + head) * d.nb[1]) as *mut f32;
            for (c, a) in acc[r * dv..(r + 1) * dv].iter().enumerate() {
                *out.add(c) = a * inv;
            }
        }
    }

    /// The scaled and masked scores of one query against keys `tile..tile + scores.len()`
    /// (−∞ where the mask hides a key); their maximum.
    ///
    /// # Safety
    /// As [`Attention::block`].
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scores(&self, query: *const f32, tile: usize, keys: Rows, mask: Option<*const u16>, scores: &mut [f32]) -> f32 {
        let hide = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut top = hide;
        for group in (0..scores.len()).step_by(8) {
            let count = (scores.len() - group).min(8);
            let live = (1u32 << count) - 1;
            let hidden = match mask {
                Some(m) if count == 8 => _mm256_cvtph_ps(_mm_loadu_si128(m.add(tile + group) as *const __m128i)),
                Some(m) => {
                    let mut bits = [0xFC00u16; 8]; // −∞ beyond the tile's keys
                    std::ptr::copy_nonoverlapping(m.add(tile + group), bits.as_mut_ptr(), count);
                    _mm256_cvtph_ps(_mm_loadu_si128(bits.as_ptr() as *const __m128i))
                }
                None => _mm256_setzero_ps(),
            };
            let gone = _mm256_cmp_ps::<_CMP_EQ_OQ>(hidden, hide);
            let hidden_lanes = _mm256_movemask_ps(gone) as u32 | !live;
            let out = if hidden_lanes & 0xFF == 0xFF {
                hide
            } else {
                let last = count - 1;
                let dots = match keys {
                    Rows::Half(base, stride) => dot8_half(query, std::array::from_fn(|j| base.add(stride * (group + j.min(last)))), self.dk),
                    Rows::Single(base, stride) => dot8_single(query, std::array::from_fn(|j| base.add(stride * (group + j.min(last)))), self.dk),
                };
                let s = _mm256_add_ps(_mm256_mul_ps(dots, _mm256_set1_ps(self.scale)), hidden);
                let beyond = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(count as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
                _mm256_blendv_ps(hide, _mm256_blendv_ps(s, hide, gone), beyond)
            };
            top = _mm256_max_ps(top, out);
            if count == 8 {
                _mm256_storeu_ps(scores.as_mut_ptr().add(group), out);
            } else {
                let mut tmp = [0.0f32; 8];
                _mm256_storeu_ps(tmp.as_mut_ptr(), out);
                scores[group..].copy_from_slice(&tmp[..count]);
            }
        }
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), top);
        lanes.into_iter().fold(f32::NEG_INFINITY, f32::max)
    }
}

/// Where a tile's keys or values are read, from its first: the cache's F16 rows, or the same
/// converted to F32, and the distance between rows in values.
#[derive(Clone, Copy)]
enum Rows {
    Half(*const u16, usize),
    Single(*const f32, usize),
}

/// `out = row` converted from F16, `out.len()` values (a multiple of 8).
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn half_to_f32(row: *const u16, out: &mut [f32]) {
    for c in (0..out.len()).step_by(8) {
        _mm256_storeu_ps(out.as_mut_ptr().add(c), _mm256_cvtph_ps(_mm_loadu_si128(row.add(c) as *const __m128i)));
    }
}

/// The two readings of a tile (F16 rows, or F32 ones converted from them) with the same
/// arithmetic: `dot8` is one query against eight keys, `d` values each (eight lanes per key, lane
/// `l` summing the products at `l, l + 8, …` with fused multiply-adds in order, then the lanes
/// added in one fixed tree, [`sum_lanes`]); `add_weighted` is `row += Σ p[j] · value j`
/// over the keys whose weight is not 0, in order of `j` (each element one chain of fused
/// multiply-adds, kept in registers 64 elements at a time).
macro_rules! readings {
    ($dot:ident, $weigh:ident, $t:ty, $load:ident) => {
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $dot(query: *const f32, keys: [*const $t; 8], d: usize) -> __m256 {
            let mut acc = [_mm256_setzero_ps(); 8];
            let mut c = 0;
            while c < d {
                let qv = _mm256_loadu_ps(query.add(c));
                for (a, k) in acc.iter_mut().zip(keys) {
                    *a = _mm256_fmadd_ps($load(k.add(c)), qv, *a);
                }
                c += 8;
            }
            sum_lanes(acc)
        }

        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $weigh(row: &mut [f32], p: &[f32], values: *const $t, stride: usize) {
            let out = row.as_mut_ptr();
            let mut c0 = 0;
            while c0 < row.len() {
                let lanes = ((row.len() - c0) / 8).min(8);
                let mut acc = [_mm256_setzero_ps(); 8];
                for (l, a) in acc.iter_mut().enumerate().take(lanes) {
                    *a = _mm256_loadu_ps(out.add(c0 + 8 * l));
                }
                for (j, &w) in p.iter().enumerate() {
                    if w == 0.0 {
                        continue;
                    }
                    let (wv, v) = (_mm256_set1_ps(w), values.add(stride * j + c0));
                    for (l, a) in acc.iter_mut().enumerate().take(lanes) {
                        *a = _mm256_fmadd_ps($load(v.add(8 * l)), wv, *a);
                    }
                }
                for (l, a) in acc.iter().enumerate().take(lanes) {
                    _mm256_storeu_ps(out.add(c0 + 8 * l), *a);
                }
                c0 += 8 * lanes;
            }
        }
    };
}
readings!(dot8_half, add_weighted_half, u16, load_half);
readings!(dot8_single, add_weighted_single, f32, load_single);

/// Eight F16 values as F32 (also `model::sgemm`'s).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn load_half(p: *const u16) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
}

/// Eight F32 values (also `model::sgemm`'s).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn load_single(p: *const f32) -> __m256 {
    _mm256_loadu_ps(p)
}

/// Each of eight vectors' lanes summed, into one vector: pairs, then fours (`hadd`), then the
/// two halves.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn sum_lanes(a: [__m256; 8]) -> __m256 {
    let (t0, t1, t2, t3) = (_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]), _mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    let (u0, u1) = (_mm256_hadd_ps(t0, t1), _mm256_hadd_ps(t2, t3));
    _mm256_add_ps(_mm256_permute2f128_ps::<0x20>(u0, u1), _mm256_permute2f128_ps::<0x31>(u0, u1))
}

/// `x = exp(x − shift)` for every score, eight at a time (Cephes' single-precision polynomial);
/// a hidden score (−∞) and anything below e^−87 become 0.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted(scores: &mut [f32], shift: f32) {
    let mut group = 0;
    while group < scores.len() {
        let count = (scores.len() - group).min(8);
        let mut x = [f32::NEG_INFINITY; 8];
        x[..count].copy_from_slice(&scores[group..group + count]);
        let x = _mm256_sub_ps(_mm256_loadu_ps(x.as_ptr()), _mm256_set1_ps(shift));
        let mut out = [0.0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), exp8(x));
        scores[group..group + count].copy_from_slice(&out[..count]);
        group += 8;
    }
}

/// e^x for eight values: x = n·ln 2 + r, |r| ≤ ln 2 / 2, e^r by a degree-5 polynomial, scaled
/// by 2^n through the exponent bits. 0 below −87 (and for −∞).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp8(x: __m256) -> __m256 {
    let tiny = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(-87.0));
    let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0)), _mm256_set1_ps(88.0));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(1.987_569_1e-4);
    for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.000_000_1e-1] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0));
    let pow2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127))));
    _mm256_andnot_ps(tiny, _mm256_mul_ps(y, pow2))
}

#[cfg(test)]
mod tests {
    use super::super::sgemm::tests::values;
    use llama_cpp_sys_2 as sys;

    /// Attention through ggml's own graph (which calls the wrapper): `n_q` queries at positions
    /// `first..first + n_q` against `n_kv` cells, causal (a query sees the cells up to its
    /// position), `heads` heads sharing `kv_heads`; the output rows (`heads · d` values each),
    /// and the same in f64 from the definition.
    fn attention(first: usize, n_q: usize, n_kv: usize, heads: usize, kv_heads: usize, d: usize, threads: i32) -> (Vec<f32>, Vec<f64>) {
        // Values as F16 holds them (the cache's type), so that the f64 reference sees the same.
        let half = |v: Vec<f32>| v.into_iter().map(|x| (x * 1024.0).round() / 1024.0).collect::<Vec<f32>>();
        // The query at position p of head h: the same values whatever the batch.
        let qs = values(d * 1024 * heads, 1);
        // Cell j of KV head h holds the same values whatever the cell count.
        const CELLS: usize = 1024;
        assert!(n_kv <= CELLS);
        let (ks, vs) = (half(values(d * CELLS * kv_heads, 2)), half(values(d * CELLS * kv_heads, 3)));
        let cell = |all: &[f32], h: usize, j: usize| all[(h * CELLS + j) * d..][..d].to_vec();
        let scale = 1.0 / (d as f32).sqrt();
        let query = |h: usize, i: usize| &qs[(h * 1024 + first + i) * d..][..d];
        // SAFETY: a context of its own with room for the tensors and a graph; every tensor is
        // filled within its size before the graph runs; freed at the end.
        let ours = unsafe {
            sys::ggml_cpu_init();
            let ctx = sys::ggml_init(sys::ggml_init_params { mem_size: 64 << 20, mem_buffer: std::ptr::null_mut(), no_alloc: false });
            assert!(!ctx.is_null());
            let q = sys::ggml_new_tensor_3d(ctx, sys::GGML_TYPE_F32, d as i64, n_q as i64, heads as i64);
            let k = sys::ggml_new_tensor_3d(ctx, sys::GGML_TYPE_F16, d as i64, n_kv as i64, kv_heads as i64);
            let v = sys::ggml_new_tensor_3d(ctx, sys::GGML_TYPE_F16, d as i64, n_kv as i64, kv_heads as i64);
            let mask = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_F16, n_kv as i64, n_q as i64);
            for h in 0..heads {
                for i in 0..n_q {
                    for (c, x) in query(h, i).iter().enumerate() {
                        sys::ggml_set_f32_1d(q, ((h * n_q + i) * d + c) as i32, *x);
                    }
                }
            }
            for h in 0..kv_heads {
                for j in 0..n_kv {
                    for (c, (x, y)) in cell(&ks, h, j).into_iter().zip(cell(&vs, h, j)).enumerate() {
                        sys::ggml_set_f32_1d(k, ((h * n_kv + j) * d + c) as i32, x);
                        sys::ggml_set_f32_1d(v, ((h * n_kv + j) * d + c) as i32, y);
                    }
                }
            }
            for i in 0..n_q {
                for j in 0..n_kv {
                    sys::ggml_set_f32_1d(mask, (i * n_kv + j) as i32, if j <= first + i { 0.0 } else { f32::NEG_INFINITY });
                }
            }
            let out = sys::ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0, 0.0);
            let graph = sys::ggml_new_graph(ctx);
            sys::ggml_build_forward_expand(graph, out);
            assert_eq!(sys::ggml_graph_compute_with_ctx(ctx, graph, threads), sys::GGML_STATUS_SUCCESS);
            let result = (0..d * heads * n_q).map(|i| sys::ggml_get_f32_1d(out, i as i32)).collect();
            sys::ggml_free(ctx);
            result
        };
        let mut exact = Vec::new();
        for i in 0..n_q {
            for h in 0..heads {
                let kv = h / (heads / kv_heads);
                let cells = first + i + 1;
                let s: Vec<f64> = (0..cells)
                    .map(|j| query(h, i).iter().zip(cell(&ks, kv, j)).map(|(a, b)| *a as f64 * b as f64).sum::<f64>() * scale as f64)
                    .collect();
                let top = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
                let sum: f64 = p.iter().sum();
                exact.extend((0..d).map(|c| (0..cells).map(|j| p[j] * vs[(kv * CELLS + j) * d + c] as f64).sum::<f64>() / sum));
            }
        }
        (ours, exact)
    }

    /// The property completions rely on: a query's output is the same, bit for bit, alone or
    /// in a batch of any size, on one thread or two, and with more cells (hidden) beyond it —
    /// where llama.cpp's own kernel differs (its tiles for 64 queries or more, its keys split
    /// across threads for one). And it is attention: within rounding of the definition.
    #[test]
    fn a_query_is_the_same_alone_and_in_a_batch() {
        super::init();
        assert!(super::invariant(), "this machine's CPU should run the kernel");
        let (heads, kv_heads, d) = (6, 2, 64);
        let row = |out: &[f32], i: usize| out[i * heads * d..(i + 1) * heads * d].iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // The query at position 600, alone with 608 or 1024 cells, and among batches of 11 to
        // 100, on one or two threads.
        let (alone, exact) = attention(600, 1, 608, heads, kv_heads, d, 1);
        let worst = alone.iter().zip(&exact).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-5, "largest difference from the definition: {worst}");
        for (first, n_q, n_kv, threads) in [(600, 1, 1024, 2), (600, 70, 768, 2), (560, 100, 768, 1), (501, 100, 640, 2), (590, 11, 608, 2)] {
            let (batch, exact) = attention(first, n_q, n_kv, heads, kv_heads, d, threads);
            assert_eq!(row(&alone, 0), row(&batch, 600 - first), "query 600 as {} of {n_q} ({n_kv} cells, {threads} threads)", 600 - first);
            let worst = batch.iter().zip(&exact).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max);
            assert!(worst < 1e-5, "largest difference from the definition: {worst}");
        }
    }
}
