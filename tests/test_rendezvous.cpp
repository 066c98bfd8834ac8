// The launcher mapping and the rendezvous of comm/rendezvous.h on the CPU, with real processes:
// P = 2, 3, 4 forked ranks under each launcher's variables (torchrun, Open MPI, MPICH, srun) meet
// over TCP (MASTER_ADDR/MASTER_PORT on 127.0.0.1, free ports) and through a file
// (LONGNET_RENDEZVOUS), and every rank must hold rank 0's 128 bytes. Then the failures, each one
// line within the time-out: a rank that never arrives (rank 0 names it), rank 0 absent (the ranks
// name ADDR:PORT), another world size or job refused, a taken port, something else on the port, a
// partial environment. And what no stranger may do (docs/ring.md, "Threat model"): SHA-256 and
// HMAC against their published vectors; the job's secret (its sources, a readable secret file
// refused); where rank 0 listens and when a secret is required; a wrong secret refused and a
// stranger told nothing but "refused"; another user's connection closed on loopback; a crowd of
// connections under `ulimit -n 40`; the file's refusals (a user's file, symlinks, a FIFO, an
// earlier job's file, an open folder), each beside its accepted control.
//   build/test_rendezvous           all checks; "N passed, M failed"
//   build/test_rendezvous --fuzz [ROUNDS]   rank 0 in this process, 2 real ranks beside 240
//                                   hostile clients a round (garbage, truncation, huge fields,
//                                   wrong secret, replayed HMAC, silent, slow, wrong version): the
//                                   ranks meet within the time-out and no stranger gets the blob
//   build/test_rendezvous --probe   one rank from the environment (for real launchers,
//                                   tests/test_launch.sh): prints "probe rank R of W local L
//                                   launcher NAME via METHOD blob HEX", exit 1 on an error line
//   build/test_rendezvous --free-port   prints a port free on 127.0.0.1 now (for the launchers' tests)
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include "comm/rendezvous.h"
#include "tests/check.h"

using Env = std::map<std::string, std::string>;
static const size_t kBlob = 128;  // an ncclUniqueId

// Every variable the code under test reads, cleared in each rank before its own are set.
static const char* const kAllVars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "MASTER_ADDR", "MASTER_PORT",
    "LONGNET_RENDEZVOUS", "LONGNET_JOB_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "PMIX_NAMESPACE",
    "SLURM_JOB_ID", "SLURM_STEP_ID", "LONGNET_COMM_TIMEOUT_S", "LONGNET_RDZV_SECRET", "LONGNET_RDZV_SECRET_FILE"};

static void set_env(const Env& env) {
    for (const char* v : kAllVars) unsetenv(v);
    for (const auto& kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
}

static std::string hex(const unsigned char* p, size_t n) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; i++) s += d[p[i] >> 4], s += d[p[i] & 15];
    return s;
}

// One rank: the mapping, the rendezvous, one line on stdout (errors: guarded_main's line).
static int probe() {
    return guarded_main([] {
        const LauncherRanks me = launcher_ranks_from_env();
        unsigned char blob[kBlob] = {};
        if (me.rank == 0) {  // what no other rank can guess
            uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)(rdzv_now() * 1e9);
            for (unsigned char& b : blob) x = x * 6364136223846793005ull + 1442695040888963407ull, b = (unsigned char)(x >> 56);
        }
        const Rendezvous how = rendezvous_share(blob, kBlob, me.rank, me.world, comm_timeout_from_env());
        std::printf("probe rank %d of %d local %d launcher %s via %s blob %s\n", me.rank, me.world, me.local_rank,
                    me.launcher, how.method.c_str(), hex(blob, kBlob).c_str());
        std::fflush(stdout);
        return 0;
    });
}

struct RankRun {
    int code = -1;
    double seconds = 0;
    std::string out;  // stdout and stderr together
    std::string blob() const {
        const size_t at = out.find(" blob ");
        return at == std::string::npos ? "" : out.substr(at + 6, 2 * kBlob);
    }
    std::string error() const {
        const size_t at = out.find("error: ");
        if (at == std::string::npos) return "";
        return out.substr(at, out.find('\n', at) - at);
    }
};

// Starts one process per env (after delay_s[i] seconds), each running probe(); waits at most
// limit_s for all, killing what is left (a hang is a failure, never a stuck test).
static std::vector<RankRun> run_ranks(const std::vector<Env>& envs, double limit_s,
                                      const std::vector<double>& delay_s = {}) {
    std::fflush(stdout);
    const size_t n = envs.size();
    std::vector<RankRun> runs(n);
    std::vector<pid_t> pids(n, -1);
    std::vector<int> fds(n, -1);
    const double t0 = rdzv_now();
    for (size_t i = 0; i < n; i++) {
        int p[2];
        if (pipe(p) != 0) return runs;
        const pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            dup2(p[1], 1), dup2(p[1], 2);
            if (i < delay_s.size() && delay_s[i] > 0) rdzv_sleep(delay_s[i]);
            set_env(envs[i]);
            _exit(probe());
        }
        close(p[1]);
        pids[i] = pid, fds[i] = p[0];
    }
    size_t open_fds = n;
    while (open_fds > 0 && rdzv_now() - t0 < limit_s) {
        std::vector<pollfd> pf;
        std::vector<size_t> who;
        for (size_t i = 0; i < n; i++)
            if (fds[i] >= 0) pf.push_back({fds[i], POLLIN, 0}), who.push_back(i);
        poll(pf.data(), pf.size(), 100);
        for (size_t k = 0; k < pf.size(); k++) {
            if (!pf[k].revents) continue;
            char buf[4096];
            const ssize_t got = read(pf[k].fd, buf, sizeof buf);
            if (got > 0) {
                runs[who[k]].out.append(buf, (size_t)got);
            } else {
                close(pf[k].fd), fds[who[k]] = -1, open_fds--;
                runs[who[k]].seconds = rdzv_now() - t0;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (fds[i] >= 0) {
            kill(pids[i], SIGKILL), close(fds[i]);
            runs[i].out += "(killed: still running after " + std::to_string((int)limit_s) + " s)";
            runs[i].seconds = rdzv_now() - t0;
        }
        int status = 0;
        waitpid(pids[i], &status, 0);
        runs[i].code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return runs;
}

static int free_port() {  // the kernel's pick of a free port, released again
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (sockaddr*)&a, sizeof a) != 0 || getsockname(fd, (sockaddr*)&a, &len) != 0) {
        if (fd >= 0) close(fd);
        return 0;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int listen_on(int port) {  // a socket listening on 127.0.0.1:port, or -1
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (bind(fd, (sockaddr*)&a, sizeof a) != 0 || listen(fd, 8) != 0) return close(fd), -1;
    return fd;
}

struct Family {
    const char *name, *rank, *size, *local;
};
static const Family kFamilies[] = {{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
                                   {"mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                    "OMPI_COMM_WORLD_LOCAL_RANK"},
                                   {"mpirun (MPICH, Intel MPI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
                                   {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}};

// The launcher's variables of rank r of P; `common` on top (the rendezvous, the time-out).
static Env rank_env(const Family& f, int r, int P, const Env& common) {
    Env e = common;
    e[f.rank] = std::to_string(r), e[f.size] = std::to_string(P), e[f.local] = std::to_string(r);
    return e;
}
static std::vector<Env> world_envs(const Family& f, int P, const Env& common) {
    std::vector<Env> envs;
    for (int r = 0; r < P; r++) envs.push_back(rank_env(f, r, P, common));
    return envs;
}
static Env tcp(int port, const char* addr = "127.0.0.1") {
    return {{"MASTER_ADDR", addr}, {"MASTER_PORT", std::to_string(port)}, {"LONGNET_COMM_TIMEOUT_S", "10"}};
}

// A secret for the tests (a job's own is random: scripts/launch.sh).
static const char* const kSecret = "0123456789abcdef-test-secret";

// The client side of the protocol, taken apart, for hostile peers: connect, read the challenge,
// send whatever, read whatever comes back.
static int connect_local(int port, uint32_t addr = htonl(INADDR_LOOPBACK)) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET, a.sin_addr.s_addr = addr, a.sin_port = htons((uint16_t)port);
    if (fd >= 0 && connect(fd, (sockaddr*)&a, sizeof a) == 0) return rdzv_nonblocking(fd), fd;  // reads keep to their deadlines
    if (fd >= 0) close(fd);
    return -1;
}
// Every byte the peer sends until it closes or `seconds` pass.
static std::string read_until_closed(int fd, double seconds) {
    std::string got;
    const double until = rdzv_now() + seconds;
    char buf[4096];
    while (rdzv_now() < until) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, rdzv_ms_left(until)) <= 0) continue;
        const ssize_t k = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k > 0) got.append(buf, (size_t)k);
        else if (k == 0 || (errno != EAGAIN && errno != EINTR)) break;
    }
    return got;
}
static std::string hello_bytes(const std::string& key, const unsigned char* server_nonce, uint32_t world, uint32_t rank,
                               uint32_t bytes, const std::string& job) {
    std::string hello(kRdzvMagic, 8);
    for (uint32_t v : {(uint32_t)kRdzvVersion, world, rank, bytes, (uint32_t)job.size()}) rdzv_put32(hello, v);
    unsigned char nonce[kRdzvNonce];
    rdzv_random(nonce, sizeof nonce);
    const Sha256Digest mac = rdzv_hello_mac(key, server_nonce, hello.data(), nonce, job);
    return hello.append((const char*)nonce, sizeof nonce).append((const char*)mac.data(), mac.size()).append(job);
}
struct HostileReply {
    bool connected = false, challenged = false;
    int status = -1;  // the reply's status, -1: none came
    uint32_t world = 0;
    std::string all;  // every byte after the hello
};
static HostileReply parse_reply(HostileReply r) {
    if (r.all.size() >= kRdzvReplyBytes && std::memcmp(r.all.data(), kRdzvMagic, 8) == 0)
        r.status = (int)rdzv_get32(r.all.data() + 8), r.world = rdzv_get32(r.all.data() + 12);
    return r;
}
// A hello for `rank` of `world` under `key` (right or wrong), as a rank sends it.
static HostileReply hostile_hello(int port, const std::string& key, uint32_t world, uint32_t rank, uint32_t bytes,
                                  const std::string& job, double seconds) {
    HostileReply r;
    const int fd = connect_local(port);
    if (fd < 0) return r;
    r.connected = true;
    char challenge[kRdzvChallengeBytes];
    if (rdzv_recv_all(fd, challenge, sizeof challenge, rdzv_now() + seconds) == 1 && std::memcmp(challenge, kRdzvMagic, 8) == 0) {
        r.challenged = true;
        const std::string hello = hello_bytes(key, (const unsigned char*)challenge + 12, world, rank, bytes, job);
        rdzv_send_all(fd, hello.data(), hello.size(), rdzv_now() + 1);
        r.all = read_until_closed(fd, seconds);
    }
    close(fd);
    return parse_reply(r);
}

