// Shared CUDA helpers: every CUDA, cuBLAS(Lt), cuDNN and NCCL call goes through a check
// macro that prints file:line and the library's own message, then exits.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include "core/cuda_check.h"  // CUDA_CHECK, CUDA_CHECK_LAST
#include "layers/common.h"

typedef __nv_bfloat16 bf16;


inline void cublas_check_(cublasStatus_t s, const char* what, const char* file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    std::fflush(stdout);
    std::fprintf(stderr, "error: cuBLAS %s at %s:%d: %s\n", what, file, line, cublasLtGetStatusString(s));
    std::exit(1);
}
#define CUBLAS_CHECK(call) cublas_check_((call), #call, __FILE__, __LINE__)

inline int ceil_div(long long a, long long b) { return (int)((a + b - 1) / b); }
