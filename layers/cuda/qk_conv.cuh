// The causal depthwise convolution on q and k on the GPU (CPU reference and its contract:
// layers/qk_conv.h): bf16 in and out, fp32 sums. W is small and a token's W source rows are the
// ones its neighbours read too, so the forward and the input gradient are memory-bound gathers from
// cache: one thread per (row, group of V adjacent channels), V = 8 (16-byte accesses) where C and
// the buffers allow it, else 2, else 1. The weight gradient is deterministic without atomics: each
// block sums a slab of rows for its channels and up to 8 weight rows into a partial of its own,
// and a second kernel adds the slabs in a fixed order; the slabs are a function of the shapes only
// (never of the GPU or of V), so every run and every GPU rounds dweight the same way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include "layers/cuda/common.cuh"

constexpr int QK_CONV_MAX_W = 64;       // the widest window the launchers take
constexpr int QK_CONV_THREADS = 256;    // threads per block of the gathers
constexpr int QK_CONV_DW_J = 8;         // weight rows one thread of the dW partials accumulates
constexpr int QK_CONV_DW_THREADS = 128; // threads per block of the dW partials
constexpr int QK_CONV_RED_LANES = 16;   // partial-sum lanes per column of the dW reduction

// ------------------------------------------------------------------------------------------------
// V adjacent bf16 moved as one word (2, 4 or 16 bytes): the launchers check that C is a multiple
// of V and every buffer is aligned to 2V bytes, so each row's groups are too.

template <int V> struct QkConvWord;
template <> struct QkConvWord<1> { typedef unsigned short type; };
template <> struct QkConvWord<2> { typedef unsigned int type; };
template <> struct QkConvWord<8> { typedef uint4 type; };

template <int V>
struct alignas(2 * V) QkConvPack {
    bf16 h[V];
};

template <int V>
__device__ __forceinline__ void qk_conv_load(float (&f)[V], const bf16* p) {
    typedef typename QkConvWord<V>::type Word;
    QkConvPack<V> x;
    *reinterpret_cast<Word*>(&x) = *reinterpret_cast<const Word*>(p);
#pragma unroll
    for (int i = 0; i < V; i++) f[i] = __bfloat162float(x.h[i]);
}
template <int V>
__device__ __forceinline__ void qk_conv_store(bf16* p, const float (&f)[V]) {
    typedef typename QkConvWord<V>::type Word;
    QkConvPack<V> x;
#pragma unroll
    for (int i = 0; i < V; i++) x.h[i] = __float2bfloat16(f[i]);
    *reinterpret_cast<Word*>(p) = *reinterpret_cast<const Word*>(&x);
}
template <int V>
__device__ __forceinline__ void qk_conv_copy(bf16* dst, const bf16* src) {
    typedef typename QkConvWord<V>::type Word;
    *reinterpret_cast<Word*>(dst) = *reinterpret_cast<const Word*>(src);
}

// ------------------------------------------------------------------------------------------------
// Kernels. rows = B T; a row's 3C channels are q, k, v; groups of V never straddle q, k and v.

// Grid-stride over (row, group of 3C / V): q and k convolved, v copied, raw the q and k copied.
template <int V>
__global__ void __launch_bounds__(QK_CONV_THREADS)
    qk_conv_forward_kernel(bf16* out, bf16* raw, const bf16* inp, const bf16* hist, const bf16* weight, const int* pos,
                           const int* doc_start, int T, int C, int W, long long rows) {
    const int groups = 3 * C / V;
    const long long total = rows * groups;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (long long)gridDim.x * blockDim.x) {
        const long long bt = idx / groups;
        const int c = (int)(idx - bt * groups) * V, t = (int)(bt % T);
        const size_t row = (size_t)bt * 3 * C;
        if (c >= 2 * C) {
            qk_conv_copy<V>(out + row + c, inp + row + c);
            continue;
        }
        // The furthest token back this one reads: its document's start, and the window's first
        // row unless a history holds the rows before it (the reference stops at the same j).
        long long last = W - 1;
        if (doc_start) last = min(last, (long long)pos[t] - doc_start[bt]);
        if (!hist) last = min(last, (long long)t);
        float acc[V];
#pragma unroll
        for (int i = 0; i < V; i++) acc[i] = 0.0f;
        for (int j = 0; j <= (int)last; j++) {
            const bf16* x = t >= j ? inp + row - (size_t)j * 3 * C
                                   : hist + ((size_t)(bt / T) * (W - 1) + (W - 1) + (t - j)) * 2 * C;
            float xv[V], wv[V];
            qk_conv_load<V>(xv, x + c);
            qk_conv_load<V>(wv, weight + (size_t)j * 2 * C + c);
#pragma unroll
            for (int i = 0; i < V; i++) acc[i] += wv[i] * xv[i];
        }
        qk_conv_store<V>(out + row + c, acc);
        if (raw) qk_conv_copy<V>(raw + (size_t)bt * 2 * C + c, inp + row + c);
    }
}

