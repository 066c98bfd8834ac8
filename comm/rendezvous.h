// How the ranks of a job find each other, host side only (no CUDA, no NCCL: tests/test_rendezvous.cpp
// runs all of it on the CPU with forked processes and hostile clients; comm/nccl.cu builds the NCCL
// communicator on it).
//
//   LauncherRanks me = launcher_ranks_from_env();             // rank, world size, GPU of this host
//   Rendezvous how = rendezvous_share(blob, n, me.rank, me.world, comm_timeout_from_env());
//                                                              // rank 0's n bytes, now on every rank
//
// The launcher's ranks are comm/launcher_env.h's. The exchange (rank 0's opaque blob, NCCL's 128-byte
// unique id, to every rank), and what it trusts (docs/ring.md, "Threat model"):
//   LONGNET_RENDEZVOUS=path    through a file every rank sees (scripts/launch.sh sets it): rank 0
//                              writes it aside (a fresh name, created exclusively, mode 0600) and
//                              renames it; the others poll for it. It holds the job's id and an
//                              HMAC under the job's secret, so another job's file is never taken;
//                              rank 0 never replaces a file that is not a rendezvous file, and no
//                              rank opens a FIFO, device or symlink there. It wins when
//                              MASTER_ADDR/MASTER_PORT are set too: it is only ever set for us.
//   MASTER_ADDR, MASTER_PORT   over TCP, as torchrun and most cluster scripts set them: rank 0
//                              listens on MASTER_PORT at MASTER_ADDR's address when it is one of
//                              its host's (loopback stays loopback; all ranks on one host, by the
//                              launcher's local world size, meet on 127.0.0.1), every other rank
//                              connects, retrying until rank 0 is up. Rank 0 answers each
//                              connection with a fresh nonce; the rank proves the job's secret
//                              (LONGNET_RDZV_SECRET or LONGNET_RDZV_SECRET_FILE) with an HMAC
//                              over the nonce and its hello: rank, world size, blob size and the
//                              job's id (LONGNET_JOB_ID, else the launcher's: TORCHELASTIC_RUN_ID,
//                              PMIX_NAMESPACE, SLURM_JOB_ID.SLURM_STEP_ID). Who cannot prove it
//                              gets a fixed "refused" and nothing else; a rank that proved it and
//                              belongs to another job, world size or program gets the reason in
//                              one line. Once every rank arrived, rank 0 sends the blob, with its
//                              own HMAC, to the ranks that proved the secret. Without a secret
//                              only a loopback rendezvous runs, and then rank 0 takes connections
//                              of its own user only. Under torchrun's agent store
//                              (TORCHELASTIC_USE_AGENT_STORE=True: torchrun itself serves
//                              MASTER_PORT) rank 0 listens on MASTER_PORT + 1.
// Both wait at most timeout_s (LONGNET_COMM_TIMEOUT_S, 45 s by default): then rank 0 fails naming
// the ranks that never arrived (and tells the ranks that did), a rank fails naming the ADDR:PORT it
// could not reach. Strangers cannot stall it: pending connections are capped, each has a few
// seconds to prove itself, and running out of descriptors pauses accepting instead of spinning.
// Nothing assumes one host. No signal can come of a closed peer (MSG_NOSIGNAL).
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "core/error.h"
#include "core/sha256.h"
#include "comm/launcher_env.h"

// ------------------------------------------------------------------------------------------------
// The exchange

struct Rendezvous {
    std::string method;  // "single" (one rank), "file", "tcp"
    std::string where;   // the file, or ADDR:PORT
};

// Bounds of what a rank says or holds: every field from outside is checked against these first.
constexpr size_t kRdzvMaxJobId = 256, kRdzvMaxBlob = 65536, kRdzvNonce = 32;
constexpr int kRdzvMaxWorld = 1 << 20;

inline double rdzv_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline void rdzv_sleep(double s) { std::this_thread::sleep_for(std::chrono::microseconds((long long)(s * 1e6))); }

// Bytes from outside, fit for an error line: printable ASCII kept, the rest '?', at most `most`.
inline std::string rdzv_printable(const std::string& s, size_t most = 80) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < most; i++) out += s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    return s.size() > most ? out + "..." : out;
}

inline void rdzv_random(void* out, size_t n) {
    unsigned char* p = (unsigned char*)out;
    while (n > 0) {
        const ssize_t k = ::getrandom(p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) fatal("the rendezvous cannot draw random bytes (getrandom): %s", std::strerror(errno));
        p += k, n -= (size_t)k;
    }
}

// The job's id as the launcher gives it (every rank of one job has the same), "" when none.
inline std::string rendezvous_job_id() {
    std::string id, var;
    if (const char* s = std::getenv("LONGNET_JOB_ID")) {
        id = std::string("LONGNET_JOB_ID=") + s, var = "LONGNET_JOB_ID";
    } else if (const char* t = std::getenv("TORCHELASTIC_RUN_ID")) {
        id = std::string("TORCHELASTIC_RUN_ID=") + t, var = "TORCHELASTIC_RUN_ID";
    } else if (const char* x = std::getenv("PMIX_NAMESPACE")) {
        id = std::string("PMIX_NAMESPACE=") + x, var = "PMIX_NAMESPACE";
    } else if (const char* j = std::getenv("SLURM_JOB_ID")) {
        const char* step = std::getenv("SLURM_STEP_ID");
        id = std::string("SLURM_JOB_ID=") + j + (step ? std::string(".") + step : std::string()), var = "SLURM_JOB_ID";
    }
    if (id.size() > kRdzvMaxJobId)
        fatal("the job's id from %s is %zu bytes long, the rendezvous takes at most %zu: set a shorter LONGNET_JOB_ID "
              "(the same on every rank)",
              var.c_str(), id.size(), kRdzvMaxJobId);
    return id;
}

// --- the job's secret

// What the ranks prove to each other: the key, and where it came from ("" and "none" without one).
struct RendezvousSecret {
    std::string key;
    std::string from = "none";
};
constexpr size_t kRdzvSecretMin = 16, kRdzvSecretMax = 4096;

inline const char* rendezvous_secret_hint() {
    return "scripts/launch.sh makes one per job; elsewhere export LONGNET_RDZV_SECRET=\"$(head -c 32 /dev/urandom | "
           "od -An -tx1 | tr -d ' \\n')\" to every rank, or LONGNET_RDZV_SECRET_FILE=a file only you can read";
}

inline void rendezvous_check_secret_size(size_t n, const char* where) {
    if (n < kRdzvSecretMin || n > kRdzvSecretMax)
        fatal("%s holds %zu bytes: a rendezvous secret has %zu to %zu (%s)", where, n, kRdzvSecretMin, kRdzvSecretMax,
              rendezvous_secret_hint());
}

