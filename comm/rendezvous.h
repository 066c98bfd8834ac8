// How the ranks of a job find each other, host side only (no CUDA, no NCCL: tests/test_rendezvous.cpp
// runs all of it on the CPU with forked processes; comm/nccl.cu builds the NCCL communicator on it).
//
//   LauncherRanks me = launcher_ranks_from_env();             // rank, world size, GPU of this host
//   Rendezvous how = rendezvous_share(blob, n, me.rank, me.world, comm_timeout_from_env());
//                                                              // rank 0's n bytes, now on every rank
//
// The launcher's ranks are comm/launcher_env.h's. The exchange (rank 0's opaque blob, NCCL's 128-byte
// unique id, to every rank):
//   LONGNET_RENDEZVOUS=path    through a file every rank sees (scripts/launch.sh sets it): rank 0
//                              writes it aside and renames it, the others poll for it. It wins
//                              when MASTER_ADDR/MASTER_PORT are set too: it is only ever set for us.
//   MASTER_ADDR, MASTER_PORT   over TCP, as torchrun and most cluster scripts set them: rank 0
//                              listens on MASTER_PORT (all of its host's IPv4 addresses), every
//                              other rank connects to MASTER_ADDR (a name or an IPv4 address),
//                              retrying until rank 0 is up, and says who it is: a magic and
//                              version, its rank, the world size, the blob's size and the job's id
//                              (LONGNET_JOB_ID, else the launcher's: TORCHELASTIC_RUN_ID,
//                              PMIX_NAMESPACE, SLURM_JOB_ID.SLURM_STEP_ID). Rank 0 refuses a rank
//                              of another job, world size or program in one line (on that rank),
//                              waits until every rank arrived, then sends the blob to all. Under
//                              torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True: torchrun
//                              itself serves MASTER_PORT) rank 0 listens on MASTER_PORT + 1.
// Both wait at most timeout_s (LONGNET_COMM_TIMEOUT_S, 45 s by default): then rank 0 fails naming
// the ranks that never arrived (and tells the ranks that did), a rank fails naming the ADDR:PORT it
// could not reach. Nothing assumes one host. No signal can come of a closed peer (MSG_NOSIGNAL).
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <algorithm>
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
#include "comm/launcher_env.h"

// ------------------------------------------------------------------------------------------------
// The exchange

struct Rendezvous {
    std::string method;  // "single" (one rank), "file", "tcp"
    std::string where;   // the file, or ADDR:PORT
};

inline double rdzv_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline void rdzv_sleep(double s) { std::this_thread::sleep_for(std::chrono::microseconds((long long)(s * 1e6))); }

// The job's id as the launcher gives it (every rank of one job has the same), "" when none.
inline std::string rendezvous_job_id() {
    if (const char* s = std::getenv("LONGNET_JOB_ID")) return std::string("LONGNET_JOB_ID=") + s;
    for (const char* name : {"TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE"})
        if (const char* s = std::getenv(name)) return std::string(name) + "=" + s;
    if (const char* s = std::getenv("SLURM_JOB_ID")) {
        const char* step = std::getenv("SLURM_STEP_ID");
        return std::string("SLURM_JOB_ID=") + s + (step ? std::string(".") + step : std::string());
    }
    return std::string();
}

// --- the file: what it holds is a tag (a stale or foreign file fails clearly), the world size (a
// file of a job of another size fails at once, not at the timeout), the blob's size, the blob.
inline constexpr char kRendezvousFileTag[16] = "longnet-rdzv-v2";

inline void rendezvous_file_write(const std::string& path, const void* blob, size_t bytes, int world) {
    std::string rec(kRendezvousFileTag, sizeof kRendezvousFileTag);
    const int32_t w = world;
    const uint32_t n = (uint32_t)bytes;
    rec.append((const char*)&w, sizeof w).append((const char*)&n, sizeof n).append((const char*)blob, bytes);
    // Written aside, flushed, then renamed: the others never see a half-written file.
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        fatal("rank 0: cannot create the rendezvous file %s (LONGNET_RENDEZVOUS): %s: point it into a writable "
              "folder that every rank sees",
              tmp.c_str(), std::strerror(errno));
    const bool ok = ::write(fd, rec.data(), rec.size()) == (ssize_t)rec.size() && ::fsync(fd) == 0;
    const int err = errno;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0)
        fatal("rank 0: cannot write the rendezvous file %s (LONGNET_RENDEZVOUS): %s", path.c_str(),
              std::strerror(ok ? errno : err));
}