// Grid-stride over (row, group of 3C / V): the q/k input gradient, gathered from the W later
// tokens u = t + j of its own sequence that read this one, overwritten; v's gradient copied.
template <int V>
__global__ void __launch_bounds__(QK_CONV_THREADS)
    qk_conv_backward_dx_kernel(bf16* dinp, const bf16* dout, const bf16* weight, const int* pos, const int* doc_start, int T,
                               int C, int W, long long rows) {
    const int groups = 3 * C / V;
    const long long total = rows * groups;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (long long)gridDim.x * blockDim.x) {
        const long long bt = idx / groups;
        const int c = (int)(idx - bt * groups) * V, t = (int)(bt % T);
        const size_t row = (size_t)bt * 3 * C;
        if (c >= 2 * C) {
            qk_conv_copy<V>(dinp + row + c, dout + row + c);
            continue;
        }
        float acc[V];
#pragma unroll
        for (int i = 0; i < V; i++) acc[i] = 0.0f;
        for (int j = 0; j < W && t + j < T; j++) {
            // Token t + j reads this one only if its document started at or before t's position.
            if (doc_start && (long long)pos[t + j] - j < doc_start[bt + j]) continue;
            float dv[V], wv[V];
            qk_conv_load<V>(dv, dout + row + (size_t)j * 3 * C + c);
            qk_conv_load<V>(wv, weight + (size_t)j * 2 * C + c);
#pragma unroll
            for (int i = 0; i < V; i++) acc[i] += wv[i] * dv[i];
        }
        qk_conv_store<V>(dinp + row + c, acc);
    }
}

// Block (x, y, z): channels [x 128 V, +128 V) of q|k, rows [y slab, +slab), weight rows
// [8 z, 8 z + 8) of W. Each thread sums its rows in order into registers and writes its partial
// (zeros included: the reduction reads every slab) to partials (G, W, 2C).
template <int V>
__global__ void __launch_bounds__(QK_CONV_DW_THREADS)
    qk_conv_backward_dw_partials_kernel(float* partials, const bf16* dout, const bf16* raw, const int* pos, const int* doc_start,
                                        int T, int C, int W, long long rows, long long slab) {
    const int c = (blockIdx.x * QK_CONV_DW_THREADS + threadIdx.x) * V, j0 = blockIdx.z * QK_CONV_DW_J;
    if (c >= 2 * C) return;
    const long long r0 = (long long)blockIdx.y * slab, r1 = min(rows, r0 + slab);
    float acc[QK_CONV_DW_J][V];
#pragma unroll
    for (int jj = 0; jj < QK_CONV_DW_J; jj++)
#pragma unroll
        for (int i = 0; i < V; i++) acc[jj][i] = 0.0f;
    for (long long bt = r0; bt < r1; bt++) {
        const int t = (int)(bt % T);
        long long last = t;  // the furthest row back that row bt read (as in the forward)
        if (doc_start) last = min(last, (long long)pos[t] - doc_start[bt]);
        if (last < j0) continue;
        float dv[V];
        qk_conv_load<V>(dv, dout + (size_t)bt * 3 * C + c);
#pragma unroll
        for (int jj = 0; jj < QK_CONV_DW_J; jj++) {
            const int j = j0 + jj;
            if (j >= W || j > last) break;
            float xv[V];
            qk_conv_load<V>(xv, raw + (size_t)(bt - j) * 2 * C + c);
#pragma unroll
            for (int i = 0; i < V; i++) acc[jj][i] += dv[i] * xv[i];
        }
    }
#pragma unroll
    for (int jj = 0; jj < QK_CONV_DW_J; jj++) {
        if (j0 + jj >= W) break;
        float* p = partials + ((size_t)blockIdx.y * W + j0 + jj) * 2 * C + c;
#pragma unroll
        for (int i = 0; i < V; i++) p[i] = acc[jj][i];
    }
}

