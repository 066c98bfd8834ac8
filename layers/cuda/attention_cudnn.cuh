// Dense attention through cuDNN's fused flash-attention engine (SDPA), forward and backward: a
// second, selectable backend beside our own flash kernel, with the same API and the same
// semantics as the CPU reference (layers/attention.h):
//   Q, K, V (B, N, H, D) bf16 read in place from the QKV buffer (B, N, 3, H, D) with row stride
//   s.stride; O (B, N, H, D) contiguous; L (B, H, N) fp32 = log sum_k exp(scale q.k), natural
//   log of the SCALED scores; causal means key position <= query position.
//
// What cuDNN takes: only dense attention (causal or not), D = 64 or 128, no document mask, and
// positions that are one contiguous run (pos[i] = pos[0] + i). With equal query and key positions
// a global offset cancels in "key <= query", so cuDNN's top-left causal mask is exactly ours.
// attention_cudnn_supports() says why a case is refused; the launchers call fatal() on one.
//
// How: cuDNN 9's backend graph API (no cudnn_frontend here). The forward graph is
//   S = Q.K^T (fp32) -> * scale -> causal mask (row >= col, else -inf) -> softmax with stats
//   (max, x - max, exp, sum, L = max + log(sum), P = exp / sum) -> O = P.V
// and the backward graph is the flash backward written as ops:
//   delta = rowsum(dO * O);  P = exp(scale Q.K^T - L) (masked);  dV = P^T dO;
//   dS = scale * P * (dO.V^T - delta);  dK = dS^T Q;  dQ = dS K (through an fp32 accumulator).
// cuDNN's runtime-fusion engine recognises these patterns and runs its fused kernels; the op
// sequence, data types and virtual/real tensors follow what cudnn_frontend's composite SDPA
// nodes emit for cuDNN 9.x, since that is the pattern the engine matches. The softmax stats
// cuDNN writes (max + log(sum exp(x - max)) of the scaled scores, natural log) are our L as they
// are: no conversion (tests/gpu/test_attention.cu checks L against the CPU reference).
//
// Plans are built once per (device, shape, causal, direction) and cached; each cached plan owns
// the workspace cuDNN's engine asks for, so the same plan must not run on two streams at once.
// The backward also needs attention_cudnn_workspace_bytes(s) of caller scratch (rowsum(dO*O)
// and the fp32 dQ accumulator); nothing in it needs initialising.
//
// Define ATTN_CUDNN_CHECK_POS (before including attention_cudnn.h) to copy pos to the host on
// every call and check it is contiguous (tests do; it synchronises, so never in training).
//
// Compiled once: programs include attention_cudnn.h, which declares the launchers; this file (the
// graph code, inline) is compiled by attention_cudnn.cu into build/obj/attention_cudnn.o, which
// defines them and is linked into every program that uses this backend.
#pragma once
#include <cudnn.h>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>
#include "layers/attention.h"
#include "layers/cuda/attention_cudnn.h"
#include "layers/cuda/common.cuh"

#ifndef CUDNN_CHECK
inline void cudnn_check_(cudnnStatus_t s, const char* what, const char* file, int line) {
    if (s == CUDNN_STATUS_SUCCESS) return;
    char detail[1024] = {0};
    cudnnGetLastErrorString(detail, sizeof(detail));
    std::fflush(stdout);
    std::fprintf(stderr, "error: cuDNN %s at %s:%d: %s%s%s\n", what, file, line, cudnnGetErrorString(s),
                 detail[0] ? ": " : "", detail);
    std::exit(1);
}
#define CUDNN_CHECK(call) cudnn_check_((call), #call, __FILE__, __LINE__)
#endif

