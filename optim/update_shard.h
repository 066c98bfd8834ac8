// Data parallelism's AdamW update split over the ranks (the update of ZeRO-1, Rajbhandari et al.
// 2020; its memory saving is not taken: every rank still holds all the moments). Every rank has
// the summed gradients, so every rank could update every weight (the default): P times the
// same 30 bytes of traffic per weight. Instead rank r updates its slice of the flat weights and
// sends the result to the others, one broadcast per owner: each rank's update costs 1/P, and the
// weights arriving cost 2 bytes (bf16 on the GPU) per weight. AdamW is elementwise, so the weights
// are the same bits as with every rank updating everything; the owners' moments (and the GPU's
// fp32 master weights) are gathered the same way when a checkpoint needs them (gather_state).
// The broadcasts run exposed before the next forward (they are not an all-gather overlapped
// with it), which costs more than the update saves, so train leaves it off unless
// --shard-update on (see notes/ring-attention.md, the AdamW update split over the ranks).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>
#include "comm/comm.h"

// Rank r of P owns [r * per, (r + 1) * per) of the n flat weights, per = ceil(n / P), clipped to n.
struct UpdateShard {
    size_t lo = 0, hi = 0;
};
inline UpdateShard update_shard(size_t n, int P, int r) {
    const size_t per = (n + (size_t)P - 1) / (size_t)P;
    UpdateShard s;
    s.lo = std::min(n, per * (size_t)r);
    s.hi = std::min(n, s.lo + per);
    return s;
}

// f(tensor, first element, count) for each tensor's part inside the shard, in layout order: the
// update keeps each tensor's own settings (weight decay or not). Tensor: anything with offset and
// size (the model's ParamTensor).
template <class Tensor, class F>
void for_each_in_shard(const std::vector<Tensor>& layout, UpdateShard s, F f) {
    for (const Tensor& t : layout) {
        const size_t a = std::max(t.offset, s.lo), b = std::min(t.offset + t.size, s.hi);
        if (a < b) f(t, a, b - a);
    }
}

// The n elements of x (elem_bytes each) whole on every rank: each owner broadcasts its shard.
inline void share_shards(Comm& comm, void* x, size_t n, size_t elem_bytes) {
    for (int q = 0; q < comm.size(); q++) {
        const UpdateShard s = update_shard(n, comm.size(), q);
        if (s.hi > s.lo) comm.broadcast((char*)x + s.lo * elem_bytes, (s.hi - s.lo) * elem_bytes, q);
    }
}