// Columns [32 blockIdx.x, +32) of the n = W 2C weight gradients: lane y of block (32, 16) sums the
// slabs y, y + 16, ... in order, then lane 0 adds the 16 lane sums in order (deterministic).
__global__ void __launch_bounds__(32 * QK_CONV_RED_LANES)
    qk_conv_backward_dw_reduce_kernel(float* dweight, const float* partials, int G, long long n) {
    __shared__ float part[QK_CONV_RED_LANES][32];
    const long long i = (long long)blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (i < n)
        for (int g = threadIdx.y; g < G; g += QK_CONV_RED_LANES) s += partials[(size_t)g * n + i];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y != 0 || i >= n) return;
    float sum = 0.0f;
    for (int y = 0; y < QK_CONV_RED_LANES; y++) sum += part[y][threadIdx.x];
    dweight[i] += sum;
}

// Thread per (sequence, group of 2C / V): its channels of the W - 1 history rows, rows in
// ascending order. Row r takes old row r + n (n > 0, so not yet overwritten: an earlier step of
// this thread wrote only rows below r) or an input row; no other thread touches these channels,
// so the in-place shift needs no barrier.
template <int V>
__global__ void qk_conv_keep_tail_kernel(bf16* hist, const bf16* inp, int B, int n, int C, int W) {
    const int groups = 2 * C / V, keep = W - 1;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * groups) return;
    const long long b = idx / groups;
    const int c = (int)(idx - b * groups) * V;
    bf16* h = hist + (size_t)b * keep * 2 * C + c;
    const int from_old = max(0, keep - n);  // old rows that stay, moved to the front
    for (int r = 0; r < from_old; r++) qk_conv_copy<V>(h + (size_t)r * 2 * C, h + (size_t)(r + n) * 2 * C);
    for (int r = from_old; r < keep; r++)
        qk_conv_copy<V>(h + (size_t)r * 2 * C, inp + ((size_t)b * n + n - keep + r) * 3 * C + c);
}

// ------------------------------------------------------------------------------------------------
// Launchers

// Elements per access: 8 where C and every given buffer allow 16-byte accesses, else 2, else 1.
inline int qk_conv_vec_(int C, std::initializer_list<const void*> buffers) {
    auto aligned = [&](uintptr_t mask) {
        for (const void* p : buffers)
            if ((uintptr_t)p & mask) return false;
        return true;
    };
    if (C % 8 == 0 && aligned(15)) return 8;
    if (C % 2 == 0 && aligned(3)) return 2;
    return 1;
}

// f(std::integral_constant<int, V>) for the V chosen above.
template <class F>
inline void qk_conv_dispatch_(int vec, F f) {
    if (vec == 8) f(std::integral_constant<int, 8>());
    else if (vec == 2) f(std::integral_constant<int, 2>());
    else f(std::integral_constant<int, 1>());
}

inline void qk_conv_check_(const char* what, int B, int T, int C, int W) {
    if (W < 2 || W > QK_CONV_MAX_W)
        fatal("%s: window W = %d must be 2..%d (the history holds W - 1 >= 1 rows; wider windows are not built)", what, W,
              QK_CONV_MAX_W);
    if (B < 0 || T < 0 || C < 1) fatal("%s: sizes B = %d, T = %d, C = %d must be >= 0, >= 0, >= 1", what, B, T, C);
}

// Blocks of a grid-stride gather over `total` threads' work (capped: beyond it threads loop).
inline int qk_conv_blocks_(long long total) {
    const long long blocks = (total + QK_CONV_THREADS - 1) / QK_CONV_THREADS;
    return (int)(blocks < (1 << 20) ? blocks : (1 << 20));
}

// Slabs of rows of the dW partials: about 1024 blocks, counted at V = 8 whatever V the buffers
// allow, and at least 32 rows a slab. A function of the shapes only (the summation order).
inline int qk_conv_dw_slabs(int B, int T, int C, int W) {
    const long long rows = (long long)B * T;
    const long long cols = ((long long)2 * C + 8 * QK_CONV_DW_THREADS - 1) / (8 * QK_CONV_DW_THREADS);
    const long long chunks = (W + QK_CONV_DW_J - 1) / QK_CONV_DW_J;
    long long g = 1024 / (cols * chunks);
    g = g < (rows + 31) / 32 ? g : (rows + 31) / 32;
    return (int)(g > 1 ? g : 1);
}

inline size_t qk_conv_backward_scratch_bytes(int B, int T, int C, int W) {
    return (size_t)qk_conv_dw_slabs(B, T, C, W) * W * 2 * C * sizeof(float);
}

