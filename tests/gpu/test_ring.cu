// Ring attention on the GPU kernels (layers/cuda/ring_attention.cuh), against one call of the same
// kernels over the whole sequence and a float64 reference (layers/attention.h): the ring's error
// must stay within 3x the one call's plus a small floor (flash-attention's rule), forward (O, L)
// and backward (dQ, dK, dV from the same O and L), for dense and dilated, causal and not, with
// documents, D = 64 and 128, chunks of odd length, outputs poisoned. Also: the bytes each ring
// moved against a plain ring's (INFO lines); dilated segments inside chunks move none; a negative
// control (the ring run with the wrong mask) must fail the comparison; the ring's buffer pool after
// one forward and backward holds what ring_attention_pool_bytes_needed predicts, on every rank;
// the deterministic backward (train --deterministic --cp P) gives the same bits when run again.
// Two modes, one rank body:
//   simulated (default)  P = 1..4 ranks as threads of this process on one GPU (comm/in_process.h,
//                        device buffers copied with cudaMemcpy); compares every row.
//   --nccl               one process per GPU, P = the world size (comm/nccl.h; start them with
//                        scripts/launch.sh P build/test_ring --nccl). Every rank draws the same
//                        inputs (same seed, same order), runs its own zigzag chunks over NCCL,
//                        computes the one call and the reference itself, and compares its own
//                        rows; the failure count is summed over ranks, so all exit alike.
// Usage: [scripts/launch.sh P] test_ring [--nccl] [--seed N] [--small]
//   (--small: D = 64 only, P = 1 and 3 when simulated, no negative control: for compute-sanitizer).
// Prints PASS/FAIL lines and "N passed, M failed" (with --nccl: on every rank, its own counts).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include "comm/in_process.h"
#include "comm/in_process_cuda.cuh"
#include "layers/attention.h"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/ring_attention.cuh"
#include "model/parallel.h"
#include "tests/gpu/attention_test_common.cuh"
#include "tests/gradcheck.h"
#ifdef HAVE_NCCL
#include "comm/nccl.h"
#endif

struct RingCase {
    AttnPattern pattern;
    bool docs;
    int P, c, D;
    std::string name;
    bool expect_no_bytes = false;
    bool negative = false;  // run the ring with the mask flipped: the comparison must fail
    bool deterministic = false;  // the deterministic backward: run twice, the same bits
};

// One case's inputs, global rows. Drawn from the shared generator in a fixed order, so ranks
// that share the seed (--nccl) draw the same.
struct CaseInputs {
    int B, H, D, HD, S, N;
    float scale;
    std::vector<bf16> qkv;   // (B, N, 3, H, D)
    std::vector<bf16> dout;  // (B, N, H, D)
    std::vector<int> pos;    // (N): 0..N-1
    std::vector<int> doc;    // (B, N) document starts, or empty
    const int* doch() const { return doc.empty() ? nullptr : doc.data(); }
    size_t nqkv() const { return (size_t)B * N * S; }
    size_t no() const { return (size_t)B * N * HD; }
    size_t nl() const { return (size_t)B * H * N; }
};

// What an attention computed, global rows (the ring's: gathered from the ranks that ran here).
struct Outputs {
    std::vector<bf16> o;     // (B, N, H, D)
    std::vector<float> l;    // (B, H, N)
    std::vector<bf16> dqkv;  // (B, N, 3, H, D)
};
struct Reference {
    std::vector<double> o, l, dqkv;  // as Outputs
};

static CaseInputs make_inputs(const RingCase& rc, gc::Rng& rng) {
    CaseInputs in;
    in.B = 2, in.H = 4, in.D = rc.D, in.HD = in.H * in.D, in.S = 3 * in.HD, in.N = 2 * rc.P * rc.c;
    in.scale = 1.f / std::sqrt((float)in.D);
    const int B = in.B, N = in.N;
    in.qkv.resize(in.nqkv()), in.dout.resize(in.no());
    for (auto& x : in.qkv) x = __float2bfloat16((float)rng.normal());
    for (auto& x : in.dout) x = __float2bfloat16((float)rng.normal());
    in.pos.resize(N);
    for (int i = 0; i < N; i++) in.pos[i] = i;
    if (rc.docs) {
        in.doc.resize((size_t)B * N);
        for (int b = 0; b < B; b++)
            for (int i = 0, start = 0; i < N; i++) {
                if (i > 0 && rng.uniform() < 5.0 / N) start = i;
                in.doc[(size_t)b * N + i] = start;
            }
    }
    return in;
}

