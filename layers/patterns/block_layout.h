// Explicit block-sparse layouts (BlockLayout) as files and as
// checkpoint fields, under ONE set of limits and ONE check: a layout that `train --layout-file`
// accepts is one that `infer` and `train --resume` load back from the checkpoint it wrote
// (nothing written is lost or unloadable).
//
// The file is text: "Q: K K ..." per line (one layout for every head) or "H/Q: K K ..." (per
// head), '#' starts a comment. A per-head file names every head from 0 to its last (the model
// then asks for exactly its H: BlockSparsePattern::heads_error). Query blocks left out keep
// nothing: empty rows are legal (docs/attention-spec.md: O = 0, L = -inf). Numbers are plain
// decimal digits, checked against the limits before they are stored (no wrap at 2^32, no
// trailing junk); the file's size and the rows the layout implies are checked before anything is
// allocated for them. Every refusal is one line
// naming the file, the line and what to do.
#pragma once
#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
#include "core/error.h"
#include "core/io.h"
#include "layers/patterns/pattern_common.h"

// An explicit block layout (block-sparse, read from a file): per head (or one for all heads), per
// query block, its sorted key blocks, as CSR. The view is plain pointers, so that the pattern
// math can ask it on the host and, once the layout is on the device, in a kernel.
struct BlockLayoutView {
    const int* row_ptr = nullptr;  // (heads * n_blocks + 1)
    const int* cols = nullptr;     // sorted key blocks of each (head, query block) row
    int n_blocks = 0, heads = 0;   // heads: 1 (shared) or the model's H
    ATTN_HD bool has(int head, int qb, int kb) const {
        if (!row_ptr || qb >= n_blocks || (heads > 1 && head >= heads)) return false;  // heads past a per-head layout keep nothing
        const int row = (heads == 1 ? 0 : head) * n_blocks + qb;
        int lo = row_ptr[row], hi = row_ptr[row + 1];
        while (lo < hi) {  // binary search in the sorted row
            const int mid = (lo + hi) / 2;
            if (cols[mid] < kb) lo = mid + 1;
            else hi = mid;
        }
        return lo < row_ptr[row + 1] && cols[lo] == kb;
    }
};
struct BlockLayout {
    std::vector<int> row_ptr, cols;
    int n_blocks = 0, heads = 1;
    // Written in the per-head form ('H/Q:' rows): then heads must be the model's head count, even
    // when it is 1 (a file naming only head 0 of two would otherwise read as one layout for all
    // heads). A checkpoint's layout has passed that check when train wrote it, so it keeps only heads.
    bool per_head = false;
    std::string source;  // the file it came from, for messages
    BlockLayoutView view() const { return BlockLayoutView{row_ptr.data(), cols.data(), n_blocks, heads}; }
};

// The limits, shared by the file reader and the checkpoint loader. A checkpoint keeps the layout
// as JSON lists, and its loader makes one JSON node (~130 bytes) per entry: 2^20 rows and 2^21
// key blocks keep a load under ~400 MB. 2^20 blocks of 256 tokens span kMaxSeqLen (2^28).
constexpr long long kMaxLayoutBlocks = 1 << 20;       // query and key blocks: 0 .. 2^20 - 1
constexpr long long kMaxLayoutHeads = 1 << 16;        // heads: 0 .. 2^16 - 1
constexpr long long kMaxLayoutRows = 1 << 20;         // heads x blocks: the CSR's rows
constexpr long long kMaxLayoutKeys = 1 << 21;         // key blocks listed, all rows together
constexpr long long kMaxLayoutFileBytes = 256LL << 20;  // a file past this is refused unread

// "" when a layout of n_blocks query blocks, `heads` heads and `keys` key blocks in all is within
// the limits, else why. Asked before the rows are allocated, by both readers.
inline std::string block_layout_shape_error(long long n_blocks, long long heads, long long keys) {
    if (n_blocks < 1 || n_blocks > kMaxLayoutBlocks)
        return "block numbers must be in [0, 2^20 - 1 = " + std::to_string(kMaxLayoutBlocks - 1) + "]";
    if (heads < 1 || heads > kMaxLayoutHeads)
        return "head numbers must be in [0, 2^16 - 1 = " + std::to_string(kMaxLayoutHeads - 1) + "]";
    if (heads * n_blocks > kMaxLayoutRows)
        return std::to_string(heads) + " heads x " + std::to_string(n_blocks) + " query blocks is more than the 2^20 rows a layout may have: use fewer heads, fewer blocks or a larger --block";
    if (keys > kMaxLayoutKeys) return "more than 2^21 key blocks in all: use a larger --block or fewer key blocks per row";
    return "";
}

