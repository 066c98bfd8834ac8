// Quote items: does a model read the text in its context, not only planted needles?
//
// An item's context is a stretch of a haystack (a book, a source tree, held-out documents) that
// starts at a line start; the question is the first part of one of its lines, taken from the
// stated depth (depth 0: the first eligible line, 1: the last whole one); the answer is the next
// few words of that line as written (TaskSpec::answer_words: up to that many, two by default,
// fewer where the line ends first; more words leave a guess from style less to go on). The
// question is long enough to occur once in the context (as text, anywhere), so the context
// determines the answer: a model that reads copies it.
//
// Each quote item comes with its control (task "quote-control"): the same context with the
// quoted line (and its newline) taken out, and the same question and answer. Nothing in the
// control's context says how the line goes on, so its score is what a model guesses from style
// and grammar alone; a quote score is worth only what it stands above its control. The report
// (eval/task_report.h) prints any task T beside a task "T-control" found in the same file.
//
// Lengths are exact as for the needle tasks (data/tasks.h): BOS, the context (M haystack tokens),
// '\n', the question make `length` tokens, checked by encoding the whole prompt once more. The
// control is shorter by the removed line; its `length` stays the item's, the column it is
// reported in.
#pragma once
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/task_file.h"
#include "data/tasks.h"
#include "data/tokenizer.h"

namespace quote_detail {
// A line may be quoted when it has this many words at least (the question takes about half, the
// answer the next few) and is not so long that a question from it would be a paragraph.
constexpr int kMinWords = 5;
constexpr int kMaxLineTokens = 256;
constexpr int kMinQuestionWords = 3, kMaxQuestionWords = 12;
constexpr size_t kMaxAnswerChars = 64;

struct Word {
    size_t begin, end;  // byte offsets in the line
};
inline std::vector<Word> split_words(const std::string& line) {
    std::vector<Word> w;
    for (size_t i = 0; i < line.size();) {
        while (i < line.size() && std::isspace((unsigned char)line[i])) i++;
        if (i == line.size()) break;
        const size_t b = i;
        while (i < line.size() && !std::isspace((unsigned char)line[i])) i++;
        w.push_back({b, i});
    }
    return w;
}

// How many times `needle` occurs in `text` (overlaps counted), stopping at `stop`.
inline int count_occurrences(const std::string& text, const std::string& needle, int stop) {
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos && n < stop; at = text.find(needle, at + 1)) n++;
    return n;
}

// The question (the line up to the end of word n-1) and answer (word n, and the words after it
// that single spaces join, up to answer_words in all) of a line, or false when no cut of it works:
// the question must occur once in the context, and be followed by exactly one space (the scorer
// removes leading spaces only); the answer holds a letter or a digit.
inline bool cut_line(const std::string& line, const std::string& context, std::string& question, std::string& answer,
                     int answer_words = 2) {
    const std::vector<Word> w = split_words(line);
    if ((int)w.size() < kMinWords) return false;
    const int first = std::clamp((int)w.size() / 2, kMinQuestionWords, kMaxQuestionWords);
    for (int n = first; n <= (int)w.size() - 1; n++) {
        if (w[n].begin != w[n - 1].end + 1 || line[w[n - 1].end] != ' ') continue;
        const std::string q = line.substr(0, w[n - 1].end);
        if (count_occurrences(context, q, 2) != 1) continue;
        int last = n;
        while (last - n + 1 < answer_words && last + 1 < (int)w.size() && w[last + 1].begin == w[last].end + 1 && line[w[last].end] == ' ')
            last++;
        const std::string a = line.substr(w[n].begin, w[last].end - w[n].begin);
        if (a.size() > kMaxAnswerChars) return false;
        // An answer of punctuation alone ("{", "*/") is guessed from the code's shape, not read.
        if (std::none_of(a.begin(), a.end(), [](char ch) { return std::isalnum((unsigned char)ch); })) continue;
        // A control character (an ESC in source text, say) is not in a task file's answer (data/task_file.h).
        if (task_control_char(a) != std::string::npos) continue;
        question = q, answer = a;
        return true;
    }
    return false;
}

// The lines of a context of tokens: [begin, end) token spans between newline tokens, and each
// line's text; only lines ended by a newline inside the context are whole.
struct ContextLine {
    long long begin, end;  // tokens of the context; end is the newline's index
    std::string text;
};
}  // namespace quote_detail

