// Scoring retrieval items (data/task_file.h) through a KV cache (infer --tasks): each item's
// prompt (BOS, context, '\n', question) is prefilled and continued greedily; it is correct when
// the continuation, leading spaces removed, starts with the answer.
//
// What is batched: items whose contexts have the same number of tokens are prefilled together,
// B sequences of one cache in chunks (a context shared by several items, as multi-query items
// share theirs, is prefilled once); then every item's question is read and its answer decoded
// in lock-step, one sequence per item (IncrementalModel::gather copies a context to each of its
// items). Items of different lengths share nothing. The report of the outcomes (table, CSVs) is
// eval/task_report.h.
#pragma once
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/task_file.h"
#include "data/tokenizer.h"
#include "eval/task_outcome.h"
#include "model/generate.h"
#include "model/gpt_config.h"
#include "model/kv_cache.h"
#include "model/sampler.h"

// A task file's `length` may be as long as any context a model reads (data/task_file.h).
static_assert(kMaxTaskLength == kMaxSeqLen, "kMaxTaskLength is the longest context a model reads");

struct TaskEvalOptions {
    long long ctx = 0;      // the longest prompt a model reads (tokens)
    bool truncate = false;  // a longer prompt is read in its last ctx tokens (else it is an error)
    std::string path;       // the task file, for messages
};

// An item as tokens: what is prefilled (the context) and what is read then (the question).
struct TaskPrompt {
    std::vector<int> context, question;
    int context_group = 0;  // items with the same context tokens share one
};

// The prompts of all items, checked against opt.ctx. Encoding is the slow part for long contexts
// (seconds per million tokens): each prompt is encoded once, whole, and items in parallel.
inline std::vector<TaskPrompt> tokenize_tasks(const std::vector<TaskItem>& items, const Tokenizer& tok, const TaskEvalOptions& opt) {
    std::vector<TaskPrompt> out(items.size());
    std::vector<std::string> errors(items.size());
#pragma omp parallel for schedule(dynamic)
    for (long long i = 0; i < (long long)items.size(); i++) {
        try {
            // The whole prompt's tokens, split where the question's own tokens ("\n" + question)
            // begin; a tokenizer that merges across the newline splits them otherwise, and then
            // only the last token is read as the question.
            TaskPrompt& p = out[i];
            std::vector<int> whole = tok.encode(task_prompt_text(items[i]));
            whole.insert(whole.begin(), tok.bos_id());
            const std::vector<int> q = tok.encode("\n" + items[i].question);
            const size_t split = q.size() < whole.size() && std::equal(q.begin(), q.end(), whole.end() - (long)q.size())
                                     ? whole.size() - q.size() : whole.size() - 1;
            p.question.assign(whole.begin() + (long)split, whole.end());
            whole.resize(split);
            p.context = std::move(whole);
            const long long n = (long long)(p.context.size() + p.question.size());
            // `length` is the column the item is reported in: a prompt far longer than it would
            // be scored as a shorter item (data/task_file.h states the rule).
            if (n > items[i].length + task_length_slack(items[i].length))
                fatal("%s line %d: the prompt is %lld tokens, more than its \"length\" %lld allows (at most length + length/4 + 32 = "
                      "%lld): give the item's length in tokens, %lld",
                      opt.path.c_str(), items[i].line, n, items[i].length, items[i].length + task_length_slack(items[i].length), n);
            if (n > opt.ctx) {
                if (!opt.truncate)
                    fatal("%s line %d: the prompt is %lld tokens, longer than the model reads (--ctx %lld): give --ctx %lld or more "
                          "to read it whole (past the window the model was trained on), or --truncate to read its last --ctx tokens",
                          opt.path.c_str(), items[i].line, n, opt.ctx, n);
                if ((long long)p.question.size() >= opt.ctx)
                    fatal("%s line %d: the question alone is %zu tokens, more than --ctx %lld", opt.path.c_str(), items[i].line,
                          p.question.size(), opt.ctx);
                p.context.erase(p.context.begin(), p.context.end() - (opt.ctx - (long long)p.question.size()));
            }
        } catch (const FatalError& e) {
            errors[i] = e.what();
        }
    }
    for (const std::string& e : errors)
        if (!e.empty()) fatal("%s", e.c_str());
    // Contexts shared by several items (multi-query): one group each, found by their tokens.
    std::map<std::vector<int>, int> seen;
    for (TaskPrompt& p : out) p.context_group = seen.emplace(p.context, (int)seen.size()).first->second;
    return out;
}

