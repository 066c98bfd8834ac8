// infer: loads a checkpoint (with its tokenizer) and either generates text from a prompt,
// streaming it as it comes, or measures perplexity over a whole file. `infer --help`.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include "core/io.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/backend.h"
#include "model/checkpoint.h"
#include "core/flags.h"
#include "model/generate.h"
#include "model/kv_cache_file.h"
#include "model/task_eval.h"
#include "model/select_backend.cuh"
#include "comm/launch.cuh"

// Progress over all the documents scored (a text file is one document): tokens of the documents
// before this one, and of all of them.
static long long g_scored_before = 0, g_scored_total = 0;
static void show_progress(long long done, long long) {
    static auto last = std::chrono::steady_clock::now();
    const auto now = std::chrono::steady_clock::now();
    const bool finished = g_scored_before + done == g_scored_total;
    if (!finished && now - last < std::chrono::milliseconds(500)) return;  // a line per half second, not per window
    last = now;
    std::fprintf(stderr, "\rscored %lld / %lld tokens", g_scored_before + done, g_scored_total);
    if (finished) std::fputc('\n', stderr);
}

// The documents to score, each beginning with BOS: a text file is one document; a token shard
// (data_tool prepare's val.bin) gives its documents of at least min_tokens tokens, each scored from
// its own start, so that --per-position measures positions inside whole held-out documents.
static std::vector<std::vector<int>> documents_to_score(const std::string& path, const std::string& text,
                                                        const Tokenizer& tok, long long min_tokens) {
    std::vector<std::vector<int>> docs;
    if (text.compare(0, 8, "LNGSHARD") != 0) {
        if (min_tokens > 0)
            fatal("--min-doc-tokens is for a token shard, but --perplexity %s is text: drop --min-doc-tokens", path.c_str());
        docs.push_back(tok.encode(text));
        docs.back().insert(docs.back().begin(), tok.bos_id());
        return docs;
    }
    const TokenShard shard = read_shard(path);
    if ((int)shard.vocab_size != tok.vocab_size())
        fatal("--perplexity %s has vocab %u but the checkpoint's tokenizer has %d: score the val.bin of the corpus the "
              "model was trained on", path.c_str(), shard.vocab_size, tok.vocab_size());
    for (size_t d = 0; d < shard.n_docs(); d++) {
        const uint64_t begin = shard.doc_starts[d], end = d + 1 < shard.n_docs() ? shard.doc_starts[d + 1] : shard.n_tokens();
        if ((long long)(end - begin) >= std::max(2LL, min_tokens))  // a lone BOS has nothing to score
            docs.emplace_back(shard.tokens.begin() + begin, shard.tokens.begin() + end);
    }
    if (docs.empty())
        fatal("--perplexity %s has no document of at least --min-doc-tokens %lld tokens: lower --min-doc-tokens", path.c_str(),
              min_tokens);
    return docs;
}

// CSV of mean loss per position bucket (PositionLosses), for scripts/plot_positions.sh.
static void write_position_losses(const std::string& path, const PositionLosses& p) {
    std::string csv = "bucket_start,bucket_end,tokens,mean_loss\n";
    char line[128];
    for (size_t k = 0; k < p.nats.size(); k++) {
        if (!p.tokens[k]) continue;
        snprintf(line, sizeof line, "%lld,%lld,%lld,%.6f\n", k == 0 ? 0LL : 1LL << k, (2LL << k) - 1, p.tokens[k],
                 p.nats[k] / p.tokens[k]);
        csv += line;
    }
    write_file_atomic(path, csv);
}

