// The LM head fused with softmax cross-entropy on the GPU (CPU reference: layers/classifier.h),
// never holding the (N, V) logits: rows go through in chunks of g_classifier_chunk rows.
// Per chunk:
//   1. logits (rows, V) fp32 = x_chunk @ wte^T                     cuBLASLt, bf16 in, fp32 out
//   2. one block per row: loss = logsumexp - logit[target] in fp32 (online max/sum), then
//      dlogits = dloss * (softmax - onehot) written as bf16 IN PLACE over the row's first half
//   3. dx_chunk (rows, C) = dlogits @ wte                           cuBLASLt, bf16 out
//   4. dwte (V, C) += dlogits^T @ x_chunk                           cuBLASLt, fp32 C/D, beta = 1
// (each product split at V1 = V rounded down to g_classifier_split: see there)
// Why fp32 logits: the loss is the number reported and compared with the CPU, and logits reach
// |20| where a bf16 logit is off by up to 0.06, so a bf16 loss would be off by ~1e-2 per token.
// fp32 costs 4 more bytes per logit written and read (about 2 ms of ~13 ms for GPT-2 124M at
// 32K tokens); dlogits must be bf16 anyway, to feed the bf16 tensor-core products.
// In-place layout: logits row r is fp32 at floats [r*ldl, r*ldl + V); its bf16 dlogits go to
// bf16 elements [2*r*ldl, 2*r*ldl + V), the first half of the same bytes, so the dlogits matrix
// has leading dimension 2*ldl bf16. The row's block reads each tile before overwriting it.
// With a pointer (layers/pointer.h; CPU: layers/classifier.h's PointerMix), step 2 reports the
// mixture's loss, scales the row's gradient by the language model's share 1 - w and hands w back.
#pragma once
#include "layers/cuda/common.cuh"
#include "layers/cuda/matmul.cuh"
#include "layers/cuda/pack.cuh"

// Rows per chunk; the scratch is chunk * ldl * 4 bytes (824 MB for V = 50257 at 4096 rows).
// Tests set it smaller to cross chunk boundaries.
inline int g_classifier_chunk = 4096;
// Vocabulary split for the products: cuBLASLt is several times slower when the vocabulary
// dimension is odd (50257), so each product runs on the first V1 = V rounded down to a multiple
// of g_classifier_split rows and again on the V - V1 remaining ones (0: one product).
inline int g_classifier_split = 64;
// Padded row length of the logits: a multiple of 64 keeps every row 256-byte aligned.
inline int classifier_ldl(int V) { return (V + 63) / 64 * 64; }

// ------------------------------------------------------------------------------------------------
// Kernels

constexpr int CE_THREADS = 1024;

// The pointer's side of the classifier (layers/classifier.h's PointerMix): all three, or none.
struct PointerMixCuda {
    const float* gate = nullptr;   // (N) gate logits
    const float* pcopy = nullptr;  // (N) copy weight on each target
    float* w = nullptr;            // (N) out: the copy's share of the target's probability
};

// layers/pointer.h's pointer_mix_loss: the loss -log((1 - g) e^lm + g p_copy), w and 1 - w.
__device__ __forceinline__ float ce_pointer_mix_loss(float gate, float lm, float pcopy, float* w, float* lm_share) {
    auto log_sigmoid = [](float x) { return -(fmaxf(-x, 0.0f) + log1pf(expf(-fabsf(x)))); };
    const float a = log_sigmoid(-gate) + lm;
    if (!(pcopy > 0)) {
        *w = 0, *lm_share = 1;
        return -a;
    }
    const float c = log_sigmoid(gate) + logf(pcopy);
    const float hi = fmaxf(a, c), log_p = hi + log1pf(expf(fminf(a, c) - hi));
    *w = expf(c - log_p), *lm_share = expf(a - log_p);
    return -log_p;
}

// Block-wide (max, sum of exp) merge of the per-thread online softmax states.
__device__ __forceinline__ void ce_block_merge(float& m, float& s, float* shm_m, float* shm_s) {
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        const float mm = fmaxf(m, m2);
        s = (mm == -INFINITY) ? 0.0f : s * __expf(m - mm) + s2 * __expf(m2 - mm);
        m = mm;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) shm_m[warp] = m, shm_s[warp] = s;
    __syncthreads();
    // Every thread merges the warps' states in the same order: a deterministic, uniform result.
    m = -INFINITY, s = 0;
    for (int w = 0; w < warps; w++) {
        const float m2 = shm_m[w], s2 = shm_s[w];
        const float mm = fmaxf(m, m2);
        s = (mm == -INFINITY) ? 0.0f : s * __expf(m - mm) + s2 * __expf(m2 - mm);
        m = mm;
    }
    (void)lane;
}

