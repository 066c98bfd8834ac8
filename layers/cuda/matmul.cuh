// Linear layer on the GPU through cuBLASLt (CPU reference: layers/matmul.h).
//   forward:  out = inp @ weight^T + bias, optionally with GELU fused into the epilogue
//             (GELU_AUX_BIAS: pre_gelu = inp @ weight^T + bias, out = gelu_tanh(pre_gelu)).
//   backward: dinp = dout @ weight (optionally times gelu'(pre_gelu): the DGELU epilogue),
//             dweight += dout^T @ inp (bf16 inputs, fp32 C/D, beta = 1),
//             dbias += column sums of dout (a deterministic two-stage reduction kernel: the
//             BGRADB epilogue overwrites instead of adding and sums in an unspecified order).
// cuBLASLt is column-major; a row-major (R, K) matrix is a column-major (K, R) one, so every call
// below computes the transpose of the row-major product with the operands swapped.
//
// One context per device and host thread, created on first use: the cuBLASLt handle, a 32 MiB
// workspace and the dbias scratch. The workspace is shared by every call of that thread, so one
// thread's matmuls on a device must not run concurrently on two streams; two threads may (the
// simulated ranks of comm/in_process.h on one GPU each have their own). matmul_destroy_cuda()
// frees the calling thread's context of the current device; a thread that ends without calling
// it leaves its context allocated (tests only).
#pragma once
#include <cstring>
#include <map>
#include <tuple>
#include <type_traits>
#include "layers/cuda/common.cuh"
#include "layers/cuda/gelu.cuh"
#include "layers/cuda/layernorm.cuh"
#include "layers/cuda/pack.cuh"
#include "layers/cuda/pdl.cuh"
#include "layers/cuda/residual.cuh"

// GELU through cuBLASLt's epilogues (forward GELU_AUX_BIAS, backward DGELU) or through the
// separate kernels of gelu.cuh: tests compare both against the CPU reference; set false to
// fall back everywhere. Fused is the default: tests/gpu/test_ops.cu checks that cuBLASLt's GELU
// is the tanh approximation of layers/gelu.h (the two GELUs differ by ~10% at x = -3).
inline bool g_matmul_fuse_gelu = true;

struct MatmulContext {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    float* dbias_scratch = nullptr;  // (S, OC) partial column sums
    size_t dbias_scratch_bytes = 0;
};
constexpr size_t MATMUL_WORKSPACE_BYTES = 32u << 20;
constexpr size_t MATMUL_DBIAS_SCRATCH_BYTES = 8u << 20;
constexpr int MATMUL_MAX_DEVICES = 64;

inline MatmulContext& matmul_context() {
    static thread_local MatmulContext ctx[MATMUL_MAX_DEVICES];
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    if (dev >= MATMUL_MAX_DEVICES) fatal("matmul: device %d beyond the %d supported", dev, MATMUL_MAX_DEVICES);
    MatmulContext& c = ctx[dev];
    if (!c.handle) {
        CUBLAS_CHECK(cublasLtCreate(&c.handle));
        CUDA_CHECK(cudaMalloc(&c.workspace, MATMUL_WORKSPACE_BYTES));
        c.workspace_bytes = MATMUL_WORKSPACE_BYTES;
        CUDA_CHECK(cudaMalloc((void**)&c.dbias_scratch, MATMUL_DBIAS_SCRATCH_BYTES));
        c.dbias_scratch_bytes = MATMUL_DBIAS_SCRATCH_BYTES;
    }
    return c;
}

inline void matmul_destroy_cuda() {
    MatmulContext& c = matmul_context();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUBLAS_CHECK(cublasLtDestroy(c.handle));
    CUDA_CHECK(cudaFree(c.workspace));
    CUDA_CHECK(cudaFree(c.dbias_scratch));
    c = MatmulContext{};
}

