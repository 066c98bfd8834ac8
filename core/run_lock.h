// One writer per output folder (issue 41): a program that writes a folder (train --out) holds an
// exclusive flock on <folder>/.lock for its whole life, and a second one started on the same
// folder is refused in one line naming the holder's pid and the fix, before it changes anything
// there. The kernel drops the lock when the holder dies, kill -9 included, so a stale .lock left
// by a killed run never blocks: its pid text is only information.
// acquire() takes the lock and leaves the file's bytes alone (a run refused later for a bad flag
// leaves the folder as it was: with only_if_present, it creates no lock file either);
// write_pid() records the holder once it starts writing there. A refused run names the holder
// from /proc/locks (the kernel's word), else from the file's text.
// core/: depends only on core/error.h and the C library.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/error.h"

// The pid holding the flock on fd's file: /proc/locks says, where it can be read; else the
// pid the file records; "" when neither does.
inline std::string lock_holder_pid(int fd) {
    struct stat st;
    if (::fstat(fd, &st) == 0) {
        if (std::FILE* f = std::fopen("/proc/locks", "r")) {
            char line[256];
            long found = -1;
            while (found < 0 && std::fgets(line, sizeof line, f)) {
                long pid;
                unsigned maj, min;
                unsigned long ino;
                char kind[16];  // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters' lines hold "->"
                if (std::strstr(line, "->")) continue;
                if (std::sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", kind, &pid, &maj, &min, &ino) == 5 &&
                    std::strcmp(kind, "FLOCK") == 0 && ino == (unsigned long)st.st_ino && maj == major(st.st_dev) &&
                    min == minor(st.st_dev) && pid > 0)
                    found = pid;
            }
            std::fclose(f);
            if (found > 0) return std::to_string(found);
        }
    }
    char buf[32] = {0};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string s(buf, n > 0 ? (size_t)n : 0);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos ? s : "";
}

// flock(fd) without waiting, or one line: the holder's pid when another run holds it, else the
// file system's refusal and `fix_unlockable`. `shown` is the flag's value as the user gave it.
inline void lock_or_refuse(int fd, const std::string& path, const char* flag, const std::string& shown,
                           const std::string& fix_unlockable) {
    int rc;
    do rc = ::flock(fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc == 0) return;
    const int e = errno;
    const std::string holder = e == EWOULDBLOCK ? lock_holder_pid(fd) : "";
    ::close(fd);
    if (e != EWOULDBLOCK)
        fatal("%s %s: cannot lock %s (%s): %s", flag, shown.c_str(), path.c_str(), std::strerror(e), fix_unlockable.c_str());
    fatal("%s %s is in use by another run (%s, which holds %s): wait for it to finish, or choose another %s", flag, shown.c_str(),
          holder.empty() ? "pid unknown" : ("pid " + holder).c_str(), path.c_str(), flag);
}

class RunLock {
  public:
    RunLock() = default;
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;
    ~RunLock() {
        if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
    }

    bool held() const { return fd_ >= 0; }

    // Takes the lock of directory `dir` (which must exist), or fails with one line naming `flag`
    // ("--out"), the holder's pid and the fix. With only_if_present, a folder without a lock file
    // is left as it is (nothing created) and not locked: the caller locks it, creating the file,
    // when it starts writing there.
    void acquire(const std::string& dir, const char* flag, bool only_if_present = false) {
        if (fd_ >= 0) return;
        path_ = dir + "/.lock";
        int fd;
        do fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (only_if_present ? 0 : O_CREAT), 0644);
        while (fd < 0 && errno == EINTR);
        if (fd < 0 && errno == ENOENT && only_if_present) return;
        if (fd < 0) fatal("%s %s: cannot open its lock file %s (%s): check the permissions of %s", flag, dir.c_str(), path_.c_str(),
                          std::strerror(errno), dir.c_str());
        lock_or_refuse(fd, path_, flag, dir, std::string("use a local directory for ") + flag);
        fd_ = fd;
    }

    // Records this process's pid in the lock file (for the message of a run it refuses).
    void write_pid() {
        if (fd_ < 0) return;
        const std::string pid = std::to_string((long)::getpid()) + "\n";
        if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != (ssize_t)pid.size())
            fatal("cannot write the lock file %s (%s): free space and re-run", path_.c_str(), std::strerror(errno));
    }

  private:
    std::string path_;
    int fd_ = -1;
};

// One writer per output file (issue 41): infer --tasks-out P and data_tool's --out X (tasks,
// task-shard, prepare) hold an exclusive flock on "P.lock" / "X.lock" beside the output from
// right after their flags are checked until they exit; a second writer of the same output is
// refused in one line naming the holder's pid, before it changes anything. Unlike RunLock's
// folder lock, the file is removed when the holder exits (normally or by an error), so a
// finished run leaves only its output; kill -9 leaves a stale file that blocks nothing. A
// taker checks, once it holds the flock, that the path still names the file it locked (the
// holder may have removed it in between) and starts over if not.
class OutputLock {
  public:
    OutputLock() = default;
    OutputLock(const OutputLock&) = delete;
    OutputLock& operator=(const OutputLock&) = delete;
    ~OutputLock() { release(); }

    bool held() const { return fd_ >= 0; }
    const std::string& path() const { return path_; }

    // Locks `output` (the value of `flag`) through the file output + ".lock" (trailing slashes
    // of a folder dropped), or fails in one line naming the holder.
    void acquire(std::string output, const char* flag) {
        if (fd_ >= 0) return;
        const std::string shown = output;
        while (output.size() > 1 && output.back() == '/') output.pop_back();
        const std::string path = output + ".lock";
        for (int attempt = 0;; attempt++) {
            int fd;
            do fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
            while (fd < 0 && errno == EINTR);
            if (fd < 0)
                fatal("%s %s: cannot create its lock file %s (%s): check the permissions of its directory", flag, shown.c_str(),
                      path.c_str(), std::strerror(errno));
            lock_or_refuse(fd, path, flag, shown, std::string("write ") + flag + " on a local file system");
            struct stat mine, now;
            if (::fstat(fd, &mine) == 0 && ::stat(path.c_str(), &now) == 0 && mine.st_dev == now.st_dev && mine.st_ino == now.st_ino) {
                fd_ = fd;
                path_ = path;
                break;
            }
            ::close(fd);  // the holder removed the file we opened: lock the one the path names now
            if (attempt == 100) fatal("%s %s: its lock file %s keeps changing: is another run starting there?", flag, shown.c_str(), path.c_str());
        }
        const std::string pid = std::to_string((long)::getpid()) + "\n";
        if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != (ssize_t)pid.size())
            fatal("cannot write the lock file %s (%s): free space and re-run", path_.c_str(), std::strerror(errno));
    }

    // Removes the lock file (while still holding it), then lets go.
    void release() {
        if (fd_ < 0) return;
        ::unlink(path_.c_str());
        ::close(fd_);
        fd_ = -1;
    }

  private:
    std::string path_;
    int fd_ = -1;
};
