// Ring attention on the CPU (layers/ring_attention.h) with P = 1..4 simulated ranks of the
// in-process communicator (comm/in_process.h), in double on fresh random inputs:
//  1. every rank's O, L and (pieced over the ring) dQ, dK, dV equal the rows of one
//     single-process call (layers/attention.h) for every case of tests/attention_cases.h
//     (dense and dilated, causal and not, documents), B = 2, chunks of odd length;
//  2. the plan: dense causal computes the causal chunk pairs only and leaves home the chunks no
//     later step needs; dilated attention whose segments stay
//     inside chunks computes only the diagonal pairs and moves no bytes; the zigzag split gives
//     every rank the same causal work;
//  3. the communicator: one rank's error ends every rank (no hang) and is the one reported;
//     ranks that disagree on a message size fail with a message naming it; a bad window fails.
// Usage: test_ring_cpu [SEED]. Prints PASS/FAIL lines and "N passed, M failed".
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include "comm/in_process.h"
#include "core/rng.h"
#include "layers/attention.h"
#include "layers/ring_attention.h"
#include "tests/attention_cases.h"
#include "tests/attention_checks.h"

// Ring forward and backward over P simulated ranks against one call over the whole sequence.
static void test_ring_equals_one_call(SplitMix64& rng, const AttnCase& cs, int P, int c) {
    const int B = 2, H = 3, D = 8, N = 2 * P * c, HD = H * D, S = 3 * HD;
    const double scale = 1.0 / std::sqrt((double)D);
    auto uni = [&] { return (double)(rng.next() >> 11) * 0x1.0p-53 * 2 - 1; };
    std::vector<double> qkv((size_t)B * N * S), dout((size_t)B * N * HD);
    for (double& x : qkv) x = 1.5 * uni();
    for (double& x : dout) x = uni();
    std::vector<int> pos(N), doc;
    for (int i = 0; i < N; i++) pos[i] = i;
    if (cs.has_docs()) {
        doc.resize((size_t)B * N);
        for (int b = 0; b < B; b++)
            for (int i = 0, start = 0; i < N; i++) {
                if (i > 0 && rng.below(13) == 0) start = i;
                doc[(size_t)b * N + i] = start;
            }
    }
    // One call over the whole sequence.
    const AttnShape s{B, N, H, D, S};
    std::vector<double> O((size_t)B * N * HD), L((size_t)B * H * N), dqkv(qkv.size(), 0.0);
    const int* docp = cs.has_docs() ? doc.data() : nullptr;
    attention_forward(O.data(), L.data(), qkv.data(), qkv.data() + HD, qkv.data() + 2 * HD, pos.data(), docp, cs.pattern, s, scale);
    attention_backward(dqkv.data(), dqkv.data() + HD, dqkv.data() + 2 * HD, dout.data(), O.data(), L.data(), qkv.data(),
                       qkv.data() + HD, qkv.data() + 2 * HD, pos.data(), docp, cs.pattern, s, scale);

    // The ring: each rank takes its zigzag rows of every input and gives back its rows.
    const RingPlan plan(cs.pattern, P, N);
    std::vector<std::vector<double>> rO(P), rL(P), rd(P);
    InProcessWorld world(P);
    run_ranks(world, [&](Comm& comm) {
        const int r = comm.rank(), n = 2 * c;
        const std::vector<int> gpos = plan.positions(r);
        std::vector<double> lq((size_t)B * n * S), lg((size_t)B * n * HD);
        std::vector<int> ldoc(cs.has_docs() ? (size_t)B * n : 0);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                const size_t src = (size_t)b * N + gpos[i], dst = (size_t)b * n + i;
                std::copy(qkv.begin() + src * S, qkv.begin() + (src + 1) * S, lq.begin() + dst * S);
                std::copy(dout.begin() + src * HD, dout.begin() + (src + 1) * HD, lg.begin() + dst * HD);
                if (cs.has_docs()) ldoc[dst] = doc[src];
            }
        std::vector<double> o((size_t)B * n * HD), l((size_t)B * H * n), d(lq.size(), 0.0);
        const int* dp = cs.has_docs() ? ldoc.data() : nullptr;
        ring_attention_forward(comm, plan, o.data(), l.data(), lq.data(), lq.data() + HD, lq.data() + 2 * HD, S, dp, B, H,
                               D, scale);
        ring_attention_backward(comm, plan, d.data(), d.data() + HD, d.data() + 2 * HD, lg.data(), o.data(), l.data(),
                                lq.data(), lq.data() + HD, lq.data() + 2 * HD, S, dp, B, H, D, scale);
        rO[r] = o, rL[r] = l, rd[r] = d;
    });
    // Each rank's rows of the one call.
    double ef = 0, eb = 0;
    for (int r = 0; r < P; r++) {
        const std::vector<int> gpos = plan.positions(r);
        const int n = 2 * c;
        std::vector<double> o, l, d;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                const size_t src = (size_t)b * N + gpos[i];
                o.insert(o.end(), O.begin() + src * HD, O.begin() + (src + 1) * HD);
                d.insert(d.end(), dqkv.begin() + src * S, dqkv.begin() + (src + 1) * S);
            }
        for (int bh = 0; bh < B * H; bh++)
            for (int i = 0; i < n; i++) l.push_back(L[(size_t)bh * N + gpos[i]]);
        ef = std::max({ef, max_diff(rO[r], o), max_diff(rL[r], l)});
        eb = std::max(eb, max_diff(rd[r], d));
    }
    const std::string tag = cs.name + ", P = " + std::to_string(P) + ", chunks of " + std::to_string(c);
    check_err(ef <= 1e-12, "ring fwd (O, L) == one call: " + tag, ef, 1e-12);
    check_err(eb <= 1e-12, "ring bwd (dQ, dK, dV) == one call: " + tag, eb, 1e-12);
}

