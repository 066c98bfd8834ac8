// Ring attention on the GPU kernels (layers/cuda/ring_attention.cuh) with P = 1..4 simulated
// ranks on one GPU (comm/in_process.h, device buffers copied with cudaMemcpy), against one call
// of the same kernels over the whole sequence and a float64 reference (layers/attention.h):
// the ring's error must stay within 3x the one call's plus a small floor (flash-attention's rule),
// forward (O, L) and backward (dQ, dK, dV from the same O and L), for dense and dilated, causal
// and not, with documents, D = 64 and 128, chunks of odd length, outputs poisoned. Also: the bytes
// each ring moved against a plain ring's (INFO lines); dilated segments inside chunks move none;
// a negative control (the ring run with the wrong mask) must fail the comparison.
// Usage: test_ring [--seed N] [--small] (--small: D = 64, P = 1 and 3, for compute-sanitizer).
// Prints PASS/FAIL lines and "N passed, M failed".
#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#include "comm/in_process.h"
#include "layers/attention.h"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/ring_attention.cuh"
#include "tests/gpu/attention_test_common.cuh"
#include "tests/gradcheck.h"

struct RingCase {
    AttnPattern pattern;
    bool docs;
    int P, c, D;
    std::string name;
    bool expect_no_bytes = false;
    bool negative = false;  // run the ring with the mask flipped: the comparison must fail
};