namespace attn_cudnn {

// Tensor ids in the variant pack. Virtual (on-chip) tensors take ids from kFirstVirtual up.
enum Uid : int64_t {
    kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kOne, kdO, kdQ, kdK, kdV, kSoftmaxSum, kdQAccum,
    kFirstVirtual = 100
};

// Graph variants tried in order until cuDNN finds an engine: the first is what cudnn_frontend
// emits for cuDNN 9.19; the others are earlier spellings of the same mask/softmax pattern that
// the engine has accepted, kept so that a different cuDNN 9 build still finds its fused kernel.
enum Variant : int {
    kVariantFrontend = 0,        // GEN_INDEX computes in fp32, writes int32
    kVariantIndexInt32 = 1,      // GEN_INDEX computes and writes int32
    kVariantIndexFloat = 2,      // GEN_INDEX computes and writes fp32 (the cuDNN 8.9 samples)
    kNumVariants = 3
};
inline const char* variant_name(int v) {
    static const char* names[] = {"frontend-9.19", "index-int32", "index-fp32"};
    return (v >= 0 && v < kNumVariants) ? names[v] : "?";
}

using Dims = std::array<int64_t, 4>;

// Builds one operation graph. Errors do not exit: a variant the engine refuses must leave room
// to try the next one, so the first failure is recorded (with cuDNN's own message) and every
// later call becomes a no-op.
class GraphBuilder {
   public:
    explicit GraphBuilder(int variant) : variant_(variant) {}
    ~GraphBuilder() {
        for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
    }
    GraphBuilder(const GraphBuilder&) = delete;
    GraphBuilder& operator=(const GraphBuilder&) = delete;

    bool ok() const { return error_.empty(); }
    const std::string& error() const { return error_; }
    int variant() const { return variant_; }

    cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type, Dims dim, Dims stride, bool is_virtual,
                                    bool by_value = false) {
        cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const int64_t alignment = 16;  // the fused kernels load 16-byte vectors
        set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
        set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim.data());
        set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride.data());
        set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
        set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
        if (by_value) set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
        finalize(t, "tensor");
        return t;
    }
    cudnnBackendDescriptor_t virt(cudnnDataType_t type, Dims dim, Dims stride) {
        return tensor(next_virtual_++, type, dim, stride, true);
    }
    // A host scalar passed at execute time (scale, -inf, 1).
    cudnnBackendDescriptor_t scalar(int64_t uid, cudnnDataType_t type) {
        return tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
    }

    // y = mode(x[, b[, t]]); axis only for GEN_INDEX.
    void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t math, cudnnBackendDescriptor_t x,
                   cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t b = nullptr,
                   cudnnBackendDescriptor_t t = nullptr, int64_t axis = -1) {
        cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
        set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
        if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
        finalize(pw, "pointwise descriptor");
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
        set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
        if (t) set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
        set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        finalize(op, "pointwise op");
        ops_.push_back(op);
    }
    // y = reduce(x) over the dimensions where y has extent 1.
    void reduction(cudnnReduceTensorOp_t reduce, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
        cudnnBackendDescriptor_t rd = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
        const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
        set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
        set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
        finalize(rd, "reduction descriptor");
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
        set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd);
        finalize(op, "reduction op");
        ops_.push_back(op);
    }
    // c = a . b, batched over the first two dimensions, fp32 accumulation.
    void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
        cudnnBackendDescriptor_t md = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
        const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
        set(md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
        finalize(md, "matmul descriptor");
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
        set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
        set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
        set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
        set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &md);
        finalize(op, "matmul op");
        ops_.push_back(op);
    }
    // y = x seen with other dimensions/strides (a transpose, for the engine).
    void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        finalize(op, "reshape op");
        ops_.push_back(op);
    }

    // x where row >= col (query index >= key index), -inf elsewhere. Indices inside one
    // (b, h) block equal positions up to a common offset, which cancels.
    cudnnBackendDescriptor_t causal_mask(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t neg_inf, Dims dim,
                                         Dims stride) {
        cudnnDataType_t index_type = CUDNN_DATA_INT32, index_math = CUDNN_DATA_FLOAT;
        if (variant_ == kVariantIndexInt32) index_math = CUDNN_DATA_INT32;
        if (variant_ == kVariantIndexFloat) index_type = CUDNN_DATA_FLOAT;
        cudnnBackendDescriptor_t row = virt(index_type, dim, stride);
        cudnnBackendDescriptor_t col = virt(index_type, dim, stride);
        cudnnBackendDescriptor_t keep = virt(CUDNN_DATA_BOOLEAN, dim, stride);
        cudnnBackendDescriptor_t y = virt(CUDNN_DATA_FLOAT, dim, stride);
        pointwise(CUDNN_POINTWISE_GEN_INDEX, index_math, x, row, nullptr, nullptr, 2);
        pointwise(CUDNN_POINTWISE_GEN_INDEX, index_math, x, col, nullptr, nullptr, 3);
        pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, keep, col);
        pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, y, neg_inf, keep);
        return y;
    }

    // Finalizes the operation graph and returns the first engine configuration that makes an
    // execution plan (nullptr and error() when none does).
    cudnnBackendDescriptor_t plan(cudnnHandle_t handle) {
        if (!ok()) return nullptr;
        cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
        set_handle(graph, (cudnnBackendAttributeName_t)800 /* CUDNN_ATTR_OPERATIONGRAPH_HANDLE */, handle);
        set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops_.size(), ops_.data());
        finalize(graph, "operation graph");
        if (!ok()) return nullptr;
        std::string tried;
        for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
            cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
            set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
            set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
            finalize(heur, "engine heuristics");
            if (!ok()) return nullptr;
            int64_t count = 0;
            if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                         &count, nullptr) != CUDNN_STATUS_SUCCESS)
                count = 0;
            std::vector<cudnnBackendDescriptor_t> cfgs((size_t)count);
            for (auto& c : cfgs) c = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
            if (count > 0 && cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count,
                                                      cfgs.data()) != CUDNN_STATUS_SUCCESS)
                count = 0;
            for (int64_t i = 0; i < count; i++) {
                cudnnBackendDescriptor_t p = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
                set_handle(p, (cudnnBackendAttributeName_t)400 /* CUDNN_ATTR_EXECUTION_PLAN_HANDLE */, handle);
                set(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
                if (!ok()) return nullptr;
                const cudnnStatus_t st = cudnnBackendFinalize(p);
                if (st == CUDNN_STATUS_SUCCESS) return p;
                tried += std::string(" [") + cudnnGetErrorString(st) + ": " + last_error() + "]";
            }
            if (count == 0) tried += " [heuristics gave no engine: " + last_error() + "]";
        }
        error_ = "no engine ran the graph:" + tried;
        return nullptr;
    }

   private:
    cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
        cudnnBackendDescriptor_t d = nullptr;
        CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d));
        owned_.push_back(d);
        return d;
    }
    void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
             int64_t count, const void* value) {
        if (!ok()) return;
        const cudnnStatus_t st = cudnnBackendSetAttribute(d, name, type, count, value);
        if (st != CUDNN_STATUS_SUCCESS)
            error_ = "set attribute " + std::to_string((int)name) + ": " + cudnnGetErrorString(st) + ": " + last_error();
    }
    // The handle attributes are marked deprecated in cuDNN 9 headers but are still how a graph
    // and a plan learn their device; written by number so -Wall stays quiet.
    void set_handle(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnHandle_t handle) {
        set(d, name, CUDNN_TYPE_HANDLE, 1, &handle);
    }
    void finalize(cudnnBackendDescriptor_t d, const char* what) {
        if (!ok()) return;
        const cudnnStatus_t st = cudnnBackendFinalize(d);
        if (st != CUDNN_STATUS_SUCCESS)
            error_ = std::string("finalize ") + what + ": " + cudnnGetErrorString(st) + ": " + last_error();
    }
    static std::string last_error() {
        char msg[1024] = {0};
        cudnnGetLastErrorString(msg, sizeof(msg));
        return msg;
    }

    int variant_;
    int64_t next_virtual_ = kFirstVirtual;
    std::vector<cudnnBackendDescriptor_t> owned_;
    std::vector<cudnnBackendDescriptor_t> ops_;
    std::string error_;
};

