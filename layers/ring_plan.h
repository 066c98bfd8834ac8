// Ring attention's plan (docs/attention-spec.md#ring): who holds which tokens, which
// (query chunk, key chunk) pairs are computed at each step, and which chunks move. The CPU
// driver (layers/ring_attention.h) and the GPU driver (layers/cuda/ring_attention.cuh) follow
// the same plan, and every rank computes it alone from (pattern, P, N): the ranks agree on every
// message size without asking each other.
//
// The zigzag split: the global sequence of N tokens is cut into 2P chunks of c = N / 2P tokens;
// rank p holds chunks p and 2P-1-p, in that order (its local rows 0..c-1 and c..2c-1). Under the
// causal mask an early chunk has little work and a late one much; each rank gets one of each.
//
// Ring step s = 0..P-1: rank r holds the key/value block (both chunks) of rank (r - s) mod P and
// computes its two query chunks against those key chunks. A pair is computed only if the pattern
// can keep some pair of its position ranges (pattern_tiles_meet: causality, dilated segments).
// A chunk is passed on to step s only if some rank at step s or later needs it, so a chunk that
// no other rank needs never leaves its owner (dilated attention whose segments stay inside
// chunks moves no bytes). The backward's dK, dV accumulators travel with their chunk and, after
// the last step that needs it, go straight back to the owner.
#pragma once
#include <string>
#include <vector>
#include "layers/attention_pattern.h"

struct RingPlan {
    const AttnPattern pattern;  // const: the tables below are computed from it
    int P = 1, N = 0, c = 0;  // ranks, global length, chunk length

    RingPlan(const AttnPattern& p, int P_, int N_) : pattern(p), P(P_), N(N_) {
        if (P < 1) fatal("ring attention: %d ranks, need at least 1", P);
        if (N < 2 * P || N % (2 * P) != 0)
            fatal("ring attention: a window of %d tokens does not split into 2 x %d equal chunks: use a sequence length "
                  "that is a multiple of %d",
                  N, P, 2 * P);
        c = N / (2 * P);
        // Which chunk pairs meet, and the last step each chunk is needed: every later question
        // (each step of each call, on the training path) reads these instead of asking the pattern.
        meets_.resize((size_t)4 * P * P);
        for (int qc = 0; qc < 2 * P; qc++)
            for (int kc = 0; kc < 2 * P; kc++)
                meets_[(size_t)qc * 2 * P + kc] =
                    pattern_tiles_meet(pattern, pos0(qc), pos0(qc) + c - 1, pos0(kc), pos0(kc) + c - 1, N);
        last_.assign((size_t)2 * P, 0);
        for (int owner = 0; owner < P; owner++)
            for (int k = 0; k < 2; k++)
                for (int s = P - 1; s > 0; s--)
                    if (needed_at(owner, k, s)) {
                        last_[(size_t)owner * 2 + k] = s;
                        break;
                    }
    }

    int chunk(int rank, int k) const { return k == 0 ? rank : 2 * P - 1 - rank; }  // k: local chunk 0 or 1
    int pos0(int chunk_id) const { return chunk_id * c; }
    // The global position of each of a rank's 2c local rows.
    std::vector<int> positions(int rank) const {
        std::vector<int> pos(2 * c);
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < c; i++) pos[k * c + i] = pos0(chunk(rank, k)) + i;
        return pos;
    }
    int owner_at(int rank, int step) const { return ((rank - step) % P + P) % P; }  // whose block rank holds
    int holder_at(int owner, int step) const { return (owner + step) % P; }

    // Can the query chunk qc keep any key of chunk kc?
    bool pair_meets(int qc, int kc) const { return meets_[(size_t)qc * 2 * P + kc]; }
    // Does the rank holding owner's block at `step` need its chunk k?
    bool needed_at(int owner, int k, int step) const {
        const int r = holder_at(owner, step);
        return pair_meets(chunk(r, 0), chunk(owner, k)) || pair_meets(chunk(r, 1), chunk(owner, k));
    }
    // The last step that needs chunk k of owner's block (0: only its owner, or nobody).
    int last_step(int owner, int k) const { return last_[(size_t)owner * 2 + k]; }
    // Is chunk k of owner's block passed into step s (s >= 1)?
    bool moves_into(int owner, int k, int step) const { return step >= 1 && step <= last_step(owner, k); }

    // Chunks received by `rank` for step s (s >= 1), and sent by it (its step s-1 block).
    int chunks_in(int rank, int step) const {
        const int o = owner_at(rank, step);
        return moves_into(o, 0, step) + moves_into(o, 1, step);
    }
    int chunks_out(int rank, int step) const {
        const int o = owner_at(rank, step - 1);
        return moves_into(o, 0, step) + moves_into(o, 1, step);
    }
    // Chunks the whole ring moves in one forward, and what a plain ring moves (every block to
    // every rank: P - 1 transfers of 2 chunks per rank).
    long long chunks_moved() const {
        long long n = 0;
        for (int r = 0; r < P; r++)
            for (int s = 1; s < P; s++) n += chunks_in(r, s);
        return n;
    }
    long long chunks_moved_plain() const { return 2LL * P * (P - 1); }
    // Does every query chunk meet no key chunk but its own? Then nothing moves and each rank's
    // ring is attention within each of its two chunks (dilated attention whose segments stay
    // inside chunks): the GPU driver runs it so, without the ring's received blocks, fp32
    // partial outputs and dK/dV accumulators (layers/cuda/ring_attention.cuh).
    bool local() const {
        for (int qc = 0; qc < 2 * P; qc++)
            for (int kc = 0; kc < 2 * P; kc++)
                if (qc != kc && pair_meets(qc, kc)) return false;
        return true;
    }
    // Pairs computed over all ranks and steps, of the 4 P^2 a plain ring computes.
    long long pairs_computed() const {
        long long n = 0;
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++)
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) n += pair_meets(chunk(r, a), chunk(owner_at(r, s), b));
        return n;
    }

   private:
    std::vector<char> meets_;  // (2P, 2P): chunk pairs the pattern can keep
    std::vector<int> last_;    // (P, 2): last step needing each chunk
};

// What one rank's ring moved and computed (bytes of K/V forward; K/V plus dK/dV backward).
struct RingStats {
    long long fwd_bytes = 0, fwd_bytes_plain = 0, bwd_bytes = 0, bwd_bytes_plain = 0;
    int pairs = 0, pairs_plain = 0;
};
