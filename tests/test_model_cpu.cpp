// Whole-model tests on the CPU: the gradient of the GPT's loss against finite differences in
// double precision, float vs double forward, document masking, determinism, a few training
// steps, and the checkpoint round trip. Prints PASS/FAIL lines and "N passed, M failed".
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <string>
#include <vector>
#include "model/backend.h"
#include "model/checkpoint.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/kv_cache_file.h"
#include "tests/check.h"
#include "tests/gradcheck.h"

static void report(bool ok, const char* what, double err, double tol) {
    check(ok, strf("%-44s err %.3g tol %.1g", what, err, tol));
}

// A model small enough for finite differences over every tensor, with a head dim that is not
// a power of two and a sequence length that is odd.
static GPTConfig tiny_config() {
    GPTConfig c;
    c.vocab_size = 37, c.n_layer = 2, c.n_embd = 24, c.n_head = 2;  // D = 12
    return c;
}

struct Batch {
    int B = 2, T = 7;
    std::vector<int> tokens, targets, doc_start, pos;
};

static Batch random_batch(gc::Rng& rng, int vocab) {
    Batch b;
    for (int i = 0; i < b.B * b.T; i++) {
        b.tokens.push_back(rng.randint(0, vocab - 1));
        b.targets.push_back(rng.randint(0, vocab - 1));
    }
    b.targets[3] = -1;  // an ignored target
    // Row 0 is one document; row 1 holds two, the second starting at position 1000 + 3.
    for (int t = 0; t < b.T; t++) b.pos.push_back(1000 + t);
    for (int r = 0; r < b.B; r++)
        for (int t = 0; t < b.T; t++) b.doc_start.push_back(r == 1 && t >= 3 ? 1003 : 1000);
    return b;
}

// Elements of every activation buffer a model holds now (what GPT::activation_elements predicts).
static size_t encoded_size(const GPT<float>& m) {
    size_t n = m.encoded.size() + m.lnf.size() + m.lnf_mean.size() + m.lnf_rstd.size() + m.losses.size() + m.qkv_pre.size();
    for (const auto* v : {&m.dresid, &m.dln, &m.dqkv_rot, &m.dqkv_pre, &m.datty, &m.dfch, &m.dfch_gelu, &m.dtmp}) n += v->size();
    for (const auto* v : {&m.ptr_q, &m.ptr_kp, &m.ptr_ks, &m.ptr_gate, &m.ptr_lse, &m.ptr_pcopy, &m.ptr_w}) n += v->size();
    std::vector<const BlockActs<float>*> blocks = {&m.work};
    for (const BlockActs<float>& a : m.acts) blocks.push_back(&a);
    for (const BlockActs<float>* a : blocks)
        for (const auto* v : {&a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->qk_raw, &a->atty, &a->att_lse, &a->resid_attn, &a->ln2,
                              &a->ln2_mean, &a->ln2_rstd, &a->fch, &a->fch_gelu, &a->resid_out})
            n += v->size();
    return n;
}

static void test_gradients(uint64_t seed, std::vector<int> nope_layers = {}, int logn_attn = 0, int qk_conv = 0,
                           std::vector<int> qk_conv_layers = {}, bool attn_sink = false, bool pointer = false, bool logn_learn = false) {
    gc::Rng rng(seed);
    GPTConfig cfg = tiny_config();
    cfg.pointer = pointer;
    cfg.nope_layers = nope_layers;
    cfg.logn_attn = logn_attn;
    cfg.logn_learn = logn_learn;
    cfg.qk_conv = qk_conv;
    cfg.qk_conv_layers = qk_conv_layers;
    cfg.attn_sink = attn_sink;
    GPT<double> m(cfg);
    m.init_weights(seed);
    // Larger weights than the init so every path carries a gradient well above rounding.
    for (double& w : m.params) w += rng.uniform(-0.1, 0.1);
    // A pointer's copy needs targets that earlier tokens hold: ids from a few for it.
    const Batch b = random_batch(rng, pointer ? 4 : cfg.vocab_size);
    auto loss = [&] { return m.forward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T, b.pos.data()); };
    loss();
    if (pointer) {
        double copied = 0;
        for (double pc : m.ptr_pcopy) copied += pc > 0.05;
        report(copied >= 4, "pointer: the gradient check's batch has targets the earlier tokens hold", copied, 4);
    }
    m.zero_grad();
    m.backward();
    const std::vector<double> analytic = m.grads;
    // Finite differences in double agree with a right backward to ~1e-6 here (the smallest
    // gradients, the key biases', carry the most rounding); a wrong term gives 1e-2 or more.
    const double tol = 1e-5;
    double worst = 0;
    std::string worst_name;
    for (const ParamTensor& t : m.layout) {
        // The convolutions' gradients are ~1e-7 here (they reach the loss through q and k only, as
        // the key biases do), where a step of 1e-5 leaves ~1e-11 of rounding in the difference: a
        // step of 1e-4 brings the rounding down and the truncation (~step^2) stays far below it.
        const double step = t.name.find("qk_conv") != std::string::npos ? 1e-4 : 1e-5;
        const double err = gc::check_grad(t.name.c_str(), m.params.data() + t.offset, t.size,
                                          analytic.data() + t.offset, loss, step, 48);
        if (!(err <= tol)) report(false, ("gradient of " + t.name).c_str(), err, tol);
        if (!(err <= worst)) worst = err, worst_name = t.name;
    }
    const std::string nope = (nope_layers.empty() ? "" : ", NoPE layers " + int_list_text(nope_layers)) +
                             (logn_attn ? ", log-n attention from position " + std::to_string(logn_attn) : "") +
                             (logn_learn ? " (learned slopes)" : "") + (qk_conv ? ", q/k convolution " + std::to_string(qk_conv) : "") +
                             (qk_conv_layers.empty() ? "" : " in layers " + int_list_text(qk_conv_layers)) +
                             (attn_sink ? ", attention sinks" : "") + (pointer ? ", a pointer" : "");
    report(worst <= tol, ("model gradient" + nope + ", all tensors (worst " + worst_name + ")").c_str(), worst, tol);
}

