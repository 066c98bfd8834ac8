// One writer per output, through lock files that are this program's own.
//
// A program that writes a folder (train --out D) locks D/.longnet-lock; one that writes a file
// (infer --tasks-out P, --save-cache F, ..., data_tool's --out X, attention_tool --out X) locks
// X.longnet-lock beside it. The lock is an exclusive flock held for the program's life: a second
// writer of the same output is refused in one line naming the holder's pid, before it changes
// anything; the kernel drops the flock when its holder dies, kill -9 included, so a file left by
// a killed run blocks nothing (the next run takes it over, saying so).
//
// The lock file is never a user's file:
//   - its name is one no other tool uses, and it is created with O_CREAT | O_EXCL | O_NOFOLLOW;
//   - it holds one line, "longnet-gpt lock, pid N": an existing file at that name that does not
//     (a user's file, a symlink, a FIFO) is refused, named, and left as it is, never truncated;
//   - it is removed only while it still is the file we locked and still names our pid: when its
//     holder ends normally, by an error (fatal() unwinds to the destructors), or by SIGTERM,
//     SIGINT or SIGHUP (a handler unlinks it with async-signal-safe calls, then the signal ends
//     the process as it would have: exit status 128 + the signal).
// A taker checks, once it holds the flock, that the path still names the file it locked (the
// holder may have removed it in between) and starts over if not.
//
// remove_on_signal() puts other files of the program's own (a folder of temporary files) under
// the same handler; SignalsHeld defers these signals over a few steps that must not stop half
// done (a swap of files by rename).
// core/: depends only on core/error.h and the C library.
#pragma once
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

// ---- Removal on SIGTERM, SIGINT and SIGHUP

namespace signal_cleanup {
enum Kind { File = 1, Lock = 2, Directory = 3 };

// A fixed table, so that the handler allocates nothing. An entry is armed (state 2) only once
// all its fields are written.
struct Entry {
    std::atomic<int> state{0};  // 0 free, 1 being filled, 2 armed
    int kind = 0;
    int fd = -1;  // Lock: the descriptor whose file must still be at path
    char path[PATH_MAX] = {0};
    char line[64] = {0};  // Lock: what the file must hold
};
constexpr int kEntries = 32;
inline Entry table[kEntries];
// While held (a few renames that must not stop half done), a signal is only noted: the holder
// acts on it when it lets go.
inline std::atomic<int> held{0}, pending{0};

// Lock files and files first, then folders (each empty by then, when it held only files above).
inline void remove_armed() {
    for (int pass = 0; pass < 2; pass++)
        for (Entry& e : table) {
            if (e.state.load() != 2 || (e.kind == Directory) != (pass == 1)) continue;
            if (e.kind == Directory) {
                ::rmdir(e.path);
                continue;
            }
            if (e.kind == Lock) {
                struct stat mine, now;
                char buf[64];
                const size_t want = std::strlen(e.line);
                if (::fstat(e.fd, &mine) != 0 || ::lstat(e.path, &now) != 0 || mine.st_dev != now.st_dev || mine.st_ino != now.st_ino ||
                    ::pread(e.fd, buf, sizeof buf, 0) != (ssize_t)want || std::memcmp(buf, e.line, want) != 0)
                    continue;
            }
            ::unlink(e.path);
        }
}

inline void on_signal(int sig) {
    if (held.load()) {
        pending.store(sig);
        return;
    }
    const int saved = errno;
    remove_armed();
    errno = saved;
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    // Blocked while its handler runs: delivered, with the default action, once the handler returns.
    ::raise(sig);
}

// Installs the handler for the signals whose action is still the default: one the user ignores
// (nohup's SIGHUP, a background job's SIGINT) stays ignored, and a handler of the program's own
// stays in place.
inline void install() {
    static bool done = false;
    if (done) return;
    done = true;
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
        struct sigaction old;
        if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (int other : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&sa.sa_mask, other);
        ::sigaction(sig, &sa, nullptr);
    }
}

// Arms an entry; its slot, or -1 when the table is full or the path too long (the file is then
// only removed by its owner's normal path).
inline int add(const std::string& path, Kind kind, int fd = -1, const std::string& line = "") {
    if (path.size() >= PATH_MAX || line.size() >= sizeof(Entry::line)) return -1;
    install();
    for (int i = 0; i < kEntries; i++) {
        int expected = 0;
        if (!table[i].state.compare_exchange_strong(expected, 1)) continue;
        Entry& e = table[i];
        e.kind = kind;
        e.fd = fd;
        std::memcpy(e.path, path.c_str(), path.size() + 1);
        std::memcpy(e.line, line.c_str(), line.size() + 1);
        e.state.store(2);
        return i;
    }
    return -1;
}

inline void drop(int slot) {
    if (slot >= 0 && slot < kEntries) table[slot].state.store(0);
}
}  // namespace signal_cleanup

