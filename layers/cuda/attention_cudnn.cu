// cuDNN SDPA backend: the launchers declared in attention_cudnn.h, on the graph code of
// attention_cudnn.cuh (which says what cuDNN takes and how the graphs are built), compiled once
// into build/obj/attention_cudnn.o and linked into every program that uses the cuDNN backend.
#include "layers/cuda/attention_cudnn.cuh"

bool attn_cudnn::check_positions = false;

bool attention_cudnn_supports(const AttnPattern& pattern, AttnShape s, bool has_doc_mask, std::string* why) {
    auto no = [&](const std::string& reason) {
        if (why) *why = reason;
        return false;
    };
    if (!pattern_cudnn_runs(pattern)) return no(std::string("pattern ") + attn_kind_name(pattern.kind) + " (cuDNN does dense only)");
    if (has_doc_mask) return no("a document mask (cuDNN's causal mask cannot see document starts)");
    if (s.D != 64 && s.D != 128) return no("head dimension " + std::to_string(s.D) + " (64 and 128 only)");
    if (s.B < 0 || s.N < 0 || s.H < 1) return no("a negative or headless shape");
    if (s.stride < s.H * s.D || s.stride % 8 != 0) return no("row stride " + std::to_string(s.stride) + " (needs >= H*D and a multiple of 8)");
    if (cudnnGetVersion() < 90000) return no("cuDNN " + std::to_string(cudnnGetVersion()) + " (needs 9.x)");
    if (why) why->clear();
    return true;
}

size_t attention_cudnn_workspace_bytes(AttnShape s) {
    return attn_cudnn::softmax_sum_bytes(s) + (size_t)s.B * s.H * s.N * s.D * sizeof(float);
}

void attention_forward_cudnn(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const int* pos,
                             const int* doc_start, const AttnPattern& pattern, AttnShape s, float scale,
                             cudaStream_t stream) {
    if (s.B == 0 || s.N == 0) return;
    std::string why;
    if (!attention_cudnn_supports(pattern, s, doc_start != nullptr, &why)) fatal("attention_forward_cudnn: not supported: %s", why.c_str());
    attn_cudnn::check_aligned(q, "q");
    attn_cudnn::check_aligned(k, "k");
    attn_cudnn::check_aligned(v, "v");
    attn_cudnn::check_aligned(out, "out");
    attn_cudnn::check_pos(pos, s.N);
    cudnnHandle_t handle;
    const attn_cudnn::Plan& plan = attn_cudnn::get_plan(s, pattern.causal, false, &handle);
    float neg_inf = -INFINITY;
    std::vector<int64_t> uids = {attn_cudnn::kQ, attn_cudnn::kK, attn_cudnn::kV, attn_cudnn::kO,
                                 attn_cudnn::kStats, attn_cudnn::kScale};
    std::vector<void*> ptrs = {(void*)q, (void*)k, (void*)v, (void*)out, (void*)lse, (void*)&scale};
    if (pattern.causal) {
        uids.push_back(attn_cudnn::kNegInf);
        ptrs.push_back(&neg_inf);
    }
    attn_cudnn::execute(handle, plan, uids, ptrs, stream);
}

void attention_backward_cudnn(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* q, const bf16* k, const bf16* v, const int* pos, const int* doc_start,
                              const AttnPattern& pattern, AttnShape s, float scale, float* workspace,
                              cudaStream_t stream) {
    if (s.B == 0 || s.N == 0) return;
    std::string why;
    if (!attention_cudnn_supports(pattern, s, doc_start != nullptr, &why)) fatal("attention_backward_cudnn: not supported: %s", why.c_str());
    const void* aligned[] = {dq, dk, dv, dout, out, q, k, v, workspace};
    const char* names[] = {"dq", "dk", "dv", "dout", "out", "q", "k", "v", "workspace"};
    for (int i = 0; i < 9; i++) attn_cudnn::check_aligned(aligned[i], names[i]);
    if (!workspace) fatal("attention_backward_cudnn: workspace is null (attention_cudnn_workspace_bytes(s) needed)");
    attn_cudnn::check_pos(pos, s.N);
    cudnnHandle_t handle;
    const attn_cudnn::Plan& plan = attn_cudnn::get_plan(s, pattern.causal, true, &handle);
    char* ws = (char*)workspace;
    void* softmax_sum = ws;                                   // (B, H, N) fp32
    void* dq_accum = ws + attn_cudnn::softmax_sum_bytes(s);   // (B, H, N, D) fp32
    // cuDNN before 9.6 expects the dQ accumulator zeroed by the caller; later versions zero it.
    if (cudnnGetVersion() < 90600)
        CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, (size_t)s.B * s.H * s.N * s.D * sizeof(float), stream));
    float neg_inf = -INFINITY, one = 1.0f;
    std::vector<int64_t> uids = {attn_cudnn::kQ,     attn_cudnn::kK,      attn_cudnn::kV,  attn_cudnn::kO,
                                 attn_cudnn::kdO,    attn_cudnn::kStats,  attn_cudnn::kdQ, attn_cudnn::kdK,
                                 attn_cudnn::kdV,    attn_cudnn::kSoftmaxSum, attn_cudnn::kdQAccum,
                                 attn_cudnn::kScale, attn_cudnn::kOne};
    std::vector<void*> ptrs = {(void*)q,  (void*)k,  (void*)v,  (void*)out, (void*)dout, (void*)lse, (void*)dq,
                               (void*)dk, (void*)dv, softmax_sum, dq_accum, (void*)&scale, (void*)&one};
    if (pattern.causal) {
        uids.push_back(attn_cudnn::kNegInf);
        ptrs.push_back(&neg_inf);
    }
    attn_cudnn::execute(handle, plan, uids, ptrs, stream);
}
