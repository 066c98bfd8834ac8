// Ring attention on the CPU: one sequence split over the P ranks of a communicator (comm/comm.h)
// by the zigzag plan of layers/ring_plan.h, each rank computing its own queries against every
// key/value block as the blocks travel around the ring, partial results merged by log-sum-exp
// (layers/attention.h's Merge mode), the backward's dK, dV travelling with their block back to
// its owner. It mirrors the GPU driver (layers/cuda/ring_attention.cuh) step for step; on the
// CPU the transfers are not overlapped with compute.
//
// Local layout (what the model holds on each rank): the rank's 2c rows, chunk plan.chunk(r, 0)
// then plan.chunk(r, 1), as (B, 2c, H, D) with row stride `stride`; L (B, H, 2c); doc_start
// (B, 2c) global positions or nullptr. Every mask uses global positions and the global length.
#pragma once
#include <cstring>
#include <vector>
#include "comm/comm.h"
#include "layers/attention.h"
#include "layers/ring_plan.h"

namespace ring_cpu {

// Rows [k c, (k+1) c) of each batch row of a (B, 2c, width) array with row stride `stride`, as a
// contiguous (B, c, width) array (and back).
template <typename T>
void take_chunk(T* dst, const T* src, int B, int c, int k, int width, int stride) {
    for (int b = 0; b < B; b++)
        for (int i = 0; i < c; i++)
            std::memcpy(dst + ((size_t)b * c + i) * width, src + ((size_t)b * 2 * c + (size_t)k * c + i) * stride,
                        width * sizeof(T));
}
template <typename T>
void put_chunk(T* dst, const T* src, int B, int c, int k, int width, int stride, bool add) {
    for (int b = 0; b < B; b++)
        for (int i = 0; i < c; i++) {
            T* d = dst + ((size_t)b * 2 * c + (size_t)k * c + i) * stride;
            const T* s = src + ((size_t)b * c + i) * width;
            for (int x = 0; x < width; x++) d[x] = add ? d[x] + s[x] : s[x];
        }
}

// One rank's chunk buffers: per local chunk k, K and V interleaved (B, c, 2, H, D).
template <typename T>
struct Block {
    std::vector<T> kv[2];
    const T* k(int i) const { return kv[i].data(); }
};

// This rank's inputs chunk by chunk: queries (B, c, H, D), its own K/V block, the global
// positions and documents of each chunk; both passes start from them.
template <typename T>
struct RankChunks {
    const RingPlan& plan;
    int r, HD, c;
    std::vector<T> q[2];
    Block<T> kv;
    std::vector<int> pos[2], doc[2];
    RankChunks(const RingPlan& pl, int rank, const T* qq, const T* k, const T* v, int stride, const int* doc_start, int B,
               int HD_)
        : plan(pl), r(rank), HD(HD_), c(pl.c) {
        for (int j = 0; j < 2; j++) {
            q[j].resize((size_t)B * c * HD);
            take_chunk(q[j].data(), qq, B, c, j, HD, stride);
            std::vector<T> kk((size_t)B * c * HD), vv((size_t)B * c * HD);
            take_chunk(kk.data(), k, B, c, j, HD, stride);
            take_chunk(vv.data(), v, B, c, j, HD, stride);
            kv.kv[j].resize((size_t)B * c * 2 * HD);
            for (size_t t = 0; t < (size_t)B * c; t++) {
                std::memcpy(&kv.kv[j][t * 2 * HD], &kk[t * HD], HD * sizeof(T));
                std::memcpy(&kv.kv[j][t * 2 * HD + HD], &vv[t * HD], HD * sizeof(T));
            }
            pos[j].resize(c);
            for (int i = 0; i < c; i++) pos[j][i] = plan.pos0(plan.chunk(r, j)) + i;
            if (doc_start) {
                doc[j].resize((size_t)B * c);
                take_chunk(doc[j].data(), doc_start, B, c, j, 1, 1);
            }
        }
    }
    AttnQueries<T> queries(int j) const {
        return AttnQueries<T>{q[j].data(), HD, c, pos[j].data(), doc[j].empty() ? nullptr : doc[j].data(),
                              plan.pos0(plan.chunk(r, j))};
    }
};

// The keys of chunk `kc` held in slot kj of a block (positions filled into kpos).
template <typename T>
AttnKeys<T> chunk_keys(const Block<T>& blk, int kj, int kc, const RingPlan& plan, int HD, std::vector<int>& kpos) {
    kpos.resize(plan.c);
    for (int i = 0; i < plan.c; i++) kpos[i] = plan.pos0(kc) + i;
    return AttnKeys<T>{blk.k(kj), blk.k(kj) + HD, 2 * HD, plan.c, kpos.data(), plan.pos0(kc)};
}

// A dK/dV accumulator this rank keeps after its chunk's last step: chunk k of rank owner's.
template <typename T>
struct ParkedGrad {
    int owner, k;
    std::vector<T> d;
};
// Every parked dK/dV accumulator back to its owner: round d sends to rank r + d what it parked
// for it and receives from rank r - d what that rank parked for this one; mine[j]: chunk j's.
template <typename T>
void grads_home(std::vector<T> (&mine)[2], Comm& comm, const RingPlan& plan, int r, const std::vector<ParkedGrad<T>>& parked,
                size_t chunk_kv, RingStats& st) {
    const int P = plan.P;
    std::vector<T> sendbuf, recvbuf;
    for (const ParkedGrad<T>& p : parked)
        if (p.owner == r) mine[p.k] = p.d;
    for (int d = 1; d < P; d++) {
        const int to = (r + d) % P, from = (r - d + P) % P;
        sendbuf.clear();
        for (int j = 0; j < 2; j++)
            for (const ParkedGrad<T>& p : parked)
                if (p.owner == to && p.k == j) sendbuf.insert(sendbuf.end(), p.d.begin(), p.d.end());
        int incoming = 0;
        for (int j = 0; j < 2; j++) incoming += plan.holder_at(r, plan.last_step(r, j)) == from;
        recvbuf.resize((size_t)incoming * chunk_kv);
        comm.sendrecv(sendbuf.data(), sendbuf.size() * sizeof(T), to, recvbuf.data(), recvbuf.size() * sizeof(T), from);
        size_t at = 0;
        for (int j = 0; j < 2; j++)
            if (plan.holder_at(r, plan.last_step(r, j)) == from) {
                mine[j].assign(recvbuf.begin() + at, recvbuf.begin() + at + chunk_kv);
                at += chunk_kv;
            }
        st.bwd_bytes += sendbuf.size() * sizeof(T);
    }
}

}  // namespace ring_cpu