// LONGNET_RDZV_SECRET, or the contents of LONGNET_RDZV_SECRET_FILE (a regular file of this user
// that no one else may read; a final newline dropped); neither: no secret.
inline RendezvousSecret rendezvous_secret() {
    RendezvousSecret s;
    const char* env = std::getenv("LONGNET_RDZV_SECRET");
    const char* file = std::getenv("LONGNET_RDZV_SECRET_FILE");
    if (env && file)
        fatal("both LONGNET_RDZV_SECRET and LONGNET_RDZV_SECRET_FILE are set: give the job's secret one way, on every "
              "rank the same");
    if (env) {
        rendezvous_check_secret_size(std::strlen(env), "LONGNET_RDZV_SECRET");
        s.key = env, s.from = "LONGNET_RDZV_SECRET";
        return s;
    }
    if (!file) return s;
    const std::string where = std::string("LONGNET_RDZV_SECRET_FILE=") + file;
    // O_NONBLOCK: a FIFO named here must not hang us before the check below refuses it.
    const int fd = ::open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) fatal("cannot open %s: %s (%s)", where.c_str(), std::strerror(errno), rendezvous_secret_hint());
    struct stat st {};
    std::string why;
    if (::fstat(fd, &st) != 0) why = std::string("cannot stat it: ") + std::strerror(errno);
    else if (!S_ISREG(st.st_mode)) why = "it is not a regular file";
    else if (st.st_uid != ::geteuid()) why = strf("it belongs to uid %u, not to this user", (unsigned)st.st_uid);
    else if (st.st_mode & 077) why = strf("its mode %03o lets group or others at it: chmod 600 it", (unsigned)(st.st_mode & 0777));
    else if (st.st_size > (off_t)kRdzvSecretMax + 2) why = strf("it holds %lld bytes, a secret at most %zu", (long long)st.st_size, kRdzvSecretMax);
    if (!why.empty()) {
        ::close(fd);
        fatal("%s is refused as the job's secret: %s", where.c_str(), why.c_str());
    }
    std::string key(kRdzvSecretMax + 3, '\0');
    size_t got = 0;
    for (ssize_t k; got < key.size() && (k = ::read(fd, &key[got], key.size() - got)) != 0;) {
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            const int err = errno;
            ::close(fd);
            fatal("cannot read %s: %s", where.c_str(), std::strerror(err));
        }
        got += (size_t)k;
    }
    ::close(fd);
    key.resize(got);
    if (!key.empty() && key.back() == '\n') key.pop_back();
    if (!key.empty() && key.back() == '\r') key.pop_back();
    rendezvous_check_secret_size(key.size(), where.c_str());
    s.key = key, s.from = where;
    return s;
}

// --- the file: a tag (a foreign file fails clearly), the world size (a file of a job of another
// size fails at once, not at the timeout), the blob's size, the job's id, the blob, and an HMAC of
// all of it under the job's secret (a file of another job, or of someone without the secret, is
// never taken).
inline constexpr char kRendezvousFileTag[16] = "longnet-rdzv-v3";
constexpr size_t kRdzvFileTagFamily = 13;  // "longnet-rdzv-": a rendezvous file of any version
constexpr size_t kRdzvFileHead = sizeof kRendezvousFileTag + 12, kRdzvFileMax = kRdzvFileHead + kRdzvMaxJobId + kRdzvMaxBlob + 32;

inline void rdzv_put32(std::string& s, uint32_t v) {
    const uint32_t be = htonl(v);
    s.append((const char*)&be, 4);
}
inline uint32_t rdzv_get32(const char* p) {
    uint32_t be;
    std::memcpy(&be, p, 4);
    return ntohl(be);
}

inline Sha256Digest rdzv_file_mac(const std::string& key, const char* rec, size_t n) {
    return HmacSha256(key.data(), key.size()).update("longnet file", 12).update(rec, n).digest();
}

inline const char* rdzv_kind(mode_t m) {
    return S_ISREG(m) ? "regular file" : S_ISDIR(m) ? "folder" : S_ISLNK(m) ? "symbolic link" : S_ISFIFO(m) ? "FIFO"
         : S_ISSOCK(m) ? "socket" : S_ISCHR(m) || S_ISBLK(m) ? "device" : "special file";
}

// The folder of the file must not let others swap files in it: a folder anyone may write to needs
// the sticky bit (as /tmp has), so that only the file's owner can replace or remove it.
inline void rdzv_check_folder(const std::string& path, int rank) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0)
        fatal("rank %d: the folder %s of the rendezvous file (LONGNET_RENDEZVOUS) is unusable: %s", rank, dir.c_str(),
              std::strerror(errno));
    if (!S_ISDIR(st.st_mode))
        fatal("rank %d: %s, the folder of LONGNET_RENDEZVOUS=%s, is a %s", rank, dir.c_str(), path.c_str(), rdzv_kind(st.st_mode));
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        fatal("rank %d: the folder %s of the rendezvous file (LONGNET_RENDEZVOUS) may be written by anyone and has no "
              "sticky bit, so anyone could replace the file: use a folder of your own",
              rank, dir.c_str());
}

inline void rendezvous_file_write(const std::string& path, const void* blob, size_t bytes, int world,
                                  const RendezvousSecret& secret, const std::string& job) {
    rdzv_check_folder(path, 0);
    // An existing file is replaced only when it is a rendezvous file (of an earlier job): never a
    // user's file, and never through a link.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode))
            fatal("rank 0: LONGNET_RENDEZVOUS=%s exists and is a %s, not a rendezvous file: it is left as it is; give "
                  "every job a fresh path",
                  path.c_str(), rdzv_kind(st.st_mode));
        char tag[kRdzvFileTagFamily] = {};
        const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        const bool ours = fd >= 0 && ::read(fd, tag, sizeof tag) == (ssize_t)sizeof tag &&
                          std::memcmp(tag, kRendezvousFileTag, sizeof tag) == 0;
        if (fd >= 0) ::close(fd);
        if (!ours)
            fatal("rank 0: LONGNET_RENDEZVOUS=%s exists and is not a rendezvous file: it is left as it is; give every "
                  "job a fresh path",
                  path.c_str());
    } else if (errno != ENOENT) {
        fatal("rank 0: cannot check LONGNET_RENDEZVOUS=%s: %s", path.c_str(), std::strerror(errno));
    }
    std::string rec(kRendezvousFileTag, sizeof kRendezvousFileTag);
    rdzv_put32(rec, (uint32_t)world), rdzv_put32(rec, (uint32_t)bytes), rdzv_put32(rec, (uint32_t)job.size());
    rec.append(job).append((const char*)blob, bytes);
    const Sha256Digest mac = rdzv_file_mac(secret.key, rec.data(), rec.size());
    rec.append((const char*)mac.data(), mac.size());
    // Written aside under a fresh name (mkostemp: O_CREAT | O_EXCL, mode 0600, so nothing planted
    // there is followed or overwritten), flushed, then renamed: the others never see half a file.
    std::string tmp = path + ".tmp-XXXXXX";
    const int fd = ::mkostemp(&tmp[0], O_CLOEXEC);
    if (fd < 0)
        fatal("rank 0: cannot create a file beside the rendezvous file %s (LONGNET_RENDEZVOUS): %s: point it into a "
              "writable folder that every rank sees",
              path.c_str(), std::strerror(errno));
    const bool ok = ::write(fd, rec.data(), rec.size()) == (ssize_t)rec.size() && ::fsync(fd) == 0;
    int err = errno;
    ::close(fd);
    if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return;
    if (ok) err = errno;
    ::unlink(tmp.c_str());
    fatal("rank 0: cannot write the rendezvous file %s (LONGNET_RENDEZVOUS): %s", path.c_str(), std::strerror(err));
}

