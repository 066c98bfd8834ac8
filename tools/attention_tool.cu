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
#include "data/rng.h"
#include "layers/attention.h"
#include "layers/cuda/attention_cudnn.h"
#include "layers/cuda/attention_flash.h"
#include "core/flags.h"
#include "model/gpt_config.h"
#include "model/host_memory.h"
#include "model/safetensors.h"

// Limits on the configuration (beyond them a run is refused with a one-line error):
constexpr int kToolMaxBranches = 64;        // dilated branches (LongNet uses 5; the model allows 64 too)
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

// Query-key pairs the pattern keeps over H heads of one sequence of N tokens (as pairs_kept in
// layers/attention_pattern.h), in closed form: O(branches * min(r, H)) work and no int
// arithmetic that can overflow, whatever N and H are.
static double pairs_kept_total(const AttnPattern& p, long long N, long long H) {
    auto pairs = [&](double n) { return p.causal ? n * (n + 1) / 2 : n * n; };
    if (p.kind == AttnKind::Dense) return (double)H * pairs((double)N);
    double total = 0;
    for (size_t i = 0; i < p.segments.size(); i++) {
        const long long w = std::min<long long>(p.segments[i], N), r = p.dilations[i];
        const long long full = N / w, last = N % w;  // `full` segments of w tokens, then one of `last`
        for (long long c = 0; c < std::min(r, H); c++) {
            const long long heads = H / r + (c < H % r ? 1 : 0);  // heads whose class h % r is c
            auto kept = [&](long long len) { return c < len ? (double)((len - 1 - c) / r + 1) : 0.0; };
            total += heads * (full * pairs(kept(w)) + pairs(kept(last)));
        }
    }
    return total;
}

