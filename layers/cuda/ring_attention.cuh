// Ring attention on the GPU: layers/ring_attention.h's driver on device buffers, the flash
// kernels through their two-sided interface (attention_flash_two_sided.h), the same plan
// (layers/ring_plan.h). What differs from the CPU driver is where time goes:
//   - the next step's K/V is sent while this step computes (sendrecv enqueued on the
//     communicator's stream before the compute; the compute stream waits on an event only
//     when it needs the received block);
//   - partial O, L are merged in fp32 (attention_forward_merge_cuda), rounded to bf16 once;
//   - the backward's dK, dV travel in fp32: each pair's bf16 block result is added into the
//     block's fp32 accumulator, so P steps round once each, not P times in a chain.
// Communicators without a stream (the in-process one, comm/in_process.h) complete each call
// before returning; the driver then synchronises its stream before handing them a buffer.
// The calls return with their work queued on `st` (their scratch comes from a per-thread pool).
//
// Local layout as the model holds it: the rank's 2c rows (chunk plan.chunk(r, 0) then
// plan.chunk(r, 1)), q, k, v (B, 2c, H, D) with row stride `stride` (3HD for a QKV buffer);
// out (B, 2c, H, D) bf16; lse (B, H, 2c); doc_start (B, 2c) global positions or nullptr.
#pragma once
#include <algorithm>
#include <map>
#include <vector>
#include "comm/comm.h"
#include "comm/wait_timer.cuh"
#include "layers/cuda/attention_flash_two_sided.h"
#include "layers/cuda/common.cuh"
#include "layers/ring_plan.h"

namespace ring_gpu {

__global__ void add_bf16_to_f32(float* acc, const bf16* x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc[i] += __bfloat162float(x[i]);
}
// (rows, width) fp32 contiguous, `width` of every `src_pitch` -> bf16 rows of `dst_stride`.
__global__ void f32_to_bf16_rows(bf16* dst, int dst_stride, const float* src, int src_pitch, size_t rows, int width) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * width; i += (size_t)gridDim.x * blockDim.x)
        dst[i / width * dst_stride + i % width] = __float2bfloat16(src[i / width * src_pitch + i % width]);
}
inline unsigned grid_for(size_t n) { return (unsigned)std::min<size_t>((n + 255) / 256, 4096); }

// Rows [k c, (k+1) c) of each batch row of a (B, 2c, *) array of row stride src_stride, `width`
// elements each, into a (B, c, dst_stride) array (or back: to_local).
template <typename T>
void copy_chunk(T* chunk, int chunk_stride, T* local, int local_stride, int B, int c, int k, int width, bool to_local,
                cudaStream_t st) {
    for (int b = 0; b < B; b++) {
        T* l = local + ((size_t)b * 2 * c + (size_t)k * c) * local_stride;
        T* h = chunk + (size_t)b * c * chunk_stride;
        if (to_local)
            CUDA_CHECK(cudaMemcpy2DAsync(l, local_stride * sizeof(T), h, chunk_stride * sizeof(T), width * sizeof(T), c,
                                         cudaMemcpyDeviceToDevice, st));
        else
            CUDA_CHECK(cudaMemcpy2DAsync(h, chunk_stride * sizeof(T), l, local_stride * sizeof(T), width * sizeof(T), c,
                                         cudaMemcpyDeviceToDevice, st));
    }
}

// Device memory of one call, from a pool kept per host thread: a ring call per layer per step
// asks for the same sizes again and again, and cudaMalloc/cudaFree each time would cost time and
// synchronise the device (cudaFree waits for all work). A buffer goes back to the pool when the
// call returns, possibly while kernels that use it are still queued: whatever takes it next is
// ordered after them (the same stream, or the communicator's stream behind an event on it).
// ring_pool_release() frees the calling thread's pool (a thread that ends without it leaks it).
// ring_pool_bytes() is what the calling thread's pool has cudaMalloc'd and not freed (requested
// bytes; cudaMalloc's own rounding comes on top), whether the buffers are taken or in the pool.
inline std::multimap<size_t, void*>& ring_pool() {
    static thread_local std::multimap<size_t, void*> pool;
    return pool;
}
inline size_t& ring_pool_malloced() {
    static thread_local size_t bytes = 0;
    return bytes;
}
inline void* ring_pool_alloc(size_t bytes) {
    auto& pool = ring_pool();
    auto it = pool.find(bytes);
    if (it != pool.end()) {
        void* p = it->second;
        pool.erase(it);
        return p;
    }
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    ring_pool_malloced() += bytes;
    return p;
}