inline void rendezvous_file_read(const std::string& path, void* blob, size_t bytes, int rank, int world,
                                 double timeout_s) {
    const double t0 = rdzv_now();
    const size_t want = sizeof kRendezvousFileTag + 8 + bytes;
    std::string rec(want + 1, '\0');
    for (;;) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            const ssize_t got = ::read(fd, &rec[0], rec.size());
            ::close(fd);
            if (got >= (ssize_t)(sizeof kRendezvousFileTag + 8)) {
                int32_t w = 0;
                uint32_t n = 0;
                std::memcpy(&w, rec.data() + sizeof kRendezvousFileTag, 4);
                std::memcpy(&n, rec.data() + sizeof kRendezvousFileTag + 4, 4);
                if (std::memcmp(rec.data(), kRendezvousFileTag, sizeof kRendezvousFileTag) != 0)
                    fatal("rank %d: %s (LONGNET_RENDEZVOUS) is not a rendezvous file of this program's version: "
                          "give every job a fresh path",
                          rank, path.c_str());
                if (w != world)
                    fatal("rank %d: the rendezvous file %s was written for %d ranks, this job has %d: a stale file "
                          "from another job? give every job a fresh LONGNET_RENDEZVOUS",
                          rank, path.c_str(), (int)w, world);
                if (n != bytes || got != (ssize_t)want)
                    fatal("rank %d: the rendezvous file %s holds %u bytes, this program expects %zu: every rank "
                          "must run the same binary",
                          rank, path.c_str(), n, bytes);
                std::memcpy(blob, rec.data() + sizeof kRendezvousFileTag + 8, bytes);
                return;
            }
        } else if (errno != ENOENT) {
            fatal("rank %d: cannot read the rendezvous file %s (LONGNET_RENDEZVOUS): %s", rank, path.c_str(),
                  std::strerror(errno));
        }
        const double waited = rdzv_now() - t0;
        if (waited > timeout_s) {
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

enum : uint32_t { kRdzvVersion = 1, kRdzvOk = 0, kRdzvRefused = 1, kRdzvGaveUp = 2, kRdzvMaxText = 4096 };
inline constexpr char kRdzvMagic[8] = {'L', 'N', 'G', 'T', 'R', 'D', 'Z', 'V'};
// hello (rank -> rank 0): magic, version, world, rank, blob bytes, job id length, then the job id
// reply (rank 0 -> rank): magic, status, world, length, then the blob (ok) or a line (refused, gave up)
constexpr size_t kRdzvHelloBytes = 8 + 5 * 4, kRdzvReplyBytes = 8 + 3 * 4;

inline void rdzv_put32(std::string& s, uint32_t v) {
    const uint32_t be = htonl(v);
    s.append((const char*)&be, 4);
}
inline uint32_t rdzv_get32(const char* p) {
    uint32_t be;
    std::memcpy(&be, p, 4);
    return ntohl(be);
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
};
inline RendezvousAddress rendezvous_tcp_address() {
    RendezvousAddress a;
    const char* host = std::getenv("MASTER_ADDR");
    int port = 0;
    const bool has_port = launcher_env_int("MASTER_PORT", &port, 1, 65535);
    if (!host || !*host || !has_port)
        fatal("%s is set but %s is not: set both (rank 0's host and a free port on it), as torchrun does",
              has_port ? "MASTER_PORT" : "MASTER_ADDR", has_port ? "MASTER_ADDR" : "MASTER_PORT");
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
    return a;
}

inline std::string rdzv_rank_list(const std::vector<int>& ranks) {
    std::string s;
    const size_t shown = std::min<size_t>(ranks.size(), 16);
    for (size_t i = 0; i < shown; i++) s += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > shown) s += " and " + std::to_string(ranks.size() - shown) + " more";
    return s;
}

// Rank 0's side, in its phases: listen; until every other rank has arrived (or the time is up)
// accept connections, read their hellos and keep the ranks that pass, notice the ones that went
// away; then send the blob to all. Every descriptor is closed when it ends, by an error too.
class RendezvousServer {
   public:
    RendezvousServer(size_t bytes, int world)
        : a_(rendezvous_tcp_address()), job_(rendezvous_job_id()), bytes_(bytes), world_(world), held_(world, -1), from_(world) {
        listen_on_port();
    }
    RendezvousServer(const RendezvousServer&) = delete;
    RendezvousServer& operator=(const RendezvousServer&) = delete;
    ~RendezvousServer() { close_all(); }