// What a run allocates, in bytes, for a sequence of N tokens (the rest of the config fixed).
struct Config {
    long long B, H, D;
    bool cuda, backward, cudnn;
    size_t elem;  // bytes per element of q, k, v, o and gradients (and of L on the CPU)
    AttnPattern pattern;
};
struct Need {
    double host, device;
};
static Need bytes_needed(const Config& c, long long N) {
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

// Fatal unless the run fits: host memory always, GPU memory with --device cuda. The message names
// the flags and the largest --N that fits with the other flags unchanged.
// The byte counts are doubles, so no size overflows here; the 64-bit element counts the buffers
// are allocated with are checked after this passes.
static void check_memory(const Config& c, long long N, const std::string& what) {
    const double host_avail = host_bytes_available() * 0.9;  // leave room for the rest of the process
    double dev_free = 0, dev_total = 0;
    const double dev_reserve = 512.0 * 1048576;  // CUDA context, cuDNN plans and their workspaces
    std::string dev_name;
    if (c.cuda) {
        size_t f = 0, t = 0;
        CUDA_CHECK(cudaMemGetInfo(&f, &t));
        dev_free = (double)f, dev_total = (double)t;
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        dev_name = prop.name;
    }
    auto fits = [&](long long n, std::string* why) {
        const Need need = bytes_needed(c, n);
        if (need.host > host_avail) {
            if (why) *why = gib(need.host) + " of host memory, " + gib(host_avail) + " is available";
            return false;
        }
        if (c.cuda && need.device + dev_reserve > dev_free) {
            if (why) *why = gib(need.device + dev_reserve) + " of GPU memory, " + dev_name + " has " + gib(dev_free) +
                            " free of " + gib(dev_total);
            return false;
        }
        return true;
    };
    std::string why;
    if (fits(N, &why)) return;
    // Largest n <= N that fits (the need grows with n).
    long long lo = 0, hi = N;
    while (lo < hi) {
        const long long mid = lo + (hi - lo + 1) / 2;
        if (fits(mid, nullptr)) lo = mid;
        else hi = mid - 1;
    }
    if (lo >= 1)
        fatal("%s needs %s: the largest --N that fits at this --B %lld, --H %lld, --D %lld is %lld", what.c_str(), why.c_str(),
              c.B, c.H, c.D, lo);
    fatal("%s needs %s, and even --N 1 does not fit: lower --B (%lld) or --H (%lld)", what.c_str(), why.c_str(), c.B, c.H);
}

// --out must be creatable (its directory exists and is writable, it is no directory) and its file
// system must have room for the file: checked before any compute.
static void check_out_path(const std::string& out, double file_bytes) {
    struct stat st;
    if (stat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fatal("--out %s is a directory: give a file name", out.c_str());
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

// Parses "2048,4096" for --segments / --dilations, refusing long lists before parsing them (so an
// error never echoes megabytes of flag).
static std::vector<int> branch_list(const std::string& text, const char* flag) {
    const size_t items = std::count(text.begin(), text.end(), ',') + 1;
    if (items > (size_t)kToolMaxBranches || text.size() > (size_t)kToolMaxBranches * 12)
        fatal("%s has %zu entries (%zu characters): at most %d branches are supported", flag, items, text.size(), kToolMaxBranches);
    return parse_int_list(text, flag);
}

template <typename T>
static void run_cpu(Result& r, const AttnPattern& pat, AttnShape s, float scale, bool backward, uint64_t seed,
                    const char* dtype, const char* lse_dtype) {
    // q, k, v in buffers of their own (token stride H*D): the same values as the packed layout
    // the GPU path uses, so a seed gives the same tensors on both.
    const size_t BN = (size_t)s.B * s.N, HD = (size_t)s.H * s.D, E = BN * HD;
    std::vector<T> q(E), k(E), v(E), o(E), lse((size_t)s.B * s.H * s.N);
    fill_qkv(q.data(), k.data(), v.data(), BN, HD, HD, seed);
    std::vector<int> pos(s.N);
    for (int t = 0; t < s.N; t++) pos[t] = t;
    const std::vector<int> shp = {s.B, s.N, s.H, s.D};
    auto t0 = std::chrono::steady_clock::now();
    attention_forward(o.data(), lse.data(), q.data(), k.data(), v.data(), pos.data(), nullptr, pat, s, (T)scale);
    r.fwd_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<T> dO, dq, dk, dv;
    if (backward) {
        dO.resize(E), dq.assign(E, T(0)), dk.assign(E, T(0)), dv.assign(E, T(0));
        fill_plain(dO, seed + 1000003);
        t0 = std::chrono::steady_clock::now();
        attention_backward(dq.data(), dk.data(), dv.data(), dO.data(), o.data(), lse.data(), q.data(), k.data(), v.data(),
                           pos.data(), nullptr, pat, s, (T)scale);
        r.bwd_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    r.add("q", shp, std::move(q), dtype);
    r.add("k", shp, std::move(k), dtype);
    r.add("v", shp, std::move(v), dtype);
    r.add("o", shp, std::move(o), dtype);
    r.add("lse", {s.B, s.H, s.N}, std::move(lse), lse_dtype);
    if (!backward) return;
    r.add("do", shp, std::move(dO), dtype);
    r.add("dq", shp, std::move(dq), dtype);
    r.add("dk", shp, std::move(dk), dtype);
    r.add("dv", shp, std::move(dv), dtype);
}

template <typename T>
static T* device_alloc(size_t count, const char* what) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, count * sizeof(T));
    if (e != cudaSuccess)
        fatal("cudaMalloc of %s for %s failed (%s): lower --N, --B or --H", gib((double)count * sizeof(T)).c_str(), what,
              cudaGetErrorString(e));
    return (T*)p;
}

static void run_cuda(Result& r, const AttnPattern& pat, AttnShape s, float scale, bool backward, bool cudnn, int reps,
                     uint64_t seed) {
    const size_t BN = (size_t)s.B * s.N, HD = (size_t)s.H * s.D, E = BN * HD;
    std::vector<bf16> qkv(3 * E);
    fill_qkv(qkv.data(), qkv.data() + HD, qkv.data() + 2 * HD, BN, HD, 3 * HD, seed);
    std::vector<int> pos(s.N);
    for (int t = 0; t < s.N; t++) pos[t] = t;
    const size_t ws_bytes = cudnn ? attention_cudnn_workspace_bytes(s) : attention_backward_workspace_bytes(s, pat);
    bf16* d_qkv = device_alloc<bf16>(3 * E, "q, k, v");
    bf16* d_o = device_alloc<bf16>(E, "o");
    float* d_lse = device_alloc<float>((size_t)s.B * s.H * s.N, "lse");
    int* d_pos = device_alloc<int>(s.N, "positions");
    bf16 *d_do = nullptr, *d_dqkv = nullptr;
    float* d_ws = nullptr;
    CUDA_CHECK(cudaMemcpy(d_qkv, qkv.data(), qkv.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_pos, pos.data(), (size_t)s.N * 4, cudaMemcpyHostToDevice));
    const std::vector<int> shp = {s.B, s.N, s.H, s.D};
    for (int i = 0; i < 3; i++) r.add(std::string(1, "qkv"[i]), shp, unpack(qkv, i, BN, HD), "BF16");
    std::vector<bf16>().swap(qkv);  // free the packed host copy: the device has it
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    auto fwd = [&] {
        if (cudnn) attention_forward_cudnn(d_o, d_lse, d_qkv, d_qkv + HD, d_qkv + 2 * HD, d_pos, nullptr, pat, s, scale, 0);
        else attention_forward_cuda(d_o, d_lse, d_qkv, d_qkv + HD, d_qkv + 2 * HD, d_pos, nullptr, pat, s, scale, 0);
    };
    auto time = [&](auto&& f) {  // median of reps, after one warm-up
        f();
        std::vector<float> ms(reps);
        for (float& m : ms) {
            CUDA_CHECK(cudaEventRecord(e0));
            f();
            CUDA_CHECK(cudaEventRecord(e1));
            CUDA_CHECK(cudaEventSynchronize(e1));
            CUDA_CHECK(cudaEventElapsedTime(&m, e0, e1));
        }
        std::sort(ms.begin(), ms.end());
        return (double)ms[ms.size() / 2];
    };
    r.fwd_ms = time(fwd);
    std::vector<bf16> o(E);
    std::vector<float> lse((size_t)s.B * s.H * s.N);
    CUDA_CHECK(cudaMemcpy(o.data(), d_o, o.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(lse.data(), d_lse, lse.size() * 4, cudaMemcpyDeviceToHost));
    r.add("o", shp, std::move(o), "BF16");
    r.add("lse", {s.B, s.H, s.N}, std::move(lse), "F32");
    if (backward) {
        std::vector<bf16> dO(E);
        fill_plain(dO, seed + 1000003);
        d_do = device_alloc<bf16>(E, "do");
        d_dqkv = device_alloc<bf16>(3 * E, "dq, dk, dv");
        d_ws = device_alloc<float>((ws_bytes + 3) / 4, "the backward workspace");
        CUDA_CHECK(cudaMemcpy(d_do, dO.data(), dO.size() * 2, cudaMemcpyHostToDevice));
        auto bwd = [&] {
            if (cudnn)
                attention_backward_cudnn(d_dqkv, d_dqkv + HD, d_dqkv + 2 * HD, d_do, d_o, d_lse, d_qkv, d_qkv + HD,
                                         d_qkv + 2 * HD, d_pos, nullptr, pat, s, scale, d_ws, 0);
            else
                attention_backward_cuda(d_dqkv, d_dqkv + HD, d_dqkv + 2 * HD, d_do, d_o, d_lse, d_qkv, d_qkv + HD,
                                        d_qkv + 2 * HD, d_pos, nullptr, pat, s, scale, d_ws, 0);
        };
        r.bwd_ms = time(bwd);
        r.add("do", shp, std::move(dO), "BF16");
        std::vector<bf16> dqkv(3 * E);
        CUDA_CHECK(cudaMemcpy(dqkv.data(), d_dqkv, dqkv.size() * 2, cudaMemcpyDeviceToHost));
        for (int i = 0; i < 3; i++) r.add(std::string("d") + "qkv"[i], shp, unpack(dqkv, i, BN, HD), "BF16");
        cudaFree(d_do), cudaFree(d_dqkv), cudaFree(d_ws);
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaFree(d_qkv), cudaFree(d_o), cudaFree(d_lse), cudaFree(d_pos);
}

static int main_body(int argc, char** argv) {
    std::string pattern = "dense", segments = "2048,4096,8192", dilations = "1,2,4", dtype = "fp32", device = "cpu",
                backend = "flash", out;
    int B = 1, N = 1024, H = 12, D = 64, seed = 1, reps = 5;
    bool causal = true, backward = false;
    float scale = 0, max_cpu_pairs = (float)kDefaultMaxCpuPairs;
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
    flags.add_string("pattern", &pattern, "dense, dilated or block-sparse");
    PatternFlags bs;  // block-sparse builders (layers/patterns/block_sparse.h)
    flags.add_int("block", &bs.block, "block-sparse: block size");
    flags.add_int("window", &bs.window, "block-sparse: keys less than this many tokens back");
    flags.add_int("global", &bs.global, "block-sparse: the first g tokens are global");
    flags.add_string("dilated-blocks", &bs.dilated_blocks, "block-sparse: r,W: key blocks at block distances that are multiples of r within W tokens");
    flags.add_string("random-blocks", &bs.random_blocks, "block-sparse: count,seed: random key blocks per query block and head");
    flags.add_string("layout-file", &bs.layout_file, "block-sparse: explicit key blocks per query block");
    flags.add_string("segments", &segments, "dilated: segment length of each branch");
    flags.add_string("dilations", &dilations, "dilated: dilation rate of each branch");
    flags.add_bool("causal", &causal, "mask keys after the query");
    flags.add_int("B", &B, "batch");
    flags.add_int("N", &N, "sequence length");
    flags.add_int("H", &H, "heads");
    flags.add_int("D", &D, "head dim");
    flags.add_float("scale", &scale, "softmax scale (0: 1/sqrt(D))");
    flags.add_string("dtype", &dtype, "fp32 or fp64 (cpu), bf16 (cuda)");
    flags.add_string("device", &device, "cpu (the reference) or cuda");
    flags.add_string("backend", &backend, "cuda: flash (ours) or cudnn");
    flags.add_int("seed", &seed, "seed of q, k, v (and dO)");
    flags.add_bool("backward", &backward, "also run backward with a random dO");
    flags.add_int("reps", &reps, "cuda: timed repetitions (median reported)");
    flags.add_float("max-cpu-pairs", &max_cpu_pairs, "cpu: refuse runs of more than this many B*H*N^2 x branches pair tests");
    flags.add_string("out", &out, "safetensors file to write (none: only print timings)");
    flags.parse(argc, argv);

    // Each flag on its own, naming it.
    auto positive = [](const char* flag, int v) {
        if (v < 1) fatal("--%s %d: must be at least 1", flag, v);
    };
    positive("B", B), positive("N", N), positive("H", H);
    if (D != 64 && D != 128) fatal("--D %d: head dims 64 and 128 are supported", D);
    if (reps < 1 || reps > kMaxReps) fatal("--reps %d: give 1 to %d", reps, kMaxReps);
    // Positive only: a softmax scale is an inverse temperature, and the flash kernels take the row
    // maximum of the unscaled scores (layers/cuda/attention/softmax.cuh), which is the
    // scaled maximum only for scale > 0 (a negative one gave inf on an H100).
    if (!std::isfinite(scale) || scale < 0 || scale > kMaxScale)
        fatal("--scale %g: give a positive number up to %g (0: 1/sqrt(D))", scale, kMaxScale);
    if (!std::isfinite(max_cpu_pairs) || max_cpu_pairs <= 0) fatal("--max-cpu-pairs %g: give a positive number", max_cpu_pairs);
    const bool cuda = device == "cuda";
    if (!cuda && device != "cpu") fatal("--device must be cpu or cuda (got '%s')", device.c_str());
    if (cuda && dtype != "bf16") fatal("--device cuda runs --dtype bf16 (got %s)", dtype.c_str());
    if (!cuda && dtype != "fp32" && dtype != "fp64") fatal("--device cpu runs --dtype fp32 or fp64 (got %s)", dtype.c_str());
    if (backend != "flash" && backend != "cudnn") fatal("--backend must be flash or cudnn (got '%s')", backend.c_str());

    AttnPattern p;
    p.causal = causal;
    if (pattern == "dilated") {
        p.kind = AttnKind::Dilated;
        p.segments = branch_list(segments, "--segments");
        p.dilations = branch_list(dilations, "--dilations");
        const std::string why = pattern_error(p);
        if (!why.empty())
            fatal("--pattern dilated --segments %s --dilations %s: %s", segments.c_str(), dilations.c_str(), why.c_str());
    } else if (pattern == "block-sparse") {
        p = pattern_from_flags("block-sparse", bs);  // validated there, naming the flag
        p.causal = causal;
        if (p.layout && p.layout->heads != 1 && p.layout->heads != H)
            fatal("--layout-file %s has rows for %d heads but --H is %d", p.layout->source.c_str(), p.layout->heads, H);
        if (cuda && backend == "flash")
            fatal("--pattern block-sparse runs on the CPU only for now (our flash kernels do not take it yet): use --device cpu");
    } else if (pattern != "dense") {
        fatal("--pattern must be dense, dilated or block-sparse (got '%s')", pattern.c_str());
    }

    // Sizes in 64 bits. The kernels and the reference index tokens with a row stride of 3*H*D
    // elements (int): H is capped so that it fits.
    if ((long long)H * 3 * D > 2147483647LL)
        fatal("--H %d: at most %lld heads at --D %d (the row stride 3*H*D must fit in 32 bits)", H, 2147483647LL / (3 * D), D);
    uint64_t tokens = 0, elements = 0;
    const bool overflow = !mul_ok((uint64_t)B, (uint64_t)N, &tokens) || !mul_ok(tokens, (uint64_t)H * D, &elements);
    Config cfg{B, H, D, cuda, backward, backend == "cudnn", dtype == "fp64" ? 8u : dtype == "fp32" ? 4u : 2u, p};
    char what[256];
    std::snprintf(what, sizeof what, "--B %d --N %d --H %d --D %d (--device %s, --dtype %s%s)", B, N, H, D, device.c_str(),
                  dtype.c_str(), backward ? ", --backward" : "");
    if (cuda) {
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
    check_memory(cfg, N, what);
    // Unreachable past the memory check (no host has 2^48 elements' worth), kept as a guard on
    // the 64-bit counts the buffers are sized with.
    if (overflow || elements > kMaxElements) fatal("%s: B*N*H*D is past 2^48 elements: lower --N, --B or --H", what);

    // The CPU reference tests every query-key pair of every (b, h) against the pattern.
    const double branches = (double)std::max<size_t>(1, p.segments.size());
    const double pair_tests = (double)B * H * (double)N * N * branches;
    if (!cuda && pair_tests > max_cpu_pairs) {
        const double n_max = std::floor(std::sqrt((double)max_cpu_pairs / ((double)B * H * branches)));
        char hint[96];
        if (n_max >= 1) std::snprintf(hint, sizeof hint, "the largest --N within it at this --B, --H is %.0f", n_max);
        else std::snprintf(hint, sizeof hint, "even --N 1 exceeds it at this --B, --H");
        fatal("--device cpu: --B %d --H %d --N %d is %.3g pair tests (B*H*N^2 x %.0f branches), over --max-cpu-pairs %.3g "
              "(over %.0f minutes at the 1e8 pair tests/s of 2 cores; %s): lower --N, --B or --H, use --device cuda, or raise "
              "--max-cpu-pairs",
              B, H, N, pair_tests, branches, (double)max_cpu_pairs, pair_tests / 1e8 / 60, hint);
    }

    const AttnShape s{B, N, H, D, cuda ? 3 * H * D : H * D};
    if (scale == 0) scale = 1.0f / std::sqrt((float)D);
    std::string why;
    if (cuda && backend == "cudnn" && !attention_cudnn_supports(p, s, false, &why)) fatal("--backend cudnn: %s", why.c_str());
    if (!out.empty()) {
        const double file_bytes = (double)elements * cfg.elem * (backward ? 8 : 4) + (double)B * H * N * (dtype == "fp64" ? 8 : 4);
        check_out_path(out, file_bytes + 65536);
    }

    Result r;
    try {
        if (cuda) run_cuda(r, p, s, scale, backward, backend == "cudnn", reps, (uint64_t)seed);
        else if (dtype == "fp64") run_cpu<double>(r, p, s, scale, backward, (uint64_t)seed, "F64", "F64");
        else run_cpu<float>(r, p, s, scale, backward, (uint64_t)seed, "F32", "F32");
    } catch (const std::bad_alloc&) {
        fatal("out of host memory running %s: lower --N, --B or --H, or free memory", what);
    }

    const double flops = 4.0 * B * D * pairs_kept_total(p, N, H);
    auto tflops = [](double f, double ms) { return ms > 0 ? f / ms / 1e9 : 0.0; };
    std::printf("%s %s causal=%d B=%d N=%d H=%d D=%d %s: forward %.3f ms (%.1f TFLOP/s)", device.c_str(),
                cuda ? backend.c_str() : "reference", (int)causal, B, N, H, D, pattern.c_str(), r.fwd_ms,
                tflops(flops, r.fwd_ms));
    if (backward) std::printf(", backward %.3f ms (%.1f TFLOP/s)", r.bwd_ms, tflops(2.5 * flops, r.bwd_ms));
    std::printf("\n");
    if (!out.empty()) {
        // The scale the kernels ran with (a float), exactly: a checker recomputing in float64
        // must not see it rounded to 6 digits (1/sqrt(128) would be off by 4e-7 relative).
        char scale_text[40];
        std::snprintf(scale_text, sizeof scale_text, "%.17g", (double)scale);
        GPTConfig one;
        one.n_layer = 1, one.layer_attn = {p};
        write_safetensors(out, r.tensors,
                          {{"pattern", config_to_json(one)}, {"shape", "B,N,H,D=" + std::to_string(B) + "," + std::to_string(N) +
                                                                          "," + std::to_string(H) + "," + std::to_string(D)},
                           {"dtype", dtype}, {"device", device + (cuda ? "/" + backend : "")}, {"seed", std::to_string(seed)},
                           {"scale", scale_text}});
        std::printf("wrote %s\n", out.c_str());
    }
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
