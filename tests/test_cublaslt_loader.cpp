// cuBLASLt loaded at the first call (layers/cuda/cublaslt_loader.cpp), checked without a GPU:
// every function the programs call is found in the library and reaches it (the descriptors,
// layouts and preferences need no device and succeed; the handle, the heuristic and the product
// answer "not initialized" where no GPU is, and never crash); the library's own status strings
// come back. A name the loader looks up wrongly ends the program with one error line, so the
// test's summary line is missing and tests/run_all.sh counts it failed.
#include <cublasLt.h>
#include <cstdio>
#include <string>

#include "tests/check.h"

int main() {
    check(std::string(cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS)) == "success" &&
              std::string(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE)) != "success",
          "cublasLtGetStatusString: the library's own strings");

    cublasLtHandle_t handle = nullptr;
    const cublasStatus_t created = cublasLtCreate(&handle);
    check(created == CUBLAS_STATUS_SUCCESS || created == CUBLAS_STATUS_NOT_INITIALIZED,
          "cublasLtCreate: reached (success with a GPU, not initialized without)", cublasLtGetStatusString(created));

    cublasLtMatmulDesc_t desc = nullptr;
    const cublasOperation_t op = CUBLAS_OP_T;
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS && desc &&
              cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof(op)) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS,
          "cublasLtMatmulDescCreate, cublasLtMatmulDescSetAttribute");

    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, 64, 32, 64) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, 64, 48, 64) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, 32, 48, 32) == CUBLAS_STATUS_SUCCESS && a && b && d,
          "cublasLtMatrixLayoutCreate");

    cublasLtMatmulPreference_t pref = nullptr;
    const size_t workspace = 1 << 20;
    check(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS && pref &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)) ==
                  CUBLAS_STATUS_SUCCESS,
          "cublasLtMatmulPreferenceCreate, cublasLtMatmulPreferenceSetAttribute");

    if (created != CUBLAS_STATUS_SUCCESS) {  // no GPU: the calls that need one answer, they do not run
        cublasLtMatmulHeuristicResult_t result = {};
        int found = -1;
        const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(nullptr, desc, a, b, d, d, pref, 1, &result, &found);
        check(h != CUBLAS_STATUS_SUCCESS, "cublasLtMatmulAlgoGetHeuristic: reached, refuses a missing handle", cublasLtGetStatusString(h));
        const float alpha = 1, beta = 0;
        const cublasStatus_t m = cublasLtMatmul(nullptr, desc, &alpha, nullptr, a, nullptr, b, &beta, nullptr, d, nullptr, d, nullptr, nullptr, 0, 0);
        check(m != CUBLAS_STATUS_SUCCESS, "cublasLtMatmul: reached, refuses a missing handle", cublasLtGetStatusString(m));
    }

    check(cublasLtMatmulPreferenceDestroy(pref) == CUBLAS_STATUS_SUCCESS && cublasLtMatrixLayoutDestroy(a) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutDestroy(b) == CUBLAS_STATUS_SUCCESS && cublasLtMatrixLayoutDestroy(d) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescDestroy(desc) == CUBLAS_STATUS_SUCCESS,
          "the destroy calls");
    const cublasStatus_t destroyed = cublasLtDestroy(handle);  // without a GPU: a null handle, which it answers
    check(created != CUBLAS_STATUS_SUCCESS || destroyed == CUBLAS_STATUS_SUCCESS, "cublasLtDestroy: reached",
          cublasLtGetStatusString(destroyed));
    // The programs must not export the loader's names: the library, once loaded, would call them
    // in place of its own.
    for (const char* program : {"build/train", "build/infer"}) {
        const std::string command = std::string("nm -D --defined-only ") + program + " 2>&1";
        std::string out;
        if (FILE* p = popen(command.c_str(), "r")) {
            char buf[4096];
            for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
            pclose(p);
        }
        const bool listed = out.find(" W ") != std::string::npos;  // nm read the program (it exports some weak symbols)
        check(listed && out.find("cublasLt") == std::string::npos, std::string(program) + " exports no cublasLt name (nm -D)",
              listed ? "" : out.substr(0, 200));
    }
    return check_report();
}
