// infer: loads a checkpoint (with its tokenizer) and either generates text from a prompt,
// streaming it as it comes, or measures perplexity over a whole file. `infer --help`.
// main_body is the order of events: the flags parsed and checked, the input files read, the
// checkpoint loaded, then one mode run (tasks, copy loss, perplexity or generation), each a
// section below.
#include <cuda_runtime.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "core/flags.h"
#include "core/io.h"
#include "core/output_path.h"
#include "core/run_lock.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "eval/copy_attention.h"
#include "eval/copy_loss.h"
#include "eval/task_eval.h"
#include "eval/task_report.h"
#include "model/backend.h"
#include "model/checkpoint.h"
#include "model/generate.h"
#include "model/kv_cache_file.h"
#include "model/select_backend.cuh"
#include "model/launch.cuh"

// ---- The flags, the inputs, the checkpoint -------------------------------------------------

// Every flag as given; validate_flags resolves --windows auto, and InferPlan --chunk and --ctx 0.
struct InferFlags {
    std::string checkpoint = "out/train", prompt, prompt_file, ppl_file, device = "auto", attention = "flash";
    int max_new = 200, top_k = 40, seed = 1, ctx = 0, cp = 1, simulate_ranks = 0, chunk = 0, min_doc_tokens = 0;
    std::string windows = "auto", per_position, save_cache, load_cache, prompts_file, tasks, tasks_out;
    int task_batch = 16, logn_attn = 0;
    bool truncate = false;
    std::string logits_out;                 // --logits-out: the prompt's logits, instead of generating
    std::string copy_loss, gaps, copy_out;  // --copy-loss: the haystack, the gaps as given, the CSVs' prefix
    int copy_passage = 256, copy_samples = 4;
    bool copy_attn = false;                 // --copy-attn: also where the heads look (eval/copy_attention.h)
    std::vector<long long> gap_tokens;      // --gaps parsed (validate_flags)
    float temperature = 0.8f, top_p = 0.95f;
    std::vector<std::string> given;  // the flags on the command line, for the flags that do nothing in some modes
    bool was_given(const char* name) const { return std::find(given.begin(), given.end(), name) != given.end(); }
};

static InferFlags parse_flags(int argc, char** argv) {
    InferFlags f;
    Flags flags("infer", "Generate text from a checkpoint, or measure perplexity over a file.");
    flags.add_string("checkpoint", &f.checkpoint, "a .safetensors checkpoint, or a directory (its latest checkpoint)");
    flags.add_string("prompt", &f.prompt, "text to continue");
    flags.add_string("prompt-file", &f.prompt_file, "file whose text is put before --prompt");
    flags.add_string("prompts-file", &f.prompts_file, "continue each line of this file at once (a batch through one cache), "
                                                      "after the --prompt-file or --load-cache context; \\n in a line is a newline");
    flags.add_int("max-new", &f.max_new, "tokens to generate");
    flags.add_float("temperature", &f.temperature, "sampling temperature (0: greedy)");
    flags.add_int("top-k", &f.top_k, "sample among the k most likely tokens (0: all)");
    flags.add_float("top-p", &f.top_p, "sample among the smallest set with this much probability (1: all)");
    flags.add_int("seed", &f.seed, "sampling seed; --copy-loss: with the gap and the sample, where each passage starts");
    flags.add_int("ctx", &f.ctx, "context window in tokens (0: the training --seq-len)");
    flags.add_string("perplexity", &f.ppl_file, "score this whole file instead of generating: a text file, or a token shard "
                                                "(a corpus's val.bin) whose documents are scored one by one");
    flags.add_int("min-doc-tokens", &f.min_doc_tokens, "--perplexity of a token shard: only its documents of at least this "
                                                       "many tokens");
    flags.add_string("device", &f.device, "auto, cpu or cuda");
    flags.add_string("attention", &f.attention, "attention kernels on the GPU: flash (ours) or cudnn");
    flags.add_int("cp", &f.cp, "--perplexity: split each window over this many GPUs (ring attention), for windows "
                               "longer than one GPU holds");
    flags.add_int("simulate-ranks", &f.simulate_ranks, "run the --cp ranks as threads of one process (tests)");
    flags.add_string("windows", &f.windows, "--perplexity: cached (through the KV cache: the whole file in one window when the "
                                            "model's cache is bounded or the file fits --ctx, else windows of --ctx overlapping "
                                            "by half), sliding (windows of --ctx overlapping by half, whatever the model: what "
                                            "a long context is worth; with --cp each window from scratch over the ring), fresh "
                                            "(consecutive windows, each from scratch) or auto (cached; sliding with --cp)");
    flags.add_int("chunk", &f.chunk, "tokens per prefill step through the KV cache (0: 65536 on the GPU, 256 on the CPU)");
    flags.add_string("save-cache", &f.save_cache, "after prefilling the prompt, write its KV cache to this file");
    flags.add_string("load-cache", &f.load_cache, "start from this KV cache (--save-cache) of the same checkpoint; the "
                                                  "prompt then continues it");
    flags.add_string("per-position", &f.per_position, "--perplexity: write the mean loss per position bucket [2^k, 2^(k+1)) "
                                                      "to this CSV (scripts/plot_positions.sh draws it)");
    flags.add_string("tasks", &f.tasks, "score a retrieval task file (JSON Lines: task, context, question, answer, length, depth; "
                                        "data_tool tasks writes them): greedy continuations, accuracy by task, length and depth");
    flags.add_string("tasks-out", &f.tasks_out, "--tasks: write PREFIX.csv and PREFIX_items.csv (scripts/plot_heatmap.sh PREFIX.csv draws the heatmap)");
    flags.add_int("task-batch", &f.task_batch, "--tasks: the most sequences prefilled and decoded at once (fewer when memory is short)");
    flags.add_int("logn-attn", &f.logn_attn, "log-n attention in the NoPE layers: a query at position p >= N scaled by "
                                             "ln(p + 1) / ln(N), N best the longest window trained on (0: off; default: the "
                                             "checkpoint's)");
    flags.add_bool("truncate", &f.truncate, "--tasks: read a prompt longer than --ctx in its last --ctx tokens (else it is an error)");
    flags.add_string("logits-out", &f.logits_out, "instead of generating, write the logits of every position of the prompt (BOS, "
                                                  "--prompt-file, --prompt) to this safetensors file: tokens (T) I32, logits "
                                                  "(T, vocab) F32 (scripts/reference_model.py reads it)");
    flags.add_string("copy-loss", &f.copy_loss, "the copy loss by gap over this haystack (a token shard such as a corpus's val.bin, "
                                                "a text file or a directory): a passage, G tokens of the text after it, the passage "
                                                "again; the loss per token on the repeat against the first occurrence");
    flags.add_string("gaps", &f.gaps, "--copy-loss: the gaps G in tokens, with K and M suffixes (a comma list, e.g. 2K,8K,32K,128K,512K,1M)");
    flags.add_int("copy-passage", &f.copy_passage, "--copy-loss: tokens of the passage (at least 2)");
    flags.add_int("copy-samples", &f.copy_samples, "--copy-loss: passages per gap, each at its own place in the haystack");
    flags.add_bool("copy-attn", &f.copy_attn, "--copy-loss: also the weight each head puts on the first occurrence while reading "
                   "the repeat (layers that keep every row; each sequence read in one window); with --copy-out, PREFIX_attn.csv");
    flags.add_string("copy-out", &f.copy_out, "--copy-loss: write PREFIX.csv (a row per gap), PREFIX_items.csv (a row per passage), PREFIX_tokens.csv (each sequence's tokens, for another implementation to score) and PREFIX_positions.csv (each passage token's loss at either occurrence)");
    flags.parse(argc, argv);
    for (const std::string& name : flags.names())
        if (flags.was_set(name.c_str())) f.given.push_back(name);
    return f;
}