// Largest power of two (<= 256) dividing the address: what the heuristic may assume.
inline uint32_t matmul_alignment_(const void* p) {
    uint32_t a = 256;
    while (a > 1 && ((uintptr_t)p % a) != 0) a >>= 1;
    return a;
}

// D (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * D, all column-major; A and B bf16,
// D bf16 or fp32, fp32 accumulation. Optional bias (m) and aux (ld_aux) per the epilogue.
// Returns false when cuBLASLt has no algorithm for this epilogue (the caller falls back).
inline bool matmul_cublaslt(void* d, cudaDataType d_type, int ldd,        //
                            const bf16* a, bool trans_a, int lda,         //
                            const bf16* b, bool trans_b, int ldb,         //
                            int m, int n, int k, float beta,              //
                            cublasLtEpilogue_t epilogue, const bf16* bias, bf16* aux, int ld_aux,
                            cudaStream_t stream) {
    MatmulContext& ctx = matmul_context();
    // The heuristic's choice depends on everything below; it costs tens of microseconds of host
    // time, so it is asked once per distinct problem.
    typedef std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, uint32_t, uint32_t, uint32_t, uint32_t> Key;
    static thread_local std::map<Key, std::pair<bool, cublasLtMatmulAlgo_t>> cache;  // per thread, as the context
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    const uint32_t al_a = matmul_alignment_(a), al_b = matmul_alignment_(b), al_d = matmul_alignment_(d),
                   al_x = aux ? matmul_alignment_(aux) : (bias ? matmul_alignment_(bias) : 256);
    const Key key{dev, (int)d_type, ldd, (int)trans_a, lda, (int)trans_b, ldb, m, n, k, (int)epilogue | (beta != 0 ? 1 << 20 : 0),
                  ld_aux, al_a, al_b, al_d, al_x};

    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias) {
        const cudaDataType bias_type = CUDA_R_16BF;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (aux) {
        const int64_t ld = ld_aux;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
    }
    // Stored shapes (before op): A is (m, k) or (k, m), B is (k, n) or (n, k).
    cublasLtMatrixLayout_t la, lb, ld;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, trans_a ? k : m, trans_a ? m : k, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, trans_b ? n : k, trans_b ? k : n, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, d_type, m, n, ldd));

    auto it = cache.find(key);
    if (it == cache.end()) {
        cublasLtMatmulPreference_t pref;
        CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &ctx.workspace_bytes, sizeof(ctx.workspace_bytes)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d)));
        cublasLtMatmulHeuristicResult_t result;
        int found = 0;
        const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.handle, desc, la, lb, ld, ld, pref, 1, &result, &found);
        CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
        const bool ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
        if (!ok)  // the caller falls back (epilogues) or fails loudly (plain products)
            std::fprintf(stderr, "note: cuBLASLt heuristic: %s, %d algorithms for m=%d n=%d k=%d epilogue %d\n",
                         cublasLtGetStatusString(st), found, m, n, k, (int)epilogue);
        it = cache.emplace(key, std::make_pair(ok, ok ? result.algo : cublasLtMatmulAlgo_t{})).first;
    }
    const bool ok = it->second.first;
    if (ok) {
        const float alpha = 1.0f;
        CUBLAS_CHECK(cublasLtMatmul(ctx.handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &it->second.second,
                                    ctx.workspace, ctx.workspace_bytes, stream));
    }
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(ld));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
    return ok;
}

// Same, failing loudly when no algorithm exists (plain products always have one).
inline void matmul_cublaslt_or_die(void* d, cudaDataType d_type, int ldd, const bf16* a, bool trans_a, int lda,
                                   const bf16* b, bool trans_b, int ldb, int m, int n, int k, float beta,
                                   cublasLtEpilogue_t epilogue, const bf16* bias, cudaStream_t stream) {
    if (!matmul_cublaslt(d, d_type, ldd, a, trans_a, lda, b, trans_b, ldb, m, n, k, beta, epilogue, bias, nullptr, 0, stream))
        fatal("matmul: cuBLASLt found no algorithm for m=%d n=%d k=%d (epilogue %d)", m, n, k, (int)epilogue);
}