// Every rank exited 0, said which rank it is, and holds rank 0's blob.
static bool all_met(const std::vector<RankRun>& runs, const Family& f, const char* method, std::string* detail) {
    const std::string blob0 = runs.empty() ? "" : runs[0].blob();
    const int P = (int)runs.size();
    for (int r = 0; r < P; r++) {
        const std::string want = strf("probe rank %d of %d local %d launcher %s via %s blob ", r, P, r, f.name, method);
        if (runs[r].code != 0 || runs[r].out.find(want) == std::string::npos || runs[r].blob() != blob0 ||
            blob0.size() != 2 * kBlob || blob0 == std::string(2 * kBlob, '0')) {
            *detail = strf("rank %d (exit %d): %s", r, runs[r].code, runs[r].out.c_str());
            return false;
        }
    }
    double slowest = 0;
    for (const RankRun& run : runs) slowest = std::max(slowest, run.seconds);
    *detail = strf("blob %.16s... on all %d ranks in %.2f s", blob0.c_str(), P, slowest);
    return true;
}

static void meet_checks() {
    char dir[] = "/tmp/test_rendezvous.XXXXXX";
    if (!mkdtemp(dir)) {
        check(false, "mkdtemp");
        return;
    }
    for (const Family& f : kFamilies)
        for (int P = 2; P <= 4; P++) {
            std::string detail;
            const int port = free_port();
            check(all_met(run_ranks(world_envs(f, P, tcp(port)), 20), f, "tcp", &detail),
                  strf("%s, %d ranks meet over TCP at 127.0.0.1:%d", f.name, P, port), detail);
            const std::string file = strf("%s/%s-%d", dir, f.size, P);
            const Env by_file = {{"LONGNET_RENDEZVOUS", file}, {"LONGNET_COMM_TIMEOUT_S", "10"}};
            check(all_met(run_ranks(world_envs(f, P, by_file), 20), f, "file", &detail),
                  strf("%s, %d ranks meet through the file LONGNET_RENDEZVOUS", f.name, P), detail);
            ::unlink(file.c_str());
        }
    const Family& torchrun = kFamilies[0];
    std::string detail;
    {  // rank 0 last: the others retry until it listens
        const int port = free_port();
        check(all_met(run_ranks(world_envs(torchrun, 3, tcp(port)), 20, {0.8, 0, 0}), torchrun, "tcp", &detail),
              "ranks started 0.8 s before rank 0 retry until it listens", detail);
    }
    {  // a host name, resolved
        const int port = free_port();
        check(all_met(run_ranks(world_envs(torchrun, 2, tcp(port, "localhost")), 20), torchrun, "tcp", &detail),
              "MASTER_ADDR=localhost (a name) is resolved", detail);
    }
    {  // both set: the file wins (MASTER_PORT points nowhere)
        Env both = tcp(free_port());
        both["LONGNET_RENDEZVOUS"] = std::string(dir) + "/both";
        check(all_met(run_ranks(world_envs(torchrun, 2, both), 20), torchrun, "file", &detail),
              "LONGNET_RENDEZVOUS wins over MASTER_ADDR/MASTER_PORT", detail);
        ::unlink((std::string(dir) + "/both").c_str());
    }
    {  // torchrun's agent store holds MASTER_PORT: rank 0 listens on the next port
        int port = 0, held = -1;
        for (int tries = 0; tries < 20 && held < 0; tries++) {
            port = free_port();
            held = listen_on(port);
            const int next = held >= 0 ? listen_on(port + 1) : -1;  // is port + 1 free too?
            if (next >= 0) close(next);
            else if (held >= 0) close(held), held = -1;
        }
        Env agent = tcp(port);
        agent["TORCHELASTIC_USE_AGENT_STORE"] = "True";
        check(held >= 0 && all_met(run_ranks(world_envs(torchrun, 2, agent), 20), torchrun, "tcp", &detail),
              "under torchrun's agent store (it holds MASTER_PORT) the ranks meet on MASTER_PORT + 1", detail);
        if (held >= 0) close(held);
    }
    {  // the same job id on every rank is fine
        Env job = tcp(free_port());
        job["TORCHELASTIC_RUN_ID"] = "job-7";
        check(all_met(run_ranks(world_envs(torchrun, 3, job), 20), torchrun, "tcp", &detail),
              "ranks of one job (TORCHELASTIC_RUN_ID) meet", detail);
    }
    rmdir(dir);
}

// A run of ranks that must fail: want[i] holds what rank i's one error line must contain ({}: no
// check); every rank with an error line must have exited 1, all within limit_s.
static void expect_errors(const std::string& name, const std::vector<RankRun>& runs,
                          const std::vector<std::vector<std::string>>& want, double limit_s) {
    std::string detail;
    bool ok = true;
    for (size_t i = 0; i < runs.size() && i < want.size(); i++) {
        if (want[i].empty()) continue;
        const std::string line = runs[i].error();
        const bool one_line = runs[i].out.find('\n') == runs[i].out.size() - 1;
        if (runs[i].code != 1 || line.empty() || !one_line || !contains_all(line, want[i]) || runs[i].seconds > limit_s) {
            ok = false;
            detail += strf("[process %zu: exit %d after %.1f s: %s] ", i, runs[i].code, runs[i].seconds,
                           runs[i].out.c_str());
        } else {
            detail += strf("[%.1f s: %s] ", runs[i].seconds, line.c_str());
        }
    }
    check(ok, name, detail);
}

