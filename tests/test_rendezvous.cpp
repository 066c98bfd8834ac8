// The launcher mapping and the rendezvous of comm/rendezvous.h on the CPU, with real processes:
// P = 2, 3, 4 forked ranks under each launcher's variables (torchrun, Open MPI, MPICH, srun) meet
// over TCP (MASTER_ADDR/MASTER_PORT on 127.0.0.1, free ports) and through a file
// (LONGNET_RENDEZVOUS), and every rank must hold rank 0's 128 bytes. Then the failures, each one
// line within the time-out: a rank that never arrives (rank 0 names it), rank 0 absent (the ranks
// name ADDR:PORT), another world size or job refused, a taken port, something else on the port, a
// partial environment.
//   build/test_rendezvous           all checks; "N passed, M failed"
//   build/test_rendezvous --probe   one rank from the environment (for real launchers,
//                                   tests/test_launch.sh): prints "probe rank R of W local L
//                                   launcher NAME via METHOD blob HEX", exit 1 on an error line
//   build/test_rendezvous --free-port   prints a port free on 127.0.0.1 now (for the launchers' tests)
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
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
    "SLURM_JOB_ID", "SLURM_STEP_ID", "LONGNET_COMM_TIMEOUT_S"};

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
    {  // a stranger's hello naming rank 2^32 - 1 (or 2^31): refused, and the job still meets
        const int port = free_port();
        std::atomic<int> refused{0};
        std::thread stranger([port, &refused] {
            for (uint32_t bad : {0xFFFFFFFFu, 0x80000000u}) {
                std::string hello(kRdzvMagic, 8);
                for (uint32_t v : {(uint32_t)kRdzvVersion, 2u, bad, (uint32_t)kBlob, 0u}) rdzv_put32(hello, v);
                for (int tries = 0; tries < 100; tries++) {  // until rank 0 listens
                    const int fd = socket(AF_INET, SOCK_STREAM, 0);
                    sockaddr_in a{};
                    a.sin_family = AF_INET, a.sin_addr.s_addr = htonl(INADDR_LOOPBACK), a.sin_port = htons((uint16_t)port);
                    if (connect(fd, (sockaddr*)&a, sizeof a) != 0) {
                        close(fd), rdzv_sleep(0.02);
                        continue;
                    }
                    char reply[kRdzvReplyBytes] = {};
                    if (rdzv_send_all(fd, hello.data(), hello.size(), rdzv_now() + 2) &&
                        rdzv_recv_all(fd, reply, sizeof reply, rdzv_now() + 2) == 1 && rdzv_get32(reply + 8) == kRdzvRefused)
                        refused++;
                    close(fd);
                    break;
                }
            }
        });
        std::string detail;
        const bool met = all_met(run_ranks(world_envs(torchrun, 2, short_tcp(port, "5")), 15, {0, 0.6}), torchrun, "tcp", &detail);
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
                 {"LONGNET_COMM_TIMEOUT_S=\"0\" is not a positive number"});
    set_env({});
    check(comm_timeout_from_env() == 45, "LONGNET_COMM_TIMEOUT_S unset: 45 s");

    // The file: a stale one of another world size fails at once; rank 0 absent times out.
    char path[] = "/tmp/test_rendezvous_file.XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    rendezvous_file_write(path, blob, kBlob, 3);
    const double t0 = rdzv_now();
    expect_fatal("a rendezvous file of a 3-rank job, read by a 2-rank job, fails at once",
                 [&] { rendezvous_file_read(path, blob, kBlob, 1, 2, 5); }, {"written for 3 ranks, this job has 2"});
    check(rdzv_now() - t0 < 1, "... without waiting for the time-out");
    unlink(path);
    expect_fatal("no rendezvous file within the time-out names the file and LONGNET_RENDEZVOUS",
                 [&] {
                     set_env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}});
                     rendezvous_file_read(path, blob, kBlob, 1, 2, 0.3);
                 },
                 {"rank 1: waited", path, "LONGNET_RENDEZVOUS", "unset it to meet over TCP"});
    set_env({});
}

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "--probe") == 0) return probe();
    if (argc == 2 && std::strcmp(argv[1], "--free-port") == 0) {
        const int port = free_port();
        std::printf("%d\n", port);
        return port ? 0 : 1;
    }
    if (argc != 1) {
        std::fprintf(stderr, "usage: test_rendezvous [--probe | --free-port]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_DFL);  // the code must not need SIG_IGN: MSG_NOSIGNAL
    env_checks();
    meet_checks();
    failure_checks();
    return check_report();
}
