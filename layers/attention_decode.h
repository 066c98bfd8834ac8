// Decoding one token against a KV cache (docs/attention-spec.md#decoding):
// the CPU reference of layers/cuda/attention_decode.cuh, name for name.
//
// A layer's cache is a list of branches. A branch (w, r) keeps, for head h, the rows of the
// current segment of w positions whose offset is congruent to h mod r, packed: row t of head h
// holds position seg0 + (h mod r) + t r. A dilated layer has one branch per (w_i, r_i), so head
// h keeps sum_i ceil(w_i / r_i) rows whatever the context, instead of every row of the longest
// segment; a dense layer is the one branch (kWholeSequence, 1), where row t is position t.
// Different heads' rows in one packed row hold different positions, which is why the decode
// kernel, not the flash kernels (one position per row), reads this layout.
#pragma once
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>
#include "layers/attention_pattern.h"
#include "layers/rope.h"

// The packed row of head h that holds position p in a (w, r) branch, or -1 when head h's offset
// class does not keep p. Segments are aligned to multiples of w, so p's offset is p mod w.
ATTN_HD inline long long cache_row(long long p, long long w, int r, int h) {
    const long long off = p % w;
    return off % r == branch_class(h, r) ? off / r : -1;
}

template <typename T>
struct CacheBranch {
    long long w;     // segment length (kWholeSequence: dense)
    int r;           // dilation
    T* kv;           // (B, rows, 2, H, D): K then V of each packed row
    long long rows;  // rows allocated per sequence
};

// The branches of a layer's cache (kWholeSequence and CacheBranchShape: pattern_params.h) are
// its pattern module's: pattern_cache_branches (layers/attention_pattern.h).

// Stores the K and V of n new tokens at positions p0 .. p0 + n - 1 (qkv (B, n, 3, H, D), K and
// V after Q) in each branch: head h of position p goes to its packed row, if its class keeps p.
// Positions in an earlier segment than the last one are skipped: no later query reads them.
template <typename T>
void cache_append(std::vector<CacheBranch<T>>& branches, const T* qkv, long long p0, int n, int B, int H, int D) {
    const size_t C = (size_t)H * D;
    for (CacheBranch<T>& br : branches) {
        const long long last_seg = (p0 + n - 1) / br.w;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                const long long p = p0 + i;
                if (p / br.w != last_seg) continue;
                for (int h = 0; h < H; h++) {
                    const long long t = cache_row(p, br.w, br.r, h);
                    if (t < 0) continue;
                    const T* src = qkv + ((size_t)b * n + i) * 3 * C + (size_t)h * D;
                    T* dst = br.kv + ((size_t)b * br.rows + t) * 2 * C + (size_t)h * D;
                    std::memcpy(dst, src + C, D * sizeof(T));          // K
                    std::memcpy(dst + C, src + 2 * C, D * sizeof(T));  // V
                }
            }
    }
}

