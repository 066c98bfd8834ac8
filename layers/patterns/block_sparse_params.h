// Block-sparse attention's parameters (layers/patterns/block_sparse.h): block size b and the
// layout's builders, united (0: unused): a window of W tokens, the first g tokens global, key
// blocks at block distances that are multiples of r within a window, `count` random key blocks
// per query block row, an explicit layout (block_layout.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include "core/error.h"
#include "layers/patterns/block_layout.h"
#include "layers/patterns/pattern_common.h"

struct BlockSparseParams {
    int block = 0, window = 0, global = 0, dilated_r = 0, dilated_window = 0, random_count = 0;
    uint64_t random_seed = 0;
    std::shared_ptr<const BlockLayout> layout;
    BlockLayoutView layout_view() const { return layout ? layout->view() : BlockLayoutView{}; }
    // Dilated, random or explicit blocks: else the token rules (window, global) say it all.
    bool any_block_rules() const { return dilated_r || random_count || layout; }
};

// The same by value for a kernel: the explicit layout is a device view there
// (layers/cuda/pattern_args.cuh uploads it), and what the element mask derives from the rules
// is worked out once.
struct BlockSparseArgs {
    int block, window, global, dilated_r, dilated_window, random_count;
    uint64_t random_seed;
    BlockLayoutView layout;
    bool any_block_rules;  // dilated, random or explicit blocks: else the token rules say it all
    int block_shift;       // log2(block)
    ATTN_HD BlockLayoutView layout_view() const { return layout; }
};

// `layout` is where the kernel reads p.layout (its device copy), or empty when p has none.
inline BlockSparseArgs to_args(const BlockSparseParams& p, BlockLayoutView layout) {
    int shift = 0;
    while ((1 << shift) < p.block) shift++;
    return BlockSparseArgs{p.block,        p.window,      p.global, p.dilated_r,           p.dilated_window,
                           p.random_count, p.random_seed, layout,   p.any_block_rules(), shift};
}
inline BlockSparseArgs to_args(const BlockSparseParams& p) {
    if (p.layout) fatal("internal: a block-sparse layout needs its device copy: use pattern_args_cuda (layers/cuda/pattern_args.cuh)");
    return to_args(p, BlockLayoutView{});
}

// The rules by value for a kernel's element mask, with causality (block_rules needs it).
struct BlockSparseRules {
    bool causal;
    BlockSparseArgs args;
};

// A block-sparse launch's tile lists on the device (block_sparse.cuh reads them, built by
// block_sparse_lists.cuh): CSR lists for query tiles of BM rows and key tiles of BN rows, entries
// tile * 2 + cut, and the launch order of each side's tiles.
struct BlockSparseTileView {
    const int* q_ptr;    // (query tiles + 1)
    const int* k_of_q;   // key tiles of each query tile
    const int* k_ptr;    // (key tiles + 1)
    const int* q_of_k;   // query tiles of each key tile
    const int* q_order;  // (query tiles): rank -> query tile, the longest list first
    const int* k_order;  // (key tiles)
    int BM, BN;
};

// What its flash-kernel launch carries (PatternLaunchArgs): the rules (an explicit layout's
// device copy) set by block_sparse.cuh's bind, the tile lists of the launcher's tile shape set by
// its bind_tiles.
struct BlockSparseLaunchArgs {
    BlockSparseRules rules;
    BlockSparseTileView tiles;
};

// Block size, window and global tokens, "r,window" dilated blocks, "count,seed" random blocks,
// a layout file.
struct BlockSparseFlags {
    int block = 64, window = 0, global = 0;
    std::string dilated_blocks, random_blocks, layout_file;
};