static void failure_checks() {
    const Family& torchrun = kFamilies[0];
    auto short_tcp = [](int port, const char* timeout) {
        Env e = tcp(port);
        e["LONGNET_COMM_TIMEOUT_S"] = timeout;
        return e;
    };
    {  // rank 2 of 3 never starts
        const int port = free_port();
        std::vector<Env> envs = world_envs(torchrun, 3, short_tcp(port, "2"));
        envs.pop_back();
        expect_errors("a rank that never arrives: rank 0 names it within the time-out, and tells the ranks that came",
                      run_ranks(envs, 15),
                      {{"rank 0: waited 2.0 s", "for rank 2 of 3 to arrive", strf("port %d", port)},
                       {"rank 1: rank 0 at 127.0.0.1", "gave up", "rank 2 of 3"}},
                      5);
    }
    {  // ranks 1 and 3 of 4 never start
        const int port = free_port();
        std::vector<Env> envs = world_envs(kFamilies[2], 4, short_tcp(port, "2"));
        envs = {envs[0], envs[2]};
        expect_errors("two missing ranks of 4 (MPICH's variables) are both named", run_ranks(envs, 15),
                      {{"for ranks 1, 3 of 4 to arrive"}, {"gave up", "ranks 1, 3 of 4"}}, 5);
    }
    {  // rank 0 never starts
        const int port = free_port();
        std::vector<Env> envs = world_envs(torchrun, 3, short_tcp(port, "1.5"));
        envs.erase(envs.begin());
        const std::string where = strf("127.0.0.1:%d", port);
        expect_errors("rank 0 absent: every rank names ADDR:PORT within the time-out", run_ranks(envs, 15),
                      {{"rank 1: rank 0 is unreachable at " + where, "MASTER_ADDR"},
                       {"rank 2: rank 0 is unreachable at " + where, "MASTER_ADDR"}},
                      4);
    }
    {  // a rank started for another world size
        const int port = free_port();
        std::vector<Env> envs = {rank_env(torchrun, 0, 2, short_tcp(port, "2")),
                                 rank_env(torchrun, 1, 3, short_tcp(port, "2"))};
        expect_errors("a rank of another world size is refused, and rank 0 says so", run_ranks(envs, 15),
                      {{"rank 0: waited", "rank 1 of 2", "refused rank 1"},
                       {"rank 1: rank 0 at", "refused this rank", "a job of 2 ranks", "started for 3"}},
                      5);
    }
    {  // a rank of another job
        const int port = free_port();
        Env a = short_tcp(port, "2"), b = short_tcp(port, "2");
        a["TORCHELASTIC_RUN_ID"] = "job-a", b["TORCHELASTIC_RUN_ID"] = "job-b";
        std::vector<Env> envs = {rank_env(torchrun, 0, 2, a), rank_env(torchrun, 1, 2, b)};
        expect_errors("a rank of another job is refused", run_ranks(envs, 15),
                      {{"rank 0: waited"}, {"refused this rank", "job-b", "job-a", "MASTER_PORT"}}, 5);
    }
    {  // two processes claim rank 1
        const int port = free_port();
        std::vector<Env> envs = world_envs(torchrun, 3, short_tcp(port, "2"));
        envs[2] = envs[1];
        const std::vector<RankRun> runs = run_ranks(envs, 15, {0, 0, 0.3});
        expect_errors("two processes with the same rank: the second is refused, rank 0 names the one missing", runs,
                      {{"rank 2 of 3", "two processes have the same rank"},
                       {},
                       {"refused this rank", "rank 1 already arrived", "two processes have the same rank"}},
                      5);
    }
    {  // a hello naming rank 2^32 - 1 (or 2^31), from a process that holds the secret: refused, and the
       // job still meets
        const int port = free_port();
        std::atomic<int> refused{0};
        std::thread stranger([port, &refused] {
            for (uint32_t bad : {0xFFFFFFFFu, 0x80000000u}) {
                for (int tries = 0; tries < 100; tries++) {  // until rank 0 listens
                    const HostileReply got = hostile_hello(port, kSecret, 2, bad, kBlob, "", 2);
                    if (!got.connected) {
                        rdzv_sleep(0.02);
                        continue;
                    }
                    if (got.status == (int)kRdzvRefused) refused++;
                    break;
                }
            }
        });
        std::string detail;
        Env env = short_tcp(port, "5");
        env["LONGNET_RDZV_SECRET"] = kSecret;
        const bool met = all_met(run_ranks(world_envs(torchrun, 2, env), 15, {0, 0.6}), torchrun, "tcp", &detail);
        stranger.join();
        check(met && refused == 2, "a hello naming rank 2^32 - 1 or 2^31 is refused (no crash), and the real ranks meet after it",
              detail + strf(" (%d of 2 refused)", refused.load()));
    }
    {  // the port is taken
        const int port = free_port();
        const int held = listen_on(port);
        std::vector<Env> envs = {rank_env(torchrun, 0, 2, short_tcp(port, "5"))};
        expect_errors("a taken MASTER_PORT: rank 0 says so at once", run_ranks(envs, 15),
                      {{strf("rank 0: port %d on this host is taken", port), "pick another MASTER_PORT"}}, 2);
        if (held >= 0) close(held);
    }
    {  // something else answers on the port
        const int port = free_port();
        const int lfd = listen_on(port);
        std::thread other([lfd] {
            for (int i = 0; i < 2; i++) {
                pollfd pf{lfd, POLLIN, 0};
                if (poll(&pf, 1, 10000) != 1) return;
                const int fd = accept(lfd, nullptr, nullptr);
                const char reply[] = "HTTP/1.0 400 Bad Request\r\n\r\n";
                if (fd >= 0) (void)!write(fd, reply, sizeof reply - 1), rdzv_sleep(0.2), close(fd);
            }
        });
        std::vector<Env> envs = {rank_env(torchrun, 1, 2, short_tcp(port, "5"))};
        expect_errors("another program on MASTER_PORT: the rank says it is not rank 0", run_ranks(envs, 15),
                      {{strf("127.0.0.1:%d", port), "is not rank 0 of this program", "pick a free one"}}, 3);
        shutdown(lfd, SHUT_RDWR);
        other.join();
        close(lfd);
    }
    {  // the time-out of a silent rank 0 (took the connection, never answers): a listener that
       // never accepts holds the connection in its backlog
        const int port = free_port();
        const int lfd = listen_on(port);
        std::vector<Env> envs = {rank_env(torchrun, 1, 2, short_tcp(port, "1"))};
        expect_errors("rank 0 stopped (connection taken, no answer): the rank gives up naming ADDR:PORT",
                      run_ranks(envs, 20), {{strf("127.0.0.1:%d", port), "did not answer within 6 s"}}, 9);
        close(lfd);
    }
}