// ------------------------------------------------------------------------------------------------
// dbias kernels: stage 1, block (32, 8) over 256 columns x one slice of rows, lane y takes rows
// y, y+8, ...; lanes summed in order into partial[slice]. Stage 2 sums the slices in order.

constexpr int DBIAS_LANES = 8;
__global__ void __launch_bounds__(32 * DBIAS_LANES)
    matmul_dbias_partial_kernel(float* partial,     // (S, OC)
                                const bf16* dout,   // (N, OC)
                                int N, int OC, int rows_per_slice) {
    __shared__ float acc_s[DBIAS_LANES][32 * 8];
    const int c = blockIdx.x * 256 + threadIdx.x * 8;
    const int r0 = blockIdx.y * rows_per_slice, r1 = min(N, r0 + rows_per_slice);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (c < OC) {
#pragma unroll 4
        for (int r = r0 + threadIdx.y; r < r1; r += DBIAS_LANES) {
            const x128 d = load128(dout + (size_t)r * OC + c);
            for (int j = 0; j < 8; j++) acc[j] += __bfloat162float(d[j]);
        }
    }
    for (int j = 0; j < 8; j++) acc_s[threadIdx.y][threadIdx.x * 8 + j] = acc[j];
    __syncthreads();
    if (threadIdx.y != 0 || c >= OC) return;
    for (int j = 0; j < 8; j++) {
        float s = 0;
        for (int y = 0; y < DBIAS_LANES; y++) s += acc_s[y][threadIdx.x * 8 + j];
        partial[(size_t)blockIdx.y * OC + c + j] = s;
    }
}

__global__ void matmul_dbias_reduce_kernel(float* dbias,          // (OC) +=
                                           const float* partial,  // (S, OC)
                                           int S, int OC) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float s = 0;
    for (int i = 0; i < S; i++) s += partial[(size_t)i * OC + c];
    dbias[c] += s;
}

// ------------------------------------------------------------------------------------------------
// Launchers. C and OC must be multiples of 8 (16-byte rows for cuBLASLt and the dbias kernel).

// A few rows (decoding: one token per sequence): cuBLASLt's kernels take 3-6 us for a product
// whose weights are read in ~1 us (bench_kv_cache --breakdown), so a warp per output column
// reads that column's weights once with 16-byte loads, four in flight, against every row (from
// L1/L2), sums in fp32 and rounds once; bias and GELU applied to the fp32 sum.
// Decoding also fuses a product with its neighbours, each a launch of ~1-3 us at one token
// (bench_kv_cache --breakdown): LN, the LayerNorm before it (inp is then the residual stream,
// each warp normalizing the rows on the way in as layernorm_forward_kernel does: the same
// statistics and bf16 values, so the same bits as the two launches), and RESID, the residual
// add after it (out is then the residual stream, added into in place: the product rounded to
// bf16, then the sum, as residual_forward_cuda).
constexpr int kMatmulRowsMax = 4;  // past 4 rows (decoding more sequences) cuBLASLt is faster per step
// The fused products only up to 2 rows: past that they make the whole step slower than the
// separate launches (each warp computes every row's statistics before its sums); see
// notes/kv-cache.md, decoding's products fused with their neighbours.
constexpr int kMatmulFuseRowsMax = 2;
inline bool g_matmul_rows = true;  // tests turn it off to compare with cuBLASLt
inline bool g_matmul_fuse_rows = true;  // false: the fused products run as their two launches (bench_kv_cache --unfused)