// infer --tasks: every item of a retrieval task file scored through the KV cache, the report
// printed, and with --tasks-out P written to P.csv (accuracy per cell, length and task),
// P_items.csv (each item's answer and continuation) and P.png (the heatmap).
static int score_task_file(const std::vector<TaskItem>& items, const std::string& tasks_path, const std::string& out_prefix,
                           const Checkpoint& ck, const std::string& ckpt_path, Device dev, AttnBackend attn,
                           const TaskEvalOptions& opt, int chunk, int task_batch) {
    if (!out_prefix.empty()) {  // fail before the work, not after it
        for (const char* ext : {".csv", "_items.csv", ".png"}) {
            const std::string f = out_prefix + ext;
            FILE* probe = std::fopen((f + ".tmp").c_str(), "wb");
            if (!probe) fatal("--tasks-out %s: cannot write %s.tmp (%s): choose a writable place", out_prefix.c_str(), f.c_str(), std::strerror(errno));
            std::fclose(probe);
            std::remove((f + ".tmp").c_str());
        }
    }
    const std::string name = ckpt_path.substr(ckpt_path.find_last_of('/') == std::string::npos ? 0 : ckpt_path.find_last_of('/') + 1);
    const std::string caption = name + " on " + tasks_path;
    if (!out_prefix.empty()) {  // the heatmap's size depends on the items' names and grid, not on the scores: check it now
        try {
            (void)task_heatmap(summarize_tasks(items, std::vector<TaskOutcome>(items.size())), caption);
        } catch (const FatalError& e) {
            fatal("--tasks-out %s: the heatmap of %s cannot be drawn (%s): drop --tasks-out, or use fewer task names, lengths "
                  "or depths", out_prefix.c_str(), tasks_path.c_str(), e.what());
        }
    }
    Tokenizer tok;
    tok.load_serialized(ck.tokenizer);
    const std::vector<TaskPrompt> prompts = tokenize_tasks(items, tok, opt);
    std::unique_ptr<ModelBackend> model = make_backend(dev, ck.cfg, attn);
    model->set_params(ck.params.data());
    model->set_recompute(Recompute::Full);
    const size_t elem = dev == Device::Cuda ? 2 : 4;
    // Sequences that fit at once: each holds its cache of `tokens` rows and its share of a chunk's
    // activations (about 24 values per width per token) and unpacked rows.
    auto max_batch = [&](long long tokens) {
        const double per_seq = kv_cache_bytes(ck.cfg, tokens, 1, elem) + kv_unpack_bytes(ck.cfg, 1, chunk, elem) +
                               (double)chunk * ck.cfg.n_embd * 24 * elem;
        const double room = 0.85 * (double)model->memory_available();
        const int fit = (int)std::min<double>(task_batch, room / per_seq);
        if (fit < 1)
            fatal("out of %s memory: a %lld-token item needs about %.2f GiB (its KV cache and a chunk of %d) but %.2f GiB are "
                  "free: lower --chunk, or score shorter items", model->memory_name(), tokens, per_seq / 1073741824.0, chunk,
                  room / 1073741824.0);
        return fit;
    };
    std::fprintf(stderr, "loaded %s: %d layers, width %d, %.2fM parameters, on %s; %zu items from %s, prompts read up to %lld tokens%s\n",
                 ckpt_path.c_str(), ck.cfg.n_layer, ck.cfg.n_embd, model->num_params() / 1e6, model->name().c_str(), items.size(),
                 tasks_path.c_str(), opt.ctx, opt.truncate ? " (longer ones: their last tokens)" : "");
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<TaskOutcome> out = run_tasks(
        items, prompts, tok, ck.cfg.vocab_size, chunk, [&](int B, int ch) { return make_kv_cache(*model, B, ch); }, max_batch,
        [&](size_t done, size_t total) { std::fprintf(stderr, "\rscored %zu / %zu items", done, total), std::fflush(stderr); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "\n");
    const TaskReport report = summarize_tasks(items, out);
    long long correct = 0, tokens = 0;
    for (const TaskOutcome& o : out) correct += o.correct, tokens += o.tokens;
    std::printf("%s", format_task_report(report).c_str());
    std::printf("tasks %s: %lld of %zu correct (%.1f%%), %lld prompt tokens in %.1f s (%.0f tokens/s)\n", tasks_path.c_str(), correct,
                items.size(), 100.0 * (double)correct / (double)items.size(), tokens, secs, (double)tokens / secs);
    if (!out_prefix.empty()) {
        write_file_atomic(out_prefix + ".csv", task_report_csv(report));
        write_file_atomic(out_prefix + "_items.csv", task_items_csv(items, out));
        write_png(out_prefix + ".png", task_heatmap(report, caption));
        std::printf("wrote %s.csv, %s_items.csv, %s.png\n", out_prefix.c_str(), out_prefix.c_str(), out_prefix.c_str());
    }
    return 0;
}

static int main_body(int argc, char** argv) {
    std::string checkpoint = "out/train", prompt, prompt_file, ppl_file, device = "auto", attention = "flash";
    int max_new = 200, top_k = 40, seed = 1, ctx = 0, cp = 1, simulate_ranks = 0, chunk = 0, min_doc_tokens = 0;
    std::string windows = "auto", per_position, save_cache, load_cache, prompts_file, tasks, tasks_out;
    int task_batch = 16;
    bool truncate = false;
    float temperature = 0.8f, top_p = 0.95f;
    Flags flags("infer", "Generate text from a checkpoint, or measure perplexity over a file.");
    flags.add_string("checkpoint", &checkpoint, "a .safetensors checkpoint, or a directory (its latest checkpoint)");
    flags.add_string("prompt", &prompt, "text to continue");
    flags.add_string("prompt-file", &prompt_file, "file whose text is put before --prompt");
    flags.add_string("prompts-file", &prompts_file, "continue each line of this file at once (a batch through one cache), "
                                                    "after the --prompt-file or --load-cache context; \\n in a line is a newline");
    flags.add_int("max-new", &max_new, "tokens to generate");
    flags.add_float("temperature", &temperature, "sampling temperature (0: greedy)");
    flags.add_int("top-k", &top_k, "sample among the k most likely tokens (0: all)");
    flags.add_float("top-p", &top_p, "sample among the smallest set with this much probability (1: all)");
    flags.add_int("seed", &seed, "sampling seed");
    flags.add_int("ctx", &ctx, "context window in tokens (0: the training --seq-len)");
    flags.add_string("perplexity", &ppl_file, "score this whole file instead of generating: a text file, or a token shard "
                                              "(a corpus's val.bin) whose documents are scored one by one");
    flags.add_int("min-doc-tokens", &min_doc_tokens, "--perplexity of a token shard: only its documents of at least this "
                                                     "many tokens");
    flags.add_string("device", &device, "auto, cpu or cuda");
    flags.add_string("attention", &attention, "attention kernels on the GPU: flash (ours) or cudnn");
    flags.add_int("cp", &cp, "--perplexity: split each window over this many GPUs (ring attention), for windows "
                             "longer than one GPU holds");
    flags.add_int("simulate-ranks", &simulate_ranks, "run the --cp ranks as threads of one process (tests)");
    flags.add_string("windows", &windows, "--perplexity: cached (through the KV cache: the whole file in one window when the "
                                          "model's cache is bounded or the file fits --ctx, else windows of --ctx overlapping "
                                          "by half), sliding (windows of --ctx overlapping by half, whatever the model: what "
                                          "a long context is worth; with --cp each window from scratch over the ring), fresh "
                                          "(consecutive windows, each from scratch) or auto (cached; sliding with --cp)");
    flags.add_int("chunk", &chunk, "tokens per prefill step through the KV cache (0: 16384 on the GPU, 256 on the CPU)");
    flags.add_string("save-cache", &save_cache, "after prefilling the prompt, write its KV cache to this file");
    flags.add_string("load-cache", &load_cache, "start from this KV cache (--save-cache) of the same checkpoint; the "
                                                "prompt then continues it");
    flags.add_string("per-position", &per_position, "--perplexity: write the mean loss per position bucket [2^k, 2^(k+1)) "
                                                    "to this CSV (scripts/plot_positions.sh draws it)");
    flags.add_string("tasks", &tasks, "score a retrieval task file (JSON Lines: task, context, question, answer, length, depth; "
                                      "data_tool tasks writes them): greedy continuations, accuracy by task, length and depth");
    flags.add_string("tasks-out", &tasks_out, "--tasks: write PREFIX.csv, PREFIX_items.csv and the heatmap PREFIX.png");
    flags.add_int("task-batch", &task_batch, "--tasks: the most sequences prefilled and decoded at once (fewer when memory is short)");
    flags.add_bool("truncate", &truncate, "--tasks: read a prompt longer than --ctx in its last --ctx tokens (else it is an error)");
    flags.parse(argc, argv);
    if (!tasks.empty() && (!prompt.empty() || !prompt_file.empty() || !prompts_file.empty() || !ppl_file.empty() ||
                           !save_cache.empty() || !load_cache.empty() || cp != 1))
        fatal("--tasks scores a task file alone: drop --prompt, --prompt-file, --prompts-file, --perplexity, the cache files and --cp");
    if (tasks.empty() && (!tasks_out.empty() || truncate)) fatal("--tasks-out and --truncate are for --tasks");
    if (task_batch < 1) fatal("--task-batch must be at least 1 (got %d)", task_batch);
    if ((cp != 1 || simulate_ranks) && (ppl_file.empty() || (simulate_ranks && simulate_ranks != cp)))
        fatal("--cp and --simulate-ranks are for --perplexity, with --simulate-ranks equal to --cp (got --cp %d, "
              "--simulate-ranks %d%s)", cp, simulate_ranks, ppl_file.empty() ? ", no --perplexity" : "");
    if (max_new < 0 || top_k < 0 || ctx < 0 || temperature < 0 || min_doc_tokens < 0 || !(top_p > 0 && top_p <= 1))
        fatal("--max-new, --top-k, --ctx, --temperature, --min-doc-tokens must be >= 0 and --top-p in (0, 1]");
    if (min_doc_tokens && ppl_file.empty()) fatal("--min-doc-tokens is for --perplexity of a token shard");
    if (windows != "auto" && windows != "cached" && windows != "sliding" && windows != "fresh")
        fatal("--windows must be auto, cached, sliding or fresh (got '%s')", windows.c_str());
    if (windows == "auto") windows = cp > 1 ? "sliding" : "cached";
    if (windows == "cached" && cp > 1)
        fatal("--cp scores windows from scratch over the ring, not through a cache: use --windows sliding or fresh (or drop --cp)");
    if (!per_position.empty() && (ppl_file.empty() || windows == "fresh" || cp > 1))
        fatal("--per-position needs --perplexity through the cache (drop --windows fresh and --cp)");
    if (chunk < 0) fatal("--chunk must be >= 0 (got %d)", chunk);
    if ((!save_cache.empty() || !load_cache.empty()) && !ppl_file.empty())
        fatal("--save-cache and --load-cache are for generation: drop --perplexity");
    if (!prompts_file.empty() && (!prompt.empty() || !ppl_file.empty()))
        fatal("--prompts-file gives the prompts: drop --prompt%s", ppl_file.empty() ? "" : " and --perplexity");
    if (ctx == 1 || ctx > kMaxSeqLen) fatal("--ctx must be 0 (the training --seq-len) or in [2, %d] (got %d)", kMaxSeqLen, ctx);
    const Device dev = resolve_device(device);
    const AttnBackend attn = parse_attention_backend(attention, /*doc_mask=*/false);

    // Read the input files before the checkpoint, so a wrong path fails fast.
    const std::string ppl_text = ppl_file.empty() ? "" : read_file(ppl_file, "check the --perplexity path");
    const std::vector<TaskItem> task_items = tasks.empty() ? std::vector<TaskItem>{} : read_task_file(tasks);
    std::string context = prompt_file.empty() ? "" : read_file(prompt_file, "check the --prompt-file path");
    std::vector<std::string> batch_prompts;
    if (!prompts_file.empty()) {
        const std::string text = read_file(prompts_file, "check the --prompts-file path");
        size_t at = 0;
        while (at < text.size()) {
            size_t end = text.find('\n', at);
            if (end == std::string::npos) end = text.size();
            std::string line = text.substr(at, end - at), p;
            for (size_t i = 0; i < line.size(); i++) {
                if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') p += '\n', i++;
                else p += line[i];
            }
            if (!p.empty()) batch_prompts.push_back(p);
            at = end + 1;
        }
        if (batch_prompts.empty()) fatal("--prompts-file %s has no prompt: give one per line", prompts_file.c_str());
    }
    if (!ppl_file.empty() && ppl_text.empty()) fatal("--perplexity %s is empty", ppl_file.c_str());
    std::string path = checkpoint;
    if (is_directory(path)) {
        path = latest_checkpoint(checkpoint);
        if (path.empty()) fatal("--checkpoint %s: no checkpoint in that directory; run `make train` first", checkpoint.c_str());
    }
    const Checkpoint ck = load_checkpoint(path);
    Tokenizer tok;
    tok.load_serialized(ck.tokenizer);
    if (tok.vocab_size() != ck.cfg.vocab_size) fatal("checkpoint %s: tokenizer and model vocab sizes differ", path.c_str());
    if (ctx == 0) ctx = ck.has_train_state ? checkpoint_seq_len(ck, path, kMaxSeqLen) : 256;
    if (!tasks.empty())
        return score_task_file(task_items, tasks, tasks_out, ck, path, dev, attn, TaskEvalOptions{ctx, truncate, tasks},
                               chunk > 0 ? chunk : dev == Device::Cuda ? 16384 : 256, task_batch);
    if (!ppl_file.empty()) {
        if (cp > 1 && dev == Device::Cuda && attn != AttnBackend::Flash) fatal("--cp needs --attention flash: the ring runs our kernels");
        if (cp > 1 && ctx % (2 * cp))
            fatal("--ctx %d does not split into 2 x --cp %d equal chunks (ring attention's zigzag): use a multiple of %d", ctx,
                  cp, 2 * cp);
        const std::vector<std::vector<int>> docs = documents_to_score(ppl_file, ppl_text, tok, min_doc_tokens);
        size_t text_bytes = 0;
        for (const std::vector<int>& d : docs) {
            g_scored_total += (long long)d.size() - 1;
            text_bytes += docs.size() == 1 ? ppl_text.size() : tok.decode(std::vector<int>(d.begin() + 1, d.end())).size();
        }
        return run_parallel(dev, cp, simulate_ranks, "build/infer", [&](ParallelContext& px) {
            std::unique_ptr<ModelBackend> model = make_backend(dev, ck.cfg, attn);
            model->set_params(ck.params.data());
            model->set_context_parallel(px.cp);
            model->set_recompute(Recompute::Full);  // forward only: a block keeps just what it passes on
            if (px.leader())
                std::fprintf(stderr, "loaded %s: %d layers, width %d, %.2fM parameters, context %d%s, on %s\n", path.c_str(),
                             ck.cfg.n_layer, ck.cfg.n_embd, model->num_params() / 1e6, ctx,
                             px.cp_size > 1 ? (" split over " + std::to_string(px.cp_size) + " ranks").c_str() : "",
                             model->name().c_str());
            const auto t0 = std::chrono::steady_clock::now();
            PositionLosses by_position;
            const int ch = chunk > 0 ? chunk : dev == Device::Cuda ? 16384 : 256;
            PerplexityResult r;
            if (px.leader()) g_scored_before = 0;  // the ranks are threads under --simulate-ranks: one writes
            for (const std::vector<int>& ids : docs) {
                const PerplexityResult d =
                    windows == "fresh" || cp > 1
                        ? perplexity(*model, ids, ctx, px.leader() ? show_progress : nullptr, px, windows == "fresh" ? ctx : ctx / 2)
                        : perplexity_cached([&] { return make_kv_cache(*model, 1, ch); }, ck.cfg, ids, ctx, &by_position,
                                            show_progress, windows == "sliding");
                r.total_nats += d.total_nats, r.tokens += d.tokens;
                if (px.leader()) g_scored_before += d.tokens;
            }
            if (!per_position.empty()) write_position_losses(per_position, by_position);
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const double nll = r.total_nats / r.tokens;
            if (px.leader())
                std::printf("file %s: %zu document%s, %lld tokens, %zu bytes | loss %.4f nats/token | perplexity %.3f | %.4f "
                            "bits/byte | %.0f tokens/s\n",
                            ppl_file.c_str(), docs.size(), docs.size() == 1 ? "" : "s", r.tokens, text_bytes, nll,
                            std::exp(nll), r.total_nats / std::log(2.0) / text_bytes, r.tokens / secs);
            return 0;
        });
    }
    std::unique_ptr<ModelBackend> backend = make_backend(dev, ck.cfg, attn);
    ModelBackend& model = *backend;
    model.set_params(ck.params.data());
    model.set_recompute(Recompute::Full);  // forward only: a block keeps just what it passes on

    context += prompt;
    std::vector<int> ids = tok.encode(context);
    if (load_cache.empty()) ids.insert(ids.begin(), tok.bos_id());  // a loaded cache holds the beginning already
    Sampler sampler(SamplerConfig{temperature, top_k, top_p, (uint64_t)seed});
    StreamDecoder stream(tok);
    stream.prime(std::vector<int>(ids.begin() + (load_cache.empty() ? 1 : 0), ids.end()));  // the prompt is printed as typed
    std::fputs(prompt.c_str(), stdout);
    // A batch of prompts: each tokenized alone, continued after the context by its own sequence.
    std::vector<std::vector<int>> batch_ids;
    size_t longest = 0;
    for (const std::string& p : batch_prompts) batch_ids.push_back(tok.encode(p)), longest = std::max(longest, batch_ids.back().size());
    for (size_t b = 0; b < batch_ids.size(); b++)
        if (batch_ids[b].empty()) fatal("--prompts-file: prompt %zu encodes to no token", b + 1);
    const int B = batch_ids.empty() ? 1 : (int)batch_ids.size();
    // Through the KV cache: a model whose every layer keeps a bounded cache (dilated) reads a prompt
    // of any length; others keep the prompt's last --ctx - --max-new tokens (at least one).
    bool bounded = true;
    for (int l = 0; l < ck.cfg.n_layer; l++) bounded = bounded && kv_cache_rows(ck.cfg.attn(l)) >= 0;
    const long long room = std::max<long long>(1, ctx - max_new - (long long)longest);
    if (!bounded && load_cache.empty() && (long long)ids.size() > room) {
        std::fprintf(stderr, "note: the prompt's %zu tokens are cut to its last %lld (--ctx %d - --max-new %d): this model's "
                     "dense layers keep every row\n", ids.size(), room, ctx, max_new);
        ids.erase(ids.begin(), ids.end() - room);
    }
    const int ch = chunk > 0 ? chunk : dev == Device::Cuda ? 16384 : 256;
    std::unique_ptr<IncrementalModel> cache = make_kv_cache(model, 1, ch);
    const std::string fingerprint = weights_fingerprint(ck.params);
    if (!load_cache.empty()) {
        load_kv_cache(load_cache, *cache, ck.cfg, fingerprint, 1);
    }
    std::fprintf(stderr, "loaded %s: %d layers, width %d, %.2fM parameters, context %d, on %s\n", path.c_str(),
                 ck.cfg.n_layer, ck.cfg.n_embd, model.num_params() / 1e6, ctx, model.name().c_str());
    if (!load_cache.empty())
        std::fprintf(stderr, "loaded a KV cache of %lld tokens from %s\n", cache->position(), load_cache.c_str());
    const long long total = cache->position() + (long long)ids.size() + (long long)longest + max_new;
    const size_t elem = dev == Device::Cuda ? 2 : 4;
    // A batch holds its B sequences and, while it is copied, the context's; only the context's
    // prefill unpacks rows.
    const double cache_bytes = kv_cache_bytes(ck.cfg, total, B > 1 ? B + 1 : 1, elem);
    const double unpack_bytes = kv_unpack_bytes(ck.cfg, 1, ch, elem);
    if (dev == Device::Cuda) {
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        if (cache_bytes + unpack_bytes > 0.9 * free_b) {
            const double per_token = kv_cache_bytes(ck.cfg, 2, 1, 2) - kv_cache_bytes(ck.cfg, 1, 1, 2);
            fatal("out of GPU memory: a KV cache for %lld tokens needs %.2f GiB but %.2f GiB are free: the longest context that "
                  "fits is about %.0f tokens (a shorter --prompt-file, or --ctx)", total, (cache_bytes + unpack_bytes) / 1073741824.0,
                  free_b / 1073741824.0, per_token > 0 ? (0.9 * free_b - unpack_bytes) / per_token : 0.0);
        }
    }
    if ((long long)ids.size() > ch)
        std::fprintf(stderr, "prefill: %zu tokens in chunks of %d; the KV cache will hold %.3f GiB (+ %.3f GiB of rows that chunks unpack into)\n",
                     ids.size(), ch, cache_bytes / 1073741824.0, unpack_bytes / 1073741824.0);
    if (ids.empty() && load_cache.empty()) fatal("nothing to continue: give --prompt or --prompt-file");
    if (auto* gpu_cache = dynamic_cast<KVCacheCuda*>(cache.get())) gpu_cache->reserve(total);
    const auto t0 = std::chrono::steady_clock::now();
    generate_cached(*cache, ck.cfg.vocab_size, ids, 0, batch_ids.empty() ? max_new : 0, sampler, tok.eos_id(),
                    [&](int id) {
                        std::fputs(stream.push(id).c_str(), stdout);
                        std::fflush(stdout);
                    },
                    [&] {
                        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                        if ((long long)ids.size() > ch) std::fprintf(stderr, "prefilled %zu tokens in %.2f s\n", ids.size(), s);
                        if (!save_cache.empty()) {
                            save_kv_cache(save_cache, *cache, ck.cfg, fingerprint);
                            std::fprintf(stderr, "saved the KV cache of %lld tokens to %s\n", cache->position(), save_cache.c_str());
                        }
                    });
    if (batch_ids.empty()) {
        std::fputs(stream.flush().c_str(), stdout);
        std::fputc('\n', stdout);
        return 0;
    }
    // The batch: the context copied into every sequence, then all prompts continued at once.
    std::unique_ptr<IncrementalModel> batch = make_kv_cache(model, B, 1);  // it only decodes: chunks of one token
    if (auto* gpu_batch = dynamic_cast<KVCacheCuda*>(batch.get())) gpu_batch->reserve(total);
    batch->replicate(*cache);
    const long long context_tokens = cache->position();
    cache.reset();
    std::vector<std::vector<int>> made(B);
    const auto t1 = std::chrono::steady_clock::now();
    const long long steps = generate_batch(*batch, ck.cfg.vocab_size, batch_ids, max_new, sampler, tok.eos_id(),
                                           [&](int b, int id) { made[b].push_back(id); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    long long tokens = 0;
    for (int b = 0; b < B; b++) {
        tokens += (long long)made[b].size();
        StreamDecoder text(tok);  // primed with the prompt, so the continuation's first piece keeps its space
        text.prime(batch_ids[b]);
        std::string cont;
        for (int id : made[b]) cont += text.push(id);
        std::printf("=== %d ===\n%s%s\n", b + 1, batch_prompts[b].c_str(), (cont + text.flush()).c_str());
    }
    std::fprintf(stderr, "decoded %d prompts at once after %lld tokens of context: %lld steps, %lld new tokens in %.2f s (%.1f tokens/s)\n",
                 B, context_tokens, steps, tokens, secs, tokens / secs);
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