    void serve(const void* blob, double timeout_s) {
        const double t0 = rdzv_now(), deadline = t0 + timeout_s;
        while (arrived_ < world_) {
            if (rdzv_now() >= deadline) give_up(t0);
            wait_for_news(deadline);
            accept_new();
            read_hellos();
            drop_departed();
        }
        send_blob(blob, deadline + 5);
    }

   private:
    struct Pending {
        int fd;
        std::string from, got;  // peer address; bytes of its hello so far
    };
    RendezvousAddress a_;
    std::string job_;
    size_t bytes_;
    int world_, lfd_ = -1, arrived_ = 1;
    std::vector<Pending> pending_;
    std::vector<int> held_;            // the connection of each rank that arrived
    std::vector<std::string> from_;    // and where it came from
    std::vector<std::string> notes_;   // refusals and departures, for the time-out line

    void listen_on_port() {
        lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd_ < 0) fatal("rank 0: cannot open a TCP socket for the rendezvous: %s", std::strerror(errno));
        const int one = 1;
        ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a port of a job just ended is usable
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_addr.s_addr = htonl(INADDR_ANY);
        any.sin_port = htons((uint16_t)a_.port);
        if (::bind(lfd_, (sockaddr*)&any, sizeof any) != 0 || ::listen(lfd_, SOMAXCONN) != 0) {
            const int err = errno;
            ::close(lfd_), lfd_ = -1;  // a constructor that throws runs no destructor
            if (err == EADDRINUSE)
                fatal("rank 0: port %d on this host is taken (%s): another job or program listens there: pick another "
                      "MASTER_PORT",
                      a_.port, a_.port_text.c_str());
            fatal("rank 0: cannot listen on port %d (%s) for the other ranks: %s: pick another MASTER_PORT (1024-65535)",
                  a_.port, a_.port_text.c_str(), std::strerror(err));
        }
        rdzv_nonblocking(lfd_);
    }

    void note(const std::string& s) {
        if (notes_.size() < 4) notes_.push_back(s);
    }
    void refuse(Pending& p, const std::string& why) {
        const std::string r = rdzv_reply(kRdzvRefused, world_, why.data(), why.size());
        rdzv_send_all(p.fd, r.data(), r.size(), rdzv_now() + 1);
        ::close(p.fd);
        p.fd = -1;
    }

    // The time is up: the ranks that came are told why, and rank 0 fails naming those that did not.
    [[noreturn]] void give_up(double t0) {
        std::vector<int> missing;
        for (int r = 1; r < world_; r++)
            if (held_[r] < 0) missing.push_back(r);
        std::string extra;
        for (const std::string& s : notes_) extra += "; " + s;
        const std::string msg = strf(
            "rank 0: waited %.1f s (LONGNET_COMM_TIMEOUT_S) on port %d (%s) for rank%s %s of %d to arrive: they "
            "did not start, failed before it, or cannot reach this host at MASTER_ADDR=%s (firewall, wrong "
            "address)%s",
            rdzv_now() - t0, a_.port, a_.port_text.c_str(), missing.size() > 1 ? "s" : "", rdzv_rank_list(missing).c_str(),
            world_, a_.host.c_str(), extra.c_str());
        const std::string r = rdzv_reply(kRdzvGaveUp, world_, msg.data(), msg.size());
        for (int fd : held_)
            if (fd >= 0) rdzv_send_all(fd, r.data(), r.size(), rdzv_now() + 1);
        fatal("%s", msg.c_str());
    }

    // Until a connection, a hello's bytes or a departure comes, or the deadline.
    void wait_for_news(double deadline) {
        std::vector<pollfd> fds;
        fds.push_back({lfd_, POLLIN, 0});
        for (const Pending& p : pending_) fds.push_back({p.fd, POLLIN, 0});
        for (int r = 1; r < world_; r++)
            if (held_[r] >= 0) fds.push_back({held_[r], POLLIN, 0});  // readable only when it went away
        if (::poll(fds.data(), fds.size(), rdzv_ms_left(deadline)) < 0 && errno != EINTR)
            fatal("rank 0: poll during the rendezvous: %s", std::strerror(errno));
    }

    void accept_new() {
        for (;;) {  // every connection waiting
            sockaddr_in peer{};
            socklen_t len = sizeof peer;
            const int fd = ::accept(lfd_, (sockaddr*)&peer, &len);
            if (fd < 0) return;
            ::fcntl(fd, F_SETFD, FD_CLOEXEC);
            rdzv_nonblocking(fd);
            char ip[INET_ADDRSTRLEN] = "?";
            ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
            pending_.push_back({fd, ip, std::string()});
        }
    }

    // The hellos, as far as they came: a whole one passes (the rank is held) or is refused.
    void read_hellos() {
        for (Pending& p : pending_) {
            char buf[512];
            const ssize_t k = ::recv(p.fd, buf, sizeof buf, 0);
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
            if (k <= 0) {
                ::close(p.fd), p.fd = -1;
                continue;
            }
            p.got.append(buf, (size_t)k);
            take_hello(p);
        }
        pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return p.fd < 0; }),
                       pending_.end());
    }

    void take_hello(Pending& p) {
        if (p.got.size() >= 8 && std::memcmp(p.got.data(), kRdzvMagic, 8) != 0) {
            note("a connection from " + p.from + " was not a rank of this program (another program on the port?)");
            return refuse(p, "not a rendezvous hello of this program");
        }
        if (p.got.size() < kRdzvHelloBytes) return;
        const char* h = p.got.data();
        const uint32_t version = rdzv_get32(h + 8), w = rdzv_get32(h + 12), r = rdzv_get32(h + 16), n = rdzv_get32(h + 20),
                       job_len = rdzv_get32(h + 24);
        if (version != kRdzvVersion || job_len > 1024) {
            note("a rank from " + p.from + " speaks rendezvous version " + std::to_string(version));
            return refuse(p, strf("rank 0 speaks rendezvous version %u, this rank %u: run the same binary on every rank",
                                  (unsigned)kRdzvVersion, (unsigned)version));
        }
        if (p.got.size() < kRdzvHelloBytes + job_len) return;
        const std::string why = hello_refusal(w, r, n, p.got.substr(kRdzvHelloBytes, job_len));
        if (!why.empty()) {
            note("refused rank " + std::to_string(r) + " from " + p.from + ": " + why);
            return refuse(p, why);
        }
        held_[r] = p.fd, from_[r] = p.from, arrived_++;
        p.fd = -1;
    }

    // Why a whole hello (world size, rank, blob size, job) is not a rank of this job; "" if it is.
    std::string hello_refusal(uint32_t w, uint32_t r, uint32_t n, const std::string& their_job) const {
        if ((int)w != world_)
            return strf("rank 0 runs a job of %d ranks, this rank was started for %u: start every rank with the same "
                        "world size (or give this job another MASTER_PORT)",
                        world_, (unsigned)w);
        if (their_job != job_)
            return strf("this rank belongs to job \"%s\", rank 0 to job \"%s\": give each job its own MASTER_PORT (or "
                        "the same LONGNET_JOB_ID to every rank of one job)",
                        their_job.c_str(), job_.c_str());
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
        const std::string ok = rdzv_reply(kRdzvOk, world_, blob, bytes_);
        for (int r = 1; r < world_; r++)
            if (!rdzv_send_all(held_[r], ok.data(), ok.size(), deadline))
                fatal("rank 0: rank %d (from %s) went away during the rendezvous: %s", r, from_[r].c_str(), std::strerror(errno));
        for (int r = 1; r < world_; r++) ::shutdown(held_[r], SHUT_WR);
    }

    void close_all() {
        for (Pending& p : pending_)
            if (p.fd >= 0) ::close(p.fd), p.fd = -1;
        for (int& fd : held_)
            if (fd >= 0) ::close(fd), fd = -1;
        if (lfd_ >= 0) ::close(lfd_), lfd_ = -1;
    }
};

