// The compute side of ring attention, measured on one GPU, and the ring time it predicts for P
// GPUs over a link of --bw GB/s (scripts/ring_model.py explains the model, notes/ring-attention.md
// the results). For each pattern, tokens per GPU and P: every rank's steps of the zigzag plan
// (layers/ring_plan.h) run one after another on this GPU with the two-sided kernels the ring
// driver calls (forward: Merge per chunk pair; backward: begin, one block per chunk pair, end),
// each step timed with events. Ranks run in lockstep in a ring, so step s takes the slowest rank's
// compute or the transfer of the next step's chunks, whichever is longer:
//   ring time = sum_s max(max_r compute(r, s), bytes(s + 1) / bw + latency)
// and the ring efficiency = sum_s max_r compute(r, s) / ring time (what the issue defines: the
// per-rank compute with communication disabled, over the ring time). Effective TFLOP/s per GPU
// count the pairs the pattern keeps (4 D per pair forward, 2.5x that backward) over the ring time.
// A prediction, not a multi-GPU measurement: the table says so.
// Usage: bench_ring [--out FILE] [--bw GBPS] [--latency-us US] [--quick]
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include "layers/cuda/attention_flash_two_sided.h"
#include "layers/ring_plan.h"
#include "bench/bench_common.cuh"

struct Result {
    double fwd_comp = 0, fwd_ring = 0, bwd_comp = 0, bwd_ring = 0, bytes_fwd = 0, bytes_fwd_plain = 0, flops = 0;
};

