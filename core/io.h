// Whole-file reads and crash-safe whole-file writes for the data pipeline.
// Everything the pipeline writes (shards, tokenizer model, manifest) goes through
// write_file_atomic: the bytes go to "<path>.tmp" first and are renamed over <path> only once
// complete, so an interrupted run never leaves a half-written file that looks valid, and a
// previous good file survives a failed run.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

inline bool file_exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

inline bool is_directory(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Read a whole file into memory. `what_to_do` completes the error message, e.g.
// "run `make data`", so the user learns how to produce the missing file.
inline std::string read_file(const std::string& path, const char* what_to_do) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fatal("cannot open %s (%s): %s", path.c_str(), std::strerror(errno), what_to_do);
    std::string bytes;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
    bool failed = std::ferror(f);
    std::fclose(f);
    if (failed) fatal("error while reading %s: %s", path.c_str(), what_to_do);
    return bytes;
}

// Makes a rename (or a new file) in the directory of `path` durable: without this a crash
// right after rename() can bring back the old directory entry.
inline bool fsync_parent_dir(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0;
    return (::close(fd) == 0) && ok;
}

// Write `bytes` to <path>.tmp, fsync it, rename it over <path> (atomic on POSIX file systems)
// and fsync the directory, so after a crash <path> holds either the old or the new bytes.
inline void write_file_atomic(const std::string& path, const void* data, size_t size) {
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fatal("cannot create %s (%s): check that the directory exists and is writable",
                  tmp.c_str(), std::strerror(errno));
    bool ok = std::fwrite(data, 1, size, f) == size;
    ok = (std::fflush(f) == 0) && ok;
    ok = (::fsync(fileno(f)) == 0) && ok;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
        std::remove(tmp.c_str());
        fatal("cannot write %s: disk full or not writable? free space and re-run", tmp.c_str());
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        fatal("cannot rename %s to %s (%s)", tmp.c_str(), path.c_str(), std::strerror(errno));
    }
    if (!fsync_parent_dir(path)) fatal("cannot sync the directory of %s (%s)", path.c_str(), std::strerror(errno));
}

inline void write_file_atomic(const std::string& path, const std::string& bytes) {
    write_file_atomic(path, bytes.data(), bytes.size());
}