template <typename T>
struct Buf {
    T* p = nullptr;
    size_t n = 0;
    Buf() = default;
    explicit Buf(size_t n_) : n(n_) { p = (T*)ring_pool_alloc(bytes()); }
    Buf(Buf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
    Buf& operator=(Buf&& o) noexcept {
        std::swap(p, o.p);
        std::swap(n, o.n);
        return *this;
    }
    ~Buf() {
        if (p) ring_pool().emplace(bytes(), p);
    }
    size_t bytes() const { return std::max<size_t>(n, 1) * sizeof(T); }
};

// 0, 1, ..., n-1 on the device, kept per thread (every chunk's positions are a slice of it).
inline const int* ring_positions(size_t n, cudaStream_t st) {
    static thread_local int* pos = nullptr;
    static thread_local size_t have = 0;
    if (n > have) {
        CUDA_CHECK(cudaStreamSynchronize(st));  // kernels of earlier calls may still read the old one
        cudaFree(pos);
        std::vector<int> h(n);
        for (size_t i = 0; i < n; i++) h[i] = (int)i;
        CUDA_CHECK(cudaMalloc(&pos, n * sizeof(int)));
        // On st: a plain cudaMemcpy from pageable memory may return before the data lands, and
        // nothing would order a non-blocking stream's kernels after it.
        CUDA_CHECK(cudaMemcpyAsync(pos, h.data(), n * sizeof(int), cudaMemcpyHostToDevice, st));
        have = n;
    }
    return pos;
}

}  // namespace ring_gpu

inline void ring_pool_release() {
    CUDA_CHECK(cudaDeviceSynchronize());
    for (auto& kv : ring_gpu::ring_pool()) {
        cudaFree(kv.second);
        ring_gpu::ring_pool_malloced() -= kv.first;  // buffers still taken stay counted: they come back
    }
    ring_gpu::ring_pool().clear();
}
inline size_t ring_pool_bytes() { return ring_gpu::ring_pool_malloced(); }

namespace ring_gpu {

// The ring's transfers, ordered after the compute so far, and the compute after them. Only
// transfers that move bytes are ordered: a phase that moves none (a dilated ring whose chunks
// stay home) leaves the two streams alone: each phase's events would make the compute stream
// stand still for nothing (see notes/training.md, the ring's idle events).
struct CommOrder {
    Comm& comm;
    cudaStream_t compute;
    cudaEvent_t ev;
    bool ordered = true;  // the transfers from here on already wait for the compute they need
    bool moved = false;   // a transfer was queued since the last after_comm
    CommOrder(Comm& c, cudaStream_t s) : comm(c), compute(s) { CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)); }
    ~CommOrder() { cudaEventDestroy(ev); }
    cudaStream_t comm_stream() const { return (cudaStream_t)comm.stream(); }
    void before_comm() { ordered = false; }  // buffers the compute stream has written by now may be sent
    void sendrecv(const void* src, size_t send_bytes, int to, void* dst, size_t recv_bytes, int from) {
        if (!send_bytes && !recv_bytes) return;
        if (!ordered) {
            if (comm_stream()) {
                CUDA_CHECK(cudaEventRecord(ev, compute));
                CUDA_CHECK(cudaStreamWaitEvent(comm_stream(), ev, 0));
            } else {
                CUDA_CHECK(cudaStreamSynchronize(compute));
            }
            ordered = true;
        }
        moved = true;
        comm.sendrecv(src, send_bytes, to, dst, recv_bytes, from);
    }
    void after_comm() {  // the compute stream may now read what was received
        if (!moved) return;
        moved = false;
        if (!comm_stream()) return;
        CUDA_CHECK(cudaEventRecord(ev, comm_stream()));
        comm_wait_timer().wait(compute, ev);  // train --time-comm counts how long it stands still
    }
};

