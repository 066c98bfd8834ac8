// Dilated attention (LongNet, docs/attention-spec.md#dilated) on the flash kernels: the
// launch logic per branch (the module's PatternLaunches, layers/cuda/attention/
// launch_template.cuh), no kernels of its own. The public launchers attention_forward_cuda /
// attention_backward_cuda (attention_flash.h, defined in attention_flash.cu, which compiles this
// file through layers/patterns/all_launch.cuh) and the two-sided ones (launch_two_sided.cuh) come
// here for a Dilated pattern; the CPU reference is layers/patterns/dilated_reference.h (and
// layers/attention.h).
//
// A branch (w, r), w' = min(w, N), is ordinary attention over many short virtual sequences: for
// segment s and head h, the rows s*w' + c, s*w' + c + r, ... of the segment (c = h % r), i.e. the
// RowMap {s*w' + c, r, ceil((len_s - c)/r)} on the query and the key side (Params::seqs, a
// SequenceGrid {w', r, first segment, segments}; resolve_block gives each block its map). The kernels read Q, K, V, dO in
// place through those maps: no gathered copies, no per-branch output buffers.
//
// Forward: branch by branch. The first writes O (bf16) and L (fp32); each later one merges its
// (o_i, lse_i) into them by log-sum-exp in the kernel epilogue (Params::accumulate). Rows a
// branch does not keep are left alone, so the branch with r = 1 goes first (it keeps every row);
// without one, O = 0 and L = -inf are filled first and every branch merges.
//
// Backward: delta = rowsum(dO * O) and L in log2 once from the final O, L (the preprocess
// kernel); then per branch the flash backward with P = exp(s - L_final) ADDS its dQ, dK, dV (the
// first branch writes them when it keeps every row; else they are zeroed first). Within one launch
// every row belongs to one virtual sequence, so the read-add-writes are race-free; launches are
// ordered on the stream. dQ of the default (atomic) variants gathers in an fp32 accumulator that
// covers one chunk of the sequence only (dilated_chunks), so the workspace stays small at long N;
// the deterministic variant (flash::kDeterministicBackwardVariant) computes dQ in its own
// query-parallel pass and adds it into dq directly, with no accumulator at all.
//
// These one-sided launchers take the model's case, pos[i] = i over one whole sequence: the dQ
// chunks below are cut by buffer index. Queries and keys that are different pieces of a longer
// sequence go through the two-sided launchers (launch_two_sided.cuh), where every
// segment comes from global positions and the global length (DilatedTwoSidedSchedule).
#pragma once
#include <algorithm>
#include <numeric>
#include <vector>
#include "layers/cuda/attention/launch_template.cuh"
#include "layers/patterns/dilated.cuh"
#include "layers/patterns/dilated_tuning.h"

