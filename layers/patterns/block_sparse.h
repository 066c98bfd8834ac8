// Block-sparse attention (docs/attention-spec.md#block-sparse). Blocks of b tokens; a
// query keeps the keys its layout's builders give it, united, then the causal mask; one softmax
// per row over all of them (joint normalization). The builders:
//   window W      keys less than W tokens back (|q - k| < W without the causal mask);
//   global g      the first g tokens are keys of every row, and rows q < g see every key;
//   dilated r, V  key blocks at block distance d with d % r == 0 and d b < V (d = qb - kb, |..|
//                 without the causal mask): a sparse reach far back;
//   random c, s   c key blocks per (head, query block), drawn from the allowed ones by seed s;
//   layout file   explicit key blocks per query block (per head or shared; BlockLayout).
// Window and global are rules on tokens (their blocks can be partly filled), the others on
// blocks (every key of an active block). A key counts once whatever number of builders keep it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include "core/flags.h"
#include "core/json.h"
#include "layers/patterns/block_layout.h"
#include "layers/patterns/pattern_params.h"

// The c-th random key block of (head, query block) among `range` candidates (splitmix64 of the
// coordinates): the same on the host and in a kernel.
ATTN_HD inline int block_sparse_random_block(uint64_t seed, int head, int qb, int i, int range) {
    uint64_t z = seed ^ ((uint64_t)(uint32_t)head << 40) ^ ((uint64_t)(uint32_t)qb << 16) ^ (uint64_t)(uint32_t)i;
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (int)(z % (uint64_t)range);
}

struct BlockSparsePattern {
    static constexpr const char* kName = "block-sparse";

    static std::string validate(const AttnPattern& p) {
        const BlockSparseParams& s = p.block_sparse;
        if (s.block < 1 || s.block > 4096 || (s.block & (s.block - 1)))
            return "--block " + std::to_string(s.block) + " must be a power of two in [1, 4096]";
        if (s.window < 0 || s.global < 0 || s.dilated_r < 0 || s.dilated_window < 0 || s.random_count < 0)
            return "--window, --global, --dilated-blocks and --random-blocks must not be negative";
        if ((s.dilated_r > 0) != (s.dilated_window > 0)) return "--dilated-blocks needs both r and a window: r,W with r, W > 0";
        if (!s.window && !s.global && !s.dilated_r && !s.random_count && !s.layout)
            return "a block-sparse layout needs a builder: --window, --global, --dilated-blocks, --random-blocks or --layout-file";
        return "";
    }

    // An explicit layout has one set of rows for every head, or one per head: a file in the
    // per-head form names each of the H heads (0 to H-1), no fewer (a missing head would keep
    // nothing, and a file naming only head 0 would be read as shared by every head) and no more.
    static std::string heads_error(const AttnPattern& p, int H) {
        const std::shared_ptr<const BlockLayout>& L = p.block_sparse.layout;
        if (!L || L->heads == H) return "";
        if (L->per_head && L->heads < H)
            return "the per-head layout " + L->source + " names " +
                   (L->heads == 1 ? std::string("only head 0") : "heads 0 to " + std::to_string(L->heads - 1)) + " but not head " +
                   std::to_string(L->heads) + " of the " + std::to_string(H) + ": give every head its 'H/Q: ...' rows (heads 0 to " +
                   std::to_string(H - 1) + "), or one layout for all heads ('Q: ...' rows)";
        if (L->per_head)
            return "the per-head layout " + L->source + " names head " + std::to_string(L->heads - 1) + " but there are " +
                   std::to_string(H) + " heads (0 to " + std::to_string(H - 1) + "): give rows for heads 0 to " + std::to_string(H - 1) +
                   " only, or one layout for all heads ('Q: ...' rows)";
        if (L->heads == 1) return "";
        return "the block-sparse layout " + L->source + " has rows for " + std::to_string(L->heads) + " heads but there are " +
               std::to_string(H) + ": give one layout for all heads ('Q: ...' rows) or one per head";
    }

