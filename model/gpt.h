// The GPT model on the CPU: parameters, activations, forward and backward, composed from the
// layer headers in layers/. A template over the scalar type, so the whole model runs in
// double for the finite-difference gradient check.
//
//   x = wte[tokens]                                   // (B, T, C)
//   for each block l:
//     qkv = rope(ln1(x) @ Wqkv^T + bqkv)              // (B, T, 3, H, D), rotary on q and k
//                                                     // (a NoPE layer: its q/k convolution instead)
//     x   = x + attention_l(qkv) @ Wproj^T + bproj    // pattern of layer l, global positions
//                                                     // (and its sink, layers/attn_sink.h)
//     x   = x + gelu(ln2(x) @ Wfc^T + bfc) @ Wfcproj^T + bfcproj
//   loss = cross_entropy(lnf(x) @ wte^T, targets)     // LM head tied to the embedding
//                                                     // (with a pointer, the mixture's loss:
//                                                     //  layers/pointer.h)
#pragma once
#include <algorithm>
#include <string>
#include <vector>
#include "core/rng.h"
#include "layers/attention.h"
#include "layers/attn_sink.h"
#include "layers/ring_attention.h"
#include "layers/classifier.h"
#include "layers/encoder.h"
#include "layers/gelu.h"
#include "layers/layernorm.h"
#include "layers/matmul.h"
#include "layers/pointer.h"
#include "layers/qk_conv.h"
#include "layers/residual.h"
#include "layers/rope.h"
#include "model/gpt_config.h"
#include "model/recompute.h"

// One named parameter tensor inside the flat parameter buffer. The names and shapes are the
// checkpoint's tensor names (README: "Checkpoint format").
struct ParamTensor {
    std::string name;
    std::vector<int> shape;
    size_t offset, size;
    bool decay;  // weight decay applies to the matrices of products only
};

// Every tensor starts at a multiple of kParamAlign elements of the flat buffer (16 bytes of the
// GPU's bf16 copy), where the GPU's vector loads can read it: a tensor whose size is not a multiple
// (a sink's H logits) is followed by zeros that belong to no tensor, that no kernel reads and no
// update changes.
constexpr size_t kParamAlign = 8;

inline std::vector<ParamTensor> param_layout(const GPTConfig& c) {
    std::vector<ParamTensor> out;
    size_t offset = 0;
    auto add = [&](const std::string& name, std::vector<int> shape, bool decay) {
        size_t n = 1;
        for (int d : shape) n *= (size_t)d;
        offset = (offset + kParamAlign - 1) / kParamAlign * kParamAlign;
        out.push_back({name, shape, offset, n, decay});
        offset += n;
    };
    const int C = c.n_embd;
    add("wte", {c.vocab_size, C}, true);
    for (int l = 0; l < c.n_layer; l++) {
        const std::string p = "blocks." + std::to_string(l) + ".";
        add(p + "ln1.weight", {C}, false);
        add(p + "ln1.bias", {C}, false);
        add(p + "attn.qkv.weight", {3 * C, C}, true);
        add(p + "attn.qkv.bias", {3 * C}, false);
        // A convolution of a few weights per channel, started as the identity: decay would pull
        // it toward zero, away from where it starts.
        if (c.layer_qk_conv(l)) add(p + "attn.qk_conv.weight", {c.layer_qk_conv(l), 2 * C}, false);
        // The sink logits start at 0, like a key that matches nothing in particular; decay would
        // pull them toward that start, away from what they learn.
        if (c.attn_sink) add(p + "attn.sink", {c.n_head}, false);
        // The log-n slopes start at the fixed factor's (layers/rope.h logn_slope_init); decay would
        // pull them toward no growth at all.
        if (c.layer_logn_learn(l)) add(p + "attn.logn_slope", {c.n_head}, false);
        add(p + "attn.proj.weight", {C, C}, true);
        add(p + "attn.proj.bias", {C}, false);
        add(p + "ln2.weight", {C}, false);
        add(p + "ln2.bias", {C}, false);
        add(p + "mlp.fc.weight", {4 * C, C}, true);
        add(p + "mlp.fc.bias", {4 * C}, false);
        add(p + "mlp.proj.weight", {C, 4 * C}, true);
        add(p + "mlp.proj.bias", {C}, false);
    }
    add("lnf.weight", {C}, false);
    add("lnf.bias", {C}, false);
    if (c.pointer) {
        add("ptr.q.weight", {c.head_dim(), C}, true);
        add("ptr.k.weight", {c.head_dim(), C}, true);
        add("ptr.gate.weight", {1, C}, true);
        add("ptr.gate.bias", {1}, false);
    }
    return out;
}