[[noreturn]] inline void rdzv_not_regular(const std::string& path, int rank, mode_t mode) {
    fatal("rank %d: LONGNET_RENDEZVOUS=%s is a %s, not a rendezvous file (rank 0 writes a regular file): give every "
          "job a fresh path",
          rank, path.c_str(), rdzv_kind(mode));
}

// Why the file at path is not (yet) this job's, or "" when blob now holds it. Fails at once for a
// file that can never become this job's (not a rendezvous file, another size of job or blob); a
// file of another job or secret may still be replaced by rank 0, so the caller waits.
inline std::string rendezvous_file_take(const std::string& path, void* blob, size_t bytes, int rank, int world,
                                        const RendezvousSecret& secret, const std::string& job) {
    // Checked on the name before any open (a FIFO would block it), and again on what was opened.
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return "missing";
        fatal("rank %d: cannot check LONGNET_RENDEZVOUS=%s: %s", rank, path.c_str(), std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) rdzv_not_regular(path, rank, st.st_mode);
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT) return "missing";
        fatal("rank %d: cannot read the rendezvous file %s (LONGNET_RENDEZVOUS): %s", rank, path.c_str(), std::strerror(errno));
    }
    std::string rec;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (off_t)kRdzvFileMax) {
        rec.resize((size_t)st.st_size);
        size_t got = 0;
        for (ssize_t k; got < rec.size() && (k = ::read(fd, &rec[got], rec.size() - got)) != 0;)
            if (k > 0) got += (size_t)k;
            else if (errno != EINTR) break;
        rec.resize(got);
    }
    ::close(fd);
    if (!S_ISREG(st.st_mode)) rdzv_not_regular(path, rank, st.st_mode);
    if (st.st_uid != ::geteuid())
        fatal("rank %d: the rendezvous file %s (LONGNET_RENDEZVOUS) belongs to uid %u, not to this user: rank 0 of this "
              "job did not write it; give every job a fresh path",
              rank, path.c_str(), (unsigned)st.st_uid);
    if (rec.size() < kRdzvFileTagFamily || std::memcmp(rec.data(), kRendezvousFileTag, kRdzvFileTagFamily) != 0 ||
        st.st_size > (off_t)kRdzvFileMax)
        fatal("rank %d: LONGNET_RENDEZVOUS=%s is not a rendezvous file: give every job a fresh path", rank, path.c_str());
    if (rec.size() < sizeof kRendezvousFileTag || std::memcmp(rec.data(), kRendezvousFileTag, sizeof kRendezvousFileTag) != 0)
        return "it is a rendezvous file of another version of this program: an earlier job's, or rank 0 runs another "
               "binary";
    const uint32_t w = rec.size() >= kRdzvFileHead ? rdzv_get32(&rec[16]) : 0, n = rec.size() >= kRdzvFileHead ? rdzv_get32(&rec[20]) : 0,
                   jl = rec.size() >= kRdzvFileHead ? rdzv_get32(&rec[24]) : 0;
    if (rec.size() < kRdzvFileHead || jl > kRdzvMaxJobId || n > kRdzvMaxBlob || rec.size() != kRdzvFileHead + jl + n + 32)
        fatal("rank %d: the rendezvous file %s (LONGNET_RENDEZVOUS) is damaged (its sizes do not add up): give every "
              "job a fresh path",
              rank, path.c_str());
    const Sha256Digest mac = rdzv_file_mac(secret.key, rec.data(), rec.size() - 32);
    const std::string their_job = rec.substr(kRdzvFileHead, jl);
    if (!digest_equal(mac.data(), (const unsigned char*)rec.data() + rec.size() - 32))
        return strf("it is not signed with this rank's secret (%s): an earlier job's file, or the ranks were given "
                    "different secrets",
                    secret.from.c_str());
    if (their_job != job)
        return strf("it was written for job \"%s\", this is job \"%s\": an earlier job's file",
                    rdzv_printable(their_job).c_str(), rdzv_printable(job).c_str());
    if (w != (uint32_t)world)
        fatal("rank %d: the rendezvous file %s was written for %u ranks, this job has %d: start every rank with the same "
              "world size, and give every job a fresh LONGNET_RENDEZVOUS",
              rank, path.c_str(), (unsigned)w, world);
    if (n != bytes)
        fatal("rank %d: the rendezvous file %s holds %u bytes, this program expects %zu: every rank must run the same "
              "binary",
              rank, path.c_str(), (unsigned)n, bytes);
    std::memcpy(blob, rec.data() + kRdzvFileHead + jl, bytes);
    return "";
}

inline void rendezvous_file_read(const std::string& path, void* blob, size_t bytes, int rank, int world,
                                 double timeout_s, const RendezvousSecret& secret, const std::string& job) {
    const double t0 = rdzv_now();
    for (;;) {
        const std::string why = rendezvous_file_take(path, blob, bytes, rank, world, secret, job);
        if (why.empty()) return;
        const double waited = rdzv_now() - t0;
        if (waited > timeout_s) {
            if (why != "missing")
                fatal("rank %d: the rendezvous file %s (LONGNET_RENDEZVOUS) is not this job's and rank 0 did not replace "
                      "it within %.0f s (LONGNET_COMM_TIMEOUT_S): %s; remove it, or give every job a fresh path",
                      rank, path.c_str(), waited, why.c_str());
            const bool tcp_too = std::getenv("MASTER_ADDR") && std::getenv("MASTER_PORT");
            fatal("rank %d: waited %.0f s (LONGNET_COMM_TIMEOUT_S) for rank 0 to write the rendezvous file %s "
                  "(LONGNET_RENDEZVOUS): rank 0 did not start, failed before it, or sees another filesystem%s",
                  rank, waited, path.c_str(),
                  tcp_too ? " (LONGNET_RENDEZVOUS wins over MASTER_ADDR/MASTER_PORT: unset it to meet over TCP)" : "");
        }
        rdzv_sleep(0.02);
    }
}

// --- TCP

enum : uint32_t {
    kRdzvVersion = 2,
    kRdzvOk = 0,        // the blob follows, then rank 0's HMAC over it
    kRdzvRefused = 1,   // a rank that proved the secret but is not one of this job: the reason
    kRdzvGaveUp = 2,    // rank 0's time ran out: its line
    kRdzvUnproven = 3,  // no proof of the secret: "refused", nothing more
    kRdzvMaxText = 4096
};
inline constexpr char kRdzvMagic[8] = {'L', 'N', 'G', 'T', 'R', 'D', 'Z', 'V'};
// challenge (rank 0 -> rank, on connecting): magic, version, rank 0's nonce
// hello (rank -> rank 0): magic, version, world, rank, blob bytes, job id length, the rank's nonce,
//   HMAC(secret, "hello" | rank 0's nonce | the 28 bytes before the rank's nonce | its nonce | job id),
//   then the job id
// reply (rank 0 -> rank): magic, status, world (0 to an unproven peer), length, then the blob and
//   HMAC(secret, "blob" | the rank's nonce | rank 0's nonce | blob) (ok), or a line
constexpr size_t kRdzvChallengeBytes = 12 + kRdzvNonce, kRdzvHelloHead = 8 + 5 * 4,
                 kRdzvHelloBytes = kRdzvHelloHead + kRdzvNonce + 32, kRdzvReplyBytes = 8 + 3 * 4;