// Signals (SIGTERM, SIGINT, SIGHUP) held off for this object's life: one that comes meanwhile
// ends the program when it is destroyed, after the cleanup above.
class SignalsHeld {
  public:
    SignalsHeld() { signal_cleanup::held.store(1); }
    SignalsHeld(const SignalsHeld&) = delete;
    SignalsHeld& operator=(const SignalsHeld&) = delete;
    ~SignalsHeld() {
        signal_cleanup::held.store(0);
        if (const int sig = signal_cleanup::pending.exchange(0)) signal_cleanup::on_signal(sig);
    }
};

// A file or folder of the program's own removed if a signal ends the program (files before
// folders); the owner removes it itself otherwise, then calls drop(). Returns the slot for drop.
inline int remove_on_signal(const std::string& path, bool directory = false) {
    return signal_cleanup::add(path, directory ? signal_cleanup::Directory : signal_cleanup::File);
}
inline void keep_on_signal(int slot) { signal_cleanup::drop(slot); }

// ---- Lock files

// The one line a lock file of ours holds, then the holder's pid.
constexpr char kLockTag[] = "longnet-gpt lock, pid ";

inline std::string lock_line(long pid) { return kLockTag + std::to_string(pid) + "\n"; }

// The pid a lock file's line names: > 0; 0 for an empty file; -1 for a file that is not a lock
// file of ours.
inline long lock_file_pid(int fd) {
    char buf[64];
    const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    if (n == 0) return 0;
    if (n < 0 || n == (ssize_t)sizeof buf) return -1;
    const std::string s(buf, (size_t)n), tag = kLockTag;
    if (s.compare(0, tag.size(), tag) != 0 || s.back() != '\n') return -1;
    const std::string digits = s.substr(tag.size(), s.size() - tag.size() - 1);
    if (digits.empty() || digits.size() > 10 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    const long pid = std::stol(digits);
    return pid > 0 ? pid : -1;
}

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
    const long pid = lock_file_pid(fd);
    return pid > 0 ? std::to_string(pid) : "";
}

// One lock file: locked, and ours to remove once it names our pid (created by us, or claimed).
class LockFile {
  public:
    LockFile() = default;
    LockFile(const LockFile&) = delete;
    LockFile& operator=(const LockFile&) = delete;
    ~LockFile() { release(); }

    bool held() const { return fd_ >= 0; }
    const std::string& path() const { return path_; }