static void run(const RingCase& rc, gc::Rng& rng) {
    const int B = 2, H = 4, D = rc.D, HD = H * D, S = 3 * HD, P = rc.P, c = rc.c, N = 2 * P * c;
    const float scale = 1.f / std::sqrt((float)D);
    const size_t nqkv = (size_t)B * N * S, no = (size_t)B * N * HD, nl = (size_t)B * H * N;
    std::vector<bf16> qkv(nqkv), dout(no);
    for (auto& x : qkv) x = __float2bfloat16((float)rng.normal());
    for (auto& x : dout) x = __float2bfloat16((float)rng.normal());
    std::vector<int> pos(N), doc;
    for (int i = 0; i < N; i++) pos[i] = i;
    if (rc.docs) {
        doc.resize((size_t)B * N);
        for (int b = 0; b < B; b++)
            for (int i = 0, start = 0; i < N; i++) {
                if (i > 0 && rng.uniform() < 5.0 / N) start = i;
                doc[(size_t)b * N + i] = start;
            }
    }
    const int* doch = rc.docs ? doc.data() : nullptr;

    // One call over the whole sequence (deterministic backward).
    const AttnShape s{B, N, H, D, S};
    DevBuf dqkv_in(nqkv * 2), d_out(no * 2), d_lse(nl * 4), d_dout(no * 2), d_dqkv(nqkv * 2), d_pos(N * 4),
        d_doc(std::max<size_t>(doc.size(), 1) * 4), d_ws(attention_backward_workspace_bytes(s));
    CUDA_CHECK(cudaMemcpy(dqkv_in.p, qkv.data(), nqkv * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_dout.p, dout.data(), no * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_pos.p, pos.data(), N * 4, cudaMemcpyHostToDevice));
    if (rc.docs) CUDA_CHECK(cudaMemcpy(d_doc.p, doc.data(), doc.size() * 4, cudaMemcpyHostToDevice));
    const bf16* q = dqkv_in.as<bf16>();
    const int* dd = rc.docs ? d_doc.as<int>() : nullptr;
    attention_forward_cuda(d_out.as<bf16>(), d_lse.as<float>(), q, q + HD, q + 2 * HD, d_pos.as<int>(), dd, rc.pattern, s,
                           scale, 0);
    bf16* g = d_dqkv.as<bf16>();
    attention_backward_cuda_variant(flash::kDeterministicBackwardVariant, g, g + HD, g + 2 * HD, d_dout.as<bf16>(),
                                    d_out.as<bf16>(), d_lse.as<float>(), q, q + HD, q + 2 * HD, d_pos.as<int>(), dd,
                                    rc.pattern, s, scale, d_ws.as<float>(), 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<bf16> o1(no), dq1(nqkv);
    std::vector<float> l1(nl);
    CUDA_CHECK(cudaMemcpy(o1.data(), d_out.p, no * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(l1.data(), d_lse.p, nl * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(dq1.data(), d_dqkv.p, nqkv * 2, cudaMemcpyDeviceToHost));

    // The float64 reference: forward; backward from the one call's O and L (both backwards take them).
    std::vector<double> qd(nqkv), gd(no), Or(no), Lr(nl), dr(nqkv, 0.0);
    for (size_t i = 0; i < nqkv; i++) qd[i] = __bfloat162float(qkv[i]);
    for (size_t i = 0; i < no; i++) gd[i] = __bfloat162float(dout[i]);
    attention_forward<double>(Or.data(), Lr.data(), qd.data(), qd.data() + HD, qd.data() + 2 * HD, pos.data(), doch,
                              rc.pattern, s, scale);
    std::vector<double> o1d(no), l1d(nl);
    for (size_t i = 0; i < no; i++) o1d[i] = __bfloat162float(o1[i]);
    for (size_t i = 0; i < nl; i++) l1d[i] = l1[i];
    attention_backward<double>(dr.data(), dr.data() + HD, dr.data() + 2 * HD, gd.data(), o1d.data(), l1d.data(),
                               qd.data(), qd.data() + HD, qd.data() + 2 * HD, pos.data(), doch, rc.pattern, s, scale);

    // The ring: rank r holds its zigzag rows; the results go back to their global rows.
    AttnPattern ring_pattern = rc.pattern;
    if (rc.negative) ring_pattern.causal = !ring_pattern.causal;
    const RingPlan plan(ring_pattern, P, N);
    std::vector<bf16> o2(no), dq2(nqkv);
    std::vector<float> l2(nl);
    std::vector<RingStats> stats(P);
    InProcessWorld world(P);
    world.copy = [](void* d, const void* src, size_t n) {
        if (n) CUDA_CHECK(cudaMemcpy(d, src, n, cudaMemcpyDefault));
    };
    run_ranks(world, [&](Comm& comm) {
        const int r = comm.rank(), n = 2 * c;
        CUDA_CHECK(cudaSetDevice(0));
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        const std::vector<int> gp = plan.positions(r);
        std::vector<bf16> lq((size_t)B * n * S), lg((size_t)B * n * HD), lo((size_t)B * n * HD);
        std::vector<float> ll((size_t)B * H * n);
        std::vector<int> ld(rc.docs ? (size_t)B * n : 0);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                const size_t src = (size_t)b * N + gp[i], dst = (size_t)b * n + i;
                std::memcpy(&lq[dst * S], &qkv[src * S], S * 2);
                std::memcpy(&lg[dst * HD], &dout[src * HD], HD * 2);
                std::memcpy(&lo[dst * HD], &o1[src * HD], HD * 2);
                if (rc.docs) ld[dst] = doc[src];
            }
        for (int bh = 0; bh < B * H; bh++)
            for (int i = 0; i < n; i++) ll[(size_t)bh * n + i] = l1[(size_t)bh * N + gp[i]];
        DevBuf xq(lq.size() * 2), xg(lg.size() * 2), xo(lo.size() * 2), xl(ll.size() * 4), xd(std::max<size_t>(ld.size(), 1) * 4),
            yo(lo.size() * 2), yl(ll.size() * 4), yd(lq.size() * 2);
        CUDA_CHECK(cudaMemcpy(xq.p, lq.data(), lq.size() * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(xg.p, lg.data(), lg.size() * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(xo.p, lo.data(), lo.size() * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(xl.p, ll.data(), ll.size() * 4, cudaMemcpyHostToDevice));
        if (rc.docs) CUDA_CHECK(cudaMemcpy(xd.p, ld.data(), ld.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemset(yo.p, 0xff, lo.size() * 2));  // poison: an unwritten element fails
        CUDA_CHECK(cudaMemset(yl.p, 0xff, ll.size() * 4));
        CUDA_CHECK(cudaMemset(yd.p, 0xff, lq.size() * 2));
        const bf16* lqp = xq.as<bf16>();
        const int* ldp = rc.docs ? xd.as<int>() : nullptr;
        ring_attention_forward_cuda(comm, plan, yo.as<bf16>(), yl.as<float>(), lqp, lqp + HD, lqp + 2 * HD, S, ldp, B, H, D,
                                    scale, st, &stats[r]);
        bf16* yq = yd.as<bf16>();
        RingStats sb;
        ring_attention_backward_cuda(comm, plan, yq, yq + HD, yq + 2 * HD, xg.as<bf16>(), xo.as<bf16>(), xl.as<float>(), lqp,
                                     lqp + HD, lqp + 2 * HD, S, ldp, B, H, D, scale, st, &sb);
        stats[r].bwd_bytes = sb.bwd_bytes, stats[r].bwd_bytes_plain = sb.bwd_bytes_plain;
        CUDA_CHECK(cudaStreamSynchronize(st));
        std::vector<bf16> ro(lo.size()), rd(lq.size());
        std::vector<float> rl(ll.size());
        CUDA_CHECK(cudaMemcpy(ro.data(), yo.p, ro.size() * 2, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(rl.data(), yl.p, rl.size() * 4, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(rd.data(), yd.p, rd.size() * 2, cudaMemcpyDeviceToHost));
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                const size_t dst = (size_t)b * N + gp[i], src = (size_t)b * n + i;
                std::memcpy(&o2[dst * HD], &ro[src * HD], HD * 2);
                std::memcpy(&dq2[dst * S], &rd[src * S], S * 2);
            }
        for (int bh = 0; bh < B * H; bh++)
            for (int i = 0; i < n; i++) l2[(size_t)bh * N + gp[i]] = rl[(size_t)bh * n + i];
        CUDA_CHECK(cudaStreamDestroy(st));
        ring_pool_release();  // this thread's ring buffers
    });

    // Compare: the ring's error against the one call's, both against the float64 reference.
    auto errs = [&](const std::vector<bf16>& x, const std::vector<double>& ref) {
        std::vector<double> xd(x.size());
        for (size_t i = 0; i < x.size(); i++) xd[i] = __bfloat162float(x[i]);
        return error_vs(xd.data(), ref.data(), ref.size());
    };
    const std::string tag = rc.name + " D" + std::to_string(D) + " P=" + std::to_string(P) + " c=" + std::to_string(c);
    bool ok = true;
    char buf[400];
    auto cmp = [&](const char* what, const Err& ering, const Err& eone) {
        const bool pass = ering.norm <= 3 * eone.norm + 1e-4;
        ok &= pass;
        if (!rc.negative) {
            std::snprintf(buf, sizeof buf, "ring %s %-44s rel %.2e (one call %.2e, tol %.2e)", what, tag.c_str(), ering.norm,
                          eone.norm, 3 * eone.norm + 1e-4);
            check(pass, buf);
        }
    };
    cmp("fwd O", errs(o2, Or), errs(o1, Or));
    {
        std::vector<double> l2d(l2.begin(), l2.end());
        cmp("fwd L", error_vs(l2d.data(), Lr.data(), nl), error_vs(l1d.data(), Lr.data(), nl));
    }
    cmp("bwd dQKV", errs(dq2, dr), errs(dq1, dr));
    if (rc.negative) {
        check(!ok, "negative control: the ring with the mask flipped fails the comparison " + tag);
        return;
    }
    long long fb = 0, fbp = 0, bb = 0, bbp = 0;
    for (const RingStats& st : stats) fb += st.fwd_bytes, fbp += st.fwd_bytes_plain, bb += st.bwd_bytes, bbp += st.bwd_bytes_plain;
    std::printf("INFO bytes moved %s: forward %lld of a plain ring's %lld, backward %lld of %lld\n", tag.c_str(), fb, fbp,
                bb, bbp);
    if (rc.expect_no_bytes) check(fb == 0 && bb == 0, "segments inside chunks move no bytes " + tag);
}

static int main_body(int argc, char** argv) {
    uint64_t seed = 20261124;
    bool small = false;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--small")) small = true;
        else fatal("usage: test_ring [--seed N] [--small]");
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("SKIP test_ring: no CUDA device\n0 passed, 0 failed\n");
        return 0;
    }
    std::printf("test_ring: seed %llu\n", (unsigned long long)seed);
    gc::Rng rng(seed);
    AttnPattern dense_c, dense_f;
    dense_f.causal = false;
    AttnPattern dil;
    dil.kind = AttnKind::Dilated;
    dil.segments = {128, 512, 2048};
    dil.dilations = {1, 2, 4};
    AttnPattern dil_f = dil;
    dil_f.causal = false;
    AttnPattern local = dil;
    local.segments = {64, 128};
    local.dilations = {1, 2};
    std::vector<RingCase> cases;
    for (int D : {64, 128})
        for (int P = 1; P <= (small ? 3 : 4); P++) {
            if (small && (D == 128 || P == 2)) continue;  // compute-sanitizer: D = 64, P = 1 and 3
            const int c = 136 + 8 * rng.randint(0, 9);  // chunks of odd tile counts
            cases.push_back({dense_c, false, P, c, D, "dense causal"});
            cases.push_back({dense_f, true, P, c, D, "dense full docs"});
            cases.push_back({dil, false, P, c, D, "dilated (128,1)(512,2)(2048,4) causal"});
            cases.push_back({dil_f, true, P, c, D, "dilated (128,1)(512,2)(2048,4) full docs"});
            cases.push_back({local, false, P, 128, D, "dilated (64,1)(128,2) causal", true});
        }
    if (!small) cases.push_back({dense_c, false, 3, 136, 64, "dense causal", false, true});
    for (const RingCase& rc : cases) run(rc, rng);
    std::printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