inline constexpr char kRdzvUnprovenText[] = "refused";

inline Sha256Digest rdzv_hello_mac(const std::string& key, const unsigned char* server_nonce, const char* head,
                                   const unsigned char* client_nonce, const std::string& job) {
    return HmacSha256(key.data(), key.size())
        .update("hello", 5)
        .update(server_nonce, kRdzvNonce)
        .update(head, kRdzvHelloHead)
        .update(client_nonce, kRdzvNonce)
        .update(job)
        .digest();
}
inline Sha256Digest rdzv_blob_mac(const std::string& key, const unsigned char* client_nonce,
                                  const unsigned char* server_nonce, const void* blob, size_t n) {
    return HmacSha256(key.data(), key.size())
        .update("blob", 4)
        .update(client_nonce, kRdzvNonce)
        .update(server_nonce, kRdzvNonce)
        .update(blob, n)
        .digest();
}

inline void rdzv_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }
inline int rdzv_ms_left(double deadline) {
    const double left = deadline - rdzv_now();
    return left <= 0 ? 0 : (int)std::min(1000.0, std::ceil(left * 1000));
}

// All of it before the deadline; false on error or timeout (errno ETIMEDOUT).
inline bool rdzv_send_all(int fd, const void* data, size_t n, double deadline) {
    const char* p = (const char*)data;
    while (n > 0) {
        const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k, n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        if (rdzv_now() >= deadline) return errno = ETIMEDOUT, false;
        pollfd pf{fd, POLLOUT, 0};
        ::poll(&pf, 1, rdzv_ms_left(deadline));
    }
    return true;
}
// 1: all n bytes; 0: the peer closed first; -1: error (errno), or the deadline (errno ETIMEDOUT).
inline int rdzv_recv_all(int fd, void* data, size_t n, double deadline) {
    char* p = (char*)data;
    while (n > 0) {
        const ssize_t k = ::recv(fd, p, n, 0);
        if (k > 0) {
            p += k, n -= (size_t)k;
            continue;
        }
        if (k == 0) return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        if (rdzv_now() >= deadline) return errno = ETIMEDOUT, -1;
        pollfd pf{fd, POLLIN, 0};
        ::poll(&pf, 1, rdzv_ms_left(deadline));
    }
    return 1;
}

inline std::string rdzv_reply(uint32_t status, int world, const void* payload, size_t n) {
    std::string s(kRdzvMagic, 8);
    rdzv_put32(s, status);
    rdzv_put32(s, (uint32_t)world);
    rdzv_put32(s, (uint32_t)n);
    return s.append((const char*)payload, n);
}

// MASTER_ADDR and the port rank 0 listens on; fails (one line) when only one of the two is set.
struct RendezvousAddress {
    std::string host;
    int port = 0;
    std::string port_text;  // how the port is named in error lines
    bool single_host = false;  // every rank on this host (the launcher's local world size): meet on 127.0.0.1
};
inline RendezvousAddress rendezvous_tcp_address(int world = 0) {
    RendezvousAddress a;
    const char* host = std::getenv("MASTER_ADDR");
    int port = 0;
    const bool has_port = launcher_env_int("MASTER_PORT", &port, 1, 65535);
    if (!host || !*host || !has_port)
        fatal("%s is set but %s is not: set both (rank 0's host and a free port on it), as torchrun does",
              has_port ? "MASTER_PORT" : "MASTER_ADDR", has_port ? "MASTER_ADDR" : "MASTER_PORT");
    if (std::strlen(host) > 255) fatal("MASTER_ADDR is %zu characters long: a host name has at most 255", std::strlen(host));
    a.host = host;
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent && std::strcmp(agent, "True") == 0 && port < 65535) {
        // torchrun's agent already serves its store on MASTER_PORT of rank 0's host.
        a.port = port + 1;
        a.port_text = "MASTER_PORT+1: torchrun's agent serves MASTER_PORT";
    } else {
        a.port = port;
        a.port_text = "MASTER_PORT";
    }
    if (world > 1) {
        const LauncherRanks me = launcher_ranks_from_env();
        a.single_host = me.world == world && me.local_world == world;
    }
    return a;
}

// MASTER_ADDR's IPv4 addresses (network order), empty with *err set when it does not resolve.
inline std::vector<uint32_t> rdzv_resolve(const std::string& host, std::string* err) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    std::vector<uint32_t> out;
    const int g = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (g != 0) {
        *err = std::string("cannot resolve MASTER_ADDR=") + host + " (" + ::gai_strerror(g) + ")";
        return out;
    }
    for (addrinfo* ai = res; ai; ai = ai->ai_next)
        if (ai->ai_family == AF_INET) {
            const uint32_t a = ((const sockaddr_in*)ai->ai_addr)->sin_addr.s_addr;
            if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
        }
    ::freeaddrinfo(res);
    if (out.empty()) *err = "MASTER_ADDR=" + host + " has no IPv4 address";
    return out;
}
inline bool rdzv_loopback(uint32_t addr) { return (ntohl(addr) >> 24) == 127; }
inline bool rdzv_all_loopback(const std::vector<uint32_t>& addrs) {
    for (uint32_t a : addrs)
        if (!rdzv_loopback(a)) return false;
    return !addrs.empty();
}
inline std::string rdzv_ip(uint32_t addr) {
    char ip[INET_ADDRSTRLEN] = "?";
    in_addr a{};
    a.s_addr = addr;
    ::inet_ntop(AF_INET, &a, ip, sizeof ip);
    return ip;
}

// Without a secret anyone who reaches the port could take a rank, so only a loopback rendezvous
// runs without one (and there rank 0 takes its own user's connections only).
inline void rdzv_need_secret(const RendezvousSecret& secret, bool loopback, const RendezvousAddress& a, int rank) {
    if (!secret.key.empty() || loopback) return;
    fatal("rank %d: MASTER_ADDR=%s is not a loopback address and no LONGNET_RDZV_SECRET is set: anyone who reaches "
          "port %d could join this job; give every rank the same secret (%s), or run on one host with "
          "MASTER_ADDR=127.0.0.1",
          rank, a.host.c_str(), a.port, rendezvous_secret_hint());
}

// The user of the process at the other end of a loopback connection, from the kernel's socket
// table (/proc/net/tcp lists each socket with its owner's uid); false when it cannot be told.
inline bool rdzv_peer_uid(int fd, uid_t* uid) {
    sockaddr_in peer{}, me{};
    socklen_t lp = sizeof peer, lm = sizeof me;
    if (::getpeername(fd, (sockaddr*)&peer, &lp) != 0 || ::getsockname(fd, (sockaddr*)&me, &lm) != 0) return false;
    char want_local[32], want_remote[32];
    std::snprintf(want_local, sizeof want_local, "%08X:%04X", (unsigned)peer.sin_addr.s_addr, (unsigned)ntohs(peer.sin_port));
    std::snprintf(want_remote, sizeof want_remote, "%08X:%04X", (unsigned)me.sin_addr.s_addr, (unsigned)ntohs(me.sin_port));
    FILE* f = std::fopen("/proc/net/tcp", "re");
    if (!f) return false;
    char line[512];
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) {
        char local[64], remote[64];
        unsigned u = 0;
        if (std::sscanf(line, "%*s %63s %63s %*s %*s %*s %*s %u", local, remote, &u) == 3 &&
            strcasecmp(local, want_local) == 0 && strcasecmp(remote, want_remote) == 0)
            *uid = (uid_t)u, found = true;
    }
    std::fclose(f);
    return found;
}

