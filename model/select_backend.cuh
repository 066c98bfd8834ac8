// Picks the backend for --device auto|cpu|cuda and --attention flash|cudnn, shared by train and
// infer. auto takes the GPU when there is a supported one (Hopper, sm_90: what the kernels are
// built for) and says why when it falls back to the CPU; an explicit --device cuda that cannot
// be served is an error.
#pragma once
#include <memory>
#include <string>
#include "model/backend.h"
#include "model/gpt_cuda.cuh"
#include "model/kv_cache_cuda.cuh"

enum class Device { Cpu, Cuda };

// "" when device 0 can run our kernels, else the reason it cannot.
inline std::string gpu_unavailable_reason() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return std::string("no usable CUDA driver (") + cudaGetErrorString(e) + ")";
    if (n == 0) return "no GPU";
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9 || prop.minor != 0)
        return std::string(prop.name) + " is sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
               "; this build's kernels are for sm_90 (H100/H200)";
    return "";
}

inline Device resolve_device(const std::string& flag) {
    if (flag != "auto" && flag != "cpu" && flag != "cuda") fatal("--device must be auto, cpu or cuda (got '%s')", flag.c_str());
    if (flag == "cpu") return Device::Cpu;
    const std::string why = gpu_unavailable_reason();
    if (why.empty()) return Device::Cuda;
    if (flag == "cuda") fatal("--device cuda: %s; use --device cpu", why.c_str());
    if (why != "no GPU" && why.rfind("no usable CUDA driver", 0) != 0)
        std::fprintf(stderr, "note: %s: running on the CPU\n", why.c_str());
    return Device::Cpu;
}

inline AttnBackend parse_attention_backend(const std::string& flag, bool doc_mask) {
    if (flag == "flash") return AttnBackend::Flash;
    if (flag != "cudnn") fatal("--attention must be flash or cudnn (got '%s')", flag.c_str());
    if (doc_mask) fatal("--attention cudnn has no document mask: add --doc-mask off, or use --attention flash");
    return AttnBackend::Cudnn;
}

// cuDNN's SDPA runs dense layers only, and its backward is not bit-reproducible; say so before
// anything is written (train calls this early; make_backend calls it again).
inline void check_attention_backend(AttnBackend attn, const GPTConfig& cfg, bool deterministic = false) {
    check_deterministic_backend(deterministic, attn);
    if (attn != AttnBackend::Cudnn) return;
    for (int l = 0; l < cfg.n_layer; l++)
        if (!pattern_cudnn_runs(cfg.attn(l)))
            fatal("--attention cudnn runs dense layers only, but layer %d is %s: use --attention flash", l,
                  attn_kind_name(cfg.attn(l).kind));
}

// deterministic: bit-reproducible training steps on the GPU (see CudaBackend); the CPU backend
// always is, so it ignores the flag.
inline std::unique_ptr<ModelBackend> make_backend(Device device, const GPTConfig& cfg, AttnBackend attn,
                                                  bool deterministic = false) {
    if (device == Device::Cuda) {
        check_attention_backend(attn, cfg, deterministic);
        return std::make_unique<CudaBackend>(cfg, attn, deterministic);
    }
    return std::make_unique<CpuBackend>(cfg);
}

// A KV cache (model/kv_cache.h) on the backend's device, for B sequences and chunks of up to
// max_chunk tokens.
inline std::unique_ptr<IncrementalModel> make_kv_cache(const ModelBackend& model, int B, int max_chunk) {
    if (auto* gpu = dynamic_cast<const CudaBackend*>(&model)) return std::make_unique<KVCacheCuda>(*gpu, B, max_chunk);
    if (auto* cpu = dynamic_cast<const CpuBackend*>(&model)) return std::make_unique<CpuIncremental>(cpu->model(), B, max_chunk);
    fatal("internal: no KV cache for backend %s", model.name().c_str());
}