    // 1 if some builder keeps key k for query q (head h, global length N), else 0: the token rules
    // on positions, then the block rules on the blocks (kernels ask the two apart: block_rules
    // only when the pattern has some, with its blocks found by a shift).
    ATTN_HD_TEMPLATE template <class P>  // AttnPattern or AttnPatternArgs
    ATTN_HD static int multiplicity(const P& p, int head, int q, int k, int seq_len) {
        const auto& s = p.block_sparse;
        return token_rules(p.causal, s, q, k) || block_rules(p.causal, s, head, q / s.block, k / s.block, seq_len) ? 1 : 0;
    }
    // A window of W tokens and g global tokens. S: BlockSparseParams or BlockSparseArgs.
    ATTN_HD_TEMPLATE template <class S>
    ATTN_HD static bool token_rules(bool causal, const S& s, int q, int k) {
        const int d = q - k, ad = d < 0 ? -d : d;
        return (s.window && (causal ? d < s.window : ad < s.window)) || (s.global && (k < s.global || q < s.global));
    }
    // Dilated blocks, random blocks, an explicit layout: query block qb, key block kb.
    ATTN_HD_TEMPLATE template <class S>
    ATTN_HD static bool block_rules(bool causal, const S& s, int head, int qb, int kb, int seq_len) {
        const int b = s.block, bd = causal ? qb - kb : (qb > kb ? qb - kb : kb - qb);
        if (s.dilated_r && bd >= 0 && bd % s.dilated_r == 0 && (long long)bd * b < s.dilated_window) return true;
        if (s.random_count) {
            const int range = causal ? qb + 1 : (seq_len + b - 1) / b;
            for (int i = 0; i < s.random_count; i++)
                if (block_sparse_random_block(s.random_seed, head, qb, i, range) == kb) return true;
        }
        return s.layout_view().has(head, qb, kb);
    }

    // Summed over rows, with causality: per row, the keys of its active blocks (block rules), plus
    // the keys the token rules (window, global) add outside those blocks. Heads differ only
    // through the random and explicit rules, so the others are counted once and times H.
    static double pairs_kept(const AttnPattern& p, int N, int H) {
        const BlockSparseParams& s = p.block_sparse;
        const int b = s.block, nb = (N + b - 1) / b;
        const bool per_head = s.random_count || (s.layout && s.layout->heads > 1);
        double total = 0;
        std::vector<char> in_block(nb, 0);
        for (int h = 0; h < (per_head ? H : 1); h++)
            for (int qb = 0; qb < nb; qb++) {
                const std::vector<int> blocks = active_blocks(p, h, qb, N);
                for (int kb : blocks) in_block[kb] = 1;
                for (int q = qb * b; q < std::min(N, qb * b + b); q++) {
                    const int kmax = p.causal ? q : N - 1;  // keys [0, kmax]
                    for (int kb : blocks)
                        if (kb * b <= kmax) total += std::min(kmax, kb * b + b - 1) - kb * b + 1;
                    if (s.global && q < s.global) {  // a global row sees every allowed key
                        for (int kb = 0; kb <= kmax / b; kb++)
                            if (!in_block[kb]) total += std::min(kmax, kb * b + b - 1) - kb * b + 1;
                        continue;
                    }
                    // The token rules' keys as up to two intervals: [0, g) and the window.
                    const int wlo = s.window ? std::max(0, q - s.window + 1) : 1, whi = s.window ? kmax : 0;
                    const int whi2 = s.window && !p.causal ? std::min(N - 1, q + s.window - 1) : whi;
                    const int glo = 0, ghi = s.global ? std::min(kmax, s.global - 1) : -1;
                    auto add_interval = [&](int lo, int hi, int skip_lo, int skip_hi) {  // keys in [lo, hi] outside
                        for (int kb = lo / b; lo <= hi && kb <= hi / b; kb++) {       // blocks and [skip_lo, skip_hi]
                            if (in_block[kb]) continue;
                            const int a = std::max(lo, kb * b), z = std::min(hi, kb * b + b - 1);
                            const int overlap = std::max(0, std::min(z, skip_hi) - std::max(a, skip_lo) + 1);
                            total += z - a + 1 - overlap;
                        }
                    };
                    if (s.window) add_interval(wlo, whi2, 1, 0);
                    if (s.global) add_interval(glo, ghi, s.window ? wlo : 1, s.window ? whi2 : 0);
                }
                for (int kb : blocks) in_block[kb] = 0;
            }
        return per_head ? total : total * H;
    }

