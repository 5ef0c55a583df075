//! llamafile's matrix product for attention, one column included: llama.cpp calls
//! `llamafile_sgemm` for every CPU matrix product and falls back to ggml's `vec_dot` when it
//! declines, which on x86 it does for a single column (`n < 2`) — so a token decoded alone would
//! sum in another order than the same token in a batch. Linked with `--wrap=llamafile_sgemm`
//! (`build.rs`), llama.cpp's calls come here: F32 and F16 products (attention's `K·Q` and
//! `V·softmax`, F16 or F32 weights) go to tinyBLAS, a single column through [`column`] with
//! tinyBLAS's own order of arithmetic; quantized products are declined, so they keep `vec_dot`
//! for every batch, as in a build without llamafile.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

extern "C" {
    /// llama.cpp's own `llamafile_sgemm`, under the name the linker's `--wrap` gives it; the
    /// parameters are [`__wrap_llamafile_sgemm`]'s.
    #[rustfmt::skip]
    fn __real_llamafile_sgemm(
        params: *const c_void, m: i64, n: i64, k: i64,
        a: *const c_void, lda: i64, b: *const c_void, ldb: i64, c: *mut c_void, ldc: i64,
        a_type: c_int, b_type: c_int, c_type: c_int,
    ) -> bool;
}

// ggml's type ids (ggml.h's `enum ggml_type`).
const F32: c_int = 0;
const F16: c_int = 1;

/// Whether llama.cpp's products go to tinyBLAS at all: off (every product declined, so ggml
/// uses `vec_dot` for all of them, as in a build without llamafile) until [`init`] has seen that
/// the compiled tinyBLAS is the one [`column`] repeats.
static TINYBLAS: AtomicBool = AtomicBool::new(false);

/// Turns tinyBLAS on where [`column`] repeats its arithmetic, from the CPU kernels llama.cpp was
/// built with (`cpu_kernels`, its compile-time features): the 8-lane AVX2 tinyBLAS (AVX2, FMA
/// and F16C, not AVX512, whose 16 lanes sum in another order) on a CPU that runs it. Elsewhere
/// every product is declined: a single column could not be computed in the batch's order.
pub(super) fn init(cpu_kernels: &str) {
    TINYBLAS.store(tinyblas_is_repeated(cpu_kernels), Ordering::Relaxed);
    // Keeps the wrapper in the link: the references to it come from llama.cpp's archive, which
    // the linker reads after this crate's.
    std::hint::black_box(__wrap_llamafile_sgemm as *const c_void);
}