// Strides of the (b, h, n, d) views of our buffers.
inline Dims qkv_strides(const AttnShape& s) {  // Q, K, V, dQ, dK, dV: (B, N, H, D) rows of s.stride
    return {(int64_t)s.N * s.stride, (int64_t)s.D, (int64_t)s.stride, 1};
}
inline Dims kt_strides(const AttnShape& s) {  // K^T, V^T as (b, h, d, n)
    return {(int64_t)s.N * s.stride, (int64_t)s.D, 1, (int64_t)s.stride};
}
inline Dims out_strides(const AttnShape& s) {  // O, dO: (B, N, H, D) contiguous
    return {(int64_t)s.N * s.H * s.D, (int64_t)s.D, (int64_t)s.H * s.D, 1};
}
inline Dims row_stat_strides(const AttnShape& s) {  // L, rowsum(dO*O): (B, H, N)
    return {(int64_t)s.H * s.N, (int64_t)s.N, 1, 1};
}
inline Dims score_strides(const AttnShape& s) {  // S, P: (B, H, N, N), never in memory
    return {(int64_t)s.H * s.N * s.N, (int64_t)s.N * s.N, (int64_t)s.N, 1};
}

// Forward: O = softmax(mask(scale Q K^T)) V and L = its row log-sum-exp.
inline void build_forward(GraphBuilder& g, const AttnShape& s, bool causal) {
    const int64_t B = s.B, H = s.H, N = s.N, D = s.D;
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const Dims sdim = {B, H, N, N}, sstr = score_strides(s), rdim = {B, H, N, 1}, rstr = row_stat_strides(s);
    auto q = g.tensor(kQ, bf, {B, H, N, D}, qkv_strides(s), false);     // (B, N, H, D) strided
    auto kt = g.tensor(kK, bf, {B, H, D, N}, kt_strides(s), false);     // K^T view of K
    auto v = g.tensor(kV, bf, {B, H, N, D}, qkv_strides(s), false);     // (B, N, H, D) strided
    auto o = g.tensor(kO, bf, {B, H, N, D}, out_strides(s), false);     // (B, N, H, D)
    auto stats = g.tensor(kStats, f32, rdim, rstr, false);              // (B, H, N)
    auto scale = g.scalar(kScale, f32);

    auto qk = g.virt(f32, sdim, sstr);
    g.matmul(q, kt, qk);
    auto scaled = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_MUL, f32, qk, scaled, scale);
    auto x = scaled;
    if (causal) x = g.causal_mask(scaled, g.scalar(kNegInf, f32), sdim, sstr);

    // Softmax with stats, spelled the way the engine's pattern matcher expects.
    auto mx = g.virt(f32, rdim, rstr);
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, x, mx);
    auto shifted = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_SUB, f32, x, shifted, mx);
    auto e = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_EXP, f32, shifted, e);
    auto sum = g.virt(f32, rdim, rstr);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
    auto logsum = g.virt(f32, rdim, rstr);
    g.pointwise(CUDNN_POINTWISE_LOG, f32, sum, logsum);
    g.pointwise(CUDNN_POINTWISE_ADD, f32, mx, stats, logsum);
    auto p = g.virt(bf, sdim, sstr);  // P enters the second matmul as bf16
    g.pointwise(CUDNN_POINTWISE_DIV, f32, e, p, sum);
    g.matmul(p, v, o);
}