inline std::string rdzv_rank_list(const std::vector<int>& ranks) {
    std::string s;
    const size_t shown = std::min<size_t>(ranks.size(), 16);
    for (size_t i = 0; i < shown; i++) s += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > shown) s += " and " + std::to_string(ranks.size() - shown) + " more";
    return s;
}

// Rank 0's side, in its phases: listen; until every other rank has arrived (or the time is up)
// accept connections, challenge each with a nonce, read their hellos and keep the ranks that prove
// the secret and pass, notice the ones that went away; then send the blob to all. Every
// descriptor is closed when it ends, by an error too.
class RendezvousServer {
   public:
    // Connections not yet proven, at most; each has kProveSeconds to prove itself. A rank answers
    // the challenge at once (an HMAC takes microseconds), so these only bound what strangers hold.
    static constexpr size_t kMaxPending = 64;
    static constexpr double kProveSeconds = 5;

    RendezvousServer(size_t bytes, int world, const RendezvousSecret& secret = rendezvous_secret())
        : a_(rendezvous_tcp_address(world)), secret_(secret), job_(rendezvous_job_id()), bytes_(bytes),
          world_(checked_world(world, bytes)), held_(world_, -1), from_(world_), nonces_(world_) {
        listen_on_port();
        if (secret_.key.empty() && !loopback_) close_all(), rdzv_need_secret(secret_, loopback_, a_, 0);
    }
    RendezvousServer(const RendezvousServer&) = delete;
    RendezvousServer& operator=(const RendezvousServer&) = delete;
    ~RendezvousServer() { close_all(); }

    void serve(const void* blob, double timeout_s) {
        const double t0 = rdzv_now(), deadline = t0 + timeout_s;
        while (arrived_ < world_) {
            if (rdzv_now() >= deadline) give_up(t0);
            wait_for_news(deadline);
            expire_pending();
            accept_new();
            read_hellos();
            drop_departed();
        }
        send_blob(blob, deadline + 5);
    }
    std::string listening_on() const { return rdzv_ip(bound_) + ":" + std::to_string(a_.port); }

   private:
    static int checked_world(int world, size_t bytes) {
        if (world < 2 || world > kRdzvMaxWorld || bytes > kRdzvMaxBlob)
            fatal("rank 0: a rendezvous of %d ranks sharing %zu bytes is impossible (2 to %d ranks, at most %zu bytes)",
                  world, bytes, kRdzvMaxWorld, kRdzvMaxBlob);
        return world;
    }
    struct Pending {
        int fd;
        std::string from, got;  // peer address; bytes of its hello so far
        double until;           // when it must have proven itself
        std::array<unsigned char, kRdzvNonce> nonce;
    };
    RendezvousAddress a_;
    RendezvousSecret secret_;
    std::string job_;
    size_t bytes_;
    int world_, lfd_ = -1, arrived_ = 1;
    uint32_t bound_ = 0;      // the address listened on (network order; 0: all of the host's)
    bool loopback_ = false;   // reachable from this host only
    std::string bound_why_;   // for the time-out line: why not MASTER_ADDR's own address
    std::vector<Pending> pending_;
    std::vector<int> held_;                                        // the connection of each rank that arrived
    std::vector<std::string> from_;                                // and where it came from
    std::vector<std::array<unsigned char, 2 * kRdzvNonce>> nonces_;  // its nonce and ours, for the blob's HMAC
    std::vector<std::string> notes_;                               // refusals and departures, for the time-out line
    int unproven_ = 0, other_users_ = 0, expired_ = 0, evicted_ = 0;
    double accept_paused_until_ = 0;
    bool out_of_fds_ = false;