inline void rendezvous_tcp_serve(const void* blob, size_t bytes, int world, double timeout_s) {
    RendezvousServer(bytes, world).serve(blob, timeout_s);
}

// Every other rank: connects to rank 0 (retrying until it listens), says who it is, takes the blob.
inline void rendezvous_tcp_fetch(void* blob, size_t bytes, int rank, int world, double timeout_s) {
    const RendezvousAddress a = rendezvous_tcp_address();
    const std::string job = rendezvous_job_id();
    std::string hello(kRdzvMagic, 8);
    for (uint32_t v : {(uint32_t)kRdzvVersion, (uint32_t)world, (uint32_t)rank, (uint32_t)bytes, (uint32_t)job.size()})
        rdzv_put32(hello, v);
    hello += job;
    const std::string port = std::to_string(a.port);
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
        addrinfo hints{}, *res = nullptr;
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        const int g = ::getaddrinfo(a.host.c_str(), port.c_str(), &hints, &res);
        if (g != 0) {
            last = std::string("cannot resolve MASTER_ADDR=") + a.host + " (" + ::gai_strerror(g) + ")";
            continue;
        }
        int fd = -1;
        for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
            fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
            if (fd < 0) {
                last = std::string("socket: ") + std::strerror(errno);
                continue;
            }
            rdzv_nonblocking(fd);
            int err = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
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
                last = std::string("connect: ") + std::strerror(err);
                ::close(fd), fd = -1;
            }
        }
        ::freeaddrinfo(res);
        if (fd < 0) continue;
        // Connected: rank 0 answers once every rank arrived, or when it gives up at its own
        // time-out, which ends before ours (it listened before we connected).
        const double answer_by = rdzv_now() + timeout_s + 5;
        char head[kRdzvReplyBytes];
        const bool sent = rdzv_send_all(fd, hello.data(), hello.size(), answer_by);
        const int got = sent ? rdzv_recv_all(fd, head, sizeof head, answer_by) : -1;
        if (got != 1) {
            const bool timed_out = got < 0 && errno == ETIMEDOUT;
            last = got == 0 ? std::string("the connection was closed without an answer (another program on the port?)")
                            : std::string("connection lost: ") + std::strerror(errno);
            ::close(fd);
            if (timed_out)
                fatal("rank %d: rank 0 at %s:%d (%s) took the connection but did not answer within %.0f s: is rank 0 "
                      "stopped, or is another program listening there?",
                      rank, a.host.c_str(), a.port, a.port_text.c_str(), timeout_s + 5);
            continue;
        }
        if (std::memcmp(head, kRdzvMagic, 8) != 0) {
            ::close(fd);
            fatal("rank %d: what answers at %s:%d (%s) is not rank 0 of this program: MASTER_PORT is another "
                  "program's port; pick a free one",
                  rank, a.host.c_str(), a.port, a.port_text.c_str());
        }
        const uint32_t status = rdzv_get32(head + 8), n = rdzv_get32(head + 16);
        if (status == kRdzvOk ? n != bytes : n > kRdzvMaxText) {
            ::close(fd);
            fatal("rank %d: rank 0 at %s:%d sent %u bytes, this rank expects %zu: run the same binary on every rank",
                  rank, a.host.c_str(), a.port, (unsigned)n, bytes);
        }
        std::string payload(n, '\0');
        const int body = n ? rdzv_recv_all(fd, &payload[0], n, answer_by) : 1;
        ::close(fd);
        if (body != 1) {
            last = "the connection was lost during rank 0's answer";
            continue;
        }
        if (status == kRdzvOk) {
            std::memcpy(blob, payload.data(), bytes);
            return;
        }
        if (status == kRdzvRefused)
            fatal("rank %d: rank 0 at %s:%d refused this rank: %s", rank, a.host.c_str(), a.port, payload.c_str());
        fatal("rank %d: rank 0 at %s:%d gave up: %s", rank, a.host.c_str(), a.port, payload.c_str());
    }
}

