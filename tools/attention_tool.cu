// attention_tool: runs one attention pattern at a given B, N, H, D, dtype and seed, on the CPU
// reference or a GPU kernel, and writes its inputs, output and log-sum-exp (and, with
// --backward, a random dO and the gradients) to a safetensors file that any tool can check.
//   attention_tool --pattern dilated --segments 2048,4096 --dilations 1,2 --B 1 --N 8192 --H 12 --D 64
//                  --dtype bf16 --device cuda --seed 7 --backward --out attn.safetensors
// Tensors: q, k, v, o, do, dq, dk, dv (B, N, H, D) in the run's dtype; lse (B, H, N) in F32
// (F64 for --dtype fp64). Metadata: the pattern (as the model's JSON), shape, dtype, device, seed.
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>
#include "core/flags.h"
#include "core/output_path.h"
#include "core/run_lock.h"
#include "core/rng.h"
#include "layers/attention.h"
#include "layers/cuda/attention_cudnn.h"
#include "layers/cuda/attention_flash.h"
#include "model/gpt_config.h"
#include "model/host_memory.h"
#include "model/safetensors.h"

// Limits on the configuration (beyond them a run is refused with a one-line error); the dilated
// branches' limit is the pattern module's (layers/patterns/dilated.h).
constexpr int kMaxReps = 10000;             // --reps
constexpr double kMaxScale = 1e4;           // --scale: far larger makes scores overflow fp32/bf16 to inf
constexpr uint64_t kMaxElements = 1ull << 48;  // B*N*H*D: far past any memory, keeps byte counts in 64 bits
constexpr double kDefaultMaxCpuPairs = 5e10;   // B*H*N^2 x branches the CPU reference may test (--max-cpu-pairs)

static std::string gib(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / 1073741824.0);
    return buf;
}