    // Where to listen: MASTER_ADDR's own address when this host has it (loopback stays loopback),
    // 127.0.0.1 when every rank runs here, else every address of the host: MASTER_ADDR may name
    // rank 0 by an address it does not hold (a NAT or a virtual address in front of it, a name
    // that resolves otherwise here than on the other hosts), and the ranks must still reach it;
    // the secret keeps strangers out either way.
    void listen_on_port() {
        std::vector<uint32_t> candidates;
        if (a_.single_host) {
            candidates.push_back(htonl(INADDR_LOOPBACK));
        } else {
            std::string err;
            candidates = rdzv_resolve(a_.host, &err);
            if (candidates.empty()) bound_why_ = err + " on rank 0's host: listening on all of its addresses";
        }
        for (uint32_t addr : candidates) {
            const int err = try_listen(addr);
            if (err == 0) return;
            if (err != EADDRNOTAVAIL) fail_listen(err);
        }
        if (!candidates.empty())
            bound_why_ = "MASTER_ADDR=" + a_.host + " (" + rdzv_ip(candidates[0]) +
                         ") is no address of rank 0's host: listening on all of its addresses";
        const int err = try_listen(htonl(INADDR_ANY));
        if (err != 0) fail_listen(err);
    }
    int try_listen(uint32_t addr) {
        lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd_ < 0) fatal("rank 0: cannot open a TCP socket for the rendezvous: %s", std::strerror(errno));
        const int one = 1;
        ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a port of a job just ended is usable
        sockaddr_in at{};
        at.sin_family = AF_INET;
        at.sin_addr.s_addr = addr;
        at.sin_port = htons((uint16_t)a_.port);
        if (::bind(lfd_, (sockaddr*)&at, sizeof at) != 0 || ::listen(lfd_, SOMAXCONN) != 0) {
            const int err = errno;
            ::close(lfd_), lfd_ = -1;  // a constructor that throws runs no destructor
            return err;
        }
        rdzv_nonblocking(lfd_);
        bound_ = addr, loopback_ = rdzv_loopback(addr);
        return 0;
    }
    [[noreturn]] void fail_listen(int err) {
        if (err == EADDRINUSE)
            fatal("rank 0: port %d on this host is taken (%s): another job or program listens there: pick another "
                  "MASTER_PORT",
                  a_.port, a_.port_text.c_str());
        fatal("rank 0: cannot listen on port %d (%s) for the other ranks: %s: pick another MASTER_PORT (1024-65535)",
              a_.port, a_.port_text.c_str(), std::strerror(err));
    }

    void note(const std::string& s) {
        if (notes_.size() < 4) notes_.push_back(s);
    }
    void drop(Pending& p) {
        if (p.fd >= 0) ::close(p.fd);
        p.fd = -1;
    }
    void refuse(Pending& p, uint32_t status, const std::string& why) {
        const std::string r = rdzv_reply(status, status == kRdzvUnproven ? 0 : world_, why.data(), why.size());
        rdzv_send_all(p.fd, r.data(), r.size(), rdzv_now() + 1);
        drop(p);
    }

    // The time is up: the ranks that came are told why, and rank 0 fails naming those that did not.
    [[noreturn]] void give_up(double t0) {
        std::vector<int> missing;
        for (int r = 1; r < world_; r++)
            if (held_[r] < 0) missing.push_back(r);
        std::string extra;
        for (const std::string& s : notes_) extra += "; " + s;
        if (unproven_) extra += strf("; %d connection(s) did not prove the job's secret (%s) and were refused", unproven_, secret_.from.c_str());
        if (other_users_) extra += strf("; %d connection(s) of other users were refused (without a secret only this user's processes may join)", other_users_);
        if (expired_ + evicted_) extra += strf("; %d connection(s) said nothing in time and were closed", expired_ + evicted_);
        if (out_of_fds_) extra += "; this process ran out of file descriptors (ulimit -n) while connections waited";
        if (!bound_why_.empty()) extra += "; " + bound_why_;
        in_addr numeric{};
        if (loopback_ && !a_.single_host && ::inet_pton(AF_INET, a_.host.c_str(), &numeric) != 1)
            extra += "; rank 0 listens on " + rdzv_ip(bound_) + " only (MASTER_ADDR=" + a_.host +
                     " is a loopback address here): ranks on other hosts cannot reach it; give rank 0's network address";
        const std::string msg = strf(
            "rank 0: waited %.1f s (LONGNET_COMM_TIMEOUT_S) on port %d (%s) for rank%s %s of %d to arrive: they "
            "did not start, failed before it, or cannot reach this host at MASTER_ADDR=%s (firewall, wrong "
            "address)%s",
            rdzv_now() - t0, a_.port, a_.port_text.c_str(), missing.size() > 1 ? "s" : "", rdzv_rank_list(missing).c_str(),
            world_, a_.host.c_str(), extra.c_str());
        const std::string r = rdzv_reply(kRdzvGaveUp, world_, msg.data(), std::min<size_t>(msg.size(), kRdzvMaxText));
        for (int fd : held_)
            if (fd >= 0) rdzv_send_all(fd, r.data(), r.size(), rdzv_now() + 1);
        fatal("%s", msg.c_str());
    }

    // Until a connection, a hello's bytes or a departure comes, a pending connection's time ends,
    // or the deadline. The listening socket sits out while accepting is paused.
    void wait_for_news(double deadline) {
        std::vector<pollfd> fds;
        double until = deadline;
        if (rdzv_now() >= accept_paused_until_) fds.push_back({lfd_, POLLIN, 0});
        else until = std::min(until, accept_paused_until_);
        for (const Pending& p : pending_) fds.push_back({p.fd, POLLIN, 0}), until = std::min(until, p.until);
        for (int r = 1; r < world_; r++)
            if (held_[r] >= 0) fds.push_back({held_[r], POLLIN, 0});  // readable only when it went away
        if (::poll(fds.data(), fds.size(), rdzv_ms_left(until)) < 0 && errno != EINTR)
            fatal("rank 0: poll during the rendezvous: %s", std::strerror(errno));
    }

    void expire_pending() {
        const double now = rdzv_now();
        for (Pending& p : pending_)
            if (p.until <= now) drop(p), expired_++;
        compact();
    }
    void compact() {
        pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return p.fd < 0; }),
                       pending_.end());
    }
    // Room for one more: the connection that waited longest gives way (a rank proves itself in
    // one round trip, so the oldest unproven one is the likeliest to be idle).
    bool evict_oldest() {
        if (pending_.empty()) return false;
        drop(pending_.front()), evicted_++;
        pending_.erase(pending_.begin());
        return true;
    }

    void accept_new() {
        if (rdzv_now() < accept_paused_until_) return;
        for (int i = 0; i < 256; i++) {  // a bounded batch: the hellos get their turn during a flood
            sockaddr_in peer{};
            socklen_t len = sizeof peer;
            const int fd = ::accept4(lfd_, (sockaddr*)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) return;
                // Out of descriptors (or kernel memory): free one held by an unproven connection,
                // else pause accepting for a moment. Retrying at once would spin, since the
                // listening socket stays readable.
                if ((errno == EMFILE || errno == ENFILE) && evict_oldest()) continue;
                out_of_fds_ = out_of_fds_ || errno == EMFILE || errno == ENFILE;
                accept_paused_until_ = rdzv_now() + 0.05;
                return;
            }
            const std::string from = rdzv_ip(peer.sin_addr.s_addr);
            uid_t uid = 0;
            if (secret_.key.empty() && (!rdzv_peer_uid(fd, &uid) || uid != ::geteuid())) {
                ::close(fd), other_users_++;
                continue;
            }
            if (pending_.size() >= kMaxPending) evict_oldest();
            Pending p{fd, from, std::string(), rdzv_now() + kProveSeconds, {}};
            rdzv_random(p.nonce.data(), p.nonce.size());
            std::string challenge(kRdzvMagic, 8);
            rdzv_put32(challenge, kRdzvVersion);
            challenge.append((const char*)p.nonce.data(), p.nonce.size());
            // A fresh socket's buffer takes 44 bytes at once; one that does not is dropped.
            if (::send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL) != (ssize_t)challenge.size()) {
                ::close(fd);
                continue;
            }
            pending_.push_back(std::move(p));
        }
    }

    // The hellos, as far as they came: a whole one is proven and passes (the rank is held), or is
    // refused. Nothing is read past what the hello's fields announce, within their bounds.
    void read_hellos() {
        for (Pending& p : pending_) {
            if (p.fd < 0) continue;
            size_t want = kRdzvHelloBytes;
            if (p.got.size() >= kRdzvHelloHead) want += rdzv_get32(p.got.data() + 24);
            char buf[512];
            const ssize_t k = ::recv(p.fd, buf, std::min(sizeof buf, want - p.got.size()), 0);
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
            if (k <= 0) {
                drop(p);
                continue;
            }
            p.got.append(buf, (size_t)k);
            take_hello(p);
        }
        compact();
    }

    void take_hello(Pending& p) {
        const char* h = p.got.data();
        // Not this program, another version (the rank read ours in the challenge and says so
        // itself), or a job id past its bound: closed unanswered.
        if (std::memcmp(h, kRdzvMagic, std::min<size_t>(8, p.got.size())) != 0 ||
            (p.got.size() >= 12 && rdzv_get32(h + 8) != kRdzvVersion) ||
            (p.got.size() >= kRdzvHelloHead && rdzv_get32(h + 24) > kRdzvMaxJobId)) {
            unproven_++;
            return drop(p);
        }
        if (p.got.size() < kRdzvHelloHead || p.got.size() < kRdzvHelloBytes + rdzv_get32(h + 24)) return;
        const uint32_t w = rdzv_get32(h + 12), r = rdzv_get32(h + 16), n = rdzv_get32(h + 20), job_len = rdzv_get32(h + 24);
        const unsigned char* their_nonce = (const unsigned char*)h + kRdzvHelloHead;
        const unsigned char* their_mac = their_nonce + kRdzvNonce;
        const std::string their_job = p.got.substr(kRdzvHelloBytes, job_len);
        const Sha256Digest mac = rdzv_hello_mac(secret_.key, p.nonce.data(), h, their_nonce, their_job);
        if (!digest_equal(mac.data(), their_mac)) {
            unproven_++;
            return refuse(p, kRdzvUnproven, kRdzvUnprovenText);
        }
        const std::string why = hello_refusal(w, r, n, their_job);
        if (!why.empty()) {
            note("refused rank " + std::to_string(r) + " from " + p.from + ": " + why);
            return refuse(p, kRdzvRefused, why);
        }
        held_[r] = p.fd, from_[r] = p.from, arrived_++;
        std::memcpy(nonces_[r].data(), their_nonce, kRdzvNonce);
        std::memcpy(nonces_[r].data() + kRdzvNonce, p.nonce.data(), kRdzvNonce);
        p.fd = -1;
    }

    // Why a proven hello (world size, rank, blob size, job) is not a rank of this job; "" if it is.
    std::string hello_refusal(uint32_t w, uint32_t r, uint32_t n, const std::string& their_job) const {
        if (w != (uint32_t)world_)
            return strf("rank 0 runs a job of %d ranks, this rank was started for %u: start every rank with the same "
                        "world size (or give this job another MASTER_PORT)",
                        world_, (unsigned)w);
        if (their_job != job_)
            return strf("this rank belongs to job \"%s\", rank 0 to job \"%s\": give each job its own MASTER_PORT (or "
                        "the same LONGNET_JOB_ID to every rank of one job)",
                        rdzv_printable(their_job).c_str(), rdzv_printable(job_).c_str());
        if (n != bytes_) return strf("rank 0 shares %zu bytes, this rank expects %u: run the same binary on every rank", bytes_, (unsigned)n);
        // Compared unsigned: a rank of 2^32 - 1 cast to int would pass as -1 and index held_ out of bounds.
        if (r < 1 || r >= (uint32_t)world_) return strf("rank %u is not a rank 1 to %d of this job", (unsigned)r, world_ - 1);
        if (held_[r] >= 0)
            return strf("rank %u already arrived from %s: two processes have the same rank (check the launcher's RANK)",
                        (unsigned)r, from_[r].c_str());
        return "";
    }

    // A rank that arrived and went away is missing again.
    void drop_departed() {
        for (int r = 1; r < world_; r++) {
            if (held_[r] < 0) continue;
            pollfd pf{held_[r], POLLIN, 0};
            if (::poll(&pf, 1, 0) != 1) continue;
            char c;
            const ssize_t k = ::recv(held_[r], &c, 1, MSG_DONTWAIT);
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
            note("rank " + std::to_string(r) + " arrived from " + from_[r] + " and went away");
            ::close(held_[r]), held_[r] = -1, arrived_--;
        }
    }

    void send_blob(const void* blob, double deadline) {
        for (int r = 1; r < world_; r++) {
            std::string ok = rdzv_reply(kRdzvOk, world_, blob, bytes_);
            const Sha256Digest mac =
                rdzv_blob_mac(secret_.key, nonces_[r].data(), nonces_[r].data() + kRdzvNonce, blob, bytes_);
            ok.append((const char*)mac.data(), mac.size());
            if (!rdzv_send_all(held_[r], ok.data(), ok.size(), deadline))
                fatal("rank 0: rank %d (from %s) went away during the rendezvous: %s", r, from_[r].c_str(), std::strerror(errno));
        }
        for (int r = 1; r < world_; r++) ::shutdown(held_[r], SHUT_WR);
    }

    void close_all() {
        for (Pending& p : pending_) drop(p);
        for (int& fd : held_)
            if (fd >= 0) ::close(fd), fd = -1;
        if (lfd_ >= 0) ::close(lfd_), lfd_ = -1;
    }
};