// The quote item of one spec and its control, in that order. Deterministic in spec.seed.
inline std::vector<TaskItem> make_quote_items(const TaskSpec& spec, const Haystack& hay, const Tokenizer& tok, const PieceKinds& k) {
    using namespace quote_detail;
    SplitMix64 rng(spec.seed);
    const long long n_hay = (long long)hay.tokens.size();
    long long question_tokens = 12;  // '\n' and the question: a guess, corrected below
    if (spec.length < 64) fatal("--lengths %lld is too short for a quote item (at least 64 tokens)", spec.length);
    if (spec.length - 2 - question_tokens > n_hay)
        fatal("--haystack %s holds %lld tokens, fewer than a %lld-token quote item needs: give a larger haystack (more documents) "
              "or lower --lengths", hay.source.c_str(), n_hay, spec.length);
    for (int attempt = 0; attempt < 256; attempt++) {
        long long M = spec.length - 1 - question_tokens;
        const long long room = n_hay - M;
        if (room < 0) break;
        // A start at a line start (or the haystack's first token) where the end can be cut too.
        long long s = (long long)rng.below((uint64_t)room + 1), tries = 0;
        auto starts_line = [&](long long p) { return p == 0 || hay.tokens[(size_t)p - 1] == k.newline; };
        while (!(starts_line(s) && hay.cut_ok[(size_t)(s + M)]) && tries++ <= room) s = s == room ? 0 : s + 1;
        if (tries > room) break;
        // The context, the question and its length may disagree for a few rounds: the question's
        // tokens fix M, and M the context's end. A line inside the context keeps its question.
        for (int round = 0; round < 6; round++) {
            const std::vector<int> ctx(hay.tokens.begin() + s, hay.tokens.begin() + s + M);
            const std::string text = tok.decode(ctx);
            std::vector<ContextLine> lines;
            long long b = 0;
            size_t tb = 0;
            for (long long i = 0; i < M; i++) {
                if (ctx[(size_t)i] != k.newline) continue;
                const size_t te = text.find('\n', tb);
                if (te == std::string::npos) break;
                lines.push_back({b, i, text.substr(tb, te - tb)});
                b = i + 1, tb = te + 1;
            }
            if ((long long)std::count(text.begin(), text.end(), '\n') != (long long)std::count(ctx.begin(), ctx.end(), k.newline))
                fatal("the tokenizer %s decodes a newline inside another piece: use a tokenizer made by data_tool prepare", tok.source().c_str());
            // The line at the depth: the first eligible line starting at or after depth x M, else the
            // last eligible one (depth 1, or a tail without eligible lines).
            const double target = spec.depth * (double)M;
            std::string question, answer;
            long long pick = -1;
            auto eligible = [&](const ContextLine& l) {
                return l.end - l.begin <= kMaxLineTokens && cut_line(l.text, text, question, answer, spec.answer_words);
            };
            for (size_t i = 0; i < lines.size() && pick < 0; i++)
                if ((double)lines[i].begin >= target && eligible(lines[i])) pick = (long long)i;
            for (long long i = (long long)lines.size() - 1; i >= 0 && pick < 0; i--)
                if ((double)lines[(size_t)i].begin < target && eligible(lines[(size_t)i])) pick = i;
            if (pick < 0) break;  // no quotable line here: another start
            const std::vector<int> qids = tok.encode(question);
            const long long want_q = 1 + (long long)qids.size();
            if (want_q != question_tokens) {
                question_tokens = want_q;
                M = spec.length - 1 - question_tokens;
                if (M < 1 || s + M > n_hay || !hay.cut_ok[(size_t)(s + M)]) break;
                continue;
            }
            const ContextLine& line = lines[(size_t)pick];
            TaskItem it;
            it.task = "quote";
            it.context = text;
            it.question = question;
            it.answer = answer;
            it.length = spec.length;
            it.depth = spec.depth;
            it.needle_token = 1 + line.begin;
            // The whole prompt once more: a cut that re-encodes otherwise is another start.
            std::vector<int> want{tok.bos_id()};
            want.insert(want.end(), ctx.begin(), ctx.end());
            want.push_back(k.newline);
            want.insert(want.end(), qids.begin(), qids.end());
            std::vector<int> got = tok.encode(task_prompt_text(it));
            got.insert(got.begin(), tok.bos_id());
            if (got != want || (long long)want.size() != spec.length) break;
            TaskItem control = it;
            control.task = "quote-control";
            control.needle_token = -1;
            size_t tb0 = 0;  // the line's text offset: after its index's newlines
            for (long long i = 0; i < pick; i++) tb0 = text.find('\n', tb0) + 1;
            control.context = text.substr(0, tb0) + text.substr(tb0 + line.text.size() + 1);
            return {it, control};
        }
    }
    fatal("--haystack %s: found no line to quote in 256 stretches of %lld tokens (a quotable line has at least %d words, at most %d "
          "tokens, and a first part that occurs once): give a haystack of text with such lines", hay.source.c_str(), spec.length,
          kMinWords, kMaxLineTokens);
}
