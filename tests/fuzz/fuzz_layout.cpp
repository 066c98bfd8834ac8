// libFuzzer harness: block-sparse layout files (layers/patterns/block_layout.h), as
// `train --layout-file` and `attention_tool --layout-file` read them.
//
// Input: one mode byte (bit 0: the causal mask on), then the file's bytes, verbatim (NUL bytes,
// huge numbers and all: the reader must refuse them with its one-line error).
// The file goes to BlockSparsePattern::read_layout_file, the reader train calls. FatalError is
// its only clean way out (fuzz_common.h: anything else escaping, a sanitizer report, a failed
// FUZZ_CHECK is a finding). Checked on acceptance:
//   - the layout passes block_layout_error, the check a checkpoint's layout must pass to load;
//   - for layouts of up to 4096 rows (larger ones cost a JSON node per row and would slow the
//     fuzzer, not test more), the layout goes through the checkpoint's JSON (pattern_to_json ->
//     pattern_from_json) and comes back the same: what train writes, infer loads.
// Seeds: tests/fuzz/layout/seeds (make_seeds.cpp), dictionary layout.dict.
#include "layers/attention_pattern.h"
#include "core/json.h"
#include "tests/fuzz/fuzz_common.h"

static bool same_layout(const BlockLayout& a, const BlockLayout& b) {
    return a.n_blocks == b.n_blocks && a.heads == b.heads && a.row_ptr == b.row_ptr && a.cols == b.cols;
}

// What a checkpoint stores of the pattern, loaded back as infer and --resume load it.
static void check_round_trip(const std::shared_ptr<const BlockLayout>& L, bool causal) {
    AttnPattern p;
    p.kind = AttnKind::BlockSparse, p.causal = causal, p.block_sparse.block = 64, p.block_sparse.layout = L;
    const std::string json = pattern_to_json(p);
    AttnPattern back;
    try {
        back = pattern_from_json(JsonParser(json).parse());
    } catch (const JsonError& e) {
        FUZZ_CHECK(false, "an accepted layout does not load back from its checkpoint JSON: %s", e.what());
    }
    FUZZ_CHECK(back.block_sparse.layout && same_layout(*back.block_sparse.layout, *L), "the layout changes through the checkpoint JSON");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzFile file("fuzz_layout");
    if (size < 1) return 0;
    const bool causal = data[0] & 1;
    const std::string& path = file.write(data + 1, size - 1);
    std::shared_ptr<const BlockLayout> L;
    try {
        L = BlockSparsePattern::read_layout_file(path, causal);
    } catch (const FatalError& e) {
        fuzz_rejected(e);
        return 0;
    }
    const std::string why = block_layout_error(*L, causal);
    FUZZ_CHECK(why.empty(), "an accepted layout fails the checkpoint's check: %s", why.c_str());
    if ((long long)L->heads * L->n_blocks <= 4096) check_round_trip(L, causal);
    return 0;
}