static void test_plan() {
    AttnPattern dense;
    dense.causal = true;
    for (int P : {2, 4}) {
        const RingPlan p(dense, P, 2 * P * 64);
        // The last step needs no late chunk (no later query chunk there): it stays home.
        check(p.chunks_moved() == p.chunks_moved_plain() - P + 1 && p.pairs_computed() == (long long)P * (2 * P + 1),
              "dense causal, P = " + std::to_string(P) + ": " + std::to_string(p.chunks_moved()) + " of " +
                  std::to_string(p.chunks_moved_plain()) + " chunk transfers, " + std::to_string(p.pairs_computed()) +
                  " of " + std::to_string(4 * P * P) + " chunk pairs");
        // Zigzag balance: every rank keeps the same number of causal pairs.
        long long lo = 1LL << 62, hi = 0;
        for (int r = 0; r < P; r++) {
            long long pairs = 0;
            for (int k = 0; k < 2; k++)
                for (int i = 0; i < p.c; i++) pairs += p.pos0(p.chunk(r, k)) + i + 1;
            lo = std::min(lo, pairs), hi = std::max(hi, pairs);
        }
        check_err(lo == hi, "zigzag: every rank has the same causal work, P = " + std::to_string(P), (double)(hi - lo), 0);
    }
    AttnPattern local;  // segments inside a chunk of 64: only the diagonal pairs, nothing moves
    local.kind = AttnKind::Dilated;
    local.causal = true;
    local.dilated.segments = {16, 32, 64};
    local.dilated.dilations = {1, 2, 4};
    const RingPlan pl(local, 4, 512);
    check(pl.chunks_moved() == 0 && pl.pairs_computed() == 2 * 4,
          "dilated, segments inside chunks (P = 4): 0 of " + std::to_string(pl.chunks_moved_plain()) +
              " chunk transfers, " + std::to_string(pl.pairs_computed()) + " of 64 chunk pairs");
    AttnPattern span = local;  // a segment of 256 spans 4 chunks of 64: only those move
    span.dilated.segments = {64, 256};
    span.dilated.dilations = {1, 4};
    const RingPlan ps(span, 4, 512);
    check(ps.chunks_moved() > 0 && ps.chunks_moved() < ps.chunks_moved_plain(),
          "dilated, a segment over 4 chunks (P = 4): " + std::to_string(ps.chunks_moved()) + " of " +
              std::to_string(ps.chunks_moved_plain()) + " chunk transfers");
    AttnPattern full;
    full.causal = false;
    const RingPlan pf(full, 3, 6 * 10);
    check(pf.pairs_computed() == 4 * 9 && pf.chunks_moved() == pf.chunks_moved_plain(), "dense non-causal, P = 3: every pair, every transfer");
    // local(): the GPU driver's in-place path. Only plans whose chunks meet themselves alone.
    check(pl.local() && RingPlan(local, 1, 128).local(), "dilated, segments inside chunks: a local plan (P = 4, and P = 1)");
    AttnPattern local_full = local;  // non-causal too: a segment never reaches past its chunk
    local_full.causal = false;
    check(RingPlan(local_full, 3, 384).local(), "dilated non-causal, segments inside chunks: local (P = 3)");
    check(!ps.local(), "dilated, a segment over 4 chunks: not local");
    check(!RingPlan(dense, 1, 128).local() && !RingPlan(dense, 4, 512).local(),
          "dense causal: not local (the late chunk attends the early one), P = 1 and 4");
    AttnPattern misaligned = local;  // chunks of 48: the segment of 64 at 0..63 spans chunks 0 and 1
    check(!RingPlan(misaligned, 2, 192).local(), "dilated, segments cut by the chunk boundary (chunks of 48): not local");
}