// a * b in 64 bits; false on overflow.
static bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// Fresh inputs: N(0, 1) from a splitmix64 stream, so a seed gives the same tensors everywhere.
// Value i of the stream uses draws 2i+1 and 2i+2, so any range of it can be generated on its own
// (SplitMix64's state advances by a constant per draw): the fill runs in parallel and gives the
// same values as one sequential pass.
struct NormalStream {
    uint64_t seed0;
    explicit NormalStream(uint64_t seed) : seed0(seed * 0x9E3779B97F4A7C15ull + 3) {}
    template <typename F>
    void fill(size_t begin, size_t end, F&& put) const {  // put(i, value) for i in [begin, end)
        SplitMix64 rng(seed0 + 2 * (uint64_t)begin * 0x9e3779b97f4a7c15ULL);
        auto uniform = [&]() { return ((rng.next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };  // (0, 1)
        for (size_t i = begin; i < end; i++) {
            const double u1 = uniform(), u2 = uniform();
            put(i, (float)(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2)));
        }
    }
    template <typename F>
    void fill_parallel(size_t n, F&& put) const {
        const long long chunks = (long long)((n + 65535) / 65536);
#pragma omp parallel for schedule(dynamic, 1)
        for (long long c = 0; c < chunks; c++) fill((size_t)c * 65536, std::min(n, (size_t)(c + 1) * 65536), put);
    }
};

template <typename T>
static T to_storage(float x) { return (T)x; }
template <>
bf16 to_storage<bf16>(float x) { return __float2bfloat16(x); }

// q, k, v: the stream's values in the order of a packed (B, N, 3, H, D) buffer, written to three
// buffers with `stride` elements between tokens (3*H*D: slices of one packed buffer; H*D: apart).
template <typename T>
static void fill_qkv(T* q, T* k, T* v, size_t tokens, size_t HD, size_t stride, uint64_t seed) {
    T* dst[3] = {q, k, v};
    NormalStream(seed).fill_parallel(tokens * 3 * HD, [&](size_t i, float x) {
        const size_t t = i / (3 * HD), which = i / HD % 3, e = i % HD;
        dst[which][t * stride + e] = to_storage<T>(x);
    });
}
template <typename T>
static void fill_plain(std::vector<T>& x, uint64_t seed) {
    NormalStream(seed).fill_parallel(x.size(), [&](size_t i, float val) { x[i] = to_storage<T>(val); });
}

// (B, N, H, D) view i of a packed (B, N, 3, H, D) buffer, copied out contiguous.
template <typename T>
static std::vector<T> unpack(const std::vector<T>& qkv, int which, size_t BN, size_t HD) {
    std::vector<T> out(BN * HD);
    for (size_t t = 0; t < BN; t++) std::copy_n(&qkv[(t * 3 + which) * HD], HD, &out[t * HD]);
    return out;
}

struct Result {
    std::vector<TensorToWrite> tensors;
    std::vector<std::shared_ptr<void>> storage;  // the vectors the tensors point into, moved here (no copies)
    double fwd_ms = 0, bwd_ms = 0;
    template <typename T>
    void add(const std::string& name, std::vector<int> shape, std::vector<T>&& data, const char* dtype) {
        auto held = std::make_shared<std::vector<T>>(std::move(data));
        tensors.push_back({name, std::move(shape), held->data(), dtype});
        storage.push_back(held);
    }
};

// ---- Parse: the flags as given, all of them before anything is built from them.

struct Args {
    std::string pattern = "dense", dtype = "fp32", device = "cpu", backend = "flash", out;
    PatternFlags pattern_flags;  // --causal and each pattern's own flags (its module reads them)
    std::vector<std::string> pattern_flags_given;  // which of them were on the command line
    std::vector<std::string> device_flags_given;   // --backend, --reps, --max-cpu-pairs: each read on one device only
    int B = 1, N = 1024, H = 12, D = 64, seed = 1, reps = 5;
    bool backward = false;
    float scale = 0, max_cpu_pairs = (float)kDefaultMaxCpuPairs;
    bool cuda() const { return device == "cuda"; }
    bool cudnn() const { return cuda() && backend == "cudnn"; }
};

static Args parse_args(int argc, char** argv) {
    Args a;
    PatternFlags& pf = a.pattern_flags;
    Flags flags("attention_tool",
                "Run one attention pattern and write its inputs, outputs and gradients to safetensors.\n\n"
                "Sizes are checked before anything runs: every tensor (B*N*H*D elements) and the whole run must fit\n"
                "in the host memory available (and, with --device cuda, in the GPU's free memory); a run that does\n"
                "not is refused, naming the largest --N that fits. The CPU reference costs O(B*H*N^2*D) (every\n"
                "query-key pair is tested against the pattern, per branch): it refuses runs of more than\n"
                "--max-cpu-pairs pair tests (B*H*N^2 x dilated branches; 2 cores test about 1e8 per second, so the\n"
                "default 5e10 is ~10 minutes forward, 2-4x that with --backward); use --device cuda for long\n"
                "sequences, or raise the limit.\n"
                "Limits: --D 64 or 128; at most 64 dilated branches; --reps 1 to 10000; 0 < --scale <= 1e4.");
    flags.add_string("pattern", &a.pattern, attn_kind_names().c_str());
    add_pattern_flags(flags, pf);
    flags.add_bool("causal", &pf.causal, "mask keys after the query");
    flags.add_int("B", &a.B, "batch");
    flags.add_int("N", &a.N, "sequence length");
    flags.add_int("H", &a.H, "heads");
    flags.add_int("D", &a.D, "head dim");
    flags.add_float("scale", &a.scale, "softmax scale (0: 1/sqrt(D))");
    flags.add_string("dtype", &a.dtype, "fp32 or fp64 (cpu), bf16 (cuda)");
    flags.add_string("device", &a.device, "cpu (the reference) or cuda");
    flags.add_string("backend", &a.backend, "cuda: flash (ours) or cudnn");
    flags.add_int("seed", &a.seed, "seed of q, k, v (and dO)");
    flags.add_bool("backward", &a.backward, "also run backward with a random dO");
    flags.add_int("reps", &a.reps, "cuda: timed repetitions (median reported)");
    flags.add_float("max-cpu-pairs", &a.max_cpu_pairs, "cpu: refuse runs of more than this many B*H*N^2 x branches pair tests");
    flags.add_string("out", &a.out, "safetensors file to write (none: only print timings)");
    flags.parse(argc, argv);
    a.pattern_flags_given = given_pattern_flags(flags);
    for (const char* name : {"backend", "reps", "max-cpu-pairs"})
        if (flags.was_set(name)) a.device_flags_given.push_back(name);
    return a;
}

// ---- Validate: each flag on its own, naming it; then the pattern, through its module.

static void require_positive(const char* flag, int v) {
    if (v < 1) fatal("--%s %d: must be at least 1", flag, v);
}

static void validate_flags(const Args& a) {
    require_positive("B", a.B), require_positive("N", a.N), require_positive("H", a.H);
    if (a.D != 64 && a.D != 128) fatal("--D %d: head dims 64 and 128 are supported", a.D);
    if (a.reps < 1 || a.reps > kMaxReps) fatal("--reps %d: give 1 to %d", a.reps, kMaxReps);
    // Positive only: a softmax scale is an inverse temperature, and the flash kernels take the row
    // maximum of the unscaled scores (layers/cuda/attention/softmax.cuh), which is the
    // scaled maximum only for scale > 0 (a negative one gave inf on an H100).
    if (!std::isfinite(a.scale) || a.scale < 0 || a.scale > kMaxScale)
        fatal("--scale %g: give a positive number up to %g (0: 1/sqrt(D))", a.scale, kMaxScale);
    if (!std::isfinite(a.max_cpu_pairs) || a.max_cpu_pairs <= 0)
        fatal("--max-cpu-pairs %g: give a positive number", a.max_cpu_pairs);
    if (!a.cuda() && a.device != "cpu") fatal("--device must be cpu or cuda (got '%s')", a.device.c_str());
    if (a.cuda() && a.dtype != "bf16") fatal("--device cuda runs --dtype bf16 (got %s)", a.dtype.c_str());
    if (!a.cuda() && a.dtype != "fp32" && a.dtype != "fp64")
        fatal("--device cpu runs --dtype fp32 or fp64 (got %s)", a.dtype.c_str());
    if (a.backend != "flash" && a.backend != "cudnn") fatal("--backend must be flash or cudnn (got '%s')", a.backend.c_str());
    // A flag the chosen device never reads would be silently dropped (a --backend cudnn run that
    // was the CPU reference all along).
    for (const std::string& name : a.device_flags_given) {
        const bool cuda_only = name != "max-cpu-pairs";
        if (cuda_only != a.cuda())
            fatal("--%s has no effect with --device %s (it is for --device %s): drop it", name.c_str(), a.device.c_str(),
                  cuda_only ? "cuda" : "cpu");
    }
}

// The registry builds and validates every pattern the same way, on either device; a layout file
// is read there, after --causal (its rows are checked against the causal mask).
static AttnPattern build_pattern(const Args& a) {
    AttnPattern p = pattern_from_flags(a.pattern, a.pattern_flags, "--pattern");
    refuse_unused_pattern_flags(a.pattern_flags_given, {a.pattern}, "--pattern");  // --window with --pattern dense
    const std::string heads = pattern_heads_error(p, a.H);
    if (!heads.empty()) fatal("%s (--H)", heads.c_str());
    return p;
}

// ---- Plan: the run's sizes, checked against the machine before anything is allocated.

// What the phases after validation read.
struct Plan {
    AttnPattern pattern;
    long long B, N, H, D;
    bool cuda, backward, cudnn;
    std::string dtype;
    size_t elem;  // bytes per element of q, k, v, o and gradients (and of L on the CPU)
    AttnShape shape;
    float scale;  // what the kernels run with (--scale 0 resolved)
    int reps;
    uint64_t seed, elements;  // elements: B*N*H*D
    std::string what;         // the sizes and the device, for messages
};

// The kernels and the reference index tokens with a row stride of 3*H*D elements (int): H is
// capped so that it fits.
static void check_row_stride(const Args& a) {
    if ((long long)a.H * 3 * a.D > 2147483647LL)
        fatal("--H %d: at most %lld heads at --D %d (the row stride 3*H*D must fit in 32 bits)", a.H, 2147483647LL / (3 * a.D), a.D);
}

// B*N*H*D in 64 bits; false on overflow.
static bool count_elements(const Args& a, uint64_t* elements) {
    uint64_t tokens = 0;
    return mul_ok((uint64_t)a.B, (uint64_t)a.N, &tokens) && mul_ok(tokens, (uint64_t)a.H * a.D, elements);
}

static Plan describe_run(const Args& a, AttnPattern pattern, uint64_t elements) {
    Plan p;
    p.pattern = std::move(pattern);
    p.B = a.B, p.N = a.N, p.H = a.H, p.D = a.D;
    p.cuda = a.cuda(), p.backward = a.backward, p.cudnn = a.cudnn();
    p.dtype = a.dtype;
    p.elem = a.dtype == "fp64" ? 8u : a.dtype == "fp32" ? 4u : 2u;
    p.shape = AttnShape{a.B, a.N, a.H, a.D, p.cuda ? 3 * a.H * a.D : a.H * a.D};
    p.scale = a.scale == 0 ? 1.0f / std::sqrt((float)a.D) : a.scale;
    p.reps = a.reps, p.seed = (uint64_t)a.seed, p.elements = elements;
    char what[256];
    std::snprintf(what, sizeof what, "--B %d --N %d --H %d --D %d (--device %s, --dtype %s%s)", a.B, a.N, a.H, a.D,
                  a.device.c_str(), a.dtype.c_str(), a.backward ? ", --backward" : "");
    p.what = what;
    return p;
}

// Fatal unless device 0 is a GPU this build's kernels run on.
static void open_device() {
    // Asked without CUDA_CHECK: no device is a user's mistake, and the message says which flag to change.
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        fatal("--device cuda: no CUDA device (%s): use --device cpu", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9 || prop.minor != 0)
        fatal("--device cuda: this build's kernels are for sm_90 (H100/H200); device 0 is %s (sm_%d%d)", prop.name, prop.major,
              prop.minor);
}

struct Need {
    double host, device;
};
// What a run allocates, in bytes, for a sequence of N tokens (the rest of the plan fixed).
static Need bytes_needed(const Plan& c, long long N) {
    const double E = (double)c.B * N * c.H * c.D, L = (double)c.B * c.H * N;
    Need n{0, 0};
    if (!c.cuda) {
        // q, k, v, o, L; backward adds dO, dq, dk, dv (all moved into the file's tensors, no copies).
        n.host = c.elem * (E * (c.backward ? 8 : 4) + L) + 4.0 * N;
        return n;
    }
    // Host: the packed QKV and its unpacked q, k, v (6E at once, then the packed one is freed),
    // o, L; backward: dO, the packed dQKV and its unpacked dq, dk, dv (3 + 1 + 1 + 3 + 3 = 11E).
    n.host = 2 * E * (c.backward ? 11 : 6) + 4 * L + 4.0 * N;
    // Device: QKV, O, L, positions; backward: dO, dQKV and the backward workspace.
    n.device = 2 * E * 4 + 4 * L + 4.0 * N;
    if (c.backward) {
        const AttnShape s{(int)c.B, (int)N, (int)c.H, (int)c.D, (int)(3 * c.H * c.D)};
        const double ws = c.cudnn ? (double)attention_cudnn_workspace_bytes(s)
                                  : (double)attention_backward_workspace_bytes(s, c.pattern);
        n.device += 2 * E * 4 + ws;
    }
    return n;
}

struct Available {
    double host, dev_free = 0, dev_total = 0;
    std::string dev_name;
};
static Available memory_available(bool cuda) {
    Available m;
    m.host = host_bytes_available() * 0.9;  // leave room for the rest of the process
    if (!cuda) return m;
    size_t f = 0, t = 0;
    CUDA_CHECK(cudaMemGetInfo(&f, &t));
    m.dev_free = (double)f, m.dev_total = (double)t;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    m.dev_name = prop.name;
    return m;
}

// Fatal unless the run fits: host memory always, GPU memory with --device cuda. The message names
// the flags and the largest --N that fits with the other flags unchanged.
// The byte counts are doubles, so no size overflows here; the 64-bit element counts the buffers
// are allocated with are checked after this passes.
static void check_memory(const Plan& c) {
    const Available m = memory_available(c.cuda);
    const double dev_reserve = 512.0 * 1048576;  // CUDA context, cuDNN plans and their workspaces
    auto fits = [&](long long n, std::string* why) {
        const Need need = bytes_needed(c, n);
        if (need.host > m.host) {
            if (why) *why = gib(need.host) + " of host memory, " + gib(m.host) + " is available";
            return false;
        }
        if (c.cuda && need.device + dev_reserve > m.dev_free) {
            if (why) *why = gib(need.device + dev_reserve) + " of GPU memory, " + m.dev_name + " has " + gib(m.dev_free) +
                            " free of " + gib(m.dev_total);
            return false;
        }
        return true;
    };
    std::string why;
    if (fits(c.N, &why)) return;
    // Largest n <= N that fits (the need grows with n).
    long long lo = 0, hi = c.N;
    while (lo < hi) {
        const long long mid = lo + (hi - lo + 1) / 2;
        if (fits(mid, nullptr)) lo = mid;
        else hi = mid - 1;
    }
    if (lo >= 1)
        fatal("%s needs %s: the largest --N that fits at this --B %lld, --H %lld, --D %lld is %lld", c.what.c_str(), why.c_str(),
              c.B, c.H, c.D, lo);
    fatal("%s needs %s, and even --N 1 does not fit: lower --B (%lld) or --H (%lld)", c.what.c_str(), why.c_str(), c.B, c.H);
}

// The CPU reference tests every query-key pair of every (b, h) against each of the pattern's
// branches: refused past --max-cpu-pairs, with the largest --N within it.
static void check_cpu_cost(const Plan& c, double max_cpu_pairs) {
    const double branches = (double)pattern_branches(c.pattern).size();
    const double pair_tests = (double)c.B * c.H * (double)c.N * c.N * branches;
    if (pair_tests <= max_cpu_pairs) return;
    const double n_max = std::floor(std::sqrt(max_cpu_pairs / ((double)c.B * c.H * branches)));
    char hint[96];
    if (n_max >= 1) std::snprintf(hint, sizeof hint, "the largest --N within it at this --B, --H is %.0f", n_max);
    else std::snprintf(hint, sizeof hint, "even --N 1 exceeds it at this --B, --H");
    fatal("--device cpu: --B %lld --H %lld --N %lld is %.3g pair tests (B*H*N^2 x %.0f branches), over --max-cpu-pairs %.3g "
          "(over %.0f minutes at the 1e8 pair tests/s of 2 cores; %s): lower --N, --B or --H, use --device cuda, or raise "
          "--max-cpu-pairs",
          c.B, c.H, c.N, pair_tests, branches, max_cpu_pairs, pair_tests / 1e8 / 60, hint);
}

// --out must be creatable (its directory exists and is writable, it is no directory) and its file
// system must have room for the file: checked before any compute.
// Never a file of another kind (a checkpoint, a KV cache, ...: core/output_path.h); an earlier
// --out file is overwritten.
static void check_out_path(const std::string& out, double file_bytes) {
    check_output_path(out, OutputKind::AttentionDump, "--out");
    const std::string tmp = out + ".tmp";  // what write_safetensors writes first
    const bool existed = access(tmp.c_str(), F_OK) == 0;
    FILE* f = std::fopen(tmp.c_str(), "ab");
    if (!f) fatal("--out %s: cannot create %s (%s): check that the directory exists and is writable", out.c_str(), tmp.c_str(),
                  std::strerror(errno));
    std::fclose(f);
    struct statvfs vfs;
    const bool have_vfs = statvfs(tmp.c_str(), &vfs) == 0;
    if (!existed) std::remove(tmp.c_str());
    if (have_vfs) {
        const double free_bytes = (double)vfs.f_bavail * (double)vfs.f_frsize;
        if (file_bytes > free_bytes)
            fatal("--out %s: the file needs %s but its file system has %s free: lower --N, --B or --H, or write elsewhere",
                  out.c_str(), gib(file_bytes).c_str(), gib(free_bytes).c_str());
    }
}

// The tensors, L (F64 for fp64, else F32) and room for the header.
static double file_bytes(const Plan& c) {
    const double tensors = (double)c.elements * c.elem * (c.backward ? 8 : 4);
    return tensors + (double)c.B * c.H * c.N * (c.dtype == "fp64" ? 8 : 4) + 65536;
}

static Plan plan_run(const Args& a, AttnPattern pattern) {
    check_row_stride(a);
    uint64_t elements = 0;
    const bool counted = count_elements(a, &elements);
    const Plan plan = describe_run(a, std::move(pattern), elements);
    if (plan.cuda) open_device();
    check_memory(plan);
    // Unreachable past the memory check (no host has 2^48 elements' worth), kept as a guard on
    // the 64-bit counts the buffers are sized with.
    if (!counted || elements > kMaxElements) fatal("%s: B*N*H*D is past 2^48 elements: lower --N, --B or --H", plan.what.c_str());
    if (!plan.cuda) check_cpu_cost(plan, a.max_cpu_pairs);
    std::string why;
    if (plan.cudnn && !attention_cudnn_supports(plan.pattern, plan.shape, false, &why)) fatal("--backend cudnn: %s", why.c_str());
    if (!a.out.empty()) check_out_path(a.out, file_bytes(plan));
    return plan;
}

// ---- Make the inputs and run: the CPU reference.

template <typename T>
static void run_cpu(Result& r, const Plan& plan, const char* dtype) {
    // q, k, v in buffers of their own (token stride H*D): the same values as the packed layout
    // the GPU path uses, so a seed gives the same tensors on both.
    const AttnShape& s = plan.shape;
    const size_t BN = (size_t)s.B * s.N, HD = (size_t)s.H * s.D, E = BN * HD;
    std::vector<T> q(E), k(E), v(E), o(E), lse((size_t)s.B * s.H * s.N);
    fill_qkv(q.data(), k.data(), v.data(), BN, HD, HD, plan.seed);
    std::vector<int> pos(s.N);
    for (int t = 0; t < s.N; t++) pos[t] = t;
    const std::vector<int> shp = {s.B, s.N, s.H, s.D};
    auto t0 = std::chrono::steady_clock::now();
    attention_forward(o.data(), lse.data(), q.data(), k.data(), v.data(), pos.data(), nullptr, plan.pattern, s, (T)plan.scale);
    r.fwd_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<T> dO, dq, dk, dv;
    if (plan.backward) {
        dO.resize(E), dq.assign(E, T(0)), dk.assign(E, T(0)), dv.assign(E, T(0));
        fill_plain(dO, plan.seed + 1000003);
        t0 = std::chrono::steady_clock::now();
        attention_backward(dq.data(), dk.data(), dv.data(), dO.data(), o.data(), lse.data(), q.data(), k.data(), v.data(),
                           pos.data(), nullptr, plan.pattern, s, (T)plan.scale);
        r.bwd_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    r.add("q", shp, std::move(q), dtype);
    r.add("k", shp, std::move(k), dtype);
    r.add("v", shp, std::move(v), dtype);
    r.add("o", shp, std::move(o), dtype);
    r.add("lse", {s.B, s.H, s.N}, std::move(lse), dtype);
    if (!plan.backward) return;
    r.add("do", shp, std::move(dO), dtype);
    r.add("dq", shp, std::move(dq), dtype);
    r.add("dk", shp, std::move(dk), dtype);
    r.add("dv", shp, std::move(dv), dtype);
}

// ---- Make the inputs and run: a GPU kernel.

// Checked here rather than by CUDA_CHECK, so that running out of GPU memory names the flags to lower.
template <typename T>
static T* device_alloc(size_t count, const char* what) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, count * sizeof(T));
    if (e != cudaSuccess)
        fatal("cudaMalloc of %s for %s failed (%s): lower --N, --B or --H", gib((double)count * sizeof(T)).c_str(), what,
              cudaGetErrorString(e));
    return (T*)p;
}