// The inputs of one rank, chunk by chunk, and the global positions of every chunk.
struct RingInputs {
    const RingPlan& plan;
    int r, B, H, D, HD, c;
    AttnDims dm;
    const int* pos;        // (N): 0..N-1, chunk i's positions start at pos + i c (ring_positions)
    Buf<bf16> q[2];        // (B, c, H, D)
    Buf<int> doc[2];       // (B, c) or empty
    Buf<bf16> kv[2];       // (B, c, 2, H, D): this rank's own K/V chunks
    RingInputs(const RingPlan& p, int rank, const bf16* qq, const bf16* kk, const bf16* vv, int stride,
               const int* doc_start, int B_, int H_, int D_, cudaStream_t st)
        : plan(p), r(rank), B(B_), H(H_), D(D_), HD(H_ * D_), c(p.c), dm{B_, H_, D_, p.N}, pos(ring_positions(p.N, st)) {
        for (int j = 0; j < 2; j++) {
            q[j] = Buf<bf16>((size_t)B * c * HD);
            kv[j] = Buf<bf16>((size_t)B * c * 2 * HD);
            copy_chunk(q[j].p, HD, const_cast<bf16*>(qq), stride, B, c, j, HD, false, st);
            copy_chunk(kv[j].p, 2 * HD, const_cast<bf16*>(kk), stride, B, c, j, HD, false, st);
            copy_chunk(kv[j].p + HD, 2 * HD, const_cast<bf16*>(vv), stride, B, c, j, HD, false, st);
            if (doc_start) {
                doc[j] = Buf<int>((size_t)B * c);
                copy_chunk(doc[j].p, 1, const_cast<int*>(doc_start), 1, B, c, j, 1, false, st);
            }
        }
    }
    int qchunk(int j) const { return plan.chunk(r, j); }
    AttnQueries<bf16> queries(int j) const {
        const int qc = qchunk(j);
        return AttnQueries<bf16>{q[j].p, HD, c, pos + plan.pos0(qc), doc[j].p, plan.pos0(qc)};
    }
    AttnKeys<bf16> keys(const bf16* kvchunk, int kc) const {
        return AttnKeys<bf16>{kvchunk, kvchunk + HD, 2 * HD, c, pos + plan.pos0(kc), plan.pos0(kc)};
    }
    size_t chunk_kv() const { return (size_t)B * c * 2 * HD; }
};

// A local plan (RingPlan::local): each of the rank's chunks attends only itself, so each chunk
// of each batch row is one attention call on its own rows, in place: out and dq, dk, dv written
// once, in bf16, nothing received, no fp32 partial outputs or dK/dV accumulators. The lse of a
// chunk is (H, c) in a call's layout and (H, 2c)-strided in the ring's, hence L.
struct LocalChunk {
    size_t row;  // its first local row: b 2c + j c
    AttnQueries<bf16> qs;
    AttnKeys<bf16> ks;
};
inline LocalChunk local_chunk(const RingPlan& plan, int r, int b, int j, const bf16* q, const bf16* k, const bf16* v,
                              int stride, const int* doc_start, const int* pos) {
    const int c = plan.c, p0 = plan.pos0(plan.chunk(r, j));
    const size_t row = (size_t)b * 2 * c + (size_t)j * c;
    return {row, AttnQueries<bf16>{q + row * stride, stride, c, pos + p0, doc_start ? doc_start + row : nullptr, p0},
            AttnKeys<bf16>{k + row * stride, v + row * stride, stride, c, pos + p0, p0}};
}
inline float* lse_rows(float* lse, const RingPlan& plan, int b, int j, int H) {
    return lse + (size_t)b * H * 2 * plan.c + (size_t)j * plan.c;
}
// What the general ring would have recorded: nothing sent, the plain ring's bytes, 4P pairs.
inline RingStats local_stats(const RingPlan& plan, int r, int B, int H, int D) {
    RingStats st;
    const long long nkv = (long long)B * plan.c * 2 * H * D, P = plan.P;
    st.fwd_bytes_plain = (P - 1) * 2 * nkv * (long long)sizeof(bf16);
    st.bwd_bytes_plain = (P - 1) * 2 * nkv * (long long)(sizeof(bf16) + sizeof(float)) + 2 * nkv * (long long)sizeof(float);
    st.pairs_plain = 4 * plan.P;
    for (int j = 0; j < 2; j++) st.pairs += plan.pair_meets(plan.chunk(r, j), plan.chunk(r, j));
    return st;
}

inline void local_forward(const RingPlan& plan, int r, bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                          int stride, const int* doc_start, int B, int H, int D, float scale, cudaStream_t st) {
    const int c = plan.c, HD = H * D;
    const int* pos = ring_positions(plan.N, st);
    const AttnDims dm{1, H, D, plan.N};
    Buf<float> L((size_t)H * c);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < 2; j++) {
            const LocalChunk ch = local_chunk(plan, r, b, j, q, k, v, stride, doc_start, pos);
            attention_forward_cuda(out + ch.row * HD, L.p, ch.qs, ch.ks, plan.pattern, dm, scale, st);
            CUDA_CHECK(cudaMemcpy2DAsync(lse_rows(lse, plan, b, j, H), 2 * c * sizeof(float), L.p, c * sizeof(float),
                                         c * sizeof(float), H, cudaMemcpyDeviceToDevice, st));
        }
}