// Rank 0's `bytes` bytes at `blob` end up at `blob` on every rank (see the top of this file).
// Rank 0 of a file rendezvous removes the file once every rank is known to have read it
// (rendezvous_file_remove, after the communicator is up).
inline Rendezvous rendezvous_share(void* blob, size_t bytes, int rank, int world, double timeout_s) {
    Rendezvous how;
    if (world <= 1) return how.method = "single", how;
    const char* file = std::getenv("LONGNET_RENDEZVOUS");
    const bool addr = std::getenv("MASTER_ADDR"), port = std::getenv("MASTER_PORT");
    if (file && *file) {
        how.method = "file", how.where = file;
        if (rank == 0)
            rendezvous_file_write(how.where, blob, bytes, world);
        else
            rendezvous_file_read(how.where, blob, bytes, rank, world, timeout_s);
        return how;
    }
    if (!addr && !port)
        fatal("rank %d: neither MASTER_ADDR/MASTER_PORT nor LONGNET_RENDEZVOUS is set: %d ranks meet over TCP at "
              "rank 0's MASTER_ADDR:MASTER_PORT (torchrun sets them; export them before mpirun or srun) or through a "
              "file every rank sees, LONGNET_RENDEZVOUS=/shared/path/job-id (scripts/launch.sh sets it)",
              rank, world);
    const RendezvousAddress a = rendezvous_tcp_address();
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