// A run's device memory: q, k, v are slices of one packed QKV buffer (B, N, 3, H, D), as in the
// model, and dq, dk, dv of one dQKV buffer.
struct DeviceBuffers {
    bf16 *qkv = nullptr, *o = nullptr, *dout = nullptr, *dqkv = nullptr;
    float *lse = nullptr, *workspace = nullptr;
    int* pos = nullptr;
    void free_all() {
        for (void* p : {(void*)qkv, (void*)o, (void*)dout, (void*)dqkv, (void*)lse, (void*)workspace, (void*)pos})
            CUDA_CHECK(cudaFree(p));
    }
};

// The kernels of a run, ours or cuDNN's, on its device buffers.
struct CudaKernels {
    const Plan& plan;
    const DeviceBuffers& d;
    size_t HD;  // elements from q to k and from k to v in a token's packed row
    void forward() const {
        const bf16 *q = d.qkv, *k = d.qkv + HD, *v = d.qkv + 2 * HD;
        if (plan.cudnn) attention_forward_cudnn(d.o, d.lse, q, k, v, d.pos, nullptr, plan.pattern, plan.shape, plan.scale, 0);
        else attention_forward_cuda(d.o, d.lse, q, k, v, d.pos, nullptr, plan.pattern, plan.shape, plan.scale, 0);
    }
    void backward() const {
        const bf16 *q = d.qkv, *k = d.qkv + HD, *v = d.qkv + 2 * HD;
        bf16 *dq = d.dqkv, *dk = d.dqkv + HD, *dv = d.dqkv + 2 * HD;
        if (plan.cudnn)
            attention_backward_cudnn(dq, dk, dv, d.dout, d.o, d.lse, q, k, v, d.pos, nullptr, plan.pattern, plan.shape, plan.scale,
                                     d.workspace, 0);
        else
            attention_backward_cuda(dq, dk, dv, d.dout, d.o, d.lse, q, k, v, d.pos, nullptr, plan.pattern, plan.shape, plan.scale,
                                    d.workspace, 0);
    }
};