inline void local_backward(const RingPlan& plan, int r, bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out,
                           const float* lse, const bf16* q, const bf16* k, const bf16* v, int stride, const int* doc_start,
                           int B, int H, int D, float scale, cudaStream_t st, bool deterministic) {
    const int c = plan.c, HD = H * D;
    const int* pos = ring_positions(plan.N, st);
    const AttnDims dm{1, H, D, plan.N};
    Buf<float> L((size_t)H * c), ws(attention_backward_pieces_workspace_bytes(dm, c) / sizeof(float) + 1);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < 2; j++) {
            const LocalChunk ch = local_chunk(plan, r, b, j, q, k, v, stride, doc_start, pos);
            CUDA_CHECK(cudaMemcpy2DAsync(L.p, c * sizeof(float), lse_rows(const_cast<float*>(lse), plan, b, j, H),
                                         2 * c * sizeof(float), c * sizeof(float), H, cudaMemcpyDeviceToDevice, st));
            const bf16* g = dout + ch.row * HD;
            attention_backward_begin_cuda(ws.p, g, out + ch.row * HD, L.p, ch.qs, dm, st);
            // dK, dV in the key side's layout (row stride `stride`), dQ in the query side's.
            attention_backward_block_cuda(dk + ch.row * stride, dv + ch.row * stride, /*accumulate=*/false, g, L.p, ch.qs,
                                          ch.ks, plan.pattern, dm, scale, ws.p, st, deterministic);
            attention_backward_end_cuda(dq + ch.row * stride, /*accumulate=*/false, ch.qs, dm, ws.p, st);
        }
}

// The ring backward's query side, chunk by chunk: dO, O, L as the two-sided pieces take them,
// and their workspace, begun (attention_backward_begin_cuda).
struct BackwardQueries {
    Buf<bf16> g[2], oc[2];
    Buf<float> Lc[2], ws[2];
    BackwardQueries(const RingInputs& in, const bf16* dout, const bf16* out, const float* lse, cudaStream_t st) {
        const int B = in.B, H = in.H, HD = in.HD, c = in.c;
        for (int j = 0; j < 2; j++) {
            g[j] = Buf<bf16>((size_t)B * c * HD);
            oc[j] = Buf<bf16>((size_t)B * c * HD);
            Lc[j] = Buf<float>((size_t)B * H * c);
            ws[j] = Buf<float>(attention_backward_pieces_workspace_bytes(in.dm, c) / sizeof(float) + 1);
            copy_chunk(g[j].p, HD, const_cast<bf16*>(dout), HD, B, c, j, HD, false, st);
            copy_chunk(oc[j].p, HD, const_cast<bf16*>(out), HD, B, c, j, HD, false, st);
            CUDA_CHECK(cudaMemcpy2DAsync(Lc[j].p, c * sizeof(float), lse + (size_t)j * c, 2 * c * sizeof(float),
                                         c * sizeof(float), (size_t)B * H, cudaMemcpyDeviceToDevice, st));
            attention_backward_begin_cuda(ws[j].p, g[j].p, oc[j].p, Lc[j].p, in.queries(j), in.dm, st);
        }
    }
};

// One step of the ring backward: every (query chunk, key chunk) pair of the step that meets, the
// key chunks those of rank o held in blk, their dK/dV added into dacc (fp32, (B, c, 2, H, D)).
inline void backward_step_pairs(const RingInputs& in, const BackwardQueries& bq, int o, const Buf<bf16> (&blk)[2],
                                Buf<float> (&dacc)[2], bf16* scratch, float scale, bool deterministic, cudaStream_t st) {
    const RingPlan& plan = in.plan;
    const size_t nkv = in.chunk_kv();
    for (int kj = 0; kj < 2; kj++) {
        const int kc = plan.chunk(o, kj);
        for (int qj = 0; qj < 2; qj++) {
            if (!plan.pair_meets(in.qchunk(qj), kc)) continue;
            attention_backward_block_cuda(scratch, scratch + in.HD, /*accumulate=*/false, bq.g[qj].p, bq.Lc[qj].p,
                                          in.queries(qj), in.keys(blk[kj].p, kc), plan.pattern, in.dm, scale, bq.ws[qj].p,
                                          st, deterministic);
            // The block writes dK, dV rows of stride 2HD into scratch: exactly the (B, c, 2, H, D) layout.
            add_bf16_to_f32<<<grid_for(nkv), 256, 0, st>>>(dacc[kj].p, scratch, nkv);
            CUDA_CHECK_LAST();
        }
    }
}