// --copy-loss's options from the flags (--gaps parsed by validate_flags).
static CopyLossOptions copy_loss_options(const InferFlags& f) {
    return CopyLossOptions{f.gap_tokens, f.copy_passage, f.copy_samples, (uint64_t)f.seed};
}

// Every rule on the flags alone, before any file is read. Their order is the order of the
// errors a user meets, so it stays as it is.
static void validate_flags(InferFlags& f) {
    if (!f.tasks.empty() && (!f.prompt.empty() || !f.prompt_file.empty() || !f.prompts_file.empty() || !f.ppl_file.empty() ||
                             !f.save_cache.empty() || !f.load_cache.empty() || f.cp != 1))
        fatal("--tasks scores a task file alone: drop --prompt, --prompt-file, --prompts-file, --perplexity, the cache files and --cp");
    if (f.tasks.empty() && (!f.tasks_out.empty() || f.truncate)) fatal("--tasks-out and --truncate are for --tasks");
    if (f.task_batch < 1) fatal("--task-batch must be at least 1 (got %d)", f.task_batch);
    if (!f.copy_loss.empty() && (!f.prompt.empty() || !f.prompt_file.empty() || !f.prompts_file.empty() || !f.ppl_file.empty() ||
                                 !f.tasks.empty() || !f.save_cache.empty() || !f.load_cache.empty() || f.cp != 1))
        fatal("--copy-loss scores a haystack alone: drop --prompt, --prompt-file, --prompts-file, --perplexity, --tasks, the cache "
              "files and --cp");
    if (f.copy_loss.empty())
        for (const char* g : {"gaps", "copy-passage", "copy-samples", "copy-attn", "copy-out"})
            if (f.was_given(g)) fatal("--%s is for --copy-loss: drop it, or add --copy-loss HAYSTACK", g);
    if (!f.copy_loss.empty()) {
        // --seed places the passages here; the sampling flags have nothing to sample.
        for (const char* g : {"max-new", "temperature", "top-k", "top-p"})
            if (f.was_given(g)) fatal("--%s is for generation, not --copy-loss (it scores, it does not sample): drop it", g);
        if (!f.was_given("gaps")) fatal("--copy-loss needs --gaps, e.g. --gaps 2K,8K,32K,128K");
        f.gap_tokens = parse_gaps(f.gaps);
        check_copy_loss_options(copy_loss_options(f));
    }
    // A flag the chosen mode never reads is refused: silently ignored, it would leave the user
    // believing it shaped the result (a --prompt scored with --perplexity, a --seed under greedy).
    if (!f.ppl_file.empty() || !f.tasks.empty())
        for (const char* g : {"prompt", "prompt-file", "max-new", "temperature", "top-k", "top-p", "seed"})
            if (f.was_given(g)) fatal("--%s is for generation, not %s: drop it", g, f.tasks.empty() ? "--perplexity" : "--tasks (greedy answers)");
    if (f.temperature == 0)
        for (const char* g : {"top-k", "top-p", "seed"})
            if (f.was_given(g)) fatal("--%s has no effect with --temperature 0 (greedy): drop it, or sample with a temperature > 0", g);
    if (f.ppl_file.empty() && f.was_given("windows")) fatal("--windows is for --perplexity: drop it");
    if (f.tasks.empty() && f.was_given("task-batch")) fatal("--task-batch is for --tasks: drop it");
    if ((f.cp != 1 || f.simulate_ranks) && (f.ppl_file.empty() || (f.simulate_ranks && f.simulate_ranks != f.cp)))
        fatal("--cp and --simulate-ranks are for --perplexity, with --simulate-ranks equal to --cp (got --cp %d, "
              "--simulate-ranks %d%s)", f.cp, f.simulate_ranks, f.ppl_file.empty() ? ", no --perplexity" : "");
    if (f.max_new < 0 || f.top_k < 0 || f.ctx < 0 || f.temperature < 0 || f.min_doc_tokens < 0 || !(f.top_p > 0 && f.top_p <= 1))
        fatal("--max-new, --top-k, --ctx, --temperature, --min-doc-tokens must be >= 0 and --top-p in (0, 1]");
    if (f.min_doc_tokens && f.ppl_file.empty()) fatal("--min-doc-tokens is for --perplexity of a token shard");
    if (f.windows != "auto" && f.windows != "cached" && f.windows != "sliding" && f.windows != "fresh")
        fatal("--windows must be auto, cached, sliding or fresh (got '%s')", f.windows.c_str());
    if (f.windows == "auto") f.windows = f.cp > 1 ? "sliding" : "cached";
    if (f.windows == "cached" && f.cp > 1)
        fatal("--cp scores windows from scratch over the ring, not through a cache: use --windows sliding or fresh (or drop --cp)");
    if (!f.per_position.empty() && (f.ppl_file.empty() || f.windows == "fresh" || f.cp > 1))
        fatal("--per-position needs --perplexity through the cache (drop --windows fresh and --cp)");
    if (f.chunk < 0) fatal("--chunk must be >= 0 (got %d)", f.chunk);
    if ((!f.save_cache.empty() || !f.load_cache.empty()) && !f.ppl_file.empty())
        fatal("--save-cache and --load-cache are for generation: drop --perplexity");
    if (!f.logits_out.empty()) {
        if (!f.tasks.empty() || !f.copy_loss.empty() || !f.ppl_file.empty() || !f.prompts_file.empty() || !f.save_cache.empty() ||
            !f.load_cache.empty())
            fatal("--logits-out reads one prompt from scratch: drop --tasks, --copy-loss, --perplexity, --prompts-file and the cache files");
        for (const char* g : {"max-new", "temperature", "top-k", "top-p", "seed"})
            if (f.was_given(g)) fatal("--%s is for generation, not --logits-out (it samples nothing): drop it", g);
    }
    if (!f.prompts_file.empty() && (!f.prompt.empty() || !f.ppl_file.empty()))
        fatal("--prompts-file gives the prompts: drop --prompt%s", f.ppl_file.empty() ? "" : " and --perplexity");
    if (f.ctx == 1 || f.ctx > kMaxSeqLen) fatal("--ctx must be 0 (the training --seq-len) or in [2, %d] (got %d)", kMaxSeqLen, f.ctx);
}

