// libFuzzer harness: token shards and the loader (data/shard.h, data/loader.h), as train reads
// train.bin / val.bin and resumes from a checkpoint's loader state.
//
// Input: 4 bytes of loader settings, then the shard file's bytes.
//   byte 0: B = 1 + b0 % 4          byte 2: bit 0 shuffle, bit 1 fix sizes, bits 2-7 the seed
//   byte 1: T = 1 + b1 % 16         byte 3: bit 7 set: restore({epoch = b3 >> 4 & 7, cursor = b3 & 15})
// "Fix sizes" rewrites the header's n_tokens (and n_docs, if too big) to what the file's size
// holds and drops a trailing partial token, so that mutations that insert or delete bytes
// still reach the document, token and loader checks instead of the size check.
// read_shard, then a DataLoader on it, then 3 batches (crossing epochs on small shards).
// Checked on every batch, against the shard itself: each row is some window w's tokens
// [w*T, w*T+T) with targets shifted by one (unshuffled: exactly the windows in file order from
// the cursor), and doc_start[t] is the window-relative start of the document holding token t
// (0 when it began before the window).
// Findings: see tests/fuzz/fuzz_common.h. Seeds: tests/fuzz/shard_loader/seeds (make_seeds.cpp).
#include "data/loader.h"
#include "tests/fuzz/fuzz_common.h"

// Does row (in, tg, ds) show window w of the shard? doc_of[p]: start of token p's document.
static bool row_is_window(const TokenShard& s, const std::vector<uint64_t>& doc_of, int T, uint64_t w, const int* in,
                          const int* tg, const int* ds) {
    const uint64_t w0 = w * uint64_t(T);
    if (w0 + uint64_t(T) >= s.n_tokens()) return false;
    for (int t = 0; t < T; t++) {
        const uint64_t p = w0 + uint64_t(t);
        if (in[t] != int(s.tokens[p]) || tg[t] != int(s.tokens[p + 1])) return false;
        const int want = doc_of[p] > w0 ? int(doc_of[p] - w0) : 0;
        if (ds[t] != want) return false;
    }
    return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzFile file("fuzz_shard");
    if (size < 4) return 0;
    const int B = 1 + data[0] % 4, T = 1 + data[1] % 16;
    const bool shuffle = data[2] & 1;
    const bool fix_sizes = data[2] & 2;
    const uint64_t seed = data[2] >> 2;
    const bool restore = data[3] & 0x80;
    const LoaderState want_state{uint64_t((data[3] >> 4) & 7), uint64_t(data[3] & 15)};
    std::string bytes(reinterpret_cast<const char*>(data) + 4, size - 4);
    if (fix_sizes && bytes.size() >= kShardHeaderBytes) {
        const uint64_t tb = shard_get_le(&bytes[12], 4);
        const uint64_t body = bytes.size() - kShardHeaderBytes;
        uint64_t n_docs = shard_get_le(&bytes[24], 8);
        if (tb == 2 || tb == 4) {
            if (n_docs > body / 8) n_docs = body / 8;
            const uint64_t n_tokens = (body - 8 * n_docs) / tb;
            bytes.resize(kShardHeaderBytes + 8 * n_docs + tb * n_tokens);
            for (int i = 0; i < 8; i++) bytes[16 + i] = char((n_tokens >> (8 * i)) & 0xff), bytes[24 + i] = char((n_docs >> (8 * i)) & 0xff);
        }
    }
    const std::string& path = file.write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    try {
        const TokenShard shard = read_shard(path);
        for (uint32_t t : shard.tokens) FUZZ_CHECK(t < shard.vocab_size, "token %u >= vocab_size %u", t, shard.vocab_size);
        std::vector<uint64_t> doc_of(shard.n_tokens());  // a plain scan, independent of the loader's search
        for (size_t d = 0; d < shard.doc_starts.size(); d++) {
            const uint64_t end = d + 1 < shard.doc_starts.size() ? shard.doc_starts[d + 1] : shard.n_tokens();
            for (uint64_t p = shard.doc_starts[d]; p < end; p++) doc_of[p] = shard.doc_starts[d];
        }
        DataLoader loader(shard, B, T, seed, shuffle);
        if (restore) loader.restore(want_state);
        const uint64_t nw = loader.n_windows();
        std::vector<int> in(size_t(B) * T), tg(in.size()), ds(in.size());
        for (int batch = 0; batch < 3; batch++) {
            const LoaderState before = loader.state();
            FUZZ_CHECK(before.cursor < nw, "cursor %llu >= %llu windows", (unsigned long long)before.cursor,
                       (unsigned long long)nw);
            loader.next_batch(in.data(), tg.data(), ds.data());
            for (int b = 0; b < B; b++) {
                const int* i = &in[size_t(b) * T];
                const int* g = &tg[size_t(b) * T];
                const int* d = &ds[size_t(b) * T];
                if (!shuffle) {
                    const uint64_t w = (before.cursor + uint64_t(b)) % nw;
                    FUZZ_CHECK(row_is_window(shard, doc_of, T, w, i, g, d), "batch %d row %d is not window %llu", batch, b,
                               (unsigned long long)w);
                } else {
                    bool found = false;
                    for (uint64_t w = 0; w < nw && !found; w++) found = row_is_window(shard, doc_of, T, w, i, g, d);
                    FUZZ_CHECK(found, "shuffled batch %d row %d is no window of the shard", batch, b);
                }
            }
        }
    } catch (const FatalError& e) {
        fuzz_rejected(e);
    }
    return 0;
}