// Every rank's per-step compute on this GPU, then the ring model.
static Result measure(const AttnPattern& pat, int P, int tokens_per_gpu, int H, int D, double bw_gbps, double lat_us) {
    const int N = P * tokens_per_gpu, B = 1, HD = H * D;
    const RingPlan plan(pat, P, N);
    const int c = plan.c;
    const AttnDims dm{B, H, D, N};
    const size_t nq = (size_t)B * c * HD, nkv = 2 * nq;
    bf16 *q, *kv, *g, *o, *dk;
    float *O, *L, *ws;
    int* pos;
    const size_t ws_bytes = attention_backward_pieces_workspace_bytes(dm, c);
    CUDA_CHECK(cudaMalloc(&q, nq * 2)), CUDA_CHECK(cudaMalloc(&kv, nkv * 2)), CUDA_CHECK(cudaMalloc(&g, nq * 2));
    CUDA_CHECK(cudaMalloc(&o, nq * 2)), CUDA_CHECK(cudaMalloc(&dk, nkv * 2)), CUDA_CHECK(cudaMalloc(&O, nq * 4));
    CUDA_CHECK(cudaMalloc(&L, (size_t)B * H * c * 4)), CUDA_CHECK(cudaMalloc(&ws, ws_bytes)), CUDA_CHECK(cudaMalloc(&pos, (size_t)N * 4));
    fill_normal_bf16<<<1024, 256>>>(q, nq, 1), fill_normal_bf16<<<1024, 256>>>(kv, nkv, 2);
    fill_normal_bf16<<<1024, 256>>>(g, nq, 3), fill_normal_bf16<<<1024, 256>>>(o, nq, 4);
    {
        std::vector<int> h(N);
        for (int i = 0; i < N; i++) h[i] = i;
        CUDA_CHECK(cudaMemcpy(pos, h.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
    }
    // Chunk contents do not change the time: every chunk's rows come from the same buffers, with
    // the chunk's own positions.
    auto qs = [&](int chunk) { return AttnQueries<bf16>{q, HD, c, pos + plan.pos0(chunk), nullptr, plan.pos0(chunk)}; };
    auto ks = [&](int chunk) { return AttnKeys<bf16>{kv, kv + HD, 2 * HD, c, pos + plan.pos0(chunk), plan.pos0(chunk)}; };
    const float scale = 1.f / std::sqrt((float)D);
    Timer tm;
    std::vector<std::vector<double>> tf(P, std::vector<double>(P)), tb(P, std::vector<double>(P));
    for (int pass = 0; pass < 2; pass++)  // the first pass warms up (kernel loading, clocks)
        for (int r = 0; r < P; r++) {
            for (int s = 0; s < P; s++) {
                const int own = plan.owner_at(r, s);
                tf[r][s] = tm.ms([&] {
                    if (s == 0)
                        for (int j = 0; j < 2; j++) attention_partial_init_cuda(O, L, dm, c, 0);
                    for (int kj = 0; kj < 2; kj++)
                        for (int qj = 0; qj < 2; qj++)
                            if (plan.pair_meets(plan.chunk(r, qj), plan.chunk(own, kj)))
                                attention_forward_merge_cuda(O, L, qs(plan.chunk(r, qj)), ks(plan.chunk(own, kj)), pat, dm, scale, 0);
                });
                tb[r][s] = tm.ms([&] {
                    for (int qj = 0; qj < 2 && s == 0; qj++)
                        attention_backward_begin_cuda(ws, g, o, L, qs(plan.chunk(r, qj)), dm, 0);
                    for (int kj = 0; kj < 2; kj++)
                        for (int qj = 0; qj < 2; qj++)
                            if (plan.pair_meets(plan.chunk(r, qj), plan.chunk(own, kj)))
                                attention_backward_block_cuda(dk, dk + HD, true, g, L, qs(plan.chunk(r, qj)), ks(plan.chunk(own, kj)),
                                                              pat, dm, scale, ws, 0);
                    for (int qj = 0; qj < 2 && s == P - 1; qj++)
                        attention_backward_end_cuda(o, false, qs(plan.chunk(r, qj)), dm, ws, 0);
                });
            }
        }
    Result res;
    const double chunk_kv = (double)nkv * 2;  // bytes of one chunk's K and V
    for (int s = 0; s < P; s++) {
        double cf = 0, cb = 0, in_f = 0;
        for (int r = 0; r < P; r++) {
            cf = std::max(cf, tf[r][s]), cb = std::max(cb, tb[r][s]);
            if (s + 1 < P) in_f = std::max(in_f, (double)plan.chunks_in(r, s + 1));
        }
        // The forward's transfer for step s + 1 overlaps step s; the backward also returns dK/dV
        // (fp32: twice the bytes of K/V) after the step, which the next step's compute can hide.
        const double xf = s + 1 < P && in_f > 0 ? in_f * chunk_kv / (bw_gbps * 1e6) + lat_us * 1e-3 : 0;
        const double xb = s + 1 < P && in_f > 0 ? in_f * 3 * chunk_kv / (bw_gbps * 1e6) + 2 * lat_us * 1e-3 : 0;
        res.fwd_comp += cf, res.bwd_comp += cb;
        res.fwd_ring += std::max(cf, xf), res.bwd_ring += std::max(cb, xb);
    }
    res.bytes_fwd = (double)plan.chunks_moved() / P * chunk_kv;
    res.bytes_fwd_plain = (double)plan.chunks_moved_plain() / P * chunk_kv;
    res.flops = 4.0 * D * pairs_kept(pat, N, H) * B;
    for (void* p : {(void*)q, (void*)kv, (void*)g, (void*)o, (void*)dk, (void*)O, (void*)L, (void*)ws, (void*)pos}) CUDA_CHECK(cudaFree(p));
    return res;
}

static int main_body(int argc, char** argv) {
    const char* out_path = nullptr;
    double bw = 351, lat = 20;  // ../shared/gpu-machine.md: a ring of 4 H200s, 512 MiB messages
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--bw") && i + 1 < argc) bw = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--latency-us") && i + 1 < argc) lat = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--quick")) quick = true;
        else fatal("usage: bench_ring [--out FILE] [--bw GBPS] [--latency-us US] [--quick]");
    }
    if (!(bw > 0) || !(lat >= 0)) fatal("--bw must be positive and --latency-us >= 0");
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("SKIP bench_ring: no CUDA device\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    AttnPattern dense;
    AttnPattern longnet;
    longnet.kind = AttnKind::Dilated;
    longnet.dilated.segments = {2048, 4096, 8192, 16384, 32768};
    longnet.dilated.dilations = {1, 2, 4, 6, 12};
    struct Cfg {
        const char* name;
        AttnPattern p;
        int tokens;
    };
    std::vector<Cfg> cfgs = {{"dense causal", dense, 65536}, {"dense causal", dense, 262144},
                             {"dilated LongNet", longnet, 65536}, {"dilated LongNet", longnet, 262144},
                             {"dilated LongNet", longnet, 1048576}};
    if (quick) cfgs = {{"dense causal", dense, 16384}, {"dilated LongNet", longnet, 65536}};
    const int H = 12, D = 64;
    std::string table;
    char line[1024];
    std::snprintf(line, sizeof line,
                  "Ring attention on %s, B = 1, H = %d, D = %d, bf16, causal: compute measured on this one GPU, rank by rank "
                  "and step by step; ring time PREDICTED for P GPUs at %.0f GB/s per direction and %.0f us per message "
                  "(bench_ring; model: scripts/ring_model.py).\n\n"
                  "| pattern | tokens/GPU | P | fwd compute ms | fwd ring ms (pred.) | fwd eff. | fwd TFLOP/s/GPU | fwd+bwd compute ms | "
                  "fwd+bwd ring ms (pred.) | fwd+bwd eff. | K/V sent per GPU (plain ring) |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|\n",
                  prop.name, H, D, bw, lat);
    table += line;
    std::printf("%s", line);
    for (const Cfg& cf : cfgs)
        for (int P : {1, 2, 4}) {
            const Result r = measure(cf.p, P, cf.tokens, H, D, bw, lat);
            const double both_c = r.fwd_comp + r.bwd_comp, both_r = r.fwd_ring + r.bwd_ring;
            std::snprintf(line, sizeof line, "| %s | %dK | %d | %.2f | %.2f | %.1f%% | %.0f | %.2f | %.2f | %.1f%% | %.0f MB (%.0f MB) |\n",
                          cf.name, cf.tokens / 1024, P, r.fwd_comp, r.fwd_ring, 100 * r.fwd_comp / r.fwd_ring,
                          r.flops / P / (r.fwd_ring * 1e9), both_c, both_r, 100 * both_c / both_r, r.bytes_fwd / 1e6,
                          r.bytes_fwd_plain / 1e6);
            table += line;
            std::printf("%s", line);
            std::fflush(stdout);
        }
    if (out_path) {
        FILE* f = std::fopen(out_path, "w");
        if (!f) fatal("cannot write --out %s", out_path);
        std::fputs(table.c_str(), f);
        std::fclose(f);
    }
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