// The input files' contents, read before the checkpoint so that a wrong path fails fast.
struct InferInputs {
    std::string ppl_text;                    // --perplexity
    std::vector<TaskItem> task_items;        // --tasks
    // --prompt-file is checked here and read once the model is known (read_prompt_file): a model
    // that keeps only its last --ctx tokens reads only the file's end.
    std::vector<std::string> batch_prompts;  // --prompts-file
};

// The bound on the text files a model reads as a prompt (--prompt-file, --prompts-file), checked
// from the file's size before it is read (core/io.h: and only regular files). The rule: no model
// reads more than kMaxSeqLen (2^28) tokens in one context (a dilated one, whose cache is bounded,
// reads a prompt of any length up to that; the others keep only the last --ctx - --max-new tokens
// of it), and our tokenizers make about one token of every 4 bytes of text, so a prompt of more
// than 4 x kMaxSeqLen bytes (1 GiB) could not be used whole by any model: it is refused, with the
// fix (give its end). A dense model uses far less, but that is known only once the checkpoint is
// loaded and the text tokenized; its prompt is then cut to the context (cut_prompt_to_context).
constexpr uint64_t kMaxPromptFileBytes = 4ULL * kMaxSeqLen;
constexpr const char* kPromptFileFix = "give a regular file of at most 1 GiB (its end, e.g. `tail -c 100M`: a dense model keeps "
                                       "only the last --ctx tokens)";

// A prompt per non-empty line; "\n" in a line stands for a newline, so that a prompt may span lines.
static std::vector<std::string> read_batch_prompts(const std::string& path) {
    const std::string text = read_regular_file(path, kMaxPromptFileBytes, "--prompts-file",
                                               "give a regular file of at most 1 GiB, a prompt per line (each is cut to --ctx)");
    std::vector<std::string> prompts;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(at, end - at), p;
        for (size_t i = 0; i < line.size(); i++) {
            if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') p += '\n', i++;
            else p += line[i];
        }
        if (!p.empty()) prompts.push_back(p);
        at = end + 1;
    }
    if (prompts.empty()) fatal("--prompts-file %s has no prompt: give one per line", path.c_str());
    return prompts;
}

// --perplexity's file: a text file whole; of a token shard only its magic (documents_to_score reads
// it with read_shard, which checks its header against the file's size before its body).
static std::string read_perplexity_input(const std::string& path) {
    const char* fix = "check the --perplexity path";
    if (starts_as_shard(path, "--perplexity", fix)) return std::string(kShardMagic, 8);
    return read_regular_file(path, kReadFileMaxBytes, "--perplexity", fix);
}

static InferInputs read_inputs(const InferFlags& f) {
    InferInputs in;
    // The cache is read once the checkpoint is known (its size is bounded by the model's largest
    // cache); a FIFO, device or directory fails here already, before the checkpoint is loaded.
    if (!f.load_cache.empty()) check_regular_file(f.load_cache, kReadFileMaxBytes, "--load-cache", "check the --load-cache path");
    if (!f.ppl_file.empty()) in.ppl_text = read_perplexity_input(f.ppl_file);
    if (!f.tasks.empty()) in.task_items = read_task_file(f.tasks);
    if (!f.copy_loss.empty()) check_copy_haystack_path(f.copy_loss);  // read once the tokenizer is known
    if (!f.prompt_file.empty()) check_regular_file(f.prompt_file, kMaxPromptFileBytes, "--prompt-file", kPromptFileFix);
    if (!f.prompts_file.empty()) in.batch_prompts = read_batch_prompts(f.prompts_file);
    if (!f.ppl_file.empty() && in.ppl_text.empty()) fatal("--perplexity %s is empty", f.ppl_file.c_str());
    return in;
}

// The checkpoint and its tokenizer; path is the file read (a --checkpoint directory's latest).
struct LoadedModel {
    std::string path;
    Checkpoint ck;
    Tokenizer tok;
};

static LoadedModel load_model(const std::string& checkpoint) {
    LoadedModel m;
    m.path = checkpoint;
    if (is_directory(m.path)) {
        m.path = latest_checkpoint(checkpoint);
        if (m.path.empty()) fatal("--checkpoint %s: no checkpoint in that directory; run `make train` first", checkpoint.c_str());
    }
    m.ck = load_checkpoint(m.path);
    m.tok.load_serialized(m.ck.tokenizer);
    if (m.tok.vocab_size() != m.ck.cfg.vocab_size) fatal("checkpoint %s: tokenizer and model vocab sizes differ", m.path.c_str());
    return m;
}

// --logn-attn replaces the checkpoint's setting: it scales queries, it has no weights of its own
// (unless the heads learned their slopes from the checkpoint's base: then the base is theirs).
static void apply_logn_attn(const InferFlags& f, LoadedModel& m) {
    if (!f.was_given("logn-attn")) return;
    if (m.ck.cfg.logn_learn && f.logn_attn != m.ck.cfg.logn_attn)
        fatal("--logn-attn %d: the checkpoint's NoPE heads learned their log-n slopes from position %d, which they need: "
              "drop --logn-attn", f.logn_attn, m.ck.cfg.logn_attn);
    const std::string why = logn_attn_error(f.logn_attn, m.ck.cfg.nope_layers);
    if (!why.empty()) fatal("%s", why.c_str());
    m.ck.cfg.logn_attn = f.logn_attn;
    if (f.logn_attn)
        std::fprintf(stderr, "note: log-n attention in NoPE layers %s: queries at positions >= %d scaled by ln(p + 1) / ln(%d)\n",
                     int_list_text(m.ck.cfg.nope_layers).c_str(), f.logn_attn, f.logn_attn);
}

// Where and at what size every mode computes, once the flags and the checkpoint are known.
struct InferPlan {
    Device dev;
    AttnBackend attn;
    int chunk;  // tokens per prefill step through the KV cache
    int ctx;    // the context window
};

static InferPlan make_plan(const InferFlags& f, Device dev, AttnBackend attn, const LoadedModel& m) {
    // On the GPU 65536: a long prefill is faster in fewer, larger chunks than in chunks of 16384
    // (see notes/kv-cache.md, the prefill), and a multiple of every LongNet segment
    // up to 64K starts each chunk on a segment border, so nothing is unpacked.
    const int chunk = f.chunk > 0 ? f.chunk : dev == Device::Cuda ? 65536 : 256;
    const int ctx = f.ctx ? f.ctx : m.ck.has_train_state ? checkpoint_seq_len(m.ck, m.path, kMaxSeqLen) : 256;
    return InferPlan{dev, attn, chunk, ctx};
}

// Bytes of one cached value: the GPU keeps 16-bit values, the CPU floats.
static size_t kv_elem_bytes(Device dev) { return dev == Device::Cuda ? 2 : 4; }