// One call over the whole sequence (deterministic backward).
static Outputs one_call(const RingCase& rc, const CaseInputs& in) {
    const size_t nqkv = in.nqkv(), no = in.no(), nl = in.nl();
    const int HD = in.HD, N = in.N;
    const AttnShape s{in.B, N, in.H, in.D, in.S};
    DevBuf dqkv_in(nqkv * 2), d_out(no * 2), d_lse(nl * 4), d_dout(no * 2), d_dqkv(nqkv * 2), d_pos(N * 4),
        d_doc(std::max<size_t>(in.doc.size(), 1) * 4), d_ws(attention_backward_workspace_bytes(s));
    CUDA_CHECK(cudaMemcpy(dqkv_in.p, in.qkv.data(), nqkv * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_dout.p, in.dout.data(), no * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_pos.p, in.pos.data(), N * 4, cudaMemcpyHostToDevice));
    if (rc.docs) CUDA_CHECK(cudaMemcpy(d_doc.p, in.doc.data(), in.doc.size() * 4, cudaMemcpyHostToDevice));
    const bf16* q = dqkv_in.as<bf16>();
    const int* dd = rc.docs ? d_doc.as<int>() : nullptr;
    attention_forward_cuda(d_out.as<bf16>(), d_lse.as<float>(), q, q + HD, q + 2 * HD, d_pos.as<int>(), dd, rc.pattern, s,
                           in.scale, 0);
    bf16* g = d_dqkv.as<bf16>();
    attention_backward_cuda_variant(flash::kDeterministicBackwardVariant, g, g + HD, g + 2 * HD, d_dout.as<bf16>(),
                                    d_out.as<bf16>(), d_lse.as<float>(), q, q + HD, q + 2 * HD, d_pos.as<int>(), dd,
                                    rc.pattern, s, in.scale, d_ws.as<float>(), 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    Outputs one{std::vector<bf16>(no), std::vector<float>(nl), std::vector<bf16>(nqkv)};
    CUDA_CHECK(cudaMemcpy(one.o.data(), d_out.p, no * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(one.l.data(), d_lse.p, nl * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(one.dqkv.data(), d_dqkv.p, nqkv * 2, cudaMemcpyDeviceToHost));
    return one;
}

// The float64 reference: forward; backward from the one call's O and L (both backwards take them).
static Reference reference(const RingCase& rc, const CaseInputs& in, const Outputs& one) {
    const size_t nqkv = in.nqkv(), no = in.no(), nl = in.nl();
    const int HD = in.HD;
    const AttnShape s{in.B, in.N, in.H, in.D, in.S};
    std::vector<double> qd(nqkv), gd(no);
    Reference ref{std::vector<double>(no), std::vector<double>(nl), std::vector<double>(nqkv, 0.0)};
    for (size_t i = 0; i < nqkv; i++) qd[i] = __bfloat162float(in.qkv[i]);
    for (size_t i = 0; i < no; i++) gd[i] = __bfloat162float(in.dout[i]);
    attention_forward<double>(ref.o.data(), ref.l.data(), qd.data(), qd.data() + HD, qd.data() + 2 * HD, in.pos.data(),
                              in.doch(), rc.pattern, s, in.scale);
    std::vector<double> o1d(no), l1d(one.l.begin(), one.l.end());
    for (size_t i = 0; i < no; i++) o1d[i] = __bfloat162float(one.o[i]);
    double* dr = ref.dqkv.data();
    attention_backward<double>(dr, dr + HD, dr + 2 * HD, gd.data(), o1d.data(), l1d.data(), qd.data(), qd.data() + HD,
                               qd.data() + 2 * HD, in.pos.data(), in.doch(), rc.pattern, s, in.scale);
    return ref;
}

// Waits for the communicator's work of this rank's ring. NCCL's wait polls with a timeout
// (comm/nccl.h), so a lost peer fails with a line instead of hanging the stream sync after it;
// the in-process communicator completes every call before returning.
static void wait_comm(Comm& comm) {
#ifdef HAVE_NCCL
    if (auto* nccl = dynamic_cast<NcclComm*>(&comm)) nccl->synchronize();
#else
    (void)comm;
#endif
}

// One rank of the ring, in either mode: rank comm.rank() holds its zigzag rows of the inputs (and
// of the one call's O, L, which its backward takes), runs forward and backward over `comm`, and
// puts its results back into their global rows of `ring` (ranks write disjoint rows). The caller
// has selected this rank's device.
// pool_bytes: this thread's ring_pool_bytes() after the forward and backward, from an empty pool.
static void run_rank(Comm& comm, const RingPlan& plan, const CaseInputs& in, const Outputs& one, Outputs& ring,
                     RingStats& stats, size_t& pool_bytes, bool deterministic) {
    const int B = in.B, H = in.H, D = in.D, HD = in.HD, S = in.S, N = in.N;
    const int r = comm.rank(), n = 2 * plan.c;
    const bool docs = !in.doc.empty();
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const std::vector<int> gp = plan.positions(r);
    std::vector<bf16> lq((size_t)B * n * S), lg((size_t)B * n * HD), lo((size_t)B * n * HD);  // (B, n, *)
    std::vector<float> ll((size_t)B * H * n);                                                    // (B, H, n)
    std::vector<int> ld(docs ? (size_t)B * n : 0);                                                // (B, n)
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) {
            const size_t src = (size_t)b * N + gp[i], dst = (size_t)b * n + i;
            std::memcpy(&lq[dst * S], &in.qkv[src * S], S * 2);
            std::memcpy(&lg[dst * HD], &in.dout[src * HD], HD * 2);
            std::memcpy(&lo[dst * HD], &one.o[src * HD], HD * 2);
            if (docs) ld[dst] = in.doc[src];
        }
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < n; i++) ll[(size_t)bh * n + i] = one.l[(size_t)bh * N + gp[i]];
    DevBuf xq(lq.size() * 2), xg(lg.size() * 2), xo(lo.size() * 2), xl(ll.size() * 4), xd(std::max<size_t>(ld.size(), 1) * 4),
        yo(lo.size() * 2), yl(ll.size() * 4), yd(lq.size() * 2);
    CUDA_CHECK(cudaMemcpy(xq.p, lq.data(), lq.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(xg.p, lg.data(), lg.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(xo.p, lo.data(), lo.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(xl.p, ll.data(), ll.size() * 4, cudaMemcpyHostToDevice));
    if (docs) CUDA_CHECK(cudaMemcpy(xd.p, ld.data(), ld.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(yo.p, 0xff, lo.size() * 2));  // poison: an unwritten element fails
    CUDA_CHECK(cudaMemset(yl.p, 0xff, ll.size() * 4));
    CUDA_CHECK(cudaMemset(yd.p, 0xff, lq.size() * 2));
    // The copies and memsets above ran on the legacy stream, which `st` (non-blocking) does not
    // wait for: without this a busy GPU let the ring's kernels start before their inputs landed,
    // or the poison land after their outputs.
    CUDA_CHECK(cudaDeviceSynchronize());
    const bf16* lqp = xq.as<bf16>();
    const int* ldp = docs ? xd.as<int>() : nullptr;
    if (ring_pool_bytes()) ring_pool_release();  // a fresh pool (the threads are fresh; NCCL's rank is not)
    ring_attention_forward_cuda(comm, plan, yo.as<bf16>(), yl.as<float>(), lqp, lqp + HD, lqp + 2 * HD, S, ldp, B, H, D,
                                in.scale, st, &stats);
    bf16* yq = yd.as<bf16>();
    RingStats sb;
    ring_attention_backward_cuda(comm, plan, yq, yq + HD, yq + 2 * HD, xg.as<bf16>(), xo.as<bf16>(), xl.as<float>(), lqp,
                                 lqp + HD, lqp + 2 * HD, S, ldp, B, H, D, in.scale, st, &sb, deterministic);
    stats.bwd_bytes = sb.bwd_bytes, stats.bwd_bytes_plain = sb.bwd_bytes_plain;
    pool_bytes = ring_pool_bytes();
    wait_comm(comm);
    CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<bf16> ro(lo.size()), rd(lq.size());
    std::vector<float> rl(ll.size());
    CUDA_CHECK(cudaMemcpy(ro.data(), yo.p, ro.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(rl.data(), yl.p, rl.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(rd.data(), yd.p, rd.size() * 2, cudaMemcpyDeviceToHost));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) {
            const size_t dst = (size_t)b * N + gp[i], src = (size_t)b * n + i;
            std::memcpy(&ring.o[dst * HD], &ro[src * HD], HD * 2);
            std::memcpy(&ring.dqkv[dst * S], &rd[src * S], S * 2);
        }
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < n; i++) ring.l[(size_t)bh * N + gp[i]] = rl[(size_t)bh * n + i];
    CUDA_CHECK(cudaStreamDestroy(st));
    ring_pool_release();  // this thread's ring buffers
}

// Every rank of the plan as a thread of this process, all on device 0.
static void ring_simulated(const RingPlan& plan, const CaseInputs& in, const Outputs& one, Outputs& ring,
                           std::vector<RingStats>& stats, std::vector<size_t>& pool_bytes, bool deterministic) {
    InProcessWorld world(plan.P);
    world.copy = in_process_device_copy;
    run_ranks(world, [&](Comm& comm) {
        CUDA_CHECK(cudaSetDevice(0));
        run_rank(comm, plan, in, one, ring, stats[comm.rank()], pool_bytes[comm.rank()], deterministic);
    });
}

// Rows `rows` of each of `outer` blocks of N rows of `width` elements: (outer, N, width) ->
// (outer, rows.size(), width). A rank's own rows of a global array.
template <typename T>
static std::vector<T> pick_rows(const std::vector<T>& x, int outer, int N, size_t width, const std::vector<int>& rows) {
    const size_t n = rows.size();
    std::vector<T> y((size_t)outer * n * width);
    for (int b = 0; b < outer; b++)
        for (size_t i = 0; i < n; i++)
            std::memcpy(&y[((size_t)b * n + i) * width], &x[((size_t)b * N + rows[i]) * width], width * sizeof(T));
    return y;
}
static Outputs pick_rows(const Outputs& x, const CaseInputs& in, const std::vector<int>& rows) {
    return {pick_rows(x.o, in.B, in.N, in.HD, rows), pick_rows(x.l, in.B * in.H, in.N, 1, rows),
            pick_rows(x.dqkv, in.B, in.N, in.S, rows)};
}
static Reference pick_rows(const Reference& x, const CaseInputs& in, const std::vector<int>& rows) {
    return {pick_rows(x.o, in.B, in.N, in.HD, rows), pick_rows(x.l, in.B * in.H, in.N, 1, rows),
            pick_rows(x.dqkv, in.B, in.N, in.S, rows)};
}

// The ring's error against the one call's, both against the float64 reference, over the rows the
// arrays hold (PASS/FAIL lines unless the case is the negative control). True if all pass.
static bool compare_ring(const RingCase& rc, const std::string& tag, const Outputs& ring, const Outputs& one,
                         const Reference& ref) {
    auto errs = [&](const std::vector<bf16>& x, const std::vector<double>& r) {
        std::vector<double> xd(x.size());
        for (size_t i = 0; i < x.size(); i++) xd[i] = __bfloat162float(x[i]);
        return error_vs(xd.data(), r.data(), r.size());
    };
    auto errl = [&](const std::vector<float>& x, const std::vector<double>& r) {
        const std::vector<double> xd(x.begin(), x.end());
        return error_vs(xd.data(), r.data(), r.size());
    };
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
    cmp("fwd O", errs(ring.o, ref.o), errs(one.o, ref.o));
    cmp("fwd L", errl(ring.l, ref.l), errl(one.l, ref.l));
    cmp("bwd dQKV", errs(ring.dqkv, ref.dqkv), errs(one.dqkv, ref.dqkv));
    return ok;
}

// The ring's pool after one forward and backward against ring_attention_pool_bytes_needed, per
// rank (each simulated rank is a thread with its own pool): estimate >= measured and <= 1.10 x
// measured. only_rank >= 0 (NCCL): that rank's only. One line, every rank's "measured/estimate".
static void check_pool_bytes(const RingPlan& plan, const CaseInputs& in, const std::vector<size_t>& measured,
                             int only_rank, const std::string& tag) {
    bool pass = true;
    std::string nums;
    for (int r = 0; r < plan.P; r++) {
        if (only_rank >= 0 && r != only_rank) continue;
        const size_t est = ring_attention_pool_bytes_needed(plan, r, in.B, in.H, in.D, !in.doc.empty());
        pass &= est >= measured[r] && (double)est <= 1.10 * (double)measured[r];
        nums += " r" + std::to_string(r) + " " + std::to_string(measured[r]) + "/" + std::to_string(est);
    }
    check(pass, "ring pool bytes (measured/estimate) " + tag + ":" + nums);
}

// One case. nccl == nullptr: every rank simulated here, every row compared. Otherwise this
// process is rank nccl->rank() of P = nccl->size(): it runs its own chunks over NCCL and compares
// its own rows (each rank computes the same one call and reference from the same inputs).
static void run(const RingCase& rc, gc::Rng& rng, Comm* nccl) {
    const CaseInputs in = make_inputs(rc, rng);
    const Outputs one = one_call(rc, in);
    const Reference ref = reference(rc, in, one);

    // The ring: rank r holds its zigzag rows; the results go back to their global rows.
    AttnPattern ring_pattern = rc.pattern;
    if (rc.negative) ring_pattern.causal = !ring_pattern.causal;
    const RingPlan plan(ring_pattern, rc.P, in.N);
    Outputs ring{std::vector<bf16>(in.no()), std::vector<float>(in.nl()), std::vector<bf16>(in.nqkv())};
    std::vector<RingStats> stats(rc.P);  // simulated: every rank's; NCCL: this rank's only
    std::vector<size_t> pool_bytes(rc.P);  // the same
    std::string tag = rc.name + " D" + std::to_string(rc.D) + " P=" + std::to_string(rc.P) + " c=" + std::to_string(rc.c);
    if (rc.deterministic) tag += " deterministic";
    bool ok;
    // The ring once more into `again` (deterministic cases): its rows must be the same bits.
    Outputs again = ring;
    if (!nccl) {
        ring_simulated(plan, in, one, ring, stats, pool_bytes, rc.deterministic);
        ok = compare_ring(rc, tag, ring, one, ref);
        if (rc.deterministic) ring_simulated(plan, in, one, again, stats, pool_bytes, true);
    } else {
        const int r = nccl->rank();
        run_rank(*nccl, plan, in, one, ring, stats[r], pool_bytes[r], rc.deterministic);
        if (rc.deterministic) run_rank(*nccl, plan, in, one, again, stats[r], pool_bytes[r], true);
        const std::vector<int> mine = plan.positions(r);
        tag += " rank " + std::to_string(r);
        ok = compare_ring(rc, tag, pick_rows(ring, in, mine), pick_rows(one, in, mine), pick_rows(ref, in, mine));
        if (rc.deterministic) ring = pick_rows(ring, in, mine), again = pick_rows(again, in, mine);
    }
    if (rc.deterministic)
        check(std::memcmp(ring.dqkv.data(), again.dqkv.data(), ring.dqkv.size() * sizeof(bf16)) == 0,
              "ring backward rerun gives the same bits " + tag);
    if (rc.negative) {
        check(!ok, "negative control: the ring with the mask flipped fails the comparison " + tag);
        return;
    }
    long long fb = 0, fbp = 0, bb = 0, bbp = 0;
    for (const RingStats& st : stats) fb += st.fwd_bytes, fbp += st.fwd_bytes_plain, bb += st.bwd_bytes, bbp += st.bwd_bytes_plain;
    std::printf("INFO bytes moved %s: forward %lld of a plain ring's %lld, backward %lld of %lld\n", tag.c_str(), fb, fbp,
                bb, bbp);
    if (rc.expect_no_bytes) check(fb == 0 && bb == 0, "segments inside chunks move no bytes " + tag);
    check_pool_bytes(plan, in, pool_bytes, nccl ? nccl->rank() : -1, tag);
}

// The patterns every (D, P) runs, one line each. c = 0: chunks of the (D, P)'s drawn odd length;
// otherwise that chunk length (the local segments fit in chunks of 128: no bytes move).
struct PatternCase {
    AttnPattern pattern;
    bool docs;
    std::string name;
    int c = 0;
    bool expect_no_bytes = false;
};

// Block-sparse of block b: window W, global g, dilated blocks (r, V), random blocks per head.
static AttnPattern block_sparse(bool causal, int b, int W, int g, int r = 0, int V = 0, int random = 0) {
    AttnPattern p = make_pattern(AttnKind::BlockSparse, causal);
    p.block_sparse.block = b, p.block_sparse.window = W, p.block_sparse.global = g, p.block_sparse.dilated_r = r, p.block_sparse.dilated_window = V, p.block_sparse.random_count = random, p.block_sparse.random_seed = 5;
    return p;
}

// Fixed (Sparse Transformer): blocks of l tokens, the last c of each seen by later blocks.
static AttnPattern fixed(int l, int c) {
    AttnPattern p = make_pattern(AttnKind::Fixed, true);
    p.fixed.stride = l, p.fixed.summary = c;
    return p;
}

static std::vector<PatternCase> pattern_cases() {
    const AttnKind dense = AttnKind::Dense;
    return {
        {make_pattern(dense, true), false, "dense causal"},
        {make_pattern(dense, false), true, "dense full docs"},
        {dilated_pattern(true, {128, 512, 2048}, {1, 2, 4}), false, "dilated (128,1)(512,2)(2048,4) causal"},
        {dilated_pattern(false, {128, 512, 2048}, {1, 2, 4}), true, "dilated (128,1)(512,2)(2048,4) full docs"},
        {dilated_pattern(true, {64, 128}, {1, 2}), false, "dilated (64,1)(128,2) causal", 128, true},
        // A local plan with documents and no causal mask (the in-place path, RingPlan::local).
        {dilated_pattern(false, {64, 128}, {1, 2}), true, "dilated (64,1)(128,2) full docs, local", 128, true},
        {block_sparse(true, 64, 200, 16), true, "block-sparse b64 window 200 global 16 causal docs"},
        {block_sparse(false, 32, 0, 0, 2, 512, 1), false, "block-sparse b32 blocks r2 within 512 random 1 full"},
        {block_sparse(true, 128, 100, 0), false, "block-sparse b128 window 100 causal"},
        {fixed(128, 16), true, "fixed l128 c16 causal docs"},
        {fixed(40, 6), false, "fixed l40 c6 causal"},
    };
}

// Every pattern at D with P ranks; the odd chunk length is drawn once per (D, P).
static void add_cases(std::vector<RingCase>& cases, int D, int P, gc::Rng& rng) {
    const int c = 136 + 8 * rng.randint(0, 9);  // chunks of odd tile counts
    for (const PatternCase& pc : pattern_cases())
        cases.push_back({pc.pattern, pc.docs, P, pc.c ? pc.c : c, D, pc.name, pc.expect_no_bytes});
}

// train --deterministic under --cp: every pattern at D = 64 and (unless small) one at D = 128, P
// ranks, with the deterministic backward (run twice: the same bits).
static void add_deterministic_cases(std::vector<RingCase>& cases, int P, bool small, gc::Rng& rng) {
    const int c = 136 + 8 * rng.randint(0, 9);
    for (const PatternCase& pc : pattern_cases()) {
        RingCase rc{pc.pattern, pc.docs, P, pc.c ? pc.c : c, 64, pc.name, pc.expect_no_bytes};
        rc.deterministic = true;
        cases.push_back(rc);
    }
    if (small) return;
    RingCase rc{dilated_pattern(true, {128, 512, 2048}, {1, 2, 4}), true, P, c, 128, "dilated (128,1)(512,2)(2048,4) causal docs"};
    rc.deterministic = true;
    cases.push_back(rc);
}

static std::vector<RingCase> simulated_cases(bool small, gc::Rng& rng) {
    std::vector<RingCase> cases;
    for (int D : {64, 128})
        for (int P = 1; P <= (small ? 3 : 4); P++) {
            if (small && (D == 128 || P == 2)) continue;  // compute-sanitizer: D = 64, P = 1 and 3
            add_cases(cases, D, P, rng);
        }
    if (!small) cases.push_back({make_pattern(AttnKind::Dense, true), false, 3, 136, 64, "dense causal", false, true});
    add_deterministic_cases(cases, small ? 3 : 2, small, rng);
    if (!small) add_deterministic_cases(cases, 4, small, rng);
    return cases;
}

static int run_simulated(uint64_t seed, bool small) {
    std::printf("test_ring: seed %llu\n", (unsigned long long)seed);
    gc::Rng rng(seed);
    for (const RingCase& rc : simulated_cases(small, rng)) run(rc, rng, nullptr);
    return check_report();
}

#ifdef HAVE_NCCL
static std::vector<RingCase> nccl_cases(int P, bool small, gc::Rng& rng) {
    std::vector<RingCase> cases;
    for (int D : {64, 128})
        if (!small || D == 64) add_cases(cases, D, P, rng);
    if (!small) cases.push_back({make_pattern(AttnKind::Dense, true), false, P, 136, 64, "dense causal", false, true});
    add_deterministic_cases(cases, P, small, rng);
    return cases;
}

// Sum over ranks of this rank's failures: every rank exits 1 if any failed.
static int failures_everywhere(NcclComm& comm, int mine) {
    DevBuf d(sizeof(float));
    float x = (float)mine;
    CUDA_CHECK(cudaMemcpy(d.p, &x, sizeof x, cudaMemcpyHostToDevice));
    comm.all_reduce_sum(d.as<float>(), 1);
    comm.synchronize();
    CUDA_CHECK(cudaMemcpy(&x, d.p, sizeof x, cudaMemcpyDeviceToHost));
    return (int)x;
}

static int run_nccl(uint64_t seed, bool small) {
    std::unique_ptr<NcclComm> comm = nccl_comm_from_env();  // selects GPU LOCAL_RANK
    // Every rank must draw the same cases: a different seed or --small would pair mismatched plans.
    const uint64_t flags[2] = {seed, (uint64_t)small};
    comm->check_same_everywhere(fnv1a(flags, sizeof flags), "test_ring's --seed and --small");
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    std::printf("test_ring --nccl: rank %d of %d, GPU %d of this host, seed %llu\n", comm->rank(), comm->size(), dev,
                (unsigned long long)seed);
    gc::Rng rng(seed);
    for (const RingCase& rc : nccl_cases(comm->size(), small, rng)) run(rc, rng, comm.get());
    const int total = failures_everywhere(*comm, g_failed);
    if (total > g_failed) std::printf("test_ring --nccl: %d check(s) failed on other ranks\n", total - g_failed);
    check_report();
    return total ? 1 : 0;
}
#endif

static int main_body(int argc, char** argv) {
    uint64_t seed = 20261124;
    bool small = false, use_nccl = false;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--small")) small = true;
        else if (!std::strcmp(argv[i], "--nccl")) use_nccl = true;
        else fatal("usage: [scripts/launch.sh P] test_ring [--nccl] [--seed N] [--small]");
    }
#ifndef HAVE_NCCL
    if (use_nccl)
        fatal("test_ring --nccl: built without NCCL (no nccl.h at build time): install NCCL (libnccl-dev) and rebuild "
              "build/test_ring");
#endif
    // Launched ranks without --nccl would each simulate every rank on GPU 0.
    if (!use_nccl && launcher_world_size() > 1)
        fatal("test_ring was started as %d ranks: add --nccl (scripts/launch.sh %d build/test_ring --nccl), or run it "
              "alone to simulate the ranks",
              launcher_world_size(), launcher_world_size());
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("SKIP test_ring: no CUDA device\n0 passed, 0 failed\n");
        return 0;
    }
#ifdef HAVE_NCCL
    if (use_nccl) return run_nccl(seed, small);
#endif
    return run_simulated(seed, small);
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