// Pointers into the flat buffer, in param_layout's order.
template <typename T>
struct BlockParams {
    T *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
    T* qkconv = nullptr;  // (W, 2C) in a layer with a q/k convolution, else none
    T* sink = nullptr;    // (H) in a model with attention sinks, else none
    T* logn_slope = nullptr;  // (H) in a NoPE layer whose heads learn their log-n slopes, else none
};
template <typename T>
struct ParamViews {
    T* wte;
    std::vector<BlockParams<T>> blocks;
    T *lnfw, *lnfb;
    T *ptrq = nullptr, *ptrk = nullptr, *ptrgw = nullptr, *ptrgb = nullptr;  // a model with a pointer
};
template <typename T>
ParamViews<T> param_views(T* base, const GPTConfig& c) {
    std::vector<ParamTensor> layout = param_layout(c);
    ParamViews<T> v;
    size_t i = 0;
    auto next = [&]() { return base + layout[i++].offset; };
    v.wte = next();
    for (int l = 0; l < c.n_layer; l++) {
        BlockParams<T> b;
        b.ln1w = next(), b.ln1b = next(), b.qkvw = next(), b.qkvb = next();
        if (c.layer_qk_conv(l)) b.qkconv = next();
        if (c.attn_sink) b.sink = next();
        if (c.layer_logn_learn(l)) b.logn_slope = next();
        b.projw = next(), b.projb = next();
        b.ln2w = next(), b.ln2b = next(), b.fcw = next(), b.fcb = next(), b.fcprojw = next(), b.fcprojb = next();
        v.blocks.push_back(b);
    }
    v.lnfw = next(), v.lnfb = next();
    if (c.pointer) v.ptrq = next(), v.ptrk = next(), v.ptrgw = next(), v.ptrgb = next();
    return v;
}

// GPT-2 style initialization: N(0, 0.02), residual projections scaled by 1/sqrt(2L),
// LayerNorm gains 1, biases 0, q/k convolutions the identity, log-n slopes the fixed factor's,
// the pointer's gate bias -3 (nearly shut: the language model learns first, the copy where it
// pays). Deterministic in the seed; every backend starts from it.
template <typename T>
void init_gpt_weights(T* params, const GPTConfig& cfg, uint64_t seed) {
    SplitMix64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
    auto uniform = [&]() { return ((rng.next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };  // (0, 1)
    auto normal = [&]() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); };
    for (const ParamTensor& t : param_layout(cfg)) {
        T* w = params + t.offset;
        if (t.name.find("qk_conv") != std::string::npos) {  // row 0 (the token itself) ones, the rest zeros
            for (size_t i = 0; i < t.size; i++) w[i] = i < (size_t)t.shape[1] ? T(1) : T(0);
            continue;
        }
        if (t.name.find("logn_slope") != std::string::npos) {
            for (size_t i = 0; i < t.size; i++) w[i] = (T)logn_slope_init(cfg.logn_attn);
            continue;
        }
        if (t.name == "ptr.gate.bias") {
            w[0] = T(-3);
            continue;
        }
        const bool is_ln_gain = t.name.find("ln") != std::string::npos && t.name.find(".weight") != std::string::npos;
        if (t.shape.size() == 1) {
            for (size_t i = 0; i < t.size; i++) w[i] = is_ln_gain ? T(1) : T(0);
            continue;
        }
        const bool residual_proj = t.name.find("proj.weight") != std::string::npos;
        const double std_dev = residual_proj ? 0.02 / std::sqrt(2.0 * cfg.n_layer) : 0.02;
        for (size_t i = 0; i < t.size; i++) w[i] = (T)(std_dev * normal());
    }
}

// The weights of a model without q/k convolutions (or learned log-n slopes) laid out for `to`, the
// same model with them (train --init-from): every tensor by name, each convolution at the
// identity and each slope at the fixed factor's, where a fresh run starts them, so the model
// computes what it computed before and training goes on from there.
inline std::vector<float> weights_with_identity_convolutions(const std::vector<float>& params, const GPTConfig& from,
                                                             const GPTConfig& to) {
    const std::vector<ParamTensor> had = param_layout(from), now = param_layout(to);
    std::vector<float> out(now.back().offset + now.back().size);
    init_gpt_weights(out.data(), to, 0);
    for (const ParamTensor& t : now) {
        const auto same = std::find_if(had.begin(), had.end(), [&](const ParamTensor& h) { return h.name == t.name; });
        if (same == had.end()) {
            if (t.name.find("qk_conv") == std::string::npos && t.name.find("logn_slope") == std::string::npos) fatal("internal: --init-from: the checkpoint has no tensor %s", t.name.c_str());
            continue;
        }
        std::copy(params.begin() + same->offset, params.begin() + same->offset + same->size, out.begin() + t.offset);
    }
    return out;
}