// out (B, 2c, H, D) and lse (B, H, 2c) of this rank's queries against the whole sequence.
template <typename T>
void ring_attention_forward(Comm& comm, const RingPlan& plan, T* out, T* lse, const T* q, const T* k, const T* v,
                            int stride, const int* doc_start, int B, int H, int D, T scale, RingStats* stats = nullptr) {
    using namespace ring_cpu;
    const int r = comm.rank(), P = plan.P, c = plan.c, HD = H * D;
    if (comm.size() != P) fatal("ring attention: the plan is for %d ranks, the communicator has %d", P, comm.size());
    const AttnDims dm{B, H, D, plan.N};
    const size_t chunk_kv = (size_t)B * c * 2 * HD;
    RankChunks<T> in(plan, r, q, k, v, stride, doc_start, B, HD);
    std::vector<T> O[2], L[2];  // the partial results, merged step by step
    Block<T> cur = in.kv, next = in.kv;
    for (int j = 0; j < 2; j++) {
        O[j].resize((size_t)B * c * HD);
        L[j].resize((size_t)B * H * c);
        attention_partial_init(O[j].data(), L[j].data(), dm, c);
    }
    std::vector<T> sendbuf, recvbuf;
    RingStats st;
    for (int s = 0; s < P; s++) {
        const int o = plan.owner_at(r, s);
        if (s > 0) {  // pass the chunks someone still needs to the next rank
            const int po = plan.owner_at(r, s - 1);
            sendbuf.clear();
            for (int j = 0; j < 2; j++)
                if (plan.moves_into(po, j, s)) sendbuf.insert(sendbuf.end(), cur.kv[j].begin(), cur.kv[j].end());
            recvbuf.resize((size_t)plan.chunks_in(r, s) * chunk_kv);
            comm.sendrecv(sendbuf.data(), sendbuf.size() * sizeof(T), comm_next(comm), recvbuf.data(),
                          recvbuf.size() * sizeof(T), comm_prev(comm));
            size_t at = 0;
            for (int j = 0; j < 2; j++)
                if (plan.moves_into(o, j, s)) {
                    std::memcpy(next.kv[j].data(), recvbuf.data() + at, chunk_kv * sizeof(T));
                    at += chunk_kv;
                }
            std::swap(cur, next);
            st.fwd_bytes += sendbuf.size() * sizeof(T);
            st.fwd_bytes_plain += 2 * chunk_kv * sizeof(T);
        }
        std::vector<int> kpos;
        for (int kj = 0; kj < 2; kj++) {
            const int kc = plan.chunk(o, kj);
            const AttnKeys<T> ks = chunk_keys(cur, kj, kc, plan, HD, kpos);
            for (int qj = 0; qj < 2; qj++) {
                st.pairs_plain++;
                if (!plan.pair_meets(plan.chunk(r, qj), kc)) continue;
                st.pairs++;
                attention_forward(O[qj].data(), L[qj].data(), in.queries(qj), ks, plan.pattern, dm, scale, AttnOutput::Merge);
            }
        }
    }
    for (int j = 0; j < 2; j++) {
        put_chunk(out, O[j].data(), B, c, j, HD, HD, false);
        for (int bh = 0; bh < B * H; bh++)
            std::memcpy(lse + (size_t)bh * 2 * c + (size_t)j * c, L[j].data() + (size_t)bh * c, c * sizeof(T));
    }
    if (stats) *stats = st;
}