// A NoPE layer (no rotary embedding) is not a rotary one: the same weights give another loss,
// and a model whose layers are all NoPE scores a sequence the same at any starting position
// (so does a rotary one: positions are relative) but a rotary model does not score the same
// tokens the same when the gap between two of them changes, while an all-NoPE one does.
static void test_nope_layers(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig rot = tiny_config(), nope = tiny_config();
    nope.nope_layers = {0, 1};
    GPT<double> a(rot), b(nope);
    a.init_weights(seed);
    for (double& w : a.params) w += rng.uniform(-0.3, 0.3);  // attention far from uniform, so positions matter
    b.params = a.params;
    const Batch x = random_batch(rng, rot.vocab_size);
    const double la = a.forward(x.tokens.data(), x.targets.data(), nullptr, x.B, x.T, x.pos.data());
    const double lb = b.forward(x.tokens.data(), x.targets.data(), nullptr, x.B, x.T, x.pos.data());
    report(std::fabs(la - lb) > 1e-4, "NoPE layers change the loss (control: they are not rotary)", std::fabs(la - lb), 1e-4);
    std::vector<int> gapped = x.pos;
    for (size_t t = 4; t < gapped.size(); t++) gapped[t] += 50;  // the last tokens 50 positions further away
    const double la2 = a.forward(x.tokens.data(), x.targets.data(), nullptr, x.B, x.T, gapped.data());
    const double lb2 = b.forward(x.tokens.data(), x.targets.data(), nullptr, x.B, x.T, gapped.data());
    report(std::fabs(lb2 - lb) < 1e-12 && std::fabs(la2 - la) > 1e-4,
           "all-NoPE model: a gap between tokens changes nothing (rotary: it does)", std::fabs(lb2 - lb), 1e-12);
}

// Log-n attention scales the NoPE layers' queries at positions >= its base and nothing else: with
// the base past every position the loss is the same to the bit; with it inside, it differs.
static void test_logn_attn(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig cfg = tiny_config();
    cfg.nope_layers = {0, 1};
    GPT<double> a(cfg);
    a.init_weights(seed);
    for (double& w : a.params) w += rng.uniform(-0.3, 0.3);
    const Batch x = random_batch(rng, cfg.vocab_size);  // positions 1000 ...
    auto loss_with = [&](int base) {
        GPTConfig c = cfg;
        c.logn_attn = base;
        GPT<double> m(c);
        m.params = a.params;
        return m.forward(x.tokens.data(), x.targets.data(), nullptr, x.B, x.T, x.pos.data());
    };
    const double off = loss_with(0), past = loss_with(1000 + x.T), inside = loss_with(100);
    report(past == off, "log-n attention with its base past every position changes nothing", std::fabs(past - off), 0);
    report(std::fabs(inside - off) > 1e-4, "log-n attention from position 100 changes the loss (control)", std::fabs(inside - off), 1e-4);
    report(logn_query_scale(999, 1000) == 1.0 && logn_query_scale(1000, 1000) == std::log(1001.0) / std::log(1000.0) &&
               logn_query_scale(1 << 20, 0) == 1.0,
           "log-n scale: 1 below the base, ln(p + 1) / ln(base) from it, 1 with base 0", 0, 0);
    GPTConfig rot = tiny_config();
    rot.logn_attn = 64;
    std::string what;
    try {
        validate_config(rot, /*allow_any_head_dim=*/true);
    } catch (const FatalError& e) {
        what = e.what();
    }
    report(what.find("NoPE layers") != std::string::npos, "log-n attention in a model without NoPE layers is refused", 0, 0);
}

// Learned log-n slopes: an (H) tensor per NoPE layer, out of weight decay, in the config's JSON
// and the parameter count, started where the fixed factor is (the same loss as the model without
// them, to rounding); other slopes change the loss (control), and a slope acts on its own head only.
static void test_logn_learn(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig fixed = tiny_config();
    fixed.n_layer = 3, fixed.nope_layers = {0, 2}, fixed.logn_attn = 100;
    GPTConfig learn = fixed;
    learn.logn_learn = true;
    GPT<double> a(fixed), b(learn);
    a.init_weights(seed);
    b.init_weights(seed);
    for (double& w : a.params) w += rng.uniform(-0.3, 0.3);
    size_t slopes = 0, total = 0;
    bool shapes = true, started = true;
    for (const ParamTensor& t : b.layout) {
        total += t.size;
        shapes = shapes && t.offset % kParamAlign == 0;
        if (t.name.find("attn.logn_slope") == std::string::npos) {
            const auto same = std::find_if(a.layout.begin(), a.layout.end(), [&](const ParamTensor& p) { return p.name == t.name; });
            std::copy(a.params.begin() + same->offset, a.params.begin() + same->offset + same->size, b.params.begin() + t.offset);
            continue;
        }
        slopes++;
        shapes = shapes && t.shape == std::vector<int>{learn.n_head} && !t.decay && t.name.find("blocks.1.") == std::string::npos;
        for (size_t i = 0; i < t.size; i++) started = started && b.params[t.offset + i] == 1.0 / std::log(100.0);
    }
    report(slopes == 2 && shapes && (long long)total == config_param_count(learn),
           "log-n slopes: an (H) tensor per NoPE layer only, no decay, counted, every tensor aligned", (double)slopes, 2);
    report(started, "log-n slopes start at 1 / ln(base)", 0, 0);
    report(config_from_json(config_to_json(learn)).logn_learn && !config_from_json(config_to_json(fixed)).logn_learn,
           "log-n slopes: the config's JSON keeps them", 0, 0);
    const Batch x = random_batch(rng, fixed.vocab_size);  // positions 1000 ..., all past the base
    auto loss = [&](GPT<double>& m) { return m.forward(x.tokens.data(), x.targets.data(), nullptr, x.B, x.T, x.pos.data()); };
    const double la = loss(a), lb = loss(b);
    report(std::fabs(la - lb) <= 1e-12 * std::fabs(la), "log-n slopes at their start == the fixed factor", std::fabs(la - lb), 1e-12);
    // One head's slope moved: that head's queries change, the others' do not.
    const ParamTensor& s0 = *std::find_if(b.layout.begin(), b.layout.end(), [](const ParamTensor& t) { return t.name == "blocks.0.attn.logn_slope"; });
    b.params[s0.offset + 1] *= 2;
    const double lc = loss(b);
    report(std::fabs(lc - la) > 1e-6, "a log-n slope moved changes the loss (control)", std::fabs(lc - la), 1e-6);
    const int H = learn.n_head, D = learn.head_dim();
    const std::vector<double> qkv = b.acts[0].qkv;  // layer 0's scaled queries
    b.params[s0.offset + 1] /= 2;
    loss(b);
    double head0 = 0, head1 = 0;
    for (int t = 0; t < x.T; t++)
        for (int d = 0; d < D; d++) {
            const size_t i = (size_t)t * 3 * H * D;
            head0 = std::max(head0, std::fabs(qkv[i + d] - b.acts[0].qkv[i + d]));
            head1 = std::max(head1, std::fabs(qkv[i + D + d] - b.acts[0].qkv[i + D + d]));
        }
    report(head0 == 0 && head1 > 1e-6, "a log-n slope scales its own head's queries only", head0, 0);
    std::string what;
    GPTConfig off = learn;
    off.logn_attn = 0;
    try {
        validate_config(off, /*allow_any_head_dim=*/true);
    } catch (const FatalError& e) {
        what = e.what();
    }
    report(what.find("--logn-attn N") != std::string::npos, "learned log-n slopes without log-n attention are refused", 0, 0);
}