// Backward: dQ, dK, dV from dO, O, L (flash backward; P recomputed from L).
inline void build_backward(GraphBuilder& g, const AttnShape& s, bool causal) {
    const int64_t B = s.B, H = s.H, N = s.N, D = s.D;
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const Dims sdim = {B, H, N, N}, sstr = score_strides(s), rdim = {B, H, N, 1}, rstr = row_stat_strides(s);
    const Dims tdim = {B, H, N, N}, tstr = {(int64_t)H * N * N, (int64_t)N * N, 1, (int64_t)N};  // transposed
    const Dims odim = {B, H, N, D};
    auto q = g.tensor(kQ, bf, odim, qkv_strides(s), false);
    auto kt = g.tensor(kK, bf, {B, H, D, N}, kt_strides(s), false);
    auto vt = g.tensor(kV, bf, {B, H, D, N}, kt_strides(s), false);
    auto o = g.tensor(kO, bf, odim, out_strides(s), false);
    auto dout = g.tensor(kdO, bf, odim, out_strides(s), false);
    auto stats = g.tensor(kStats, f32, rdim, rstr, false);
    auto dq = g.tensor(kdQ, bf, odim, qkv_strides(s), false);
    auto dk = g.tensor(kdK, bf, odim, qkv_strides(s), false);
    auto dv = g.tensor(kdV, bf, odim, qkv_strides(s), false);
    auto softmax_sum = g.tensor(kSoftmaxSum, f32, rdim, rstr, false);  // workspace: rowsum(dO*O)
    auto dq_accum = g.tensor(kdQAccum, f32, odim, {H * N * D, N * D, D, 1}, false);  // workspace
    auto scale = g.scalar(kScale, f32);
    auto one = g.scalar(kOne, f32);

    // delta = rowsum(dO * O) (times 1: the dropout-scale slot of the pattern).
    auto dout_o = g.virt(f32, odim, out_strides(s));
    g.pointwise(CUDNN_POINTWISE_MUL, f32, dout, dout_o, o);
    auto delta = g.virt(f32, rdim, rstr);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dout_o, delta);
    g.pointwise(CUDNN_POINTWISE_MUL, f32, delta, softmax_sum, one);

    // P = exp(mask(scale Q K^T - L)); dV = P^T dO.
    auto qk = g.virt(f32, sdim, sstr);
    g.matmul(q, kt, qk);
    auto scaled = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_MUL, f32, qk, scaled, scale);
    auto centered = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_SUB, f32, scaled, centered, stats);
    auto x = centered;
    if (causal) x = g.causal_mask(centered, g.scalar(kNegInf, f32), sdim, sstr);
    auto p = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_EXP, f32, x, p);
    auto pt = g.virt(bf, tdim, tstr);
    g.reshape(p, pt);
    g.matmul(pt, dout, dv);

    // dS = scale * P * (dO V^T - delta); dK = dS^T Q; dQ = dS K.
    auto dp = g.virt(f32, sdim, sstr);
    g.matmul(dout, vt, dp);
    auto dp_centered = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_SUB, f32, dp, dp_centered, softmax_sum);
    auto ds_unscaled = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_MUL, f32, dp_centered, ds_unscaled, p);
    auto ds = g.virt(f32, sdim, sstr);
    g.pointwise(CUDNN_POINTWISE_MUL, f32, ds_unscaled, ds, scale);
    auto dst = g.virt(bf, tdim, tstr);
    g.reshape(ds, dst);
    g.matmul(dst, q, dk);
    auto k = g.virt(bf, odim, qkv_strides(s));
    g.reshape(kt, k);
    g.matmul(ds, k, dq_accum);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, f32, dq_accum, dq);
}

struct PlanKey {
    int device, B, N, H, D, stride;
    bool causal, backward;
    bool operator<(const PlanKey& o) const {
        return std::tie(device, B, N, H, D, stride, causal, backward) <
               std::tie(o.device, o.B, o.N, o.H, o.D, o.stride, o.causal, o.backward);
    }
};

struct Plan {
    std::unique_ptr<GraphBuilder> graph;  // owns every descriptor the plan refers to
    cudnnBackendDescriptor_t plan = nullptr;
    int64_t workspace_bytes = 0;
    void* workspace = nullptr;  // cuDNN's own scratch for this plan
};

struct State {
    std::mutex mu;
    std::vector<cudnnHandle_t> handles;  // one per device, made on first use
    std::map<PlanKey, std::unique_ptr<Plan>> plans;
};
inline State& state() {
    static State* s = new State();  // never destroyed: plans may be used until exit
    return *s;
}

