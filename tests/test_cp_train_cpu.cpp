// Context-parallel training on the CPU (model/gpt.h with cp set: ring attention over simulated
// ranks, comm/in_process.h): a small GPT trained for 10 AdamW steps on the same windows
//   - in one process (the reference), and
//   - split over CP = 2, 4 and 8 ranks, each holding its zigzag rows (layers/ring_plan.h) with
//     their global positions, the loss and the gradients summed over ranks,
// for dense and dilated attention with document masks: the losses must track the reference
// within float tolerance, and every rank must end with bit-identical weights (a checksum).
// Every recompute policy (model/recompute.h) gives the same bits on every rank as keeping
// everything. Also: a rank given the wrong positions is refused. Usage: test_cp_train_cpu. Prints PASS/FAIL
// lines and "N passed, M failed".
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "comm/in_process.h"
#include "model/parallel.h"
#include "optim/adamw.h"
#include "model/gpt.h"
#include "tests/check.h"

constexpr int kB = 2, kT = 64, kSteps = 10;

// The windows of every step: tokens, targets (some ignored: -1) and document starts.
struct Batch {
    std::vector<int> x, y, doc;
};
static std::vector<Batch> make_batches(const GPTConfig& cfg) {
    SplitMix64 rng(7);
    std::vector<Batch> out(2);  // two windows, alternating: a loss that must go down
    for (Batch& b : out) {
        b.x.resize(kB * kT), b.y.resize(kB * kT), b.doc.resize(kB * kT);
        for (int r = 0; r < kB; r++)
            for (int t = 0, start = 0; t < kT; t++) {
                if (t > 0 && rng.below(19) == 0) start = t;
                b.x[r * kT + t] = (int)rng.below(cfg.vocab_size);
                b.y[r * kT + t] = rng.below(10) == 0 ? -1 : (int)rng.below(cfg.vocab_size);
                b.doc[r * kT + t] = start;
            }
    }
    return out;
}

// One AdamW step on every parameter tensor (as the CPU backend's).
static void step(GPT<float>& m, std::vector<float>& mom, std::vector<float>& var, int t) {
    for (const ParamTensor& p : m.layout)
        adamw_update(m.params.data() + p.offset, mom.data() + p.offset, var.data() + p.offset, m.grads.data() + p.offset,
                     p.size, 1e-2f, 0.9f, 0.95f, 1e-8f, p.decay ? 0.1f : 0.f, t, 1.f);
}

static uint64_t checksum(const std::vector<float>& x) { return fnv1a(x.data(), x.size() * sizeof(float)); }

static void run(const std::string& name, const GPTConfig& cfg) {
    const std::vector<Batch> batches = make_batches(cfg);
    // Reference: one process, the whole window.
    std::vector<float> ref_loss;
    {
        GPT<float> m(cfg);
        m.init_weights(11);
        std::vector<float> mom(m.num_params, 0.f), var(m.num_params, 0.f);
        for (int s = 0; s < kSteps; s++) {
            ref_loss.push_back(m.forward(batches[s % 2].x.data(), batches[s % 2].y.data(), batches[s % 2].doc.data(), kB, kT));
            m.zero_grad();
            m.backward();
            step(m, mom, var, s + 1);
        }
    }
    for (int P : {2, 4, 8}) {  // 8: the 8-GPU ring as simulated ranks
        std::vector<uint64_t> none_sums;
        for (Recompute policy : kRecomputePolicies) {
            std::vector<std::vector<float>> losses(P);
            std::vector<uint64_t> sums(P);
            InProcessWorld world(P);
            run_ranks(world, [&](Comm& comm) {
                const int r = comm.rank(), n = kT / P;
                const RingPlan plan(cfg.attn(0), P, kT);
                const std::vector<int> pos = plan.positions(r);
                GPT<float> m(cfg);
                m.init_weights(11);
                m.cp = &comm;
                m.set_recompute(policy);
                std::vector<float> mom(m.num_params, 0.f), var(m.num_params, 0.f);
                for (int s = 0; s < kSteps; s++) {
                    std::vector<int> x(kB * n), y(kB * n), doc(kB * n);
                    for (int b = 0; b < kB; b++)
                        for (int i = 0; i < n; i++) {
                            x[b * n + i] = batches[s % 2].x[b * kT + pos[i]];
                            y[b * n + i] = batches[s % 2].y[b * kT + pos[i]];
                            doc[b * n + i] = batches[s % 2].doc[b * kT + pos[i]];
                        }
                    m.forward(x.data(), y.data(), doc.data(), kB, n, pos.data());
                    float tot[2] = {m.last_loss_sum, (float)m.last_counted};
                    comm.all_reduce_sum(tot, 2);
                    losses[r].push_back(tot[0] / tot[1]);
                    m.loss_count = (int)tot[1];
                    m.zero_grad();
                    m.backward();
                    comm.all_reduce_sum(m.grads.data(), m.num_params);
                    step(m, mom, var, s + 1);
                }
                sums[r] = checksum(m.params);
            });
            if (policy != Recompute::None) {
                check(sums == none_sums, name + ", CP = " + std::to_string(P) + ", --recompute " + recompute_name(policy) +
                                             ": every rank's weights after 10 steps are the same bits as without recompute");
                continue;
            }
            none_sums = sums;
            double worst = 0;
            for (int s = 0; s < kSteps; s++) worst = std::max(worst, std::fabs((double)losses[0][s] - ref_loss[s]) / ref_loss[s]);
            char buf[300];
            std::snprintf(buf, sizeof buf, "%s, CP = %d: 10 steps track one process (losses %.5f -> %.5f; worst rel diff %.1e, tol 1e-5)",
                          name.c_str(), P, ref_loss[0], ref_loss[kSteps - 1], worst);
            check(worst < 1e-5 && ref_loss[kSteps - 1] < ref_loss[0], buf);
            bool same = true;
            for (int r = 1; r < P; r++) same &= sums[r] == sums[0] && losses[r] == losses[0];
            check(same, name + ", CP = " + std::to_string(P) + ": every rank has the same losses and bit-identical weights");
        }
    }
}

int main() {
    return guarded_main([&] {
        GPTConfig cfg;
        cfg.vocab_size = 96, cfg.n_layer = 2, cfg.n_embd = 32, cfg.n_head = 2;
        run("dense causal, documents", cfg);
        AttnPattern dil;
        dil.kind = AttnKind::Dilated;
        dil.dilated.segments = {8, 32};
        dil.dilated.dilations = {1, 2};
        cfg.layer_attn = {dil, AttnPattern{}};
        run("dilated (8,1)(32,2) + dense, documents", cfg);
        cfg.attn_sink = true;  // each rank adds the sinks to its own rows, after the ring
        run("dilated + dense with attention sinks, documents", cfg);
        cfg.attn_sink = false;

        InProcessWorld world(2);  // positions that are not the plan's: refused
        std::string what;
        try {
            run_ranks(world, [&](Comm& comm) {
                GPT<float> m(cfg);
                m.cp = &comm;
                std::vector<int> x(kT / 2, 1), pos(kT / 2);
                for (int i = 0; i < kT / 2; i++) pos[i] = comm.rank() * kT / 2 + i;  // contiguous halves
                m.forward(x.data(), nullptr, nullptr, 1, kT / 2, pos.data());
            });
        } catch (const FatalError& e) {
            what = e.what();
        }
        check(what.find("ring plan's positions") != std::string::npos, "contiguous halves instead of the zigzag plan: refused");
        return check_report();
    });
}