// "" when L is a well-formed layout within the limits, else what is wrong: CSR offsets that
// start at 0, never decrease and end at the key count; each row's key blocks sorted, unique, in
// [0, n_blocks) and, under the causal mask, at or below the diagonal (the row's query block).
inline std::string block_layout_error(const BlockLayout& L, bool causal) {
    const std::string shape = block_layout_shape_error(L.n_blocks, L.heads, (long long)L.cols.size());
    if (!shape.empty()) return shape;
    const size_t rows = (size_t)L.heads * (size_t)L.n_blocks;
    if (L.row_ptr.size() != rows + 1 || L.row_ptr[0] != 0 || (size_t)L.row_ptr.back() != L.cols.size())
        return "is not a CSR layout (" + std::to_string(rows) + " rows need " + std::to_string(rows + 1) +
               " offsets from 0 to the key count)";
    for (size_t row = 0; row < rows; row++) {
        const int lo = L.row_ptr[row], hi = L.row_ptr[row + 1], qb = (int)(row % (size_t)L.n_blocks);
        if (lo > hi) return "has decreasing row offsets";
        for (int j = lo; j < hi; j++) {
            if (L.cols[j] < 0 || L.cols[j] >= L.n_blocks) return "has a key block outside [0, n_blocks)";
            if (j > lo && L.cols[j] <= L.cols[j - 1]) return "has an unsorted row";
            if (causal && L.cols[j] > qb) return "has a key block above the diagonal under the causal mask";
        }
    }
    return "";
}

// The file's bytes: refused unread when it is not a regular file (a FIFO or /dev/zero could
// block or stream forever: core/io.h opens without blocking and checks what it opened) or larger
// than kMaxLayoutFileBytes; read with the same cap in case it grows.
inline std::string read_layout_file_bytes(const std::string& path) {
    return read_regular_file(path, (uint64_t)kMaxLayoutFileBytes, "--layout-file",
                             "give a text file of 'Q: K K ...' lines of at most 256 MiB (at most 2^20 rows)");
}

// Reads one layout file into a BlockLayout: each line parsed with its number, the limits checked
// as the rows come, the CSR built once the shape is known.
class BlockLayoutReader {
   public:
    BlockLayoutReader(std::string path, bool causal) : path_(std::move(path)), causal_(causal) {}

    std::shared_ptr<const BlockLayout> read() {
        const std::string bytes = read_layout_file_bytes(path_);
        refuse_nul(bytes);
        for (size_t at = 0; at < bytes.size();) {
            const size_t eol = std::min(bytes.find('\n', at), bytes.size());
            lineno_++;
            parse_line(bytes.substr(at, eol - at));
            at = eol + 1;
        }
        if (rows_.empty()) fatal("--layout-file %s: no rows: list key blocks as 'Q: K K ...' lines", path_.c_str());
        return build();
    }

   private:
    struct Row {
        int h, q, line;
        std::vector<int> k;
    };
    std::string path_;
    bool causal_;
    int lineno_ = 0;
    std::vector<Row> rows_;
    std::unordered_map<long long, int> line_of_row_;  // (h, q) -> the line that listed it
    long long max_q_ = -1, max_h_ = 0, keys_ = 0;
    bool per_head_ = false, shared_ = false;

    [[noreturn]] void bad(const std::string& why) const {
        fatal("--layout-file %s line %d: %s (expected 'Q: K K ...' or 'H/Q: K K ...' with block numbers)", path_.c_str(),
              lineno_, why.c_str());
    }

    // A NUL byte would end the text early in any C string reader; here it is refused, not skipped.
    void refuse_nul(const std::string& bytes) {
        const size_t nul = bytes.find('\0');
        if (nul == std::string::npos) return;
        lineno_ = 1 + (int)std::count(bytes.begin(), bytes.begin() + (long)nul, '\n');
        bad("a NUL byte: a layout file is text; remove it");
    }

    // A token for a message: at most 24 bytes, anything unprintable as '?'.
    static std::string shown(const std::string& token) {
        std::string s = token.substr(0, 24);
        for (char& c : s) c = (c >= 0x20 && c < 0x7f) ? c : '?';
        return "'" + s + (token.size() > 24 ? "...'" : "'");
    }

    // A decimal number in [0, max]: digits only, range checked digit by digit (no wrap).
    long long number(const std::string& token, const char* what, long long max) const {
        if (token.empty()) bad(std::string("a bad ") + what + " number: none given");
        long long v = 0;
        for (char c : token) {
            if (c < '0' || c > '9') bad(std::string("a bad ") + what + " number " + shown(token) + ": digits only");
            v = v * 10 + (c - '0');
            if (v > max)
                bad(std::string(what) + " " + shown(token) + " is out of range: " + what + "s are numbered 0 to " +
                    std::to_string(max) + (max == kMaxLayoutHeads - 1 ? " (2^16 - 1)" : " (2^20 - 1)"));
        }
        return v;
    }

    static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
    static size_t skip_blanks(const std::string& s, size_t at) {
        while (at < s.size() && blank(s[at])) at++;
        return at;
    }
    // The token at `at` up to a blank or one of `stops`.
    static std::string token(const std::string& s, size_t* at, const char* stops) {
        const size_t from = *at;
        while (*at < s.size() && !blank(s[*at]) && !std::strchr(stops, s[*at])) (*at)++;
        return s.substr(from, *at - from);
    }

