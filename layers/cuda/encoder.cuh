// Token embedding on the GPU (CPU reference: layers/encoder.h).
// Forward is a gather. Backward is deterministic without float atomics: the (token, position)
// pairs are radix-sorted on the device (stable, so equal tokens keep increasing position), then
// each distinct token's rows are summed in that fixed order by one warp (short runs) or one
// block (runs over 64 rows) and the sum is added into dwte.
// No host sync and no host copy of the tokens; the sort's buffers come from the stream-ordered
// allocator (cudaMallocAsync), so the backward also works inside a captured CUDA graph.
#pragma once
#include <cub/device/device_radix_sort.cuh>
#include "layers/cuda/common.cuh"
#include "layers/cuda/pack.cuh"

// ------------------------------------------------------------------------------------------------
// Kernels

__global__ void encoder_forward_kernel(bf16* out,          // (N, C)
                                       const int* tokens,  // (N)
                                       const bf16* wte,    // (V, C)
                                       int N, int C) {
    const int per_row = C / 8;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)N * per_row) return;
    const int n = (int)(idx / per_row), c = (int)(idx % per_row) * 8;
    store128(out + (size_t)n * C + c, load128(wte + (size_t)tokens[n] * C + c));
}

__global__ void encoder_iota_kernel(int* idx, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) idx[i] = i;
}

// Runs of at most ENC_SHORT_MAX equal tokens (nearly all of them in text): one warp per run,
// lane l owning 8 columns of each 256-column tile, rows summed in sorted (= position) order.
// Longer runs are listed (in any order: each is summed by one block, so the result does not
// depend on the list's order) for encoder_backward_long_kernel.
constexpr int ENC_SHORT_MAX = 64;
constexpr int ENC_WARPS = 8;
__global__ void __launch_bounds__(32 * ENC_WARPS)
    encoder_backward_kernel(float* dwte,               // (V, C) +=
                            int* long_runs,            // (N) start index of each long run
                            int* n_long,               // number of long runs (zeroed by the launcher)
                            const bf16* dout,          // (N, C)
                            const int* sorted_tokens,  // (N) ascending
                            const int* sorted_rows,    // (N) row of each sorted token
                            int N, int C) {
    const int i = blockIdx.x * ENC_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (i >= N) return;
    const int token = sorted_tokens[i];
    if (i > 0 && sorted_tokens[i - 1] == token) return;  // not the first of its run
    // End of the run among the next ENC_SHORT_MAX keys, 32 at a time.
    int end = -1;
    for (int base = i + 1; base <= i + ENC_SHORT_MAX; base += 32) {
        const int k = base + lane;
        const unsigned differ = __ballot_sync(0xffffffffu, k >= N || sorted_tokens[k] != token);
        if (differ) {
            end = base + __ffs(differ) - 1;
            break;
        }
    }
    if (end < 0) {
        if (lane == 0) long_runs[atomicAdd(n_long, 1)] = i;
        return;
    }
    for (int c = lane * 8; c < C; c += 256) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll 4
        for (int k = i; k < end; k++) {
            const x128 d = load128(dout + (size_t)sorted_rows[k] * C + c);
            for (int j = 0; j < 8; j++) acc[j] += __bfloat162float(d[j]);
        }
        float* dst = dwte + (size_t)token * C + c;
        f128 d0 = load128(dst), d1 = load128(dst + 4);
        for (int j = 0; j < 4; j++) d0[j] += acc[j], d1[j] += acc[j + 4];
        store128(dst, d0);
        store128(dst + 4, d1);
    }
}

// Long runs: block (32, ENC_LANES) per run and 256-column tile (blockIdx.y); lane y sums rows
// y, y+LANES, ... of the run, then the lanes are combined in the fixed order 0..LANES-1.
constexpr int ENC_LANES = 16;
constexpr int ENC_LONG_BLOCKS = 64;
__global__ void __launch_bounds__(32 * ENC_LANES)
    encoder_backward_long_kernel(float* dwte,               // (V, C) +=
                                 const int* long_runs,      // (n_long)
                                 const int* n_long,
                                 const bf16* dout,          // (N, C)
                                 const int* sorted_tokens,  // (N)
                                 const int* sorted_rows,    // (N)
                                 int N, int C) {
    __shared__ float partial[ENC_LANES][32 * 8];
    const int count = *n_long;
    const int c = blockIdx.y * 256 + threadIdx.x * 8;
    for (int r = blockIdx.x; r < count; r += gridDim.x) {
        const int i = long_runs[r], token = sorted_tokens[i];
        int lo = i + 1, hi = N;  // first index past the run (keys sorted)
        while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if (sorted_tokens[mid] == token) lo = mid + 1;
            else hi = mid;
        }
        const int end = lo;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (c < C) {
#pragma unroll 4
            for (int k = i + threadIdx.y; k < end; k += ENC_LANES) {
                const x128 d = load128(dout + (size_t)sorted_rows[k] * C + c);
                for (int j = 0; j < 8; j++) acc[j] += __bfloat162float(d[j]);
            }
        }
        for (int j = 0; j < 8; j++) partial[threadIdx.y][threadIdx.x * 8 + j] = acc[j];
        __syncthreads();
        if (threadIdx.y == 0 && c < C) {
            float* dst = dwte + (size_t)token * C + c;
            f128 d0 = load128(dst), d1 = load128(dst + 4);
            for (int j = 0; j < 8; j++) {
                float s = 0;
                for (int y = 0; y < ENC_LANES; y++) s += partial[y][threadIdx.x * 8 + j];
                if (j < 4) d0[j] += s;
                else d1[j - 4] += s;
            }
            store128(dst, d0);
            store128(dst + 4, d1);
        }
        __syncthreads();  // partial is reused by the next run
    }
}