// A dK/dV accumulator no later step needs: chunk k of rank owner's, kept until it goes home.
struct ParkedGrad {
    int owner, k;
    Buf<float> d;
};
inline void park_grad(std::vector<ParkedGrad>& parked, int owner, int k, const float* d, size_t n, cudaStream_t st) {
    ParkedGrad pk{owner, k, Buf<float>(n)};
    CUDA_CHECK(cudaMemcpyAsync(pk.d.p, d, n * sizeof(float), cudaMemcpyDeviceToDevice, st));
    parked.push_back(std::move(pk));
}

// The ring backward's end: every parked dK/dV accumulator back to its owner (round d: to rank
// r + d, from rank r - d), then this rank's dK, dV rounded into their rows and its dQ finished
// (attention_backward_end_cuda) into dq's.
inline void backward_grads_home(const RingInputs& in, const std::vector<ParkedGrad>& parked, CommOrder& order,
                                RingStats& stt, bf16* dq, bf16* dk, bf16* dv, int stride, const BackwardQueries& bq,
                                cudaStream_t st) {
    const RingPlan& plan = in.plan;
    const int r = in.r, P = plan.P, B = in.B, c = in.c, HD = in.HD;
    const size_t nkv = in.chunk_kv();
    const float* mine[2] = {nullptr, nullptr};
    Buf<float> home[2];
    for (const ParkedGrad& p : parked)
        if (p.owner == r) mine[p.k] = p.d.p;
    order.before_comm();
    for (int d = 1; d < P; d++) {
        const int to = (r + d) % P, from = (r - d + P) % P;
        for (int j = 0; j < 2; j++) {
            const float* src = nullptr;
            for (const ParkedGrad& p : parked)
                if (p.owner == to && p.k == j) src = p.d.p;
            const bool incoming = plan.holder_at(r, plan.last_step(r, j)) == from;
            if (incoming) home[j] = Buf<float>(nkv), mine[j] = home[j].p;
            const size_t ob = src ? nkv * sizeof(float) : 0, ib = incoming ? nkv * sizeof(float) : 0;
            order.sendrecv(src, ob, to, home[j].p, ib, from);
            stt.bwd_bytes += ob;
        }
    }
    order.after_comm();
    stt.bwd_bytes_plain += 2 * nkv * sizeof(float);  // a plain ring's last hop home
    for (int j = 0; j < 2; j++) {
        if (!mine[j]) fatal("ring attention backward: rank %d did not get back chunk %d's dK/dV", r, j);
        for (int b = 0; b < B; b++) {  // dK, dV: chunk j's batch row b -> local rows b 2c + j c
            const size_t lrow = (size_t)b * 2 * c + (size_t)j * c;
            f32_to_bf16_rows<<<grid_for((size_t)c * HD), 256, 0, st>>>(dk + lrow * stride, stride,
                                                                       mine[j] + (size_t)b * c * 2 * HD, 2 * HD, c, HD);
            f32_to_bf16_rows<<<grid_for((size_t)c * HD), 256, 0, st>>>(dv + lrow * stride, stride,
                                                                       mine[j] + (size_t)b * c * 2 * HD + HD, 2 * HD, c, HD);
            CUDA_CHECK_LAST();
        }
        Buf<bf16> dqc((size_t)B * c * HD);
        attention_backward_end_cuda(dqc.p, /*accumulate=*/false, in.queries(j), in.dm, bq.ws[j].p, st);
        copy_chunk(dqc.p, HD, dq, stride, B, c, j, HD, true, st);
    }
}

}  // namespace ring_gpu