    void parse_line(std::string line) {
        const size_t hash = line.find('#');
        if (hash != std::string::npos) line.resize(hash);
        if (skip_blanks(line, 0) == line.size()) return;
        if (line.find(':') == std::string::npos) bad("no ':'");
        Row r{0, 0, lineno_, {}};
        size_t at = skip_blanks(line, 0);
        const std::string first = token(line, &at, ":/");
        at = skip_blanks(line, at);
        if (line[at] == '/') {
            r.h = (int)number(first, "head", kMaxLayoutHeads - 1);
            at = skip_blanks(line, at + 1);
            r.q = (int)number(token(line, &at, ":/"), "query block", kMaxLayoutBlocks - 1);
            at = skip_blanks(line, at);
            per_head_ = true;
        } else {
            r.q = (int)number(first, "query block", kMaxLayoutBlocks - 1);
            shared_ = true;
        }
        if (line[at] != ':') bad("more than one number before ':': give one query block (Q:) or a head and one (H/Q:)");
        if (per_head_ && shared_) bad("mixes 'Q:' and 'H/Q:' rows: use one form in the whole file");
        parse_keys(line, at + 1, r);
        add_row(std::move(r));
    }

    void parse_keys(const std::string& line, size_t at, Row& r) {
        for (at = skip_blanks(line, at); at < line.size(); at = skip_blanks(line, at)) {
            const int k = (int)number(token(line, &at, ""), "key block", kMaxLayoutBlocks - 1);
            if (!r.k.empty() && k <= r.k.back()) bad("key blocks not sorted (or repeated): list each row's key blocks in increasing order");
            if (causal_ && k > r.q) bad("a key block above the diagonal under the causal mask: keep K <= Q (or run without the causal mask)");
            r.k.push_back(k);
        }
    }

    // The limits as the rows come, so nothing grows past them: the shape the rows so far imply,
    // the key count, each (head, query block) once.
    void add_row(Row r) {
        max_q_ = std::max<long long>(max_q_, r.q), max_h_ = std::max<long long>(max_h_, r.h);
        for (int k : r.k) max_q_ = std::max<long long>(max_q_, k);
        keys_ += (long long)r.k.size();
        const std::string why = block_layout_shape_error(max_q_ + 1, max_h_ + 1, keys_);
        if (!why.empty()) bad(why);
        const auto seen = line_of_row_.emplace(((long long)r.h << 20) | r.q, lineno_);
        if (!seen.second)
            bad("query block " + std::to_string(r.q) + " (head " + std::to_string(r.h) + ") is listed twice (first on line " +
                std::to_string(seen.first->second) + "): merge the two rows");
        rows_.push_back(std::move(r));
    }

    // The CSR, rows ordered by (head, query block); then the one check the checkpoint loader runs.
    std::shared_ptr<const BlockLayout> build() {
        auto L = std::make_shared<BlockLayout>();
        L->n_blocks = (int)(max_q_ + 1), L->heads = per_head_ ? (int)(max_h_ + 1) : 1, L->source = path_;
        L->per_head = per_head_;
        std::sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) { return a.h != b.h ? a.h < b.h : a.q < b.q; });
        // A per-head layout names every head from 0 to its last: a head with no row would keep
        // nothing, silently (each (head, query block) once is checked as the rows come).
        for (int h = 0, i = 0; h < L->heads; h++) {
            if (i == (int)rows_.size() || rows_[(size_t)i].h != h)
                fatal("--layout-file %s: the per-head layout names heads up to %d but not head %d: give every head its 'H/Q: K K ...' "
                      "rows (heads 0 to %d; an empty row 'H/Q:' keeps nothing), or use 'Q: K K ...' rows for one layout for all heads",
                      path_.c_str(), L->heads - 1, h, L->heads - 1);
            while (i < (int)rows_.size() && rows_[(size_t)i].h == h) i++;
        }
        L->row_ptr.assign((size_t)L->heads * L->n_blocks + 1, 0);
        for (const Row& r : rows_) L->row_ptr[(size_t)r.h * L->n_blocks + r.q + 1] = (int)r.k.size();
        for (size_t i = 1; i < L->row_ptr.size(); i++) L->row_ptr[i] += L->row_ptr[i - 1];
        L->cols.reserve((size_t)keys_);
        for (const Row& r : rows_) L->cols.insert(L->cols.end(), r.k.begin(), r.k.end());
        const std::string why = block_layout_error(*L, causal_);
        if (!why.empty()) fatal("--layout-file %s: the layout %s (please report this: the lines passed)", path_.c_str(), why.c_str());
        return L;
    }
};

inline std::shared_ptr<const BlockLayout> read_block_layout_file(const std::string& path, bool causal) {
    return BlockLayoutReader(path, causal).read();
}