// Every backend's forward starts here: tokens in [0, V), targets in [0, V) or negative
// (ignored). The message names the row and position, so a bad shard is found (the loader
// checked the file already; this catches any other caller).
inline void check_token_ids(const int* tokens, const int* targets, int B, int T, int V) {
    for (long long i = 0; i < (long long)B * T; i++) {
        const bool bad_token = tokens[i] < 0 || tokens[i] >= V, bad_target = targets && targets[i] >= V;
        if (bad_token || bad_target)
            fatal("%s id %d at batch row %lld, position %lld is outside the model's vocabulary of %d: the data and the "
                  "tokenizer or checkpoint do not match", bad_token ? "token" : "target", bad_token ? tokens[i] : targets[i],
                  i / T, i % T, V);
    }
}

// A block's activations, for one (B, T). Under a recompute policy (model/recompute.h) a block
// keeps only some of these; the others are empty and live in GPT::work, shared by all blocks
// and recomputed in the backward before they are read.
template <typename T>
struct BlockActs {
    std::vector<T> ln1, ln1_mean, ln1_rstd;  // (B,T,C), (B,T), (B,T)
    std::vector<T> qkv;                      // (B,T,3,H,D) after rotary (or the q/k convolution)
    std::vector<T> qk_raw;                   // (B,T,2C) q and k before the convolution (its layers only)
    std::vector<T> atty, att_lse;            // (B,T,H,D), (B,H,T)
    std::vector<T> resid_attn;               // (B,T,C)  x after the attention residual
    std::vector<T> ln2, ln2_mean, ln2_rstd;  // (B,T,C), (B,T), (B,T)
    std::vector<T> fch, fch_gelu;            // (B,T,4C)
    std::vector<T> resid_out;                // (B,T,C)  the block's output

    // Sizes the fields `keep` keeps (all of them for Recompute::None) and empties the others.
    void allocate(size_t BT, size_t C, size_t H, Recompute keep, bool qk_conv) {
        const bool all = keep == Recompute::None, attn = keep != Recompute::Full;
        auto set = [](std::vector<T>& v, bool kept, size_t n) { v.assign(kept ? n : 0, T(0)); };
        set(ln1, all, BT * C), set(ln1_mean, all, BT), set(ln1_rstd, all, BT);
        set(qkv, attn, BT * 3 * C), set(qk_raw, attn && qk_conv, BT * 2 * C), set(atty, attn, BT * C), set(att_lse, attn, BT * H), set(resid_attn, attn, BT * C);
        set(ln2, all, BT * C), set(ln2_mean, all, BT), set(ln2_rstd, all, BT);
        set(fch, all, BT * 4 * C), set(fch_gelu, all, BT * 4 * C);
        set(resid_out, true, BT * C);
    }
};

// Where each activation of one block is: its own BlockActs where it keeps it, else the shared one.
template <typename T>
struct BlockView {
    T *ln1, *ln1_mean, *ln1_rstd, *qkv, *qk_raw, *atty, *att_lse, *resid_attn, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *resid_out;
    BlockView(BlockActs<T>& own, BlockActs<T>& shared) {
        auto pick = [](std::vector<T>& a, std::vector<T>& b) { return a.empty() ? b.data() : a.data(); };
        ln1 = pick(own.ln1, shared.ln1), ln1_mean = pick(own.ln1_mean, shared.ln1_mean);
        ln1_rstd = pick(own.ln1_rstd, shared.ln1_rstd), qkv = pick(own.qkv, shared.qkv), atty = pick(own.atty, shared.atty);
        qk_raw = pick(own.qk_raw, shared.qk_raw);
        att_lse = pick(own.att_lse, shared.att_lse), resid_attn = pick(own.resid_attn, shared.resid_attn);
        ln2 = pick(own.ln2, shared.ln2), ln2_mean = pick(own.ln2_mean, shared.ln2_mean);
        ln2_rstd = pick(own.ln2_rstd, shared.ln2_rstd), fch = pick(own.fch, shared.fch);
        fch_gelu = pick(own.fch_gelu, shared.fch_gelu), resid_out = own.resid_out.data();
    }
};