static void test_comm_failures() {
    {  // a rank that throws: the others (waiting in a sendrecv) end, and its error is the one reported
        InProcessWorld world(3);
        std::string what;
        try {
            run_ranks(world, [&](Comm& comm) {
                if (comm.rank() == 1) fatal("rank 1 ran out of something");
                float x = 1;
                comm.sendrecv(&x, 4, comm_next(comm), &x, 4, comm_prev(comm));
                comm.barrier();
            });
        } catch (const FatalError& e) {
            what = e.what();
        }
        check(what == "rank 1 ran out of something", "a failing rank ends the others, its error reported: '" + what + "'");
    }
    {  // sizes that disagree
        InProcessWorld world(2);
        std::string what;
        try {
            run_ranks(world, [&](Comm& comm) {
                std::vector<float> a(8), b(8);
                comm.sendrecv(a.data(), comm.rank() == 0 ? 16 : 32, comm_next(comm), b.data(), 16, comm_prev(comm));
            });
        } catch (const FatalError& e) {
            what = e.what();
        }
        check(what.find("disagree") != std::string::npos, "ranks that disagree on a size fail: '" + what + "'");
    }
    {  // a rank that never arrives: the wait times out, naming the cause
        InProcessWorld world(2);
        world.timeout_s = 0.2;
        std::string what;
        try {
            run_ranks(world, [&](Comm& comm) {
                if (comm.rank() == 0) comm.barrier();
            });
        } catch (const FatalError& e) {
            what = e.what();
        }
        check(what.find("died or hangs") != std::string::npos, "a missing rank times out: '" + what + "'");
    }
    {
        InProcessWorld world(2);
        std::vector<float> sums(2);
        run_ranks(world, [&](Comm& comm) {
            float x[3] = {1.0f + comm.rank(), 0.5f, -2.0f * comm.rank()};
            comm.all_reduce_sum(x, 3);
            int v = comm.rank() == 1 ? 42 : 0;
            comm.broadcast(&v, sizeof v, 1);
            sums[comm.rank()] = x[0] + x[1] * 10 + x[2] * 100 + v * 1000;
        });
        check_err(sums[0] == sums[1] && sums[0] == 3 + 10 - 200 + 42000, "all_reduce_sum and broadcast", sums[0] - (3 + 10 - 200 + 42000));
    }
    std::string what;
    try {
        RingPlan bad(AttnPattern{}, 4, 100);
    } catch (const FatalError& e) {
        what = e.what();
    }
    check(what.find("multiple of 8") != std::string::npos, "a window that does not split into 2P chunks: '" + what + "'");
}

int main(int argc, char** argv) {
    return guarded_main([&] {
        SplitMix64 rng(attn_test_seed(argc, argv));
        for (const AttnCase& cs : attn_cases())
            for (int P = 1; P <= 4; P++) test_ring_equals_one_call(rng, cs, P, 5 + (int)rng.below(12));
        test_plan();
        test_comm_failures();
        return check_report();
    });
}