// out, inp (B, T, 3C) bf16 qkv rows; raw (B, T, 2C) or nullptr: a copy of inp's q and k channels;
// hist (B, W-1, 2C) or nullptr (oldest row first; what tokens before the window read, else 0);
// weight (W, 2C) bf16: row j is the weight on the token j before; pos (T) device ints (global
// positions), doc_start (B, T) device ints or nullptr (a token before its document's start reads 0).
// out must not alias inp. v (channels 2C..3C) is copied.
inline void qk_conv_forward_cuda(bf16* out, bf16* raw, const bf16* inp, const bf16* hist, const bf16* weight, const int* pos,
                                 const int* doc_start, int B, int T, int C, int W, cudaStream_t stream) {
    qk_conv_check_("qk_conv_forward", B, T, C, W);
    if (out == inp) fatal("qk_conv_forward: out must not alias inp (a token reads the inputs of the W - 1 before it)");
    const long long rows = (long long)B * T;
    if (rows == 0) return;
    const int vec = qk_conv_vec_(C, {out, raw, inp, hist, weight});
    const int blocks = qk_conv_blocks_(rows * 3 * C / vec);
    qk_conv_dispatch_(vec, [&](auto v) {
        qk_conv_forward_kernel<decltype(v)::value>
            <<<blocks, QK_CONV_THREADS, 0, stream>>>(out, raw, inp, hist, weight, pos, doc_start, T, C, W, rows);
    });
    CUDA_CHECK_LAST();
}

// dinp (B, T, 3C) OVERWRITTEN with the q/k input gradient and dout's v slot; dweight (W, 2C) fp32
// ADDED INTO. dout (B, T, 3C), raw (B, T, 2C) the forward's. No history (training windows). dinp
// must not alias dout. scratch: qk_conv_backward_scratch_bytes(B, T, C, W).
inline void qk_conv_backward_cuda(bf16* dinp, float* dweight, const bf16* dout, const bf16* raw, const bf16* weight, const int* pos,
                                  const int* doc_start, int B, int T, int C, int W, float* scratch, cudaStream_t stream) {
    qk_conv_check_("qk_conv_backward", B, T, C, W);
    if (dinp == dout) fatal("qk_conv_backward: dinp must not alias dout (a token gathers the gradients of the W - 1 after it)");
    const long long rows = (long long)B * T;
    if (rows == 0) return;
    const int vec = qk_conv_vec_(C, {dinp, dout, raw, weight});
    const int blocks = qk_conv_blocks_(rows * 3 * C / vec);
    const int G = qk_conv_dw_slabs(B, T, C, W);
    const long long slab = (rows + G - 1) / G;
    const dim3 grid(ceil_div((long long)2 * C / vec, QK_CONV_DW_THREADS), G, ceil_div(W, QK_CONV_DW_J));
    qk_conv_dispatch_(vec, [&](auto v) {
        constexpr int V = decltype(v)::value;
        qk_conv_backward_dx_kernel<V><<<blocks, QK_CONV_THREADS, 0, stream>>>(dinp, dout, weight, pos, doc_start, T, C, W, rows);
        CUDA_CHECK_LAST();
        qk_conv_backward_dw_partials_kernel<V>
            <<<grid, QK_CONV_DW_THREADS, 0, stream>>>(scratch, dout, raw, pos, doc_start, T, C, W, rows, slab);
        CUDA_CHECK_LAST();
    });
    const long long n = (long long)W * 2 * C;
    qk_conv_backward_dw_reduce_kernel<<<ceil_div(n, 32), dim3(32, QK_CONV_RED_LANES), 0, stream>>>(dweight, scratch, G, n);
    CUDA_CHECK_LAST();
}

// hist (B, W-1, 2C) becomes the last W-1 raw q/k rows of [hist, inp (B, n, 3C)] (decoding: what the
// next chunk's first tokens read); n < W-1 shifts the old rows that stay to the front, in place.
inline void qk_conv_keep_tail_cuda(bf16* hist, const bf16* inp, int B, int n, int C, int W, cudaStream_t stream) {
    qk_conv_check_("qk_conv_keep_tail", B, n, C, W);
    if (B == 0 || n == 0) return;
    const int vec = qk_conv_vec_(C, {hist, inp});
    const long long threads = (long long)B * 2 * C / vec;
    qk_conv_dispatch_(vec, [&](auto v) {
        qk_conv_keep_tail_kernel<decltype(v)::value><<<ceil_div(threads, 128), 128, 0, stream>>>(hist, inp, B, n, C, W);
    });
    CUDA_CHECK_LAST();
}
