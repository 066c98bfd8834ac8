// Binary token shards: the tokenized corpus as the trainer reads it.
//
// File layout (all integers little-endian; see also data/FORMAT.md):
//
//   offset  size  field
//   0       8     magic "LNGSHARD" (no terminating NUL)
//   8       4     uint32 version      = 2 (1 is still read: see below)
//   12      4     uint32 token_bytes  = 2 if vocab_size <= 65536, else 4
//   16      8     uint64 n_tokens
//   24      8     uint64 n_docs
//   32      4     uint32 vocab_size   (> 0)
//   36      8     uint64 tokenizer    fingerprint of the tokenizer it was encoded with (version 2)
//   44      20    zero padding up to the 64-byte header size (version 1: 28 bytes from 36)
//   64      8*n_docs            uint64 doc_starts[n_docs]
//   ...     token_bytes*n_tokens  tokens (uint16 or uint32 each)
//
// doc_starts[d] is the index of document d's first token: doc_starts[0] == 0 and the list is
// strictly ascending with every entry < n_tokens (so no document is empty, and a non-empty shard
// has at least one document). Every token is < vocab_size. The file size is exactly
// 64 + 8*n_docs + token_bytes*n_tokens: anything else means truncation or corruption.
//
// read_shard checks all of this up front so that the training loop never has to: a bad shard
// stops the program with one line naming the file and the defect.
//
// The tokenizer fingerprint (tokenizer_fingerprint in data/identity.h: FNV-1a 64 of the
// tokenizer.model bytes) ties the ids to their meaning: ids of another tokenizer are in range
// whenever its vocabulary is no larger, and decode to garbage. Every reader that also holds a
// tokenizer calls require_shard_tokenizer. Version-1 shards carry no fingerprint: they are only
// checked by vocab_size, so a v1 shard of another tokenizer with the same vocabulary size passes.
#pragma once
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/io.h"
#include "core/error.h"

constexpr char kShardMagic[8] = {'L', 'N', 'G', 'S', 'H', 'A', 'R', 'D'};
constexpr uint32_t kShardVersion = 2;  // what write_shard writes; read_shard reads 1 and 2
constexpr size_t kShardHeaderBytes = 64;

struct TokenShard {
    std::string path;                 // where it was read from, for error messages
    uint32_t version = 0;             // 1: no tokenizer fingerprint; 2: tokenizer_fingerprint is set
    uint32_t vocab_size = 0;
    uint64_t tokenizer_fingerprint = 0;
    uint32_t token_bytes = 0;         // width on disk; in memory tokens are always uint32
    std::vector<uint32_t> tokens;
    std::vector<uint64_t> doc_starts;

    uint64_t n_tokens() const { return tokens.size(); }
    uint64_t n_docs() const { return doc_starts.size(); }
};

// 2-byte tokens halve the file and the loader's memory traffic whenever the vocabulary allows.
inline uint32_t shard_token_bytes(uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

// Explicit byte-by-byte little-endian encoding keeps the format independent of the host.
inline void shard_put_le(std::string& out, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; i++) out.push_back(char((value >> (8 * i)) & 0xff));
}

inline uint64_t shard_get_le(const char* p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= uint64_t(uint8_t(p[i])) << (8 * i);
    return v;
}

// Write a shard atomically (<path>.tmp, then rename). Inputs that would produce a file
// read_shard rejects are a bug in the caller, so they are fatal here too.
inline void write_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                        const std::vector<uint64_t>& doc_starts, uint32_t vocab_size, uint64_t tokenizer_fingerprint) {
    if (vocab_size == 0) fatal("write_shard %s: vocab_size must be > 0", path.c_str());
    if (!tokens.empty() && (doc_starts.empty() || doc_starts[0] != 0))
        fatal("write_shard %s: doc_starts must begin with 0", path.c_str());
    for (size_t d = 0; d < doc_starts.size(); d++) {
        if (doc_starts[d] >= tokens.size() || (d > 0 && doc_starts[d] <= doc_starts[d - 1]))
            fatal("write_shard %s: doc_starts[%zu]=%llu is out of order or >= n_tokens %zu",
                  path.c_str(), d, (unsigned long long)doc_starts[d], tokens.size());
    }
    const uint32_t tb = shard_token_bytes(vocab_size);
    std::string out;
    out.reserve(kShardHeaderBytes + 8 * doc_starts.size() + tb * tokens.size());
    out.append(kShardMagic, 8);
    shard_put_le(out, kShardVersion, 4);
    shard_put_le(out, tb, 4);
    shard_put_le(out, tokens.size(), 8);
    shard_put_le(out, doc_starts.size(), 8);
    shard_put_le(out, vocab_size, 4);
    shard_put_le(out, tokenizer_fingerprint, 8);
    out.resize(kShardHeaderBytes, '\0');
    for (uint64_t s : doc_starts) shard_put_le(out, s, 8);
    for (size_t i = 0; i < tokens.size(); i++) {
        if (tokens[i] >= vocab_size)
            fatal("write_shard %s: token %u at %zu is >= vocab_size %u", path.c_str(),
                  tokens[i], i, vocab_size);
        shard_put_le(out, tokens[i], int(tb));
    }
    write_file_atomic(path, out);
}

