// The files a run trains on, by identity: the recipe a checkpoint records ("recipe" metadata)
// so that train --resume refuses a train.bin, val.bin or --mix shard replaced under the same
// name. The flags that shape the run (--schedule, --mix, ...) are train_args'; the tokenizer is
// stored whole in every checkpoint and compared byte for byte; this adds the token files.
//
// Recipe JSON: {"files":[{"role":"train.bin","path":"corpus/train.bin","size":315138,"hash":"9f..."},...]}
// with role "train.bin", "val.bin" (matched by role: another --data with other files is refused
// too) or "--mix" (matched by path: the --mix flag itself must already be the same).
#pragma once
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io.h"
#include "core/json.h"

// A file's identity: its size and a 64-bit FNV-1a hash of its size, first MiB and last MiB.
// Not the whole file: a corpus's train.bin or a task shard of 50M tokens is 100-200 MB, read
// again at every resume. A replaced shard (re-prepared, another corpus or task set) differs in
// its size, in its header's token and document counts, or in its document starts and tokens
// near either end; an in-place edit of the middle that keeps the size is not caught.
struct FileIdentity {
    bool exists = false;
    uint64_t size = 0, hash = 0;
};

inline uint64_t identity_fnv1a(const char* p, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h;
}

constexpr size_t kIdentityEndBytes = 1 << 20;

// A tokenizer's fingerprint: FNV-1a 64 of its whole .model bytes (a few hundred KB, read anyway).
// Every token shard records the fingerprint of the tokenizer it was encoded with (data/shard.h,
// version 2), and every reader that also holds a tokenizer compares the two.
inline uint64_t tokenizer_fingerprint(const std::string& model_bytes) {
    return identity_fnv1a(model_bytes.data(), model_bytes.size(), 0xcbf29ce484222325ULL);
}

// A missing file has no identity (exists false: the caller says what is missing). Anything else
// must be a regular file: a directory, FIFO or device is refused in one line naming it as `what`
// (e.g. "--mix") with `fix`, before any read that could block (core/io.h's open_regular_file).
inline FileIdentity file_identity(const std::string& path, const char* what = nullptr, const char* fix = nullptr) {
    FileIdentity id;
    struct stat st;
    const bool found = ::stat(path.c_str(), &st) == 0;
    if (!found && (errno == ENOENT || errno == ENOTDIR)) return id;
    if (found && S_ISDIR(st.st_mode)) fatal("%s is a directory%s%s", input_file_name(path, what).c_str(), fix ? ": " : "", fix ? fix : "");
    const int fd = open_regular_file(path, kReadFileMaxBytes, what, fix, &id.size);
    id.exists = true;
    uint64_t h = identity_fnv1a((const char*)&id.size, sizeof id.size, 0xcbf29ce484222325ULL);
    std::vector<char> buf(kIdentityEndBytes);
    // The first MiB, then the last (overlapping it when the file is under 2 MiB: still a function of the bytes).
    const uint64_t starts[2] = {0, id.size > kIdentityEndBytes ? id.size - kIdentityEndBytes : 0};
    for (uint64_t at : starts) {
        const size_t want = (size_t)std::min<uint64_t>(kIdentityEndBytes, id.size - at);
        size_t got = 0;
        while (got < want) {
            const ssize_t n = ::pread(fd, buf.data() + got, want - got, (off_t)(at + got));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            got += (size_t)n;
        }
        if (got != want) {
            ::close(fd);
            fatal("%s: cannot read it to identify it (did it change while read?)", input_file_name(path, what).c_str());
        }
        h = identity_fnv1a(buf.data(), want, h);
    }
    ::close(fd);
    id.hash = h;
    return id;
}

struct RecipeFile {
    std::string role;  // "train.bin", "val.bin" or "--mix"
    std::string path;
    FileIdentity id;
};

inline std::string recipe_to_json(const std::vector<RecipeFile>& files) {
    std::string out = "{\"files\":[";
    for (size_t i = 0; i < files.size(); i++) {
        char buf[96];
        std::snprintf(buf, sizeof buf, ",\"size\":%" PRIu64 ",\"hash\":\"%016" PRIx64 "\"}", files[i].id.size, files[i].id.hash);
        out += (i ? ",{\"role\":" : "{\"role\":") + json_quote(files[i].role) + ",\"path\":" + json_quote(files[i].path) + buf;
    }
    return out + "]}";
}

// Throws JsonError when the text is not such a recipe.
inline std::vector<RecipeFile> recipe_from_json(const std::string& text) {
    const Json j = JsonParser(text).parse();
    std::vector<RecipeFile> files;
    for (const Json& f : j.at("files").as_array("files")) {
        RecipeFile r;
        r.role = f.at("role").as_string(), r.path = f.at("path").as_string();
        if (r.role != "train.bin" && r.role != "val.bin" && r.role != "--mix") throw JsonError("unknown role \"" + r.role + "\"");
        r.id.exists = true;
        r.id.size = (uint64_t)f.at("size").as_int("size", 0, 1LL << 50);
        const std::string& hex = f.at("hash").as_string();
        char* stop = nullptr;
        r.id.hash = std::strtoull(hex.c_str(), &stop, 16);
        if (hex.size() != 16 || *stop) throw JsonError("hash \"" + hex + "\" is not 16 hex digits");
        files.push_back(r);
    }
    return files;
}

// "" when every recorded file is still the one the run trained on, else one sentence naming the
// first that is not and what differs. `now` holds this run's files (same roles, same --mix paths).
inline std::string recipe_difference(const std::vector<RecipeFile>& saved, const std::vector<RecipeFile>& now) {
    for (const RecipeFile& s : saved) {
        const RecipeFile* n = nullptr;
        for (const RecipeFile& c : now)
            if (c.role == s.role && (s.role != "--mix" || c.path == s.path)) n = &c;
        const std::string what = s.role == "--mix" ? "the --mix shard " + s.path : s.role + " (" + (n ? n->path : s.path) + ")";
        if (!n) return "this run trained on " + what + ", which these flags do not name";
        if (!n->id.exists) return what + " is missing";
        if (n->id.size != s.id.size)
            return what + " is " + std::to_string(n->id.size) + " bytes, but the run trained on one of " + std::to_string(s.id.size);
        if (n->id.hash != s.id.hash) return what + " has the same size but other content than the one the run trained on";
    }
    return "";
}
