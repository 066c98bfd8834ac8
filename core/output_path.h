// Outputs never replace inputs: every program calls check_output_path for every file
// it will write, right after parsing its flags and before any long work (prefill, scoring,
// training). It refuses, with one line naming the flag, the path, what the path holds and the
// fix, a path that
//   - names an existing file of another kind, told by its content (magic bytes, header fields),
//     not only by its name: a checkpoint, a KV cache, a corpus or token shard, a tokenizer
//     model, a run's metrics.csv, a task file, a CSV or PNG of another output, a directory, or
//     any other non-empty file that this output's writer did not write (a text the user feeds
//     as --perplexity, a source file, ...);
//   - cannot be written: its directory is missing or not writable (tried by creating and
//     removing a probe file next to it, so it holds for root and read-only file systems too);
//   - is one of this command's own inputs (check_output_not_input: data_tool --haystack S --out S
//     would overwrite S even where S is of the output's own kind, e.g. an earlier task shard).
// A file of the same kind is overwritten as before (e.g. --save-cache over an older KV cache,
// attention_tool --out over an older dump, infer --tasks-out over an earlier report): re-running
// a command must keep working. An empty file (e.g. from mktemp) counts as no file.
// core/: depends only on core/error.h and the C library.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

enum class OutputKind {
    None,           // no file there (or an empty one)
    Directory,
    Checkpoint,     // safetensors, metadata "format" "longnet-gpt/..." (model/checkpoint.h)
    KvCache,        // safetensors, metadata "format" "longnet-gpt-kv/..." (model/kv_cache_file.h)
    AttentionDump,  // safetensors, metadata "pattern" and "scale" (attention_tool --out)
    Safetensors,    // any other safetensors file
    CorpusShard,    // a LNGSHARD file named train.bin or val.bin (a prepared corpus's split, even copied away)
    TokenShard,     // any other LNGSHARD file (data_tool task-shard --out)
    Tokenizer,      // a SentencePiece model (tokenizer.model)
    Metrics,        // a run's metrics.csv
    PositionCsv,    // infer --per-position
    TaskReportCsv,  // infer --tasks-out PREFIX.csv
    TaskItemsCsv,   // infer --tasks-out PREFIX_items.csv
    Png,            // a PNG image (scripts/plot_*.sh draw them: loss curves, heatmaps)
    TaskFile,       // data_tool tasks --out (JSON Lines of task items)
    Other,          // a non-empty file none of the above
};

inline const char* output_kind_name(OutputKind k) {
    switch (k) {
    case OutputKind::None: return "no file";
    case OutputKind::Directory: return "a directory";
    case OutputKind::Checkpoint: return "a checkpoint (safetensors with format longnet-gpt)";
    case OutputKind::KvCache: return "a KV cache (safetensors with format longnet-gpt-kv, from infer --save-cache)";
    case OutputKind::AttentionDump: return "an attention_tool --out file (safetensors with a pattern)";
    case OutputKind::Safetensors: return "a safetensors file";
    case OutputKind::CorpusShard: return "a corpus shard (LNGSHARD tokens named train.bin or val.bin)";
    case OutputKind::TokenShard: return "a token shard (LNGSHARD)";
    case OutputKind::Tokenizer: return "a tokenizer model (SentencePiece)";
    case OutputKind::Metrics: return "a run's metrics.csv";
    case OutputKind::PositionCsv: return "an infer --per-position CSV";
    case OutputKind::TaskReportCsv: return "an infer --tasks-out report CSV";
    case OutputKind::TaskItemsCsv: return "an infer --tasks-out items CSV";
    case OutputKind::Png: return "a PNG image";
    case OutputKind::TaskFile: return "a task file (JSON Lines of task items)";
    case OutputKind::Other: return "an existing file";
    }
    return "an existing file";
}