// The checkpoint's weights on the plan's device, forward only: a block keeps just what it passes
// on. px: the ring to split windows over (--cp), when there is one.
static std::unique_ptr<ModelBackend> make_forward_model(const LoadedModel& m, const InferPlan& plan,
                                                        const ParallelContext* px = nullptr) {
    std::unique_ptr<ModelBackend> model = make_backend(plan.dev, m.ck.cfg, plan.attn);
    model->set_params(m.ck.params.data());
    if (px) model->set_context_parallel(px->cp);
    model->set_recompute(Recompute::Full);
    return model;
}

// ---- --tasks ------------------------------------------------------------------------------

// Sequences of `tokens` that fit at once, up to task_batch: each holds its cache of `tokens` rows
// and its share of a chunk's activations (about 24 values per width per token) and unpacked rows.
static int task_batch_that_fits(ModelBackend& model, const GPTConfig& cfg, const InferPlan& plan, int task_batch,
                                long long tokens) {
    const size_t elem = kv_elem_bytes(plan.dev);
    const double per_seq = kv_cache_bytes(cfg, tokens, 1, elem) + kv_unpack_bytes(cfg, 1, plan.chunk, elem) +
                           (double)plan.chunk * cfg.n_embd * 24 * elem;
    const double room = 0.85 * (double)model.memory_available();
    const int fit = (int)std::min<double>(task_batch, room / per_seq);
    if (fit < 1)
        fatal("out of %s memory: a %lld-token item needs about %.2f GiB (its KV cache and a chunk of %d) but %.2f GiB are "
              "free: lower --chunk, or score shorter items", model.memory_name(), tokens, per_seq / 1073741824.0, plan.chunk,
              room / 1073741824.0);
    return fit;
}

// The report on stdout, and with --tasks-out P: P.csv (accuracy per cell, length and task) and
// P_items.csv (each item's answer and continuation). The heatmap is drawn from P.csv by
// scripts/plot_heatmap.sh (gnuplot), not here.
static void report_tasks(const std::vector<TaskItem>& items, const std::vector<TaskOutcome>& out, const InferFlags& f,
                         double secs) {
    const TaskReport report = summarize_tasks(items, out);
    long long correct = 0, tokens = 0;
    for (const TaskOutcome& o : out) correct += o.correct, tokens += o.tokens;
    std::printf("%s", format_task_report(report).c_str());
    std::printf("tasks %s: %lld of %zu correct (%.1f%%), %lld prompt tokens in %.1f s (%.0f tokens/s)\n", f.tasks.c_str(), correct,
                items.size(), 100.0 * (double)correct / (double)items.size(), tokens, secs, (double)tokens / secs);
    if (f.tasks_out.empty()) return;
    const std::string& p = f.tasks_out;
    write_file_atomic(p + ".csv", task_report_csv(report));
    write_file_atomic(p + "_items.csv", task_items_csv(items, out));
    std::printf("wrote %s.csv, %s_items.csv (heatmap: scripts/plot_heatmap.sh %s.csv)\n", p.c_str(), p.c_str(), p.c_str());
}

// infer --tasks: every item of a retrieval task file scored through the KV cache.
static int score_task_file(const InferFlags& f, const InferPlan& plan, const LoadedModel& m, const std::vector<TaskItem>& items) {
    const TaskEvalOptions opt{plan.ctx, f.truncate, f.tasks};
    const std::vector<TaskPrompt> prompts = tokenize_tasks(items, m.tok, opt);
    std::unique_ptr<ModelBackend> model = make_forward_model(m, plan);
    std::fprintf(stderr, "loaded %s: %d layers, width %d, %.2fM parameters, on %s; %zu items from %s, prompts read up to %lld tokens%s\n",
                 m.path.c_str(), m.ck.cfg.n_layer, m.ck.cfg.n_embd, model->num_params() / 1e6, model->name().c_str(), items.size(),
                 f.tasks.c_str(), opt.ctx, opt.truncate ? " (longer ones: their last tokens)" : "");
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<TaskOutcome> out = run_tasks(
        items, prompts, m.tok, m.ck.cfg.vocab_size, plan.chunk, [&](int B, int ch) { return make_kv_cache(*model, B, ch); },
        [&](long long tokens) { return task_batch_that_fits(*model, m.ck.cfg, plan, f.task_batch, tokens); },
        [&](size_t done, size_t total, size_t correct) {
            std::fprintf(stderr, "\rscored %zu / %zu items, %zu correct", done, total, correct), std::fflush(stderr);
        });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "\n");
    report_tasks(items, out, f, secs);
    return 0;
}

// ---- --perplexity -------------------------------------------------------------------------

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
    const TokenShard shard = read_shard(path, "--perplexity");
    require_shard_tokenizer(shard, tok.fingerprint(), (uint32_t)tok.vocab_size(), "the checkpoint's tokenizer", "--perplexity " + path,
                            "score the val.bin of the corpus the model was trained on");
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

// The documents with what the report divides by: the tokens to score (all but each BOS) and the
// bytes of text they stand for.
struct ScoredText {
    std::vector<std::vector<int>> docs;
    long long tokens = 0;
    size_t text_bytes = 0;
};

static ScoredText text_to_score(const InferFlags& f, const std::string& text, const Tokenizer& tok) {
    ScoredText s;
    s.docs = documents_to_score(f.ppl_file, text, tok, f.min_doc_tokens);
    for (const std::vector<int>& d : s.docs) {
        s.tokens += (long long)d.size() - 1;
        s.text_bytes += s.docs.size() == 1 ? text.size() : tok.decode(std::vector<int>(d.begin() + 1, d.end())).size();
    }
    return s;
}

// The "scored N / M tokens" line over all the documents: the scoring reports progress within a
// document, this adds the documents before it. A line per half second, not per window.
class ScoreProgress {
public:
    explicit ScoreProgress(long long total) : total_(total) {}
    ProgressFn callback() {
        return [this](long long done, long long) { show(before_ + done); };
    }
    void document_done(long long tokens) { before_ += tokens; }

private:
    void show(long long scored) {
        const auto now = std::chrono::steady_clock::now();
        if (!last_) last_ = now;  // the half second counts from the first report
        const bool finished = scored == total_;
        if (!finished && now - *last_ < std::chrono::milliseconds(500)) return;
        last_ = now;
        std::fprintf(stderr, "\rscored %lld / %lld tokens", scored, total_);
        if (finished) std::fputc('\n', stderr);
    }
    long long before_ = 0, total_;
    std::optional<std::chrono::steady_clock::time_point> last_;
};

// The ring (--cp) runs our kernels on windows split into 2 x --cp zigzag chunks.
static void check_ring_split(const InferFlags& f, const InferPlan& plan) {
    if (plan.dev == Device::Cuda) check_ring_backend(f.cp > 1, plan.attn);
    if (f.cp > 1 && plan.ctx % (2 * f.cp))
        fatal("--ctx %d does not split into 2 x --cp %d equal chunks (ring attention's zigzag): use a multiple of %d", plan.ctx,
              f.cp, 2 * f.cp);
}

