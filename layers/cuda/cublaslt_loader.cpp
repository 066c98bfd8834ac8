// cuBLASLt, loaded by the first matrix product instead of at program start. A program linked
// against libcublasLt runs the library's initializers before main in every process, a large
// share of a short run's time (notes/build-times.md, the tests' start-up), while a run on the
// CPU never calls it. The functions below carry the names and types of the cublasLt.h functions the
// programs call (the compiler checks each against the header's declaration); each one looks up
// the library's own on its first call. Nothing else in the project changes: the call sites are
// the ones cuBLASLt documents. The executable does not export these names (no shared library it
// links refers to them), so the library, once loaded, calls its own functions, never these.
#include <cublasLt.h>
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>

namespace {

#define CUBLASLT_STRINGIFY_(x) #x
#define CUBLASLT_STRINGIFY(x) CUBLASLT_STRINGIFY_(x)
// The major version the headers describe: another major version may change the functions' types.
constexpr const char* kLibrary = "libcublasLt.so." CUBLASLT_STRINGIFY(CUBLAS_VER_MAJOR);

void* library() {
    static void* handle = [] {
        void* h = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            std::fflush(stdout);
            std::fprintf(stderr, "error: cuBLASLt could not be loaded (%s): install the CUDA toolkit's cuBLAS %d, or add the folder "
                                 "that holds %s to LD_LIBRARY_PATH\n", dlerror(), CUBLAS_VER_MAJOR, kLibrary);
            std::exit(1);
        }
        return h;
    }();
    return handle;
}

template <typename F>
F resolve(const char* name) {
    void* p = dlsym(library(), name);
    if (!p) {
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s has no %s: it is older than the cuBLAS %d.%d this program was built with; install that one or newer\n",
                     kLibrary, name, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR);
        std::exit(1);
    }
    return reinterpret_cast<F>(p);
}

}  // namespace

const char* cublasLtGetStatusString(cublasStatus_t status) {
    static const auto f = resolve<decltype(&cublasLtGetStatusString)>("cublasLtGetStatusString");
    return f(status);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    static const auto f = resolve<decltype(&cublasLtCreate)>("cublasLtCreate");
    return f(handle);
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    static const auto f = resolve<decltype(&cublasLtDestroy)>("cublasLtDestroy");
    return f(handle);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
    static const auto f = resolve<decltype(&cublasLtMatmulDescCreate)>("cublasLtMatmulDescCreate");
    return f(desc, compute, scale);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    static const auto f = resolve<decltype(&cublasLtMatmulDescDestroy)>("cublasLtMatmulDescDestroy");
    return f(desc);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
    static const auto f = resolve<decltype(&cublasLtMatmulDescSetAttribute)>("cublasLtMatmulDescSetAttribute");
    return f(desc, attr, buf, size);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    static const auto f = resolve<decltype(&cublasLtMatrixLayoutCreate)>("cublasLtMatrixLayoutCreate");
    return f(layout, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    static const auto f = resolve<decltype(&cublasLtMatrixLayoutDestroy)>("cublasLtMatrixLayoutDestroy");
    return f(layout);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    static const auto f = resolve<decltype(&cublasLtMatmulPreferenceCreate)>("cublasLtMatmulPreferenceCreate");
    return f(pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    static const auto f = resolve<decltype(&cublasLtMatmulPreferenceDestroy)>("cublasLtMatmulPreferenceDestroy");
    return f(pref);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
    static const auto f = resolve<decltype(&cublasLtMatmulPreferenceSetAttribute)>("cublasLtMatmulPreferenceSetAttribute");
    return f(pref, attr, buf, size);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
    static const auto f = resolve<decltype(&cublasLtMatmulAlgoGetHeuristic)>("cublasLtMatmulAlgoGetHeuristic");
    return f(handle, desc, a, b, c, d, pref, requested, results, returned);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t la, const void* b, cublasLtMatrixLayout_t lb, const void* beta, const void* c,
                              cublasLtMatrixLayout_t lc, void* d, cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    static const auto f = resolve<decltype(&cublasLtMatmul)>("cublasLtMatmul");
    return f(handle, desc, alpha, a, la, b, lb, beta, c, lc, d, ld, algo, workspace, workspace_bytes, stream);
}