// out (B, 2c, H, D) bf16 and lse (B, H, 2c) of this rank's queries against the whole sequence.
inline void ring_attention_forward_cuda(Comm& comm, const RingPlan& plan, bf16* out, float* lse, const bf16* q,
                                        const bf16* k, const bf16* v, int stride, const int* doc_start, int B, int H,
                                        int D, float scale, cudaStream_t st, RingStats* stats = nullptr) {
    using namespace ring_gpu;
    const int r = comm.rank(), P = plan.P, c = plan.c;
    if (comm.size() != P) fatal("ring attention: the plan is for %d ranks, the communicator has %d", P, comm.size());
    if (plan.local()) {
        local_forward(plan, r, out, lse, q, k, v, stride, doc_start, B, H, D, scale, st);
        if (stats) {
            const RingStats ls = local_stats(plan, r, B, H, D);
            stats->fwd_bytes = 0, stats->fwd_bytes_plain = ls.fwd_bytes_plain, stats->pairs = ls.pairs,
            stats->pairs_plain = ls.pairs_plain;
        }
        return;
    }
    RingInputs in(plan, r, q, k, v, stride, doc_start, B, H, D, st);
    const int HD = in.HD;
    Buf<float> O[2], L[2];
    for (int j = 0; j < 2; j++) {
        O[j] = Buf<float>((size_t)B * c * HD);
        L[j] = Buf<float>((size_t)B * H * c);
        attention_partial_init_cuda(O[j].p, L[j].p, in.dm, c, st);
    }
    Buf<bf16> blk[2][2];  // blk[which][j]: the block held now and the one arriving
    for (auto& b : blk)
        for (auto& x : b) x = Buf<bf16>(in.chunk_kv());
    CommOrder order(comm, st);
    RingStats stt;
    int cur = 0;
    for (int s = 0; s < P; s++) {
        const int o = plan.owner_at(r, s);
        const bf16* held[2] = {s == 0 ? in.kv[0].p : blk[cur][0].p, s == 0 ? in.kv[1].p : blk[cur][1].p};
        // The next step's chunks travel while this step computes.
        if (s + 1 < P) {
            order.before_comm();
            for (int j = 0; j < 2; j++) {
                const size_t out_b = plan.moves_into(o, j, s + 1) ? in.chunk_kv() * sizeof(bf16) : 0;
                const size_t in_b = plan.moves_into(plan.owner_at(r, s + 1), j, s + 1) ? in.chunk_kv() * sizeof(bf16) : 0;
                order.sendrecv(held[j], out_b, comm_next(comm), blk[cur ^ 1][j].p, in_b, comm_prev(comm));
                stt.fwd_bytes += out_b;
                stt.fwd_bytes_plain += in.chunk_kv() * sizeof(bf16);
            }
        }
        for (int kj = 0; kj < 2; kj++) {
            const int kc = plan.chunk(o, kj);
            for (int qj = 0; qj < 2; qj++) {
                stt.pairs_plain++;
                if (!plan.pair_meets(in.qchunk(qj), kc)) continue;
                stt.pairs++;
                attention_forward_merge_cuda(O[qj].p, L[qj].p, in.queries(qj), in.keys(held[kj], kc), plan.pattern, in.dm,
                                             scale, st);
            }
        }
        if (s + 1 < P) {  // the next step reads what arrived; this step's buffer is sent then
            order.after_comm();
            cur ^= 1;
        }
    }
    // Out rows (B, 2c, HD): chunk j's batch row b goes to rows b 2c + j c.
    for (int j = 0; j < 2; j++)
        for (int b = 0; b < B; b++) {
            f32_to_bf16_rows<<<grid_for((size_t)c * HD), 256, 0, st>>>(out + ((size_t)b * 2 * c + (size_t)j * c) * HD, HD,
                                                                       O[j].p + (size_t)b * c * HD, HD, c, HD);
            CUDA_CHECK_LAST();
        }
    for (int j = 0; j < 2; j++)
        CUDA_CHECK(cudaMemcpy2DAsync(lse + (size_t)j * c, 2 * c * sizeof(float), L[j].p, c * sizeof(float),
                                     c * sizeof(float), (size_t)B * H, cudaMemcpyDeviceToDevice, st));
    if (stats) stats->fwd_bytes = stt.fwd_bytes, stats->fwd_bytes_plain = stt.fwd_bytes_plain, stats->pairs = stt.pairs,
               stats->pairs_plain = stt.pairs_plain;
}

