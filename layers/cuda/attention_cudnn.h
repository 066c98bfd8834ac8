// Dense attention through cuDNN's fused flash-attention engine (SDPA), forward and backward: a
// second, selectable backend beside our own flash kernels (attention_flash.h), with the same API
// and the same semantics as the CPU reference (layers/attention.h). What cuDNN takes (dense only,
// D = 64 or 128, no document mask, contiguous positions) and how the graphs are built:
// attention_cudnn.cuh.
//
// Compiled once: this header only declares the launchers; attention_cudnn.cu defines them on the
// graph code of attention_cudnn.cuh (build/obj/attention_cudnn.o, linked into every program
// that uses this backend).
//
// Define ATTN_CUDNN_CHECK_POS before including this header to copy pos to the host on every call
// and check it is contiguous (tests do; it synchronises, so never in training).
#pragma once
#include <cstddef>
#include <string>
#include "layers/attention.h"
#include "layers/cuda/common.cuh"

namespace attn_cudnn {
// Whether the launchers check that pos is contiguous (copying it to the host: synchronises);
// false unless a program defines ATTN_CUDNN_CHECK_POS before including this header.
extern bool check_positions;
}  // namespace attn_cudnn

#ifdef ATTN_CUDNN_CHECK_POS
[[maybe_unused]] static const bool attn_cudnn_check_positions_on = (attn_cudnn::check_positions = true);
#endif

// Whether cuDNN runs this case; *why (if given) says what is not supported.
bool attention_cudnn_supports(const AttnPattern& pattern, AttnShape s, bool has_doc_mask, std::string* why);

// Caller scratch for attention_backward_cudnn: rowsum(dO*O) (B, H, N) and the fp32 dQ
// accumulator (B, H, N, D).
size_t attention_cudnn_workspace_bytes(AttnShape s);

void attention_forward_cudnn(bf16* out,           // (B, N, H, D)
                             float* lse,          // (B, H, N)
                             const bf16* q, const bf16* k, const bf16* v,  // (B, N, H, D), row stride s.stride
                             const int* pos,      // (N) global positions, contiguous (nullptr: 0..N-1)
                             const int* doc_start,  // must be nullptr
                             const AttnPattern& pattern, AttnShape s, float scale, cudaStream_t stream);

void attention_backward_cudnn(bf16* dq, bf16* dk, bf16* dv,  // (B, N, H, D), row stride s.stride; overwritten
                              const bf16* dout,              // (B, N, H, D)
                              const bf16* out,               // (B, N, H, D)
                              const float* lse,              // (B, H, N)
                              const bf16* q, const bf16* k, const bf16* v,  // (B, N, H, D), row stride s.stride
                              const int* pos, const int* doc_start, const AttnPattern& pattern, AttnShape s,
                              float scale,
                              float* workspace,  // attention_cudnn_workspace_bytes(s), 256-byte aligned
                              cudaStream_t stream);
