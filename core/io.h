// Whole-file reads and crash-safe whole-file writes for the data pipeline.
// Everything the pipeline writes (shards, tokenizer model, manifest) goes through
// write_file_atomic: the bytes go to "<path>.tmp" first and are renamed over <path> only once
// complete, so an interrupted run never leaves a half-written file that looks valid, and a
// previous good file survives a failed run.
#pragma once
#include <cerrno>
#include <cstdint>
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

// Whether two paths name one existing file (links and other spellings of the path included).
inline bool same_file(const std::string& a, const std::string& b) {
    struct stat sa, sb;
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// ---- Bounded reads ----
// Every input file is opened through open_regular_file: it must be a regular file (a FIFO, a
// device such as /dev/zero, a directory or a socket is refused before a byte is read, so no read
// blocks forever or runs until memory is out) of at most max_bytes (refused from its size, before
// it is read). The file is opened with O_NONBLOCK, so that opening a FIFO returns at once, and
// checked with fstat on the descriptor it opened: what is checked is what is read.
// `what` names the flag or kind of file in the message ("--prompt-file"; nullptr: the path alone)
// and `fix` completes it ("check the --prompt-file path"); every refusal is one fatal() line.

// The bound of read_file, which gives none of its own: far above any file the programs read
// whole (token shards included), so that it only stops a runaway.
constexpr uint64_t kReadFileMaxBytes = 64ULL << 30;

inline const char* file_type_name(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// "--prompt-file x" or "x": how messages name the file.
inline std::string input_file_name(const std::string& path, const char* what) {
    return what && *what ? std::string(what) + " " + path : path;
}

// Opens path for reading (a file descriptor, blocking reads) once it is known to be a regular
// file of at most max_bytes; its size goes to *size. Anything else: fatal, naming it and the fix.
inline int open_regular_file(const std::string& path, uint64_t max_bytes, const char* what, const char* fix,
                             uint64_t* size = nullptr) {
    const std::string name = input_file_name(path, what);
    const char* sep = fix && *fix ? ": " : "";
    if (!fix) fix = "";
    int fd;
    do fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (what && *what) fatal("%s: cannot open it (%s)%s%s", name.c_str(), std::strerror(errno), sep, fix);
        fatal("cannot open %s (%s)%s%s", path.c_str(), std::strerror(errno), sep, fix);
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        fatal("%s: cannot stat it (%s)%s%s", name.c_str(), std::strerror(e), sep, fix);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fatal("%s is %s, not a regular file: only regular files are read (save a stream to a file first and give that)",
              name.c_str(), file_type_name(st.st_mode));
    }
    if ((uint64_t)st.st_size > max_bytes) {
        ::close(fd);
        fatal("%s holds %llu bytes, more than the %llu it may hold%s%s", name.c_str(), (unsigned long long)st.st_size,
              (unsigned long long)max_bytes, sep, fix);
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        const int e = errno;
        ::close(fd);
        fatal("%s: cannot read it (%s)%s%s", name.c_str(), std::strerror(e), sep, fix);
    }
    if (size) *size = (uint64_t)st.st_size;
    return fd;
}

// The same checks for a reader that opens the file itself (e.g. a parser on std::ifstream):
// call it first, so that a FIFO, device or oversized file never reaches that reader.
inline void check_regular_file(const std::string& path, uint64_t max_bytes, const char* what, const char* fix) {
    ::close(open_regular_file(path, max_bytes, what, fix));
}

// A whole regular file of at most max_bytes. The read stops at max_bytes whatever the file
// does meanwhile: one that grows past it while read is refused too.
inline std::string read_regular_file(const std::string& path, uint64_t max_bytes, const char* what, const char* fix) {
    uint64_t size = 0;
    const int fd = open_regular_file(path, max_bytes, what, fix, &size);
    std::string bytes;
    try {
        bytes.reserve((size_t)size);
    } catch (...) {
        ::close(fd);
        throw;
    }
    char buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            ::close(fd);
            fatal("error while reading %s (%s)%s%s", input_file_name(path, what).c_str(), std::strerror(e), fix && *fix ? ": " : "",
                  fix ? fix : "");
        }
        if (n == 0) break;
        if (bytes.size() + (size_t)n > max_bytes) {
            ::close(fd);
            fatal("%s grew past %llu bytes while being read: give a file that is not being written", input_file_name(path, what).c_str(),
                  (unsigned long long)max_bytes);
        }
        bytes.append(buf, (size_t)n);
    }
    ::close(fd);
    return bytes;
}

// Read a whole file into memory (a regular file, at most kReadFileMaxBytes). `what_to_do`
// completes the error message, e.g. "run `make data`", so the user learns how to produce the
// missing file.
inline std::string read_file(const std::string& path, const char* what_to_do) {
    return read_regular_file(path, kReadFileMaxBytes, nullptr, what_to_do);
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

// Opens <path>.tmp, the writer's scratch name beside <path>, for writing from its start. A link
// there is never followed (it could point anywhere) and a FIFO or device is never opened for
// real (the open would block, or write into it): each is refused naming it. A regular file there
// is taken as an interrupted write's leftover and replaced.
inline std::FILE* open_scratch_file(const std::string& tmp) {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    const int open_errno = errno;
    struct stat st;
    if (fd < 0 && ::lstat(tmp.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))  // a FIFO without a reader: ENXIO
        fatal("%s is not a regular file (a FIFO, device or socket): it is the writer's scratch name; move it away and re-run",
              tmp.c_str());
    errno = open_errno;
    if (fd < 0 && errno == ELOOP)
        fatal("%s is a symbolic link: the writer's scratch file there is never followed; remove the link and re-run", tmp.c_str());
    if (fd < 0) fatal("cannot create %s (%s): check that the directory exists and is writable", tmp.c_str(), std::strerror(errno));
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fatal("%s is not a regular file (a FIFO, device or socket): it is the writer's scratch name; move it away and re-run",
              tmp.c_str());
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::FILE* f = ::ftruncate(fd, 0) == 0 ? ::fdopen(fd, "wb") : nullptr;
    if (!f) {
        ::close(fd);
        fatal("cannot write %s (%s): check that the directory is writable", tmp.c_str(), std::strerror(errno));
    }
    return f;
}

// Write `bytes` to <path>.tmp, fsync it, rename it over <path> (atomic on POSIX file systems)
// and fsync the directory, so after a crash <path> holds either the old or the new bytes.
inline void write_file_atomic(const std::string& path, const void* data, size_t size) {
    const std::string tmp = path + ".tmp";
    std::FILE* f = open_scratch_file(tmp);
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