static void test_float_matches_double(uint64_t seed) {
    gc::Rng rng(seed);
    const GPTConfig cfg = tiny_config();
    GPT<double> md(cfg);
    GPT<float> mf(cfg);
    md.init_weights(seed);
    for (size_t i = 0; i < md.num_params; i++) mf.params[i] = (float)md.params[i];
    const Batch b = random_batch(rng, cfg.vocab_size);
    gc::poison(mf.lnf.data(), mf.lnf.size());
    const double ld = md.forward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T, b.pos.data());
    const double lf = mf.forward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T, b.pos.data());
    md.zero_grad(), md.backward();
    mf.zero_grad(), mf.backward();
    report(std::fabs(ld - lf) / ld < 1e-5, "float forward loss vs double", std::fabs(ld - lf) / ld, 1e-5);
    const double gerr = gc::rel_error(mf.grads.data(), md.grads.data(), md.num_params, 1e-2);
    report(gerr < 1e-3, "float gradients vs double", gerr, 1e-3);
}

// With the document mask, the second document of a packed row scores exactly as it does alone
// (rotary attention only sees relative positions).
static void test_document_mask(uint64_t seed) {
    gc::Rng rng(seed);
    const GPTConfig cfg = tiny_config();
    GPT<double> m(cfg);
    m.init_weights(seed);
    const int T = 9, split = 4;
    std::vector<int> tok(T), tgt(T), ds(T), pos(T);
    for (int t = 0; t < T; t++) tok[t] = rng.randint(0, 36), tgt[t] = rng.randint(0, 36), pos[t] = t, ds[t] = t < split ? 0 : split;
    m.forward(tok.data(), tgt.data(), ds.data(), 1, T, pos.data());
    const std::vector<double> packed(m.losses.begin() + split, m.losses.end());
    m.forward(tok.data() + split, tgt.data() + split, nullptr, 1, T - split, nullptr);
    const double err = gc::rel_error(packed.data(), m.losses.data(), T - split, 0);
    report(err < 1e-10, "doc mask: packed document == document alone", err, 1e-10);
    m.forward(tok.data(), tgt.data(), nullptr, 1, T, pos.data());
    const double leak = gc::rel_error(m.losses.data() + split, packed.data(), T - split, 0);
    report(leak > 1e-6, "doc mask: without it the documents interact", leak, 1e-6);
}

// Two identical runs, and runs with 1 and 2 threads, give bit-identical losses and weights.
static void test_determinism(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig cfg = tiny_config();
    cfg.n_embd = 128, cfg.n_head = 2;
    const Batch b = random_batch(rng, cfg.vocab_size);
    auto run = [&](int threads) {
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        CpuBackend m(cfg);
        m.init_weights(seed);
        std::vector<float> losses;
        for (int s = 1; s <= 3; s++) {
            losses.push_back(m.forward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T, b.pos.data()));
            m.zero_grad(), m.backward();
            m.adamw_step(1e-3f, clip_scale(m.grad_norm(), 1.0f), AdamWConfig{}, s);
        }
        std::vector<float> p(m.num_params());
        m.get_params(p.data());
        losses.insert(losses.end(), p.begin(), p.end());
        return losses;
    };
    const std::vector<float> a = run(2), b2 = run(2), c = run(1);
    const size_t diff = gc::count_bit_mismatch(a.data(), b2.data(), a.size()) + gc::count_bit_mismatch(a.data(), c.data(), a.size());
    report(diff == 0, "determinism: 3 steps, 2 runs and 1 vs 2 threads", (double)diff, 0);
}

// Training on one batch drives its loss down (the optimizer and the gradients agree).
static void test_overfit(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig cfg = tiny_config();
    cfg.n_embd = 64, cfg.n_head = 1;
    const Batch b = random_batch(rng, cfg.vocab_size);
    CpuBackend m(cfg);
    m.init_weights(seed);
    float first = 0, last = 0;
    for (int s = 1; s <= 60; s++) {
        last = m.forward(b.tokens.data(), b.targets.data(), nullptr, b.B, b.T, nullptr);
        if (s == 1) first = last;
        m.zero_grad(), m.backward();
        m.adamw_step(3e-3f, clip_scale(m.grad_norm(), 1.0f), AdamWConfig{}, s);
    }
    report(last < 0.2f * first, "60 AdamW steps on one batch: loss falls 5x", last / first, 0.2);
}

