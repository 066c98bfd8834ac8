// The LM head fused with softmax cross-entropy: logits = x @ wte^T (tied embedding), then
// loss = logsumexp(logits) - logits[target]. Rows go through in chunks, so only a (chunk, V)
// slice of the (N, V) logits ever exists. Targets < 0 are ignored (loss 0, no gradient).
// With a pointer (layers/pointer.h), the loss is the mixture's, -log((1 - g) p_LM + g p_copy):
// the pointer's gate logits and copy weights (N) come in, and its share w (N) of each target's
// probability goes out; the logits' gradient is the cross-entropy's times 1 - w.
#pragma once
#include <limits>
#include <vector>
#include "layers/common.h"
#include "layers/matmul.h"
#include "layers/pointer.h"

// The pointer's side of the classifier: all three, or none.
template <typename T>
struct PointerMix {
    const T* gate = nullptr;   // (N) gate logits
    const T* pcopy = nullptr;  // (N) copy weight on each target
    T* w = nullptr;            // (N) out: the copy's share of the target's probability
};

// losses (N) always; when dx and dwte are given, also adds the gradient of
// sum_n dloss * losses[n] into dx (N, C) and dwte (V, C).
template <typename T>
void classifier_forward_backward(T* losses,       // (N)
                                 T* dx,           // (N, C) or nullptr
                                 T* dwte,         // (V, C) or nullptr
                                 const T* x,      // (N, C) final-LayerNorm output
                                 const T* wte,    // (V, C)
                                 const int* targets,  // (N)
                                 int N, int C, int V, T dloss, PointerMix<T> mix = {}) {
    const int CHUNK = 64;
    std::vector<T> logits((size_t)CHUNK * V);  // (CHUNK, V), becomes dlogits in place
    for (int n0 = 0; n0 < N; n0 += CHUNK) {
        const int rows = (N - n0) < CHUNK ? (N - n0) : CHUNK;
        const T* xc = x + (size_t)n0 * C;
        matmul_forward(logits.data(), xc, wte, (const T*)nullptr, rows, C, V);
        OMP_PARALLEL_FOR
        for (int r = 0; r < rows; r++) {
            T* l = logits.data() + (size_t)r * V;
            const int target = targets[n0 + r];
            if (target < 0) {
                losses[n0 + r] = 0;
                if (mix.w) mix.w[n0 + r] = 0;
                for (int i = 0; i < V; i++) l[i] = 0;
                continue;
            }
            T mx = -std::numeric_limits<T>::infinity();
            for (int i = 0; i < V; i++) mx = l[i] > mx ? l[i] : mx;
            T sum = 0;
            for (int i = 0; i < V; i++) sum += std::exp(l[i] - mx);
            const T log_z = mx + std::log(sum);
            losses[n0 + r] = log_z - l[target];
            T dl = dloss;
            if (mix.gate) {
                T w, lm_share;
                losses[n0 + r] = pointer_mix_loss(mix.gate[n0 + r], l[target] - log_z, mix.pcopy[n0 + r], &w, &lm_share);
                if (mix.w) mix.w[n0 + r] = w;
                dl = dloss * lm_share;
            }
            // dlogits = dl * (softmax - onehot(target))
            for (int i = 0; i < V; i++) l[i] = dl * std::exp(l[i] - log_z);
            l[target] -= dl;
        }
        if (dx && dwte)
            matmul_backward(dx + (size_t)n0 * C, dwte, (T*)nullptr, logits.data(), xc, wte, rows, C, V);
    }
}