// ------------------------------------------------------------------------------------------------
// Launchers. C must be a multiple of 8 and the pointers 16-byte aligned (cudaMalloc'd buffers and
// row offsets of such a C are).

inline void encoder_check_shape_(int C, const void* a, const void* b) {
    if (C % 8 != 0) fatal("encoder: C = %d must be a multiple of 8 (16-byte vector access)", C);
    if (!is_aligned16(a) || !is_aligned16(b)) fatal("encoder: buffers must be 16-byte aligned");
}

inline void encoder_forward_cuda(bf16* out,          // (B, T, C)
                                 const int* tokens,  // (B, T) device
                                 const bf16* wte,    // (V, C)
                                 int B, int T, int C, cudaStream_t stream) {
    encoder_check_shape_(C, out, wte);
    const long long total = (long long)B * T * (C / 8);
    if (total == 0) return;
    const int block = 256;
    encoder_forward_kernel<<<ceil_div(total, block), block, 0, stream>>>(out, tokens, wte, B * T, C);
    CUDA_CHECK_LAST();
}

// The stream-ordered pool keeps its memory between calls (release threshold raised once per
// device): otherwise every backward would map and unmap the sort's buffers.
inline void encoder_keep_pool_memory_() {
    static bool done[64] = {};
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 64 && done[dev]) return;
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    uint64_t keep = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    if (dev < 64) done[dev] = true;
}

// Deterministic (sort + per-token sums in position order, no float atomics). A token repeated
// R > 64 times costs about R/16 dependent steps in one block: fine for text (the most frequent
// token of a 32K batch: ~1-2K rows), slow only if one token fills most of a very long batch.
inline void encoder_backward_cuda(float* dwte,        // (V, C) +=
                                  const bf16* dout,   // (B, T, C)
                                  const int* tokens,  // (B, T) device
                                  int B, int T, int C, cudaStream_t stream) {
    encoder_check_shape_(C, dwte, dout);
    const int N = B * T;
    if (N == 0) return;
    encoder_keep_pool_memory_();
    size_t sort_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (const int*)nullptr, (int*)nullptr,
                                               (const int*)nullptr, (int*)nullptr, N, 0, 31, stream));
    const size_t ints = (size_t)4 * N + 1;  // sorted tokens, rows, sorted rows, long runs, their count
    const size_t head = (ints * sizeof(int) + 255) / 256 * 256;
    char* buf = nullptr;
    CUDA_CHECK(cudaMallocAsync((void**)&buf, head + sort_bytes, stream));
    int* sorted_tokens = (int*)buf;
    int* rows = sorted_tokens + N;
    int* sorted_rows = rows + N;
    int* long_runs = sorted_rows + N;
    int* n_long = long_runs + N;
    encoder_iota_kernel<<<ceil_div(N, 256), 256, 0, stream>>>(rows, N);
    CUDA_CHECK_LAST();
    // Token ids are non-negative ints: 31 key bits. Radix sort is stable.
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(buf + head, sort_bytes, tokens, sorted_tokens, rows, sorted_rows, N, 0,
                                               31, stream));
    CUDA_CHECK(cudaMemsetAsync(n_long, 0, sizeof(int), stream));
    encoder_backward_kernel<<<ceil_div(N, ENC_WARPS), 32 * ENC_WARPS, 0, stream>>>(dwte, long_runs, n_long, dout,
                                                                                   sorted_tokens, sorted_rows, N, C);
    CUDA_CHECK_LAST();
    dim3 grid(ENC_LONG_BLOCKS, ceil_div(C, 256)), block(32, ENC_LANES);
    encoder_backward_long_kernel<<<grid, block, 0, stream>>>(dwte, long_runs, n_long, dout, sorted_tokens, sorted_rows, N, C);
    CUDA_CHECK_LAST();
    CUDA_CHECK(cudaFreeAsync(buf, stream));
}