// The environment alone, in this process (one-line errors; nothing to wait for).
static void env_checks() {
    auto ranks_of = [](const Env& env) {
        set_env(env);
        const LauncherRanks r = launcher_ranks_from_env();
        return strf("%d/%d/%d %s", r.rank, r.world, r.local_rank, r.launcher);
    };
    struct Case {
        Env env;
        std::string want;
    };
    const Case accepted[] = {
        {{}, "0/1/0 none"},
        {{{"WORLD_SIZE", "1"}}, "0/1/0 torchrun"},
        {{{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}}, "3/8/1 torchrun"},
        {{{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "6"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}},
         "5/6/2 mpirun (Open MPI)"},
        {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}}, "1/2/0 mpirun (MPICH, Intel MPI)"},
        {{{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"}}, "7/16/3 srun"},
        // srun or mpirun starting torchrun (one agent per node): torchrun's ranks
        {{{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
          {"SLURM_LOCALID", "0"}},
         "5/8/1 torchrun"},
        // mpirun inside an sbatch script: mpirun's ranks, not the batch step's
        {{{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
          {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}},
         "2/4/2 mpirun (Open MPI)"},
        {{{"SLURM_PROCID", "0"}}, "0/1/0 none"},  // Slurm's variables without a task count: one rank
    };
    for (const Case& c : accepted) {
        std::string got;
        try {
            got = ranks_of(c.env);
        } catch (const FatalError& e) {
            got = std::string("error: ") + e.what();
        }
        std::string vars;
        for (const auto& kv : c.env) vars += kv.first + "=" + kv.second + " ";
        check(got == c.want, "launcher mapping: " + (vars.empty() ? std::string("(no launcher) ") : vars) + "-> " + c.want,
              got);
    }
    struct Bad {
        Env env;
        std::vector<std::string> want;
    };
    const Bad refused[] = {
        {{{"RANK", "1"}}, {"RANK is set but WORLD_SIZE is not", "torchrun"}},
        {{{"OMPI_COMM_WORLD_RANK", "0"}}, {"OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"}},
        {{{"PMI_RANK", "0"}}, {"PMI_RANK is set but PMI_SIZE is not"}},
        {{{"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}, {"WORLD_SIZE=2 is set but RANK is not"}},
        {{{"RANK", "1"}, {"WORLD_SIZE", "2"}}, {"LOCAL_RANK is not set", "which GPU"}},
        {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}, {"MPI_LOCALRANKID is not set"}},
        {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}, {"RANK=2 is outside WORLD_SIZE=2"}},
        {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, {"WORLD_SIZE=0", "at least 1 rank"}},
        {{{"RANK", "0"}, {"WORLD_SIZE", "two"}, {"LOCAL_RANK", "0"}}, {"WORLD_SIZE=\"two\" is not a whole number"}},
        {{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "-1"}}, {"SLURM_LOCALID=\"-1\""}},
        {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "4"}}, {"LOCAL_RANK=4 is not below WORLD_SIZE=4"}},
        {{{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
         {"LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"}},
    };
    for (const Bad& b : refused) {
        std::string vars;
        for (const auto& kv : b.env) vars += kv.first + "=" + kv.second + " ";
        expect_fatal("refused: " + vars, [&] { ranks_of(b.env); }, b.want);
    }

    unsigned char blob[kBlob] = {};
    auto share_as_rank1 = [&](const Env& env) {
        set_env(env);
        rendezvous_share(blob, kBlob, 1, 2, 0.2);
    };
    expect_fatal("2 ranks with no rendezvous: the line names MASTER_ADDR/MASTER_PORT and LONGNET_RENDEZVOUS",
                 [&] { share_as_rank1({}); }, {"MASTER_ADDR/MASTER_PORT", "torchrun sets them", "LONGNET_RENDEZVOUS"});
    expect_fatal("MASTER_ADDR without MASTER_PORT", [&] { share_as_rank1({{"MASTER_ADDR", "127.0.0.1"}}); },
                 {"MASTER_ADDR is set but MASTER_PORT is not", "set both"});
    expect_fatal("MASTER_PORT without MASTER_ADDR", [&] { share_as_rank1({{"MASTER_PORT", "29500"}}); },
                 {"MASTER_PORT is set but MASTER_ADDR is not"});
    expect_fatal("MASTER_PORT=70000", [&] { share_as_rank1({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}); },
                 {"MASTER_PORT=\"70000\" is not a whole number from 1 to 65535"});
    expect_fatal("LONGNET_COMM_TIMEOUT_S=0", [&] { set_env({{"LONGNET_COMM_TIMEOUT_S", "0"}}), comm_timeout_from_env(); },
                 {"LONGNET_COMM_TIMEOUT_S=\"0\" is not a number of seconds from 1"});
    set_env({});
    check(comm_timeout_from_env() == 45, "LONGNET_COMM_TIMEOUT_S unset: 45 s");

    // The file: a stale one of another world size fails at once; rank 0 absent times out.
    char path[] = "/tmp/test_rendezvous_file.XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    unlink(path);
    const RendezvousSecret none;
    rendezvous_file_write(path, blob, kBlob, 3, none, "");
    const double t0 = rdzv_now();
    expect_fatal("a rendezvous file of a 3-rank job, read by a 2-rank job, fails at once",
                 [&] { rendezvous_file_read(path, blob, kBlob, 1, 2, 5, none, ""); }, {"written for 3 ranks, this job has 2"});
    check(rdzv_now() - t0 < 1, "... without waiting for the time-out");
    unlink(path);
    expect_fatal("no rendezvous file within the time-out names the file and LONGNET_RENDEZVOUS",
                 [&] {
                     set_env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}});
                     rendezvous_file_read(path, blob, kBlob, 1, 2, 0.3, none, "");
                 },
                 {"rank 1: waited", path, "LONGNET_RENDEZVOUS", "unset it to meet over TCP"});
    set_env({});
}

// ------------------------------------------------------------------------------------------------
// SHA-256 and HMAC (core/sha256.h) against the published vectors.

static std::string hexd(const Sha256Digest& d) { return hex(d.data(), d.size()); }