// One document's loss: from scratch in windows (--windows fresh, or over the --cp ring) or
// through the KV cache, which also adds its losses by position.
static PerplexityResult score_document(ModelBackend& model, const std::vector<int>& ids, const InferFlags& f,
                                       const InferPlan& plan, const GPTConfig& cfg, const ParallelContext& px,
                                       PositionLosses* by_position, const ProgressFn& progress) {
    if (f.windows == "fresh" || f.cp > 1)
        return perplexity(model, ids, plan.ctx, px.leader() ? progress : nullptr, px, f.windows == "fresh" ? plan.ctx : plan.ctx / 2);
    return perplexity_cached([&] { return make_kv_cache(model, 1, plan.chunk); }, cfg, ids, plan.ctx, by_position, progress,
                             f.windows == "sliding");
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

// One rank's share of --perplexity (with --cp its zigzag rows of every window; else all of it).
static int score_on_rank(ParallelContext& px, const InferFlags& f, const InferPlan& plan, const LoadedModel& m,
                         const ScoredText& text) {
    std::unique_ptr<ModelBackend> model = make_forward_model(m, plan, &px);
    if (px.leader())
        std::fprintf(stderr, "loaded %s: %d layers, width %d, %.2fM parameters, context %d%s, on %s\n", m.path.c_str(),
                     m.ck.cfg.n_layer, m.ck.cfg.n_embd, model->num_params() / 1e6, plan.ctx,
                     px.cp_size > 1 ? (" split over " + std::to_string(px.cp_size) + " ranks").c_str() : "",
                     model->name().c_str());
    const auto t0 = std::chrono::steady_clock::now();
    PositionLosses by_position;
    ScoreProgress progress(text.tokens);
    const ProgressFn report_progress = progress.callback();
    PerplexityResult r;
    for (const std::vector<int>& ids : text.docs) {
        const PerplexityResult d = score_document(*model, ids, f, plan, m.ck.cfg, px, &by_position, report_progress);
        r.total_nats += d.total_nats, r.tokens += d.tokens;
        if (px.leader()) progress.document_done(d.tokens);  // the ranks are threads under --simulate-ranks: one writes
    }
    if (!f.per_position.empty()) write_position_losses(f.per_position, by_position);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double nll = r.total_nats / r.tokens;
    if (!std::isfinite(nll))  // finite weights can still overflow: a diverged run's last checkpoint
        fatal("--perplexity %s: the checkpoint's model gives a non-finite loss (its weights have diverged): use an earlier "
              "checkpoint", f.ppl_file.c_str());
    if (px.leader())
        std::printf("file %s: %zu document%s, %lld tokens, %zu bytes | loss %.4f nats/token | perplexity %.3f | %.4f "
                    "bits/byte | %.0f tokens/s\n",
                    f.ppl_file.c_str(), text.docs.size(), text.docs.size() == 1 ? "" : "s", r.tokens, text.text_bytes, nll,
                    std::exp(nll), r.total_nats / std::log(2.0) / text.text_bytes, r.tokens / secs);
    return 0;
}

static int score_perplexity(const InferFlags& f, const InferPlan& plan, const LoadedModel& m, const std::string& ppl_text) {
    check_ring_split(f, plan);
    const ScoredText text = text_to_score(f, ppl_text, m.tok);
    return run_parallel(plan.dev, f.cp, f.simulate_ranks, "build/infer",
                        [&](ParallelContext& px) { return score_on_rank(px, f, plan, m, text); });
}

// ---- --copy-loss --------------------------------------------------------------------------

// infer --copy-loss: each gap's passages placed in the haystack (which fails at once when it is too
// small), each sequence scored through the KV cache (eval/copy_loss.h), the table, the CSVs.
static int score_copy_loss(const InferFlags& f, const InferPlan& plan, const LoadedModel& m) {
    const CopyLossOptions opt = copy_loss_options(f);
    const PieceKinds kinds(m.tok);
    const Haystack hay = load_copy_haystack(f.copy_loss, m.tok, kinds);
    const std::vector<CopyItem> items = place_copy_items(hay, opt);
    std::unique_ptr<ModelBackend> model = make_forward_model(m, plan);
    // A sequence longer than the window is scored in windows of --ctx overlapping by half: its
    // repeat is then read without its first occurrence when the gap passes the window. Right for
    // a control; a mistake for a long-context model given too small a --ctx, so it is said.
    long long longest = 0;
    std::string cut;
    for (const CopyItem& it : items)
        if (it.sample == 0 && !copy_reads_whole(m.ck.cfg, it, plan.ctx))
            cut += (cut.empty() ? "" : ",") + format_length(it.gap), longest = std::max(longest, it.length() - 1);
    const GPTConfig& cfg = m.ck.cfg;
    std::vector<AttnProbe> probes;
    if (f.copy_attn) {
        if (copy_attention_layers(cfg).empty())
            fatal("--copy-attn measures layers that keep every row (dense, block-sparse, fixed) and every layer of this model is "
                  "dilated: drop --copy-attn");
        if (!cut.empty())
            fatal("--copy-attn reads each sequence in one window: give --ctx %lld or more (the sequences of gaps %s are longer than "
                  "--ctx %d)", longest, cut.c_str(), plan.ctx);
        if (plan.chunk < kProbeMinChunk)
            fatal("--copy-attn reads chunks of %d or more tokens (got --chunk %d): give --chunk 0 or at least %d", kProbeMinChunk,
                  plan.chunk, kProbeMinChunk);
        for (const CopyItem& it : items) {
            probes.emplace_back();
            probes.back().reset(copy_probe_pairs(it), cfg.n_layer, cfg.n_head);
        }
    }
    std::fprintf(stderr, "loaded %s: %d layers, width %d, %.2fM parameters, context %d, on %s; haystack %s: %zu tokens; %zu "
                 "sequences (%zu gaps x %d passages of %d tokens)\n", m.path.c_str(), m.ck.cfg.n_layer, m.ck.cfg.n_embd,
                 model->num_params() / 1e6, plan.ctx, model->name().c_str(), f.copy_loss.c_str(), hay.tokens.size(),
                 items.size(), opt.gaps.size(), opt.samples, opt.passage);
    if (!cut.empty())
        std::fprintf(stderr, "note: gaps %s: their sequences are longer than --ctx %d and are scored in windows of %d overlapping "
                     "by half, so a repeat more than %d tokens after its first occurrence is read without it (--ctx %lld reads "
                     "them whole)\n", cut.c_str(), plan.ctx, plan.ctx, plan.ctx / 2, longest);
    const auto t0 = std::chrono::steady_clock::now();
    long long total = 0;
    for (const CopyItem& it : items) total += it.length() - 1;
    ScoreProgress progress(total);
    const std::vector<CopyScore> scores =
        run_copy_loss(hay, items, m.tok.bos_id(), [&] { return make_kv_cache(*model, 1, plan.chunk); }, cfg, plan.ctx,
                      progress.callback(), f.copy_attn ? &probes : nullptr);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const CopyScore& c : scores)
        if (!std::isfinite(c.first) || !std::isfinite(c.repeat))  // finite weights can still overflow: a diverged run
            fatal("--copy-loss %s: the checkpoint's model gives a non-finite loss (its weights have diverged): use an earlier "
                  "checkpoint", f.copy_loss.c_str());
    const std::vector<CopyLossRow> rows = summarize_copy_loss(items, scores);
    std::printf("%s", format_copy_loss_table(rows).c_str());
    std::printf("copy loss %s: %zu sequences, %lld tokens in %.1f s (%.0f tokens/s)\n", f.copy_loss.c_str(), items.size(), total,
                secs, (double)total / secs);
    std::vector<CopyAttention> attn;
    for (size_t i = 0; i < probes.size(); i++) attn.push_back(copy_attention_of(items[i], probes[i]));
    check_copy_attention(attn, cfg);
    if (f.copy_attn) std::printf("%s", format_copy_attention_table(summarize_copy_attention(items, attn), cfg).c_str());
    if (f.copy_out.empty()) return 0;
    if (f.copy_attn) write_file_atomic(f.copy_out + "_attn.csv", copy_attention_csv(items, attn, cfg));
    write_file_atomic(f.copy_out + ".csv", copy_loss_csv(rows));
    write_file_atomic(f.copy_out + "_items.csv", copy_items_csv(items, scores));
    write_file_atomic(f.copy_out + "_tokens.csv", copy_tokens_csv(hay, items, m.tok.bos_id()));
    write_file_atomic(f.copy_out + "_positions.csv", copy_positions_csv(hay, items, scores));
    std::printf("wrote %s.csv, %s_items.csv, %s_tokens.csv, %s_positions.csv%s\n", f.copy_out.c_str(), f.copy_out.c_str(),
                f.copy_out.c_str(), f.copy_out.c_str(), f.copy_attn ? (", " + f.copy_out + "_attn.csv").c_str() : "");
    return 0;
}