template <int NR, bool LN, bool RESID>
__global__ void __launch_bounds__(256) matmul_rows_kernel(bf16* out, bf16* pre_gelu, const bf16* __restrict__ inp,
                                                          const bf16* __restrict__ weight, const bf16* __restrict__ bias,
                                                          const bf16* __restrict__ ln_w, const bf16* __restrict__ ln_b,
                                                          int C, int OC) {
    static_assert(!(LN && RESID), "LN reads the residual stream RESID writes");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, oc = blockIdx.x * 8 + warp;
    // Launched with launch_pdl (pdl.cuh): the block's weight rows, contiguous, are fetched into L2
    // while the launch before still runs; inp and the residual stream only after pdl_wait.
    pdl_trigger();
    if (threadIdx.x == 0) prefetch_l2_bulk(weight + (size_t)blockIdx.x * 8 * C, (unsigned)(min(8, OC - blockIdx.x * 8) * C * 2));
    pdl_wait();
    if (oc >= OC) return;
    const bf16* w = weight + (size_t)oc * C;
    float acc[NR];
    for (int n = 0; n < NR; n++) acc[n] = 0.0f;
    if constexpr (!LN) {
#pragma unroll 4
        for (int c = lane * 8; c < C; c += 256) {
            const x128 wv = load128cs(w + c);  // read once: streamed past L2
            for (int n = 0; n < NR; n++) {
                const x128 xv = load128(inp + (size_t)n * C + c);
                for (int k = 0; k < 8; k++) acc[n] += __bfloat162float(wv[k]) * __bfloat162float(xv[k]);
            }
        }
    } else {
        // The lane's first four weight vectors are in flight while the row statistics' dependent
        // reductions run (every lane takes part), then groups of four, the same sums in the same
        // order. (Without LN the loop above is faster, as its loads are not held up: this form
        // only where the statistics' reductions would otherwise stall them.)
        x128 wv[4];
        float mean[NR], rstd[NR];
        auto load_weights = [&](int c0) {
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (c0 + 256 * i < C) wv[i] = load128cs(w + c0 + 256 * i);
        };
        load_weights(lane * 8);
        for (int n = 0; n < NR; n++) layernorm_row_stats(inp + (size_t)n * C, C, lane, mean[n], rstd[n]);
        for (int c0 = lane * 8; c0 < C; c0 += 4 * 256) {
            if (c0 != lane * 8) load_weights(c0);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int c = c0 + 256 * i;
                if (c >= C) break;
                const x128 lw = load128(ln_w + c), lb = load128(ln_b + c);
                for (int n = 0; n < NR; n++) {
                    x128 xv = load128(inp + (size_t)n * C + c);
                    for (int k = 0; k < 8; k++) xv[k] = layernorm_value(xv[k], mean[n], rstd[n], lw[k], lb[k]);
                    for (int k = 0; k < 8; k++) acc[n] += __bfloat162float(wv[i][k]) * __bfloat162float(xv[k]);
                }
            }
        }
    }
    for (int n = 0; n < NR; n++) {
        const float v = warp_sum(acc[n]) + (bias ? __bfloat162float(bias[oc]) : 0.0f);
        if (lane != n) continue;
        bf16* o = out + (size_t)n * OC + oc;
        if (pre_gelu) {
            pre_gelu[(size_t)n * OC + oc] = __float2bfloat16(v);
            *o = __float2bfloat16(gelu_tanh(v));
        } else if constexpr (RESID) {
            *o = __float2bfloat16(__bfloat162float(*o) + __bfloat162float(__float2bfloat16(v)));
        } else {
            *o = __float2bfloat16(v);
        }
    }
}