static void sha_checks() {
    const std::string million(1000000, 'a');
    const struct {
        std::string msg, want;
    } fips[] = {
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {million, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    for (const auto& v : fips) {
        const std::string got = hexd(sha256(v.msg.data(), v.msg.size()));
        check(got == v.want, strf("SHA-256 of %zu bytes (FIPS 180-4 example)", v.msg.size()), got);
    }
    // Every padding case (lengths 0..130 cross the 55/56/64-byte boundaries), each fed in pieces.
    Sha256 all;
    for (size_t n = 0; n <= 130; n++) {
        Sha256 piecewise;
        const std::string a(n, 'a');
        for (size_t at = 0; at < n; at += 7) piecewise.update(a.data() + at, std::min<size_t>(7, n - at));
        const std::string d = hexd(piecewise.digest());
        if (d != hexd(sha256(a.data(), n))) check(false, strf("SHA-256 in pieces of %zu bytes", n));
        all.update(d);
    }
    check(hexd(all.digest()) == "5eee4c50e1b5ec4f1a47f34c25ca988850b49da7904f5ab1b3abc5cc0ae66ef9",
          "SHA-256 of 'a' x 0..130, fed 7 bytes at a time (digests agree with Python's hashlib)");
    const std::string aa131(131, '\xaa');
    std::string k4;
    for (int i = 1; i <= 25; i++) k4 += (char)i;
    const struct {
        std::string key, msg, want;
    } rfc[] = {
        {std::string(20, '\x0b'), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {std::string(20, '\xaa'), std::string(50, '\xdd'), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {k4, std::string(50, '\xcd'), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {aa131, "Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {aa131,
         "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
         "hashed before being used by the HMAC algorithm.",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        const std::string got = hexd(hmac_sha256(rfc[i].key.data(), rfc[i].key.size(), rfc[i].msg.data(), rfc[i].msg.size()));
        check(got == rfc[i].want, strf("HMAC-SHA256, RFC 4231 test case %d", (int)(i < 4 ? i + 1 : i + 2)), got);
    }
    Sha256Digest a = sha256("x", 1), b = a;
    const bool same = digest_equal(a.data(), b.data());
    b[31] ^= 1;
    check(same && !digest_equal(a.data(), b.data()), "digest_equal: equal digests match, one bit off does not");
}

// ------------------------------------------------------------------------------------------------
// The secret, the environment's numbers, where rank 0 listens (in this process).

static std::string write_file(const std::string& path, const std::string& text, mode_t mode) {
    unlink(path.c_str());
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) (void)!write(fd, text.data(), text.size()), close(fd);
    chmod(path.c_str(), mode);
    return path;
}
static std::string read_file(const std::string& path) {
    std::string s;
    const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK);
    char buf[4096];
    ssize_t k;
    while (fd >= 0 && (k = read(fd, buf, sizeof buf)) > 0) s.append(buf, (size_t)k);
    if (fd >= 0) close(fd);
    return s;
}

static void secret_checks(const std::string& dir) {
    auto secret_of = [](const Env& env) {
        set_env(env);
        return rendezvous_secret();
    };
    RendezvousSecret s = secret_of({{"LONGNET_RDZV_SECRET", kSecret}});
    check(s.key == kSecret && s.from == "LONGNET_RDZV_SECRET", "LONGNET_RDZV_SECRET is the job's secret", s.from);
    check(secret_of({}).key.empty(), "no secret set: none");
    expect_fatal("LONGNET_RDZV_SECRET of 5 bytes is refused", [&] { secret_of({{"LONGNET_RDZV_SECRET", "short"}}); },
                 {"LONGNET_RDZV_SECRET holds 5 bytes", "16 to 4096", "scripts/launch.sh"});
    const std::string file = write_file(dir + "/secret", std::string(kSecret) + "\n", 0600);
    s = secret_of({{"LONGNET_RDZV_SECRET_FILE", file}});
    check(s.key == kSecret, "LONGNET_RDZV_SECRET_FILE of mode 600: its contents, without the final newline", s.from);
    expect_fatal("both LONGNET_RDZV_SECRET and LONGNET_RDZV_SECRET_FILE: refused",
                 [&] { secret_of({{"LONGNET_RDZV_SECRET", kSecret}, {"LONGNET_RDZV_SECRET_FILE", file}}); },
                 {"both LONGNET_RDZV_SECRET and LONGNET_RDZV_SECRET_FILE"});
    chmod(file.c_str(), 0640);
    expect_fatal("a group-readable LONGNET_RDZV_SECRET_FILE is refused", [&] { secret_of({{"LONGNET_RDZV_SECRET_FILE", file}}); },
                 {"LONGNET_RDZV_SECRET_FILE=" + file, "mode 640", "chmod 600"});
    chmod(file.c_str(), 0604);
    expect_fatal("an other-readable LONGNET_RDZV_SECRET_FILE is refused", [&] { secret_of({{"LONGNET_RDZV_SECRET_FILE", file}}); },
                 {"mode 604", "chmod 600"});
    const std::string fifo = dir + "/secret-fifo";
    mkfifo(fifo.c_str(), 0600);
    const double t0 = rdzv_now();
    expect_fatal("a FIFO as LONGNET_RDZV_SECRET_FILE is refused without blocking",
                 [&] { secret_of({{"LONGNET_RDZV_SECRET_FILE", fifo}}); }, {"not a regular file"});
    check(rdzv_now() - t0 < 1, "... at once");
    expect_fatal("a missing LONGNET_RDZV_SECRET_FILE", [&] { secret_of({{"LONGNET_RDZV_SECRET_FILE", dir + "/none"}}); },
                 {"cannot open LONGNET_RDZV_SECRET_FILE=", "No such file"});
    write_file(file, "tiny", 0600);
    expect_fatal("a LONGNET_RDZV_SECRET_FILE of 4 bytes", [&] { secret_of({{"LONGNET_RDZV_SECRET_FILE", file}}); },
                 {"holds 4 bytes"});
    set_env({});
}

static void strict_env_checks() {
    auto ranks_of = [](const Env& env) {
        set_env(env);
        return launcher_ranks_from_env();
    };
    for (const char* bad : {"+2", " 2", "2 ", "0x2", "2.0", "1e1", "99999999999999999999"})
        expect_fatal(strf("WORLD_SIZE=\"%s\" is refused (digits only)", bad),
                     [&] { ranks_of({{"RANK", "0"}, {"WORLD_SIZE", bad}, {"LOCAL_RANK", "0"}}); },
                     {strf("WORLD_SIZE=\"%s\" is not a whole number", bad)});
    expect_fatal("RANK=\"+1\" is refused", [&] { ranks_of({{"RANK", "+1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}); },
                 {"RANK=\"+1\" is not a whole number"});
    check(ranks_of({{"RANK", "1"}, {"WORLD_SIZE", "02"}, {"LOCAL_RANK", "1"}}).world == 2, "WORLD_SIZE=\"02\" (digits) is 2");
    expect_fatal("LOCAL_WORLD_SIZE above WORLD_SIZE is refused",
                 [&] { ranks_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "3"}}); },
                 {"LOCAL_WORLD_SIZE=3 is above WORLD_SIZE=2"});
    for (const char* bad : {"1e-300", "1e300", "0.5", "604801", "-5", "nan"})
        expect_fatal(strf("LONGNET_COMM_TIMEOUT_S=%s is refused", bad),
                     [&] { set_env({{"LONGNET_COMM_TIMEOUT_S", bad}}), comm_timeout_from_env(); },
                     {strf("LONGNET_COMM_TIMEOUT_S=\"%s\" is not a number of seconds from 1 to 604800", bad)});
    for (const char* good : {"1", "2.5", "604800"}) {
        set_env({{"LONGNET_COMM_TIMEOUT_S", good}});
        check(comm_timeout_from_env() == std::atof(good), strf("LONGNET_COMM_TIMEOUT_S=%s is accepted", good));
    }
    const LauncherRanks sbatch = ranks_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}});
    const std::string src = launcher_world_source(sbatch);
    check(sbatch.world == 4 && contains_all(src, {"SLURM_NTASKS=4", "srun", "sbatch", "unset SLURM_NTASKS"}),
          "a world size from SLURM_NTASKS is named with it, and the sbatch case explained", src);
    const std::string trun = launcher_world_source(ranks_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}));
    check(trun == "WORLD_SIZE=2, set by torchrun", "a world size from WORLD_SIZE is named with it", trun);
    set_env({});
}

// This host's first IPv4 address that is not loopback, or 0.
static uint32_t host_address() {
    ifaddrs* list = nullptr;
    uint32_t found = 0;
    if (getifaddrs(&list) != 0) return 0;
    for (ifaddrs* i = list; i && !found; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            const uint32_t a = ((sockaddr_in*)i->ifa_addr)->sin_addr.s_addr;
            if (!rdzv_loopback(a)) found = a;
        }
    freeifaddrs(list);
    return found;
}