namespace flash {

struct DilatedBranch {
    int w, r;  // effective segment length min(w_i, N), dilation
};

// The branches in launch order: those with r = 1 first (the first of them keeps every row, so it
// may write the outputs outright), the rest as given.
inline std::vector<DilatedBranch> dilated_branches(const AttnPattern& pattern, int N) {
    std::vector<DilatedBranch> br;
    const DilatedParams& d = pattern.dilated;
    for (size_t i = 0; i < d.segments.size(); i++) br.push_back({std::min(d.segments[i], N), d.dilations[i]});
    std::stable_partition(br.begin(), br.end(), [](const DilatedBranch& x) { return x.r == 1; });
    return br;
}

// The backward's dQ chunks: `tokens` per chunk (the fp32 accumulator holds one chunk, 3 KiB per
// token at H*D = 768), at least 64K or N/16 tokens (a chunk's launches must still fill the GPU;
// from N = 256K on the accumulator adds at most 0.75 MiB per 1K tokens), rounded up to a
// multiple of every branch's w' when that costs little, and then all branches run chunk by
// chunk together (`grouped`: one zero-fill and one conversion per chunk in all). Otherwise each
// branch walks its own chunks of a multiple of its w' and adds its dQ into dq.
// The 64K floor is a variable so that tests can walk small sequences in several chunks:
// flash::dilated_min_chunk_tokens (dilated_tuning.h).

struct DilatedChunks {
    int tokens;
    bool grouped;
};

inline DilatedChunks dilated_chunks(const AttnShape& s, const AttnPattern& pattern) {
    const std::vector<DilatedBranch> br = dilated_branches(pattern, s.N);
    const long long N = s.N, target = std::min(N, std::max(dilated_min_chunk_tokens, (N + 15) / 16));
    long long lcm = 1, wmax = 1;
    for (const DilatedBranch& b : br) {
        wmax = std::max<long long>(wmax, b.w);
        if (lcm <= target) lcm = lcm / std::gcd(lcm, (long long)b.w) * b.w;
    }
    const long long unit = lcm <= target ? lcm : wmax;
    const long long C = std::min(N, (target + unit - 1) / unit * unit);
    bool grouped = C >= N;
    if (!grouped) {
        grouped = true;
        for (const DilatedBranch& b : br) grouped &= C % b.w == 0;
    }
    return DilatedChunks{(int)C, grouped};
}

inline size_t dilated_workspace_bytes(const AttnShape& s, const AttnPattern& pattern) {
    const DilatedChunks ch = dilated_chunks(s, pattern);
    return workspace_rowstats_bytes(s) + (size_t)s.B * ch.tokens * s.H * s.D * 4;
}

// Launch-order groups of virtual sequences (Params::group, resolve_block): 16 sequences of 16
// tiles are about one wave of 2 blocks per SM, and their K/V (8 MiB at D = 64) stay in the L2.
// 0 gives the plain grid order; variables so that the benchmark can compare the two:
// flash::dilated_forward_group and dilated_backward_group (dilated_tuning.h).

// Point p at segments [seg0, seg0 + nseg) of branch `br`.
inline void set_branch(Params& p, const DilatedBranch& br, int seg0, int nseg) {
    p.seqs = SequenceGrid{br.w, br.r, seg0, nseg};
}

inline void dilated_forward(int variant, const Params& base, const AttnPattern& pattern, const AttnShape& s,
                            cudaStream_t stream) {
    int count = 0;
    const Variant& v = forward_variants(s.D, &count)[variant];
    const std::vector<DilatedBranch> br = dilated_branches(pattern, s.N);
    const bool init = br[0].r != 1;  // no branch keeps every row: start from O = 0, L = -inf
    if (init) {
        const size_t nl = (size_t)s.B * s.H * s.N;
        CUDA_CHECK(cudaMemsetAsync(base.o, 0, (size_t)s.B * s.N * s.H * s.D * sizeof(bf16), stream));
        launch_fill(base.lse, nl, -INFINITY, stream);
    }
    for (size_t i = 0; i < br.size(); i++) {
        Params p = base;
        set_branch(p, br[i], 0, ceil_div(s.N, br[i].w));
        p.group = dilated_forward_group;
        p.accumulate = init || i > 0;
        v.run(p, s.B, stream);
    }
}

template <int D>
void dilated_backward_impl(const Variant& v, const Params& base, const AttnPattern& pattern, const AttnShape& s,
                           float* workspace, cudaStream_t stream) {
    const int B = s.B, N = s.N;
    Params p = base;
    p.group = dilated_backward_group;
    const size_t nl = (size_t)B * s.H * N;
    p.lse_log2 = workspace;  // (B, H, N)
    p.delta = workspace + nl;  // (B, H, N)
    p.dq_accum = reinterpret_cast<float*>(reinterpret_cast<char*>(workspace) + workspace_rowstats_bytes(s));
    launch_preprocess<D>(p, B, false, stream);

    const std::vector<DilatedBranch> br = dilated_branches(pattern, N);
    const bool zero = br[0].r != 1;  // no branch keeps every row: every branch adds into zeros
    if (zero) {
        const size_t width = (size_t)s.H * D * sizeof(bf16);
        CUDA_CHECK(cudaMemset2DAsync(p.dk, (size_t)p.kv_stride * sizeof(bf16), 0, width, (size_t)B * N, stream));
        CUDA_CHECK(cudaMemset2DAsync(p.dv, (size_t)p.kv_stride * sizeof(bf16), 0, width, (size_t)B * N, stream));
        if (v.dq) CUDA_CHECK(cudaMemset2DAsync(p.dq, (size_t)p.q_stride * sizeof(bf16), 0, width, (size_t)B * N, stream));
    }
    if (v.dq) {  // deterministic: per branch, dK/dV then dQ, each adding into its output
        for (size_t i = 0; i < br.size(); i++) {
            Params q = p;
            set_branch(q, br[i], 0, ceil_div(N, br[i].w));
            q.accumulate = zero || i > 0;
            v.dkdv(q, B, stream);
            v.dq(q, B, stream);
        }
        return;
    }
    // Atomic dQ: the fp32 accumulator covers the chunk [c0, c0 + len); `which` branches add into
    // it (their segments lie inside the chunk), then it is converted into dq (added when add_dq).
    auto run_chunk = [&](const std::vector<size_t>& which, int c0, int len, bool add_dq) {
        Params q = p;
        q.accum_tok0 = c0;
        q.accum_tokens = len;
        CUDA_CHECK(cudaMemsetAsync(q.dq_accum, 0, (size_t)B * len * s.H * D * sizeof(float), stream));
        for (size_t i : which) {
            Params qb = q;
            set_branch(qb, br[i], c0 / br[i].w, ceil_div(len, br[i].w));
            qb.accumulate = zero || i > 0;
            v.dkdv(qb, B, stream);
        }
        q.accumulate = add_dq;
        launch_dq_convert<D>(q, B, stream);
    };
    const DilatedChunks ch = dilated_chunks(s, pattern);
    if (ch.grouped) {
        std::vector<size_t> all(br.size());
        for (size_t i = 0; i < br.size(); i++) all[i] = i;
        for (int c0 = 0; c0 < N; c0 += ch.tokens) run_chunk(all, c0, std::min(ch.tokens, N - c0), false);
    } else {
        for (size_t i = 0; i < br.size(); i++) {
            const int C = ch.tokens / br[i].w * br[i].w;  // whole segments of this branch
            for (int c0 = 0; c0 < N; c0 += C) run_chunk({i}, c0, std::min(C, N - c0), i > 0);
        }
    }
}

inline void dilated_backward(int variant, const Params& base, const AttnPattern& pattern, const AttnShape& s,
                             float* workspace, cudaStream_t stream) {
    int count = 0;
    const Variant& v = backward_variants(s.D, &count)[variant];
    if (!v.dkdv) fatal("attention_backward_cuda: variant %d cannot run a dilated pattern", variant);
    if (s.D == 64) dilated_backward_impl<64>(v, base, pattern, s, workspace, stream);
    else dilated_backward_impl<128>(v, base, pattern, s, workspace, stream);
}

// The segments of a branch of effective length w that hold rows of both sides of a two-sided
// launch: [seg0, +nseg).
inline bool shared_segments(int w, const Params& p, int& seg0, int& nseg) {
    const int q_lo = p.q_pos0 / w, q_hi = (p.q_pos0 + p.q_tokens - 1) / w;
    const int k_lo = p.k_pos0 / w, k_hi = (p.k_pos0 + p.kv_tokens - 1) / w;
    seg0 = std::max(q_lo, k_lo);
    nseg = std::min(q_hi, k_hi) - seg0 + 1;
    return nseg > 0;
}

// The module's launches (PatternLaunches, launch_template.cuh says what each does).
template <>
struct PatternLaunches<DilatedPattern> {
    static void forward(int variant, const Params& p, const AttnPattern& pattern, const AttnShape& s, cudaStream_t stream) {
        dilated_forward(variant, p, pattern, s, stream);
    }
    static void backward(int variant, const Params& p, const AttnPattern& pattern, const AttnShape& s, float* workspace,
                         cudaStream_t stream) {
        dilated_backward(variant, p, pattern, s, workspace, stream);
    }
    static size_t backward_workspace_bytes(const AttnShape& s, const AttnPattern& pattern) {
        return dilated_workspace_bytes(s, pattern);
    }
    // Branch by branch, each over the segments that hold rows of both sides, always merging (from
    // O = 0, L = -inf that the caller fills: pattern_launches_per_branch), in the pass's
    // launch-order groups.
    template <typename Run>
    static void for_each_launch(const Params& p, const AttnPattern& pattern, const AttnDims& dm, bool /*merge*/, Pass pass,
                                Run run) {
        const int group = pass == Pass::Backward ? dilated_backward_group : dilated_forward_group;
        for (const DilatedBranch& br : dilated_branches(pattern, dm.seq_len)) {
            int seg0, nseg;
            if (!shared_segments(br.w, p, seg0, nseg)) continue;  // no segment holds rows of both sides
            Params q = p;
            set_branch(q, br, seg0, nseg);
            q.group = group;
            q.accumulate = true;
            run(q);
        }
    }
};

}  // namespace flash