inline std::string output_dir_of(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

inline bool output_starts_with(const std::string& s, const char* prefix) { return s.compare(0, std::strlen(prefix), prefix) == 0; }

// What `path` holds, told by its first bytes (and, for a shard, by a tokenizer.model beside it).
inline OutputKind output_kind_of(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return OutputKind::None;
    if (S_ISDIR(st.st_mode)) return OutputKind::Directory;
    if (S_ISREG(st.st_mode) && st.st_size == 0) return OutputKind::None;
    if (!S_ISREG(st.st_mode)) return OutputKind::Other;  // a device, a FIFO: never an output of ours
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return OutputKind::Other;
    std::string head(4096, '\0');
    head.resize(std::fread(&head[0], 1, head.size(), f));
    // A safetensors file: an 8-byte little-endian header length, then a JSON object. Our writer
    // puts "__metadata__" first, so its fields lie in the header's first bytes; read the whole
    // header (bounded) to be sure.
    if (head.size() >= 10) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)head[i];
        if (head[8] == '{' && n >= 2 && n <= (64u << 20) && 8 + n <= (uint64_t)st.st_size) {
            std::string header(n, '\0');
            std::fseek(f, 8, SEEK_SET);
            header.resize(std::fread(&header[0], 1, n, f));
            std::fclose(f);
            if (header.find("\"format\":\"longnet-gpt-kv/") != std::string::npos) return OutputKind::KvCache;
            if (header.find("\"format\":\"longnet-gpt/") != std::string::npos) return OutputKind::Checkpoint;
            if (header.find("\"pattern\":") != std::string::npos && header.find("\"scale\":") != std::string::npos &&
                header.find("\"format\":") == std::string::npos)
                return OutputKind::AttentionDump;
            return OutputKind::Safetensors;
        }
    }
    std::fclose(f);
    if (output_starts_with(head, "LNGSHARD")) {
        // A corpus split by its name: a train.bin copied away from its tokenizer is still one. Any
        // other shard, a task shard written into a corpus's folder included, is a token shard (whose
        // writer tells its own from a copy of a split by the bytes: data_tool task-shard).
        const size_t slash = path.find_last_of('/');
        const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
        return name == "train.bin" || name == "val.bin" ? OutputKind::CorpusShard : OutputKind::TokenShard;
    }
    if (output_starts_with(head, "\x89PNG\r\n\x1a\n")) return OutputKind::Png;
    if (output_starts_with(head, "step,split,loss,")) return OutputKind::Metrics;
    if (output_starts_with(head, "bucket_start,bucket_end,tokens,mean_loss\n")) return OutputKind::PositionCsv;
    if (output_starts_with(head, "task,length,depth,items,correct,accuracy\n")) return OutputKind::TaskReportCsv;
    if (output_starts_with(head, "line,task,length,depth,tokens,answer,output,correct\n")) return OutputKind::TaskItemsCsv;
    if (output_starts_with(head, "{\"task\":") && head.find("\"context\":") != std::string::npos) return OutputKind::TaskFile;
    // A SentencePiece ModelProto: field 1 (pieces, length-delimited: tag 0x0a), its first piece
    // "<unk>" (or "<s>"), each itself a length-delimited string field (tag 0x0a).
    if ((unsigned char)head[0] == 0x0a && head.size() >= 8 &&
        (head.find("<unk>") < 64 || head.find("<s>") < 64))
        return OutputKind::Tokenizer;
    return OutputKind::Other;
}