static void test_checkpoint_roundtrip(uint64_t seed) {
    GPTConfig cfg = tiny_config();
    cfg.nope_layers = {1}, cfg.logn_attn = 1003;  // recorded in the config, read back
    CpuBackend m(cfg);
    m.init_weights(seed);
    gc::Rng rng(seed);
    const Batch b = random_batch(rng, cfg.vocab_size);
    m.forward(b.tokens.data(), b.targets.data(), nullptr, b.B, b.T, nullptr);
    m.zero_grad(), m.backward();
    m.adamw_step(1e-3f, 1.0f, AdamWConfig{}, 1);
    char dir[] = "/tmp/ckpt_testXXXXXX";
    if (!mkdtemp(dir)) std::abort();
    const std::string path = checkpoint_path(dir, 1);
    TrainState st{1, 1, 2, 3, "{\"x\":1}", ""};
    save_checkpoint(path, m, std::string("tok\0bytes\xff", 10), &st);
    const Checkpoint ck = load_checkpoint(path, /*allow_any_head_dim=*/true);
    std::vector<float> p(m.num_params()), mm(m.num_params()), vv(m.num_params());
    m.get_params(p.data());
    m.get_opt_state(mm.data(), vv.data());
    const size_t diff = gc::count_bit_mismatch(p.data(), ck.params.data(), p.size()) +
                        gc::count_bit_mismatch(mm.data(), ck.m.data(), p.size()) +
                        gc::count_bit_mismatch(vv.data(), ck.v.data(), p.size());
    const bool meta_ok = ck.tokenizer == std::string("tok\0bytes\xff", 10) && ck.state.step == 1 &&
                         ck.state.loader_epoch == 2 && ck.state.loader_cursor == 3 && ck.state.train_args == "{\"x\":1}" &&
                         config_to_json(ck.cfg) == config_to_json(cfg);
    report(diff == 0 && meta_ok, "checkpoint round trip: weights, moments, metadata", (double)diff, 0);
    report(latest_checkpoint(dir) == path, "latest_checkpoint finds it", 0, 0);

    // A truncated copy must be refused with exit 1, in a child so that fatal() can exit.
    const std::string bad = std::string(dir) + "/truncated.safetensors";
    {
        FILE* in = std::fopen(path.c_str(), "rb");
        FILE* out = std::fopen(bad.c_str(), "wb");
        std::vector<char> buf(1000);
        const size_t n = std::fread(buf.data(), 1, buf.size(), in);
        std::fwrite(buf.data(), 1, n, out);
        std::fclose(in), std::fclose(out);
    }
    std::fflush(stdout);  // the child must not print our buffered lines again
    pid_t pid = fork();
    if (pid == 0) {
        std::freopen("/dev/null", "w", stderr);
        _exit(guarded_main([&] { load_checkpoint(bad); return 0; }));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    report(WIFEXITED(status) && WEXITSTATUS(status) == 1, "truncated checkpoint is refused", 0, 0);
    std::remove(bad.c_str()), std::remove(path.c_str()), rmdir(dir);
}

// Every recompute policy (model/recompute.h) gives the same loss and gradients as keeping
// everything, bit for bit (the CPU backend is deterministic, and a recomputed activation is
// computed by the same code from the same inputs), for dense, dilated and block-sparse layers
// with document masks; and what the blocks hold is what the memory model says, smaller for
// each policy in turn.
static void test_recompute_policies(uint64_t seed, int qk_conv = 0, bool attn_sink = false) {
    gc::Rng rng(seed);
    GPTConfig cfg = tiny_config();
    cfg.n_layer = 3;
    if (qk_conv) cfg.nope_layers = {1}, cfg.qk_conv = qk_conv;  // its raw q and k kept or recomputed with the rest
    cfg.attn_sink = attn_sink;  // the recomputed attention must add its sink again
    const std::string conv = (qk_conv ? " (q/k convolution " + std::to_string(qk_conv) + ")" : "") + (attn_sink ? " (sinks)" : "");
    AttnPattern dil;
    dil.kind = AttnKind::Dilated, dil.dilated.segments = {2, 4}, dil.dilated.dilations = {1, 2};
    AttnPattern bs;
    bs.kind = AttnKind::BlockSparse, bs.block_sparse.block = 2, bs.block_sparse.window = 3, bs.block_sparse.global = 1;
    cfg.layer_attn = {AttnPattern{}, dil, bs};
    const Batch b = random_batch(rng, cfg.vocab_size);
    std::vector<float> ref_grads;
    float ref_loss = 0;
    size_t prev_elements = 0;
    for (Recompute r : kRecomputePolicies) {
        GPT<float> m(cfg);
        m.init_weights(seed);
        m.set_recompute(r);
        // Two steps' worth: a backward that leaves its recomputed buffers stale must not matter.
        float loss = 0;
        for (int rep = 0; rep < 2; rep++) {
            loss = m.forward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T, b.pos.data());
            m.zero_grad();
            m.backward();
        }
        size_t held = encoded_size(m);
        const size_t predicted = GPT<float>::activation_elements(cfg, b.B, b.T, r);
        const std::string name = recompute_name(r) + conv;
        report(held == predicted, ("recompute " + name + ": memory model == allocation").c_str(),
               std::fabs((double)held - (double)predicted), 0);
        if (r == Recompute::None) {
            ref_grads = m.grads, ref_loss = loss, prev_elements = held;
            continue;
        }
        report(held < prev_elements, ("recompute " + name + ": holds less than the policy before").c_str(), (double)held,
               (double)prev_elements);
        prev_elements = held;
        const size_t diff = gc::count_bit_mismatch(m.grads.data(), ref_grads.data(), ref_grads.size()) + (loss != ref_loss);
        report(diff == 0, ("recompute " + name + ": loss and gradients == none, bitwise").c_str(), (double)diff, 0);
    }
    // The check can fail: a policy whose recompute saw other positions gives other gradients.
    {
        GPT<float> m(cfg);
        m.init_weights(seed);
        m.set_recompute(Recompute::Full);
        m.forward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T, b.pos.data());
        m.pos[0] += 1;  // what a recompute from the wrong inputs would see
        m.zero_grad();
        m.backward();
        const size_t diff = gc::count_bit_mismatch(m.grads.data(), ref_grads.data(), ref_grads.size());
        report(diff > 0, ("recompute full from other positions: gradients differ (control)" + conv).c_str(), (double)diff, 0);
    }
}

// The q/k convolution starts as the identity: a model with it computes, at init, what the same
// weights compute without it, and train --init-from's layout change (a model without the
// convolutions into one with them) keeps every other tensor. Off the identity, it changes the loss
// (control: the check can fail), and each convolution tensor is out of weight decay.
static void test_qk_conv_identity(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig plain = tiny_config(), conv = tiny_config();
    plain.nope_layers = conv.nope_layers = {1};
    conv.qk_conv = 4;
    GPT<double> a(plain), b(conv);
    a.init_weights(seed);
    for (double& w : a.params) w += rng.uniform(-0.2, 0.2);
    const std::vector<float> from(a.params.begin(), a.params.end());
    const std::vector<float> to = weights_with_identity_convolutions(from, plain, conv);
    b.params.assign(to.begin(), to.end());
    for (double& w : a.params) w = (float)w;  // both from the same float weights
    const Batch x = random_batch(rng, plain.vocab_size);
    const double la = a.forward(x.tokens.data(), x.targets.data(), x.doc_start.data(), x.B, x.T, x.pos.data());
    const double lb = b.forward(x.tokens.data(), x.targets.data(), x.doc_start.data(), x.B, x.T, x.pos.data());
    report(std::fabs(la - lb) < 1e-12, "q/k convolution at the identity: the loss of the model without it", std::fabs(la - lb), 1e-12);
    double* w = nullptr;
    bool decay = true;
    for (const ParamTensor& p : b.layout)
        if (p.name == "blocks.1.attn.qk_conv.weight") w = b.params.data() + p.offset, decay = p.decay;
    report(w && !decay, "q/k convolution: a tensor of its own, out of weight decay", 0, 0);
    if (!w) return;
    w[2 * conv.n_embd + 3] = 0.5;  // row 1 (the token one back), one query channel
    const double lc = b.forward(x.tokens.data(), x.targets.data(), x.doc_start.data(), x.B, x.T, x.pos.data());
    report(std::fabs(lc - lb) > 1e-6, "q/k convolution off the identity changes the loss (control)", std::fabs(lc - lb), 1e-6);
}