// ADDS this rank's dq, dk, dv (B, 2c, H, D), row stride `stride` (as layers/attention.h's
// attention_backward), from dout, the forward's out (B, 2c, H, D) and lse (B, H, 2c).
template <typename T>
void ring_attention_backward(Comm& comm, const RingPlan& plan, T* dq, T* dk, T* dv, const T* dout, const T* out,
                             const T* lse, const T* q, const T* k, const T* v, int stride, const int* doc_start, int B,
                             int H, int D, T scale, RingStats* stats = nullptr) {
    using namespace ring_cpu;
    const int r = comm.rank(), P = plan.P, c = plan.c, HD = H * D;
    if (comm.size() != P) fatal("ring attention: the plan is for %d ranks, the communicator has %d", P, comm.size());
    const AttnDims dm{B, H, D, plan.N};
    const size_t chunk_kv = (size_t)B * c * 2 * HD;
    RankChunks<T> in(plan, r, q, k, v, stride, doc_start, B, HD);
    std::vector<T> g[2], Lc[2], delta[2], dqc[2];  // per query chunk: dO, L, rowsum(dO * O), dQ
    Block<T> cur = in.kv, next = in.kv, dcur, dnext;  // K/V and the travelling dK/dV, same layout
    for (int j = 0; j < 2; j++) {
        g[j].resize((size_t)B * c * HD);
        take_chunk(g[j].data(), dout, B, c, j, HD, HD);
        std::vector<T> oc((size_t)B * c * HD);
        take_chunk(oc.data(), out, B, c, j, HD, HD);
        Lc[j].resize((size_t)B * H * c);
        for (int bh = 0; bh < B * H; bh++)
            std::memcpy(Lc[j].data() + (size_t)bh * c, lse + (size_t)bh * 2 * c + (size_t)j * c, c * sizeof(T));
        delta[j].resize((size_t)B * H * c);
        attention_backward_preprocess(delta[j].data(), g[j].data(), oc.data(), dm, c);
        dqc[j].assign((size_t)B * c * HD, T(0));
        dcur.kv[j].assign(chunk_kv, T(0));
        dnext.kv[j].resize(chunk_kv);
    }
    using Parked = ParkedGrad<T>;
    std::vector<Parked> parked;
    std::vector<T> sendbuf, recvbuf;
    RingStats st;
    for (int s = 0; s < P; s++) {
        const int o = plan.owner_at(r, s);
        if (s > 0) {  // K/V and dK/dV of the chunks still needed travel on; the others park here
            const int po = plan.owner_at(r, s - 1);
            sendbuf.clear();
            for (int j = 0; j < 2; j++) {
                if (plan.moves_into(po, j, s)) {
                    sendbuf.insert(sendbuf.end(), cur.kv[j].begin(), cur.kv[j].end());
                    sendbuf.insert(sendbuf.end(), dcur.kv[j].begin(), dcur.kv[j].end());
                } else if (plan.last_step(po, j) == s - 1) {
                    parked.push_back(Parked{po, j, dcur.kv[j]});
                }
            }
            recvbuf.resize((size_t)plan.chunks_in(r, s) * 2 * chunk_kv);
            comm.sendrecv(sendbuf.data(), sendbuf.size() * sizeof(T), comm_next(comm), recvbuf.data(),
                          recvbuf.size() * sizeof(T), comm_prev(comm));
            size_t at = 0;
            for (int j = 0; j < 2; j++)
                if (plan.moves_into(o, j, s)) {
                    std::memcpy(next.kv[j].data(), recvbuf.data() + at, chunk_kv * sizeof(T));
                    std::memcpy(dnext.kv[j].data(), recvbuf.data() + at + chunk_kv, chunk_kv * sizeof(T));
                    at += 2 * chunk_kv;
                }
            std::swap(cur, next);
            std::swap(dcur, dnext);
            st.bwd_bytes += sendbuf.size() * sizeof(T);
            st.bwd_bytes_plain += 4 * chunk_kv * sizeof(T);
        }
        std::vector<int> kpos;
        for (int kj = 0; kj < 2; kj++) {
            const int kc = plan.chunk(o, kj);
            const AttnKeys<T> ks = chunk_keys(cur, kj, kc, plan, HD, kpos);
            for (int qj = 0; qj < 2; qj++) {
                if (!plan.pair_meets(plan.chunk(r, qj), kc)) continue;
                attention_backward_block(dqc[qj].data(), dcur.kv[kj].data(), dcur.kv[kj].data() + HD, g[qj].data(),
                                         Lc[qj].data(), delta[qj].data(), in.queries(qj), ks, plan.pattern, dm, scale);
            }
        }
    }
    for (int j = 0; j < 2; j++) {  // the last step's chunks: parked too
        const int o = plan.owner_at(r, P - 1);
        if (plan.last_step(o, j) == P - 1 || P == 1) parked.push_back(Parked{o, j, dcur.kv[j]});
    }
    std::vector<T> mine[2];
    grads_home(mine, comm, plan, r, parked, chunk_kv, st);
    st.bwd_bytes_plain += 2 * chunk_kv * sizeof(T);  // a plain ring's last hop home
    for (int j = 0; j < 2; j++) {
        if (mine[j].size() != chunk_kv) fatal("ring attention backward: rank %d did not get back chunk %d's dK/dV", r, j);
        put_chunk(dq, dqc[j].data(), B, c, j, HD, stride, true);
        std::vector<T> dkk((size_t)B * c * HD), dvv((size_t)B * c * HD);
        for (size_t t = 0; t < (size_t)B * c; t++) {
            std::memcpy(&dkk[t * HD], &mine[j][t * 2 * HD], HD * sizeof(T));
            std::memcpy(&dvv[t * HD], &mine[j][t * 2 * HD + HD], HD * sizeof(T));
        }
        put_chunk(dk, dkk.data(), B, c, j, HD, stride, true);
        put_chunk(dv, dvv.data(), B, c, j, HD, stride, true);
    }
    if (stats) stats->bwd_bytes = st.bwd_bytes, stats->bwd_bytes_plain = st.bwd_bytes_plain;
}
