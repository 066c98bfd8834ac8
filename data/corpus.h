// Reading the raw corpus made by scripts/get_corpus.sh and splitting it into training and
// validation documents, reproducibly (the split depends only on the files and the fraction).
//
//   RAW/bible.txt   one long document. Its last val_fraction of lines become a separate
//                   validation document, the rest the training document.
//   RAW/code/**     every regular file is one document, named by its path relative to code/.
//                   A document goes to validation when the FNV-1a hash of that name, mapped to
//                   [0,1), is below val_fraction: stable across machines and file additions.
//
// max_bytes (0 = unlimited) caps the raw text read, for fast tests: the Bible gets at most half
// of it (cut at a line end), then code files are taken in path order, skipping any file that
// would not fit, until the cap is reached.
//
// Text of one's own (read_text_corpus, below): a file or a directory in any layout.
//
// The long-document corpus of scripts/get_long_corpus.sh has another layout, read when RAW/docs
// exists: every regular file under RAW/docs is one document, named by its path relative to docs/,
// and whole documents go to validation by the same hash of their name (so validation holds
// books and kernel subsystems of hundreds of thousands of tokens). max_bytes takes files in
// path order, skipping any that would not fit.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io.h"
#include "core/error.h"

struct Document {
    std::string name;  // e.g. "bible.txt[train]" or "json/decoder.py"
    std::string text;
};

struct SplitCorpus {
    std::vector<Document> train, val;
    uint64_t bytes_read = 0;
};

inline uint64_t fnv1a64(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    return h;
}

// Top 53 bits of the hash as a double in [0,1): exact, so the split never depends on rounding.
inline bool is_validation_path(const std::string& name, double val_fraction) {
    return double(fnv1a64(name) >> 11) * 0x1.0p-53 < val_fraction;
}

// Files under `dir`, as paths relative to it, in byte order (not locale order).
inline std::vector<std::string> list_files_sorted(const std::string& dir) {
    namespace fs = std::filesystem;
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file()) names.push_back(fs::relative(it->path(), dir).generic_string());
    if (ec) fatal("cannot list %s (%s): re-run scripts/get_corpus.sh", dir.c_str(),
                  ec.message().c_str());
    std::sort(names.begin(), names.end());
    return names;
}

// Every file under dir is one document; whole documents go to validation by the hash of their name.
inline void read_document_files(const std::string& dir, double val_fraction, uint64_t cap, const char* fix,
                                SplitCorpus& corpus) {
    for (const std::string& name : list_files_sorted(dir)) {
        const std::string path = dir + "/" + name;
        std::error_code ec;
        const uint64_t size = std::filesystem::file_size(path, ec);
        if (ec) fatal("cannot stat %s (%s): %s", path.c_str(), ec.message().c_str(), fix);
        if (size == 0) continue;  // an empty document would only be a lone BOS token
        if (cap - corpus.bytes_read < size) continue;
        Document doc{name, read_file(path, fix)};
        corpus.bytes_read += doc.text.size();
        (is_validation_path(name, val_fraction) ? corpus.val : corpus.train).push_back(std::move(doc));
    }
}

// A document's lines split in two: its last val_fraction of lines (at least one) for validation,
// the rest for training; false when it has fewer than 2 lines.
inline bool split_document_lines(const Document& d, double val_fraction, Document* train, Document* val) {
    std::vector<size_t> line_starts;
    for (size_t i = 0; i < d.text.size(); i++)
        if (i == 0 || d.text[i - 1] == '\n') line_starts.push_back(i);
    const size_t n_lines = line_starts.size();
    if (n_lines < 2) return false;
    size_t n_val = size_t(double(n_lines) * val_fraction + 0.5);
    n_val = std::max<size_t>(1, std::min(n_val, n_lines - 1));
    const size_t split = line_starts[n_lines - n_val];
    *train = {d.name + "[train]", d.text.substr(0, split)};
    *val = {d.name + "[val]", d.text.substr(split)};
    return true;
}

// The offset of the first byte of `s` that does not begin a well-formed UTF-8 sequence (an
// overlong form, a surrogate, past U+10FFFF, a stray or missing continuation byte), or npos.
inline size_t first_invalid_utf8(const std::string& s) {
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return i;
        if (i + len > n) return i;
        const unsigned char c1 = (unsigned char)s[i + 1];
        if (c1 < lo || c1 > hi) return i;
        for (size_t k = 2; k < len; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return i;
        i += len;
    }
    return std::string::npos;
}

