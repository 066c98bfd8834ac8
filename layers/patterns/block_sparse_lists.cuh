// What block-sparse launches put on the device, built on the host and kept for the life of the
// program (so a training step or a ring step after the first costs a map lookup):
//   - an explicit layout (BlockLayout), uploaded once: block_sparse_args_cuda gives the kernel
//     arguments with its device view (the module's device_args, block_sparse.cuh);
//   - the tile lists, per (pattern, sequence, sides, tile shape), built by
//     block_sparse_tile_lists (block_sparse_tiles.h): block_sparse_tiles_cuda (its bind_tiles).
// Inline, with one cache per program (a function's statics), whichever units include it.
#pragma once
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/common.cuh"
#include "layers/patterns/block_sparse_tiles.h"

// The pattern's kernel arguments, its explicit layout (if any) uploaded once and kept (the cache
// holds the layout too, so its address is never reused; device 0's copies: tests, inference).
inline BlockSparseArgs block_sparse_args_cuda(const BlockSparseParams& s) {
    const std::shared_ptr<const BlockLayout>& layout = s.layout;
    if (!layout) return to_args(s);
    struct Uploaded {
        std::shared_ptr<const BlockLayout> keep;
        int *row_ptr = nullptr, *cols = nullptr;
    };
    static std::mutex mu;
    static std::map<const BlockLayout*, Uploaded> cache;
    std::lock_guard<std::mutex> lock(mu);
    Uploaded& u = cache[layout.get()];
    if (!u.keep) {
        u.keep = layout;
        CUDA_CHECK(cudaMalloc(&u.row_ptr, layout->row_ptr.size() * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&u.cols, std::max<size_t>(layout->cols.size(), 1) * sizeof(int)));
        CUDA_CHECK(cudaMemcpy(u.row_ptr, layout->row_ptr.data(), layout->row_ptr.size() * sizeof(int), cudaMemcpyHostToDevice));
        if (!layout->cols.empty())
            CUDA_CHECK(cudaMemcpy(u.cols, layout->cols.data(), layout->cols.size() * sizeof(int), cudaMemcpyHostToDevice));
        // The copies may return before the data lands (pageable memory, legacy stream), and a
        // caller's non-blocking stream is not ordered after them.
        CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    }
    // to_args derives what the element mask needs (an explicit layout among its block rules),
    // now with the device view.
    return to_args(s, BlockLayoutView{u.row_ptr, u.cols, layout->n_blocks, layout->heads});
}

namespace flash {

// What the lists depend on: the pattern's rules (an explicit layout by identity: the entry keeps
// it alive, so its address is never reused), the global length, the heads, the two sides and
// the tile shape, and the device.
using TileListKey = std::tuple<int, bool, int, int, int, int, int, int, uint64_t, const BlockLayout*, int, int, int, int, int,
                               int, int, int>;

struct DeviceTileLists {
    std::shared_ptr<const BlockLayout> keep;
    int* buf = nullptr;  // one allocation: q_ptr, k_of_q, k_ptr, q_of_k, q_order, k_order
    BlockSparseTileView view{};
    size_t bytes = 0;
};

inline DeviceTileLists upload_tile_lists(const TileLists& t) {
    std::vector<int> all;
    auto append = [&](const std::vector<int>& v, const std::vector<char>* cut) {
        const size_t at = all.size();
        for (size_t i = 0; i < v.size(); i++) all.push_back(cut ? v[i] * 2 + (*cut)[i] : v[i]);
        return at;
    };
    const size_t a = append(t.q_ptr, nullptr), b = append(t.k_of_q, &t.k_of_q_cut), c = append(t.k_ptr, nullptr),
                 d = append(t.q_of_k, &t.q_of_k_cut), e = append(t.q_order, nullptr), f = append(t.k_order, nullptr);
    DeviceTileLists out;
    out.bytes = std::max<size_t>(all.size(), 1) * sizeof(int);
    CUDA_CHECK(cudaMalloc(&out.buf, out.bytes));
    CUDA_CHECK(cudaMemcpy(out.buf, all.data(), all.size() * sizeof(int), cudaMemcpyHostToDevice));
    // From pageable memory cudaMemcpy may return before the data lands (it is staged, then
    // copied on the legacy stream), and a caller's non-blocking stream is not ordered after it.
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    out.view = BlockSparseTileView{out.buf + a, out.buf + b, out.buf + c, out.buf + d, out.buf + e, out.buf + f, t.BM, t.BN};
    return out;
}

// The lists of p's sides (query rows from p.q_pos0, key rows from p.k_pos0, contiguous
// positions) for tiles of BM query rows and BN key rows.
inline BlockSparseTileView block_sparse_tiles_cuda(const AttnPattern& pattern, const Params& p, int BM, int BN) {
    const BlockSparseParams& s = pattern.block_sparse;
    static std::mutex mu;
    static std::map<TileListKey, DeviceTileLists> cache;
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    const TileListKey key{dev,          pattern.causal,       s.block,        s.window,     s.global,    s.dilated_r, s.dilated_window,
                          s.random_count, s.random_seed, s.layout.get(), p.seq_len,  p.H,         p.q_pos0,    p.qrows.len,
                          p.k_pos0,     p.krows.len,    BM,             BN};
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it == cache.end()) {
        const TileLists t = block_sparse_tile_lists(pattern, p.seq_len, p.H, BM, BN, p.q_pos0, p.qrows.len, p.k_pos0, p.krows.len);
        DeviceTileLists d = upload_tile_lists(t);
        d.keep = s.layout;
        it = cache.emplace(key, std::move(d)).first;
    }
    return it->second.view;
}

}  // namespace flash
