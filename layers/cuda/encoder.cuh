// Token embedding on the GPU (CPU reference: layers/encoder.h).
// Forward is a gather. Backward is deterministic without atomics: the (token, position) pairs
// are radix-sorted on the device (stable, so equal tokens keep increasing position), then one
// block per distinct token sums its rows in that fixed order and adds the sum into dwte.
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

// Block (32, ENC_LANES) per run start in the sorted tokens; blockIdx.y picks 256 columns.
// Lane y sums rows y, y+LANES, ... of the run (several independent loads in flight), then the
// lanes are combined in the fixed order 0..LANES-1: the same answer on every run.
constexpr int ENC_LANES = 16;
__global__ void __launch_bounds__(32 * ENC_LANES)
    encoder_backward_kernel(float* dwte,               // (V, C) +=
                            const bf16* dout,          // (N, C)
                            const int* sorted_tokens,  // (N) ascending
                            const int* sorted_rows,    // (N) row of each sorted token
                            int N, int C) {
    __shared__ float partial[ENC_LANES][32 * 8];
    const int i = blockIdx.x;
    const int token = sorted_tokens[i];
    if (i > 0 && sorted_tokens[i - 1] == token) return;  // not the first of its run
    // End of the run: first index > i holding a larger token (binary search, keys sorted).
    int lo = i + 1, hi = N;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (sorted_tokens[mid] == token) lo = mid + 1;
        else hi = mid;
    }
    const int end = lo;
    const int c = blockIdx.y * 256 + threadIdx.x * 8;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (c < C) {
#pragma unroll 4
        for (int k = i + threadIdx.y; k < end; k += ENC_LANES) {
            const x128 d = load128(dout + (size_t)sorted_rows[k] * C + c);
#pragma unroll
            for (int j = 0; j < 8; j++) acc[j] += __bfloat162float(d[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) partial[threadIdx.y][threadIdx.x * 8 + j] = acc[j];
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
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

// Deterministic (sort + ordered per-token sums, no atomics). Rows of a token are summed by one
// block, so a token repeated R times costs about R/16 dependent steps: fine for text, slow only
// for pathological batches (one token filling most of a very long sequence).
inline void encoder_backward_cuda(float* dwte,        // (V, C) +=
                                  const bf16* dout,   // (B, T, C)
                                  const int* tokens,  // (B, T) device
                                  int B, int T, int C, cudaStream_t stream) {
    encoder_check_shape_(C, dwte, dout);
    const int N = B * T;
    if (N == 0) return;
    size_t sort_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (const int*)nullptr, (int*)nullptr,
                                               (const int*)nullptr, (int*)nullptr, N, 0, 31, stream));
    const size_t ints = (size_t)3 * N;  // sorted tokens, row indices, sorted row indices
    const size_t bytes = ints * sizeof(int) + 256 + sort_bytes;
    char* buf = nullptr;
    CUDA_CHECK(cudaMallocAsync((void**)&buf, bytes, stream));
    int* sorted_tokens = (int*)buf;
    int* rows = sorted_tokens + N;
    int* sorted_rows = rows + N;
    void* sort_tmp = buf + ((ints * sizeof(int) + 255) / 256) * 256;
    encoder_iota_kernel<<<ceil_div(N, 256), 256, 0, stream>>>(rows, N);
    CUDA_CHECK_LAST();
    // Token ids are non-negative ints: 31 key bits. Radix sort is stable.
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, tokens, sorted_tokens, rows, sorted_rows, N, 0,
                                               31, stream));
    dim3 grid(N, ceil_div(C, 256)), block(32, ENC_LANES);
    encoder_backward_kernel<<<grid, block, 0, stream>>>(dwte, dout, sorted_tokens, sorted_rows, N, C);
    CUDA_CHECK_LAST();
    CUDA_CHECK(cudaFreeAsync(buf, stream));
}
