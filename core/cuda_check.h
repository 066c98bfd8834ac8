// CUDA_CHECK(call): every CUDA runtime call goes through it; on an error it prints file:line and
// CUDA's own message, then exits. CUDA_CHECK_LAST() after a kernel launch catches a bad launch
// configuration at once. In core/ because every layer of the project (the kernels' launchers,
// the model, the tools) checks its calls the same way; the library checks of cuBLAS, cuDNN and
// NCCL stay with their users (layers/cuda/common.cuh).
#pragma once
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

inline void cuda_check_(cudaError_t e, const char* what, const char* file, int line) {
    if (e == cudaSuccess) return;
    std::fflush(stdout);
    std::fprintf(stderr, "error: CUDA %s at %s:%d: %s\n", what, file, line, cudaGetErrorString(e));
    std::exit(1);
}
#define CUDA_CHECK(call) cuda_check_((call), #call, __FILE__, __LINE__)
#define CUDA_CHECK_LAST() cuda_check_(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