// ---- generation (--prompt, --prompt-file, --prompts-file, --save-cache, --load-cache) ---------

// --prompt-file's text, then --prompt, as tokens; after BOS unless a loaded cache holds the
// beginning already.
static std::vector<int> encode_context(const InferFlags& f, const Tokenizer& tok, const std::string& prompt_file_text) {
    std::vector<int> ids = tok.encode(prompt_file_text + f.prompt);
    if (f.load_cache.empty()) ids.insert(ids.begin(), tok.bos_id());
    return ids;
}

// A batch of prompts: each tokenized alone, continued after the context by its own sequence.
static std::vector<std::vector<int>> encode_batch_prompts(const Tokenizer& tok, const std::vector<std::string>& prompts) {
    std::vector<std::vector<int>> ids;
    for (const std::string& p : prompts) ids.push_back(tok.encode(p));
    for (size_t b = 0; b < ids.size(); b++)
        if (ids[b].empty()) fatal("--prompts-file: prompt %zu encodes to no token", b + 1);
    return ids;
}

// Through the KV cache a model whose every layer keeps a bounded cache (dilated) reads a prompt
// of any length, and a prompt after --load-cache is read whole; otherwise a prompt is cut to the
// context (the two functions below).
static bool every_layer_cache_bounded(const GPTConfig& cfg) {
    for (int l = 0; l < cfg.n_layer; l++)
        if (kv_cache_rows(cfg.attn(l)) < 0) return false;
    return true;
}
static bool reads_whole_prompt(const GPTConfig& cfg, const InferFlags& f) {
    return every_layer_cache_bounded(cfg) || !f.load_cache.empty();
}

// The context keeps its last --ctx - --max-new tokens (at least one), less the longest batch
// prompt, which follows it in the same window.
static void cut_prompt_to_context(std::vector<int>& ids, const GPTConfig& cfg, const InferFlags& f, int ctx, size_t longest) {
    const long long room = std::max<long long>(1, ctx - f.max_new - (long long)longest);
    if (reads_whole_prompt(cfg, f) || (long long)ids.size() <= room) return;
    std::fprintf(stderr, "note: the prompt's %zu tokens are cut to its last %lld (--ctx %d - --max-new %d): this model's "
                 "dense layers keep every row\n", ids.size(), room, ctx, f.max_new);
    ids.erase(ids.begin(), ids.end() - room);
}

// Each --prompts-file prompt is cut the same way, before the context: to its last --ctx -
// --max-new - 1 tokens (at least one), the 1 left for the context it follows (BOS at least), so
// that a long line costs its tokenizing and a window's decoding, not a decode step per token
// against an ever longer cache (which made a prompt's cost grow with its length squared).
static void cut_batch_prompts_to_context(std::vector<std::vector<int>>& batch, const GPTConfig& cfg, const InferFlags& f,
                                         int ctx) {
    const long long room = std::max<long long>(1, (long long)ctx - f.max_new - 1);
    if (reads_whole_prompt(cfg, f)) return;
    int cut = 0;
    for (std::vector<int>& p : batch)
        if ((long long)p.size() > room) p.erase(p.begin(), p.end() - room), cut++;
    if (cut)
        std::fprintf(stderr, "note: %d of the --prompts-file prompts are cut to their last %lld tokens (--ctx %d - --max-new "
                     "%d - 1 for the context before them): this model's dense layers keep every row\n", cut, room, ctx, f.max_new);
}

// The KV cache for `total` tokens and the rows a prefill chunk unpacks into, in bytes.
struct CacheBytes {
    double cache, unpack;
};

// A batch holds its B sequences and, while it is copied, the context's; only the context's
// prefill unpacks rows. On the GPU a cache that would not fit fails here, before the prefill.
static CacheBytes cache_bytes_that_fit(const GPTConfig& cfg, const InferPlan& plan, long long total, int B) {
    const size_t elem = kv_elem_bytes(plan.dev);
    const CacheBytes b{kv_cache_bytes(cfg, total, B > 1 ? B + 1 : 1, elem), kv_unpack_bytes(cfg, 1, plan.chunk, elem)};
    if (plan.dev != Device::Cuda) return b;
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (b.cache + b.unpack > 0.9 * free_b) {
        const double per_token = kv_cache_bytes(cfg, 2, 1, 2) - kv_cache_bytes(cfg, 1, 1, 2);
        fatal("out of GPU memory: a KV cache for %lld tokens needs %.2f GiB but %.2f GiB are free: the longest context that "
              "fits is about %.0f tokens (a shorter --prompt-file, or --ctx)", total, (b.cache + b.unpack) / 1073741824.0,
              free_b / 1073741824.0, per_token > 0 ? (0.9 * free_b - b.unpack) / per_token : 0.0);
    }
    return b;
}