// Your own text (data_tool prepare --text, make train TEXT=path): one text file, or a directory
// whose regular files, in any layout, are the documents (files with a NUL byte in their first
// 8 KiB are taken for binaries and skipped; `skipped` counts them). A text file must be UTF-8:
// one that is not is refused, naming the file and the byte, since the tokenizer would read its
// bytes as U+FFFD and the corpus would no longer hold the text (data/train_tokenizer.h). Whole documents go to
// validation by the hash of their path, as the long corpus's do; when that leaves either side
// empty (a few files), every document of 2+ lines gives its last val_fraction of lines to
// validation instead.
inline SplitCorpus read_text_corpus(const std::string& path, double val_fraction, uint64_t max_bytes, int* skipped) {
    const char* fix = "give a text file or a directory of text files";
    const uint64_t cap = max_bytes ? max_bytes : UINT64_MAX;
    std::vector<Document> docs;
    uint64_t bytes = 0;
    *skipped = 0;
    auto take = [&](const std::string& name, const std::string& file) {
        std::error_code ec;
        const uint64_t size = std::filesystem::file_size(file, ec);
        if (ec) fatal("--text: cannot stat %s (%s): %s", file.c_str(), ec.message().c_str(), fix);
        if (size == 0 || cap - bytes < size) return;
        std::string text = read_file(file, fix);
        if (text.find('\0') < std::min<size_t>(text.size(), 8192)) {
            ++*skipped;
            return;
        }
        const size_t bad = first_invalid_utf8(text);
        if (bad != std::string::npos)
            fatal("--text: %s is not UTF-8 text (at byte offset %zu, 0x%02x begins no well-formed UTF-8 character): convert it (iconv -f latin1 -t utf-8, "
                  "say) or move it out of --text", file.c_str(), bad, (unsigned)(unsigned char)text[bad]);
        bytes += text.size();
        docs.push_back({name, std::move(text)});
    };
    if (is_directory(path)) {
        for (const std::string& name : list_files_sorted(path)) take(name, path + "/" + name);
    } else if (file_exists(path)) {
        take(std::filesystem::path(path).filename().string(), path);
    } else {
        fatal("--text %s: no such file or directory: %s", path.c_str(), fix);
    }
    if (docs.empty())
        fatal("--text %s holds no text (%d binary files skipped, empty files ignored): %s", path.c_str(), *skipped, fix);
    SplitCorpus corpus;
    corpus.bytes_read = bytes;
    size_t n_val = 0;  // decided before anything is moved, so that no text is held twice
    for (const Document& d : docs) n_val += is_validation_path(d.name, val_fraction);
    const bool whole_files = n_val > 0 && n_val < docs.size();
    for (Document& d : docs) {
        Document t, v;
        if (whole_files) (is_validation_path(d.name, val_fraction) ? corpus.val : corpus.train).push_back(std::move(d));
        else if (split_document_lines(d, val_fraction, &t, &v)) corpus.train.push_back(std::move(t)), corpus.val.push_back(std::move(v));
        else corpus.train.push_back(std::move(d));
    }
    if (corpus.val.empty())
        fatal("--text %s: no document has 2 lines to split into training and validation text: give more text", path.c_str());
    return corpus;
}

inline SplitCorpus read_raw_corpus(const std::string& raw_dir, double val_fraction,
                                   uint64_t max_bytes) {
    const char* fix = "run `scripts/get_corpus.sh DIR` (or `make data`) to create it";
    if (!is_directory(raw_dir)) fatal("--raw %s: no such directory: %s", raw_dir.c_str(), fix);
    const uint64_t unlimited = UINT64_MAX;
    if (is_directory(raw_dir + "/docs")) {
        SplitCorpus corpus;
        read_document_files(raw_dir + "/docs", val_fraction, max_bytes ? max_bytes : unlimited,
                            "run `scripts/get_long_corpus.sh DIR` to create it", corpus);
        if (corpus.train.empty() || corpus.val.empty())
            fatal("%s/docs gives %zu training and %zu validation documents: both need at least one (add "
                  "documents, or raise --val-fraction / --max-bytes)", raw_dir.c_str(), corpus.train.size(),
                  corpus.val.size());
        return corpus;
    }
    const std::string bible_path = raw_dir + "/bible.txt";
    const std::string code_dir = raw_dir + "/code";
    if (!file_exists(bible_path)) fatal("%s is missing: %s", bible_path.c_str(), fix);
    if (!is_directory(code_dir)) fatal("%s is missing: %s", code_dir.c_str(), fix);

    SplitCorpus corpus;
    const uint64_t cap = max_bytes ? max_bytes : unlimited;

    // Bible: keep whole lines only, so neither part starts or ends mid-verse.
    std::string bible = read_file(bible_path, fix);
    const uint64_t bible_cap = max_bytes ? max_bytes / 2 : unlimited;
    if (bible.size() > bible_cap) {
        const size_t cut = bible.rfind('\n', bible_cap - 1);
        bible.resize(cut == std::string::npos ? 0 : cut + 1);
    }
    if (bible.empty()) fatal("%s is empty (or --max-bytes is too small): %s", bible_path.c_str(), fix);
    // At least one line on each side, whatever the fraction.
    Document train, val;
    if (!split_document_lines({"bible.txt", bible}, val_fraction, &train, &val))
        fatal("%s has fewer than 2 lines: cannot split it into train and validation; %s", bible_path.c_str(), fix);
    corpus.train.push_back(std::move(train));
    corpus.val.push_back(std::move(val));
    corpus.bytes_read += bible.size();

    read_document_files(code_dir, val_fraction, cap, fix, corpus);  // one document per file
    return corpus;
}
