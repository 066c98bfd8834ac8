// Flash attention on the GPU with the two-sided interface of layers/attention.h: declarations
// (the definitions, and what each piece does, are in attention/launch_two_sided.cuh, compiled
// once into build/obj/attention_flash.o). Each side's positions must be contiguous,
// pos[i] = side.pos0 + i, with pos0 set; AttnDims::seq_len is the global sequence length.
#pragma once
#include <cstddef>
#include "layers/attention.h"
#include "layers/cuda/common.cuh"

// O = 0, L = -inf over nq query rows: where a run of merges starts.
void attention_partial_init_cuda(float* out, float* lse, AttnDims dm, int nq, cudaStream_t stream);

// Write: O (bf16, (B, nq, H, D)) and L ((B, H, nq)) of these queries against these keys.
void attention_forward_cuda(bf16* out, float* lse, const AttnQueries<bf16>& qs, const AttnKeys<bf16>& ks,
                            const AttnPattern& pattern, AttnDims dm, float scale, cudaStream_t stream);

// Merge: these keys folded by log-sum-exp into the fp32 O ((B, nq, H, D)) and L already there.
void attention_forward_merge_cuda(float* out, float* lse, const AttnQueries<bf16>& qs, const AttnKeys<bf16>& ks,
                                  const AttnPattern& pattern, AttnDims dm, float scale, cudaStream_t stream);

// Backward in pieces: begin once (from the FINAL bf16 O and L), one block step per key/value
// block (its dK, dV in the key side's layout, written or added; dQ into the workspace), end
// (dQ in the query side's layout, written or added).
size_t attention_backward_pieces_workspace_bytes(AttnDims dm, int nq);
void attention_backward_begin_cuda(float* workspace, const bf16* dout, const bf16* out, const float* lse,
                                   const AttnQueries<bf16>& qs, AttnDims dm, cudaStream_t stream);
// deterministic: dQ without atomics (a separate pass, slower), the same bits every run.
void attention_backward_block_cuda(bf16* dk, bf16* dv, bool accumulate, const bf16* dout, const float* lse,
                                   const AttnQueries<bf16>& qs, const AttnKeys<bf16>& ks, const AttnPattern& pattern,
                                   AttnDims dm, float scale, float* workspace, cudaStream_t stream,
                                   bool deterministic = false);
void attention_backward_end_cuda(bf16* dq, bool accumulate, const AttnQueries<bf16>& qs, AttnDims dm, float* workspace,
                                 cudaStream_t stream);