inline cudnnHandle_t handle_for(int device) {  // caller holds state().mu
    State& st = state();
    if ((int)st.handles.size() <= device) st.handles.resize(device + 1, nullptr);
    if (!st.handles[device]) CUDNN_CHECK(cudnnCreate(&st.handles[device]));
    return st.handles[device];
}

// The cached plan for this call, built on first use (trying the graph variants in order).
inline Plan& get_plan(const AttnShape& s, bool causal, bool backward, cudnnHandle_t* handle_out) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    cudnnHandle_t handle = handle_for(device);
    *handle_out = handle;
    const PlanKey key{device, s.B, s.N, s.H, s.D, s.stride, causal, backward};
    auto it = st.plans.find(key);
    if (it != st.plans.end()) return *it->second;
    std::string errors;
    for (int variant = 0; variant < kNumVariants; variant++) {
        auto g = std::make_unique<GraphBuilder>(variant);
        if (backward) build_backward(*g, s, causal);
        else build_forward(*g, s, causal);
        cudnnBackendDescriptor_t p = g->plan(handle);
        if (!p) {
            errors += std::string("\n  variant ") + variant_name(variant) + ": " + g->error();
            continue;
        }
        auto plan = std::make_unique<Plan>();
        CUDNN_CHECK(cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                             nullptr, &plan->workspace_bytes));
        if (plan->workspace_bytes > 0) CUDA_CHECK(cudaMalloc(&plan->workspace, plan->workspace_bytes));
        plan->plan = p;
        plan->graph = std::move(g);
        if (std::getenv("ATTN_CUDNN_VERBOSE"))
            std::printf("attention_cudnn: %s plan B=%d N=%d H=%d D=%d causal=%d: graph %s, workspace %lld bytes\n",
                        backward ? "backward" : "forward", s.B, s.N, s.H, s.D, (int)causal,
                        variant_name(variant), (long long)plan->workspace_bytes);
        Plan& ref = *plan;
        st.plans.emplace(key, std::move(plan));
        return ref;
    }
    fatal("attention_cudnn: cuDNN %zu found no engine for the %s graph (B=%d N=%d H=%d D=%d causal=%d):%s",
          cudnnGetVersion(), backward ? "backward" : "forward", s.B, s.N, s.H, s.D, (int)causal, errors.c_str());
}

inline void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids,
                    const std::vector<void*>& ptrs, cudaStream_t stream) {
    CUDNN_CHECK(cudnnSetStream(handle, stream));
    cudnnBackendDescriptor_t pack = nullptr;
    CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    void* ws = plan.workspace;
    CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                         (int64_t)uids.size(), uids.data()));
    CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                         (int64_t)ptrs.size(), ptrs.data()));
    CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws));
    CUDNN_CHECK(cudnnBackendFinalize(pack));
    CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan, pack));
    CUDNN_CHECK(cudnnBackendDestroyDescriptor(pack));
    CUDA_CHECK_LAST();
}

inline size_t align256(size_t n) { return (n + 255) / 256 * 256; }
inline size_t softmax_sum_bytes(const AttnShape& s) { return align256((size_t)s.B * s.H * s.N * sizeof(float)); }

inline void check_aligned(const void* p, const char* name) {
    if (p && ((uintptr_t)p % 16) != 0) fatal("attention_cudnn: %s is not 16-byte aligned", name);
}

// pos must be pos[0] + i; only checked with check_positions (ATTN_CUDNN_CHECK_POS: it synchronises).
inline void check_pos(const int* pos, int N) {
    if (!check_positions || !pos) return;
    std::vector<int> h(N);
    CUDA_CHECK(cudaMemcpy(h.data(), pos, (size_t)N * sizeof(int), cudaMemcpyDefault));
    for (int i = 1; i < N; i++)
        if (h[i] != h[0] + i)
            fatal("attention_cudnn: positions are not contiguous (pos[%d] = %d, pos[0] = %d): use the flash kernel", i,
                  h[i], h[0]);
}

}  // namespace attn_cudnn