// --qk-conv-layers: the convolution in the NoPE layers it names only; the others keep no tensor
// and match single tokens. A model convolving some of its NoPE layers grows into one convolving
// all of them (train --init-from) computing the same loss, and a subset naming every NoPE layer is
// the model without a subset.
// Attention sinks: one (H) tensor per layer, out of weight decay, in the config's JSON and the
// parameter count. A sink far below every score is no sink: the model computes what the same
// weights compute without sinks; at 0 it changes the loss (control: the check can fail).
static void test_attn_sink(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig plain = tiny_config(), with = tiny_config();
    with.attn_sink = true;
    GPT<double> a(plain), b(with);
    a.init_weights(seed);
    b.init_weights(seed);
    size_t sinks = 0, total = 0;
    bool shapes = true;
    for (const ParamTensor& t : b.layout) {
        total += t.size;
        shapes = shapes && t.offset % kParamAlign == 0;  // the GPU's vector loads read every tensor
        if (t.name.find("attn.sink") == std::string::npos) {
            const auto same = std::find_if(a.layout.begin(), a.layout.end(), [&](const ParamTensor& p) { return p.name == t.name; });
            std::copy(a.params.begin() + same->offset, a.params.begin() + same->offset + same->size, b.params.begin() + t.offset);
            continue;
        }
        sinks++;
        shapes = shapes && t.shape == std::vector<int>{with.n_head} && !t.decay;
        for (size_t i = 0; i < t.size; i++) b.params[t.offset + i] = -1e4;
    }
    report(sinks == (size_t)with.n_layer && shapes && (long long)total == config_param_count(with),
           "attention sinks: an (H) tensor per layer, no decay, counted, every tensor aligned", (double)sinks, with.n_layer);
    const GPTConfig back = config_from_json(config_to_json(with));
    report(back.attn_sink && !config_from_json(config_to_json(plain)).attn_sink, "attention sinks: the config's JSON keeps them", 0, 0);
    const Batch batch = random_batch(rng, plain.vocab_size);
    auto loss = [&](GPT<double>& m) {
        return m.forward(batch.tokens.data(), batch.targets.data(), batch.doc_start.data(), batch.B, batch.T, batch.pos.data());
    };
    const double la = loss(a), lb = loss(b);
    report(std::fabs(la - lb) <= 1e-12 * std::fabs(la), "attention sinks far below every score == no sinks", std::fabs(la - lb), 1e-12);
    for (const ParamTensor& t : b.layout)
        if (t.name.find("attn.sink") != std::string::npos) std::fill(b.params.begin() + t.offset, b.params.begin() + t.offset + t.size, 0.0);
    const double l0 = loss(b);
    report(std::fabs(l0 - la) > 1e-6, "attention sinks at 0 change the loss (control)", std::fabs(l0 - la), 1e-6);
}

static void test_qk_conv_layers(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig part = tiny_config(), all = tiny_config(), listed = tiny_config();
    part.nope_layers = all.nope_layers = listed.nope_layers = {0, 1};
    part.qk_conv = all.qk_conv = listed.qk_conv = 3;
    part.qk_conv_layers = {1};
    listed.qk_conv_layers = {0, 1};
    report(part.layer_qk_conv(0) == 0 && part.layer_qk_conv(1) == 3 && all.layer_qk_conv(0) == 3, "--qk-conv-layers 1 of NoPE 0,1: layer 1 only", 0, 0);
    GPT<double> a(part), b(all);
    bool only_1 = true;
    for (const ParamTensor& p : a.layout) only_1 = only_1 && (p.name.find("qk_conv") == std::string::npos || p.name == "blocks.1.attn.qk_conv.weight");
    report(only_1 && a.num_params + 3 * 2 * part.n_embd == b.num_params, "--qk-conv-layers 1: one convolution tensor, in layer 1", 0, 0);
    a.init_weights(seed);
    for (double& w : a.params) w += rng.uniform(-0.2, 0.2);
    const std::vector<float> from(a.params.begin(), a.params.end());
    const std::vector<float> to = weights_with_identity_convolutions(from, part, all);
    b.params.assign(to.begin(), to.end());
    for (double& w : a.params) w = (float)w;
    const Batch x = random_batch(rng, part.vocab_size);
    const double la = a.forward(x.tokens.data(), x.targets.data(), x.doc_start.data(), x.B, x.T, x.pos.data());
    const double lb = b.forward(x.tokens.data(), x.targets.data(), x.doc_start.data(), x.B, x.T, x.pos.data());
    report(std::fabs(la - lb) < 1e-12, "layer 1's convolution kept, layer 0's from the identity: the same loss", std::fabs(la - lb), 1e-12);
    GPT<double> c(listed);
    report(config_to_json(listed) != config_to_json(all) && param_layout(listed).size() == param_layout(all).size() &&
               c.num_params == b.num_params, "--qk-conv-layers naming every NoPE layer: the model without it", 0, 0);
}

