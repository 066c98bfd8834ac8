// A pattern's parameters for a kernel (AttnPatternArgs), with what lives in host memory put on the
// device: a block-sparse pattern's explicit layout (BlockLayout) is uploaded once and kept for
// the life of the program (the cache holds the layout too, so its address is never reused).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include "layers/attention_pattern.h"
#include "layers/cuda/common.cuh"

inline AttnPatternArgs pattern_args_cuda(const AttnPattern& p) {
    AttnPattern host = p;
    host.block_sparse.layout.reset();
    AttnPatternArgs a = pattern_args(host);
    const std::shared_ptr<const BlockLayout>& layout = p.block_sparse.layout;
    if (!layout) return a;
    struct Uploaded {
        std::shared_ptr<const BlockLayout> keep;
        int *row_ptr = nullptr, *cols = nullptr;
    };
    static std::mutex mu;
    static std::map<const BlockLayout*, Uploaded> cache;  // per process; device 0's copies (tests, inference)
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
    // The whole block-sparse member again from the pattern with its layout (to_args derives what
    // the element mask needs, an explicit layout among its block rules), now with the device view.
    a.block_sparse = to_args(p.block_sparse, BlockLayoutView{u.row_ptr, u.cols, layout->n_blocks, layout->heads});
    return a;
}