// What a flag that takes a token shard (--mix, --haystack, --perplexity) expects, for its messages.
constexpr const char* kShardFlagFix =
    "give a token shard file (data_tool task-shard --data DIR --out FILE.bin makes one; data_tool prepare makes a corpus's "
    "train.bin and val.bin)";

// Reads exactly n bytes at offset `at` of fd; false when the file ends first or a read fails.
inline bool shard_pread(int fd, char* dst, uint64_t n, uint64_t at) {
    while (n > 0) {
        const ssize_t got = ::pread(fd, dst, (size_t)std::min<uint64_t>(n, 1u << 30), (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        dst += got, at += (uint64_t)got, n -= (uint64_t)got;
    }
    return true;
}

// Whether the regular file at path begins with the shard magic: what decides, before anything
// else is read, whether an input that may be text or a shard goes to read_shard (which checks the
// header against the file's size before the body) or is read as text. Not a regular file: fatal.
inline bool starts_as_shard(const std::string& path, const char* what, const char* fix) {
    uint64_t size = 0;
    const int fd = open_regular_file(path, kReadFileMaxBytes, what, fix, &size);
    char magic[8] = {};
    const bool shard = size >= 8 && ::pread(fd, magic, 8, 0) == 8 && std::memcmp(magic, kShardMagic, 8) == 0;
    ::close(fd);
    return shard;
}

// Read and fully validate a shard; any defect is fatal with the file name and the fix.
// `flag` names the flag that gave the path (e.g. "--mix"), for a shard that is not a corpus's
// train.bin or val.bin: its messages then name the flag and the commands that make shards.
// The 64-byte header is read and checked against the file's size first: a corrupt or foreign
// file of any size is refused before its body is read or memory is taken for it.
inline TokenShard read_shard(const std::string& path, const char* flag = nullptr) {
    const char* fix = flag ? "regenerate it (data_tool prepare makes a corpus's train.bin and val.bin, data_tool "
                             "task-shard a task shard)"
                           : "re-run `make data` to regenerate it";
    if (flag && !file_exists(path))
        fatal("%s %s does not exist: give an existing token shard (data_tool task-shard --data DIR --out FILE.bin makes one; "
              "data_tool prepare makes a corpus's train.bin and val.bin)", flag, path.c_str());
    if (flag && is_directory(path)) fatal("%s %s is a directory: %s", flag, path.c_str(), kShardFlagFix);
    uint64_t size = 0;
    const int fd = open_regular_file(path, kReadFileMaxBytes, flag, flag ? kShardFlagFix : "run `make data` to create it", &size);
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    char p[kShardHeaderBytes] = {};
    if (!shard_pread(fd, p, std::min<uint64_t>(size, kShardHeaderBytes), 0))
        fatal("cannot read %s (did it change while read?): %s", path.c_str(), fix);
    if (flag && (size < 8 || std::memcmp(p, kShardMagic, 8) != 0))
        fatal("%s %s is not a token shard (bad magic: no LNGSHARD header): give a shard made by data_tool task-shard or "
              "prepare", flag, path.c_str());
    if (size < kShardHeaderBytes)
        fatal("%s: truncated: %llu bytes, smaller than the 64-byte header; %s", path.c_str(),
              (unsigned long long)size, fix);
    if (std::memcmp(p, kShardMagic, 8) != 0)
        fatal("%s: bad magic (not a LNGSHARD token shard); %s", path.c_str(), fix);

    TokenShard shard;
    shard.path = path;
    const uint64_t version = shard_get_le(p + 8, 4);
    shard.version = uint32_t(version);
    shard.token_bytes = uint32_t(shard_get_le(p + 12, 4));
    const uint64_t n_tokens = shard_get_le(p + 16, 8);
    const uint64_t n_docs = shard_get_le(p + 24, 8);
    shard.vocab_size = uint32_t(shard_get_le(p + 32, 4));

    if (version != 1 && version != 2)
        fatal("%s: unsupported shard version %llu (this build reads versions 1 and 2); %s",
              path.c_str(), (unsigned long long)version, fix);
    // Version 1 has no fingerprint: its 28 bytes from 36 are padding (checked zero below).
    if (version >= 2) shard.tokenizer_fingerprint = shard_get_le(p + 36, 8);
    if (shard.vocab_size == 0) fatal("%s: header has vocab_size 0; %s", path.c_str(), fix);
    if (shard.token_bytes != shard_token_bytes(shard.vocab_size))
        fatal("%s: token_bytes %u does not match vocab_size %u (expected %u); %s", path.c_str(),
              shard.token_bytes, shard.vocab_size, shard_token_bytes(shard.vocab_size), fix);
    for (size_t i = version >= 2 ? 44 : 36; i < kShardHeaderBytes; i++)
        if (p[i] != 0) fatal("%s: nonzero header padding at byte %zu; %s", path.c_str(), i, fix);

    // Compare counts against the real size before multiplying, so a corrupt header with huge
    // counts cannot overflow the expected-size computation.
    const uint64_t body = size - kShardHeaderBytes;
    const bool fits = n_docs <= body / 8 && n_tokens <= (body - 8 * n_docs) / shard.token_bytes;
    if (!fits || kShardHeaderBytes + 8 * n_docs + shard.token_bytes * n_tokens != size)
        fatal("%s: file is %llu bytes but the header (%llu docs, %llu tokens of %u bytes) "
              "implies a different size: truncated or corrupt; %s", path.c_str(),
              (unsigned long long)size, (unsigned long long)n_docs,
              (unsigned long long)n_tokens, shard.token_bytes, fix);

    // The header holds: now the body, which its counts say is exactly the rest of the file.
    std::string rest((size_t)body, '\0');
    if (!shard_pread(fd, &rest[0], body, kShardHeaderBytes))
        fatal("cannot read %s (did it change while read?): %s", path.c_str(), fix);
    const char* q = rest.data();
    shard.doc_starts.resize(n_docs);
    for (uint64_t d = 0; d < n_docs; d++) {
        const uint64_t s = shard_get_le(q + 8 * d, 8);
        if (s >= n_tokens || (d == 0 && s != 0) || (d > 0 && s <= shard.doc_starts[d - 1]))
            fatal("%s: doc_starts[%llu]=%llu is not ascending from 0 and below n_tokens %llu; %s",
                  path.c_str(), (unsigned long long)d, (unsigned long long)s,
                  (unsigned long long)n_tokens, fix);
        shard.doc_starts[d] = s;
    }
    if (n_tokens > 0 && n_docs == 0)
        fatal("%s: %llu tokens but no documents; %s", path.c_str(),
              (unsigned long long)n_tokens, fix);

    q += 8 * n_docs;
    shard.tokens.resize(n_tokens);
    const int tb = int(shard.token_bytes);
    for (uint64_t i = 0; i < n_tokens; i++) {
        const uint32_t t = uint32_t(shard_get_le(q + uint64_t(tb) * i, tb));
        if (t >= shard.vocab_size)
            fatal("%s: token %u at index %llu is >= vocab_size %u; %s", path.c_str(), t,
                  (unsigned long long)i, shard.vocab_size, fix);
        shard.tokens[i] = t;
    }
    return shard;
}

// Refuses (one line naming the shard as `what`, e.g. "--mix a.bin") a shard that was not encoded
// with the tokenizer at hand (`fingerprint`, `vocab_size`; `tokenizer` names it: its path, or
// e.g. "the checkpoint's tokenizer"), ending with
// `fix`. A version-1 shard has no fingerprint and is checked by its vocabulary size alone.
inline void require_shard_tokenizer(const TokenShard& s, uint64_t fingerprint, uint32_t vocab_size,
                                    const std::string& tokenizer, const std::string& what, const std::string& fix) {
    if (s.vocab_size != vocab_size)
        fatal("%s declares a vocabulary of %u but %s has %u: it was made with another tokenizer; %s",
              what.c_str(), s.vocab_size, tokenizer.c_str(), vocab_size, fix.c_str());
    if (s.version >= 2 && s.tokenizer_fingerprint != fingerprint)
        fatal("%s was made with another tokenizer (fingerprint %016llx) than %s (%016llx), one of the same vocabulary "
              "size; %s", what.c_str(), (unsigned long long)s.tokenizer_fingerprint, tokenizer.c_str(),
              (unsigned long long)fingerprint, fix.c_str());
}