// Incremental inference (model/kv_cache.h): a prompt prefilled in chunks, then decoded one token
// at a time, gives the logits of a full forward over the whole sequence at every position, for
// dense, dilated and block-sparse layers, across the dilated segments' borders; the dilated
// layer's cache stays within its bound, the dense one keeps every row.
// Dilated patterns: nested segments; and segments that do not divide one another, with a dilation
// above the head count (offset classes that no head keeps) and one that does not divide its segment.
static void test_kv_cache(uint64_t seed, const AttnPattern& dil, int packed_rows, std::vector<int> nope_layers = {},
                          int logn_attn = 0, int qk_conv = 0, bool attn_sink = false, bool pointer = false, bool logn_learn = false) {
    gc::Rng rng(seed);
    GPTConfig cfg = tiny_config();
    cfg.n_layer = 3;
    cfg.pointer = pointer;
    cfg.nope_layers = nope_layers;
    cfg.logn_attn = logn_attn;
    cfg.logn_learn = logn_learn;
    cfg.qk_conv = qk_conv;
    cfg.attn_sink = attn_sink;
    AttnPattern bs;
    bs.kind = AttnKind::BlockSparse, bs.block_sparse.block = 2, bs.block_sparse.window = 3, bs.block_sparse.global = 1;
    cfg.layer_attn = {AttnPattern{}, dil, bs};
    const int B = 2, N = 37, chunk = 5, prompt = 13;
    GPT<double> full(cfg);  // in double: the cache sums in another order than the full forward
    full.init_weights(seed);
    for (const ParamTensor& t : full.layout)  // convolutions off the identity: the rows before a chunk count
        if (t.name.find("qk_conv") != std::string::npos)
            for (size_t i = 0; i < t.size; i++) full.params[t.offset + i] += rng.uniform(-0.5, 0.5);
    for (const ParamTensor& t : full.layout)  // sinks that weigh: near the scores of the keys
        if (t.name.find("attn.sink") != std::string::npos)
            for (size_t i = 0; i < t.size; i++) full.params[t.offset + i] = rng.uniform(-1, 2);
    for (const ParamTensor& t : full.layout)  // slopes of their own, a head's unlike another's
        if (t.name.find("attn.logn_slope") != std::string::npos)
            for (size_t i = 0; i < t.size; i++) full.params[t.offset + i] = rng.uniform(0.05, 1.5);
    if (pointer) full.params[full.layout.back().offset] = 0;  // the gate half open: the copy weighs
    std::vector<int> tokens(B * N), targets(B * N);
    for (int& t : tokens) t = rng.randint(0, pointer ? 5 : cfg.vocab_size - 1);  // a pointer's: tokens that recur
    for (int b = 0; b < B; b++)
        for (int t = 0; t < N; t++) targets[b * N + t] = t + 1 < N ? tokens[b * N + t + 1] : -1;
    targets[3] = -1;
    full.forward(tokens.data(), targets.data(), nullptr, B, N);
    const std::vector<double> full_losses = full.losses;  // the mixture's, with a pointer
    full.forward(tokens.data(), nullptr, nullptr, B, N);
    KVCache<double> cache(full, B, chunk);
    std::vector<double> want(cfg.vocab_size), got(cfg.vocab_size);
    std::vector<int> piece, piece_targets;
    std::vector<double> got_losses;
    double worst = 0, worst_loss = 0;
    const size_t dilated_bytes = cache.layer_bytes(1);
    bool dilated_fixed = true;
    for (int at = 0; at < N;) {
        const int n = at < prompt ? std::min(chunk, prompt - at) : 1;  // prefill in chunks, then decode
        piece.clear();
        for (int b = 0; b < B; b++) piece.insert(piece.end(), tokens.begin() + b * N + at, tokens.begin() + b * N + at + n);
        cache.append(piece.data(), n);
        piece_targets.clear();
        for (int b = 0; b < B; b++) piece_targets.insert(piece_targets.end(), targets.begin() + b * N + at, targets.begin() + b * N + at + n);
        got_losses.assign((size_t)B * n, 0);
        cache.losses(got_losses.data(), piece_targets.data());
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                full.logits_at(want.data(), b, at + i);
                cache.logits(got.data(), b, i);
                worst = std::max(worst, gc::rel_error(got.data(), want.data(), cfg.vocab_size, 1e-6));
                worst_loss = std::max(worst_loss, std::fabs(got_losses[(size_t)b * n + i] - full_losses[(size_t)b * N + at + i]));
            }
        at += n;
        dilated_fixed = dilated_fixed && cache.layer_bytes(1) == dilated_bytes;
    }
    const std::string name = "KV cache == full forward, dilated w " + std::to_string(dil.dilated.segments[0]) + "," +
                             std::to_string(dil.dilated.segments[1]) + " r " + std::to_string(dil.dilated.dilations[0]) + "," +
                             std::to_string(dil.dilated.dilations[1]) + (nope_layers.empty() ? "" : ", NoPE layers " + int_list_text(nope_layers)) +
                             (logn_attn ? ", log-n from " + std::to_string(logn_attn) : "") +
                             (logn_learn ? " (learned slopes)" : "") + (qk_conv ? ", q/k convolution " + std::to_string(qk_conv) : "") +
                             (attn_sink ? ", sinks" : "") + (pointer ? ", a pointer" : "");
    report(worst < 1e-10, name.c_str(), worst, 1e-10);
    report(worst_loss < 1e-10, (name + ": the losses").c_str(), worst_loss, 1e-10);
    if (pointer) {  // a cache copied by gather goes on as the one it copies: the keys and tokens came along
        KVCache<double> copy(full, B, chunk);
        copy.gather(cache, {1, 0});
        full.logits_at(want.data(), 1, N - 1);
        copy.logits(got.data(), 0, 0);
        const double e = gc::rel_error(got.data(), want.data(), cfg.vocab_size, 1e-6);
        report(e < 1e-10, "KV cache with a pointer: a gathered copy gives its source's mixture", e, 1e-10);
    }
    // sum_i ceil(w_i / r_i) packed rows per head, of 2 x width values, per sequence.
    // With a q/k convolution the layer also keeps its last W - 1 raw q and k rows.
    const size_t bound = (size_t)B * (packed_rows + std::max(cfg.layer_qk_conv(1) - 1, 0)) * 2 * cfg.n_embd * sizeof(double);
    const bool dense_all = cache.layer_bytes(0) >= (size_t)B * N * 2 * cfg.n_embd * sizeof(double);
    report(dilated_fixed && dilated_bytes == bound && dense_all,
           "KV cache: dilated layer holds sum w_i/r_i packed rows, never more; dense keeps all", (double)dilated_bytes,
           (double)bound);
    // The check can fail: another first token gives other logits (one that differs from the
    // true one for every seed: a random pick could repeat it).
    KVCache<double> off(full, B, chunk);
    const int other_first[2] = {(tokens[0] + 1) % cfg.vocab_size, tokens[N]};
    off.append(other_first, 1);
    full.logits_at(want.data(), 0, 0);
    off.logits(got.data(), 0, 0);
    const double e = gc::rel_error(got.data(), want.data(), cfg.vocab_size, 1e-6);
    report(e > 1e-3, "KV cache: another token at position 0 gives other logits (control)", e, 1e-3);
}