template <typename T>
struct GPT {
    GPTConfig cfg;
    std::vector<ParamTensor> layout;
    size_t num_params = 0;
    std::vector<T> params, grads;  // flat, in layout order
    ParamViews<T> p, g;

    // Activations of the last forward.
    int B = 0, Tn = 0;
    Recompute recompute = Recompute::None;  // what the blocks keep (model/recompute.h)
    std::vector<int> tokens, targets, pos, doc_start;  // doc_start empty: no document mask
    std::vector<T> encoded;                            // (B,T,C)
    std::vector<BlockActs<T>> acts;                    // what each block keeps
    BlockActs<T> work;                                 // the rest, shared by the blocks
    std::vector<T> lnf, lnf_mean, lnf_rstd, losses;    // (B,T,C), (B,T), (B,T), (B,T)
    // The pointer's (a model with one): query, key, shifted keys (B,T,D); gate logits, the head's
    // log-sum-exp, the copy weight, the copy's share (B,T); the chains (B,T) (layers/pointer.h).
    std::vector<T> ptr_q, ptr_kp, ptr_ks, ptr_gate, ptr_lse, ptr_pcopy, ptr_w;
    std::vector<int> ptr_first_key, ptr_prev_key, ptr_first_query, ptr_next_query;
    // Scratch of the forward and the backward.
    std::vector<T> qkv_pre, dresid, dln, dqkv_rot, dqkv_pre, datty, dfch, dfch_gelu, dtmp;
    // Context parallelism: with cp set, this object holds one rank's zigzag rows of a sequence
    // of P x T tokens (layers/ring_plan.h: positions are the plan's), and attention runs over
    // the ring (layers/ring_attention.h); every other op is per token and unchanged. The mean
    // loss then spans every rank's targets: loss_count, if > 0, is the number of targets over
    // all ranks, the denominator of the gradient (the caller sums the gradients over ranks).
    Comm* cp = nullptr;
    int loss_count = 0;
    T last_loss_sum = 0;  // the last forward's sum of losses over its counted targets
    int last_counted = 0;

    GPT(const GPT&) = delete;  // p and g point into this object's own buffers
    explicit GPT(const GPTConfig& c) : cfg(c), layout(param_layout(c)) {
        num_params = layout.back().offset + layout.back().size;
        params.assign(num_params, 0);
        grads.assign(num_params, 0);
        p = param_views(params.data(), cfg);
        g = param_views(grads.data(), cfg);
    }

    void init_weights(uint64_t seed) { init_gpt_weights(params.data(), cfg, seed); }

    // Activation elements (of T) that (b, t) needs under a policy: what resize() allocates.
    static size_t activation_elements(const GPTConfig& c, size_t b, size_t t, Recompute r) {
        const size_t BT = b * t, C = c.n_embd, H = c.n_head, L = c.n_layer;
        const size_t all = BT * (16 * C + 4 + H);  // one block's every field
        const size_t kept = r == Recompute::None ? all : r == Recompute::Selective ? BT * (6 * C + H) : BT * C;
        size_t conv = 0;  // q and k before the convolution, where a layer keeps its attention's inputs
        for (int l = 0; l < c.n_layer; l++) conv += c.layer_qk_conv(l) && r != Recompute::Full ? BT * 2 * C : 0;
        if (c.qk_conv && r != Recompute::None) conv += BT * 2 * C;  // work's
        const size_t per_run = BT * C /*encoded*/ + BT * (C + 3) /*lnf, stats, losses*/ + BT * 3 * C /*qkv_pre*/ +
                               BT * (C + C + 3 * C + 3 * C + C + 4 * C + 4 * C + C) /*backward scratch*/;
        const size_t pointer = c.pointer ? BT * (3 * c.head_dim() + 4) : 0;  // its T-typed buffers (the chains are ints)
        return L * kept + (r == Recompute::None ? 0 : all - BT * C) + per_run + conv + pointer;  // work: all but resid_out
    }

    void set_recompute(Recompute r) {
        if (r != recompute) B = Tn = 0;  // re-lay the activations on the next resize
        recompute = r;
    }