// Fails unless `dir` is a directory this process can create files in: creates and removes a
// probe file there (access(W_OK) says yes to root on a read-only file system).
inline void check_directory_writable(const std::string& dir, const std::string& path, const char* flag) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0)
        fatal("%s %s: its directory %s does not exist (%s): create it or give another path", flag, path.c_str(), dir.c_str(),
              std::strerror(errno));
    if (!S_ISDIR(st.st_mode))
        fatal("%s %s: %s is not a directory: give another path", flag, path.c_str(), dir.c_str());
    const std::string probe = dir + "/.write-probe." + std::to_string((long)::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        fatal("%s %s: cannot create files in %s (%s): give a writable place", flag, path.c_str(), dir.c_str(),
              std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
}

// The check for an output file that `flag` (e.g. "--save-cache") writes as `kind`.
inline void check_output_path(const std::string& path, OutputKind kind, const char* flag) {
    if (path.empty()) return;
    const OutputKind found = output_kind_of(path);
    if (found == OutputKind::Directory) fatal("%s %s is a directory: give a file name", flag, path.c_str());
    if (found != OutputKind::None && found != kind) {
        if (found == OutputKind::Other)
            fatal("%s %s is an existing file that is not %s: give another path (or remove that file first)", flag, path.c_str(),
                  output_kind_name(kind));
        fatal("%s %s is %s: give another path", flag, path.c_str(), output_kind_name(found));
    }
    check_directory_writable(output_dir_of(path), path, flag);
}

// The check for a flag that takes a prefix P and writes P.csv and P_items.csv (infer
// --tasks-out): P must name a file to be, not a folder. "run/", "run/.", "run/.." and an existing
// directory "run" would give run/.csv, run/_items.csv (hidden, oddly named files inside it) or
// run.csv beside it.
inline void check_output_prefix(const std::string& prefix, const char* flag) {
    if (prefix.empty()) return;
    const size_t slash = prefix.find_last_of('/');
    const std::string last = slash == std::string::npos ? prefix : prefix.substr(slash + 1);
    struct stat st;
    if (last.empty() || last == "." || last == ".." || (::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
        const std::string eg = prefix + (last.empty() ? "" : "/") + "results";
        fatal("%s %s names a folder; give a file name (%s writes %s.csv and %s_items.csv)", flag, prefix.c_str(), eg.c_str(),
              eg.c_str(), eg.c_str());
    }
}

// Refuses an output path that names the same file (any spelling, links included) as one of the
// command's inputs, given as {flag, path} pairs (an empty path is skipped). Called with
// check_output_path, before any work, so the input is left as it was.
struct OutputInput {
    const char* flag;
    std::string path;
};

inline void check_output_not_input(const std::string& path, const char* flag, std::initializer_list<OutputInput> inputs) {
    struct stat out;
    if (path.empty() || ::stat(path.c_str(), &out) != 0) return;  // no file there yet: it cannot be an input
    for (const OutputInput& in : inputs) {
        struct stat st;
        if (!in.path.empty() && ::stat(in.path.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
            fatal("%s %s is also the input %s %s: writing it would replace what this command reads; give another path", flag,
                  path.c_str(), in.flag, in.path.c_str());
    }
}

// The check for train --out: a run directory (made with its parents if missing). Refuses a path
// that is a file, or a prepared corpus (a directory holding train.bin, val.bin or
// tokenizer.model), and a place where the directory cannot be made or written.
inline void check_run_directory(const std::string& dir, const char* flag) {
    if (dir.empty()) fatal("%s is empty: give a directory for the run", flag);
    const OutputKind found = output_kind_of(dir);
    if (found != OutputKind::Directory && found != OutputKind::None)
        fatal("%s %s is %s, not a directory: give a directory for the run", flag, dir.c_str(), output_kind_name(found));
    struct stat any;
    if (found == OutputKind::None && ::stat(dir.c_str(), &any) == 0)
        fatal("%s %s is an empty file, not a directory: give a directory for the run", flag, dir.c_str());
    if (found == OutputKind::Directory) {
        for (const char* f : {"train.bin", "val.bin", "tokenizer.model"}) {
            struct stat st;
            if (::stat((dir + "/" + f).c_str(), &st) == 0)
                fatal("%s %s is a prepared corpus (it holds %s): give another directory for the run", flag, dir.c_str(), f);
        }
        const std::string metrics = dir + "/metrics.csv";
        const OutputKind m = output_kind_of(metrics);
        if (m != OutputKind::None && m != OutputKind::Metrics)
            fatal("%s %s: its metrics.csv is %s, not a run's metrics: give another directory for the run", flag, dir.c_str(),
                  output_kind_name(m));
        check_directory_writable(dir, dir, flag);
        return;
    }
    // Missing: the nearest existing ancestor must be a writable directory (train makes the rest).
    std::string up = dir;
    while (!up.empty() && up.back() == '/' && up.size() > 1) up.pop_back();
    for (;;) {
        up = output_dir_of(up);
        struct stat st;
        if (::stat(up.c_str(), &st) == 0) {
            if (!S_ISDIR(st.st_mode)) fatal("%s %s: %s is a file, not a directory: give another path", flag, dir.c_str(), up.c_str());
            check_directory_writable(up, dir, flag);
            return;
        }
        if (up == "." || up == "/") return;
    }
}