// Where rank 0 listens, and when it needs a secret. 192.0.2.99 (TEST-NET-1) stands for an address
// of another host.
static void listen_checks() {
    const int port = free_port();
    const std::string p = std::to_string(port);
    auto listening = [&](const Env& env) {
        set_env(env);
        return RendezvousServer(kBlob, 2).listening_on();
    };
    check(listening({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", p}}) == "127.0.0.1:" + p,
          "MASTER_ADDR=127.0.0.1, no secret: rank 0 listens on 127.0.0.1 only");
    if (const uint32_t mine = host_address()) {  // what the socket does, not only what it says
        set_env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", p}});
        RendezvousServer server(kBlob, 2);
        const int lo = connect_local(port), other = connect_local(port, mine);
        check(lo >= 0 && other < 0, "... reachable at 127.0.0.1, not at this host's address " + rdzv_ip(mine));
        if (lo >= 0) close(lo);
        if (other >= 0) close(other);
    }
    check(listening({{"MASTER_ADDR", "localhost"}, {"MASTER_PORT", p}}) == "127.0.0.1:" + p,
          "MASTER_ADDR=localhost: rank 0 listens on 127.0.0.1 only");
    expect_fatal("MASTER_ADDR of another host, no secret: rank 0 refuses in one line naming LONGNET_RDZV_SECRET",
                 [&] { listening({{"MASTER_ADDR", "192.0.2.99"}, {"MASTER_PORT", p}}); },
                 {"rank 0: MASTER_ADDR=192.0.2.99 is not a loopback address and no LONGNET_RDZV_SECRET is set",
                  "could join this job", "scripts/launch.sh", "LONGNET_RDZV_SECRET_FILE"});
    const int again = listen_on(port);
    check(again >= 0, "... and leaves the port free (no descriptor left open)");
    if (again >= 0) close(again);
    check(listening({{"MASTER_ADDR", "192.0.2.99"}, {"MASTER_PORT", p}, {"LONGNET_RDZV_SECRET", kSecret}}) == "0.0.0.0:" + p,
          "MASTER_ADDR not this host's own, with a secret: rank 0 listens on all addresses (NAT, virtual addresses)");
    check(listening({{"MASTER_ADDR", "192.0.2.99"}, {"MASTER_PORT", p}, {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
                     {"LOCAL_WORLD_SIZE", "2"}}) == "127.0.0.1:" + p,
          "every rank on this host (LOCAL_WORLD_SIZE = WORLD_SIZE): loopback, no secret needed");
    if (const uint32_t mine = host_address()) {
        const std::string ip = rdzv_ip(mine);
        check(listening({{"MASTER_ADDR", ip}, {"MASTER_PORT", p}, {"LONGNET_RDZV_SECRET", kSecret}}) == ip + ":" + p,
              "MASTER_ADDR=" + ip + " (this host's): rank 0 listens on that address only");
        expect_fatal("MASTER_ADDR=" + ip + " without a secret: refused",
                     [&] { listening({{"MASTER_ADDR", ip}, {"MASTER_PORT", p}}); }, {"no LONGNET_RDZV_SECRET is set"});
    } else {
        std::printf("skipped: listening on this host's own address (it has no IPv4 address but loopback)\n");
    }
    set_env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", p}});
    for (int bad : {-1, 0, kRdzvMaxWorld + 1})
        expect_fatal(strf("rank 0 of a rendezvous of %d ranks: refused before any allocation", bad),
                     [&] { RendezvousServer(kBlob, bad); }, {strf("a rendezvous of %d ranks", bad), "is impossible"});
    std::vector<unsigned char> big(kRdzvMaxBlob + 1);
    expect_fatal("a blob of 64 KiB + 1 bytes: refused", [&] { rendezvous_share(big.data(), big.size(), 0, 2, 1); },
                 {"65537 bytes is impossible"});
    unsigned char blob[kBlob] = {};
    expect_fatal("a rank with MASTER_ADDR of another host and no secret refuses before connecting",
                 [&] {
                     set_env({{"MASTER_ADDR", "192.0.2.99"}, {"MASTER_PORT", p}});
                     rendezvous_tcp_fetch(blob, kBlob, 1, 2, 1);
                 },
                 {"rank 1: MASTER_ADDR=192.0.2.99 is not a loopback address and no LONGNET_RDZV_SECRET is set"});
    set_env({});
}

// ------------------------------------------------------------------------------------------------
// The secret over TCP, with forked ranks: ranks that share it meet; a rank with another is refused
// and told why; a stranger gets a fixed "refused" that says nothing about the job.

static void secret_meet_checks(const std::string& dir) {
    const Family& torchrun = kFamilies[0];
    std::string detail;
    {
        Env env = tcp(free_port());
        env["LONGNET_RDZV_SECRET"] = kSecret;
        check(all_met(run_ranks(world_envs(torchrun, 3, env), 20), torchrun, "tcp", &detail),
              "3 ranks with LONGNET_RDZV_SECRET meet over TCP", detail);
    }
    {
        const std::string file = write_file(dir + "/job-secret", "another-secret-of-this-job\n", 0600);
        Env env = tcp(free_port());
        env["LONGNET_RDZV_SECRET_FILE"] = file;
        check(all_met(run_ranks(world_envs(torchrun, 2, env), 20), torchrun, "tcp", &detail),
              "2 ranks with LONGNET_RDZV_SECRET_FILE meet over TCP", detail);
    }
    {
        const int port = free_port();
        Env a = tcp(port), b = tcp(port);
        a["LONGNET_COMM_TIMEOUT_S"] = b["LONGNET_COMM_TIMEOUT_S"] = "2";
        a["LONGNET_RDZV_SECRET"] = kSecret, b["LONGNET_RDZV_SECRET"] = "a-different-secret-altogether";
        expect_errors("a rank with another secret is refused naming LONGNET_RDZV_SECRET; rank 0 counts it",
                      run_ranks({rank_env(torchrun, 0, 2, a), rank_env(torchrun, 1, 2, b)}, 15),
                      {{"rank 0: waited", "rank 1 of 2", "did not prove the job's secret (LONGNET_RDZV_SECRET)"},
                       {"rank 1: rank 0 at", "refused this rank's proof of the job's secret", "LONGNET_RDZV_SECRET"}},
                      5);
    }
    {  // a stranger (no secret, or a guess) against a job with one: "refused", world 0, nothing more
        const int port = free_port();
        Env env = tcp(port);
        env["LONGNET_RDZV_SECRET"] = kSecret, env["TORCHELASTIC_RUN_ID"] = "secret-job-name";
        env["LONGNET_COMM_TIMEOUT_S"] = "3";
        std::vector<HostileReply> got;
        std::thread stranger([&] {
            for (int tries = 0; tries < 100; tries++) {
                HostileReply r = hostile_hello(port, "", 2, 1, kBlob, "TORCHELASTIC_RUN_ID=secret-job-name", 2);
                if (!r.connected) {
                    rdzv_sleep(0.02);
                    continue;
                }
                got.push_back(r);
                got.push_back(hostile_hello(port, "guess-guess-guess-guess", 5, 1, 7, "", 2));
                break;
            }
        });
        const std::vector<RankRun> runs = run_ranks({rank_env(torchrun, 0, 2, env)}, 15);
        stranger.join();
        const std::string fixed = rdzv_reply(kRdzvUnproven, 0, "refused", 7);
        bool ok = got.size() == 2;
        for (const HostileReply& r : got) ok = ok && r.challenged && r.all == fixed;
        check(ok, "a stranger with no secret or a guessed one gets only \"refused\" (no world size, job id or blob size)",
              got.empty() ? "no reply" : rdzv_printable(got[0].all));
        check(runs[0].code == 1 && contains_all(runs[0].error(), {"2 connection(s) did not prove the job's secret"}),
              "... and rank 0 counts them in its own time-out line", runs[0].error());
    }
}

// Without a secret a loopback rendezvous takes its own user's connections only (the kernel's
// socket table names the other end's owner). Needs root to connect as another user.
static void other_user_checks() {
    if (geteuid() != 0) {
        std::printf("skipped: a connection of another user (needs root to switch users)\n");
        return;
    }
    const int port = free_port();
    set_env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}});
    std::string line;
    std::thread server([&] {
        try {
            unsigned char blob[kBlob] = {};
            RendezvousServer(kBlob, 2).serve(blob, 2);
        } catch (const FatalError& e) {
            line = e.what();
        }
    });
    rdzv_sleep(0.3);
    auto challenged_as = [&](uid_t uid) {  // in a child of that user: did the challenge come?
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            if (uid != geteuid() && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(2);
            const int fd = connect_local(port);
            char c[kRdzvChallengeBytes];
            _exit(fd >= 0 && rdzv_recv_all(fd, c, sizeof c, rdzv_now() + 1) == 1 ? 0 : 1);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    const int other = challenged_as(65534), same = challenged_as(geteuid());
    server.join();
    set_env({});
    check(other == 1, "no secret, loopback: a connection of another user (uid 65534) is closed unanswered",
          strf("child exit %d", other));
    check(same == 0, "... while this user's connection gets the challenge", strf("child exit %d", same));
    check(contains_all(line, {"1 connection(s) of other users were refused"}), "... and rank 0's line counts it", line);
}

// Under `ulimit -n 40`, a crowd of silent connections: rank 0 neither spins (CPU time) nor keeps
// the real rank out; and with every descriptor taken it pauses rather than spins.
static void fd_limit_checks() {
    const Family& torchrun = kFamilies[0];
    for (bool all_taken : {false, true}) {
        const int port = free_port();
        Env env = tcp(port);
        env["LONGNET_COMM_TIMEOUT_S"] = all_taken ? "3" : "10";
        const Env env0 = rank_env(torchrun, 0, 2, env);
        int out[2];
        if (pipe(out) != 0) return;
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            close(out[0]);
            dup2(out[1], 1), dup2(out[1], 2);
            rlimit lim{40, 40};
            setrlimit(RLIMIT_NOFILE, &lim);
            set_env(env0);
            if (!all_taken) _exit(probe());
            _exit(guarded_main([] {
                unsigned char blob[kBlob] = {};
                RendezvousServer server(kBlob, 2);
                while (dup(0) >= 0) {  // every descriptor taken: accept() can only fail
                }
                server.serve(blob, comm_timeout_from_env());
                return 0;
            }));
        }
        close(out[1]);
        rdzv_sleep(0.3);
        std::vector<int> crowd;
        for (int i = 0; i < 100; i++)
            if (const int fd = connect_local(port); fd >= 0) crowd.push_back(fd);
        rdzv_sleep(1.0);  // where a spinning accept() would burn a whole core
        std::vector<RankRun> rank1;
        if (!all_taken) rank1 = run_ranks({rank_env(torchrun, 1, 2, env)}, 15);
        std::string text;
        char buf[4096];
        for (ssize_t k; (k = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, (size_t)k);
        close(out[0]);
        for (int fd : crowd) close(fd);
        int status = 0;
        rusage ru{};
        wait4(pid, &status, 0, &ru);
        const double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (!all_taken) {
            const bool joined = code == 0 && !rank1.empty() && rank1[0].code == 0 && rank1[0].blob().size() == 2 * kBlob &&
                                text.find(rank1[0].blob()) != std::string::npos;
            check(joined && cpu < 0.5,
                  strf("ulimit -n 40, %zu silent connections: the real rank joins, rank 0 used %.2f s of CPU",
                       crowd.size(), cpu),
                  joined ? "" : text + (rank1.empty() ? "" : rank1[0].out));
        } else {
            check(code == 1 && cpu < 0.5 && contains_all(text, {"ran out of file descriptors (ulimit -n)"}),
                  strf("every descriptor taken: rank 0 pauses accepting (%.2f s of CPU in 3 s) and its line says why", cpu),
                  text);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// The file: only rank 0's own files are written; foreign, stale, linked and special files refused.

static void file_checks(const std::string& dir) {
    unsigned char blob[kBlob], got[kBlob];
    for (size_t i = 0; i < kBlob; i++) blob[i] = (unsigned char)(i * 7 + 1);
    RendezvousSecret sec, other;
    sec.key = kSecret, sec.from = "LONGNET_RDZV_SECRET";
    other.key = "another-jobs-secret-entirely", other.from = "LONGNET_RDZV_SECRET";
    const std::string job = "LONGNET_JOB_ID=new";
    const std::string path = dir + "/rdzv";
    auto read_ok = [&](const RendezvousSecret& s, const std::string& j, double timeout) {
        std::memset(got, 0, sizeof got);
        rendezvous_file_read(path, got, kBlob, 1, 2, timeout, s, j);
        return std::memcmp(got, blob, kBlob) == 0;
    };
    auto mode_of = [](const std::string& p) {
        struct stat st {};
        return lstat(p.c_str(), &st) == 0 ? (unsigned)(st.st_mode & 0777) : 0u;
    };

    rendezvous_file_write(path, blob, kBlob, 2, sec, job);
    check(read_ok(sec, job, 1) && mode_of(path) == 0600, "a rendezvous file of this job: written mode 600, read back");

    write_file(path, "a user's notes\n", 0644);
    expect_fatal("rank 0 never overwrites a file that is not a rendezvous file",
                 [&] { rendezvous_file_write(path, blob, kBlob, 2, sec, job); },
                 {"rank 0: LONGNET_RENDEZVOUS=" + path, "exists and is not a rendezvous file", "left as it is"});
    check(read_file(path) == "a user's notes\n", "... and leaves it as it was");

    rendezvous_file_write(dir + "/old", blob, kBlob, 2, other, "LONGNET_JOB_ID=old");
    rename((dir + "/old").c_str(), path.c_str());
    rendezvous_file_write(path, blob, kBlob, 2, sec, job);
    check(read_ok(sec, job, 1), "an earlier job's rendezvous file is replaced by rank 0 (control)");

    // A symlink planted where the temporary file used to go, and one at the path itself.
    const std::string victim = write_file(dir + "/victim", "precious\n", 0644);
    unlink(path.c_str());
    symlink(victim.c_str(), (path + ".tmp").c_str());
    rendezvous_file_write(path, blob, kBlob, 2, sec, job);
    check(read_ok(sec, job, 1) && read_file(victim) == "precious\n",
          "a symlink planted at PATH.tmp is not followed: its target is untouched, the rendezvous works");
    unlink((path + ".tmp").c_str()), unlink(path.c_str());
    symlink(victim.c_str(), path.c_str());
    expect_fatal("a symlink at PATH: rank 0 refuses it", [&] { rendezvous_file_write(path, blob, kBlob, 2, sec, job); },
                 {"exists and is a symbolic link, not a rendezvous file"});
    expect_fatal("a symlink at PATH: a rank refuses it", [&] { read_ok(sec, job, 5); }, {"is a symbolic link"});
    check(read_file(victim) == "precious\n", "... and its target is untouched");
    unlink(path.c_str());

    mkfifo(path.c_str(), 0600);
    double t0 = rdzv_now();
    expect_fatal("a FIFO at PATH: a rank refuses it without blocking", [&] { read_ok(sec, job, 5); },
                 {"rank 1: LONGNET_RENDEZVOUS=" + path + " is a FIFO, not a rendezvous file"});
    check(rdzv_now() - t0 < 1, strf("... at once (%.2f s), not at the time-out", rdzv_now() - t0));
    expect_fatal("a FIFO at PATH: rank 0 refuses it", [&] { rendezvous_file_write(path, blob, kBlob, 2, sec, job); },
                 {"exists and is a FIFO"});
    unlink(path.c_str());

    // Stale files: another job's id, another secret. A rank waits (rank 0 may still replace it),
    // then names it.
    rendezvous_file_write(path, blob, kBlob, 2, sec, "LONGNET_JOB_ID=old");
    t0 = rdzv_now();
    expect_fatal("an earlier job's file (another job id) is refused at the time-out, naming it",
                 [&] { read_ok(sec, job, 1); },
                 {"rank 1: the rendezvous file " + path, "is not this job's", "written for job \"LONGNET_JOB_ID=old\"",
                  "this is job \"LONGNET_JOB_ID=new\""});
    check(rdzv_now() - t0 < 3, "... within the time-out");
    rendezvous_file_write(path, blob, kBlob, 2, other, job);
    expect_fatal("a file signed with another secret is refused, naming it", [&] { read_ok(sec, job, 1); },
                 {"is not this job's", "not signed with this rank's secret (LONGNET_RDZV_SECRET)"});
    {  // rank 0 replaces the stale file while a rank waits: taken
        bool ok = false;
        std::thread reader([&] {
            try {
                ok = read_ok(sec, job, 5);
            } catch (const FatalError&) {
            }
        });
        rdzv_sleep(0.3);
        rendezvous_file_write(path, blob, kBlob, 2, sec, job);
        reader.join();
        check(ok, "a rank that found a stale file takes the one rank 0 writes over it (control)");
    }
    write_file(path, std::string(kRendezvousFileTag, 16) + "garbage", 0600);
    expect_fatal("a damaged rendezvous file is refused", [&] { read_ok(sec, job, 1); }, {"is damaged"});
    write_file(path, std::string("longnet-rdzv-v2\0", 16) + std::string(140, 'x'), 0600);
    expect_fatal("a rendezvous file of another version is refused at the time-out", [&] { read_ok(sec, job, 1); },
                 {"is not this job's", "another version of this program"});
    rendezvous_file_write(path, blob, kBlob, 2, sec, job);
    check(read_ok(sec, job, 1), "... and rank 0 replaces it (control)");
    if (geteuid() == 0) {
        chown(path.c_str(), 65534, 65534);
        expect_fatal("a rendezvous file of another user is refused", [&] { read_ok(sec, job, 1); }, {"belongs to uid 65534"});
    }
    unlink(path.c_str());

    const std::string open_dir = dir + "/open";
    mkdir(open_dir.c_str(), 0700);
    chmod(open_dir.c_str(), 0777);
    expect_fatal("a folder anyone may write to, without the sticky bit, is refused",
                 [&] { rendezvous_file_write(open_dir + "/rdzv", blob, kBlob, 2, sec, job); },
                 {"the folder " + open_dir, "may be written by anyone and has no sticky bit"});
    chmod(open_dir.c_str(), 01777);
    rendezvous_file_write(open_dir + "/rdzv", blob, kBlob, 2, sec, job);
    check(mode_of(open_dir + "/rdzv") == 0600, "... with the sticky bit (as /tmp) it is used (control)");
    unlink((open_dir + "/rdzv").c_str()), rmdir(open_dir.c_str());
    unlink(victim.c_str());
}

// ------------------------------------------------------------------------------------------------
// The fuzzer (build/test_rendezvous --fuzz [ROUNDS], in make test): rank 0 in this process, the
// real ranks beside hostile clients of every kind. Whatever they send, rank 0 must not crash, the
// real ranks must meet within the time-out, and no hostile client may receive the blob.

struct FuzzStats {
    std::atomic<int> clients{0}, replies{0}, leaked{0};
};

// One hostile client of kind `kind`, drawing its bytes from `seed`.
static void hostile_client(int port, int kind, uint64_t seed, const unsigned char* blob, FuzzStats& stats) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(x >> 32); };
    const int fd = connect_local(port);
    if (fd < 0) return;
    stats.clients++;
    char challenge[kRdzvChallengeBytes] = {};
    const bool challenged = rdzv_recv_all(fd, challenge, sizeof challenge, rdzv_now() + 2) == 1;
    const unsigned char* nonce = (const unsigned char*)challenge + 12;
    std::string msg;
    double linger = 0.5;
    switch (kind) {
        case 0: {  // random bytes
            const size_t n = next() % 300;
            for (size_t i = 0; i < n; i++) msg += (char)next();
            break;
        }
        case 1: {  // a valid-looking hello, cut short
            msg = hello_bytes(kSecret, nonce, 3, 1 + next() % 2, kBlob, "");
            msg.resize(next() % msg.size());
            break;
        }
        case 2: {  // huge fields, a right header, a wrong HMAC
            msg = std::string(kRdzvMagic, 8);
            for (uint32_t v : {(uint32_t)kRdzvVersion, next(), next(), next(), next() % 2 ? next() : (uint32_t)kRdzvMaxJobId})
                rdzv_put32(msg, v);
            for (int i = 0; i < 64; i++) msg += (char)next();
            msg += std::string(next() % 400, 'j');
            break;
        }
        case 3:  // a whole hello under a wrong secret
            msg = hello_bytes("wrong-secret-wrong-secret", nonce, 3, 1 + next() % 2, kBlob, "");
            break;
        case 4: {  // replay: a hello proven for another connection's nonce
            const int other = connect_local(port);
            char c2[kRdzvChallengeBytes] = {};
            if (other >= 0 && rdzv_recv_all(other, c2, sizeof c2, rdzv_now() + 2) == 1)
                msg = hello_bytes(kSecret, (const unsigned char*)c2 + 12, 3, 1 + next() % 2, kBlob, "");
            if (other >= 0) close(other);
            break;
        }
        case 5:  // silent: holds the connection
            linger = 1.5;
            break;
        case 6: {  // a slow trickle of a wrong hello
            const std::string h = hello_bytes("wrong-secret-wrong-secret", nonce, 3, 2, kBlob, "");
            for (size_t i = 0; i < h.size(); i += 16) {
                rdzv_send_all(fd, h.data() + i, std::min<size_t>(16, h.size() - i), rdzv_now() + 1);
                rdzv_sleep(0.02);
            }
            break;
        }
        default: {  // a wrong version, then a flood of junk
            msg = std::string(kRdzvMagic, 8);
            rdzv_put32(msg, kRdzvVersion + 1 + next() % 5);
            msg += std::string(8192, '\xff');
        }
    }
    if (!challenged && kind != 5) {
        close(fd);
        return;
    }
    if (!msg.empty()) rdzv_send_all(fd, msg.data(), msg.size(), rdzv_now() + 1);
    const std::string reply = read_until_closed(fd, linger);
    close(fd);
    if (!reply.empty()) stats.replies++;
    const HostileReply r = parse_reply(HostileReply{true, challenged, -1, 0, reply});
    if (r.status == (int)kRdzvOk || r.world != 0 || reply.find(std::string((const char*)blob, kBlob)) != std::string::npos ||
        (!reply.empty() && reply != rdzv_reply(kRdzvUnproven, 0, "refused", 7)))
        stats.leaked++;
}

static int fuzz_main(int rounds) {
    for (int round = 0; round < rounds; round++) {
        const int port = free_port();
        set_env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}, {"LONGNET_RDZV_SECRET", kSecret}});
        unsigned char blob[kBlob];
        rdzv_random(blob, sizeof blob);
        const double timeout = 10, t0 = rdzv_now();
        std::string server_error = "(not started)";
        std::unique_ptr<RendezvousServer> server;
        try {
            server = std::make_unique<RendezvousServer>(kBlob, 3);
        } catch (const FatalError& e) {
            check(false, strf("fuzz round %d: rank 0 listens", round), e.what());
            continue;
        }
        std::thread rank0([&] {
            try {
                server->serve(blob, timeout);
                server_error.clear();
            } catch (const FatalError& e) {
                server_error = e.what();
            } catch (const std::exception& e) {
                server_error = std::string("exception: ") + e.what();
            }
        });
        FuzzStats stats;
        std::vector<std::thread> crowd;
        for (int i = 0; i < 240; i++)
            crowd.emplace_back(hostile_client, port, i % 8, (uint64_t)round * 1000 + i, blob, std::ref(stats));
        rdzv_sleep(0.5);  // the real ranks come in the thick of it
        unsigned char got[2][kBlob] = {};
        std::string rank_error[2];
        std::vector<std::thread> ranks;
        for (int r = 1; r <= 2; r++)
            ranks.emplace_back([&, r] {
                try {
                    rendezvous_tcp_fetch(got[r - 1], kBlob, r, 3, timeout);
                } catch (const FatalError& e) {
                    rank_error[r - 1] = e.what();
                }
            });
        for (std::thread& t : ranks) t.join();
        const double met_after = rdzv_now() - t0;
        rank0.join();
        server.reset();  // closes what it still held; the crowd ends within its deadlines
        for (std::thread& t : crowd) t.join();
        const bool met = server_error.empty() && rank_error[0].empty() && rank_error[1].empty() &&
                         std::memcmp(got[0], blob, kBlob) == 0 && std::memcmp(got[1], blob, kBlob) == 0;
        check(met && met_after < timeout,
              strf("fuzz round %d: 2 real ranks met in %.2f s beside %d hostile connections (garbage, truncated, huge "
                   "fields, wrong secret, replayed HMAC, silent, slow, wrong version)",
                   round, met_after, stats.clients.load()),
              met ? "" : server_error + " | " + rank_error[0] + " | " + rank_error[1]);
        check(stats.leaked == 0, strf("fuzz round %d: no hostile client got the blob or more than \"refused\" (%d replies)",
                                      round, stats.replies.load()));
    }
    set_env({});
    return check_report();
}

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "--probe") == 0) return probe();
    if (argc == 2 && std::strcmp(argv[1], "--free-port") == 0) {
        const int port = free_port();
        std::printf("%d\n", port);
        return port ? 0 : 1;
    }
    signal(SIGPIPE, SIG_DFL);  // the code must not need SIG_IGN: MSG_NOSIGNAL
    if (argc >= 2 && argc <= 3 && std::strcmp(argv[1], "--fuzz") == 0)
        return fuzz_main(argc == 3 ? std::max(1, std::atoi(argv[2])) : 3);
    if (argc != 1) {
        std::fprintf(stderr, "usage: test_rendezvous [--probe | --free-port | --fuzz [ROUNDS]]\n");
        return 2;
    }
    char dir[] = "/tmp/test_rendezvous_checks.XXXXXX";
    if (!mkdtemp(dir)) return std::printf("mkdtemp failed\n"), 1;
    chmod(dir, 0700);
    sha_checks();
    env_checks();
    strict_env_checks();
    secret_checks(dir);
    listen_checks();
    file_checks(dir);
    meet_checks();
    secret_meet_checks(dir);
    failure_checks();
    other_user_checks();
    fd_limit_checks();
    const std::string cleanup = std::string("rm -rf ") + dir;
    (void)!std::system(cleanup.c_str());
    return check_report();
}