    void resize(int b, int t) {
        if (b == B && t == Tn) return;
        // The CPU ops index with int in places (b*T*4C at most): refuse shapes where that
        // could overflow rather than audit every product.
        if (b < 1 || t < 1 || (long long)b * t * 4 * cfg.n_embd > 2147483647LL)
            fatal("batch %d x window %d x 4 x width %d is too large for the CPU backend: lower --batch or --seq-len (or --ctx)", b, t,
                  cfg.n_embd);
        B = b, Tn = t;
        const size_t BT = (size_t)B * Tn, C = cfg.n_embd, H = cfg.n_head;
        encoded.assign(BT * C, 0);
        acts.assign(cfg.n_layer, BlockActs<T>{});
        for (int l = 0; l < cfg.n_layer; l++) acts[l].allocate(BT, C, H, recompute, cfg.layer_qk_conv(l) > 0);
        if (recompute == Recompute::None) work = BlockActs<T>{};
        else work.allocate(BT, C, H, Recompute::None, cfg.qk_conv > 0);
        work.resid_out.clear();  // a block's output is always its own
        lnf.assign(BT * C, 0), lnf_mean.assign(BT, 0), lnf_rstd.assign(BT, 0), losses.assign(BT, 0);
        const size_t P = cfg.pointer ? BT : 0, D = cfg.head_dim();
        for (std::vector<T>* v : {&ptr_q, &ptr_kp, &ptr_ks}) v->assign(P * D, 0);
        for (std::vector<T>* v : {&ptr_gate, &ptr_lse, &ptr_pcopy, &ptr_w}) v->assign(P, 0);
        for (std::vector<int>* v : {&ptr_first_key, &ptr_prev_key, &ptr_first_query, &ptr_next_query}) v->assign(P, -1);
        qkv_pre.assign(BT * 3 * C, 0);
        dresid.assign(BT * C, 0), dln.assign(BT * C, 0), dqkv_rot.assign(BT * 3 * C, 0), dqkv_pre.assign(BT * 3 * C, 0);
        datty.assign(BT * C, 0), dfch.assign(BT * 4 * C, 0), dfch_gelu.assign(BT * 4 * C, 0), dtmp.assign(BT * C, 0);
    }

    AttnShape attn_shape() const { return {B, Tn, cfg.n_head, cfg.head_dim(), 3 * cfg.n_embd}; }

    // Runs the model on tokens (B, T). targets (B, T) or nullptr: with targets, returns the mean
    // loss over targets >= 0; without, only lnf (the final hidden states) is computed.
    // positions (T): global position of each token (nullptr: 0..T-1).
    // doc_start (B, T) or nullptr: global position where each token's document starts.
    T forward(const int* in_tokens, const int* in_targets, const int* doc_start_in, int b, int t,
              const int* positions = nullptr) {
        resize(b, t);
        const int C = cfg.n_embd, BT = B * Tn;
        tokens.assign(in_tokens, in_tokens + BT);
        // An id past the vocabulary would index wte and the logits out of bounds.
        check_token_ids(in_tokens, in_targets, B, Tn, cfg.vocab_size);
        pos.resize(Tn);
        for (int i = 0; i < Tn; i++) pos[i] = positions ? positions[i] : i;
        if (cp && pos != RingPlan(cfg.attn(0), cp->size(), Tn * cp->size()).positions(cp->rank()))
            fatal("internal: a context-parallel forward needs the ring plan's positions (RingPlan::positions)");
        if (cp && cfg.qk_conv) fatal("%s", kQkConvRingError);
        if (cp && cfg.pointer) fatal("%s", kPointerRingError);
        if (doc_start_in) doc_start.assign(doc_start_in, doc_start_in + BT);
        else doc_start.clear();

        encoder_forward(encoded.data(), tokens.data(), p.wte, B, Tn, C);
        for (int l = 0; l < cfg.n_layer; l++) block_forward(l, block_input(l), BlockView<T>(acts[l], work), BlockStage::Output);
        layernorm_forward(lnf.data(), lnf_mean.data(), lnf_rstd.data(), block_input(cfg.n_layer), p.lnfw, p.lnfb, BT, C);
        if (!in_targets) {
            targets.clear();
            return T(0);
        }
        targets.assign(in_targets, in_targets + BT);
        int counted = 0;
        for (int i = 0; i < BT; i++) counted += targets[i] >= 0;
        if (cfg.pointer) pointer_forward_all();
        classifier_forward_backward(losses.data(), (T*)nullptr, (T*)nullptr, lnf.data(), p.wte, targets.data(), BT, C,
                                    cfg.vocab_size, T(0), pointer_mix());
        T total = 0;
        for (int i = 0; i < BT; i++) total += losses[i];
        last_loss_sum = total, last_counted = counted;
        return counted ? total / counted : T(0);
    }

    void zero_grad() { std::fill(grads.begin(), grads.end(), T(0)); }