// One query row per sequence at position p (q: row b at q + b q_stride, H*D values) against the
// branches, after cache_append has stored position p itself. Per branch that keeps p for head h,
// the query attends the packed rows 0 .. cache_row(p): exactly the kept keys of its segment up to
// p. The branches mix by their log-sum-exp, as in the full forward; a sink (H logits, or nullptr:
// none) mixes in as one more branch whose output is zero (layers/attn_sink.h).
template <typename T>
void attention_decode(T* out,  // (B, H, D)
                      T* lse,  // (B, H)
                      const T* q, int q_stride, const std::vector<CacheBranch<T>>& branches, long long p, int B, int H,
                      int D, T scale, const T* sink = nullptr) {
    const size_t C = (size_t)H * D;
    const T neg_inf = -std::numeric_limits<T>::infinity();
    std::vector<T> o_br(branches.size() * D), l_br(branches.size()), score;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const T* qh = q + (size_t)b * q_stride + (size_t)h * D;
            for (size_t i = 0; i < branches.size(); i++) {
                const CacheBranch<T>& br = branches[i];
                const long long k = cache_row(p, br.w, br.r, h);
                T* o = o_br.data() + i * D;
                for (int d = 0; d < D; d++) o[d] = 0;
                l_br[i] = neg_inf;
                if (k < 0) continue;
                score.assign(k + 1, 0);
                T mx = neg_inf;
                for (long long t = 0; t <= k; t++) {
                    const T* kt = br.kv + ((size_t)b * br.rows + t) * 2 * C + (size_t)h * D;
                    T dot = 0;
                    for (int d = 0; d < D; d++) dot += qh[d] * kt[d];
                    score[t] = scale * dot;
                    mx = std::max(mx, score[t]);
                }
                T sum = 0;
                for (long long t = 0; t <= k; t++) {
                    const T e = std::exp(score[t] - mx);
                    sum += e;
                    const T* vt = br.kv + ((size_t)b * br.rows + t) * 2 * C + C + (size_t)h * D;
                    for (int d = 0; d < D; d++) o[d] += e * vt[d];
                }
                for (int d = 0; d < D; d++) o[d] /= sum;
                l_br[i] = mx + std::log(sum);
            }
            // Mix: L = logsumexp_i l_i (and the sink's s_h), O = sum_i exp(l_i - L) o_i.
            const T s = sink ? sink[h] : neg_inf;
            T mx = s;
            for (T l : l_br) mx = std::max(mx, l);
            T* oh = out + ((size_t)b * H + h) * D;
            for (int d = 0; d < D; d++) oh[d] = 0;
            T sum = 0;
            if (mx != neg_inf) {
                for (T l : l_br) sum += std::exp(l - mx);
                if (sink) sum += std::exp(s - mx);
            }
            const T L = mx == neg_inf ? neg_inf : mx + std::log(sum);
            lse[(size_t)b * H + h] = L;
            for (size_t i = 0; i < branches.size() && mx != neg_inf; i++)
                for (int d = 0; d < D; d++) oh[d] += std::exp(l_br[i] - L) * o_br[i * D + d];
        }
}

// One token per sequence through a layer's attention, from its q, k, v before rope (qkv_pre
// (B, 3, H, D)): q and k rotated (rope_forward, theta: the layer's base), q scaled (log-n base;
// logn_slope: the heads' learned slopes, or nullptr), K and V appended, then attention_decode.
// attention_decode_step_cuda does all of it in one launch.
template <typename T>
void attention_decode_step(T* out, T* lse, const T* qkv_pre, std::vector<CacheBranch<T>>& branches, long long p, int B, int H,
                           int D, T scale, float theta, int logn_base, const T* sink = nullptr, const T* logn_slope = nullptr) {
    std::vector<T> qkv((size_t)B * 3 * H * D);
    const int pos = (int)p;
    rope_forward(qkv.data(), qkv_pre, &pos, B, 1, H, D, theta);
    logn_scale_queries(qkv.data(), &pos, B, 1, H, D, logn_base, logn_slope);
    cache_append(branches, qkv.data(), p, 1, B, H, D);
    attention_decode(out, lse, qkv.data(), 3 * H * D, branches, p, B, H, D, scale, sink);
}

// The rows a chunk of queries from position p0 needs from before it, unpacked into ordinary
// rows (rows, 2, H, D) at positions lo .. p0 - 1 (lo: the earliest start of the branches'
// current segments), so that the flash kernels can attend them. Only what some branch keeps is written;
// the other elements are never read by the pattern's mask.
template <typename T>
void cache_unpack(T* rows, const std::vector<CacheBranch<T>>& branches, long long lo, long long p0, int b, int H, int D) {
    const size_t C = (size_t)H * D;
    for (const CacheBranch<T>& br : branches)
        for (long long p = std::max(lo, p0 / br.w * br.w); p < p0; p++)
            for (int h = 0; h < H; h++) {
                const long long t = cache_row(p, br.w, br.r, h);
                if (t < 0) continue;
                const T* src = br.kv + ((size_t)b * br.rows + t) * 2 * C + (size_t)h * D;
                T* dst = rows + (size_t)(p - lo) * 2 * C + (size_t)h * D;
                std::memcpy(dst, src, D * sizeof(T));
                std::memcpy(dst + C, src + C, D * sizeof(T));
            }
}