// Prefills ids into the cache, then streams up to max_new sampled tokens as text. Once
// prefilled: the prefill's time (when it took chunks) and --save-cache.
static void prefill_and_stream(IncrementalModel& cache, std::vector<int>& ids, int max_new, const InferFlags& f,
                               const InferPlan& plan, const LoadedModel& m, const std::string& fingerprint,
                               Sampler& sampler, StreamDecoder& stream) {
    const auto t0 = std::chrono::steady_clock::now();
    generate_cached(cache, m.ck.cfg.vocab_size, ids, 0, max_new, sampler, m.tok.eos_id(),
                    [&](int id) {
                        std::fputs(stream.push(id).c_str(), stdout);
                        std::fflush(stdout);
                    },
                    [&] {
                        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                        if ((long long)ids.size() > plan.chunk) std::fprintf(stderr, "prefilled %zu tokens in %.2f s\n", ids.size(), s);
                        if (!f.save_cache.empty()) {
                            save_kv_cache(f.save_cache, cache, m.ck.cfg, fingerprint);
                            std::fprintf(stderr, "saved the KV cache of %lld tokens to %s\n", cache.position(), f.save_cache.c_str());
                        }
                    });
}

// The batch: the context's cache copied into every sequence (then freed), all prompts continued
// at once, each printed after its prompt.
static void decode_batch(ModelBackend& model, std::unique_ptr<IncrementalModel> context, long long total, const InferFlags& f,
                         const LoadedModel& m, const std::vector<std::string>& prompts,
                         const std::vector<std::vector<int>>& batch_ids, Sampler& sampler) {
    const int B = (int)batch_ids.size();
    std::unique_ptr<IncrementalModel> batch = make_kv_cache(model, B, 1);  // it only decodes: chunks of one token
    if (auto* gpu_batch = dynamic_cast<KVCacheCuda*>(batch.get())) gpu_batch->reserve(total);
    batch->replicate(*context);
    const long long context_tokens = context->position();
    context.reset();
    std::vector<std::vector<int>> made(B);
    const auto t1 = std::chrono::steady_clock::now();
    const long long steps = generate_batch(*batch, m.ck.cfg.vocab_size, batch_ids, f.max_new, sampler, m.tok.eos_id(),
                                           [&](int b, int id) { made[b].push_back(id); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    long long tokens = 0;
    for (int b = 0; b < B; b++) {
        tokens += (long long)made[b].size();
        StreamDecoder text(m.tok);  // primed with the prompt, so the continuation's first piece keeps its space
        text.prime(batch_ids[b]);
        std::string cont;
        for (int id : made[b]) cont += text.push(id);
        std::printf("=== %d ===\n%s%s\n", b + 1, prompts[b].c_str(), (cont + text.flush()).c_str());
    }
    std::fprintf(stderr, "decoded %d prompts at once after %lld tokens of context: %lld steps, %lld new tokens in %.2f s (%.1f tokens/s)\n",
                 B, context_tokens, steps, tokens, secs, tokens / secs);
}

// --prompt-file's text. A model that keeps only the last --ctx tokens of a prompt
// (cut_prompt_to_context) is given only the file's end: kPromptBytesPerToken bytes for each of
// ctx + kPromptTailSlack tokens, more than those tokens can take (a piece of our SentencePiece
// tokenizers is at most 16 characters of at most 4 bytes each), so its last --ctx tokens are
// those of the whole file, the slack covering the cut's first pieces: a file of many MB is not read
// and tokenized whole to keep a few tokens. The rest read it whole (up to 1 GiB).
constexpr uint64_t kPromptBytesPerToken = 64, kPromptTailSlack = 64;
static std::string read_prompt_file(const InferFlags& f, const GPTConfig& cfg, int ctx) {
    if (f.prompt_file.empty()) return "";
    if (reads_whole_prompt(cfg, f)) return read_regular_file(f.prompt_file, kMaxPromptFileBytes, "--prompt-file", kPromptFileFix);
    uint64_t size = 0;
    const int fd = open_regular_file(f.prompt_file, kMaxPromptFileBytes, "--prompt-file", kPromptFileFix, &size);
    const uint64_t want = kPromptBytesPerToken * ((uint64_t)ctx + kPromptTailSlack);
    const uint64_t from = size > want ? size - want : 0;
    std::string text(size - from, '\0');
    size_t got = 0;
    while (got < text.size()) {
        const ssize_t n = ::pread(fd, &text[got], text.size() - got, (off_t)(from + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            ::close(fd);
            fatal("--prompt-file %s: error while reading it (%s): %s", f.prompt_file.c_str(), std::strerror(e), kPromptFileFix);
        }
        if (n == 0) break;  // the file shrank meanwhile: its end is what there is
        got += (size_t)n;
    }
    ::close(fd);
    text.resize(got);
    if (from == 0) return text;
    size_t start = 0;  // the cut's first character whole: skip UTF-8 continuation bytes
    while (start < text.size() && start < 3 && ((unsigned char)text[start] & 0xC0) == 0x80) start++;
    std::fprintf(stderr, "note: --prompt-file %s: read its last %llu of %llu bytes (this model keeps the last --ctx %d tokens)\n",
                 f.prompt_file.c_str(), (unsigned long long)(text.size() - start), (unsigned long long)size, ctx);
    return text.substr(start);
}

static int generate_text(const InferFlags& f, const InferPlan& plan, const LoadedModel& m, const InferInputs& in) {
    std::unique_ptr<ModelBackend> model = make_forward_model(m, plan);
    std::vector<int> ids = encode_context(f, m.tok, read_prompt_file(f, m.ck.cfg, plan.ctx));
    Sampler sampler(SamplerConfig{f.temperature, f.top_k, f.top_p, (uint64_t)f.seed});
    StreamDecoder stream(m.tok);
    stream.prime(std::vector<int>(ids.begin() + (f.load_cache.empty() ? 1 : 0), ids.end()));  // the prompt is printed as typed
    std::fputs(f.prompt.c_str(), stdout);
    std::vector<std::vector<int>> batch_ids = encode_batch_prompts(m.tok, in.batch_prompts);
    cut_batch_prompts_to_context(batch_ids, m.ck.cfg, f, plan.ctx);
    size_t longest = 0;
    for (const std::vector<int>& p : batch_ids) longest = std::max(longest, p.size());
    cut_prompt_to_context(ids, m.ck.cfg, f, plan.ctx, longest);
    std::unique_ptr<IncrementalModel> cache = make_kv_cache(*model, 1, plan.chunk);
    const std::string fingerprint = weights_fingerprint(m.ck.params);
    if (!f.load_cache.empty())  // a model whose layers keep every row reads at most --ctx positions
        load_kv_cache(f.load_cache, *cache, m.ck.cfg, fingerprint, 1, every_layer_cache_bounded(m.ck.cfg) ? kMaxSeqLen : plan.ctx);
    std::fprintf(stderr, "loaded %s: %d layers, width %d, %.2fM parameters, context %d, on %s\n", m.path.c_str(),
                 m.ck.cfg.n_layer, m.ck.cfg.n_embd, model->num_params() / 1e6, plan.ctx, model->name().c_str());
    if (!f.load_cache.empty())
        std::fprintf(stderr, "loaded a KV cache of %lld tokens from %s\n", cache->position(), f.load_cache.c_str());
    const long long total = cache->position() + (long long)ids.size() + (long long)longest + f.max_new;
    const CacheBytes bytes = cache_bytes_that_fit(m.ck.cfg, plan, total, batch_ids.empty() ? 1 : (int)batch_ids.size());
    if ((long long)ids.size() > plan.chunk)
        std::fprintf(stderr, "prefill: %zu tokens in chunks of %d; the KV cache will hold %.3f GiB (+ %.3f GiB of rows that chunks unpack into)\n",
                     ids.size(), plan.chunk, bytes.cache / 1073741824.0, bytes.unpack / 1073741824.0);
    if (ids.empty() && f.load_cache.empty()) fatal("nothing to continue: give --prompt or --prompt-file");
    if (auto* gpu_cache = dynamic_cast<KVCacheCuda*>(cache.get())) gpu_cache->reserve(total);
    prefill_and_stream(*cache, ids, batch_ids.empty() ? f.max_new : 0, f, plan, m, fingerprint, sampler, stream);
    if (!batch_ids.empty()) {
        decode_batch(*model, std::move(cache), total, f, m, in.batch_prompts, batch_ids, sampler);
        return 0;
    }
    std::fputs(stream.flush().c_str(), stdout);
    std::fputc('\n', stdout);
    return 0;
}

// ---- --logits-out --------------------------------------------------------------------------

// The logits of every position of the prompt, BOS first, prefilled through the KV cache in
// chunks as generation prefills it, the whole prompt whatever --ctx: the model's own numbers for
// a reader of the checkpoint to compare with (scripts/reference_model.py).
constexpr double kMaxLogitsOut = 1 << 28;  // 1 GiB of float32
static int write_prompt_logits(const InferFlags& f, const InferPlan& plan, const LoadedModel& m) {
    const std::string text =
        f.prompt_file.empty() ? "" : read_regular_file(f.prompt_file, kMaxPromptFileBytes, "--prompt-file", kPromptFileFix);
    const std::vector<int> ids = encode_context(f, m.tok, text);
    const int V = m.ck.cfg.vocab_size, T = (int)ids.size();
    if ((double)T * V > kMaxLogitsOut)
        fatal("--logits-out: the prompt's %d tokens times the vocabulary of %d are more than 2^28 logits: give a shorter prompt", T, V);
    std::unique_ptr<ModelBackend> model = make_forward_model(m, plan);
    std::unique_ptr<IncrementalModel> cache = make_kv_cache(*model, 1, plan.chunk);
    if (auto* gpu_cache = dynamic_cast<KVCacheCuda*>(cache.get())) gpu_cache->reserve(T);
    std::vector<float> logits((size_t)T * V);
    for (int at = 0; at < T;) {
        const int n = std::min(cache->max_chunk(), T - at);
        cache->append(ids.data() + at, n);
        for (int i = 0; i < n; i++) cache->logits(logits.data() + (size_t)(at + i) * V, 0, i);
        at += n;
    }
    constexpr SafetensorsRole kLogitsRole{"logits file", "run infer --logits-out again", "--logits-out", "check the path"};
    write_safetensors(f.logits_out, {{"tokens", {T}, ids.data(), "I32"}, {"logits", {T, V}, logits.data()}},
                      {{"format", "longnet-gpt-logits/1"}, {"checkpoint", m.path}}, kLogitsRole);
    std::fprintf(stderr, "wrote the logits of %d positions (vocabulary %d) of %s on %s to %s\n", T, V, m.path.c_str(),
                 model->name().c_str(), f.logits_out.c_str());
    return 0;
}

// ---- main ---------------------------------------------------------------------------------

// Every file infer writes, checked before any input is read or model loaded, so that a wrong
// output path fails at once and never replaces an input (a checkpoint, a corpus, a run's
// metrics.csv): each must be absent, empty or an earlier output of the same kind, in a writable
// directory. --save-cache may overwrite an older KV cache, also the --load-cache file itself:
// that cache is read in full before the new one is written over it.
static void check_output_paths(const InferFlags& f) {
    check_output_path(f.save_cache, OutputKind::KvCache, "--save-cache");
    check_output_path(f.per_position, OutputKind::PositionCsv, "--per-position");
    check_output_path(f.logits_out, OutputKind::Safetensors, "--logits-out");
    check_output_not_input(f.logits_out, "--logits-out", {{"--checkpoint", f.checkpoint}, {"--prompt-file", f.prompt_file}});
    if (!f.tasks_out.empty()) {
        check_output_prefix(f.tasks_out, "--tasks-out");
        check_output_path(f.tasks_out + ".csv", OutputKind::TaskReportCsv, "--tasks-out");
        check_output_path(f.tasks_out + "_items.csv", OutputKind::TaskItemsCsv, "--tasks-out");
    }
    check_copy_loss_outputs(f.copy_out, "--copy-out");
    if (f.copy_attn && !f.copy_out.empty()) check_copy_loss_output(f.copy_out + "_attn.csv", kCopyAttentionCsvHeader, "--copy-out");
    if (!f.copy_out.empty()) check_output_not_input(f.copy_out + ".csv", "--copy-out", {{"--copy-loss", f.copy_loss}});
}

static int main_body(int argc, char** argv) {
    InferFlags f = parse_flags(argc, argv);
    validate_flags(f);
    check_output_paths(f);
    // One writer per output: PREFIX.longnet-lock beside --tasks-out's and --copy-out's CSVs,
    // FILE.longnet-lock beside the others; a second run writing the same file is refused naming the holder.
    OutputLock tasks_out_lock, copy_out_lock, save_cache_lock, per_position_lock, logits_out_lock;
    if (!f.tasks_out.empty()) tasks_out_lock.acquire(f.tasks_out, "--tasks-out");
    if (!f.copy_out.empty()) copy_out_lock.acquire(f.copy_out, "--copy-out");
    if (!f.save_cache.empty()) save_cache_lock.acquire(f.save_cache, "--save-cache");
    if (!f.per_position.empty()) per_position_lock.acquire(f.per_position, "--per-position");
    if (!f.logits_out.empty()) logits_out_lock.acquire(f.logits_out, "--logits-out");
    const Device dev = resolve_device(f.device);
    const AttnBackend attn = parse_attention_backend(f.attention, /*doc_mask=*/false);
    const InferInputs in = read_inputs(f);
    LoadedModel m = load_model(f.checkpoint);
    apply_logn_attn(f, m);
    if (m.ck.cfg.pointer && (!f.save_cache.empty() || !f.load_cache.empty())) fatal("%s", kPointerCacheFileError);
    const InferPlan plan = make_plan(f, dev, attn, m);
    if (!f.tasks.empty()) return score_task_file(f, plan, m, in.task_items);
    if (!f.copy_loss.empty()) return score_copy_loss(f, plan, m);
    if (!f.ppl_file.empty()) return score_perplexity(f, plan, m, in.ppl_text);
    if (!f.logits_out.empty()) return write_prompt_logits(f, plan, m);
    return generate_text(f, plan, m, in);
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