// dq, dk, dv (B, 2c, H, D), row stride `stride`, OVERWRITTEN (as attention_backward_cuda), from
// dout, the forward's bf16 out (B, 2c, H, D) and lse (B, H, 2c). deterministic: the same bits every
// run (train --deterministic): each block's dQ by the deterministic variant's separate pass, not
// fp32 atomics; everything else the ring adds is already in a fixed order.
inline void ring_attention_backward_cuda(Comm& comm, const RingPlan& plan, bf16* dq, bf16* dk, bf16* dv,
                                         const bf16* dout, const bf16* out, const float* lse, const bf16* q,
                                         const bf16* k, const bf16* v, int stride, const int* doc_start, int B, int H,
                                         int D, float scale, cudaStream_t st, RingStats* stats = nullptr,
                                         bool deterministic = false) {
    using namespace ring_gpu;
    const int r = comm.rank(), P = plan.P;
    if (comm.size() != P) fatal("ring attention: the plan is for %d ranks, the communicator has %d", P, comm.size());
    if (plan.local()) {
        local_backward(plan, r, dq, dk, dv, dout, out, lse, q, k, v, stride, doc_start, B, H, D, scale, st, deterministic);
        if (stats) stats->bwd_bytes = 0, stats->bwd_bytes_plain = local_stats(plan, r, B, H, D).bwd_bytes_plain;
        return;
    }
    // Prologue: the rank's chunks, the query side of each begun, the K/V it holds at step 0.
    RingInputs in(plan, r, q, k, v, stride, doc_start, B, H, D, st);
    const size_t nkv = in.chunk_kv();
    BackwardQueries bq(in, dout, out, lse, st);
    Buf<bf16> blk[2][2];   // K/V held now and arriving
    Buf<float> dacc[2][2]; // their fp32 dK/dV accumulators (B, c, 2, H, D)
    for (int w = 0; w < 2; w++)
        for (int j = 0; j < 2; j++) blk[w][j] = Buf<bf16>(nkv), dacc[w][j] = Buf<float>(nkv);
    Buf<bf16> scratch(nkv);  // one pair's bf16 dK/dV
    std::vector<ParkedGrad> parked;
    CommOrder order(comm, st);
    RingStats stt;
    int cur = 0;
    for (int j = 0; j < 2; j++) {
        CUDA_CHECK(cudaMemcpyAsync(blk[0][j].p, in.kv[j].p, nkv * sizeof(bf16), cudaMemcpyDeviceToDevice, st));
        CUDA_CHECK(cudaMemsetAsync(dacc[0][j].p, 0, nkv * sizeof(float), st));
    }
    // Main loop: step s computes against the K/V of rank owner_at(r, s) while the next arrive.
    for (int s = 0; s < P; s++) {
        const int o = plan.owner_at(r, s), on = s + 1 < P ? plan.owner_at(r, s + 1) : -1;
        if (s + 1 < P) {  // K/V for the next step travel during this step's compute
            order.before_comm();
            for (int j = 0; j < 2; j++) {
                const size_t ob = plan.moves_into(o, j, s + 1) ? nkv * sizeof(bf16) : 0;
                const size_t ib = plan.moves_into(on, j, s + 1) ? nkv * sizeof(bf16) : 0;
                order.sendrecv(blk[cur][j].p, ob, comm_next(comm), blk[cur ^ 1][j].p, ib, comm_prev(comm));
                stt.bwd_bytes += ob;
                stt.bwd_bytes_plain += nkv * sizeof(bf16);
            }
        }
        backward_step_pairs(in, bq, o, blk[cur], dacc[cur], scratch.p, scale, deterministic, st);
        if (s + 1 < P) {  // dK/dV follow their block; the chunks no later step needs park here
            order.before_comm();
            for (int j = 0; j < 2; j++) {
                const size_t ob = plan.moves_into(o, j, s + 1) ? nkv * sizeof(float) : 0;
                const size_t ib = plan.moves_into(on, j, s + 1) ? nkv * sizeof(float) : 0;
                if (!ob && plan.last_step(o, j) == s) park_grad(parked, o, j, dacc[cur][j].p, nkv, st);
                order.sendrecv(dacc[cur][j].p, ob, comm_next(comm), dacc[cur ^ 1][j].p, ib, comm_prev(comm));
                stt.bwd_bytes += ob;
                stt.bwd_bytes_plain += nkv * sizeof(float);
            }
            order.after_comm();
            cur ^= 1;
        }
    }
    for (int j = 0; j < 2; j++) {  // the last step's chunks
        const int o = plan.owner_at(r, P - 1);
        if (plan.last_step(o, j) == P - 1) park_grad(parked, o, j, dacc[cur][j].p, nkv, st);
    }
    // Epilogue: every dK/dV home, then dK, dV, dQ written.
    backward_grads_home(in, parked, order, stt, dq, dk, dv, stride, bq, st);
    if (stats) stats->bwd_bytes = stt.bwd_bytes, stats->bwd_bytes_plain = stt.bwd_bytes_plain;
}

