// attention_tool: runs one attention pattern at a given B, N, H, D, dtype and seed, on the CPU
// reference or a GPU kernel, and writes its inputs, output and log-sum-exp (and, with
// --backward, a random dO and the gradients) to a safetensors file that any tool can check.
//   attention_tool --pattern dilated --segments 2048,4096 --dilations 1,2 --B 1 --N 8192 --H 12 --D 64
//                  --dtype bf16 --device cuda --seed 7 --backward --out attn.safetensors
// Tensors: q, k, v, o, do, dq, dk, dv (B, N, H, D) in the run's dtype; lse (B, H, N) in F32
// (F64 for --dtype fp64). Metadata: the pattern (as the model's JSON), shape, dtype, device, seed.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
#include "data/rng.h"
#include "layers/attention.h"
#include "layers/cuda/attention_cudnn.cuh"
#include "layers/cuda/attention_flash.cuh"
#include "model/flags.h"
#include "model/gpt_config.h"
#include "model/safetensors.h"

// Fresh inputs: N(0, 1) from a splitmix64 stream, so a seed gives the same tensors everywhere.
static void fill_normal(std::vector<float>& x, uint64_t seed) {
    SplitMix64 rng(seed * 0x9E3779B97F4A7C15ull + 3);
    auto uniform = [&]() { return ((rng.next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };  // (0, 1)
    for (float& v : x) v = (float)(std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()));
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
    std::vector<std::vector<char>> storage;  // keeps the bytes the tensors point to alive
    double fwd_ms = 0, bwd_ms = 0;
    template <typename T>
    void add(const std::string& name, std::vector<int> shape, const std::vector<T>& data, const char* dtype) {
        storage.emplace_back((const char*)data.data(), (const char*)(data.data() + data.size()));
        tensors.push_back({name, shape, storage.back().data(), dtype});
    }
};

template <typename T>
static void run_cpu(Result& r, const std::vector<float>& qkv32, const std::vector<float>& do32, const AttnPattern& pat,
                    AttnShape s, float scale, bool backward, const char* dtype, const char* lse_dtype) {
    const size_t BN = (size_t)s.B * s.N, HD = (size_t)s.H * s.D;
    std::vector<T> qkv(qkv32.begin(), qkv32.end()), o(BN * HD), lse((size_t)s.B * s.H * s.N);
    std::vector<int> pos(s.N);
    for (int t = 0; t < s.N; t++) pos[t] = t;
    const std::vector<int> shp = {s.B, s.N, s.H, s.D};
    auto t0 = std::chrono::steady_clock::now();
    attention_forward(o.data(), lse.data(), qkv.data(), qkv.data() + HD, qkv.data() + 2 * HD, pos.data(), nullptr, pat, s, (T)scale);
    r.fwd_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (int i = 0; i < 3; i++) r.add(std::string(1, "qkv"[i]), shp, unpack(qkv, i, BN, HD), dtype);
    r.add("o", shp, o, dtype);
    r.add("lse", {s.B, s.H, s.N}, lse, lse_dtype);
    if (!backward) return;
    std::vector<T> dO(do32.begin(), do32.end()), dqkv(BN * 3 * HD, T(0));
    t0 = std::chrono::steady_clock::now();
    attention_backward(dqkv.data(), dqkv.data() + HD, dqkv.data() + 2 * HD, dO.data(), o.data(), lse.data(), qkv.data(),
                       qkv.data() + HD, qkv.data() + 2 * HD, pos.data(), nullptr, pat, s, (T)scale);
    r.bwd_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    r.add("do", shp, dO, dtype);
    for (int i = 0; i < 3; i++) r.add(std::string("d") + "qkv"[i], shp, unpack(dqkv, i, BN, HD), dtype);
}

static void run_cuda(Result& r, const std::vector<float>& qkv32, const std::vector<float>& do32, const AttnPattern& pat,
                     AttnShape s, float scale, bool backward, bool cudnn, int reps) {
    const size_t BN = (size_t)s.B * s.N, HD = (size_t)s.H * s.D;
    std::vector<bf16> qkv(qkv32.size()), dO(do32.size());
    for (size_t i = 0; i < qkv.size(); i++) qkv[i] = __float2bfloat16(qkv32[i]);
    for (size_t i = 0; i < dO.size(); i++) dO[i] = __float2bfloat16(do32[i]);
    std::vector<int> pos(s.N);
    for (int t = 0; t < s.N; t++) pos[t] = t;
    const size_t ws_bytes = cudnn ? attention_cudnn_workspace_bytes(s) : attention_backward_workspace_bytes(s);
    bf16 *d_qkv, *d_o, *d_do, *d_dqkv;
    float *d_lse, *d_ws;
    int* d_pos;
    CUDA_CHECK(cudaMalloc(&d_qkv, qkv.size() * 2));
    CUDA_CHECK(cudaMalloc(&d_o, BN * HD * 2));
    CUDA_CHECK(cudaMalloc(&d_lse, (size_t)s.B * s.H * s.N * 4));
    CUDA_CHECK(cudaMalloc(&d_pos, s.N * 4));
    CUDA_CHECK(cudaMemcpy(d_qkv, qkv.data(), qkv.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_pos, pos.data(), s.N * 4, cudaMemcpyHostToDevice));
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
    std::vector<bf16> o(BN * HD);
    std::vector<float> lse((size_t)s.B * s.H * s.N);
    CUDA_CHECK(cudaMemcpy(o.data(), d_o, o.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(lse.data(), d_lse, lse.size() * 4, cudaMemcpyDeviceToHost));
    const std::vector<int> shp = {s.B, s.N, s.H, s.D};
    for (int i = 0; i < 3; i++) r.add(std::string(1, "qkv"[i]), shp, unpack(qkv, i, BN, HD), "BF16");
    r.add("o", shp, o, "BF16");
    r.add("lse", {s.B, s.H, s.N}, lse, "F32");
    if (backward) {
        CUDA_CHECK(cudaMalloc(&d_do, BN * HD * 2));
        CUDA_CHECK(cudaMalloc(&d_dqkv, qkv.size() * 2));
        CUDA_CHECK(cudaMalloc(&d_ws, ws_bytes));
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
        std::vector<bf16> dqkv(qkv.size());
        CUDA_CHECK(cudaMemcpy(dqkv.data(), d_dqkv, dqkv.size() * 2, cudaMemcpyDeviceToHost));
        r.add("do", shp, dO, "BF16");
        for (int i = 0; i < 3; i++) r.add(std::string("d") + "qkv"[i], shp, unpack(dqkv, i, BN, HD), "BF16");
        cudaFree(d_do), cudaFree(d_dqkv), cudaFree(d_ws);
    }
    cudaFree(d_qkv), cudaFree(d_o), cudaFree(d_lse), cudaFree(d_pos);
}

int main(int argc, char** argv) {
    std::string pattern = "dense", segments = "2048,4096,8192", dilations = "1,2,4", dtype = "fp32", device = "cpu",
                backend = "flash", out;
    int B = 1, N = 1024, H = 12, D = 64, seed = 1, reps = 5;
    bool causal = true, backward = false;
    float scale = 0;
    Flags flags("attention_tool", "Run one attention pattern and write its inputs, outputs and gradients to safetensors.");
    flags.add_string("pattern", &pattern, "dense or dilated");
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
    flags.add_string("out", &out, "safetensors file to write (none: only print timings)");
    flags.parse(argc, argv);
    if (B < 1 || N < 1 || H < 1 || reps < 1) fatal("--B, --N, --H, --reps must be positive");
    if (D != 64 && D != 128) fatal("--D %d: head dims 64 and 128 are supported", D);
    const AttnPattern pat = layer_patterns_from_flags(1, pattern, segments, dilations, "")[0];
    AttnPattern p = pat;
    p.causal = causal;
    const AttnShape s{B, N, H, D, 3 * H * D};
    if (scale == 0) scale = 1.0f / std::sqrt((float)D);
    const bool cuda = device == "cuda";
    if (!cuda && device != "cpu") fatal("--device must be cpu or cuda (got '%s')", device.c_str());
    if (cuda && dtype != "bf16") fatal("--device cuda runs --dtype bf16 (got %s)", dtype.c_str());
    if (!cuda && dtype != "fp32" && dtype != "fp64") fatal("--device cpu runs --dtype fp32 or fp64 (got %s)", dtype.c_str());
    if (backend != "flash" && backend != "cudnn") fatal("--backend must be flash or cudnn");
    std::string why;
    if (cuda && backend == "cudnn" && !attention_cudnn_supports(p, s, false, &why)) fatal("--backend cudnn: %s", why.c_str());

    std::vector<float> qkv((size_t)B * N * 3 * H * D), dO((size_t)B * N * H * D);
    fill_normal(qkv, (uint64_t)seed);
    fill_normal(dO, (uint64_t)seed + 1000003);
    Result r;
    if (cuda) run_cuda(r, qkv, dO, p, s, scale, backward, backend == "cudnn", reps);
    else if (dtype == "fp64") run_cpu<double>(r, qkv, dO, p, s, scale, backward, "F64", "F64");
    else run_cpu<float>(r, qkv, dO, p, s, scale, backward, "F32", "F32");

    const double flops = 4.0 * B * D * pairs_kept(p, N, H);
    std::printf("%s %s causal=%d B=%d N=%d H=%d D=%d %s: forward %.3f ms (%.1f TFLOP/s)", device.c_str(),
                cuda ? backend.c_str() : "reference", (int)causal, B, N, H, D, pattern.c_str(), r.fwd_ms,
                flops / r.fwd_ms / 1e9);
    if (backward) std::printf(", backward %.3f ms (%.1f TFLOP/s)", r.bwd_ms, 2.5 * flops / r.bwd_ms / 1e9);
    std::printf("\n");
    if (!out.empty()) {
        GPTConfig one;
        one.n_layer = 1, one.layer_attn = {p};
        write_safetensors(out, r.tensors,
                          {{"pattern", config_to_json(one)}, {"shape", "B,N,H,D=" + std::to_string(B) + "," + std::to_string(N) +
                                                                          "," + std::to_string(H) + "," + std::to_string(D)},
                           {"dtype", dtype}, {"device", device + (cuda ? "/" + backend : "")}, {"seed", std::to_string(seed)},
                           {"scale", std::to_string(scale)}});
        std::printf("wrote %s\n", out.c_str());
    }
    return 0;
}