inline void rendezvous_tcp_serve(const void* blob, size_t bytes, int world, double timeout_s) {
    RendezvousServer(bytes, world).serve(blob, timeout_s);
}

// A connected socket to the first of addrs that takes a connection on port within 5 s (and
// before deadline), or -1 with the reason in *last.
inline int rdzv_connect_any(const std::vector<uint32_t>& addrs, int port, double deadline, std::string* last) {
    int fd = -1;
    for (size_t i = 0; i < addrs.size() && fd < 0; i++) {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            *last = std::string("socket: ") + std::strerror(errno);
            continue;
        }
        rdzv_nonblocking(fd);
        sockaddr_in to{};
        to.sin_family = AF_INET, to.sin_addr.s_addr = addrs[i], to.sin_port = htons((uint16_t)port);
        int err = ::connect(fd, (sockaddr*)&to, sizeof to) == 0 ? 0 : errno;
        if (err == EINPROGRESS) {
            pollfd pf{fd, POLLOUT, 0};
            const double until = std::min(deadline, rdzv_now() + 5);
            while (::poll(&pf, 1, rdzv_ms_left(until)) == 0 && rdzv_now() < until) {
            }
            socklen_t len = sizeof err;
            if (!(pf.revents & (POLLOUT | POLLERR | POLLHUP))) err = ETIMEDOUT;
            else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
        if (err != 0) {
            *last = std::string("connect: ") + std::strerror(err);
            ::close(fd), fd = -1;
        }
    }
    return fd;
}

// Rank 0's answer other than the blob: the one line saying why this rank cannot go on.
[[noreturn]] inline void rdzv_refused(uint32_t status, const std::string& payload, const RendezvousAddress& a, int rank,
                                      const RendezvousSecret& secret) {
    const std::string line = rdzv_printable(payload, kRdzvMaxText);
    if (status == kRdzvUnproven)
        fatal("rank %d: rank 0 at %s:%d refused this rank's proof of the job's secret (this rank's: %s): give every "
              "rank the same LONGNET_RDZV_SECRET or LONGNET_RDZV_SECRET_FILE (%s)",
              rank, a.host.c_str(), a.port, secret.from.c_str(), rendezvous_secret_hint());
    if (status == kRdzvRefused)
        fatal("rank %d: rank 0 at %s:%d refused this rank: %s", rank, a.host.c_str(), a.port, line.c_str());
    fatal("rank %d: rank 0 at %s:%d gave up: %s", rank, a.host.c_str(), a.port, line.c_str());
}