// One block per row of the chunk. write_grad = false: forward only (the logits stay fp32).
__global__ void __launch_bounds__(CE_THREADS)
    crossentropy_forward_backward_kernel(float* logits,        // (rows, ldl) fp32 in, bf16 dlogits out
                                         float* losses,        // (rows)
                                         const int* targets,   // (rows)
                                         int V, int ldl, float dloss, bool write_grad, PointerMixCuda mix) {
    __shared__ float shm_m[CE_THREADS / 32], shm_s[CE_THREADS / 32];
    const int row = blockIdx.x;
    float* l = logits + (size_t)row * ldl;
    bf16* g = reinterpret_cast<bf16*>(l);
    const int target = targets[row];
    if (target < 0) {  // ignored: no loss, no gradient
        if (threadIdx.x == 0) losses[row] = 0.0f;
        if (threadIdx.x == 0 && mix.w) mix.w[row] = 0.0f;
        if (!write_grad) return;
        for (int i = threadIdx.x * 4; i < V; i += blockDim.x * 4)
            for (int j = 0; j < 4 && i + j < V; j++) g[i + j] = __float2bfloat16(0.0f);
        return;
    }
    // Pass 1: online max and sum of exp, 4 floats per thread per step (ldl % 4 == 0).
    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x * 4; i < V; i += blockDim.x * 4) {
        const f128 v = load128(l + i);
        for (int j = 0; j < 4; j++) {
            if (i + j >= V) break;
            const float x = v[j];
            if (x > m) {
                s = s * __expf(m - x) + 1.0f;
                m = x;
            } else {
                s += __expf(x - m);
            }
        }
    }
    ce_block_merge(m, s, shm_m, shm_s);
    const float log_z = m + logf(s);
    const float logit_t = l[target];  // read before any thread overwrites the row
    if (threadIdx.x == 0) losses[row] = log_z - logit_t;
    if (mix.gate) {
        float w, lm_share;
        const float loss = ce_pointer_mix_loss(mix.gate[row], logit_t - log_z, mix.pcopy[row], &w, &lm_share);
        if (threadIdx.x == 0) losses[row] = loss;
        if (threadIdx.x == 0 && mix.w) mix.w[row] = w;
        dloss *= lm_share;
    }
    if (!write_grad) return;
    __syncthreads();
    // Pass 2 (re-reads from L2): tile k is read whole, then written as bf16 into bytes that only
    // hold floats of tiles <= k, which every thread has read (the barrier in between).
    for (int base = 0; base < V; base += blockDim.x * 4) {
        const int i = base + threadIdx.x * 4;
        float p[4] = {0, 0, 0, 0};
        if (i < V) {
            const f128 v = load128cs(l + i);
            for (int j = 0; j < 4; j++) {
                p[j] = dloss * __expf(v[j] - log_z);
                if (i + j == target) p[j] -= dloss;
            }
        }
        __syncthreads();
        if (i < V) {
            if (i + 4 <= V) {
                __nv_bfloat162 lo = __floats2bfloat162_rn(p[0], p[1]), hi = __floats2bfloat162_rn(p[2], p[3]);
                uint2 packed;
                packed.x = *reinterpret_cast<uint32_t*>(&lo);
                packed.y = *reinterpret_cast<uint32_t*>(&hi);
                *reinterpret_cast<uint2*>(g + i) = packed;  // 8 bytes: g + i is 8-byte aligned (i % 4 == 0)
            } else {
                for (int j = 0; i + j < V; j++) g[i + j] = __float2bfloat16(p[j]);
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Launchers

inline size_t classifier_scratch_bytes(int N, int V) {
    const int rows = N < g_classifier_chunk ? N : g_classifier_chunk;
    return (size_t)(rows > 0 ? rows : 1) * classifier_ldl(V) * sizeof(float);
}

// losses (N) always. dx (N, C) OVERWRITTEN and dwte (V, C) ADDED INTO with the gradient of
// sum_n dloss * losses[n], each when not nullptr. Targets < 0: loss 0, no gradient.
inline void classifier_forward_backward_cuda(float* losses,       // (N)
                                             bf16* dx,            // (N, C) or nullptr
                                             float* dwte,         // (V, C) += or nullptr
                                             const bf16* x,       // (N, C)
                                             const bf16* wte,     // (V, C)
                                             const int* targets,  // (N) device
                                             int N, int C, int V, float dloss,
                                             void* scratch,       // classifier_scratch_bytes(N, V)
                                             cudaStream_t stream, PointerMixCuda mix = {}) {
    if (C % 8 != 0) fatal("classifier: C = %d must be a multiple of 8", C);
    if (!is_aligned16(scratch)) fatal("classifier: scratch must be 16-byte aligned");
    const int ldl = classifier_ldl(V);
    const int V1 = g_classifier_split > 0 ? V / g_classifier_split * g_classifier_split : V;
    const bool grad = dx || dwte;
    float* logits = (float*)scratch;
    const bf16* dlogits = (const bf16*)scratch;
    for (int n0 = 0; n0 < N; n0 += g_classifier_chunk) {
        const int rows = N - n0 < g_classifier_chunk ? N - n0 : g_classifier_chunk;
        const bf16* xc = x + (size_t)n0 * C;
        // logits^T (V, rows) = wte (stored (C, V), transposed) @ x_chunk^T (C, rows), vocabulary rows
        // [0, V1) and [V1, V).
        for (int part = 0; part < 2; part++) {
            const int v0 = part ? V1 : 0, nv = part ? V - V1 : V1;
            if (nv == 0) continue;
            matmul_cublaslt_or_die(logits + v0, CUDA_R_32F, ldl, wte + (size_t)v0 * C, true, C, xc, false, C, nv, rows, C, 0.0f,
                                   CUBLASLT_EPILOGUE_DEFAULT, nullptr, stream);
        }
        PointerMixCuda chunk_mix;
        if (mix.gate) chunk_mix = {mix.gate + n0, mix.pcopy + n0, mix.w ? mix.w + n0 : nullptr};
        crossentropy_forward_backward_kernel<<<rows, CE_THREADS, 0, stream>>>(logits, losses + n0, targets + n0, V, ldl,
                                                                              dloss, grad, chunk_mix);
        CUDA_CHECK_LAST();
        if (dx) {
            // dx_chunk^T (C, rows) = wte (stored (C, V)) @ dlogits^T (V, rows), ld 2*ldl. The short
            // tail [V1, V) goes first (beta 0), the main part adds to it (beta 1): dx is rounded to
            // bf16 once more, but the tail holds only V - V1 of the V terms.
            bf16* dxc = dx + (size_t)n0 * C;
            if (V1 < V)
                matmul_cublaslt_or_die(dxc, CUDA_R_16BF, C, wte + (size_t)V1 * C, false, C, dlogits + V1, false, 2 * ldl, C, rows,
                                       V - V1, 0.0f, CUBLASLT_EPILOGUE_DEFAULT, nullptr, stream);
            if (V1 > 0)
                matmul_cublaslt_or_die(dxc, CUDA_R_16BF, C, wte, false, C, dlogits, false, 2 * ldl, C, rows, V1,
                                       V1 < V ? 1.0f : 0.0f, CUBLASLT_EPILOGUE_DEFAULT, nullptr, stream);
        }
        if (dwte)  // dwte^T (C, V) += x_chunk^T (C, rows) @ dlogits (rows, V): stored (V, rows), transposed.
            for (int part = 0; part < 2; part++) {
                const int v0 = part ? V1 : 0, nv = part ? V - V1 : V1;
                if (nv == 0) continue;
                matmul_cublaslt_or_die(dwte + (size_t)v0 * C, CUDA_R_32F, C, xc, false, C, dlogits + v0, true, 2 * ldl, C, nv,
                                       rows, 1.0f, CUBLASLT_EPILOGUE_DEFAULT, nullptr, stream);
            }
    }
}

// Logits (V) fp32 of one row, for sampling: out = wte @ x_row.
inline void logits_cuda(float* out,          // (V)
                        const bf16* x_row,   // (C)
                        const bf16* wte,     // (V, C)
                        int C, int V, cudaStream_t stream) {
    const int V1 = g_classifier_split > 0 ? V / g_classifier_split * g_classifier_split : V;
    for (int part = 0; part < 2; part++) {
        const int v0 = part ? V1 : 0, nv = part ? V - V1 : V1;
        if (nv == 0) continue;
        matmul_cublaslt_or_die(out + v0, CUDA_R_32F, V, wte + (size_t)v0 * C, true, C, x_row, false, C, nv, 1, C, 0.0f,
                               CUBLASLT_EPILOGUE_DEFAULT, nullptr, stream);
    }
}