// What the calling thread's pool holds (ring_pool_bytes()) after ring_attention_forward_cuda and
// then ring_attention_backward_cuda of one layer, rank `rank` of `plan`, on a fresh thread (or
// after ring_pool_release()); later calls of the same sizes add nothing. rank < 0: the largest
// over the plan's ranks (the parked dK/dV accumulators differ from rank to rank). Exact: a replay
// of the two calls' Buf requests in their order, with the pool's exact-size reuse, so sizes that
// coincide (a bf16 K/V block and an fp32 O chunk are both 4 B c H D bytes) are shared as they are
// on the device. Nothing here is data-dependent: which accumulators park, and which come home,
// follows from the plan. Not counted: ring_positions' (N) ints (kept per thread, outside the pool),
// and cudaMalloc's rounding of each buffer. MUST CHANGE WHEN THE ALLOCATIONS ABOVE CHANGE (any
// Buf<...> or ring_pool_alloc in RingInputs, the forward or the backward); tests/gpu/test_ring.cu
// compares it with ring_pool_bytes() after every case.
inline size_t ring_attention_pool_bytes_needed(const RingPlan& plan, int rank, int B, int H, int D, bool has_doc_start) {
    if (rank < 0) {
        size_t most = 0;
        for (int r = 0; r < plan.P; r++)
            most = std::max(most, ring_attention_pool_bytes_needed(plan, r, B, H, D, has_doc_start));
        return most;
    }
    if (rank >= plan.P) fatal("ring_attention_pool_bytes_needed: rank %d of a plan for %d ranks", rank, plan.P);
    const int P = plan.P, r = rank;
    const size_t c = (size_t)plan.c, HD = (size_t)H * D, nkv = (size_t)B * c * 2 * HD;
    std::map<size_t, long long> in_pool;  // bytes -> buffers in the pool, as ring_gpu::ring_pool()
    std::vector<size_t> held;             // the replayed call's buffers (back to the pool when it returns)
    size_t malloced = 0;
    auto take = [&](size_t n, size_t elem) {  // a Buf<T>(n): sizeof(T) = elem
        const size_t bytes = std::max<size_t>(n, 1) * elem;
        auto it = in_pool.find(bytes);
        if (it != in_pool.end() && it->second > 0) it->second--;
        else malloced += bytes;
        return bytes;
    };
    auto hold = [&](size_t n, size_t elem) { held.push_back(take(n, elem)); };
    auto call_returns = [&] {
        for (size_t b : held) in_pool[b]++;
        held.clear();
    };
    if (plan.local()) {  // local_forward's L, then local_backward's L (the same buffer again) and workspace
        const size_t ws = attention_backward_pieces_workspace_bytes(AttnDims{1, H, D, plan.N}, (int)c) / sizeof(float) + 1;
        hold((size_t)H * c, sizeof(float));
        call_returns();
        hold((size_t)H * c, sizeof(float)), hold(ws, sizeof(float));
        call_returns();
        return malloced;
    }
    auto inputs = [&] {  // RingInputs
        for (int j = 0; j < 2; j++) {
            hold((size_t)B * c * HD, sizeof(bf16));  // q[j]
            hold(nkv, sizeof(bf16));                 // kv[j]
            if (has_doc_start) hold((size_t)B * c, sizeof(int));  // doc[j]
        }
    };
    // Forward.
    inputs();
    for (int j = 0; j < 2; j++) hold((size_t)B * c * HD, sizeof(float)), hold((size_t)B * H * c, sizeof(float));  // O, L
    for (int i = 0; i < 4; i++) hold(nkv, sizeof(bf16));  // blk
    call_returns();
    // Backward.
    inputs();
    const size_t ws = attention_backward_pieces_workspace_bytes(AttnDims{B, H, D, plan.N}, (int)c) / sizeof(float) + 1;
    for (int j = 0; j < 2; j++) {
        hold((size_t)B * c * HD, sizeof(bf16));   // g[j]
        hold((size_t)B * c * HD, sizeof(bf16));   // oc[j]
        hold((size_t)B * H * c, sizeof(float));   // Lc[j]
        hold(ws, sizeof(float));                  // ws[j]
    }
    for (int i = 0; i < 4; i++) hold(nkv, sizeof(bf16)), hold(nkv, sizeof(float));  // blk, dacc
    hold(nkv, sizeof(bf16));                                                          // scratch
    for (int s = 0; s + 1 < P; s++) {  // parked after step s
        const int o = plan.owner_at(r, s);
        for (int j = 0; j < 2; j++)
            if (!plan.moves_into(o, j, s + 1) && plan.last_step(o, j) == s) hold(nkv, sizeof(float));
    }
    for (int j = 0; j < 2; j++)  // parked after the last step
        if (plan.last_step(plan.owner_at(r, P - 1), j) == P - 1) hold(nkv, sizeof(float));
    bool home[2] = {false, false};
    for (int d = 1; d < P; d++)
        for (int j = 0; j < 2; j++)
            if (plan.holder_at(r, plan.last_step(r, j)) == (r - d + P) % P) {
                const size_t b = take(nkv, sizeof(float));  // home[j] = Buf: the new one, then the old one back
                if (home[j]) in_pool[b]++;
                else held.push_back(b);
                home[j] = true;
            }
    for (int j = 0; j < 2; j++) in_pool[take((size_t)B * c * HD, sizeof(bf16))]++;  // dqc: back each iteration
    call_returns();
    return malloced;
}
