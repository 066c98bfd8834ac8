// Which rank this process is, from the variables its launcher set (host side only; tests/
// test_rendezvous.cpp runs it on the CPU; comm/rendezvous.h and model/parallel.h read it).
//
//   LauncherRanks me = launcher_ranks_from_env();             // rank, world size, GPU of this host
//
// The launchers (the first family whose world size is set wins; rank and local rank come from the
// same family, never mixed):
//   torchrun, scripts/launch.sh   RANK, WORLD_SIZE, LOCAL_RANK (LOCAL_WORLD_SIZE checked when set)
//   mpirun of Open MPI            OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK
//   mpirun of MPICH / Intel MPI   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
//   srun                          SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
// No world size at all means one rank. So `srun torchrun ...` and `mpirun torchrun ...` (one agent
// per node) take torchrun's ranks, and mpirun inside an sbatch script takes mpirun's, not the
// batch step's SLURM_*. A rank variable without its world size (RANK alone), a malformed number,
// a rank outside the world or a missing local rank is an error of one line.
#pragma once
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include "core/error.h"

inline const char* launch_hint() {
    return "launch with torchrun --nproc-per-node P, mpirun -np P, srun -n P or scripts/launch.sh P";
}

// false when unset; a set but malformed value is an error, never a silent default. Digits only:
// launchers write plain numbers, so "+2", " 2" or "2 " mean something went wrong on the way.
inline bool launcher_env_int(const char* name, int* out, long lo = 0, long hi = 1000000) {
    const char* s = std::getenv(name);
    if (!s) return false;
    const size_t n = std::strlen(s);
    bool digits = n > 0 && n <= 9;  // 9 digits cannot overflow a long
    for (size_t i = 0; i < n && digits; i++) digits = s[i] >= '0' && s[i] <= '9';
    const long v = digits ? std::strtol(s, nullptr, 10) : -1;
    if (!digits || v < lo || v > hi)
        fatal("%s=\"%s\" is not a whole number from %ld to %ld: %s", name, s, lo, hi, launch_hint());
    *out = (int)v;
    return true;
}

// Seconds a rendezvous or a communicator wait may take: LONGNET_COMM_TIMEOUT_S, else 45: a hung rank's
// job ends within a minute, the abort and the launcher's teardown included. From 1 s (a rank's
// start-up alone takes longer) to a week (beyond it a typo, and 1e300 s overflows the deadlines).
constexpr double kCommTimeoutMin = 1, kCommTimeoutMax = 7 * 24 * 3600;
inline double comm_timeout_from_env() {
    const char* s = std::getenv("LONGNET_COMM_TIMEOUT_S");
    if (!s) return 45;
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (!*s || *end || !std::isfinite(v) || v < kCommTimeoutMin || v > kCommTimeoutMax)
        fatal("LONGNET_COMM_TIMEOUT_S=\"%s\" is not a number of seconds from %.0f to %.0f (a week): unset it (45 s) "
              "or give e.g. 300",
              s, kCommTimeoutMin, kCommTimeoutMax);
    return v;
}

struct LauncherFamily {
    const char *launcher, *rank, *size, *local, *local_size;  // local_size: nullptr when the family has none
};
inline const LauncherFamily* launcher_families(int* count) {
    static const LauncherFamily families[] = {
        {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
        {"mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"mpirun (MPICH, Intel MPI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
        {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr}};
    *count = (int)(sizeof families / sizeof families[0]);
    return families;
}

struct LauncherRanks {
    int rank = 0, world = 1, local_rank = 0;
    int local_world = 0;                   // ranks on this host when the launcher says (else 0)
    const char* launcher = "none";        // which family gave them
    const char* world_var = nullptr;       // the variable world came from (nullptr: none set)
    const char* local_var = "LOCAL_RANK";  // the variable local_rank came from (for error lines)
};

// Where the world size came from, for lines that state it: "SLURM_NTASKS=4, set by srun". Slurm
// also sets SLURM_NTASKS in an sbatch script itself, where a plain run is one process.
inline std::string launcher_world_source(const LauncherRanks& r) {
    if (!r.world_var) return "no launcher variable set";
    std::string s = std::string(r.world_var) + "=" + std::to_string(r.world) + ", set by " + r.launcher;
    if (std::strcmp(r.world_var, "SLURM_NTASKS") == 0)
        s += " or by an sbatch -n script (a plain run there is one process: start the ranks with srun, or unset "
             "SLURM_NTASKS)";
    return s;
}

inline LauncherRanks launcher_ranks_from_env() {
    int n = 0;
    const LauncherFamily* families = launcher_families(&n);
    LauncherRanks r;
    const LauncherFamily* fam = nullptr;
    for (int i = 0; i < n && !fam; i++)
        if (launcher_env_int(families[i].size, &r.world)) fam = &families[i];
    if (!fam) {
        // srun's SLURM_PROCID alone is left alone: Slurm sets its variables in many places.
        for (int i = 0; i + 1 < n; i++)
            if (std::getenv(families[i].rank))
                fatal("%s is set but %s is not (a partial %s environment): %s", families[i].rank, families[i].size,
                      families[i].launcher, launch_hint());
        return r;
    }
    r.launcher = fam->launcher;
    r.world_var = fam->size;
    r.local_var = fam->local;
    if (r.world < 1) fatal("%s=0: a job needs at least 1 rank: %s", fam->size, launch_hint());
    if (!launcher_env_int(fam->rank, &r.rank)) {
        if (r.world > 1)
            fatal("%s=%d is set but %s is not (a partial %s environment): %s", fam->size, r.world, fam->rank,
                  fam->launcher, launch_hint());
        r.rank = 0;
    }
    if (r.rank >= r.world)
        fatal("%s=%d is outside %s=%d (ranks are 0 to %d): %s", fam->rank, r.rank, fam->size, r.world, r.world - 1,
              launch_hint());
    if (!launcher_env_int(fam->local, &r.local_rank)) {
        if (r.world > 1)
            fatal("%s is not set (which GPU of this host?) though %s=%d: %s", fam->local, fam->size, r.world,
                  launch_hint());
        r.local_rank = 0;
    }
    if (r.local_rank >= r.world)
        fatal("%s=%d is not below %s=%d: a host cannot hold more ranks than the job: %s", fam->local, r.local_rank,
              fam->size, r.world, launch_hint());
    int local_size = 0;
    if (fam->local_size && launcher_env_int(fam->local_size, &local_size)) {
        if (r.local_rank >= local_size)
            fatal("%s=%d is not below %s=%d: %s", fam->local, r.local_rank, fam->local_size, local_size, launch_hint());
        if (local_size > r.world)
            fatal("%s=%d is above %s=%d: a host cannot hold more ranks than the job: %s", fam->local_size, local_size,
                  fam->size, r.world, launch_hint());
        r.local_world = local_size;
    }
    return r;
}