    // Adds the gradient of the mean loss of the last forward (which had targets) into grads.
    void backward() {
        if (targets.empty()) fatal("internal: backward() needs a forward() with targets");
        const int C = cfg.n_embd, BT = B * Tn;
        int counted = 0;
        for (int i = 0; i < BT; i++) counted += targets[i] >= 0;
        if (loss_count > 0) counted = loss_count;
        const int* ds = doc_start.empty() ? nullptr : doc_start.data();
        const T scale = T(1) / std::sqrt((T)cfg.head_dim());

        // The classifier recomputes its logits chunk by chunk, adding into dwte and dlnf.
        std::fill(dln.begin(), dln.end(), T(0));
        std::vector<T> scratch_losses(BT);
        classifier_forward_backward(scratch_losses.data(), dln.data(), g.wte, lnf.data(), p.wte, targets.data(), BT,
                                    C, cfg.vocab_size, counted ? T(1) / counted : T(0), pointer_mix());
        if (cfg.pointer) pointer_backward_all(counted ? T(1) / counted : T(0));
        std::fill(dresid.begin(), dresid.end(), T(0));
        layernorm_backward(dresid.data(), g.lnfw, g.lnfb, dln.data(), block_input(cfg.n_layer), p.lnfw, lnf_mean.data(),
                           lnf_rstd.data(), BT, C);

        // dresid holds the gradient flowing into the residual stream x at a block's output.
        for (int l = cfg.n_layer - 1; l >= 0; l--) {
            const BlockView<T> a(acts[l], work);
            const BlockParams<T>& w = p.blocks[l];
            BlockParams<T>& dw = g.blocks[l];
            const T* x_in = block_input(l);
            const AttnShape s = attn_shape();
            block_recompute(l, x_in, a);
            // MLP: resid_out = resid_attn + fcproj(gelu(fc(ln2(resid_attn))))
            std::fill(dfch_gelu.begin(), dfch_gelu.end(), T(0));
            matmul_backward(dfch_gelu.data(), dw.fcprojw, dw.fcprojb, dresid.data(), a.fch_gelu, w.fcprojw, BT, 4 * C, C);
            std::fill(dfch.begin(), dfch.end(), T(0));
            gelu_backward(dfch.data(), a.fch, dfch_gelu.data(), (size_t)BT * 4 * C);
            std::fill(dln.begin(), dln.end(), T(0));
            matmul_backward(dln.data(), dw.fcw, dw.fcb, dfch.data(), a.ln2, w.fcw, BT, C, 4 * C);
            // dresid already is d(resid_attn) through the skip path; add the LayerNorm path.
            layernorm_backward(dresid.data(), dw.ln2w, dw.ln2b, dln.data(), a.resid_attn, w.ln2w, a.ln2_mean, a.ln2_rstd,
                               BT, C);
            // Attention: resid_attn = x_in + proj(attention(rope(qkv(ln1(x_in)))))
            std::fill(datty.begin(), datty.end(), T(0));
            matmul_backward(datty.data(), dw.projw, dw.projb, dresid.data(), a.atty, w.projw, BT, C, C);
            std::fill(dqkv_rot.begin(), dqkv_rot.end(), T(0));
            const T* qkv = a.qkv;
            T* dqkv = dqkv_rot.data();
            if (cp)
                ring_attention_backward(*cp, RingPlan(cfg.attn(l), cp->size(), Tn * cp->size()), dqkv, dqkv + C,
                                        dqkv + 2 * C, datty.data(), a.atty, a.att_lse, qkv, qkv + C, qkv + 2 * C,
                                        3 * C, ds, B, cfg.n_head, cfg.head_dim(), scale);
            else
                attention_backward(dqkv, dqkv + C, dqkv + 2 * C, datty.data(), a.atty, a.att_lse, qkv, qkv + C,
                                   qkv + 2 * C, pos.data(), ds, cfg.attn(l), s, scale);
            // The sink's gradient; atty and att_lse are the sink's already, so the attention's
            // backward above needed nothing of it (layers/attn_sink.h).
            if (w.sink) attn_sink_backward(dw.sink, datty.data(), a.atty, a.att_lse, w.sink, B, Tn, cfg.n_head, cfg.head_dim());
            if (w.logn_slope)  // before dq is scaled: it reads dq' (layers/rope.h)
                logn_slope_backward(dw.logn_slope, dqkv_rot.data(), a.qkv, w.logn_slope, pos.data(), B, Tn, cfg.n_head, cfg.head_dim(),
                                    cfg.layer_logn_base(l));
            logn_scale_queries(dqkv_rot.data(), pos.data(), B, Tn, cfg.n_head, cfg.head_dim(), cfg.layer_logn_base(l), (const T*)w.logn_slope);
            std::fill(dqkv_pre.begin(), dqkv_pre.end(), T(0));
            if (const int W = cfg.layer_qk_conv(l))  // a NoPE layer: no rotary to undo
                qk_conv_backward(dqkv_pre.data(), dw.qkconv, dqkv_rot.data(), a.qk_raw, w.qkconv, pos.data(), ds, B, Tn, C, W);
            else
                rope_backward(dqkv_pre.data(), dqkv_rot.data(), pos.data(), B, Tn, cfg.n_head, cfg.head_dim(), cfg.layer_rope_theta(l));
            std::fill(dln.begin(), dln.end(), T(0));
            matmul_backward(dln.data(), dw.qkvw, dw.qkvb, dqkv_pre.data(), a.ln1, w.qkvw, BT, C, 3 * C);
            layernorm_backward(dresid.data(), dw.ln1w, dw.ln1b, dln.data(), x_in, w.ln1w, a.ln1_mean, a.ln1_rstd, BT, C);
        }
        encoder_backward(g.wte, dresid.data(), tokens.data(), B, Tn, C);
    }

