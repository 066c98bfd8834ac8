// DataLoader: cuts one TokenShard into fixed-length training windows and serves them in
// batches, deterministically and resumably.
//
// Window i covers tokens [i*T, i*T+T) as inputs and [i*T+1, i*T+T+1) as targets; windows do
// not overlap, so n_windows = (n_tokens-1)/T and one epoch shows every token once.
//
// The loader reads an endless stream of windows: epoch 0's order, then epoch 1's, and so on.
// Shuffled, each epoch's order is a permutation derived only from (seed, epoch) with our own
// PRNG and Fisher-Yates (core/rng.h), so it is identical on every machine and library.
// Unshuffled (validation), windows come in file order. A batch simply takes the next B windows
// of the stream, so it may straddle an epoch boundary; in exchange every window is seen exactly
// once per epoch and nothing is dropped. The position in the stream, LoaderState{epoch, cursor},
// is all a checkpoint needs for an exact resume.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "data/shard.h"
#include "core/error.h"

struct LoaderState {
    uint64_t epoch = 0;   // how many full passes over the windows are done
    uint64_t cursor = 0;  // position inside the current epoch's order, < n_windows
};

class DataLoader {
public:
    // The shard is referenced, not copied: it must outlive the loader.
    DataLoader(const TokenShard& shard, int B, int T, uint64_t seed, bool shuffle)
        : shard_(&shard), B_(B), T_(T), seed_(seed), shuffle_(shuffle) {
        if (B <= 0) fatal("--batch must be positive, got %d", B);
        if (T <= 0) fatal("--seq-len must be positive, got %d", T);
        n_windows_ = shard.n_tokens() > 0 ? (shard.n_tokens() - 1) / uint64_t(T) : 0;
        if (n_windows_ < uint64_t(B))
            fatal("--seq-len %d with batch %d needs at least %llu tokens but %s has %llu: "
                  "lower --seq-len or --batch", T, B,
                  (unsigned long long)(uint64_t(B) * uint64_t(T) + 1), shard.path.c_str(),
                  (unsigned long long)shard.n_tokens());
        start_epoch(0);
    }

    // Fill the next batch. All three arrays are (B, T) row-major.
    //   inputs[b*T+t]    token at window position t
    //   targets[b*T+t]   the token after it
    //   doc_start[b*T+t] window-relative index of the first token of the document containing
    //                    position t, clamped to 0 when that document began before the window.
    //                    Attention stays inside a document by allowing key j for query t only
    //                    if j >= doc_start[b*T+t].
    void next_batch(int* inputs, int* targets, int* doc_start) {
        for (int b = 0; b < B_; b++) {
            const uint64_t w = shuffle_ ? order_[state_.cursor] : state_.cursor;
            const size_t off = size_t(b) * size_t(T_);
            fill_window(w, inputs + off, targets + off, doc_start + off);
            if (++state_.cursor == n_windows_) start_epoch(state_.epoch + 1);
        }
    }

    LoaderState state() const { return state_; }

    // Continue exactly where `s` was taken, even in a new process.
    void restore(const LoaderState& s) {
        if (s.cursor >= n_windows_)
            fatal("loader state cursor %llu is out of range for %s (%llu windows of %d tokens): "
                  "resume with the same data, --seq-len and --batch as the checkpoint",
                  (unsigned long long)s.cursor, shard_->path.c_str(),
                  (unsigned long long)n_windows_, T_);
        start_epoch(s.epoch);
        state_.cursor = s.cursor;
    }

    void reset() { start_epoch(0); }

    uint64_t n_windows() const { return n_windows_; }
    uint64_t tokens_per_epoch() const { return n_windows_ * uint64_t(T_); }
    int batch_size() const { return B_; }
    int seq_len() const { return T_; }

private:
    const TokenShard* shard_;
    int B_, T_;
    uint64_t seed_;
    bool shuffle_;
    uint64_t n_windows_ = 0;
    LoaderState state_;
    std::vector<uint64_t> order_;  // this epoch's window order (shuffled mode only)

    void start_epoch(uint64_t epoch) {
        state_.epoch = epoch;
        state_.cursor = 0;
        if (!shuffle_) return;
        order_.resize(n_windows_);
        for (uint64_t i = 0; i < n_windows_; i++) order_[i] = i;
        // Derive the epoch's generator from both numbers through SplitMix64 so that nearby
        // seeds and nearby epochs still give unrelated permutations.
        SplitMix64 rng(SplitMix64(seed_).next() ^ SplitMix64(~epoch).next());
        fisher_yates(order_, rng);
    }

    void fill_window(uint64_t w, int* in, int* tg, int* ds) const {
        const std::vector<uint32_t>& tok = shard_->tokens;
        const std::vector<uint64_t>& starts = shard_->doc_starts;
        const uint64_t w0 = w * uint64_t(T_);
        // Binary search once for the document containing the window's first token, then walk
        // forward across document boundaries as t advances.
        size_t d = size_t(std::upper_bound(starts.begin(), starts.end(), w0) - starts.begin());
        d = d > 0 ? d - 1 : 0;  // starts[0] == 0 in every valid shard, so d-1 always exists
        for (int t = 0; t < T_; t++) {
            const uint64_t p = w0 + uint64_t(t);
            while (d + 1 < starts.size() && starts[d + 1] <= p) d++;
            in[t] = int(tok[p]);
            tg[t] = int(tok[p + 1]);
            ds[t] = starts[d] > w0 ? int(starts[d] - w0) : 0;
        }
    }
};