// make_cache(B, chunk) gives a fresh cache of B sequences; max_batch(tokens) says how many
// sequences of that many tokens fit at once (>= 1, or it fails naming what does not fit).
// progress(done, total, correct) after each batch (so that a run stopped by a time limit has
// said how it stood). Greedy decoding; outcomes in item order.
inline std::vector<TaskOutcome> run_tasks(const std::vector<TaskItem>& items, const std::vector<TaskPrompt>& prompts,
                                          const Tokenizer& tok, int vocab, int chunk,
                                          const std::function<std::unique_ptr<IncrementalModel>(int, int)>& make_cache,
                                          const std::function<int(long long)>& max_batch,
                                          const std::function<void(size_t, size_t, size_t)>& progress) {
    std::vector<TaskOutcome> out(items.size());
    // Items by context length, then by context: a batch is a run of this order.
    std::vector<int> order(items.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = (int)i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        const size_t la = prompts[a].context.size(), lb = prompts[b].context.size();
        return la != lb ? la < lb : prompts[a].context_group < prompts[b].context_group;
    });
    Sampler greedy(SamplerConfig{0.0f, 0, 1.0f, 1});
    // Tokens an item decodes: its answer's (with the space before it) and two more, so that the
    // continuation holds the answer whatever pieces the model writes it in.
    std::vector<int> room(items.size());
    for (size_t i = 0; i < items.size(); i++) room[i] = (int)tok.encode(" " + items[i].answer).size() + 2;
    size_t done = 0, correct = 0;
    for (size_t at = 0; at < order.size();) {
        const long long len = (long long)prompts[order[at]].context.size();
        long long longest = len;
        // The batch: items of this context length, up to max_batch sequences of contexts and of items.
        std::vector<int> members, contexts;  // item indices; one item index per distinct context
        for (size_t j = at; j < order.size() && (long long)prompts[order[j]].context.size() == len; j++) {
            const int i = order[j];
            const bool new_context = contexts.empty() || prompts[contexts.back()].context_group != prompts[i].context_group;
            const long long need = len + (long long)prompts[i].question.size() + room[i];
            // Sequences held at once: the items', and the contexts' too while they are copied.
            const int q = (int)members.size() + 1, u = (int)contexts.size() + (new_context ? 1 : 0);
            if ((q == u ? q : q + u) > max_batch(std::max(longest, need)) && !members.empty()) break;
            if (new_context) contexts.push_back(i);
            members.push_back(i);
            longest = std::max(longest, need);
        }
        if (members.empty()) fatal("internal: run_tasks made an empty batch");
        const int U = (int)contexts.size(), Q = (int)members.size();
        std::unique_ptr<IncrementalModel> cache = make_cache(U, chunk);
        cache->reserve(longest);
        std::vector<int> tokens;
        for (long long from = 0; from < len;) {  // prefill the contexts together, chunk by chunk
            const int n = (int)std::min<long long>(chunk, len - from);
            tokens.resize((size_t)U * n);
            for (int u = 0; u < U; u++)
                std::copy(prompts[contexts[u]].context.begin() + from, prompts[contexts[u]].context.begin() + from + n,
                          tokens.begin() + (size_t)u * n);
            cache->append(tokens.data(), n);
            from += n;
        }
        // One sequence per item: the prefill cache itself when every item has its own context.
        std::unique_ptr<IncrementalModel> decode;
        if (Q != U) {
            std::vector<int> from(Q);
            for (int q = 0, u = -1; q < Q; q++) {
                if (u < 0 || prompts[contexts[u]].context_group != prompts[members[q]].context_group) u++;
                from[q] = u;
            }
            decode = make_cache(Q, 1);
            decode->reserve(longest);
            decode->gather(*cache, from);
            cache.reset();
        }
        IncrementalModel& m = decode ? *decode : *cache;
        // Each item decodes its own room of tokens, whatever else is in its batch, so its output
        // does not depend on the batch.
        std::vector<std::vector<int>> questions;
        std::vector<int> want(Q);
        int max_new = 1;
        for (int q = 0; q < Q; q++) {
            questions.push_back(prompts[members[q]].question);
            want[q] = room[members[q]];
            max_new = std::max(max_new, want[q]);
        }
        std::vector<std::vector<int>> made(Q);
        generate_batch(m, vocab, questions, max_new, greedy, tok.eos_id(), [&](int b, int id) {
            if ((int)made[b].size() < want[b]) made[b].push_back(id);
        });
        for (int q = 0; q < Q; q++) {
            const int i = members[q];
            StreamDecoder text(tok);  // primed with the question, so the answer's first piece keeps its space
            text.prime(prompts[i].question);
            for (int id : made[q]) out[i].output += text.push(id);
            out[i].output += text.flush();
            out[i].correct = answer_matches(out[i].output, items[i].answer);
            out[i].tokens = len + (long long)prompts[i].question.size();
            correct += out[i].correct;
        }
        at += members.size();
        done += members.size();
        if (progress) progress(done, items.size(), correct);
    }
    return out;
}