// Median of `reps` timed calls of f, after one warm-up.
template <typename F>
static double median_ms(int reps, F&& f) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    f();
    std::vector<float> ms(reps);
    for (float& m : ms) {
        CUDA_CHECK(cudaEventRecord(e0));
        f();
        CUDA_CHECK(cudaEventRecord(e1));
        CUDA_CHECK(cudaEventSynchronize(e1));
        CUDA_CHECK(cudaEventElapsedTime(&m, e0, e1));
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return (double)ms[ms.size() / 2];
}

// q, k, v made on the host, put on the device with the positions, and kept in r unpacked; the
// packed host copy is freed on return (the device has it).
static DeviceBuffers upload_inputs(Result& r, const Plan& plan) {
    const AttnShape& s = plan.shape;
    const size_t BN = (size_t)s.B * s.N, HD = (size_t)s.H * s.D, E = BN * HD;
    std::vector<bf16> qkv(3 * E);
    fill_qkv(qkv.data(), qkv.data() + HD, qkv.data() + 2 * HD, BN, HD, 3 * HD, plan.seed);
    std::vector<int> pos(s.N);
    for (int t = 0; t < s.N; t++) pos[t] = t;
    DeviceBuffers d;
    d.qkv = device_alloc<bf16>(3 * E, "q, k, v");
    d.o = device_alloc<bf16>(E, "o");
    d.lse = device_alloc<float>((size_t)s.B * s.H * s.N, "lse");
    d.pos = device_alloc<int>(s.N, "positions");
    CUDA_CHECK(cudaMemcpy(d.qkv, qkv.data(), qkv.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d.pos, pos.data(), (size_t)s.N * 4, cudaMemcpyHostToDevice));
    const std::vector<int> shp = {s.B, s.N, s.H, s.D};
    for (int i = 0; i < 3; i++) r.add(std::string(1, "qkv"[i]), shp, unpack(qkv, i, BN, HD), "BF16");
    return d;
}