/// Whether the tinyBLAS compiled in (as `cpu_kernels` says) is the one [`column`] repeats, on a
/// CPU that runs it.
fn tinyblas_is_repeated(cpu_kernels: &str) -> bool {
    let has = |f: &str| cpu_kernels.split(' ').any(|k| k == f);
    let avx2 = has("AVX2") && has("FMA") && has("F16C") && !has("AVX512");
    avx2 && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

/// What llama.cpp's calls of `llamafile_sgemm` reach: `C = Aᵀ·B` for `m` rows of `A` and `n`
/// columns of `B`, each `k` long, every thread of the graph node calling at once.
///
/// tinyBLAS gives every output element its own 8-lane accumulator, summed over `k` in one
/// fixed order whatever tile the element falls in, so a column's result does not depend on how
/// many columns come with it; only its entry point refuses one column. Quantized types are
/// declined for every `n` (ggml then uses `vec_dot`, which is batch-invariant too).
///
/// # Safety
/// Called by llama.cpp's CPU backend with the arguments `llamafile_sgemm` takes.
#[no_mangle]
pub unsafe extern "C" fn __wrap_llamafile_sgemm(
    params: *const c_void,
    m: i64,
    n: i64,
    k: i64,
    a: *const c_void,
    lda: i64,
    b: *const c_void,
    ldb: i64,
    c: *mut c_void,
    ldc: i64,
    a_type: c_int,
    b_type: c_int,
    c_type: c_int,
) -> bool {
    let float = matches!((a_type, b_type), (F32, F32) | (F16, F16)) && c_type == F32;
    if !float || !TINYBLAS.load(Ordering::Relaxed) {
        return false;
    }
    if n != 1 {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { __real_llamafile_sgemm(params, m, n, k, a, lda, b, ldb, c, ldc, a_type, b_type, c_type) };
    }
    // tinyBLAS takes row counts in multiples of 4 only; ggml then uses `vec_dot` for every n.
    if m % 4 != 0 {
        return false;
    }
    // SAFETY: `params` starts with the thread's index and the thread count (`int ith, nth` in
    // ggml-cpu-impl.h); `A` holds `m` rows of `k` values `lda` apart, `B` one column and `C` one
    // column of `m`, all of the types checked above, on a CPU with AVX2, FMA and F16C
    // ([`init`]); the rows are split between the threads, which llama.cpp makes wait for each
    // other before the next node.
    unsafe {
        let ith = *(params as *const c_int) as i64;
        let nth = (*(params as *const c_int).add(1)).max(1) as i64;
        let per = (m + nth - 1) / nth;
        let (start, end) = ((ith * per).min(m), ((ith + 1) * per).min(m));
        let c = c as *mut f32;
        // Four rows at a time: four independent chains of fused multiply-adds hide their
        // latency (one chain waits on each add), each row still summed in its own order.
        let mut i = start;
        while i < end {
            let rows = std::array::from_fn(|r| (i + r as i64).min(end - 1));
            let sums = if a_type == F16 {
                column::f16(rows.map(|i| (a as *const u16).add((lda * i) as usize)), b as *const u16, k as usize)
            } else {
                column::f32(rows.map(|i| (a as *const f32).add((lda * i) as usize)), b as *const f32, k as usize)
            };
            for (r, sum) in sums.into_iter().enumerate().take((end - i).min(4) as usize) {
                *c.add(i as usize + r) = sum;
            }
            i += 4;
        }
    }
    true
}

/// Output elements the way the AVX2 tinyBLAS computes each: eight lanes, lane `j` summing
/// `a[i]·b[i]` for `i ≡ j (mod 8)` with fused multiply-adds in order of `i`, the last partial
/// group zero-padded, then the lanes added as `((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))`.
mod column {
    use super::super::flash::{load_half as load_f16, load_single as load_f32};
    use std::arch::x86_64::*;

    /// Four rows of `A` (the same row may come more than once) against one column of `B`: for
    /// F16 values `f16`, for F32 `f32`.
    macro_rules! four_rows {
        ($name:ident, $t:ty, $features:literal, $load:ident) => {
            /// # Safety
            /// Every row and `b` point to `k` values, on a CPU with the features named.
            #[target_feature(enable = $features)]
            pub unsafe fn $name(rows: [*const $t; 4], b: *const $t, k: usize) -> [f32; 4] {
                let mut acc = [_mm256_setzero_ps(); 4];
                let mut l = 0;
                while l + 8 <= k {
                    let bv = $load(b.add(l));
                    for r in 0..4 {
                        acc[r] = _mm256_fmadd_ps($load(rows[r].add(l)), bv, acc[r]);
                    }
                    l += 8;
                }
                if l < k {
                    let mut tb: [$t; 8] = Default::default();
                    std::ptr::copy_nonoverlapping(b.add(l), tb.as_mut_ptr(), k - l);
                    let bv = $load(tb.as_ptr());
                    for r in 0..4 {
                        let mut ta: [$t; 8] = Default::default();
                        std::ptr::copy_nonoverlapping(rows[r].add(l), ta.as_mut_ptr(), k - l);
                        acc[r] = _mm256_fmadd_ps($load(ta.as_ptr()), bv, acc[r]);
                    }
                }
                [hsum(acc[0]), hsum(acc[1]), hsum(acc[2]), hsum(acc[3])]
            }
        };
    }
    four_rows!(f16, u16, "avx2,fma,f16c", load_f16);
    four_rows!(f32, f32, "avx2,fma", load_f32);

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum(x: __m256) -> f32 {
        let x = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
        let x = _mm_add_ps(x, _mm_movehl_ps(x, x));
        let x = _mm_add_ss(x, _mm_movehdup_ps(x));
        _mm_cvtss_f32(x)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use llama_cpp_sys_2 as sys;

    /// `A·B` through ggml's own matrix product (which calls the wrapper above) for `A`: `m`
    /// rows of `k` (F16 or F32) and `B`: `n` columns of `k`; the result's columns, `m` each.
    fn product(a_type: sys::ggml_type, a: &[f32], b: &[f32], m: usize, n: usize, k: usize, threads: i32) -> Vec<Vec<f32>> {
        // SAFETY: a context of its own with room for three tensors and a graph; every tensor is
        // filled element by element within its size before the graph runs; freed at the end.
        unsafe {
            sys::ggml_cpu_init();
            let ctx = sys::ggml_init(sys::ggml_init_params { mem_size: 64 << 20, mem_buffer: std::ptr::null_mut(), no_alloc: false });
            assert!(!ctx.is_null());
            let ta = sys::ggml_new_tensor_2d(ctx, a_type, k as i64, m as i64);
            let tb = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_F32, k as i64, n as i64);
            for (i, v) in a.iter().enumerate() {
                sys::ggml_set_f32_1d(ta, i as i32, *v);
            }
            for (i, v) in b[..k * n].iter().enumerate() {
                sys::ggml_set_f32_1d(tb, i as i32, *v);
            }
            let tc = sys::ggml_mul_mat(ctx, ta, tb);
            let graph = sys::ggml_new_graph(ctx);
            sys::ggml_build_forward_expand(graph, tc);
            assert_eq!(sys::ggml_graph_compute_with_ctx(ctx, graph, threads), sys::GGML_STATUS_SUCCESS);
            let out = (0..n).map(|j| (0..m).map(|i| sys::ggml_get_f32_1d(tc, (j * m + i) as i32)).collect()).collect();
            sys::ggml_free(ctx);
            out
        }
    }

    /// A fixed sequence of values in (-1, 1), so that sums round differently in another order
    /// (also `model::flash`'s tests').
    pub(in crate::model) fn values(count: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..count)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// The property the build relies on: a column's result does not depend on how many columns
    /// come with it, nor on the thread count, for the attention products' types and for row
    /// lengths with and without a partial group of eight — with tinyBLAS taking the batches.
    #[test]
    fn a_column_is_the_same_alone_and_in_a_batch() {
        super::init(&super::super::backend::cpu_kernels_of_this_build());
        assert!(super::TINYBLAS.load(std::sync::atomic::Ordering::Relaxed), "this machine's build should use tinyBLAS");
        for a_type in [sys::GGML_TYPE_F16, sys::GGML_TYPE_F32] {
            for (m, k) in [(64, 64), (32, 200), (12, 70), (20, 33), (10, 64)] {
                let a = values(m * k, 1 + k as u64);
                let b = values(k * 17, 2 + m as u64);
                let alone = product(a_type, &a, &b, m, 1, k, 1);
                for (n, threads) in [(1, 2), (2, 1), (3, 2), (8, 2), (17, 1), (17, 2)] {
                    let batch = product(a_type, &a, &b, m, n, k, threads);
                    assert_eq!(
                        alone[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        batch[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "type {a_type}, m {m}, k {k}: the first column alone and among {n} ({threads} threads)"
                    );
                }
            }
        }
    }
}