// Every other rank: connects to rank 0 (retrying until it listens), proves the secret, takes the
// blob once rank 0 proved it too.
inline void rendezvous_tcp_fetch(void* blob, size_t bytes, int rank, int world, double timeout_s,
                                 const RendezvousSecret& secret = rendezvous_secret()) {
    if (world < 2 || world > kRdzvMaxWorld || rank < 1 || rank >= world || bytes > kRdzvMaxBlob)
        fatal("rank %d: a rendezvous of rank %d of %d ranks fetching %zu bytes is impossible", rank, rank, world, bytes);
    const RendezvousAddress a = rendezvous_tcp_address(world);
    const std::string job = rendezvous_job_id();
    const double t0 = rdzv_now(), deadline = t0 + timeout_s;
    std::string last = "nothing tried";
    for (int attempt = 0;; attempt++) {
        if (attempt > 0) {
            if (rdzv_now() >= deadline)
                fatal("rank %d: rank 0 is unreachable at %s:%d (MASTER_ADDR, %s) after %.1f s (LONGNET_COMM_TIMEOUT_S): "
                      "%s: rank 0 did not start, failed before it, or this host cannot reach it: check MASTER_ADDR "
                      "and MASTER_PORT on every rank",
                      rank, a.host.c_str(), a.port, a.port_text.c_str(), rdzv_now() - t0, last.c_str());
            rdzv_sleep(std::min(0.2, 0.02 * attempt));
        }
        std::vector<uint32_t> addrs;
        if (a.single_host) addrs.push_back(htonl(INADDR_LOOPBACK));
        else addrs = rdzv_resolve(a.host, &last);
        if (addrs.empty()) continue;
        rdzv_need_secret(secret, rdzv_all_loopback(addrs), a, rank);
        const int fd = rdzv_connect_any(addrs, a.port, deadline, &last);
        if (fd < 0) continue;
        // Connected: rank 0 challenges at once and answers the hello once every rank arrived, or
        // when it gives up at its own time-out, which ends before ours (it listened before we
        // connected). A connection closed unanswered (rank 0 made room for others, or is not up
        // yet) is tried again.
        const double answer_by = rdzv_now() + timeout_s + 5;
        char challenge[kRdzvChallengeBytes], head[kRdzvReplyBytes];
        int got = rdzv_recv_all(fd, challenge, 8, answer_by);
        bool rank0 = got == 1 && std::memcmp(challenge, kRdzvMagic, 8) == 0;
        if (got == 1 && rank0) got = rdzv_recv_all(fd, challenge + 8, sizeof challenge - 8, answer_by);
        std::string hello;
        if (got == 1 && rank0) {
            const uint32_t version = rdzv_get32(challenge + 8);
            if (version != kRdzvVersion) {
                ::close(fd);
                fatal("rank %d: rank 0 at %s:%d speaks rendezvous version %u, this rank %u: run the same binary on "
                      "every rank",
                      rank, a.host.c_str(), a.port, (unsigned)version, (unsigned)kRdzvVersion);
            }
            unsigned char nonce[kRdzvNonce];
            rdzv_random(nonce, sizeof nonce);
            hello.assign(kRdzvMagic, 8);
            for (uint32_t v : {(uint32_t)kRdzvVersion, (uint32_t)world, (uint32_t)rank, (uint32_t)bytes, (uint32_t)job.size()})
                rdzv_put32(hello, v);
            const Sha256Digest mac =
                rdzv_hello_mac(secret.key, (const unsigned char*)challenge + 12, hello.data(), nonce, job);
            hello.append((const char*)nonce, sizeof nonce).append((const char*)mac.data(), mac.size()).append(job);
            got = rdzv_send_all(fd, hello.data(), hello.size(), answer_by) ? rdzv_recv_all(fd, head, sizeof head, answer_by) : -1;
            rank0 = got != 1 || std::memcmp(head, kRdzvMagic, 8) == 0;
        }
        if (got == 1 && !rank0) {
            ::close(fd);
            fatal("rank %d: what answers at %s:%d (%s) is not rank 0 of this program: MASTER_PORT is another "
                  "program's port; pick a free one",
                  rank, a.host.c_str(), a.port, a.port_text.c_str());
        }
        if (got != 1) {
            const bool timed_out = got < 0 && errno == ETIMEDOUT;
            last = got == 0 ? std::string("the connection was closed without an answer")
                            : std::string("connection lost: ") + std::strerror(errno);
            ::close(fd);
            if (timed_out)
                fatal("rank %d: rank 0 at %s:%d (%s) took the connection but did not answer within %.0f s: is rank 0 "
                      "stopped, or is another program listening there?",
                      rank, a.host.c_str(), a.port, a.port_text.c_str(), timeout_s + 5);
            continue;
        }
        const uint32_t status = rdzv_get32(head + 8), n = rdzv_get32(head + 16);
        if (status == kRdzvOk ? n != bytes : n > kRdzvMaxText) {
            ::close(fd);
            fatal("rank %d: rank 0 at %s:%d sent %u bytes, this rank expects %zu: run the same binary on every rank",
                  rank, a.host.c_str(), a.port, (unsigned)n, bytes);
        }
        std::string payload(n + (status == kRdzvOk ? 32 : 0), '\0');
        const int body = payload.empty() ? 1 : rdzv_recv_all(fd, &payload[0], payload.size(), answer_by);
        ::close(fd);
        if (body != 1) {
            last = "the connection was lost during rank 0's answer";
            continue;
        }
        if (status == kRdzvOk) {
            const unsigned char* nonce = (const unsigned char*)hello.data() + kRdzvHelloHead;
            const Sha256Digest mac = rdzv_blob_mac(secret.key, nonce, (const unsigned char*)challenge + 12, payload.data(), n);
            if (!digest_equal(mac.data(), (const unsigned char*)payload.data() + n))
                fatal("rank %d: the answer at %s:%d does not prove the job's secret (%s): rank 0 was given another "
                      "secret, or something else answers on that port; give every rank the same secret",
                      rank, a.host.c_str(), a.port, secret.from.c_str());
            std::memcpy(blob, payload.data(), bytes);
            return;
        }
        rdzv_refused(status, payload, a, rank, secret);
    }
}

// Rank 0's `bytes` bytes at `blob` end up at `blob` on every rank (see the top of this file).
// Rank 0 of a file rendezvous removes the file once every rank is known to have read it
// (rendezvous_file_remove, after the communicator is up).
inline Rendezvous rendezvous_share(void* blob, size_t bytes, int rank, int world, double timeout_s) {
    Rendezvous how;
    if (world <= 1) return how.method = "single", how;
    if (world > kRdzvMaxWorld || rank < 0 || rank >= world || bytes > kRdzvMaxBlob)
        fatal("rank %d: a rendezvous of rank %d of %d ranks sharing %zu bytes is impossible (at most %d ranks, %zu bytes)",
              rank, rank, world, bytes, kRdzvMaxWorld, kRdzvMaxBlob);
    const char* file = std::getenv("LONGNET_RENDEZVOUS");
    const bool addr = std::getenv("MASTER_ADDR"), port = std::getenv("MASTER_PORT");
    if (file && *file) {
        how.method = "file", how.where = file;
        const RendezvousSecret secret = rendezvous_secret();
        const std::string job = rendezvous_job_id();
        if (rank == 0)
            rendezvous_file_write(how.where, blob, bytes, world, secret, job);
        else
            rendezvous_file_read(how.where, blob, bytes, rank, world, timeout_s, secret, job);
        return how;
    }
    if (!addr && !port)
        fatal("rank %d: neither MASTER_ADDR/MASTER_PORT nor LONGNET_RENDEZVOUS is set: %d ranks meet over TCP at "
              "rank 0's MASTER_ADDR:MASTER_PORT (torchrun sets them; export them before mpirun or srun) or through a "
              "file every rank sees, LONGNET_RENDEZVOUS=/shared/path/job-id (scripts/launch.sh sets it)",
              rank, world);
    const RendezvousAddress a = rendezvous_tcp_address(world);
    how.method = "tcp", how.where = a.host + ":" + std::to_string(a.port);
    if (rank == 0)
        rendezvous_tcp_serve(blob, bytes, world, timeout_s);
    else
        rendezvous_tcp_fetch(blob, bytes, rank, world, timeout_s);
    return how;
}

inline void rendezvous_file_remove(const Rendezvous& how, int rank) {
    if (rank == 0 && how.method == "file") ::unlink(how.where.c_str());
}