    // The pointer's side of the classifier (none without a pointer).
    PointerMix<T> pointer_mix() {
        if (!cfg.pointer) return {};
        return {ptr_gate.data(), ptr_pcopy.data(), ptr_w.data()};
    }

    // The pointer's head over lnf, up to its copy weights (layers/pointer.h); needs targets.
    void pointer_forward_all() {
        const int C = cfg.n_embd, BT = B * Tn, D = cfg.head_dim();
        matmul_forward(ptr_q.data(), lnf.data(), p.ptrq, (const T*)nullptr, BT, C, D);
        matmul_forward(ptr_kp.data(), lnf.data(), p.ptrk, (const T*)nullptr, BT, C, D);
        matmul_forward(ptr_gate.data(), lnf.data(), p.ptrgw, p.ptrgb, BT, C, 1);
        pointer_shift_keys(ptr_ks.data(), ptr_kp.data(), B, Tn, D);
        pointer_links(ptr_first_key.data(), ptr_prev_key.data(), ptr_first_query.data(), ptr_next_query.data(), tokens.data(),
                      targets.data(), B, Tn, cfg.vocab_size);
        pointer_forward(ptr_lse.data(), ptr_pcopy.data(), ptr_q.data(), ptr_ks.data(), ptr_first_key.data(), ptr_prev_key.data(), B,
                        Tn, D, T(1) / std::sqrt((T)D));
    }

    // Adds the pointer's gradient (the classifier gave ptr_w) into its weights and dln, the
    // gradient at lnf.
    void pointer_backward_all(T dloss) {
        const int C = cfg.n_embd, BT = B * Tn, D = cfg.head_dim();
        std::vector<T> dq((size_t)BT * D, T(0)), dks((size_t)BT * D, T(0)), dkp((size_t)BT * D, T(0)), dgate(BT, T(0));
        std::vector<T> dloss_rows(BT, dloss);
        pointer_backward(dq.data(), dks.data(), dgate.data(), ptr_q.data(), ptr_ks.data(), ptr_gate.data(), ptr_w.data(),
                         ptr_lse.data(), ptr_pcopy.data(), targets.data(), ptr_first_key.data(), ptr_prev_key.data(),
                         ptr_first_query.data(), ptr_next_query.data(), B, Tn, D, T(1) / std::sqrt((T)D), dloss_rows.data());
        pointer_unshift_grad(dkp.data(), dks.data(), B, Tn, D);
        matmul_backward(dln.data(), g.ptrq, (T*)nullptr, dq.data(), lnf.data(), p.ptrq, BT, C, D);
        matmul_backward(dln.data(), g.ptrk, (T*)nullptr, dkp.data(), lnf.data(), p.ptrk, BT, C, D);
        matmul_backward(dln.data(), g.ptrgw, g.ptrgb, dgate.data(), lnf.data(), p.ptrgw, BT, C, 1);
    }

    // The residual stream entering block l (l = n_layer: the last block's output).
    const T* block_input(int l) const { return l == 0 ? encoded.data() : acts[l - 1].resid_out.data(); }

    // How far block_forward runs: to the block's output, or (recomputing for the backward,
    // where the output is kept) to the last activation the backward reads, the GELU.
    enum class BlockStage { Gelu, Output };