static void download_forward(Result& r, const DeviceBuffers& d, const AttnShape& s) {
    std::vector<bf16> o((size_t)s.B * s.N * s.H * s.D);
    std::vector<float> lse((size_t)s.B * s.H * s.N);
    CUDA_CHECK(cudaMemcpy(o.data(), d.o, o.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(lse.data(), d.lse, lse.size() * 4, cudaMemcpyDeviceToHost));
    r.add("o", {s.B, s.N, s.H, s.D}, std::move(o), "BF16");
    r.add("lse", {s.B, s.H, s.N}, std::move(lse), "F32");
}

// A random dO, the timed backward, and dO, dq, dk, dv into r.
static void run_cuda_backward(Result& r, DeviceBuffers& d, const Plan& plan) {
    const AttnShape& s = plan.shape;
    const size_t BN = (size_t)s.B * s.N, HD = (size_t)s.H * s.D, E = BN * HD;
    const size_t ws_bytes = plan.cudnn ? attention_cudnn_workspace_bytes(s) : attention_backward_workspace_bytes(s, plan.pattern);
    std::vector<bf16> dO(E);
    fill_plain(dO, plan.seed + 1000003);
    d.dout = device_alloc<bf16>(E, "do");
    d.dqkv = device_alloc<bf16>(3 * E, "dq, dk, dv");
    d.workspace = device_alloc<float>((ws_bytes + 3) / 4, "the backward workspace");
    CUDA_CHECK(cudaMemcpy(d.dout, dO.data(), dO.size() * 2, cudaMemcpyHostToDevice));
    const CudaKernels kernels{plan, d, HD};
    r.bwd_ms = median_ms(plan.reps, [&] { kernels.backward(); });
    const std::vector<int> shp = {s.B, s.N, s.H, s.D};
    r.add("do", shp, std::move(dO), "BF16");
    std::vector<bf16> dqkv(3 * E);
    CUDA_CHECK(cudaMemcpy(dqkv.data(), d.dqkv, dqkv.size() * 2, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 3; i++) r.add(std::string("d") + "qkv"[i], shp, unpack(dqkv, i, BN, HD), "BF16");
}

static void run_cuda(Result& r, const Plan& plan) {
    DeviceBuffers d = upload_inputs(r, plan);
    const CudaKernels kernels{plan, d, (size_t)plan.shape.H * plan.shape.D};
    r.fwd_ms = median_ms(plan.reps, [&] { kernels.forward(); });
    download_forward(r, d, plan.shape);
    if (plan.backward) run_cuda_backward(r, d, plan);
    d.free_all();
}

static Result run(const Plan& plan) {
    Result r;
    try {
        if (plan.cuda) run_cuda(r, plan);
        else if (plan.dtype == "fp64") run_cpu<double>(r, plan, "F64");
        else run_cpu<float>(r, plan, "F32");
    } catch (const std::bad_alloc&) {
        fatal("out of host memory running %s: lower --N, --B or --H, or free memory", plan.what.c_str());
    }
    return r;
}

// ---- Report.

// FLOPs from the pattern's own count of the query-key pairs it keeps (its module's pairs_kept):
// 4*D per pair forward, 2.5x that backward.
static void print_timings(const Args& a, const Plan& plan, const Result& r) {
    const double flops = 4.0 * a.B * a.D * pairs_kept(plan.pattern, a.N, a.H);
    auto tflops = [](double f, double ms) { return ms > 0 ? f / ms / 1e9 : 0.0; };
    std::printf("%s %s causal=%d B=%d N=%d H=%d D=%d %s: forward %.3f ms (%.1f TFLOP/s)", a.device.c_str(),
                plan.cuda ? a.backend.c_str() : "reference", (int)plan.pattern.causal, a.B, a.N, a.H, a.D, a.pattern.c_str(),
                r.fwd_ms, tflops(flops, r.fwd_ms));
    if (plan.backward) std::printf(", backward %.3f ms (%.1f TFLOP/s)", r.bwd_ms, tflops(2.5 * flops, r.bwd_ms));
    std::printf("\n");
}

static void write_file(const Args& a, const Plan& plan, const Result& r) {
    // The scale the kernels ran with (a float), exactly: a checker recomputing in float64
    // must not see it rounded to 6 digits (1/sqrt(128) would be off by 4e-7 relative).
    char scale_text[40];
    std::snprintf(scale_text, sizeof scale_text, "%.17g", (double)plan.scale);
    GPTConfig one;
    one.n_layer = 1, one.layer_attn = {plan.pattern};
    const std::string shape =
        "B,N,H,D=" + std::to_string(a.B) + "," + std::to_string(a.N) + "," + std::to_string(a.H) + "," + std::to_string(a.D);
    write_safetensors(a.out, r.tensors,
                      {{"pattern", config_to_json(one)}, {"shape", shape}, {"dtype", a.dtype},
                       {"device", a.device + (plan.cuda ? "/" + a.backend : "")}, {"seed", std::to_string(a.seed)},
                       {"scale", scale_text}},
                      kAttentionFileRole);
    std::printf("wrote %s\n", a.out.c_str());
}

static int main_body(int argc, char** argv) {
    const Args args = parse_args(argc, argv);
    validate_flags(args);
    check_output_path(args.out, OutputKind::AttentionDump, "--out");  // again with the free space, in plan_run
    OutputLock out_lock;  // one writer per --out (FILE.longnet-lock beside it)
    if (!args.out.empty()) out_lock.acquire(args.out, "--out");
    const Plan plan = plan_run(args, build_pattern(args));
    const Result result = run(plan);
    print_timings(args, plan, result);
    if (!args.out.empty()) write_file(args, plan, result);
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