// Cached scoring (perplexity_cached) in windows of 8 overlapping by half: every token after the
// first scored once, each by the window where it has at least 4 tokens before it; the same total
// as full forwards over those windows scoring their second halves. A dense model gets these
// windows because its cache is unbounded; a dilated one (bounded) only when asked (sliding).
static void test_sliding_perplexity(uint64_t seed, bool dilated) {
    gc::Rng rng(seed);
    GPTConfig cfg = tiny_config();
    if (dilated) cfg.layer_attn.assign(cfg.n_layer, dilated_pattern(true, {4, 8}, {1, 2}));
    GPT<float> m(cfg);
    m.init_weights(seed);
    std::vector<int> ids(37);
    for (int& t : ids) t = rng.randint(0, cfg.vocab_size - 1);
    const int ctx = 8;
    PositionLosses by_pos;
    const PerplexityResult r =
        perplexity_cached([&] { return std::unique_ptr<IncrementalModel>(new CpuIncremental(m, 1, 3)); }, cfg, ids, ctx, &by_pos, nullptr,
                          /*sliding=*/dilated);
    double want = 0;
    long long scored = 0;
    for (int start = 0; start < 36; start += ctx / 2) {
        const int end = std::min(start + ctx, 36), from = start == 0 ? 0 : start + ctx / 2;
        std::vector<int> tg(ids.begin() + start + 1, ids.begin() + end + 1);
        for (int i = 0; i < end - start; i++)
            if (start + i < from) tg[i] = -1;
        m.forward(ids.data() + start, tg.data(), nullptr, 1, end - start);
        want += m.last_loss_sum, scored += m.last_counted;
        if (end == 36) break;
    }
    // Positions are the tokens' places in the document (32..35 in the bucket [32, 63]), not in the window.
    const bool positions_ok = by_pos.tokens.size() == 6 && by_pos.tokens[5] == 4;
    report(r.tokens == 36 && scored == 36 && std::fabs(r.total_nats - want) < 1e-4 * want && positions_ok,
           dilated ? "dilated model, --windows sliding (8, stride 4) == full forwards" : "cached sliding windows (8, stride 4) == full forwards", std::fabs(r.total_nats - want), 1e-4 * want);
}

// A cache saved to a file and loaded into a fresh one decodes exactly as the original; a file
// from other weights is refused.
// A cache saved and loaded (and one gathered from it, as infer copies a prefilled context to
// several prompts) decodes the same bits as the cache it came from; with a q/k convolution (off
// the identity) its kept rows travel too.
static void test_kv_cache_file(uint64_t seed, int qk_conv = 0) {
    gc::Rng rng(seed);
    GPTConfig cfg = tiny_config();
    AttnPattern dil;
    dil.kind = AttnKind::Dilated, dil.dilated.segments = {4, 8}, dil.dilated.dilations = {1, 2};
    cfg.layer_attn = {dil, AttnPattern{}};
    if (qk_conv) cfg.nope_layers = {0, 1}, cfg.qk_conv = qk_conv;
    const std::string conv = qk_conv ? " (q/k convolution " + std::to_string(qk_conv) + ")" : "";
    GPT<float> m(cfg);
    m.init_weights(seed);
    for (const ParamTensor& t : m.layout)
        if (t.name.find("qk_conv") != std::string::npos)
            for (size_t i = 0; i < t.size; i++) m.params[t.offset + i] += (float)rng.uniform(-0.5, 0.5);
    std::vector<int> ids(30);
    for (int& t : ids) t = rng.randint(0, cfg.vocab_size - 1);
    CpuIncremental a(m, 1, 7), b(m, 1, 7), g(m, 2, 7);
    for (int at = 0; at < 21; at += 7) a.append(ids.data() + at, 7);
    const std::string path = "build/test_kv_cache_file.safetensors";
    const std::vector<float> params(m.params.begin(), m.params.end());
    save_kv_cache(path, a, cfg, weights_fingerprint(params));
    load_kv_cache(path, b, cfg, weights_fingerprint(params), 1);
    g.replicate(a);
    std::vector<float> la(cfg.vocab_size), lb(cfg.vocab_size), lg(cfg.vocab_size);
    a.logits(la.data(), 0, 6), b.logits(lb.data(), 0, 0);
    size_t diff = gc::count_bit_mismatch(la.data(), lb.data(), la.size()), gathered = 0;
    for (int at = 21; at < 30; at++) {
        const int two[2] = {ids[at], ids[at]};
        a.append(&ids[at], 1), b.append(&ids[at], 1), g.append(two, 1);
        a.logits(la.data(), 0, 0), b.logits(lb.data(), 0, 0), g.logits(lg.data(), 1, 0);
        diff += gc::count_bit_mismatch(la.data(), lb.data(), la.size());
        gathered += gc::count_bit_mismatch(la.data(), lg.data(), la.size());
    }
    report(diff == 0 && b.position() == 30, ("KV cache file: saved, loaded, decodes the same bits" + conv).c_str(), (double)diff, 0);
    report(gathered == 0, ("KV cache gathered into another: decodes the same bits" + conv).c_str(), (double)gathered, 0);
    if (qk_conv) return;
    std::string what;
    try {
        CpuIncremental c(m, 1, 7);
        load_kv_cache(path, c, cfg, "another", 1);
    } catch (const FatalError& e) {
        what = e.what();
    }
    report(what.find("another model or checkpoint") != std::string::npos, "KV cache file from other weights refused", 0, 0);
    std::remove(path.c_str());
}