    // One block's forward from x_in (B, T, C), writing its activations where `a` says.
    void block_forward(int l, const T* x_in, const BlockView<T>& a, BlockStage stage) {
        const int C = cfg.n_embd, BT = B * Tn;
        const BlockParams<T>& w = p.blocks[l];
        const int* ds = doc_start.empty() ? nullptr : doc_start.data();
        const T scale = T(1) / std::sqrt((T)cfg.head_dim());
        layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x_in, w.ln1w, w.ln1b, BT, C);
        matmul_forward(qkv_pre.data(), a.ln1, w.qkvw, w.qkvb, BT, C, 3 * C);                  // (B, T, 3, H, D)
        if (const int W = cfg.layer_qk_conv(l))  // a NoPE layer: its convolution instead of the rotary
            qk_conv_forward(a.qkv, a.qk_raw, qkv_pre.data(), (const T*)nullptr, w.qkconv, pos.data(), ds, B, Tn, C, W);
        else
            rope_forward(a.qkv, qkv_pre.data(), pos.data(), B, Tn, cfg.n_head, cfg.head_dim(), cfg.layer_rope_theta(l));
        logn_scale_queries(a.qkv, pos.data(), B, Tn, cfg.n_head, cfg.head_dim(), cfg.layer_logn_base(l), (const T*)w.logn_slope);
        const T* qkv = a.qkv;
        if (cp)
            ring_attention_forward(*cp, RingPlan(cfg.attn(l), cp->size(), Tn * cp->size()), a.atty, a.att_lse, qkv,
                                   qkv + C, qkv + 2 * C, 3 * C, ds, B, cfg.n_head, cfg.head_dim(), scale);
        else
            attention_forward(a.atty, a.att_lse, qkv, qkv + C, qkv + 2 * C, pos.data(), ds, cfg.attn(l), attn_shape(),
                              scale);                                                          // (B, T, H, D)
        if (w.sink) attn_sink_forward(a.atty, a.att_lse, w.sink, B, Tn, cfg.n_head, cfg.head_dim());
        matmul_forward(dtmp.data(), a.atty, w.projw, w.projb, BT, C, C);
        residual_forward(a.resid_attn, x_in, dtmp.data(), (size_t)BT * C);
        mlp_up_forward(l, a);
        if (stage == BlockStage::Gelu) return;
        matmul_forward(dtmp.data(), a.fch_gelu, w.fcprojw, w.fcprojb, BT, 4 * C, C);
        residual_forward(a.resid_out, a.resid_attn, dtmp.data(), (size_t)BT * C);
    }

    // ln2, the MLP's up projection and its GELU: fch_gelu (B, T, 4C) from resid_attn (B, T, C).
    void mlp_up_forward(int l, const BlockView<T>& a) {
        const int C = cfg.n_embd, BT = B * Tn;
        const BlockParams<T>& w = p.blocks[l];
        layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.resid_attn, w.ln2w, w.ln2b, BT, C);
        matmul_forward(a.fch, a.ln2, w.fcw, w.fcb, BT, C, 4 * C);
        gelu_forward(a.fch_gelu, a.fch, (size_t)BT * 4 * C);
    }

    // Before block l's backward: recomputes what it did not keep (model/recompute.h).
    void block_recompute(int l, const T* x_in, const BlockView<T>& a) {
        const int C = cfg.n_embd, BT = B * Tn;
        const BlockParams<T>& w = p.blocks[l];
        if (recompute == Recompute::Full) block_forward(l, x_in, a, BlockStage::Gelu);
        if (recompute != Recompute::Selective) return;
        layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x_in, w.ln1w, w.ln1b, BT, C);
        mlp_up_forward(l, a);
    }

    // Logits (V) of token t of batch row b after a forward (targets not needed); with a pointer,
    // the mixture's log-probabilities (layers/pointer.h), from the window's final states.
    void logits_at(T* out, int b, int t) const {
        const int C = cfg.n_embd;
        const T* row = lnf.data() + ((size_t)b * Tn + t) * C;
        matmul_forward(out, row, p.wte, (const T*)nullptr, 1, C, cfg.vocab_size);
        if (!cfg.pointer) return;
        const int D = cfg.head_dim();
        std::vector<T> lm(out, out + cfg.vocab_size), q(D), kp((size_t)std::max(t, 1) * D);
        T gate;
        matmul_forward(q.data(), row, p.ptrq, (const T*)nullptr, 1, C, D);
        matmul_forward(&gate, row, p.ptrgw, p.ptrgb, 1, C, 1);
        matmul_forward(kp.data(), lnf.data() + (size_t)b * Tn * C, p.ptrk, (const T*)nullptr, t, C, D);
        pointer_mix_logprobs(out, lm.data(), q.data(), gate, kp.data(), (size_t)D, tokens.data() + (size_t)b * Tn, t, D, cfg.vocab_size);
    }
};