template <bool LN, bool RESID>
inline bool matmul_rows_launch(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, const bf16* ln_w,
                               const bf16* ln_b, int N, int C, int OC, cudaStream_t stream, bf16* pre_gelu) {
    constexpr bool fused = LN || RESID;
    if (!g_matmul_rows || N < 1 || N > (fused ? kMatmulFuseRowsMax : kMatmulRowsMax) || !is_aligned16(inp) || !is_aligned16(weight))
        return false;
    if (LN && (!is_aligned16(ln_w) || !is_aligned16(ln_b))) return false;
    const int grid = ceil_div(OC, 8);
    auto go = [&](auto rows) {
        launch_pdl(matmul_rows_kernel<decltype(rows)::value, LN, RESID>, grid, 256, 0, stream, out, pre_gelu, inp, weight, bias,
                   ln_w, ln_b, C, OC);
    };
    switch (N) {
        case 1: go(std::integral_constant<int, 1>{}); break;
        case 2: go(std::integral_constant<int, 2>{}); break;
        case 3: if constexpr (!fused) go(std::integral_constant<int, 3>{}); break;
        case 4: if constexpr (!fused) go(std::integral_constant<int, 4>{}); break;
    }
    CUDA_CHECK_LAST();
    return true;
}

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias for N <= kMatmulRowsMax; false (nothing
// done) for other shapes or misaligned buffers.
inline bool matmul_forward_rows_cuda(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                                     cudaStream_t stream, bf16* pre_gelu) {
    return matmul_rows_launch<false, false>(out, inp, weight, bias, nullptr, nullptr, N, C, OC, stream, pre_gelu);
}

inline void matmul_check_(int C, int OC) {
    if (C % 8 != 0 || OC % 8 != 0) fatal("matmul: C = %d and OC = %d must be multiples of 8", C, OC);
}

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias. With pre_gelu: pre_gelu = that, out = gelu(pre_gelu).
inline void matmul_forward_cuda(bf16* out,           // (N, OC)
                                const bf16* inp,     // (N, C)
                                const bf16* weight,  // (OC, C)
                                const bf16* bias,    // (OC) or nullptr
                                int N, int C, int OC, cudaStream_t stream, bf16* pre_gelu = nullptr) {
    matmul_check_(C, OC);
    if (N == 0) return;
    if (matmul_forward_rows_cuda(out, inp, weight, bias, N, C, OC, stream, pre_gelu)) return;
    // Column-major: out^T (OC, N) = weight (stored (C, OC), transposed) @ inp^T (C, N).
    if (pre_gelu && g_matmul_fuse_gelu) {
        const cublasLtEpilogue_t epi = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        if (matmul_cublaslt(out, CUDA_R_16BF, OC, weight, true, C, inp, false, C, OC, N, C, 0.0f, epi, bias, pre_gelu, OC,
                            stream))
            return;
    }
    bf16* dst = pre_gelu ? pre_gelu : out;
    matmul_cublaslt_or_die(dst, CUDA_R_16BF, OC, weight, true, C, inp, false, C, OC, N, C, 0.0f,
                           bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias, stream);
    if (pre_gelu) gelu_forward_cuda(out, pre_gelu, (size_t)N * OC, stream);
}

// Decoding's fused products (matmul_rows_kernel), each the same bits as its two launches:
// out (N, OC) = layernorm(x; ln_w, ln_b) @ weight^T + bias (and GELU with pre_gelu), and
// x (N, OC) += inp (N, C) @ weight^T + bias. For N > kMatmulFuseRowsMax (or with g_matmul_fuse_rows
// off) they run as the two launches, whose LayerNorm writes ln_out, mean, rstd and whose product
// writes tmp; fused, those are not touched.
inline void layernorm_matmul_forward_cuda(bf16* out, bf16* ln_out, float* mean, float* rstd, const bf16* x, const bf16* ln_w,
                                          const bf16* ln_b, const bf16* weight, const bf16* bias, int N, int C, int OC,
                                          cudaStream_t stream, bf16* pre_gelu = nullptr) {
    matmul_check_(C, OC);
    if (N == 0) return;
    if (g_matmul_fuse_rows && matmul_rows_launch<true, false>(out, x, weight, bias, ln_w, ln_b, N, C, OC, stream, pre_gelu)) return;
    layernorm_forward_cuda(ln_out, mean, rstd, x, ln_w, ln_b, N, C, stream);
    matmul_forward_cuda(out, ln_out, weight, bias, N, C, OC, stream, pre_gelu);
}
inline void matmul_residual_forward_cuda(bf16* x, bf16* tmp, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C,
                                         int OC, cudaStream_t stream) {
    matmul_check_(C, OC);
    if (N == 0) return;
    if (g_matmul_fuse_rows && matmul_rows_launch<false, true>(x, inp, weight, bias, nullptr, nullptr, N, C, OC, stream, nullptr)) return;
    matmul_forward_cuda(tmp, inp, weight, bias, N, C, OC, stream);
    residual_forward_cuda(x, x, tmp, (size_t)N * OC, stream);
}

// dinp (N, C) OVERWRITTEN, and may be inp itself; dweight (OC, C) and dbias (OC) ADDED INTO (dbias may be
// nullptr).
// pre_gelu (N, C): the input of a GELU between the previous layer and this one; then
// dinp = (dout @ weight) * gelu'(pre_gelu).
inline void matmul_backward_cuda(bf16* dinp,           // (N, C)
                                 float* dweight,       // (OC, C) +=
                                 float* dbias,         // (OC) += or nullptr
                                 const bf16* dout,     // (N, OC)
                                 const bf16* inp,      // (N, C)
                                 const bf16* weight,   // (OC, C)
                                 int N, int C, int OC, cudaStream_t stream, const bf16* pre_gelu = nullptr) {
    matmul_check_(C, OC);
    if (N == 0) return;
    // dweight^T (C, OC) += inp^T (C, N) @ dout (N, OC): dout stored (OC, N), transposed.
    matmul_cublaslt_or_die(dweight, CUDA_R_32F, C, inp, false, C, dout, true, OC, C, OC, N, 1.0f,
                           CUBLASLT_EPILOGUE_DEFAULT, nullptr, stream);
    if (dbias) {
        MatmulContext& ctx = matmul_context();
        // Slices: a function of (N, OC) only, so the sum rounds the same on every GPU.
        const int max_slices = (int)(ctx.dbias_scratch_bytes / ((size_t)OC * sizeof(float)));
        int S = ceil_div(N, 128);
        if (S > 512) S = 512;
        if (S > max_slices) S = max_slices;
        if (S < 1) fatal("matmul_backward: OC = %d too large for the dbias scratch", OC);
        const int rows_per_slice = ceil_div(N, S);
        S = ceil_div(N, rows_per_slice);
        dim3 grid(ceil_div(OC, 256), S), block(32, DBIAS_LANES);
        matmul_dbias_partial_kernel<<<grid, block, 0, stream>>>(ctx.dbias_scratch, dout, N, OC, rows_per_slice);
        CUDA_CHECK_LAST();
        matmul_dbias_reduce_kernel<<<ceil_div(OC, 256), 256, 0, stream>>>(dbias, ctx.dbias_scratch, S, OC);
        CUDA_CHECK_LAST();
    }
    // dinp last: once dweight has read inp, dinp may overwrite it (the model's recompute
    // policies put dfch in the GELU output's buffer, model/gpt_cuda.cuh).
    // dinp^T (C, N) = weight (stored (C, OC)) @ dout^T (OC, N).
    bool done = false;
    if (pre_gelu && g_matmul_fuse_gelu)
        done = matmul_cublaslt(dinp, CUDA_R_16BF, C, weight, false, C, dout, false, OC, C, N, OC, 0.0f,
                               CUBLASLT_EPILOGUE_DGELU, nullptr, const_cast<bf16*>(pre_gelu), C, stream);
    if (!done) {
        matmul_cublaslt_or_die(dinp, CUDA_R_16BF, C, weight, false, C, dout, false, OC, C, N, OC, 0.0f,
                               CUBLASLT_EPILOGUE_DEFAULT, nullptr, stream);
        if (pre_gelu) gelu_backward_cuda(dinp, pre_gelu, dinp, (size_t)N * C, stream);
    }
}