// The pointer: four tensors after lnf (query and key of a head's size, the gate's weight under
// decay, its bias at -3 outside it), counted, aligned, in the config's JSON. A gate shut far
// (bias -1e4) is no pointer: the loss of the same weights without one; at the init's -3 the copy
// changes the loss (control: the check can fail). The loss is the mixture's, recomputed here from
// the model's own pieces (the language model's log-probability from the model without a pointer).
static void test_pointer(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig plain = tiny_config(), with = tiny_config();
    with.pointer = true;
    GPT<double> a(plain), b(with);
    a.init_weights(seed);
    b.init_weights(seed);
    size_t found = 0, total = 0;
    bool shapes = true;
    const int D = with.head_dim(), C = with.n_embd;
    for (const ParamTensor& t : b.layout) {
        total += t.size;
        shapes = shapes && t.offset % kParamAlign == 0;
        if (t.name.rfind("ptr.", 0) != 0) {
            const auto same = std::find_if(a.layout.begin(), a.layout.end(), [&](const ParamTensor& p) { return p.name == t.name; });
            std::copy(a.params.begin() + same->offset, a.params.begin() + same->offset + same->size, b.params.begin() + t.offset);
            continue;
        }
        found++;
        if (t.name == "ptr.q.weight" || t.name == "ptr.k.weight") shapes = shapes && t.shape == std::vector<int>{D, C} && t.decay;
        else if (t.name == "ptr.gate.weight") shapes = shapes && t.shape == std::vector<int>{1, C} && t.decay;
        else shapes = shapes && t.name == "ptr.gate.bias" && t.shape == std::vector<int>{1} && !t.decay && b.params[t.offset] == -3.0;
    }
    report(found == 4 && shapes && (long long)total == config_param_count(with),
           "pointer: four tensors of the stated shapes and decay, the gate's bias at -3, counted, aligned", (double)found, 4);
    report(config_from_json(config_to_json(with)).pointer && !config_from_json(config_to_json(plain)).pointer,
           "pointer: the config's JSON keeps it", 0, 0);
    const Batch batch = random_batch(rng, 4);
    auto run = [&](GPT<double>& m) {
        return m.forward(batch.tokens.data(), batch.targets.data(), batch.doc_start.data(), batch.B, batch.T, batch.pos.data());
    };
    const double la = run(a), lb = run(b);
    double mixed = 0, n = 0;
    for (size_t r = 0; r < batch.targets.size(); r++) {
        if (batch.targets[r] < 0) continue;
        const double p_lm = std::exp(-a.losses[r]);
        const double g = 1 / (1 + std::exp(-b.ptr_gate[r]));
        mixed += -std::log((1 - g) * p_lm + g * b.ptr_pcopy[r]), n++;
    }
    report(std::fabs(lb - mixed / n) <= 1e-12 * std::fabs(lb), "pointer: the loss is the mixture of the model's language model and copy",
           std::fabs(lb - mixed / n), 1e-12);
    report(std::fabs(la - lb) > 1e-6, "pointer at the init's gate changes the loss (control)", std::fabs(la - lb), 1e-6);
    // What generation samples from (logits_at: the mixture's log-probabilities) is what training
    // scores: the target's log-probability is minus its loss. (They sum to 1 - g a_null: the null
    // key's weight copies nothing; a sampler's softmax renormalizes.)
    const std::vector<double> losses_b = b.losses;
    std::vector<double> lp(with.vocab_size);
    double worst = 0;
    for (int r = 0; r < batch.B; r++)
        for (int t = 0; t < batch.T; t++) {
            const int y = batch.targets[(size_t)r * batch.T + t];
            b.logits_at(lp.data(), r, t);
            if (y >= 0) worst = std::max(worst, std::fabs(lp[y] + losses_b[(size_t)r * batch.T + t]));
        }
    report(worst < 1e-12, "pointer: logits_at gives the mixture's log-probabilities, the target's = -its loss", worst, 1e-12);
    b.params[b.layout.back().offset] = -1e4;
    const double shut = run(b);
    report(std::fabs(la - shut) <= 1e-12 * std::fabs(la), "pointer with its gate shut == no pointer", std::fabs(la - shut), 1e-12);
}

static int main_body(int argc, char** argv) {
    uint64_t seed = 1234;
    for (int i = 1; i + 1 < argc; i++)
        if (std::string(argv[i]) == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    std::printf("test_model_cpu: seed %llu\n", (unsigned long long)seed);
    test_gradients(seed);
    test_gradients(seed, {1});
    test_gradients(seed, {0, 1}, 30);
    test_gradients(seed, {1}, 0, 3);
    test_gradients(seed, {0, 1}, 30, 4);
    test_qk_conv_identity(seed);
    test_qk_conv_layers(seed);
    test_gradients(seed, {0, 1}, 30, 3, {0});
    test_gradients(seed, {}, 0, 0, {}, true);
    test_gradients(seed, {1}, 30, 3, {}, true);
    test_attn_sink(seed);
    test_gradients(seed, {}, 0, 0, {}, false, true);
    test_gradients(seed, {1}, 0, 3, {}, true, true);
    test_pointer(seed);
    test_nope_layers(seed);
    test_logn_attn(seed);
    test_gradients(seed, {0, 1}, 30, 0, {}, false, false, true);
    test_gradients(seed, {1}, 30, 3, {}, true, false, true);
    test_logn_learn(seed);
    test_float_matches_double(seed);
    test_document_mask(seed);
    test_determinism(seed);
    test_overfit(seed);
    test_checkpoint_roundtrip(seed);
    test_recompute_policies(seed);
    test_recompute_policies(seed, 3);
    test_recompute_policies(seed, 0, true);
    test_kv_cache(seed, dilated_pattern(true, {4, 8}, {1, 2}), 4 + 4);
    test_kv_cache(seed, dilated_pattern(true, {6, 9}, {4, 3}), 2 + 3);
    test_kv_cache(seed, dilated_pattern(true, {6, 9}, {4, 3}), 2 + 3, {0, 2});
    test_kv_cache(seed, dilated_pattern(true, {6, 9}, {4, 3}), 2 + 3, {0, 2}, 10);
    test_kv_cache(seed, dilated_pattern(true, {6, 9}, {4, 3}), 2 + 3, {0, 1, 2}, 0, 3);
    test_kv_cache(seed, dilated_pattern(true, {6, 9}, {4, 3}), 2 + 3, {0, 2}, 10, 7);
    test_kv_cache(seed, dilated_pattern(true, {4, 8}, {1, 2}), 4 + 4, {}, 0, 0, true);
    test_kv_cache(seed, dilated_pattern(true, {6, 9}, {4, 3}), 2 + 3, {0, 2}, 10, 3, true);
    test_kv_cache(seed, dilated_pattern(true, {6, 9}, {4, 3}), 2 + 3, {0, 2}, 10, 3, true, true);
    test_kv_cache(seed, dilated_pattern(true, {6, 9}, {4, 3}), 2 + 3, {0, 2}, 10, 3, true, false, true);
    test_sliding_perplexity(seed, false);
    test_sliding_perplexity(seed, true);
    test_kv_cache_file(seed);
    test_kv_cache_file(seed, 3);
    return check_report();
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