    // The key blocks the block rules give (head, query block), sorted and unique, allowed by the
    // causal mask (at or below the diagonal).
    static std::vector<int> active_blocks(const AttnPattern& p, int h, int qb, int N) {
        const BlockSparseParams& s = p.block_sparse;
        const int nb = (N + s.block - 1) / s.block, kb_max = p.causal ? qb : nb - 1;
        std::vector<int> out;
        if (s.dilated_r)
            for (long long d = 0; d * s.block < s.dilated_window && d < nb; d += s.dilated_r) {  // no block past the ends
                if (qb - d >= 0) out.push_back((int)(qb - d));
                if (!p.causal && d > 0 && qb + d <= kb_max) out.push_back((int)(qb + d));
            }
        if (s.random_count) {
            const int range = p.causal ? qb + 1 : nb;
            for (int i = 0; i < s.random_count; i++) out.push_back(block_sparse_random_block(s.random_seed, h, qb, i, range));
        }
        if (s.layout && qb < s.layout->n_blocks && (s.layout->heads == 1 || h < s.layout->heads)) {
            const int row = (s.layout->heads == 1 ? 0 : h) * s.layout->n_blocks + qb;
            for (int j = s.layout->row_ptr[row]; j < s.layout->row_ptr[row + 1]; j++) out.push_back(s.layout->cols[j]);
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        while (!out.empty() && out.back() > kb_max) out.pop_back();
        return out;
    }

    // Can a query in [q_lo, q_hi] keep a key in [k_lo, k_hi] (causal aside)?
    static bool tiles_meet(const AttnPattern& p, int q_lo, int q_hi, int k_lo, int k_hi, int seq_len) {
        const BlockSparseParams& s = p.block_sparse;
        if (s.window) {
            const int dmin = q_lo - k_hi, dmax = q_hi - k_lo;  // q - k over the two ranges
            if (p.causal ? dmin < s.window : (dmin < s.window && dmax > -s.window)) return true;
        }
        if (s.global && (k_lo < s.global || q_lo < s.global)) return true;
        if (s.random_count) return true;  // drawn per head, and tiles_meet knows no head: assume they may
        const int b = s.block, heads = s.layout ? s.layout->heads : 1;
        for (int h = 0; h < heads; h++)
            for (int qb = q_lo / b; qb <= q_hi / b; qb++)
                for (int kb : active_blocks(p, h, qb, seq_len))
                    if (kb >= k_lo / b && kb <= k_hi / b) return true;
        return false;
    }
    static bool tiles_full(const AttnPattern&, int, int, int, int, int) { return false; }  // element masks everywhere

    static std::vector<AttnPattern> branches(const AttnPattern& p) { return {p}; }  // one joint softmax

    // What a KV cache keeps (docs/attention-spec.md#decoding): every row, as one branch; a later
    // query may need any earlier key, and a chunk needs no rows unpacked.
    static std::vector<CacheBranchShape> cache_branches(const AttnPattern&) { return {{kWholeSequence, 1, -1}}; }
    static long long cache_first_key(const AttnPattern&, long long) { return 0; }
    static long long cache_unpack_rows(const AttnPattern&, int) { return 0; }
    // One token goes through the chunked path (the flash kernels over the tile lists): the
    // decode kernel walks branches, not layouts.
    static constexpr bool kDecodesOneToken = false;
    static constexpr bool kCudnnRuns = false;
    static constexpr bool kLaunchesPerBranch = false;  // one launch over its tile lists

    static void add_flags(Flags& flags, PatternFlags& all) {
        BlockSparseFlags& f = all.block_sparse;
        flags.add_int("block", &f.block, "block-sparse: block size b in tokens");
        flags.add_int("window", &f.window, "block-sparse: each token sees the keys less than this many tokens back");
        flags.add_int("global", &f.global, "block-sparse: the first g tokens are seen by every token and see every key");
        flags.add_string("dilated-blocks", &f.dilated_blocks, "block-sparse: r,W: key blocks at block distances that are multiples of r, within W tokens");
        flags.add_string("random-blocks", &f.random_blocks, "block-sparse: count,seed: random key blocks per query block and head");
        flags.add_string("layout-file", &f.layout_file, "block-sparse: explicit key blocks per query block ('Q: K K ...' or 'H/Q: K K ...' lines)");
    }
    static void from_flags(const PatternFlags& flags, AttnPattern& p) {
        const BlockSparseFlags& f = flags.block_sparse;
        BlockSparseParams& s = p.block_sparse;
        s.block = f.block, s.window = f.window, s.global = f.global;
        if (!f.dilated_blocks.empty()) {
            const std::vector<int> v = parse_int_list(f.dilated_blocks, "--dilated-blocks");
            if (v.size() != 2) fatal("--dilated-blocks expects r,W (a block stride and a window in tokens), got '%s'", f.dilated_blocks.c_str());
            s.dilated_r = v[0], s.dilated_window = v[1];
        }
        if (!f.random_blocks.empty()) {
            const std::vector<int> v = parse_int_list(f.random_blocks, "--random-blocks");
            if (v.size() != 2 || v[0] < 0 || v[1] < 0)
                fatal("--random-blocks expects count,seed (blocks per query block, a seed >= 0), got '%s'", f.random_blocks.c_str());
            s.random_count = v[0], s.random_seed = (uint64_t)v[1];
        }
        if (!f.layout_file.empty()) s.layout = read_layout_file(f.layout_file, p.causal);
    }
    // validate's messages name each flag with its value.
    static std::string flags_text(const PatternFlags&) { return ""; }
    static std::string json_fields(const AttnPattern& p) {
        const BlockSparseParams& s = p.block_sparse;
        std::string out = ",\"block\":" + std::to_string(s.block) + ",\"window\":" + std::to_string(s.window) +
                          ",\"global\":" + std::to_string(s.global) + ",\"dilated_r\":" + std::to_string(s.dilated_r) +
                          ",\"dilated_window\":" + std::to_string(s.dilated_window) + ",\"random_count\":" +
                          std::to_string(s.random_count) + ",\"random_seed\":" + std::to_string(s.random_seed);
        if (s.layout) {
            auto list = [](const std::vector<int>& v) {
                std::string text = "[";
                for (size_t i = 0; i < v.size(); i++) text += (i ? "," : "") + std::to_string(v[i]);
                return text + "]";
            };
            out += ",\"layout\":{\"n_blocks\":" + std::to_string(s.layout->n_blocks) + ",\"heads\":" +
                   std::to_string(s.layout->heads) + ",\"row_ptr\":" + list(s.layout->row_ptr) + ",\"cols\":" + list(s.layout->cols) + "}";
        }
        return out;
    }
    static void from_json(const Json& j, AttnPattern& p) {
        BlockSparseParams& s = p.block_sparse;
        const long long kInt = 2147483647;
        // Any int: validate (the rule the flags have) refuses the rest in the flags' words.
        s.block = (int)j.at("block").as_int("block", -kInt, kInt);
        s.window = (int)j.at("window").as_int("window", -kInt, kInt);
        s.global = (int)j.at("global").as_int("global", -kInt, kInt);
        s.dilated_r = (int)j.at("dilated_r").as_int("dilated_r", -kInt, kInt);
        s.dilated_window = (int)j.at("dilated_window").as_int("dilated_window", -kInt, kInt);
        s.random_count = (int)j.at("random_count").as_int("random_count", -kInt, kInt);
        s.random_seed = (uint64_t)j.at("random_seed").as_int("random_seed", 0, kInt);
        if (j.has("layout")) s.layout = layout_from_json(j.at("layout"), p.causal);
    }

    // The file behind --layout-file (layers/patterns/block_layout.h: its format and limits).
    static std::shared_ptr<const BlockLayout> read_layout_file(const std::string& path, bool causal) {
        return read_block_layout_file(path, causal);
    }

    // The checkpoint's layout, under the file's limits and its one check (block_layout_error):
    // the shape before any row is stored, then the rows. `causal` is the pattern's, read first
    // (pattern_from_json).
    static std::shared_ptr<const BlockLayout> layout_from_json(const Json& l, bool causal) {
        auto L = std::make_shared<BlockLayout>();
        L->n_blocks = (int)l.at("n_blocks").as_int("layout n_blocks", 1, kMaxLayoutBlocks);
        L->heads = (int)l.at("heads").as_int("layout heads", 1, kMaxLayoutHeads);
        const std::vector<Json>& row_ptr = l.at("row_ptr").as_array("layout row_ptr");
        const std::vector<Json>& cols = l.at("cols").as_array("layout cols");
        const std::string shape = block_layout_shape_error(L->n_blocks, L->heads, (long long)cols.size());
        if (!shape.empty()) throw JsonError("the checkpoint's layout: " + shape);
        for (const Json& x : row_ptr) L->row_ptr.push_back((int)x.as_int("row_ptr", 0, kMaxLayoutKeys));
        for (const Json& x : cols) L->cols.push_back((int)x.as_int("cols", 0, L->n_blocks - 1));
        const std::string why = block_layout_error(*L, causal);
        if (!why.empty()) throw JsonError("the checkpoint's layout " + why);
        L->source = "checkpoint";
        return L;
    }

    // Density: active blocks / all blocks (under the causal mask, those at or below the diagonal).
    // A block is active if a block rule keeps it or a token rule reaches into it.
    static double density(const AttnPattern& p, int N, int H) {
        const BlockSparseParams& s = p.block_sparse;
        const int b = s.block, nb = (N + b - 1) / b;
        const bool per_head = s.random_count || (s.layout && s.layout->heads > 1);
        double active = 0, all = 0;
        std::vector<char> on(nb);
        for (int h = 0; h < (per_head ? H : 1); h++)
            for (int qb = 0; qb < nb; qb++) {
                std::fill(on.begin(), on.end(), 0);
                for (int kb : active_blocks(p, h, qb, N)) on[kb] = 1;
                for (int kb = 0; kb < (p.causal ? qb + 1 : nb); kb++) {
                    const int gap = std::abs(qb - kb), closest = gap ? (gap - 1) * b + 1 : 0;  // smallest |q - k|
                    const bool window = s.window && closest < s.window && (!p.causal || kb <= qb);
                    const bool global = s.global && (kb * b < s.global || qb * b < s.global);
                    active += on[kb] || window || global;
                    all++;
                }
            }
        return all ? active / all : 0;
    }
};