    // Locks `path`, the lock of `shown` (the value of `flag` as the user gave it), creating it
    // when `create`; false, with nothing locked or made, when it is missing and !create. Any
    // other failure is one line: the holder's pid, or what is wrong with the file and the fix.
    bool lock(const std::string& path, const char* flag, const std::string& shown, bool create, const std::string& fix_unlockable) {
        if (fd_ >= 0) return true;
        for (int attempt = 0;; attempt++) {
            if (attempt == 100) fatal("%s %s: its lock file %s keeps changing: is another run starting there?", flag, shown.c_str(), path.c_str());
            bool created = false;
            int fd = -1;
            if (create) {
                do fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                while (fd < 0 && errno == EINTR);
                if (fd >= 0) created = true;
                else if (errno == ENOENT)
                    fatal("%s %s: cannot create its lock file %s: its directory does not exist: create it, or give another %s", flag,
                          shown.c_str(), path.c_str(), flag);
                else if (errno != EEXIST)
                    fatal("%s %s: cannot create its lock file %s (%s): check the permissions of its directory", flag, shown.c_str(),
                          path.c_str(), std::strerror(errno));
            }
            if (fd < 0) {
                do fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                while (fd < 0 && errno == EINTR);
                if (fd < 0 && errno == ENOENT) {
                    if (!create) return false;
                    continue;  // its holder removed it between our two opens
                }
                if (fd < 0 && errno == ELOOP)
                    fatal("%s %s: its lock file %s is a symbolic link, which is never followed: remove that link (or choose another %s)",
                          flag, shown.c_str(), path.c_str(), flag);
                if (fd < 0)
                    fatal("%s %s: cannot open its lock file %s (%s): check the permissions of its directory", flag, shown.c_str(),
                          path.c_str(), std::strerror(errno));
            }
            struct stat st;
            if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
                ::close(fd);
                fatal("%s %s: %s, where its lock file goes, is not a regular file: it is left as it is; move it away (or choose another %s)",
                      flag, shown.c_str(), path.c_str(), flag);
            }
            long pid = 0;
            int slot = -1;
            if (created) {
                pid = (long)::getpid();
                const std::string line = lock_line(pid);
                if (::pwrite(fd, line.data(), line.size(), 0) != (ssize_t)line.size()) {
                    const int e = errno;
                    ::close(fd);
                    ::unlink(path.c_str());
                    fatal("cannot write the lock file %s (%s): free space and re-run", path.c_str(), std::strerror(e));
                }
                slot = signal_cleanup::add(path, signal_cleanup::Lock, fd, line);
            } else {
                pid = wait_for_line(fd);  // its creator writes the line right after making it
                if (pid <= 0) {
                    ::close(fd);
                    fatal("%s %s: %s exists and is not a lock file of this program (it does not hold \"%s<pid>\"): it is left as it "
                          "is; move it away if no longnet-gpt run is starting there (or choose another %s)",
                          flag, shown.c_str(), path.c_str(), kLockTag, flag);
                }
            }
            int rc;
            do rc = ::flock(fd, LOCK_EX | LOCK_NB);
            while (rc != 0 && errno == EINTR);
            if (rc != 0) {
                const int e = errno;
                const std::string holder = e == EWOULDBLOCK ? lock_holder_pid(fd) : "";
                signal_cleanup::drop(slot);  // a file we made but another run locked first is that run's now
                ::close(fd);
                if (e != EWOULDBLOCK)
                    fatal("%s %s: cannot lock %s (%s): %s", flag, shown.c_str(), path.c_str(), std::strerror(e), fix_unlockable.c_str());
                fatal("%s %s is in use by another run (%s, which holds %s): wait for it to finish, or choose another %s", flag,
                      shown.c_str(), holder.empty() ? "pid unknown" : ("pid " + holder).c_str(), path.c_str(), flag);
            }
            struct stat now;
            if (::fstat(fd, &st) == 0 && ::lstat(path.c_str(), &now) == 0 && st.st_dev == now.st_dev && st.st_ino == now.st_ino) {
                fd_ = fd;
                path_ = path;
                slot_ = slot;
                ours_ = created;
                if (!created && pid != (long)::getpid())
                    std::printf("note: %s was left by pid %ld, which ended without removing it (killed?): this run takes it over\n",
                                path.c_str(), pid);
                return true;
            }
            signal_cleanup::drop(slot);
            ::close(fd);  // the holder removed the file we opened: lock the one the path names now
            if (!create) return false;
        }
    }

    // Records this process's pid in the file; from then on the file is ours to remove.
    void claim() {
        if (fd_ < 0 || ours_) return;
        const std::string line = lock_line((long)::getpid());
        if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != (ssize_t)line.size())
            fatal("cannot write the lock file %s (%s): free space and re-run", path_.c_str(), std::strerror(errno));
        slot_ = signal_cleanup::add(path_, signal_cleanup::Lock, fd_, line);
        ours_ = true;
    }

    // Removes the file (while still holding it) when it is still ours, then lets go.
    void release() {
        if (fd_ < 0) return;
        signal_cleanup::drop(slot_);
        struct stat mine, now;
        if (ours_ && lock_file_pid(fd_) == (long)::getpid() && ::fstat(fd_, &mine) == 0 && ::lstat(path_.c_str(), &now) == 0 &&
            mine.st_dev == now.st_dev && mine.st_ino == now.st_ino)
            ::unlink(path_.c_str());
        ::close(fd_);
        fd_ = -1;
        slot_ = -1;
        ours_ = false;
    }

  private:
    // The pid in fd's line; an empty file is given up to 2 s to get it (a creator that has not
    // written it yet). 0 (still empty) or -1: not a lock file of ours.
    static long wait_for_line(int fd) {
        long pid = lock_file_pid(fd);
        for (int i = 0; i < 100 && pid == 0; i++) {
            const struct timespec t = {0, 20 * 1000 * 1000};
            ::nanosleep(&t, nullptr);
            pid = lock_file_pid(fd);
        }
        return pid;
    }

    std::string path_;
    int fd_ = -1;
    int slot_ = -1;
    bool ours_ = false;
};

// The lock of a folder a run writes (train --out D): D/.longnet-lock.
class RunLock {
  public:
    bool held() const { return lock_.held(); }

    // Takes the lock of directory `dir` (which must exist), or fails with one line naming `flag`
    // ("--out"), the holder's pid and the fix. With only_if_present, a folder without a lock file
    // is left as it is (nothing created) and not locked: the caller locks it, creating the file,
    // when it starts writing there; a lock file found is locked and left as it is until
    // write_pid().
    void acquire(const std::string& dir, const char* flag, bool only_if_present = false) {
        lock_.lock(dir + "/.longnet-lock", flag, dir, !only_if_present, std::string("use a local directory for ") + flag);
    }

    // Records this process's pid in the lock file (for the message of a run it refuses); the
    // file is then removed when this process ends.
    void write_pid() { lock_.claim(); }

  private:
    LockFile lock_;
};

// The lock of an output file (or of a folder made whole, as prepare's): X.longnet-lock beside X,
// trailing slashes of a folder dropped. Removed when its holder ends, so a finished run leaves
// only its output.
class OutputLock {
  public:
    bool held() const { return lock_.held(); }
    const std::string& path() const { return lock_.path(); }

    // Locks `output` (the value of `flag`), or fails in one line naming the holder.
    void acquire(std::string output, const char* flag) {
        const std::string shown = output;
        while (output.size() > 1 && output.back() == '/') output.pop_back();
        lock_.lock(output + ".longnet-lock", flag, shown, true, std::string("write ") + flag + " on a local file system");
        lock_.claim();
    }

    void release() { lock_.release(); }

  private:
    LockFile lock_;
};
